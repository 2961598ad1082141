//! **A join storm** (issue 41): a rack powering on under a running
//! `watch`. `watch --json` starts on an empty segment, then `n` real
//! agents are started as fast as the lab spawns them (each its own
//! namespace, state directory and node key). Measured: how long the
//! spawns took (`spawn_spread_ms`: a rack comes up within about 10 s),
//! from the first spawn until every agent joined (`all_joined_ms`), how
//! many joined (`found` of `expected`), instances that joined twice
//! (`duplicates`) or were refused (`refused`: a real agent must never be,
//! for the rate or anything else), watch's peak RSS (its admission queue
//! is bounded) and its CPU over the storm.

use super::said::{events, fleet, is_node, AGENT, SCENARIO, WATCH};
use crate::ctx::Ctx;
use crate::peers;
use crate::proc::{cpu_ns, status_kb};
use crate::stamp::{placed_events, wall_ms, Stamped};
use anyhow::{Context, Result};
use rlx_lab::LabProcess;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long the storm may take to join before the rest counts as missing.
const JOIN_LIMIT: Duration = Duration::from_secs(120);

/// Runs one storm of `n` agents.
pub(super) fn run(ctx: &mut Ctx, n: usize) -> Result<()> {
    let case = format!("join storm: {n} agents started under a running watch");
    let (dir, lab) = fleet(ctx, "storm", n)?;
    // The caps files first, so that the spawn loop only spawns.
    let caps: Vec<_> = (1..=n)
        .map(|i| peers::write_caps(&dir, i).map(|(c, _)| c))
        .collect::<Result<_>>()?;
    let h0 = lab.host(0);
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["watch", "--json", "--interface", &h0.iface]);
    let spawned = wall_ms();
    let w = lab.spawn(0, c)?;
    let out = Stamped::follow(w.stdout_path().to_path_buf());
    // watch up and browsing an empty segment.
    std::thread::sleep(Duration::from_secs(2));
    let cpu0 = cpu_ns(w.pid());
    let t0 = Instant::now();
    let first = wall_ms();
    let mut agents: Vec<LabProcess> = Vec::with_capacity(n);
    for (k, caps) in caps.iter().enumerate() {
        let i = k + 1;
        let c = peers::agent_command(&lab, i, &ctx.bins.agent, caps, i);
        agents.push(lab.spawn(i, c).context("starting an agent")?);
    }
    let spread = wall_ms() - first;
    let joined = |out: &Stamped| {
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for (_, l) in out.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&l) else {
                continue;
            };
            if v["event"] == "joined" {
                let i = v["instance"].as_str().unwrap_or_default().to_string();
                *per.entry(i).or_default() += 1;
            }
        }
        per
    };
    while joined(&out).len() < n && t0.elapsed() < JOIN_LIMIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_ns(w.pid());
    let per = joined(&out);
    let (placed, _) = placed_events(&out.lines(), spawned);
    let last_join = placed
        .iter()
        .filter(|(_, e)| e["event"] == "joined")
        .map(|(t, _)| *t)
        .fold(f64::NAN, f64::max);
    let ours = |i: &str| (1..=n).any(|k| is_node(i, &peers::node_name(k)));
    let found = per.keys().filter(|i| ours(i)).count() as u64;
    let all = (found == n as u64).then_some(last_join - first);
    ctx.command(WATCH, "rlx-discover watch --json --interface IFACE");
    ctx.command(
        AGENT,
        "rlx-agent --caps-file FILE --name NAME --interface IFACE",
    );
    let note = format!("{n} agents spawned one after another under a running watch");
    let expected = Some(n as u64);
    ctx.record(
        SCENARIO,
        &case,
        AGENT,
        "spawn_spread_ms",
        0,
        Some(spread),
        None,
        None,
        note,
    );
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "all_joined_ms",
        0,
        all,
        Some(found),
        expected,
        "from the first agent's spawn until the last one joined",
    );
    let dups = per.values().filter(|&&c| c > 1).count();
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "duplicates",
        0,
        Some(dups as f64),
        None,
        None,
        "instances with more than one `joined` (0 is right)",
    );
    let refused = events(&out.lines())
        .iter()
        .filter(|(_, e)| e == "refused")
        .count();
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "refused",
        0,
        Some(refused as f64),
        None,
        None,
        "`refused` events (0 is right: every agent is real)",
    );
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "vmhwm_kb",
        0,
        status_kb(w.pid(), "VmHWM:").map(|k| k as f64),
        None,
        None,
        "watch's peak RSS",
    );
    let pct = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9 / secs * 100.0),
        _ => None,
    };
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "cpu_storm_pct",
        0,
        pct,
        None,
        None,
        format!("utime + stime from the first spawn until all joined ({secs:.1} s), % of one core"),
    );
    drop(agents);
    drop(w);
    Ok(())
}
