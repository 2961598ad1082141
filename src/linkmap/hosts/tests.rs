use super::*;
use crate::linkmap::{BoxLinks, PairLinks};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn path(a: &str, b: &str, kind: &str, mbps: f64) -> PathLink {
    PathLink {
        a_addr: ip(a),
        b_addr: ip(b),
        kind: kind.into(),
        ab_mbps: mbps,
        ba_mbps: mbps * 1.1,
        rtt_ms: 0.3,
        ab_udp: None,
        ba_udp: None,
        udp_notes: vec![],
    }
}

/// `n` boxes `b0..`, box `i` at `10.0.0.{i+1}`, every pair one 1 Gbit/s
/// Ethernet path.
fn lan(n: usize) -> LinkMap {
    let eth = |i: usize| format!("10.0.0.{}", i + 1);
    let boxes = (0..n)
        .map(|i| BoxLinks {
            addr: format!("{}:9100", eth(i)),
            id: format!("id{i}"),
            hostname: format!("b{i}"),
            agent: format!("{}:6184", eth(i)),
            ssh: None,
            links: Vec::new(),
        })
        .collect();
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            pairs.push(PairLinks {
                a,
                b,
                paths: vec![path(&eth(a), &eth(b), "ethernet", 1000.0)],
                failed: Vec::new(),
            });
        }
    }
    LinkMap {
        v: 1,
        boxes,
        pairs,
        skipped: Vec::new(),
        bottlenecks: vec![],
        took_ms: 1,
    }
}

fn pair_mut(m: &mut LinkMap, a: usize, b: usize) -> &mut PairLinks {
    m.pairs.iter_mut().find(|p| p.a == a && p.b == b).unwrap()
}

/// Adds a path to pair `(a, b)`, keeping the paths fastest first.
fn add(m: &mut LinkMap, a: usize, b: usize, p: PathLink) {
    let pair = pair_mut(m, a, b);
    pair.paths.push(p);
    pair.paths
        .sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
}

/// A Thunderbolt cable between boxes `a < b`: `169.254.{10a+b}.1` / `.2`.
fn cable(m: &mut LinkMap, a: usize, b: usize) {
    let net = format!("169.254.{}", a * 10 + b);
    add(
        m,
        a,
        b,
        path(
            &format!("{net}.1"),
            &format!("{net}.2"),
            "thunderbolt",
            20_000.0,
        ),
    );
}

fn fastest() -> HostsOptions {
    HostsOptions {
        ring: RingOrder::Fastest,
        ..HostsOptions::default()
    }
}

#[test]
fn the_cluster_file_order_is_kept_by_default() {
    let mut m = lan(4);
    pair_mut(&mut m, 1, 2).paths[0].ab_mbps = 10.0;
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert_eq!(h.ranks, [0, 1, 2, 3]);
    assert_eq!(
        h.hosts,
        [
            "10.0.0.1:9000",
            "10.0.0.2:9000",
            "10.0.0.3:9000",
            "10.0.0.4:9000"
        ]
    );
    assert_eq!(h.backend, "tcp");
    assert_eq!(h.hops.len(), 4);
    assert_eq!(h.hops[3].ranks, (3, 0));
    assert_eq!(h.slowest_hop_mbps(), Some(10.0));
    assert!(h.notes[0].contains("cluster file's order"), "{:?}", h.notes);
}

#[test]
fn the_fastest_ring_takes_a_10_mbit_hop_out_of_the_ring_and_says_by_how_much() {
    let mut m = lan(4);
    pair_mut(&mut m, 1, 2).paths[0].ab_mbps = 10.0;
    let h = hosts_json(&m, &fastest()).unwrap();
    // 0-1-3-2-0 avoids the slow pair; so does its reverse, and the file
    // order's box 0 stays rank 0.
    assert_eq!(h.ranks[0], 0);
    assert!(
        h.ranks == [0, 1, 3, 2] || h.ranks == [0, 2, 3, 1],
        "{:?}",
        h.ranks
    );
    assert_eq!(h.slowest_hop_mbps(), Some(1000.0));
    let said = h.notes.join("\n");
    assert!(
        said.contains("every ring order with rank 0 fixed"),
        "{said}"
    );
    assert!(
        said.contains("10.0 Mbit/s") && said.contains("now 1000 Mbit/s") && said.contains("100.0x"),
        "{said}"
    );
    assert!(said.contains("b1 (10.0.0.2:9100)") && said.contains("b2 (10.0.0.3:9100)"));
    // The hosts follow the ranks.
    for (r, &b) in h.ranks.iter().enumerate() {
        assert_eq!(h.hosts[r], format!("10.0.0.{}:9000", b + 1));
    }
}

