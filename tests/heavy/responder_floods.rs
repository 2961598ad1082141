//! **A stranger's flood cannot grow an agent or `watch`**: a host on the
//! LAN with no key floods the mDNS group from port 5353 for 15 s at 400
//! packets/s (`lab/py/responder_flood.py`) while an agent announces and a
//! `watch --json` follows it:
//!
//! - `tc`: truncated PTR queries for `_rlx._tcp.local.`, each with
//!   follow-up known-answer packets (one of them truncated again), which a
//!   responder holds for RFC 6762 §7.2;
//! - `records`: unsolicited responses with no PTR, carrying SRV, TXT and A
//!   records of made-up names under `_rlx._tcp` and other types.
//!
//! The agent's peak RSS stays within [`AGENT_GROWTH_KB`] of its idle RSS,
//! `watch`'s within [`WATCH_GROWTH_KB`] of its own, the agent is never
//! reported `left`, a fresh browse still finds it, and an agent started
//! after the flood still joins.
//!
//! Guards against PATCHES.md §28 of the vendored mdns-sd: the held query
//! took every follow-up's answers and each truncated one extended the hold
//! (an agent went from 6.2 MB to 63 MB), and a response without a PTR was
//! cached whole (6.0 MB to 67 MB, kept).
//!
//! Everything runs inside namespaces built by [`rlx_lab`]; the test skips
//! (or fails under `CI=true`) where no lab or python-zeroconf is there.

use rlx_lab::kit::discover::{browse_once, sightings_by_host};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, agent_bin, discover_bin, require_lab, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to join `watch`.
const UP: Duration = Duration::from_secs(30);

/// The flood: seconds and packets per second (the issue's tries: about 400
/// packets/s for 20 s took an agent past 60 MB).
const FLOOD_S: &str = "15";
const FLOOD_RATE: &str = "400";

/// How far the agent's peak RSS may rise above its idle RSS under a flood:
/// "a few MB" (its held queries stay under 1 MB and it caches nothing it
/// did not ask for; the rest is allocator slack and socket buffers).
const AGENT_GROWTH_KB: u64 = 6 * 1024;

/// How far `watch`'s may rise: it browses `_rlx._tcp`, so the junk under
/// that type is cached, up to the cache's 8,192 records (under 5 MB), plus
/// its own refusal tables.
const WATCH_GROWTH_KB: u64 = 16 * 1024;

/// Host roles.
const WATCH: usize = 0;
const AGENT: usize = 1;
const LATE_AGENT: usize = 2;
const STRANGER: usize = 3;

/// `box{i}`'s agent on host `i`.
fn agent(lab: &Lab, i: usize, dir: &Path) -> Proc {
    let caps = format!(
        r#"{{"id":"c{i:015x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    );
    let caps_file = dir.join(format!("box{i}.json"));
    std::fs::write(&caps_file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", &format!("box{i}")]);
    Proc::spawn(lab, i, cmd)
}

/// `field` (`VmRSS` or `VmHWM`) of process `pid` running `comm`, KiB.
fn mem_kb(pid: u32, comm: &str, field: &str) -> u64 {
    let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert_eq!(
        c.trim(),
        comm,
        "process {pid} is {comm} itself, and still runs"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Waits until `watch` has reported `instance` joined.
fn joined(w: &Proc, instance: &str) {
    kit::eventually(UP, &format!("{instance} joined"), || {
        w.json_lines()
            .iter()
            .any(|e| e["event"] == "joined" && e["instance"] == instance)
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    });
}

/// One flood of `kind` against an agent and a `watch`, judged.
fn flood(kind: &str) {
    let Some(labs) = require_lab() else {
        return;
    };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let a = agent(&lab, AGENT, dir.path());
    let iface = lab.host(WATCH).iface.clone();
    let mut cmd = lab.command(WATCH, discover_bin());
    cmd.args([
        "watch",
        "--json",
        "--for-ms",
        "120000",
        "--interface",
        &iface,
    ])
    .env("RUST_LOG", "warn");
    let w = Proc::spawn(&lab, WATCH, cmd);
    joined(&w, "box1");
    // Idle: past the agent's announcements and watch's first checks.
    std::thread::sleep(Duration::from_secs(3));
    let agent_idle = mem_kb(a.0.pid(), "rlx-agent", "VmRSS");
    let watch_idle = mem_kb(w.0.pid(), "rlx-discover", "VmRSS");

    let src = lab.host(STRANGER).ip.to_string();
    let mut cmd = lab.command(STRANGER, PYTHON);
    cmd.arg(kit::script("responder_flood.py"))
        .args([kind, &src, FLOOD_S, FLOOD_RATE]);
    let f = Proc::spawn(&lab, STRANGER, cmd);
    f.expect_output("\"sent\"", Duration::from_secs(60));
    let sent: Value = f
        .json_lines()
        .into_iter()
        .find(|v| v.get("sent").is_some())
        .unwrap();
    // The last held queries answered, the last records judged.
    std::thread::sleep(Duration::from_secs(2));
    let agent_peak = mem_kb(a.0.pid(), "rlx-agent", "VmHWM");
    let watch_peak = mem_kb(w.0.pid(), "rlx-discover", "VmHWM");
    eprintln!(
        "{kind} flood ({sent}): agent RSS idle {agent_idle} kB, peak {agent_peak} kB; \
         watch idle {watch_idle} kB, peak {watch_peak} kB"
    );
    assert!(
        agent_peak <= agent_idle + AGENT_GROWTH_KB,
        "{kind} flood grew the agent from {agent_idle} kB to {agent_peak} kB"
    );
    assert!(
        watch_peak <= watch_idle + WATCH_GROWTH_KB,
        "{kind} flood grew watch from {watch_idle} kB to {watch_peak} kB"
    );

    // Still working: a fresh browse finds the agent, a new agent joins, and
    // the first was never reported left.
    let b = browse_once(&lab, WATCH, &["--browse-ms", "1500"]);
    let found = sightings_by_host(&b);
    assert!(
        found.contains_key("box1"),
        "browse after the {kind} flood: {b}"
    );
    let _late = agent(&lab, LATE_AGENT, dir.path());
    joined(&w, "box2");
    let lefts: Vec<Value> = w
        .json_lines()
        .into_iter()
        .filter(|e| e["event"] == "left")
        .collect();
    assert!(lefts.is_empty(), "{kind} flood: {lefts:?}");
    drop(a);
}

#[test]
fn an_agent_and_watch_flooded_with_truncated_queries_and_their_known_answers_stay_within_a_few_mb_and_keep_working(
) {
    let _alone = crate::alone();
    let name = "an_agent_and_watch_flooded_with_truncated_queries_and_their_known_answers_stay_within_a_few_mb_and_keep_working";
    if peer::require(name, &[Peer::PythonZeroconf]) {
        flood("tc");
    }
}

#[test]
fn an_agent_and_watch_flooded_with_unsolicited_records_stay_within_a_few_mb_and_keep_working() {
    let _alone = crate::alone();
    let name =
        "an_agent_and_watch_flooded_with_unsolicited_records_stay_within_a_few_mb_and_keep_working";
    if peer::require(name, &[Peer::PythonZeroconf]) {
        flood("records");
    }
}
