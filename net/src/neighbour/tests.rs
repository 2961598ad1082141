use super::*;

#[test]
fn an_announcement_is_a_request_for_our_own_address() {
    let f = arp_request(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(10, 9, 1, 1),
        Ipv4Addr::new(10, 9, 1, 1),
    );
    assert_eq!(
        f,
        [
            0, 1, 8, 0, 6, 4, 0, 1, // Ethernet, IPv4, lengths, request
            2, 0, 0, 0, 0, 9, 10, 9, 1, 1, // sender MAC and IP
            0, 0, 0, 0, 0, 0, 10, 9, 1, 1, // target MAC unknown, target IP = ours
        ]
    );
}

#[test]
fn a_request_asks_for_the_target_and_tells_our_address() {
    let f = arp_request(
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(10, 9, 1, 1),
        Ipv4Addr::new(10, 9, 1, 7),
    );
    assert_eq!(&f[14..18], &[10, 9, 1, 1]);
    assert_eq!(&f[18..24], &[0; 6]);
    assert_eq!(&f[24..28], &[10, 9, 1, 7]);
}

#[test]
fn neighbour_entries_say_whether_the_mac_is_known() {
    let table = "\
IP address       HW type     Flags       HW address            Mask     Device
10.9.1.7         0x1         0x0         00:00:00:00:00:00     *        eth0
10.9.1.8         0x1         0x2         02:11:22:33:44:55     *        eth0
10.9.2.9         0x1         0x0         00:00:00:00:00:00     *        eth1
garbage line
";
    let n = |ip: &str, dev: &str, resolved| Neighbour {
        ip: ip.parse().unwrap(),
        dev: dev.into(),
        resolved,
    };
    assert_eq!(
        neighbours(table),
        vec![
            n("10.9.1.7", "eth0", false),
            n("10.9.1.8", "eth0", true),
            n("10.9.2.9", "eth1", false),
        ]
    );
}

#[test]
fn no_arp_socket_opens_on_loopback_or_a_missing_interface() {
    assert!(ArpSocket::open("lo").is_none());
    assert!(ArpSocket::open("rlx-no-such-if").is_none());
}

/// A state watching `ips`, registered `age` ago.
fn watching(ips: &[&str], age: Duration) -> NudgeState {
    let mut st = NudgeState::default();
    for ip in ips {
        st.targets.insert(
            ip.parse().unwrap(),
            Watched {
                registrations: 1,
                nudges: 0,
                since: Instant::now() - age,
            },
        );
    }
    st
}

fn entry(ip: &str, dev: &str, resolved: bool) -> Entry {
    Entry {
        ip: ip.parse().unwrap(),
        dev: dev.into(),
        ifindex: 2,
        resolved,
    }
}

/// Runs `rounds` ticks over the same entries with a fresh budget each,
/// recording every frame.
fn rounds(st: &mut NudgeState, entries: &[(&str, bool)], rounds: usize) -> Vec<Nudge> {
    let mut sent = Vec::new();
    for _ in 0..rounds {
        let mut budget = NUDGES_PER_SECOND;
        let e = entries
            .iter()
            .map(|(ip, r)| entry(ip, "eth0", *r))
            .collect();
        st.tick(e, &mut budget, &mut |n| {
            sent.push(n.clone());
            true
        });
    }
    sent
}

fn asks(sent: &[Nudge]) -> usize {
    sent.iter()
        .filter(|n| matches!(n, Nudge::Ask { .. }))
        .count()
}

#[test]
fn an_unresolved_ipv6_target_is_solicited_at_most_nudges_per_target_times() {
    let mut st = watching(&["fd52::7"], Duration::ZERO);
    let sent = rounds(&mut st, &[("fd52::7", false)], 20);
    assert_eq!(asks(&sent), NUDGES_PER_TARGET as usize);
    assert_eq!(
        sent[0],
        Nudge::Ask {
            ip: "fd52::7".parse().unwrap(),
            dev: "eth0".into(),
            ifindex: 2
        }
    );
}

#[test]
fn resolved_and_unwatched_entries_get_nothing_while_handshakes_are_young() {
    let mut st = watching(&["fd52::7", "10.9.1.7"], Duration::ZERO);
    let sent = rounds(
        &mut st,
        &[("fd52::7", true), ("10.9.1.7", true), ("fd52::9", false)],
        5,
    );
    assert_eq!(sent, vec![], "a healthy LAN sees no extra frame");
}

#[test]
fn the_budget_per_second_bounds_asks_over_both_families() {
    let ips: Vec<String> = (0..150)
        .map(|i| format!("fd52::{i:x}"))
        .chain((0..150).map(|i| format!("10.9.{}.{}", i / 250, 1 + i % 250)))
        .collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let mut st = watching(&refs, Duration::ZERO);
    let mut budget = NUDGES_PER_SECOND;
    let mut n = 0;
    let e = refs.iter().map(|ip| entry(ip, "eth0", false)).collect();
    st.tick(e, &mut budget, &mut |_| {
        n += 1;
        true
    });
    assert_eq!(n, NUDGES_PER_SECOND as usize);
    assert_eq!(budget, 0);
}

#[test]
fn a_struggling_ipv6_handshake_announces_our_address_once_per_interval() {
    let mut st = watching(&["fd52::7"], STRUGGLING + Duration::from_millis(1));
    let sent = rounds(&mut st, &[("fd52::7", true)], 3);
    assert_eq!(
        sent,
        vec![Nudge::Announce {
            dev: "eth0".into(),
            v6: true
        }],
        "rounds 2 and 3 fall within ANNOUNCE_EVERY"
    );
}

#[test]
fn a_frame_that_could_not_be_sent_is_not_counted_against_the_bounds() {
    let mut st = watching(&["fd52::7"], Duration::ZERO);
    let mut budget = NUDGES_PER_SECOND;
    st.tick(
        vec![entry("fd52::7", "eth0", false)],
        &mut budget,
        &mut |_| false,
    );
    assert_eq!((st.sent, budget), (0, NUDGES_PER_SECOND));
    assert_eq!(st.targets.values().next().unwrap().nudges, 0);
}
