//! Subnet discovery end to end, inside a private network of namespaces this
//! test builds: the scanner on one host, listeners on two others, and every
//! other address of the /24 silently dropping SYNs (nftables in the scanner's
//! namespace), so each connect to them waits for its whole timeout.

use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::net::Ipv4Addr;
use std::process::{Command, Output};

fn lab(hosts: usize) -> Option<Lab> {
    Some(require_lab()?.hosts(hosts))
}

/// Starts a plain TCP listener (not an rlx agent) on `port` in host `i`.
fn listener(lab: &Lab, i: usize, port: u16) -> Proc {
    let mut c = Command::new(PYTHON);
    c.args([
        "-c",
        &format!(
            "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
             s.bind(('0.0.0.0',{port}))\ns.listen(64)\nprint('listening',flush=True)\n\
             while True:\n  c,_=s.accept()\n  c.close()\n"
        ),
    ]);
    let p = Proc::spawn(lab, i, c);
    p.expect_output("listening", std::time::Duration::from_secs(10));
    p
}

fn run_ok(lab: &Lab, i: usize, args: &[&str]) -> (Output, serde_json::Value) {
    let out = lab
        .command(i, discover_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, v)
}

/// `expand --format json` in host 0 of a config scanning `block` (mDNS off),
/// with `extra` lines in `[discover]`.
fn expand_subnet(lab: &Lab, block: ipnet::Ipv4Net, extra: &str) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        format!("[discover]\nsubnet = \"{block}\"\nmdns = false\n{extra}"),
    )
    .unwrap();
    run_ok(
        lab,
        0,
        &["expand", "--format", "json", cfg.to_str().unwrap()],
    )
}

fn block_of(ip: Ipv4Addr) -> ipnet::Ipv4Net {
    ipnet::Ipv4Net::new(ip, 24).unwrap().trunc()
}

#[test]
fn two_listeners_are_found_and_silent_hosts_cost_one_timeout_in_total() {
    if !peer::require(
        "two_listeners_are_found_and_silent_hosts_cost_one_timeout_in_total",
        &[Peer::Nftables, Peer::Python],
    ) {
        return;
    }
    let Some(lab) = lab(3) else { return };
    let (a, b) = (lab.host(1).ip, lab.host(2).ip);
    let _la = listener(&lab, 1, 9100);
    let _lb = listener(&lab, 2, 9100);
    let block = block_of(a);
    lab.silence_tcp(0, block, 9100, &[a, b]).unwrap();
    lab.silence_tcp(0, block, 6184, &[a, b]).unwrap();
    let (out, v) = run_ok(
        &lab,
        0,
        &["scan", &block.to_string(), "--json", "--timeout-ms", "300"],
    );
    assert!(out.status.success(), "{v}");
    let open: Vec<&str> = v["open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(open, vec![format!("{a}:9100"), format!("{b}:9100")], "{v}");
    assert!(
        v["silent"].as_u64().unwrap() >= 250,
        "the rest of the /24 is silent: {v}"
    );
    // 251 silent addresses at 300 ms each would take 75 s serially; the
    // concurrent scan pays about one timeout. A loose bound (a loaded CI
    // box), not a speed test: the benchmark suite measures speed.
    let ms = v["elapsed_ms"].as_u64().unwrap();
    assert!(ms < 3_000, "scan of a silent /24 took {ms} ms");
}

#[test]
fn listeners_that_do_not_speak_the_handshake_become_default_nodes_with_a_warning() {
    if !peer::require(
        "listeners_that_do_not_speak_the_handshake_become_default_nodes_with_a_warning",
        &[Peer::Nftables, Peer::Python],
    ) {
        return;
    }
    let Some(lab) = lab(3) else { return };
    let (a, b) = (lab.host(1).ip, lab.host(2).ip);
    let _la = listener(&lab, 1, 9100);
    let _lb = listener(&lab, 2, 9100);
    let block = block_of(a);
    lab.silence_tcp(0, block, 9100, &[a, b]).unwrap();
    lab.silence_tcp(0, block, 6184, &[a, b]).unwrap();
    let (out, v) = expand_subnet(&lab, block, "ckpt_dir = \"/data\"\n");
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let addrs: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["addr"].as_str().unwrap())
        .collect();
    assert_eq!(addrs, vec![format!("{a}:9100"), format!("{b}:9100")]);
    for n in v["nodes"].as_array().unwrap() {
        assert_eq!(n["device"], "cpu");
        assert_eq!(n["ckpt_dir"], "/data");
    }
    // One warning per unvouched listener (the file's missing `model` has
    // its own).
    let unvouched: Vec<&str> = v["report"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.contains("no rlx-agent answered beside it, so nothing vouched for it"))
        .collect();
    assert_eq!(unvouched.len(), 2, "{v:#}");
}

/// The guard: a scan from the machine's own network namespace is refused
/// when RLX_NETNS_GUARD=1, with a message that says why. (The target is
/// loopback, so even a broken guard could not send a packet off the machine.)
#[test]
fn a_scan_from_the_host_namespace_is_refused_under_the_guard() {
    let out = Command::new(discover_bin())
        .args(["scan", "127.0.0.0/30"])
        .env("RLX_NETNS_GUARD", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("namespace"), "{err}");
}

/// A 2x24 GB CUDA box, as an agent would report it.
const CUDA_BOX: &str = r#"{"id":"c0da000000000001","hostname":"gpu-a","os":"linux","arch":"x86_64",
 "cores":32,"ram_total":137438953472,"ram_avail":120000000000,"disk_free":900000000000,
 "devices":[{"device":"cpu","name":"cpu","mem_bytes":0},
            {"device":"cuda","name":"RTX 4090","mem_bytes":25769803776},
            {"device":"cuda","name":"RTX 4090","mem_bytes":25769803776}]}"#;

/// A listener that answers the agent handshake gives real caps (and so the
/// right device); a plain listener beside it still becomes a default node.
#[test]
fn an_agent_found_by_the_scan_is_planned_from_its_handshake_caps() {
    if !peer::require(
        "an_agent_found_by_the_scan_is_planned_from_its_handshake_caps",
        &[Peer::Nftables, Peer::Python],
    ) {
        return;
    }
    let Some(lab) = lab(3) else { return };
    let (a, b) = (lab.host(1).ip, lab.host(2).ip);
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("cuda.json");
    std::fs::write(&caps, CUDA_BOX).unwrap();
    let mut agent = Command::new(agent_bin());
    // The agent on its own port (6184), no worker: the scan asks both.
    agent.args(["--caps-file", caps.to_str().unwrap()]);
    let agent = Proc::spawn(&lab, 1, agent);
    agent.expect_output(
        "answering the handshake",
        std::time::Duration::from_secs(10),
    );
    let _plain = listener(&lab, 2, 9100);
    let block = block_of(a);
    lab.silence_tcp(0, block, 9100, &[a, b]).unwrap();
    lab.silence_tcp(0, block, 6184, &[a, b]).unwrap();
    let (out, v) = expand_subnet(&lab, block, "");
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v:#}");
    assert_eq!(nodes[0]["addr"], format!("{a}:9100"));
    assert_eq!(nodes[0]["device"], "cuda", "{v:#}");
    assert_eq!(nodes[1]["device"], "cpu");
    let added = v["report"]["added"].as_array().unwrap();
    assert_eq!(added[0]["evidence"], "handshake");
    assert_eq!(added[0]["id"], "c0da000000000001");
    assert_eq!(added[0]["mem_bytes"].as_u64(), Some(25769803776));
    assert_eq!(added[1]["evidence"], "tcp_only");
}
