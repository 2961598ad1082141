//! **`watch` under forged goodbyes**: what a stranger who sends
//! 1,000 forged goodbyes a second for one member costs `watch`, and that
//! it costs the membership nothing. A goodbye is only a claim: each one
//! schedules a check of the member, at most two handshakes a second
//! (docs/security.md, "The membership feed"), so the flood should cost a
//! bounded few percent of a core and move no member.
//!
//! Per run: `watch --json` with three real agents joined; its CPU over a
//! window at rest, then over the same length of window while a stranger
//! (`lab/py/mdns_wire.py goodbye`, from port 5353 to the group, so that
//! watch's own reader and mdns-sd's both hear it) sends goodbyes for one
//! member; the member events printed meanwhile (must be none); then, the
//! flood still on, the attacked agent is stopped for real, and the time
//! from its SIGTERM to its `left` (the documented bound: 2 s).
//!
//! Lab: h0 watch, h1-h3 the agents (h1 attacked), h4 the stranger.

use super::key::keygen;
use crate::ctx::Ctx;
use crate::peers;
use crate::proc::cpu_ns;
use anyhow::Result;
use rlx_lab::kit::{script, PYTHON};
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const TOOL: &str = "rlx-discover watch --json";
/// Real agents.
const REAL: usize = 3;
/// Forged goodbyes a second (one every millisecond).
const RATE: u32 = 1000;
/// How long the agents may take to join.
const JOIN: Duration = Duration::from_secs(60);
/// The longest a real goodbye may take to be reported, waited out.
const LEFT: Duration = Duration::from_secs(10);

