//! **The service's names** — the DNS-SD service type, the default port and
//! the naming rules that the agent announces under and the coordinator
//! browses for, each written once (RFC 6763 §4 and §7).
//!
//! ```
//! use rlx_proto::service::{parse_domain, service_name};
//! let zone = parse_domain("rlx.example.org").unwrap();
//! assert_eq!(service_name(&zone).to_string(), "_rlx._tcp.rlx.example.org.");
//! ```
//!
//! Unicast DNS-SD registrations (`rlx-agent --register`) add one TXT key to
//! schema v1, the lease expiry [`EXPIRES_KEY`]; its rules are here too,
//! because the agent writes it and both the agent's zone sweep and the
//! coordinator's browse read it.

use hickory_proto::rr::Name;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Expands to the service type's text, `_rlx._tcp`: the one place the
/// literal is written, so the mDNS and unicast forms cannot drift apart.
macro_rules! service_literal {
    () => {
        "_rlx._tcp"
    };
}

/// The DNS-SD service type, `<service>.<proto>` (RFC 6763 §7).
pub const SERVICE: &str = service_literal!();

/// The service type as mDNS names it (RFC 6762 §3: the `local.` domain).
pub const MDNS_SERVICE_TYPE: &str = concat!(service_literal!(), ".local.");

/// The two labels of [`SERVICE`] (`_rlx`, `_tcp`), for names under any domain.
pub const SERVICE_LABELS: [&str; 2] = split_service(SERVICE);

/// `_a._b` -> `["_a", "_b"]`, at compile time.
const fn split_service(s: &'static str) -> [&'static str; 2] {
    let b = s.as_bytes();
    let mut i = 0;
    while b[i] != b'.' {
        i += 1;
    }
    let (first, rest) = b.split_at(i);
    let (_, second) = rest.split_at(1);
    match (std::str::from_utf8(first), std::str::from_utf8(second)) {
        (Ok(a), Ok(b)) => [a, b],
        _ => panic!("the service type is ASCII"),
    }
}

/// The RLX worker's port: what the runtime dials at a node's `addr`, the
/// port the SRV record names (RFC 6763 §5: SRV says where the service is),
/// and the seed's `[discover] port` default. `rlx-agent --worker-port`,
/// `[discover] port` and `rlx-discover scan --port` default to it.
pub const DEFAULT_WORKER_PORT: u16 = 9100;

/// The agent's own port: its handshake, link measurement and the health
/// checks of `watch`, announced in TXT (`agent`, [`crate::txt::AGENT_PORT_KEY`]).
/// `rlx-agent --port`, `[discover] agent_port` and `rlx-discover scan
/// --agent-port` default to it. Chosen so that no common daemon of this
/// audience holds it: outside the Prometheus exporters' allocations (9100
/// and up, node_exporter's 9100 first), JetDirect's 9100-9102, Ceph's
/// 6789 and 6800-7300, Slurm's 6817-6819, X11's 6000-6063 and the
/// ephemeral ranges (32768 and up), neither registered with IANA nor ever
/// seen open in nmap's port-frequency table (docs/protocol.md, "Ports").
pub const DEFAULT_AGENT_PORT: u16 = 6184;

/// The standard DNS port (RFC 1035 §4.2).
pub const DNS_PORT: u16 = 53;

/// The TXT key carrying a registration's lease expiry, in seconds since the
/// Unix epoch. Not part of schema v1's caps: readers that do not know it
/// ignore it (schema v1 rule), and mDNS announcements never carry it.
pub const EXPIRES_KEY: &str = "expires";

/// How far a coordinator's clock may be behind the agent's before a live
/// registration looks expired. NTP keeps hosts within milliseconds; TSIG
/// itself already needs the agent within its fudge (300 s) of the server.
pub const CLOCK_SKEW: Duration = Duration::from_secs(10);

/// Parses a domain name for `dns_sd` or `--register`: ASCII labels of at
/// most 63 bytes, at most 253 bytes in all, made fully qualified.
pub fn parse_domain(s: &str) -> Result<Name, String> {
    let t = s.trim().trim_end_matches('.');
    if t.is_empty() {
        return Err("the domain is empty; write it like rlx.example.org".into());
    }
    if !t.is_ascii() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "domain {s:?} must be ASCII without spaces (an IDN goes in its xn-- form)"
        ));
    }
    let mut n = Name::from_ascii(t).map_err(|e| format!("domain {s:?} is not a DNS name: {e}"))?;
    if n.iter().any(|l| l.is_empty()) {
        return Err(format!("domain {s:?} has an empty label (`..`)"));
    }
    n.set_fqdn(true);
    if n.len() > 254 {
        return Err(format!("domain {s:?} is longer than 253 characters"));
    }
    Ok(n)
}

