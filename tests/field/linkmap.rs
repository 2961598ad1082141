//! `rlx-discover links`: three keyed agents measure each other, pair by
//! pair, and the map says which path is fast, which direction is slow, and
//! that two boxes share a second, direct cable; the launch files written
//! from it (hosts.json, MLX, Open MPI) and its picture follow the map.
//!
//! `RLX_DOCS_LINKMAP_SVG=PATH` copies the picture there (docs/img/linkmap.svg
//! is this lab's).
//!
//! The lab: hosts 1 and 2 send at 50 Mbit/s on the LAN, host 3 at 20
//! (`tc tbf` on each host's egress; what comes in is not shaped), and
//! hosts 1 and 2 are also joined by a direct veth, unshaped, that their
//! agents call a Thunderbolt link. Host 0 runs the coordinator.

use rlx_lab::kit::{agent_bin, discover_bin, require_lab, run_ok, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The direct cable's addresses on hosts 1 and 2.
const CABLE: [&str; 2] = ["10.99.7.1", "10.99.7.2"];

/// A keyed agent on host `i`, its caps naming its LAN link and the
/// `extra` links (name, kind, address).
pub(super) fn agent(
    lab: &Lab,
    i: usize,
    key: &Path,
    dir: &Path,
    extra: &[(&str, &str, &str)],
) -> Proc {
    let lan = lab.host(i).ip;
    let mut links = vec![format!(
        r#"{{"name":"eth0","kind":"ethernet","mtu":1500,"addrs":["{lan}"]}}"#
    )];
    for (name, kind, ip) in extra {
        links.push(format!(
            r#"{{"name":"{name}","kind":"{kind}","mtu":1500,"addrs":["{ip}"]}}"#
        ));
    }
    let caps = format!(
        r#"{{"id":"{i:016x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}],
           "links":[{}]}}"#,
        links.join(",")
    );
    let caps_file = dir.join(format!("box{i}.json"));
    std::fs::write(&caps_file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", &format!("box{i}")])
        .arg("--key-file")
        .arg(key)
        .env("RUST_LOG", "debug");
    let p = Proc::spawn(lab, i, cmd);
    p.expect_output("mDNS: announced on", Duration::from_secs(30));
    p
}

/// A direct veth `name` between hosts `a` and `b`, with `ips` (one per
/// end) in a /`prefix`.
pub(super) fn wire(lab: &Lab, (a, b): (usize, usize), name: &str, ips: [&str; 2], prefix: u8) {
    let (na, nb) = (&lab.host(a).ns, &lab.host(b).ns);
    run_ok(Command::new("ip").args([
        "-n", na, "link", "add", name, "type", "veth", "peer", "name", name, "netns", nb,
    ]));
    for (ns, ip) in [(na, ips[0]), (nb, ips[1])] {
        run_ok(Command::new("ip").args([
            "-n",
            ns,
            "addr",
            "add",
            &format!("{ip}/{prefix}"),
            "dev",
            name,
        ]));
        run_ok(Command::new("ip").args(["-n", ns, "link", "set", name, "up"]));
    }
}

/// Shapes what host `i` sends on `iface` to `mbit` Mbit/s.
pub(super) fn shape(lab: &Lab, i: usize, iface: &str, mbit: u32) {
    let ns = &lab.host(i).ns;
    run_ok(Command::new("ip").args([
        "netns",
        "exec",
        ns,
        "tc",
        "qdisc",
        "replace",
        "dev",
        iface,
        "root",
        "tbf",
        "rate",
        &format!("{mbit}mbit"),
        "burst",
        "64kb",
        "latency",
        "50ms",
    ]));
}

/// Held for the whole of each link-map test: their figures are rates, and
/// two maps measured side by side on the lab's two cores (every box shares
/// them) would read each other's load as their links'. A failed test
/// poisons the lock; the next one still runs.
pub(super) fn one_map_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `rlx-discover links --json CFG` in `lab`'s host 0: its exit code, the
/// map it printed, and its log.
pub(super) fn links_json(lab: &Lab, cfg: &Path) -> (Option<i32>, Value, String) {
    let out = lab
        .command(0, discover_bin())
        .args(["links", "--json"])
        .arg(cfg)
        .env("RUST_LOG", "info,rlx_discover::linkmap=debug")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let map: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("links printed no JSON ({e}):\n{stdout}\n{stderr}"));
    eprintln!("{map:#}\n{stderr}");
    (out.status.code(), map, stderr)
}

/// The index in the map of `box{i}` (the map lists boxes in discovery
/// order).
pub(super) fn index(map: &Value, i: usize) -> usize {
    map["boxes"]
        .as_array()
        .unwrap()
        .iter()
        .position(|b| b["hostname"] == format!("box{i}"))
        .unwrap_or_else(|| panic!("box{i} in {map:#}"))
}

