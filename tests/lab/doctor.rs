//! `rlx-discover doctor` on a private LAN of namespaces: a healthy host
//! passes every check and names the agent that answered; a host whose
//! firewall drops UDP 5353 fails the firewall check with the rule and its
//! fix, the test query goes unanswered, and the exit code is 1; an agent
//! whose clock is off is a `clock` warning with its offset.

use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(20);

fn start_agent(lab: &Lab, host: usize, dir: &Path) -> Proc {
    start_agent_under(lab, host, dir, None)
}

/// The agent, run under `faketime -f <offset>` when an offset is given: its
/// wall clock is that far off, and its timers (the monotonic clock) are not.
fn start_agent_under(lab: &Lab, host: usize, dir: &Path, offset: Option<&str>) -> Proc {
    let caps = dir.join("box.json");
    std::fs::write(
        &caps,
        r#"{"id":"00000000000000d1","hostname":"box","os":"linux","arch":"x86_64","cores":8,
            "ram_total":68719476736,"ram_avail":60000000000,
            "devices":[{"device":"cpu","name":"cpu","mem_bytes":0}]}"#,
    )
    .unwrap();
    let mut cmd = match offset {
        None => Command::new(agent_bin()),
        Some(off) => {
            let mut c = Command::new("faketime");
            c.args(["-f", off])
                .arg(agent_bin())
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            c
        }
    };
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box"])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// `rlx-discover doctor --json` on host 0: (exit code, the diagnosis).
fn doctor(lab: &Lab) -> (i32, Value) {
    let out = lab
        .command(0, discover_bin())
        .args(["doctor", "--json", "--browse-ms", "2000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{text}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {v:#}"))
}

#[test]
fn on_a_healthy_host_every_check_passes_and_the_answering_agent_is_named() {
    // The firewall check reads the nftables ruleset: without nft it says
    // `skip`, not `ok`.
    if !peer::require(
        "on_a_healthy_host_every_check_passes_and_the_answering_agent_is_named",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 1, dir.path());
    let (code, v) = doctor(&lab);
    assert_eq!(code, 0, "a healthy host exits 0: {v:#}");
    assert_eq!(v["healthy"], true, "{v:#}");
    for name in [
        "interfaces",
        "multicast route",
        "firewall",
        "groups",
        "mdns query",
        "handshake",
    ] {
        assert_eq!(check(&v, name)["status"], "ok", "{name}: {v:#}");
    }
    let clock = check(&v, "clock");
    assert_eq!(clock["status"], "ok", "one clock, one machine: {v:#}");
    assert!(
        clock["detail"].as_str().unwrap().contains("box"),
        "the agent compared is named: {clock}"
    );
    let q = check(&v, "mdns query")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        q.contains("box") && q.contains("eth0"),
        "the agent and the interface are named: {q}"
    );
    let fw = check(&v, "firewall")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fw.contains("nftables"),
        "the ruleset that was read is named: {fw}"
    );
}

#[test]
fn a_firewall_that_drops_mdns_fails_with_the_rule_and_its_fix() {
    if !peer::require(
        "a_firewall_that_drops_mdns_fails_with_the_rule_and_its_fix",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 1, dir.path());
    lab.nft(
        0,
        "add table inet fw\n\
         add chain inet fw input { type filter hook input priority 0; policy accept; }\n\
         add rule inet fw input udp dport 5353 drop\n",
    )
    .unwrap();
    let (code, v) = doctor(&lab);
    assert_eq!(code, 1, "a failed check exits 1: {v:#}");
    assert_eq!(v["healthy"], false);
    let fw = check(&v, "firewall");
    assert_eq!(fw["status"], "fail", "{v:#}");
    let detail = fw["detail"].as_str().unwrap();
    assert!(
        detail.contains("inet fw input") && detail.contains("udp 5353"),
        "the chain and what it stops are named: {detail}"
    );
    assert!(
        fw["fix"].as_str().unwrap().contains("5353"),
        "the fix says what to let through: {fw}"
    );
}

#[test]
fn an_agent_heard_whose_port_is_blocked_fails_the_handshake_check() {
    if !peer::require(
        "an_agent_heard_whose_port_is_blocked_fails_the_handshake_check",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 1, dir.path());
    // The worker's own firewall: mDNS passes, the handshake port does not.
    lab.nft(
        1,
        "add table inet fw\n\
         add chain inet fw input { type filter hook input priority 0; policy accept; }\n\
         add rule inet fw input tcp dport 6184 drop\n",
    )
    .unwrap();
    let (code, v) = doctor(&lab);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(
        check(&v, "mdns query")["status"],
        "ok",
        "the agent is heard: {v:#}"
    );
    let h = check(&v, "handshake");
    assert_eq!(h["status"], "fail", "{v:#}");
    assert!(
        h["detail"].as_str().unwrap().contains("box"),
        "the agent is named: {h}"
    );
    assert!(h["fix"].as_str().unwrap().contains("TCP 6184"), "{h}");
}

#[test]
fn an_agent_whose_clock_is_off_by_seconds_is_a_clock_warning_with_its_offset() {
    if !peer::require(
        "an_agent_whose_clock_is_off_by_seconds_is_a_clock_warning_with_its_offset",
        &[Peer::Faketime],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent_under(&lab, 1, dir.path(), Some("+45s"));
    let (code, v) = doctor(&lab);
    let c = check(&v, "clock");
    assert_eq!(c["status"], "warn", "{v:#}");
    assert_eq!(
        code, 0,
        "a skewed clock is a warning: discovery still works: {v:#}"
    );
    let detail = c["detail"].as_str().unwrap();
    // "box +45.003 s (± 1 ms)": the offset faketime set, to within the
    // reading's bound and the agent's start-up.
    let secs: f64 = detail
        .split("box +")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the agent and its offset are named: {detail}"));
    assert!((44.5..46.0).contains(&secs), "{detail}");
    assert!(c["fix"].as_str().unwrap().contains("NTP"), "{c}");
}

/// Guards against a doctor that multicasts from the machine's own network
/// namespace: under `RLX_NETNS_GUARD=1` its packet-sending checks are
/// skipped with the guard's reason, and the read-only ones still run.
#[test]
fn under_the_guard_in_the_root_namespace_the_doctor_sends_nothing_and_says_why() {
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    if own.to_string_lossy() != "net:[4026531833]" {
        rlx_lab::kit::peer::skip(&format!(
            "under_the_guard_in_the_root_namespace_the_doctor_sends_nothing_and_says_why: \
             not in the initial network namespace ({own:?})"
        ));
        return;
    }
    // The interface does not exist, so even a broken guard would find no
    // interface to send on: nothing can reach the real network.
    let out = Command::new(discover_bin())
        .args(["doctor", "--json", "--interface", "rlx-no-such-if"])
        .env("RLX_NETNS_GUARD", "1")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the interface check fails: {v:#}"
    );
    let g = check(&v, "groups");
    assert_eq!(g["status"], "skip", "{v:#}");
    assert!(
        g["detail"].as_str().unwrap().contains("RLX_NETNS_GUARD"),
        "the guard is named: {g}"
    );
    assert_eq!(check(&v, "mdns query")["status"], "skip");
    assert_eq!(check(&v, "interfaces")["status"], "fail");
}