#[test]
fn the_fastest_ring_keeps_the_file_order_when_nothing_beats_it() {
    let h = hosts_json(&lan(5), &fastest()).unwrap();
    assert_eq!(h.ranks, [0, 1, 2, 3, 4]);
    assert!(
        h.notes.iter().any(|n| n.contains("already the best")),
        "{:?}",
        h.notes
    );
}

#[test]
fn a_thunderbolt_cable_gives_its_addresses_only_to_the_ring_hop_it_can_carry() {
    // Cable between ranks 0 and 1: rank 1 is dialled by rank 0 alone, so
    // it listens on the cable; rank 0, dialled by nobody, keeps the
    // address both its neighbours reach.
    let mut m = lan(4);
    cable(&mut m, 0, 1);
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert_eq!(
        h.hosts,
        [
            "10.0.0.1:9000",
            "169.254.1.2:9000",
            "10.0.0.3:9000",
            "10.0.0.4:9000"
        ]
    );
    assert_eq!(h.hops[0].kind, "thunderbolt");
    assert_eq!(h.hops[0].addrs, (ip("169.254.1.1"), ip("169.254.1.2")));
    assert_eq!(h.hops[0].both_ways_mbps, 20_000.0);
    assert!(h.hops[1..].iter().all(|x| x.kind == "ethernet"));

    // Cable between boxes that are not ring neighbours: nobody uses it.
    let mut m = lan(4);
    cable(&mut m, 0, 2);
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert!(
        h.hosts.iter().all(|x| x.starts_with("10.0.0.")),
        "{:?}",
        h.hosts
    );

    // Ring neighbours 1-2, but rank 0 dials rank 2 too and cannot reach
    // the cable: never an address a dialling rank cannot reach.
    let mut m = lan(4);
    cable(&mut m, 1, 2);
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert!(
        h.hosts.iter().all(|x| x.starts_with("10.0.0.")),
        "{:?}",
        h.hosts
    );

    // Two boxes: the cable is the whole ring, both ends use it.
    let mut m = lan(2);
    cable(&mut m, 0, 1);
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert_eq!(h.hosts, ["169.254.1.1:9000", "169.254.1.2:9000"]);
    assert_eq!(h.hops.len(), 1);
    assert_eq!(h.backend, "thunderbolt");
}

#[test]
fn the_backend_is_thunderbolt_only_when_every_ring_hop_is() {
    // A Thunderbolt bridge every box reaches, at 169.254.0.{i+1}.
    let bridged = |skip: Option<(usize, usize)>| {
        let mut m = lan(3);
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            if Some((a, b)) != skip {
                let p = path(
                    &format!("169.254.0.{}", a + 1),
                    &format!("169.254.0.{}", b + 1),
                    "thunderbolt",
                    15_000.0,
                );
                add(&mut m, a, b, p);
            }
        }
        m
    };
    let h = hosts_json(&bridged(None), &HostsOptions::default()).unwrap();
    assert_eq!(h.backend, "thunderbolt");
    assert_eq!(
        h.hosts,
        ["169.254.0.1:9000", "169.254.0.2:9000", "169.254.0.3:9000"]
    );
    assert!(h
        .notes
        .iter()
        .any(|n| n.contains("every ring hop runs over a Thunderbolt")));

    let h = hosts_json(&bridged(Some((1, 2))), &HostsOptions::default()).unwrap();
    assert_eq!(h.backend, "tcp");
    let why = h
        .notes
        .iter()
        .find(|n| n.starts_with("backend tcp"))
        .unwrap();
    assert!(why.contains("ranks 1-2 (ethernet)"), "{why}");
    // Box 2's bridge address is not reached by box 1, so it listens on
    // Ethernet, and the wrap hop to rank 0 runs there too.
    assert_eq!(h.hosts[2], "10.0.0.3:9000");
    assert!(why.contains("ranks 2-0 (ethernet)"), "{why}");
}

