//! **What this node is called on the network** — the `<host>` of
//! `<host>.local.` (and of `<host>.<zone>` in a DNS registration) and the
//! DNS-SD instance name, decided once for the mDNS announcer
//! ([`crate::announce`]) and the DNS registration ([`crate::register`]) so
//! that both name the node the same way.
//!
//! ```
//! use rlx_agent::naming::NodeNames;
//! let n = NodeNames::of("gpu-a.lab.example.com", None);
//! assert_eq!((n.instance.as_str(), n.label.as_str()), ("gpu-a", "gpu-a"));
//! ```

/// RFC 6763 §4.1.1: an instance name is at most 63 bytes of UTF-8.
pub const MAX_INSTANCE_NAME_BYTES: usize = 63;

/// RFC 1035 §2.3.4: a DNS label (the `<host>` of `<host>.local.`) is at most
/// 63 bytes.
const MAX_LABEL_BYTES: usize = 63;

/// An instance name that RFC 6763 does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance name {name:?} {why}; choose another with --name")]
pub struct NameError {
    /// The name asked for.
    pub name: String,
    /// What is wrong with it.
    pub why: String,
}

/// The names of this node: its host label and its instance name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNames {
    /// The `<host>` label ([`host_label`]).
    pub label: String,
    /// The instance name: `--name` when given, else the host name's first
    /// label as it is (spaces and all: instance names are UTF-8), else the
    /// host label.
    pub instance: String,
}

impl NodeNames {
    /// The names for `hostname` (the caps' host name; empty = ask the
    /// system) and the `--name` asked for, if any.
    pub fn of(hostname: &str, name: Option<&str>) -> NodeNames {
        let raw_host = if hostname.is_empty() {
            this_host_name()
        } else {
            hostname.to_string()
        };
        let label = host_label(&raw_host);
        let instance = match name {
            Some(name) => name.to_string(),
            None => {
                let first = raw_host.split('.').next().unwrap_or_default();
                if first.is_empty() {
                    label.clone()
                } else {
                    first.to_string()
                }
            }
        };
        NodeNames { label, instance }
    }
}

/// The `<host>` of `<host>.local.`: the first label of the host name, with
/// anything but letters, digits and `-` turned into `-` (RFC 1123 §2.1 host
/// names), cut to 63 bytes. `rlx-agent` when nothing is left.
pub fn host_label(hostname: &str) -> String {
    let first = hostname.split('.').next().unwrap_or_default();
    let mut label: String = first
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    label.truncate(MAX_LABEL_BYTES);
    let label = label.trim_matches('-');
    if label.is_empty() {
        "rlx-agent".to_string()
    } else {
        label.to_string()
    }
}

/// Hex digits of the node id appended by [`unique_host_label`]: 24 bits, so
/// that among 100 machines sharing one host name the chance that two also
/// share the suffix is about 3 in 10,000 (birthday bound, n²/2²⁵).
pub const HOST_ID_HEX: usize = 6;

/// A host label no other node has: [`host_label`] of `hostname`, a `-`, and
/// the first [`HOST_ID_HEX`] hex digits of `node_id` (`gpu-a-5f0c1d`), the
/// host part cut so that the whole stays within 63 bytes.
///
/// Why: the host label names the owner of the node's address records
/// (`<label>.<zone>.` in a DNS registration), and two machines with the
/// same short host name (`gpu-a.site1` and `gpu-a.site2`, or two clones of
/// one image) would each replace the other's `A`/`AAAA` records there. The
/// node id is unique per machine ([`crate::probe::node_id`]), so the label
/// is unique by construction, without asking the zone first; it is also
/// stable across restarts, so a restarted agent replaces its own records.
/// The label is for machines; people read the instance name, which keeps
/// the host name as it is.
///
/// An id without hex digits (never the case for a valid id) leaves the
/// plain [`host_label`].
///
/// ```
/// use rlx_agent::naming::unique_host_label;
/// assert_eq!(unique_host_label("gpu-a.lab", "5f0c1d2e3a4b5c6d"), "gpu-a-5f0c1d");
/// ```
pub fn unique_host_label(hostname: &str, node_id: &str) -> String {
    let base = host_label(hostname);
    let suffix: String = node_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(HOST_ID_HEX)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if suffix.is_empty() {
        return base;
    }
    let mut head = base;
    head.truncate(MAX_LABEL_BYTES - 1 - suffix.len());
    format!("{}-{suffix}", head.trim_end_matches('-'))
}

/// Checks an instance name against RFC 6763 §4.1.1: 1 to 63 bytes of UTF-8,
/// no control characters.
pub fn check_instance_name(name: &str) -> Result<(), NameError> {
    let why = if name.is_empty() {
        Some("is empty".to_string())
    } else if name.len() > MAX_INSTANCE_NAME_BYTES {
        Some(format!(
            "is {} bytes long; RFC 6763 §4.1.1 allows {MAX_INSTANCE_NAME_BYTES}",
            name.len()
        ))
    } else if name.chars().any(char::is_control) {
        Some("contains a control character".to_string())
    } else {
        None
    };
    match why {
        Some(why) => Err(NameError {
            name: name.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// This machine's host name, empty when the system will not say.
pub fn this_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_labels_are_the_first_dns_label_made_safe() {
        assert_eq!(host_label("gpu-a.lab.example.com"), "gpu-a");
        assert_eq!(host_label("my box_1"), "my-box-1");
        assert_eq!(host_label(""), "rlx-agent");
        assert_eq!(host_label("---"), "rlx-agent");
        assert_eq!(host_label(&"x".repeat(80)).len(), 63);
    }

    /// Guards against two machines with one short host name replacing each
    /// other's address records: the DNS host label was the host name alone.
    #[test]
    fn unique_host_labels_differ_for_one_host_name_and_two_node_ids() {
        let a = unique_host_label("gpu-a.site1.example", "5f0c1d2e3a4b5c6d");
        let b = unique_host_label("gpu-a.site2.example", "77be00112233aabb");
        assert_eq!((a.as_str(), b.as_str()), ("gpu-a-5f0c1d", "gpu-a-77be00"));
        assert_eq!(
            unique_host_label("gpu-a", "5f0c1d2e3a4b5c6d"),
            a,
            "stable for one machine"
        );
        let long = unique_host_label(&format!("{}-", "x".repeat(60)), "ABCDEF0123456789");
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.ends_with("x-abcdef"), "{long}");
        assert_eq!(
            unique_host_label("", "0011223344556677"),
            "rlx-agent-001122"
        );
        assert_eq!(unique_host_label("box", ""), "box");
    }

    #[test]
    fn instance_names_follow_rfc_6763_limits() {
        assert!(check_instance_name("gpu box (rack 3)").is_ok());
        assert!(check_instance_name(&"é".repeat(31)).is_ok()); // 62 bytes
        let long = check_instance_name(&"x".repeat(64))
            .unwrap_err()
            .to_string();
        assert!(
            long.contains("64 bytes") && long.contains("--name"),
            "{long}"
        );
        assert!(check_instance_name("").is_err());
        assert!(check_instance_name("a\nb").is_err());
    }
}
