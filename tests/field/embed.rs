//! A runtime that embeds the library (`examples/runtime.rs`: `expand` at
//! start-up, then `LiveWatch`) follows a join, a crash and restart, and a leave, as
//! `rlx-discover watch` does, with the same defaults and nothing of the CLI.

use rlx_lab::kit::{self};
use rlx_lab::kit::{agent_bin, require_lab, Proc};
use rlx_lab::Lab;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent takes to come up, and a watch to see it.
const UP: Duration = Duration::from_secs(20);

fn agent(lab: &Lab, dir: &Path) -> Proc {
    let caps = dir.join("box1.json");
    std::fs::write(
        &caps,
        r#"{"id":"00000000000000e1","hostname":"box1","os":"linux","cores":8,
            "ram_total":68719476736,"ram_avail":60000000000,
            "devices":[{"device":"cuda","name":"gpu","mem_bytes":25769803776}]}"#,
    )
    .unwrap();
    let mut c = Command::new(agent_bin());
    c.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box1"])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, 1, c);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// The events the runtime printed, as lines.
fn events(p: &Proc) -> Vec<String> {
    p.stdout().lines().map(str::to_string).collect()
}

#[test]
fn an_embedding_runtime_follows_a_join_a_restart_and_a_leave() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\nbrowse_ms = 500\n").unwrap();
    let mut c = Command::new(kit::example_bin("runtime"));
    c.arg(&cfg)
        .args(["--for-ms", "60000"])
        .env("RUST_LOG", "warn");
    let runtime = Proc::spawn(&lab, 0, c);

    let first = agent(&lab, dir.path());
    let at = format!("{}:9100", lab.host(1).ip);
    runtime.expect_output(&format!("joined box1 {at}"), UP);
    // A crash and an immediate restart: same records, new incarnation. The
    // crash is seen as it happens (the liveness connection ends, the port
    // refuses), so the new process, up most of a second later, joins again;
    // one that answers before the crash is confirmed is `restarted`.
    first.kill();
    drop(first);
    let second = agent(&lab, dir.path());
    kit::eventually(UP, "box1 back as a new incarnation", || {
        let ev = events(&runtime);
        let back = ev.iter().any(|l| l.starts_with("restarted box1"))
            || ev.iter().filter(|l| l.starts_with("joined box1")).count() == 2;
        if back {
            Ok(())
        } else {
            Err(format!("{ev:?}"))
        }
    });
    second.signal(nix::sys::signal::Signal::SIGTERM);
    kit::eventually(UP, "box1 left for good", || {
        let ev = events(&runtime);
        let lefts = ev.iter().filter(|l| l.starts_with("left box1")).count();
        let joins = ev.iter().filter(|l| l.starts_with("joined box1")).count();
        if lefts == joins {
            Ok(())
        } else {
            Err(format!("{ev:?}"))
        }
    });
    let seen = events(&runtime);
    let kinds: Vec<&str> = seen
        .iter()
        .filter(|l| l.ends_with(&at) || l.starts_with("left box1"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(
        kinds == ["joined", "restarted", "left"] || kinds == ["joined", "left", "joined", "left"],
        "one event each, in order: {seen:?}"
    );
}
