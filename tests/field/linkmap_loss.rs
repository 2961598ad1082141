//! `rlx-discover links` measures each path's loss and path MTU both ways
//! (the measurement's UDP probe): a lossy box's pairs show its loss in each
//! direction, clean pairs none, and an MTU black hole between two boxes is
//! named with its size, in the JSON, in the table and in the failure of the
//! TCP transfer it stalls.
//!
//! The lab: host 0 runs the coordinator; host 3 drops 5% of what it sends
//! and receives (nftables, both ways); host 2 drops every packet from
//! host 1 longer than 1400 bytes, with no ICMP answer (an MTU black hole,
//! `prelaunch::mtu_black_hole`). Host 4 is clean. Every box sends at 100
//! Mbit/s (`tc tbf`), as on a LAN.

use super::linkmap::{agent, index, keyed_cluster, links_json, one_map_at_a_time, shape};
use super::prelaunch::mtu_black_hole;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{discover_bin, require_lab, Proc};
use serde_json::Value;

/// The pair of `box{a}` and `box{b}` in the map, and whether `box{a}` is
/// its `a` end.
fn pair(map: &Value, a: usize, b: usize) -> (Value, bool) {
    let (i, j) = (index(map, a), index(map, b));
    let p = map["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["a"] == i.min(j) && p["b"] == i.max(j))
        .unwrap_or_else(|| panic!("pair {a},{b} in {map:#}"))
        .clone();
    (p, i < j)
}

/// The UDP figures of the best path from `box{from}` to `box{to}`.
fn way(map: &Value, from: usize, to: usize) -> Value {
    let (p, from_is_a) = pair(map, from, to);
    let best = &p["paths"][0];
    let key = if from_is_a { "ab_udp" } else { "ba_udp" };
    assert!(best[key].is_object(), "box{from} -> box{to}: {p:#}");
    best[key].clone()
}

#[test]
fn the_link_map_reports_each_directions_loss_and_names_an_mtu_black_hole() {
    let name = "the_link_map_reports_each_directions_loss_and_names_an_mtu_black_hole";
    if !peer::require(name, &[Peer::Nftables]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let _one = one_map_at_a_time();
    let lab = labs.hosts(5);
    let dir = tempfile::tempdir().unwrap();
    let (key, cfg) = keyed_cluster(dir.path());
    let _agents: Vec<Proc> = (1..=4)
        .map(|i| agent(&lab, i, &key, dir.path(), &[]))
        .collect();
    // A LAN's rate: unshaped veths carry TCP at 10+ Gbit/s, and the other
    // pairs of a round then overflow the kernel's per-CPU receive backlog
    // that every namespace of the lab shares (1,000 packets), dropping a
    // third of a probe's datagrams: a lab artefact (boxes of a real LAN
    // have their own), which read as 36% loss here before the shaping.
    for i in 1..=4 {
        shape(&lab, i, "eth0", 100);
    }
    lab.set_loss(3, 5).unwrap();
    mtu_black_hole(&lab, 1, 2, 1400);

    let (code, map, stderr) = links_json(&lab, &cfg);
    assert_eq!(
        code,
        Some(1),
        "a pair without a path fails the run: {stderr}"
    );

    // Box 3's 5% each way, known to about ±1 point with 2,000 datagrams.
    for other in [1, 2, 4] {
        for (from, to) in [(3, other), (other, 3)] {
            let d = way(&map, from, to);
            let loss = d["loss_pct"].as_f64().unwrap();
            assert!(
                (2.5..=8.0).contains(&loss),
                "box{from} -> box{to}: {loss}% lost, 5% dropped: {d:#}"
            );
            assert_eq!(d["sent"], 2000, "{d:#}");
        }
    }
    // Clean pairs: nothing lost, the veths' full 1500 bytes pass.
    for (from, to) in [(1, 4), (4, 1), (2, 4), (4, 2)] {
        let d = way(&map, from, to);
        assert_eq!(
            d["loss_pct"].as_f64(),
            Some(0.0),
            "box{from} -> box{to}: {d:#}"
        );
        assert_eq!(d["mtu"], 1500, "{d:#}");
        assert_eq!(d["mtu_limited"], false, "{d:#}");
    }
    // Boxes 1 and 2: the TCP transfer from 1 to 2 stalls in the black hole,
    // and its failure says why, with the size.
    let (p12, _) = pair(&map, 1, 2);
    let failed = p12["failed"].as_array().unwrap();
    assert!(
        failed.iter().any(|f| {
            let f = f.as_str().unwrap();
            f.contains("above 1400 bytes") && f.contains("MTU black hole")
        }),
        "{p12:#}"
    );

    // The table carries the same: a LOSS and an MTU column.
    let out = lab
        .command(0, discover_bin())
        .arg("links")
        .arg(&cfg)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    eprintln!("{table}");
    let head = table.lines().next().unwrap_or_default();
    assert!(head.contains("LOSS") && head.contains("MTU"), "{table}");
    assert!(table.contains("above 1400 bytes"), "{table}");
}