/// `_rlx._tcp.<domain>`.
pub fn service_name(domain: &Name) -> Name {
    let svc = Name::from_labels(SERVICE_LABELS).expect("static labels are valid");
    svc.append_domain(domain).expect("a valid domain fits")
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The `expires` value of TXT strings, if any (first occurrence, any case).
pub fn expires_of<S: AsRef<[u8]>>(strings: &[S]) -> Option<u64> {
    strings.iter().find_map(|s| {
        let s = std::str::from_utf8(s.as_ref()).ok()?;
        let (k, v) = s.split_once('=')?;
        k.eq_ignore_ascii_case(EXPIRES_KEY)
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// Whether a registration with lease expiry `expires` is over at `now`.
pub fn lease_over(expires: u64, now: u64) -> bool {
    expires.saturating_add(CLOCK_SKEW.as_secs()) < now
}

/// RFC 1035 §2.3.4: a DNS label (the `<host>` of `<host>.local.`) is at most
/// 63 bytes.
const MAX_LABEL_BYTES: usize = 63;

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
/// node id is unique per machine (`rlx-agent`'s `probe::node_id`), so the label
/// is unique by construction, without asking the zone first; it is also
/// stable across restarts, so a restarted agent replaces its own records.
/// The label is for machines; people read the instance name, which keeps
/// the host name as it is.
///
/// An id without hex digits (never the case for a valid id) leaves the
/// plain [`host_label`].
///
/// ```
/// use rlx_proto::service::unique_host_label;
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

/// The most digits of the counter an mDNS responder appends to a host label
/// it renames after a conflict (RFC 6762 §9): `gpu-5f0c1d` becomes
/// `gpu-5f0c1d-2`, then `-3`, ...; the vendored mdns-sd counts up only a
/// number of at most this many digits (vendor/mdns-sd/PATCHES.md §14).
pub const RENAME_COUNTER_DIGITS: usize = 3;

/// The host name a [`unique_host_label`] was made from: `label` without its
/// `-<id digits>` suffix when the suffix is the start of `node_id`, and
/// without the responder's rename counter after it (`gpu-a-5f0c1d-2`, RFC
/// 6762 §9: the agent lost a conflict for its label, which happens on a
/// link where a clone still announces an old image's name); else `label`
/// as it is (an announcer that does not follow the scheme: avahi, a
/// hand-written record, an older agent).
///
/// Why only then: a counter is stripped only when the id suffix is right
/// before it, so a host whose own name ends in `-<digits>` (`web-01`,
/// `node-7`) or looks like an id keeps its name.
///
/// ```
/// use rlx_proto::service::host_of_label;
/// assert_eq!(host_of_label("gpu-a-5f0c1d", "5f0c1d2e3a4b5c6d"), "gpu-a");
/// assert_eq!(host_of_label("gpu-a-5f0c1d-2", "5f0c1d2e3a4b5c6d"), "gpu-a");
/// assert_eq!(host_of_label("gpu-a", "5f0c1d2e3a4b5c6d"), "gpu-a");
/// ```
pub fn host_of_label<'a>(label: &'a str, node_id: &str) -> &'a str {
    if let Some(host) = strip_id_suffix(label, node_id) {
        return host;
    }
    match label.rsplit_once('-') {
        Some((unrenamed, counter)) if is_rename_counter(counter) => {
            strip_id_suffix(unrenamed, node_id).unwrap_or(label)
        }
        _ => label,
    }
}

/// `label` without its `-<id digits>` suffix, if it ends with the first
/// [`HOST_ID_HEX`] digits of `node_id`.
fn strip_id_suffix<'a>(label: &'a str, node_id: &str) -> Option<&'a str> {
    let (head, tail) = label.rsplit_once('-')?;
    let id = node_id.to_ascii_lowercase();
    (!head.is_empty()
        && tail.len() == HOST_ID_HEX.min(id.len())
        && !tail.is_empty()
        && id.starts_with(&tail.to_ascii_lowercase()))
    .then_some(head)
}