#[test]
fn a_pair_with_no_measured_path_is_an_error_naming_both_boxes() {
    let mut m = lan(3);
    let p = pair_mut(&mut m, 1, 2);
    p.paths.clear();
    p.failed.push("10.0.0.3: connection refused".into());
    let e = hosts_json(&m, &HostsOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b1 (10.0.0.2:9100)") && e.contains("b2 (10.0.0.3:9100)"),
        "{e}"
    );
    assert!(
        e.contains("connection refused") && e.contains("Measure the map again"),
        "{e}"
    );

    let mut m = lan(3);
    m.pairs.retain(|p| (p.a, p.b) != (0, 2));
    let e = hosts_json(&m, &fastest()).unwrap_err();
    assert!(matches!(e, HostsError::NoPath { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("b0 (10.0.0.1:9100) and b2 (10.0.0.3:9100)"));
}

#[test]
fn a_box_no_address_of_which_every_lower_rank_reached_is_an_error() {
    // Box 2 is reached by box 0 only on X and by box 1 only on Y.
    let mut m = lan(3);
    pair_mut(&mut m, 0, 2).paths = vec![path("10.0.0.1", "10.9.0.3", "ethernet", 900.0)];
    pair_mut(&mut m, 1, 2).paths = vec![path("10.0.0.2", "10.8.0.3", "ethernet", 900.0)];
    let e = hosts_json(&m, &HostsOptions::default()).unwrap_err();
    assert!(
        matches!(e, HostsError::NoCommonAddress { rank: 2, .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("b0 (10.0.0.1:9100), b1 (10.0.0.2:9100)"),
        "{e}"
    );
}

#[test]
fn ipv6_addresses_are_bracketed_and_link_local_ones_left_out() {
    let mut m = lan(2);
    m.pairs[0].paths = vec![
        path("fe80::1", "fe80::2", "ethernet", 5000.0),
        path("fd00::1", "fd00::2", "ethernet", 1000.0),
    ];
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert_eq!(h.hosts, ["[fd00::1]:9000", "[fd00::2]:9000"]);
    assert!(h.to_json().contains("\"[fd00::2]:9000\""));

    let mut one = lan(1);
    one.boxes[0].addr = "[fd00::5]:9100".into();
    let h = hosts_json(
        &one,
        &HostsOptions {
            port: 7000,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(h.hosts, ["[fd00::5]:7000"]);
}

#[test]
fn a_world_of_one_rank_is_the_box_by_its_cluster_file_host() {
    let mut m = lan(1);
    m.boxes[0].addr = "gpu-a.local:9100".into();
    let h = hosts_json(&m, &HostsOptions::default()).unwrap();
    assert_eq!(
        (h.backend.as_str(), h.hosts.as_slice()),
        ("tcp", &["gpu-a.local:9000".to_string()][..])
    );
    assert!(h.hops.is_empty() && h.slowest_hop_mbps().is_none());
    assert!(matches!(
        hosts_json(&lan(0), &HostsOptions::default()),
        Err(HostsError::NoBoxes)
    ));
    let zero = HostsOptions {
        port: 0,
        ..Default::default()
    };
    assert!(matches!(hosts_json(&m, &zero), Err(HostsError::PortZero)));
}

#[test]
fn the_json_holds_exactly_the_runtimes_two_fields() {
    let h = hosts_json(&lan(2), &HostsOptions::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&h.to_json()).unwrap();
    let o = v.as_object().unwrap();
    assert_eq!(o.keys().collect::<Vec<_>>(), ["backend", "hosts"]);
    assert_eq!(v["hosts"][1], "10.0.0.2:9000");
}

#[test]
fn nine_boxes_are_searched_exactly_and_twelve_by_the_heuristic_which_says_so() {
    for (n, how) in [(9, "every ring order"), (12, "not proven best")] {
        let mut m = lan(n);
        pair_mut(&mut m, 1, 2).paths[0].ab_mbps = 10.0;
        let t = std::time::Instant::now();
        let h = hosts_json(&m, &fastest()).unwrap();
        assert!(t.elapsed().as_secs() < 5, "n={n}: {:?}", t.elapsed());
        assert_eq!(h.slowest_hop_mbps(), Some(1000.0), "n={n}: {:?}", h.notes);
        assert!(
            h.notes.iter().any(|x| x.contains(how)),
            "n={n}: {:?}",
            h.notes
        );
        let mut seen = h.ranks.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
    }
}
