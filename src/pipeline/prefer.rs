//! **Which address of a machine seen at several** — one deterministic rule
//! (docs/protocol.md, "Which address a machine on several networks gets"), so that `expand --write` and the runtime see the same
//! address for a dual-homed agent every day, whatever answered first.
//!
//! ```text
//! candidates (ip, shared link?, in subnet?, link speed?)
//!   ─► class: routable < link-local < loopback
//!   ─► on a link the coordinator shares, or in a configured `subnet`, first
//!   ─► faster reported link speed first (unknown speed after any known one)
//!   ─► IPv4 < global IPv6 < ULA (fc00::/7)
//!   ─► lowest address
//! ```
//!
//! Arrival order and timings never take part: they are what made the
//! address alternate from one run to the next.

use std::cmp::Reverse;
use std::net::IpAddr;

/// One address a machine was seen at, with what the rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AddrCandidate {
    /// The address.
    pub ip: IpAddr,
    /// It lies on a subnet of an interface of this host (the coordinator),
    /// so it is reached without a router.
    pub shared_link: bool,
    /// It lies in a `[discover] subnet` the user configured.
    pub in_subnet: bool,
    /// The speed of the machine's link that holds this address, Mb/s, when
    /// its caps report one ([`link_speed`]); `None` when unknown.
    pub speed_mbps: Option<u64>,
}

impl AddrCandidate {
    /// A candidate with no subnet or speed information.
    pub(crate) fn new(ip: IpAddr, shared_link: bool) -> Self {
        AddrCandidate {
            ip,
            shared_link,
            in_subnet: false,
            speed_mbps: None,
        }
    }
}

/// How reachable an address is: lower is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Routable,
    LinkLocal,
    Loopback,
}

fn class(ip: &IpAddr) -> Option<Class> {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast() => None,
        IpAddr::V4(v4) if v4.is_loopback() => Some(Class::Loopback),
        IpAddr::V4(v4) if v4.is_link_local() => Some(Class::LinkLocal),
        IpAddr::V4(_) => Some(Class::Routable),
        IpAddr::V6(v6) if v6.is_unspecified() || v6.is_multicast() => None,
        IpAddr::V6(v6) if v6.is_loopback() => Some(Class::Loopback),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(Class::LinkLocal),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => class(&IpAddr::V4(v4)),
            None => Some(Class::Routable),
        },
    }
}

/// IPv4 before global IPv6 before ULA (`fc00::/7`): an IPv4 `addr` is what
/// most configs and firewalls expect, and a ULA is the most likely to be a
/// site-local leftover.
fn family(ip: &IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 0,
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => 0,
        IpAddr::V6(v6) if (v6.segments()[0] & 0xfe00) == 0xfc00 => 2,
        IpAddr::V6(_) => 1,
    }
}

/// The index of the address to write among `cands`, by the rule (also in
/// docs/protocol.md, "Which address a machine on two networks gets"):
///
/// 1. a routable address beats a link-local one, which beats loopback: a
///    link-local address is never chosen while a routable one exists;
/// 2. an address on a link this host shares, or in a configured `subnet`,
///    beats one behind a router;
/// 3. then the faster link, when the agent's caps report link speeds (an
///    address with a known speed beats one without);
/// 4. then IPv4, then global IPv6, then ULA;
/// 5. then the lowest address.
///
/// The key is total over distinct addresses, so the result depends only on
/// the set of candidates, never on their order. `None` when no candidate is
/// a unicast address.
pub(crate) fn preferred(cands: &[AddrCandidate]) -> Option<usize> {
    cands
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let key = (
                class(&c.ip)?,
                !(c.shared_link || c.in_subnet),
                Reverse(c.speed_mbps.map(|s| s.saturating_add(1)).unwrap_or(0)),
                family(&c.ip),
                c.ip,
            );
            Some((key, i))
        })
        .min()
        .map(|(_, i)| i)
}