/// Whether `s` is a counter a responder's rename appends: a number from 2
/// up, of at most [`RENAME_COUNTER_DIGITS`] digits, without a leading zero.
fn is_rename_counter(s: &str) -> bool {
    (1..=RENAME_COUNTER_DIGITS).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_digit())
        && !s.starts_with('0')
        && s != "1"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_type_is_one_literal_in_its_mdns_and_unicast_forms() {
        assert_eq!(SERVICE, "_rlx._tcp");
        assert_eq!(MDNS_SERVICE_TYPE, "_rlx._tcp.local.");
        assert_eq!(SERVICE_LABELS, ["_rlx", "_tcp"]);
    }

    #[test]
    fn domains_are_checked_and_made_fully_qualified() {
        assert_eq!(
            parse_domain("lab.example.org").unwrap().to_string(),
            "lab.example.org."
        );
        assert_eq!(
            parse_domain("lab.example.org.").unwrap().to_string(),
            "lab.example.org."
        );
        assert!(parse_domain("").is_err());
        assert!(parse_domain("a..b").is_err());
        assert!(parse_domain("has space.org").is_err());
        assert!(parse_domain(&format!("{}.org", "x".repeat(64))).is_err());
        assert_eq!(
            service_name(&parse_domain("lab.test").unwrap()).to_string(),
            "_rlx._tcp.lab.test."
        );
    }

    #[test]
    fn an_expired_lease_is_recognised_with_clock_skew_allowed() {
        assert_eq!(
            expires_of(&["txtvers=1", "Expires=1700000000"]),
            Some(1_700_000_000)
        );
        assert_eq!(expires_of(&["txtvers=1"]), None);
        assert!(!lease_over(1000, 1000 + CLOCK_SKEW.as_secs()));
        assert!(lease_over(1000, 1001 + CLOCK_SKEW.as_secs()));
    }

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
    fn the_host_name_is_read_back_from_a_unique_label_and_only_from_one() {
        let id = "5f0c1d2e3a4b5c6d";
        for host in ["gpu-a", "ubuntu", "my-box-1", "rlx-agent"] {
            assert_eq!(host_of_label(&unique_host_label(host, id), id), host);
        }
        assert_eq!(
            host_of_label("gpu-a-77be00", id),
            "gpu-a-77be00",
            "another id's suffix"
        );
        assert_eq!(host_of_label("web-01", id), "web-01");
        assert_eq!(host_of_label("-5f0c1d", id), "-5f0c1d");
    }

    /// Guards against a label the responder renamed after a conflict (RFC
    /// 6762 §9, `gpu-a-5f0c1d-2`) reading back as the whole label: the
    /// sighting's host name was `gpu-a-5f0c1d-2` instead of `gpu-a`.
    #[test]
    fn a_renamed_unique_label_reads_back_to_its_host_name() {
        let id = "5f0c1d2e3a4b5c6d";
        for host in ["gpu-a", "ubuntu", "my-box-1", "node-7", "rlx-agent"] {
            let label = unique_host_label(host, id);
            for counter in ["2", "3", "10", "999"] {
                let renamed = format!("{label}-{counter}");
                assert_eq!(host_of_label(&renamed, id), host, "{renamed}");
            }
        }
        assert_eq!(host_of_label("GPU-A-5F0C1D-2", id), "GPU-A", "any case");
    }

    /// Guards against stripping too much: only a counter right after this
    /// node's id suffix is a rename; a host name ending in `-<digits>`, or
    /// one that looks like an id, keeps every part of it.
    #[test]
    fn host_names_ending_in_digits_or_looking_like_ids_are_not_stripped() {
        let id = "5f0c1d2e3a4b5c6d";
        for label in [
            "web-01",
            "node-7",
            "gpu-2",
            "rack-12-345",
            "gpu-a-77be00-2",
            "gpu-a-5f0c1d-1",
            "gpu-a-5f0c1d-02",
            "5f0c1d-2",
            "cafe-123456",
        ] {
            assert_eq!(host_of_label(label, id), label, "{label}");
        }
        // A host whose own name ends like an id keeps it: one suffix goes.
        let label = unique_host_label("cafe-5f0c1d", id);
        assert_eq!(label, "cafe-5f0c1d-5f0c1d");
        assert_eq!(host_of_label(&label, id), "cafe-5f0c1d");
        assert_eq!(host_of_label(&format!("{label}-2"), id), "cafe-5f0c1d");
        // A numeric id, as digits alone.
        let digits = "1234567890123456";
        assert_eq!(host_of_label("gpu-123456-2", digits), "gpu");
        assert_eq!(host_of_label("gpu-2", digits), "gpu-2");
    }
}