/// The paths of the pair of `box{from}` and `box{to}`, each as (rate out
/// of `from`, rate into `from`, kind), fastest first.
fn paths(map: &Value, from: usize, to: usize) -> Vec<(f64, f64, String)> {
    let (f, t) = (index(map, from), index(map, to));
    let (a, b) = (f.min(t), f.max(t));
    let pair = map["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["a"] == a && p["b"] == b)
        .unwrap_or_else(|| panic!("pair {a},{b} in {map:#}"));
    pair["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let (ab, ba) = (
                p["ab_mbps"].as_f64().unwrap(),
                p["ba_mbps"].as_f64().unwrap(),
            );
            let (out, inn) = if f == a { (ab, ba) } else { (ba, ab) };
            (out, inn, p["kind"].as_str().unwrap().to_string())
        })
        .collect()
}

/// A new cluster key in `dir`, and a cluster file that names it and no
/// node: the agents are found by mDNS and measured under the key.
pub(super) fn keyed_cluster(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = dir.join("cluster.key");
    run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    let cfg = dir.join("cluster.toml");
    let text = format!(
        "model = \"m\"\n[discover]\nkey_file = \"{}\"\nckpt_dir = \"/m\"\n",
        key.display()
    );
    std::fs::write(&cfg, text).unwrap();
    (key, cfg)
}

#[test]
fn the_link_map_measures_every_pair_both_ways_and_finds_the_direct_cable() {
    let Some(labs) = require_lab() else { return };
    let _one = one_map_at_a_time();
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let (key, cfg) = keyed_cluster(dir.path());
    // The cable between hosts 1 and 2.
    wire(&lab, (1, 2), "tb0", CABLE, 30);
    shape(&lab, 1, "eth0", 50);
    shape(&lab, 2, "eth0", 50);
    shape(&lab, 3, "eth0", 20);
    let _agents: Vec<Proc> = (1..=3)
        .map(|i| match i {
            1 | 2 => agent(
                &lab,
                i,
                &key,
                dir.path(),
                &[("tb0", "thunderbolt", CABLE[i - 1])],
            ),
            _ => agent(&lab, i, &key, dir.path(), &[]),
        })
        .collect();

    let out = lab
        .command(0, discover_bin())
        .args(["links", "--json", "--hosts-json"])
        .arg(dir.path().join("hosts.json"))
        .arg("--mlx-hostfile")
        .arg(dir.path().join("mlx.json"))
        .arg("--mpi-hostfile")
        .arg(dir.path().join("mpi.hosts"))
        .arg("--svg")
        .arg(dir.path().join("links.svg"))
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let map: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("links printed no JSON ({e}):\n{stdout}\n{stderr}"));
    eprintln!("{map:#}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(map["boxes"].as_array().unwrap().len(), 3, "{map:#}");
    assert_eq!(map["pairs"].as_array().unwrap().len(), 3, "every pair");

    // The runtime's hosts.json: three ranks in the map's order on the
    // default port, over TCP (the cable is not every hop of the ring).
    let hosts: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("hosts.json")).unwrap())
            .unwrap();
    eprintln!("hosts.json: {hosts:#}");
    assert_eq!(hosts["backend"], "tcp", "{hosts:#}");
    let ranks = hosts["hosts"].as_array().unwrap();
    assert_eq!(ranks.len(), 3, "{hosts:#}");
    assert!(
        ranks.iter().all(|h| h.as_str().unwrap().ends_with(":9000")),
        "{hosts:#}"
    );

    // MLX: in a ring of three every pair is neighbours, so the one of
    // boxes 1 and 2 that the other dials gets its cable address, and the
    // other two ranks their LAN address.
    let mlx: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mlx.json")).unwrap())
            .unwrap();
    let ips: Vec<&str> = mlx
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let ips = h["ips"].as_array().unwrap();
            assert_eq!(ips.len(), 1, "{mlx:#}");
            ips[0].as_str().unwrap()
        })
        .collect();
    assert_eq!(ips.len(), 3, "{mlx:#}");
    let on_cable = ips.iter().filter(|ip| CABLE.contains(ip)).count();
    assert_eq!(on_cable, 1, "one rank dialled over the cable: {mlx:#}");
    let lan: Vec<String> = (1..=3).map(|i| lab.host(i).ip.to_string()).collect();
    assert!(
        ips.iter()
            .all(|ip| CABLE.contains(ip) || lan.iter().any(|l| l == ip)),
        "{mlx:#}"
    );
    // Open MPI: one slot per rank, in the same rank order.
    let mpi = std::fs::read_to_string(dir.path().join("mpi.hosts")).unwrap();
    let lines: Vec<&str> = mpi.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 3, "{mpi}");
    assert!(lines.iter().all(|l| l.ends_with(" slots=1")), "{mpi}");
    // The picture names every box and shows the cable.
    let svg = std::fs::read_to_string(dir.path().join("links.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    for b in ["box1", "box2", "box3"] {
        assert!(svg.contains(b), "{b} in the picture");
    }
    assert!(svg.contains("Gbit/s") || svg.contains("Mbit/s"), "{svg}");
    if let Some(out) = std::env::var_os("RLX_DOCS_LINKMAP_SVG") {
        std::fs::write(out, &svg).unwrap();
    }

    // Hosts 1 and 2: the cable is the best path, and it is far faster
    // than their 50 Mbit/s LAN; the LAN path is measured too.
    let p12 = paths(&map, 1, 2);
    assert_eq!(p12.len(), 2, "the cable and the LAN: {p12:?}");
    let (out12, in12, kind) = &p12[0];
    assert_eq!(kind, "thunderbolt");
    assert!(
        *out12 > 150.0 && *in12 > 150.0,
        "the cable: {out12} / {in12} Mbit/s"
    );
    let (out, inn, kind) = &p12[1];
    assert_eq!(kind, "ethernet");
    for r in [out, inn] {
        assert!(
            (35.0..=60.0).contains(r),
            "LAN path: {r} Mbit/s, shaped to 50"
        );
    }
    // Host 3 sends at 20 and receives at the others' 50: each direction
    // measured on its own.
    for other in [1, 2] {
        let p = paths(&map, 3, other);
        assert_eq!(p.len(), 1, "one path: {p:?}");
        let (out3, in3, kind) = &p[0];
        assert_eq!(kind, "ethernet");
        assert!(
            (14.0..=24.0).contains(out3),
            "box3 -> box{other}: {out3} Mbit/s, shaped to 20"
        );
        assert!(
            (35.0..=60.0).contains(in3),
            "box{other} -> box3: {in3} Mbit/s, shaped to 50"
        );
    }
}

