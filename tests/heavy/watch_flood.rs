//! **`watch` under a flood**: a stranger announcing 10,000 bogus
//! `_rlx._tcp` instances (`lab/py/flood.py`, the generator of
//! `tests/trust/admission.rs`) must neither keep real agents started after
//! it from joining nor grow the coordinator without bound.
//!
//! Guards against the continuous browse counting the address an
//! announcement names as its source (one share per made-up address: the
//! flood filled the 4096-slot table and later agents never joined), the
//! table never dropping entries, and refused sightings being handed to
//! admission inline on every snapshot (the loop stuck dialling the flood).
//!
//! Everything runs inside namespaces built by [`rlx_lab`]; the test skips
//! (or fails under `CI=true`) where no lab or python-zeroconf is there.

use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, agent_bin, discover_bin, require_lab, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long an agent or the flooder may take to start announcing.
const UP: Duration = Duration::from_secs(30);

/// Bogus instances in the flood (the 10,000 of docs/security.md, "`watch`
/// under a flood").
const FLOOD_INSTANCES: usize = 10_000;

/// How long after its start each real agent must have joined. Measured:
/// see docs/security.md ("watch under a flood"); the bound leaves room for
/// a loaded 2-core CI box running the flooder.
const JOIN_BOUND: Duration = Duration::from_secs(20);

/// Peak RSS `watch` may reach under the flood (documented in
/// docs/security.md): the same bound as the one-shot browse's.
const RSS_BOUND_KB: u64 = 96 * 1024;

/// Most bogus instances `watch` may refuse: one flooding source holds at
/// most `MAX_INSTANCES_PER_SOURCE` (64) slots heard from itself and the
/// `MAX_UNSOURCED` (256) slots heard through mdns-sd, each refused once per
/// reason. Before the fix it refused thousands.
const MAX_BOGUS_REFUSALS: usize = 2 * (64 + 256);

/// `rlx-discover keygen PATH`.
fn keygen(path: &Path) {
    kit::run_ok(Command::new(discover_bin()).arg("keygen").arg(path));
}

/// A real agent `box{i}` on host `i` with the cluster key.
fn agent(lab: &Lab, i: usize, key: &Path, dir: &Path) -> Proc {
    let caps = format!(
        r#"{{"id":"a{i:015x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    );
    let caps_file = dir.join(format!("box{i}.json"));
    std::fs::write(&caps_file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", &format!("box{i}")])
        .arg("--key-file")
        .arg(key);
    Proc::spawn(lab, i, cmd)
}

/// The events `watch --json` printed so far.
fn events(w: &Proc) -> Vec<Value> {
    w.0.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn count(evs: &[Value], kind: &str) -> usize {
    evs.iter().filter(|e| e["event"] == kind).count()
}

/// The peak RSS of process `pid` so far, KiB (`VmHWM` in /proc), if it is
/// `rlx-discover` itself and still running.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    assert_eq!(
        comm.trim(),
        "rlx-discover",
        "the lab runs the program itself"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// 10,000 bogus instances from one stranger, `watch` with a cluster key
/// started under the flood, then three real agents: each joins within
/// [`JOIN_BOUND`] of its start, nothing bogus joins, the flood is refused
/// a bounded number of times, and watch's peak RSS stays under
/// [`RSS_BOUND_KB`].
#[test]
fn real_agents_started_after_a_flood_of_ten_thousand_bogus_instances_still_join_watch_and_its_memory_stays_bounded(
) {
    let _alone = crate::alone();
    let name = "real_agents_started_after_a_flood_of_ten_thousand_bogus_instances_still_join_watch_and_its_memory_stays_bounded";
    if !peer::require(name, &[Peer::PythonZeroconf]) {
        return;
    }
    let Some(labs) = require_lab() else {
        return;
    };
    let lab = labs.hosts(5);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    keygen(&key);

    let flood = kit::script("flood.py");
    let ip = lab.host(4).ip;
    let prefix = format!("{}.{}", ip.octets()[0], ip.octets()[1]);
    let mut cmd = Command::new(PYTHON);
    cmd.arg(&flood).args([
        &ip.to_string(),
        &FLOOD_INSTANCES.to_string(),
        "120",
        &prefix,
    ]);
    let flooder = Proc::spawn(&lab, 4, cmd);
    flooder.expect_output("round 2", UP);

    let cfg = d.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!("[discover]\nkey_file = {:?}\n", key.display().to_string()),
    )
    .unwrap();
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--for-ms", "90000", "--config"])
        .arg(&cfg)
        .env(
            "RUST_LOG",
            std::env::var("WATCH_LOG").unwrap_or("warn".into()),
        );
    let t0 = Instant::now();
    let w = Proc::spawn(&lab, 0, cmd);
    let pid = w.0.pid();

    // The flood is heard and being refused before any real agent starts.
    kit::eventually(Duration::from_secs(30), "watch refusing the flood", || {
        let n = count(&events(&w), "refused");
        if n >= 10 {
            Ok(())
        } else {
            Err(format!("{n} refusals so far; {}", w.0.dump()))
        }
    });

    let started_ms = t0.elapsed().as_millis() as u64;
    let agents: Vec<Proc> = (1..=3).map(|i| agent(&lab, i, &key, d)).collect();
    let mut peak = 0;
    let joined = kit::eventually(JOIN_BOUND + UP, "the real agents joining", || {
        peak = peak.max(peak_rss_kb(pid).unwrap_or(0));
        let evs = events(&w);
        let at: Vec<u64> = (1..=3)
            .filter_map(|i| {
                let box_i = format!("box{i}");
                evs.iter()
                    .find(|e| e["event"] == "joined" && e["instance"] == box_i.as_str())
                    .and_then(|e| e["at_ms"].as_u64())
            })
            .collect();
        if at.len() == 3 {
            Ok(at)
        } else {
            Err(format!(
                "{} of 3 joined; {} events ({} refused)",
                at.len(),
                evs.len(),
                count(&evs, "refused")
            ))
        }
    });
    let _ = &agents;
    peak = peak.max(peak_rss_kb(pid).unwrap_or(0));
    let evs = events(&w);
    let last = joined.iter().max().copied().unwrap_or(0);
    eprintln!(
        "watch under a flood of {FLOOD_INSTANCES}: agents started at {started_ms} ms, joined at \
         {joined:?} ms (the last {} ms after its start); {} refused, {} joined in all; peak RSS \
         {peak} KiB",
        last.saturating_sub(started_ms),
        count(&evs, "refused"),
        count(&evs, "joined"),
    );
    assert!(
        last <= started_ms + JOIN_BOUND.as_millis() as u64,
        "the last real agent joined {} ms after its start, over {JOIN_BOUND:?}",
        last - started_ms
    );
    assert_eq!(count(&evs, "joined"), 3, "only the real agents: {evs:?}");
    assert!(
        count(&evs, "refused") <= MAX_BOGUS_REFUSALS,
        "{} refusals: the flood got more than its sources' shares",
        count(&evs, "refused")
    );
    assert!(peak > 0, "peak RSS read from /proc/{pid}/status");
    assert!(
        peak <= RSS_BOUND_KB,
        "watch's peak RSS {peak} KiB over the documented bound {RSS_BOUND_KB} KiB"
    );
    drop(flooder);
}
