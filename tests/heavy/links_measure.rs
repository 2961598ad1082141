//! **Link measurement against iperf3** (docs/protocol.md, "Link measurement on
//! the agent's port"): two agents behind links shaped with tbf to 100 Mbit/s
//! and 1 Gbit/s, measured by `rlx-discover browse --links` and by iperf3 in the
//! same namespaces in the same run. Ours must be within 10% of iperf3's for
//! each link and direction.
//!
//! Each link is shaped in both directions: on the agent's `eth0` (agent to
//! coordinator, the download) and on its switch port (coordinator to agent,
//! the upload). Each of three rounds runs ours and iperf3 back to back, and
//! the figures compared are each tool's best round: on this 2-core machine
//! the 1 Gbit/s link is bound by the CPU as much as by the shaping, and a
//! burst of other load only ever lowers a round's throughput, so the best
//! round is each tool's least disturbed one. (The median was compared
//! before; iperf3's own rounds spread 849-953 Mbit/s in one run, wider than
//! the 10% asked of us, and the test failed on iperf3's noise.)

use rlx_lab::kit::peer::{require, Peer};
use rlx_lab::kit::{self, discover};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(20);

/// The two shaped links: host, tbf rate, burst, and the rate in Mbit/s.
const LINKS: [(usize, &str, &str, f64); 2] =
    [(1, "100mbit", "128kb", 100.0), (2, "1gbit", "1mb", 1000.0)];

