//! `rlx-discover check`: the pre-launch path check passes a healthy lab
//! and names each injected fault with its box, address and fix: a closed
//! worker port, the process group's port taken by another program, a
//! one-way filter, an MTU black hole at 1400 bytes, and an address only
//! the coordinator can reach.
//!
//! The lab: hosts 1-3 run a keyed agent and a stand-in RLX worker on
//! 9100; host 0 runs the coordinator, with a private network to host 3
//! alone (10.88.0.0/24). The cluster file names the three nodes by hand
//! (no mDNS), and hosts.json ranks them 1, 2, 3 on port 9000.

use super::linkmap::{agent, wire};
use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{discover_bin, require_lab_with, run_ok, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Host 3's address on the network only the coordinator shares.
const PRIVATE: [&str; 2] = ["10.88.0.1", "10.88.0.3"];

fn worker(lab: &Lab, i: usize, port: u16) -> Proc {
    let mut cmd = Command::new(discover_bin());
    cmd.args(["lab-worker", "--port", &port.to_string()])
        .args(["--name", &format!("box{i}")]);
    let p = Proc::spawn(lab, i, cmd);
    p.expect_output("listening on", Duration::from_secs(30));
    p
}

/// Runs `check --json` on host 0 with `hosts` as hosts.json: the exit
/// code and the checks.
fn check(lab: &Lab, dir: &Path, cfg: &Path, hosts: &[String]) -> (i32, Vec<Value>) {
    let file = dir.join("hosts.json");
    let json = serde_json::json!({"backend": "tcp", "hosts": hosts});
    std::fs::write(&file, json.to_string()).unwrap();
    let out = lab
        .command(0, discover_bin())
        .args(["check", "--json", "--hosts-json"])
        .arg(&file)
        .arg(cfg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    eprintln!("{v:#}");
    let checks = v["checks"].as_array().unwrap().clone();
    (out.status.code().unwrap_or(-1), checks)
}

/// The failed checks' details and fixes, one string each.
fn failures(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| format!("{}: {} | fix: {}", c["check"], c["detail"], c["fix"]))
        .collect()
}

#[test]
fn the_path_check_passes_a_healthy_lab_and_names_every_injected_fault() {
    let Some(labs) = require_lab_with(&[Peer::Nftables]) else {
        return;
    };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("cluster.key");
    run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    wire(&lab, (0, 3), "priv0", PRIVATE, 24);
    let _agents: Vec<Proc> = (1..=3)
        .map(|i| match i {
            3 => agent(
                &lab,
                i,
                &key,
                dir.path(),
                &[("priv0", "ethernet", PRIVATE[1])],
            ),
            _ => agent(&lab, i, &key, dir.path(), &[]),
        })
        .collect();
    let mut workers: Vec<Option<Proc>> = (1..=3).map(|i| Some(worker(&lab, i, 9100))).collect();
    let ip = |i: usize| lab.host(i).ip.to_string();
    let cfg = dir.path().join("cluster.toml");
    let nodes: String = (1..=3)
        .map(|i| format!("[[node]]\naddr = \"{}:9100\"\nckpt_dir = \"/m\"\n", ip(i)))
        .collect();
    std::fs::write(
        &cfg,
        format!(
            "model = \"m\"\n[discover]\nmdns = false\nkey_file = \"{}\"\nckpt_dir = \"/m\"\n{nodes}",
            key.display()
        ),
    )
    .unwrap();
    let lan: Vec<String> = (1..=3).map(|i| format!("{}:9000", ip(i))).collect();

    // Healthy: no false alarm, one ok per rank and per worker.
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    assert_eq!(failures(&checks), Vec::<String>::new());
    assert_eq!(code, 0);
    let oks = |kind: &str| {
        checks
            .iter()
            .filter(|c| c["check"] == kind && c["status"] == "ok")
            .count()
    };
    assert_eq!((oks("rank"), oks("worker port")), (3, 3), "{checks:#?}");

    // A closed worker port on box 1.
    workers[0] = None;
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    let f = failures(&checks);
    assert_eq!(code, 1);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].contains("worker port") && f[0].contains(&format!("{}:9100", ip(1))),
        "{f:#?}"
    );
    workers[0] = Some(worker(&lab, 1, 9100));

    // The process group's port on box 2 taken by another program.
    let squatter = worker(&lab, 2, 9000);
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    let f = failures(&checks);
    assert_eq!(code, 1);
    assert!(
        f.iter().any(|x| x.contains("stand-in")
            && x.contains(&format!("{}:9000", ip(2)))
            && x.contains("in use by another program")),
        "{f:#?}"
    );
    drop(squatter);

    // A one-way filter: box 3 drops new connections from box 1 to 9000,
    // while box 3 still reaches box 1.
    lab.nft(
        3,
        &format!(
            "table inet oneway {{ chain input {{ type filter hook input priority 0; \
             ip saddr {} tcp dport 9000 ct state new drop; }}; }}",
            ip(1)
        ),
    )
    .unwrap();
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    let f = failures(&checks);
    assert_eq!(code, 1);
    assert_eq!(f.len(), 1, "only rank 0 -> rank 2: {f:#?}");
    assert!(
        f[0].contains("one-way filter") && f[0].contains(&ip(1)),
        "{f:#?}"
    );
    lab.nft(3, "delete table inet oneway").unwrap();

    mtu_black_hole(&lab, 1, 2, 1400);
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    let f = failures(&checks);
    assert_eq!(code, 1);
    assert_eq!(f.len(), 1, "only rank 0 -> rank 1: {f:#?}");
    assert!(
        f[0].contains("MTU black hole") && f[0].contains(&format!("{}:9000", ip(2))),
        "{f:#?}"
    );
    lab.nft(2, "delete table inet blackhole").unwrap();

    // An address only the coordinator reaches: rank 2 at box 3's private
    // address, which boxes 1 and 2 have no route to.
    let mut private = lan.clone();
    private[2] = format!("{}:9000", PRIVATE[1]);
    let (code, checks) = check(&lab, dir.path(), &cfg, &private);
    let f = failures(&checks);
    assert_eq!(code, 1);
    assert_eq!(f.len(), 2, "ranks 0 and 1 -> rank 2: {f:#?}");
    assert!(
        f.iter()
            .all(|x| x.contains("only the coordinator reaches 10.88.0.3")),
        "{f:#?}"
    );

    // And healthy again once every fault is gone.
    let (code, checks) = check(&lab, dir.path(), &cfg, &lan);
    assert_eq!(failures(&checks), Vec::<String>::new());
    assert_eq!(code, 0);
}

/// An MTU black hole at `bytes` from host `from` to host `to`: small
/// packets pass, larger ones vanish without an ICMP answer. On a wire the
/// sender's NIC cuts TCP into MTU-size frames before any middlebox sees
/// them; a veth hands over whole 64 KiB GSO packets instead, so `from` is
/// told to send one segment per packet, as a NIC puts them on the wire.
/// `lab.nft(to, "delete table inet blackhole")` removes it.
pub(super) fn mtu_black_hole(lab: &Lab, from: usize, to: usize, bytes: u16) {
    lab.exec(
        from,
        "ip",
        &["link", "set", "dev", "eth0", "gso_max_segs", "1"],
    )
    .unwrap();
    lab.nft(
        to,
        &format!(
            "table inet blackhole {{ chain input {{ type filter hook input priority 0; \
             ip saddr {} ip length > {bytes} drop; }}; }}",
            lab.host(from).ip
        ),
    )
    .unwrap();
}
