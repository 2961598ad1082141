//! **Busy boxes, crashes, cut links and partitions**, as `watch --json`
//! reports them (docs/membership.md): real agents in namespaces, each
//! followed over its liveness connection.
//!
//! - An agent SIGSTOPped for 20 s (a box loading a checkpoint) is
//!   `suspect`, then `up` when it resumes, and never `left`.
//! - A SIGKILLed agent is `left` within a round trip of its crash; a host
//!   whose link is cut, within the vanished bound.
//! - `watch` itself SIGSTOPped for 3 s accuses nobody.
//! - Three of five agents cut off: one `partitioned`, no `left`, and
//!   `expand --write --prune` prunes nothing; then the coordinator cut off
//!   from all; then healed: every member `up`, no second `joined`.
//!
//! The bounds asserted are the documented promises for every single event
//! on a loaded 2-core box ([`promise`], docs/guide.md, "What watch
//! promises"); the figures are printed beside them and the benchmark's p99
//! (the soak in BENCHMARKS.md, "Faults", measures the percentiles).

use nix::sys::signal::Signal;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::promise;
use rlx_lab::kit::{self, discover};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `box{i}`'s agent on host `i`.
fn agent(lab: &Lab, i: usize, dir: &Path) -> Proc {
    let caps = format!(
        r#"{{"id":"d{i:015x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
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

/// `watch --json` on host 0, with `extra` arguments.
fn watch(lab: &Lab, extra: &[&str]) -> (Proc, Instant) {
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0"])
        .args(extra)
        .env(
            "RUST_LOG",
            // The streams' openings, endings and dials at debug: a failed
            // promise prints them with watch's output, so a crash seen late
            // says whether its stream was open (WATCH_LOG overrides).
            std::env::var("WATCH_LOG").unwrap_or("warn,rlx_discover::watch=debug".into()),
        );
    let t0 = Instant::now();
    (Proc::spawn(lab, 0, cmd), t0)
}

/// The events so far of `who` (all when `None`), as (event, at_ms, reason).
fn of(w: &Proc, who: Option<&str>) -> Vec<(String, u64, String)> {
    w.json_lines()
        .iter()
        .filter(|e| who.is_none_or(|w| e["instance"] == w))
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_string(),
                e["at_ms"].as_u64().unwrap_or_default(),
                e["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits for every `box1..=n` to have joined.
fn all_joined(w: &Proc, n: usize) {
    kit::eventually(Duration::from_secs(30), "every agent joined", || {
        let joined = (1..=n)
            .filter(|i| {
                of(w, Some(&format!("box{i}")))
                    .iter()
                    .any(|e| e.0 == "joined")
            })
            .count();
        if joined == n {
            Ok(())
        } else {
            Err(format!("{joined} of {n}: {:?}", of(w, None)))
        }
    });
}

/// Waits for `who`'s first `event` at or after `since` ms, returning its
/// `at_ms`.
fn first(w: &Proc, who: &str, event: &str, since: u64, within: Duration) -> u64 {
    kit::eventually(within, &format!("{who} {event}"), || {
        of(w, Some(who))
            .into_iter()
            .find(|e| e.0 == event && e.1 + 100 >= since)
            .map(|e| e.1)
            .ok_or_else(|| format!("{:?}", of(w, None)))
    })
}

fn ms_since(t0: Instant) -> u64 {
    t0.elapsed().as_millis() as u64
}

#[test]
fn a_stalled_agent_is_suspect_then_up_while_crashed_and_cut_off_ones_are_left_in_time() {
    // Loss and cut links are nftables rules: without nft, a loud SKIP
    // (a failure under CI), never a panic that stops the suite.
    if !peer::require(
        "a_stalled_agent_is_suspect_then_up_while_crashed_and_cut_off_ones_are_left_in_time",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(5);
    let dir = tempfile::tempdir().unwrap();
    let (w, t0) = watch(&lab, &[]);
    let agents: Vec<Proc> = (1..=4).map(|i| agent(&lab, i, dir.path())).collect();
    all_joined(&w, 4);
    std::thread::sleep(Duration::from_secs(2));

    // box1 stopped for 20 s, as a box loading a large checkpoint.
    let stop = ms_since(t0);
    agents[0].signal(Signal::SIGSTOP);
    let suspect = first(&w, "box1", "suspect", stop, Duration::from_secs(10));
    promise::STALLED_SUSPECT.held(suspect - stop);
    std::thread::sleep(Duration::from_secs(20));
    let resumed = ms_since(t0);
    agents[0].signal(Signal::SIGCONT);
    let up = first(&w, "box1", "up", resumed, Duration::from_secs(10));
    promise::RESUMED_UP.held(up.saturating_sub(resumed));
    assert!(
        !of(&w, Some("box1")).iter().any(|e| e.0 == "left"),
        "a stalled box is never left: {:?}",
        of(&w, Some("box1"))
    );

    // box2 crashes.
    let crash = ms_since(t0);
    agents[1].kill();
    let left = first(&w, "box2", "left", crash, Duration::from_secs(10));
    promise::CRASH_LEFT.held(left.saturating_sub(crash));

    // box3's link is cut: a vanished host.
    let cut = ms_since(t0);
    lab.set_loss(3, 100).unwrap();
    let left = first(&w, "box3", "left", cut, Duration::from_secs(15));
    let reason = of(&w, Some("box3"))
        .into_iter()
        .rfind(|e| e.0 == "left")
        .unwrap()
        .2;
    eprintln!("link cut: {reason}");
    promise::VANISHED_LEFT.held(left.saturating_sub(cut));
    assert!(reason.starts_with("vanished"), "{reason}");
    // Its link back, it joins again (a revisit: its records are no news).
    lab.set_loss(3, 0).unwrap();
    let back = ms_since(t0);
    let joined = first(&w, "box3", "joined", back, Duration::from_secs(40));
    eprintln!(
        "link back: joined again after {} ms",
        joined.saturating_sub(back)
    );

    // The coordinator itself stopped for 3 s, three times: nobody accused.
    let before = of(&w, None).len();
    for _ in 0..3 {
        w.signal(Signal::SIGSTOP);
        std::thread::sleep(Duration::from_secs(3));
        w.signal(Signal::SIGCONT);
        std::thread::sleep(Duration::from_secs(2));
    }
    std::thread::sleep(Duration::from_secs(3));
    let after: Vec<_> = of(&w, None).into_iter().skip(before).collect();
    assert!(
        after.iter().all(|e| e.0 != "suspect" && e.0 != "left"),
        "a paused coordinator accuses nobody: {after:?}"
    );
    drop(agents);
}

#[test]
fn a_partition_is_one_event_no_left_no_prune_and_heals_within_a_check() {
    // Loss and cut links are nftables rules: without nft, a loud SKIP
    // (a failure under CI), never a panic that stops the suite.
    if !peer::require(
        "a_partition_is_one_event_no_left_no_prune_and_heals_within_a_check",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(6);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=5).map(|i| agent(&lab, i, dir.path())).collect();
    for a in &agents {
        a.expect_output("mDNS: announced on", Duration::from_secs(20));
    }
    // The cluster file, written by discovery: five nodes.
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\nbrowse_ms = 2000\n").unwrap();
    let e = discover::expand(&lab, &cfg, &["--write"]);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert_eq!(text.matches("[[node]]").count(), 5, "{text}");

    let cfg_arg = cfg.to_str().unwrap();
    let (w, t0) = watch(&lab, &["--config", cfg_arg]);
    all_joined(&w, 5);
    std::thread::sleep(Duration::from_secs(2));

    // The coordinator cut off from three of five.
    let cut = ms_since(t0);
    for i in [1, 3, 5] {
        lab.set_loss(i, 100).unwrap();
    }
    let p = first(
        &w,
        "(partition)",
        "partitioned",
        cut,
        Duration::from_secs(15),
    );
    eprintln!("3 of 5 cut: partitioned after {} ms", p.saturating_sub(cut));
    let ev = w.json_lines();
    let part: &Value = ev.iter().rfind(|e| e["event"] == "partitioned").unwrap();
    let names = |k: &str| -> Vec<String> {
        part[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("unreachable"), ["box1", "box3", "box5"], "{part}");
    assert_eq!(names("reachable"), ["box2", "box4"], "{part}");

    // A prune from this minority view removes nothing.
    let e = discover::expand(&lab, &cfg, &["--write", "--prune"]);
    assert_eq!(
        std::fs::read_to_string(&cfg)
            .unwrap()
            .matches("[[node]]")
            .count(),
        5
    );
    assert!(
        e.stderr.contains("partition") || e.stdout.contains("partition"),
        "{}",
        e.stderr
    );

    // Then from all: the coordinator's own link.
    std::thread::sleep(Duration::from_secs(3));
    lab.set_loss(0, 100).unwrap();
    std::thread::sleep(Duration::from_secs(8));
    let all = of(&w, None);
    assert!(
        all.iter().all(|e| e.0 != "left"),
        "a partition is no wave of left: {all:?}"
    );
    let last = w
        .json_lines()
        .into_iter()
        .rfind(|e| e["event"] == "partitioned")
        .unwrap();
    assert_eq!(last["unreachable"].as_array().unwrap().len(), 5, "{last}");

    // Healed: every member up, no second join.
    let healed = ms_since(t0);
    for i in [0, 1, 3, 5] {
        lab.set_loss(i, 0).unwrap();
    }
    kit::eventually(Duration::from_secs(15), "every member up", || {
        let ups = (1..=5)
            .filter(|i| {
                of(&w, Some(&format!("box{i}")))
                    .iter()
                    .any(|e| e.0 == "up" && e.1 + 100 >= healed)
            })
            .count();
        if ups == 5 {
            Ok(())
        } else {
            Err(format!("{ups} of 5 up: {:?}", of(&w, None)))
        }
    });
    let ups: Vec<u64> = of(&w, None)
        .into_iter()
        .filter(|e| e.0 == "up" && e.1 + 100 >= healed)
        .map(|e| e.1 - healed.min(e.1))
        .collect();
    eprintln!("healed: up after {ups:?} ms");
    let joins = of(&w, None).iter().filter(|e| e.0 == "joined").count();
    assert_eq!(joins, 5, "no second join: {:?}", of(&w, None));
    assert!(
        of(&w, None).iter().all(|e| e.0 != "left"),
        "{:?}",
        of(&w, None)
    );
    drop(agents);
}
