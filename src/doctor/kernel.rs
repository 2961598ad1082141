//! **What the kernel says about multicast on this host** — the route an
//! mDNS query to 224.0.0.251 would take, and which interfaces have joined
//! the mDNS groups, read from `/proc/net/route`, `/proc/net/igmp` and
//! `/proc/net/igmp6` (Linux). Plain parsers, tested on recorded files.

use std::net::Ipv4Addr;

/// The IPv4 mDNS group (RFC 6762 §3).
pub(super) const MDNS_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);

/// The IPv6 mDNS group `ff02::fb`, as `/proc/net/igmp6` writes it.
pub(super) const MDNS_V6_HEX: &str = "ff0200000000000000000000000000fb";

/// A route of `/proc/net/route`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Route {
    /// The interface.
    pub iface: String,
    /// The destination network.
    pub dest: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
}

/// The routes of a `/proc/net/route` text (addresses are little-endian
/// hex: `000200C0` is 192.0.2.0).
pub(super) fn routes(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = hex_v4(f.get(1)?)?;
            let mask = hex_v4(f.get(7)?)?;
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            // RTF_UP: a route that is down is not taken.
            (flags & 1 == 1).then(|| Route {
                iface: f[0].to_string(),
                dest,
                prefix: u32::from(mask).count_ones() as u8,
            })
        })
        .collect()
}

fn hex_v4(h: &str) -> Option<Ipv4Addr> {
    let v = u32::from_str_radix(h, 16).ok()?;
    Some(Ipv4Addr::from(v.swap_bytes()))
}

/// The interface the kernel routes `dst` through when the sender names none:
/// the longest matching prefix (the default route matches everything).
pub(super) fn route_for(routes: &[Route], dst: Ipv4Addr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| {
            let mask = if r.prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(r.prefix))
            };
            u32::from(dst) & mask == u32::from(r.dest) & mask
        })
        .max_by_key(|r| r.prefix)
}

/// The interfaces of a `/proc/net/igmp` text that have joined `group`.
pub(super) fn igmp_members(text: &str, group: Ipv4Addr) -> Vec<String> {
    let want = format!("{:08X}", u32::from(group).swap_bytes());
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines().skip(1) {
        if !line.starts_with(char::is_whitespace) {
            // `4	eth0      :     1      V3`
            current = line
                .split_whitespace()
                .nth(1)
                .map(|s| s.trim_end_matches(':').to_string());
            continue;
        }
        let g = line.split_whitespace().next().unwrap_or("");
        if g.eq_ignore_ascii_case(&want) {
            if let Some(i) = &current {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
    }
    out
}

/// The interfaces of a `/proc/net/igmp6` text that have joined `ff02::fb`.
pub(super) fn igmp6_members(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(2)
            .is_some_and(|g| g.eq_ignore_ascii_case(MDNS_V6_HEX))
        {
            let i = f[1].to_string();
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded on this kind of machine (Linux 6.18): a default route via
    /// 192.0.2.1 and the 192.0.2.0/24 link route, plus a 224.0.0.0/4 route
    /// as the lab adds on its hosts.
    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
eth1\t000000E0\t00000000\t0001\t0\t0\t0\t000000F0\t0\t0\t0\n";

    #[test]
    fn the_multicast_route_is_the_longest_prefix_that_holds_the_group() {
        let r = routes(ROUTE);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1].dest, Ipv4Addr::new(192, 0, 2, 0));
        assert_eq!(r[1].prefix, 24);
        let m = route_for(&r, MDNS_V4).unwrap();
        assert_eq!((m.iface.as_str(), m.prefix), ("eth1", 4));
        let without: Vec<Route> = r.into_iter().filter(|x| x.iface != "eth1").collect();
        let d = route_for(&without, MDNS_V4).unwrap();
        assert_eq!(
            (d.iface.as_str(), d.prefix),
            ("eth0", 0),
            "the default route"
        );
        assert!(route_for(&[], MDNS_V4).is_none());
    }

    /// Recorded: `/proc/net/igmp` with all-hosts on lo and eth0, and
    /// 224.0.0.251 (`FB0000E0`) joined on eth0 by a responder.
    #[test]
    fn igmp_membership_of_the_mdns_group_is_read_per_interface() {
        let text = "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n\
1\tlo        :     1      V3\n\t\t\t\t010000E0     1 0:00000000\t\t0\n\
4\teth0      :     2      V3\n\t\t\t\tFB0000E0     1 0:00000000\t\t0\n\t\t\t\t010000E0     1 0:00000000\t\t0\n";
        assert_eq!(igmp_members(text, MDNS_V4), vec!["eth0".to_string()]);
        assert!(igmp_members(text, Ipv4Addr::new(224, 0, 0, 252)).is_empty());
    }

    #[test]
    fn igmp6_membership_of_ff02_fb_is_read_per_interface() {
        let text = "1    lo              ff020000000000000000000000000001     1 0000000C 0\n\
4    eth0            ff0200000000000000000000000000fb     1 00000004 0\n\
4    eth0            ff020000000000000000000000000001     1 0000000C 0\n";
        assert_eq!(igmp6_members(text), vec!["eth0".to_string()]);
    }
}