/// `links --map FILE` once, in `lab`'s host 0: the map it kept, and how
/// many pairs it says it kept from the file and measured now.
fn links_with_map(lab: &Lab, cfg: &Path, file: &Path) -> (Value, usize, usize) {
    let out = lab
        .command(0, discover_bin())
        .args(["links", "--json", "--map"])
        .arg(file)
        .arg(cfg)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let map: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("links printed no JSON ({e}):\n{stdout}\n{stderr}"));
    let line = stderr
        .lines()
        .find(|l| l.contains("kept from before"))
        .unwrap_or_else(|| panic!("no count of kept pairs:\n{stderr}"));
    let counts: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [kept, measured] = counts[counts.len() - 2..] else {
        panic!("{line}")
    };
    (map, kept, measured)
}

/// The figures of the pair of `box{a}` and `box{b}`, whichever of the two
/// the map lists first: per path, each end's address with the rate out of
/// it, and the round trip.
fn pair_of(map: &Value, a: usize, b: usize) -> Vec<(Vec<(String, String)>, String)> {
    let (i, j) = (index(map, a), index(map, b));
    let pair = map["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["a"].as_u64() == Some(i.min(j) as u64) && p["b"].as_u64() == Some(i.max(j) as u64)
        })
        .unwrap_or_else(|| panic!("no pair box{a}-box{b}: {map:#}"));
    pair["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let mut ends = vec![
                (p["a_addr"].to_string(), p["ab_mbps"].to_string()),
                (p["b_addr"].to_string(), p["ba_mbps"].to_string()),
            ];
            ends.sort();
            (ends, p["rtt_ms"].to_string())
        })
        .collect()
}

/// Guards the incremental map (issue 40): a kept map answers every pair
/// it already has, so a second run measures nothing, and a box that joins
/// has only its own pairs measured, the others' figures carried as they
/// were.
#[test]
fn a_kept_map_measures_only_the_pairs_of_a_box_that_joins() {
    let Some(labs) = require_lab() else { return };
    let _one = one_map_at_a_time();
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let (key, cfg) = keyed_cluster(dir.path());
    let file = dir.path().join("links.json");
    let mut agents: Vec<Proc> = (1..=2)
        .map(|i| agent(&lab, i, &key, dir.path(), &[]))
        .collect();

    let (first, kept, measured) = links_with_map(&lab, &cfg, &file);
    assert_eq!((kept, measured), (0, 1), "a first run measures its pair");
    let p12 = pair_of(&first, 1, 2);
    assert!(!p12.is_empty(), "{first:#}");

    let (again, kept, measured) = links_with_map(&lab, &cfg, &file);
    assert_eq!(
        (kept, measured),
        (1, 0),
        "nothing changed: nothing measured"
    );
    assert_eq!(pair_of(&again, 1, 2), p12, "the figures kept");

    agents.push(agent(&lab, 3, &key, dir.path(), &[]));
    let (joined, kept, measured) = links_with_map(&lab, &cfg, &file);
    eprintln!("with box3: {} ms", joined["took_ms"]);
    assert_eq!((kept, measured), (1, 2), "box3's two pairs, and no other");
    assert_eq!(pair_of(&joined, 1, 2), p12, "box1-box2 not measured again");
    for other in [1, 2] {
        let p = pair_of(&joined, 3, other);
        assert!(!p.is_empty(), "box3-box{other}: {joined:#}");
    }
    let kept_file: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        kept_file["pairs"].as_array().unwrap().len(),
        3,
        "the file has all three"
    );
}
