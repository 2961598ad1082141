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

/// The port the agent listens on and announces unless `--port` says
/// otherwise; `[discover] port` and `rlx-discover scan --port` default to it.
pub const DEFAULT_PORT: u16 = 9100;

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
}
