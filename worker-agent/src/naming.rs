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

pub use rlx_proto::service::{host_label, unique_host_label, HOST_ID_HEX};

#[cfg(test)]
mod tests {
    use super::*;

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