fn caps_json(i: usize) -> String {
    format!(
        r#"{{"id":"b{i:015x}","hostname":"link{i}","os":"linux","arch":"x86_64","cores":4,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    )
}

fn tc(ns: &str, dev: &str, rate: &str, burst: &str) {
    kit::run_ok(Command::new("ip").args([
        "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
        "burst", burst, "latency", "20ms",
    ]));
}

/// Shapes host `i`'s link to `rate` both ways.
fn shape(lab: &Lab, i: usize, rate: &str, burst: &str) {
    let h = lab.host(i);
    tc(&h.ns, &h.iface, rate, burst);
    let sw = lab.switch_ns().expect("a switched lab");
    tc(
        sw,
        h.switch_port.as_deref().expect("a switch port"),
        rate,
        burst,
    );
}

/// iperf3's receiver-side rate from host 0 to host `i` (`reverse`: from
/// host `i` to host 0), Mbit/s. An iperf3 server listens anew after each
/// test, so a client started in that gap is refused: it is started again.
fn iperf3(lab: &Lab, i: usize, reverse: bool) -> f64 {
    kit::eventually(
        Duration::from_secs(10),
        "iperf3's server listening again",
        || iperf3_once(lab, i, reverse),
    )
}

/// One iperf3 run: its rate, or what it printed instead.
fn iperf3_once(lab: &Lab, i: usize, reverse: bool) -> Result<f64, String> {
    let ip = lab.host(i).ip.to_string();
    let mut cmd = lab.command(0, "iperf3");
    cmd.args(["-c", &ip, "-t", "2", "-J"]);
    if reverse {
        cmd.arg("-R");
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run iperf3: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J prints JSON");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e6)
        .ok_or_else(|| format!("no end.sum_received in {v}"))
}

/// One `browse --links --json` from host 0: (up, down) Mbit/s by host.
fn ours(lab: &Lab) -> Vec<(usize, f64, f64)> {
    let out = kit::run_ok(
        lab.command(0, discover_bin())
            .args(["browse", "--links", "--json", "--browse-ms", "1500"])
            .env("RUST_LOG", "info"),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("browse --json");
    let mut found = Vec::new();
    for (i, ..) in LINKS {
        let node = v["nodes"]
            .as_array()
            .and_then(|ns| {
                ns.iter()
                    .find(|n| n["hostname"] == format!("link{i}").as_str())
            })
            .unwrap_or_else(|| panic!("link{i} not found: {v:#}"));
        let link = &node["measured_link"];
        assert!(
            link.is_object(),
            "link{i} not measured: {:#}",
            v["report"]["link_problems"]
        );
        found.push((
            i,
            link["up_mbps"].as_f64().unwrap(),
            link["down_mbps"].as_f64().unwrap(),
        ));
    }
    found
}

/// The best of a tool's rounds: load on the box only ever slows a round.
fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn measured_links_are_within_ten_percent_of_iperf3_at_100_mbit_and_1_gbit() {
    let _alone = crate::alone();
    let Some(labs) = require_lab() else { return };
    if !require(
        "measured_links_are_within_ten_percent_of_iperf3_at_100_mbit_and_1_gbit",
        &[Peer::Iperf3],
    ) {
        return;
    }
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let mut procs: Vec<Proc> = Vec::new();
    for (i, rate, burst, _) in LINKS {
        shape(&lab, i, rate, burst);
        let caps = dir.path().join(format!("caps{i}.json"));
        std::fs::write(&caps, caps_json(i)).unwrap();
        let mut cmd = Command::new(agent_bin());
        cmd.arg("--caps-file")
            .arg(&caps)
            .args(["--name", &format!("link{i}")])
            // Keyless agents measure only when told to (docs/security.md,
            // "Link measurement"), and this test measures each four times
            // in a minute.
            .args(["--measure", "any", "--measure-per-minute", "60"])
            .env("RUST_LOG", "debug");
        let agent = Proc::spawn(&lab, i, cmd);
        agent.expect_output("mDNS: announced on", UP);
        procs.push(agent);
        let mut srv = Command::new("iperf3");
        // Unflushed, iperf3's stdout to a file stays empty until it exits.
        srv.args(["-s", "--forceflush"]);
        let srv = Proc::spawn(&lab, i, srv);
        srv.expect_output("Server listening", UP);
        procs.push(srv);
    }

    // rounds[link][direction] = (ours, iperf3) per round.
    let mut rounds = vec![[Vec::new(), Vec::new(), Vec::new(), Vec::new()]; LINKS.len()];
    for _ in 0..3 {
        for (k, (_, up, down)) in ours(&lab).into_iter().enumerate() {
            rounds[k][0].push(up);
            rounds[k][2].push(down);
        }
        for (k, (i, ..)) in LINKS.iter().enumerate() {
            rounds[k][1].push(iperf3(&lab, *i, false));
            rounds[k][3].push(iperf3(&lab, *i, true));
        }
    }
    let mut failures = Vec::new();
    for (k, (_, rate, _, nominal)) in LINKS.iter().enumerate() {
        for (dir, o, r) in [("up", 0, 1), ("down", 2, 3)] {
            let ours = best(&rounds[k][o]);
            let theirs = best(&rounds[k][r]);
            let off = (ours - theirs).abs() / theirs;
            eprintln!(
                "{rate} {dir}: ours best {ours:.1} Mbit/s (rounds {:.1?}), iperf3 best {theirs:.1} \
                 (rounds {:.1?}), {:.1}% apart",
                rounds[k][o],
                rounds[k][r],
                off * 100.0
            );
            assert!(
                theirs > nominal * 0.5 && theirs < nominal * 1.1,
                "iperf3 saw {theirs:.1} Mbit/s on the {rate} link: the shaping did not take"
            );
            if off > 0.10 {
                failures.push(format!(
                    "{rate} {dir}: ours {ours:.1} vs iperf3 {theirs:.1} Mbit/s"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "more than 10% off: {failures:?}");

    // `expand --links --write` puts the figures in each `# found by` comment.
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\nbrowse_ms = 1500\n").unwrap();
    let e = discover::expand(&lab, &cfg, &["--links", "--write"]);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let comments: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# found by"))
        .collect();
    assert_eq!(comments.len(), 2, "{text}");
    // A 1 Gbit/s link measures either side of 1000 Mbit/s, so its figure
    // reads "1.0 Gbit/s up" in one run and "979 Mbit/s up" in another.
    assert!(
        comments
            .iter()
            .all(|c| c.contains(" ms, ") && c.contains("bit/s up, ") && c.contains(" down")),
        "{text}"
    );
    drop(procs);
}