/// The events `watch --json` printed so far.
fn events(w: &LabProcess) -> Vec<Value> {
    w.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Member events (anything but `joined` of the three and `refused`): what
/// a forged goodbye must never cause.
fn member_events(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter(|e| !matches!(e["event"].as_str(), Some("joined" | "refused")))
        .map(|e| format!("{} {}", e["event"], e["instance"]))
        .collect()
}

/// Whether all three agents have joined.
fn all_joined(evs: &[Value]) -> bool {
    (1..=REAL).all(|i| {
        let name = peers::node_name(i);
        evs.iter()
            .any(|e| e["event"] == "joined" && e["instance"] == name.as_str())
    })
}

/// CPU time `pid` spends over `window`, as a share of one core (%).
fn cpu_share(pid: u32, window: Duration) -> Option<f64> {
    let a = cpu_ns(pid)?;
    std::thread::sleep(window);
    let b = cpu_ns(pid)?;
    Some((b.saturating_sub(a)) as f64 / window.as_nanos() as f64 * 100.0)
}

/// One run, with or without a cluster key.
struct Case {
    name: &'static str,
    keyed: bool,
}

/// The case without a cluster key.
pub(crate) const CASE_OPEN: &str =
    "watch: 1,000 forged goodbyes a second for one of 3 members, no key";
/// The case with one.
pub(crate) const CASE_KEYED: &str =
    "watch: 1,000 forged goodbyes a second for one of 3 members, cluster key";

const CASES: [Case; 2] = [
    Case {
        name: CASE_OPEN,
        keyed: false,
    },
    Case {
        name: CASE_KEYED,
        keyed: true,
    },
];

/// Runs the forged-goodbye case.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "trust: watch under forged goodbyes",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let dir = ctx.work.path().join("goodbyes");
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("cluster.key");
    keygen(ctx, &key)?;
    let window = if ctx.quick {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(10)
    };
    ctx.command(
        "forged goodbyes (mdns_wire.py)",
        format!(
            "/usr/bin/python3 lab/py/mdns_wire.py goodbye --src IP --instance node-1 --sport \
             5353 --count N --gap-ms 1   # {RATE} a second, to the group"
        ),
    );
    ctx.command(
        TOOL,
        "rlx-discover watch --json --interface eth0 [--config cluster.toml: key_file]",
    );
    ctx.notes.push(format!(
        "trust: watch under forged goodbyes (docs/security.md, \"The membership feed\"): 3 real agents joined, then watch's CPU \
         over {w} s at rest (`cpu_rest_pct`) and over {w} s while a stranger sends forged \
         goodbyes (PTR, TTL 0) for node-1 one every millisecond from port 5353 to the group \
         (`cpu_flood_pct`; `goodbyes_per_s` is the rate the stranger reached), in % of one of \
         this machine's cores; `member_events` (left, restarted, updated, moved: must be 0) \
         printed during the flood; then, the flood still on, node-1 stopped for real \
         (SIGTERM) and `real_left_ms` from the signal to its `left` (bound 2000 ms).",
        w = window.as_secs()
    ));
    let lab = Lab::new(LabOptions {
        hosts: REAL + 2,
        ipv6: false,
    })?;
    let reps = ctx.reps;
    for case in &CASES {
        for rep in 0..reps {
            if let Err(e) = one_run(ctx, &lab, &dir, &key, case, rep, window) {
                eprintln!("  {} #{rep} FAILED: {e:#}", case.name);
                ctx.record(
                    "trust",
                    case.name,
                    TOOL,
                    "cpu_flood_pct",
                    rep,
                    None,
                    None,
                    None,
                    format!("{e:#}"),
                );
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one_run(
    ctx: &mut Ctx,
    lab: &Lab,
    dir: &Path,
    key: &Path,
    case: &Case,
    rep: u32,
    window: Duration,
) -> Result<()> {
    let mut agents = Vec::new();
    for i in 1..=REAL {
        let (caps, _) = peers::write_caps(dir, i)?;
        let mut c = peers::agent_command(lab, i, &ctx.bins.agent, &caps, i);
        if case.keyed {
            c.arg("--key-file").arg(key);
        }
        agents.push(lab.spawn(i, c)?);
    }
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["watch", "--json", "--interface", &lab.host(0).iface]);
    if case.keyed {
        let cfg = dir.join("cluster.toml");
        std::fs::write(
            &cfg,
            format!("[discover]\nkey_file = {:?}\n", key.display().to_string()),
        )?;
        c.arg("--config").arg(cfg);
    }
    c.env("RUST_LOG", "warn");
    let w = lab.spawn(0, c)?;
    let until = Instant::now() + JOIN;
    while !all_joined(&events(&w)) {
        anyhow::ensure!(
            Instant::now() < until,
            "the 3 agents did not all join within {JOIN:?}"
        );
        anyhow::ensure!(w.try_wait().is_none(), "watch exited: {}", w.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Past the joins' own handshakes and first health checks.
    std::thread::sleep(Duration::from_secs(2));
    let pid = w.pid();
    let rest = cpu_share(pid, window);
    let before = events(&w).len();
    let stranger = REAL + 1;
    let count = (window.as_secs() + 15) * u64::from(RATE);
    let mut f = lab.command(stranger, PYTHON);
    f.arg(script("mdns_wire.py"))
        .args(["goodbye", "--src", &lab.host(stranger).ip.to_string()])
        .args(["--instance", &peers::node_name(1), "--sport", "5353"])
        .args(["--count", &count.to_string(), "--gap-ms", "1"]);
    let (ns, iface) = (&lab.host(stranger).ns, &lab.host(stranger).iface);
    let tx = || crate::proc::iface_packets(ns, iface).ok().map(|(_, tx)| tx);
    let tx0 = tx();
    let forger = lab.spawn(stranger, f)?;
    let t_flood = Instant::now();
    // The stranger's first packets, then the window.
    std::thread::sleep(Duration::from_millis(500));
    let flood = cpu_share(pid, window);
    let during: Vec<String> = member_events(&events(&w)[before..]);
    // Its rate so far, from the packet counter of the stranger's link.
    let sent = tx().zip(tx0).map(|(b, a)| b.saturating_sub(a));
    let flood_s = t_flood.elapsed().as_secs_f64();
    // The real goodbye, under the flood.
    let t_stop = Instant::now();
    agents[0].signal(nix::sys::signal::Signal::SIGTERM);
    let name = peers::node_name(1);
    let mut left_ms = None;
    while t_stop.elapsed() < LEFT {
        let evs = events(&w);
        if evs[before..]
            .iter()
            .any(|e| e["event"] == "left" && e["instance"] == name.as_str())
        {
            left_ms = Some(t_stop.elapsed().as_secs_f64() * 1000.0);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    forger.kill();
    let note = if during.is_empty() {
        String::new()
    } else {
        format!("member events during the flood: {}", during.join(", "))
    };
    let n = case.name;
    ctx.record("trust", n, TOOL, "cpu_rest_pct", rep, rest, None, None, "");
    ctx.record(
        "trust",
        n,
        TOOL,
        "cpu_flood_pct",
        rep,
        flood,
        None,
        None,
        &note,
    );
    ctx.record(
        "trust",
        n,
        TOOL,
        "member_events",
        rep,
        Some(during.len() as f64),
        None,
        None,
        &note,
    );
    ctx.record(
        "trust",
        n,
        TOOL,
        "goodbyes_per_s",
        rep,
        sent.map(|tx| tx as f64 / flood_s),
        None,
        None,
        "packets the stranger's interface sent over the flood's length: an upper bound (an ARP \
         exchange would count too)",
    );
    ctx.record(
        "trust",
        n,
        TOOL,
        "real_left_ms",
        rep,
        left_ms,
        None,
        None,
        "",
    );
    w.kill();
    drop(agents);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_refusals_are_not_member_events_but_a_left_is() {
        let evs: Vec<Value> = [
            r#"{"event":"joined","instance":"node-1"}"#,
            r#"{"event":"refused","instance":"x"}"#,
            r#"{"event":"left","instance":"node-1"}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        assert_eq!(member_events(&evs), vec![r#""left" "node-1""#.to_string()]);
        assert!(!all_joined(&evs));
    }
}