/// The negotiated speed, Mb/s, of the agent's link that holds `ip`, from the
/// `links` its caps report (rule 3 of [`preferred`]); `None` when the agent
/// sent no links (an older agent, `--caps-file` without them) or the system
/// does not know the speed (Wi-Fi on Linux, virtual links), so the rule is
/// then skipped for that address rather than guessed. Called where the
/// pipeline chooses among a machine's sightings
/// (`pipeline::Machine::choose_addr`); the mDNS browse's choice among the
/// addresses of one announced host (`sources::mdns::table`) happens before
/// any caps are read, so it uses rules 1, 2, 4 and 5 only, and the pipeline
/// applies the speed rule afterwards across the sightings.
pub(crate) fn link_speed(caps: &rlx_proto::caps::NodeCaps, ip: IpAddr) -> Option<u64> {
    caps.link_for(&ip.to_canonical())?.speed_mbps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(ip: &str, shared: bool) -> AddrCandidate {
        AddrCandidate::new(ip.parse().unwrap(), shared)
    }

    fn pick(cands: &[AddrCandidate]) -> String {
        cands[preferred(cands).unwrap()].ip.to_string()
    }

    #[test]
    fn the_choice_does_not_depend_on_the_order_the_addresses_arrived_in() {
        let mut cands = vec![
            c("10.1.0.7", true),
            c("192.168.5.7", true),
            c("10.0.77.2", true),
        ];
        let first = pick(&cands);
        for _ in 0..cands.len() {
            cands.rotate_left(1);
            assert_eq!(pick(&cands), first);
        }
        cands.reverse();
        assert_eq!(pick(&cands), first);
        assert_eq!(first, "10.0.77.2", "the lowest address breaks the tie");
    }

    #[test]
    fn an_address_on_a_shared_link_beats_one_behind_a_router() {
        assert_eq!(
            pick(&[c("10.0.0.1", false), c("192.168.1.9", true)]),
            "192.168.1.9"
        );
        let mut sub = c("172.16.0.4", false);
        sub.in_subnet = true;
        assert_eq!(pick(&[c("10.0.0.1", false), sub]), "172.16.0.4");
    }

    #[test]
    fn the_faster_link_wins_among_shared_links_when_speeds_are_reported() {
        let mut slow = c("10.0.0.1", true);
        slow.speed_mbps = Some(1000);
        let mut fast = c("192.168.1.9", true);
        fast.speed_mbps = Some(25_000);
        assert_eq!(pick(&[slow, fast]), "192.168.1.9");
        // A known speed beats an unknown one, even a known zero.
        let mut zero = c("192.168.1.9", true);
        zero.speed_mbps = Some(0);
        assert_eq!(pick(&[c("10.0.0.1", true), zero]), "192.168.1.9");
        // But a fast link behind a router does not beat a shared one.
        let mut far = c("10.9.9.9", false);
        far.speed_mbps = Some(100_000);
        assert_eq!(pick(&[far, slow]), "10.0.0.1");
    }

    #[test]
    fn ipv4_comes_before_global_ipv6_before_ula() {
        let v = [
            c("fd00::5", true),
            c("2001:db8::5", true),
            c("10.9.0.5", true),
        ];
        assert_eq!(pick(&v), "10.9.0.5");
        assert_eq!(pick(&v[..2]), "2001:db8::5");
    }

    #[test]
    fn a_link_local_address_is_never_chosen_while_a_routable_one_exists() {
        let v = [
            c("fe80::1", true),
            c("169.254.3.3", true),
            c("fd00::9", false),
        ];
        assert_eq!(pick(&v), "fd00::9");
        assert_eq!(
            pick(&v[..2]),
            "169.254.3.3",
            "only when nothing else is left"
        );
        assert_eq!(preferred(&[c("224.0.0.251", true)]), None);
    }

    #[test]
    fn the_speed_of_an_address_is_read_from_the_link_the_agent_reports_it_on() {
        use rlx_proto::caps::{LinkInfo, NodeCaps};
        let link = |name: &str, speed: Option<u64>, ip: &str| LinkInfo {
            name: name.into(),
            kind: "ethernet".into(),
            speed_mbps: speed,
            mtu: 1500,
            addrs: vec![ip.parse().unwrap()],
            rdma: false,
        };
        let caps = NodeCaps {
            links: vec![
                link("eth0", Some(1000), "10.0.77.2"),
                link("eth1", Some(10000), "10.185.1.2"),
                link("wlan0", None, "192.168.1.9"),
            ],
            ..Default::default()
        };
        let at = |ip: &str| link_speed(&caps, ip.parse().unwrap());
        assert_eq!(at("10.185.1.2"), Some(10000));
        assert_eq!(at("10.0.77.2"), Some(1000));
        assert_eq!(at("192.168.1.9"), None, "an unknown speed stays unknown");
        assert_eq!(at("10.9.9.9"), None, "an address on no reported link");
        assert_eq!(
            at("::ffff:10.185.1.2"),
            Some(10000),
            "a v4-mapped address is the v4 one"
        );
        let mut cands = vec![c("10.0.77.2", true), c("10.185.1.2", true)];
        for cand in &mut cands {
            cand.speed_mbps = link_speed(&caps, cand.ip);
        }
        assert_eq!(pick(&cands), "10.185.1.2", "the 10 GbE link wins");
    }
}
