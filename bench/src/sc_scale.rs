//! **Many members, nothing changing** (issue 41): `n` real agents on one
//! bridge (each its own namespace, state directory and node key), then
//! `rlx-discover watch --json` started once every agent has announced.
//! Measured: how long until all `n` joined, then over a steady window
//! ([`SETTLE`] after the last join, every key pinned; nothing starts, stops
//! or changes) watch's CPU (utime + stime, % of one
//! core), its RSS, any `left` (none is right), and the agents' own idle CPU
//! (a sample of them). With `RLX_BENCH_PERF_DIR=DIR`, `perf record` profiles
//! watch over the same window into `DIR/watch-<n>.perf.data`.
//!
//! After the window, from 200 members on, [`CRASHES`] agents are killed
//! (SIGKILL, one every 500 ms) and each one's time from the signal to its
//! `left` is measured; a `left` of any other member is false.
//!
//! Lab: h0 watch, h1..hn the agents (beyond 1,000 hosts a chain of bridges,
//! `rlx_lab::HOSTS_PER_BRIDGE`). Sizes: 10 (the agents' own baseline), 50,
//! 200 and 1,000 (full), then a join storm of 1,000 ([`storm`]); 200 with a
//! shorter window (`--quick`). With `RLX_BENCH_SCALE_MAX_CPU_PCT=P` set (CI:
//! 2, docs/scale.md says why), a steady state above P % of one core fails
//! the scenario. `RLX_BENCH_SCALE_SIZES=1000` (comma-separated) runs those
//! sizes only, and no join storm; `RLX_BENCH_SCALE_KEEP=DIR` keeps watch's
//! events and log of each size there.

mod said;
mod storm;

use crate::ctx::Ctx;
use crate::peers;
use crate::proc::{cpu_ns, rss_kb};
use crate::stamp::{placed_events, wall_ms, Stamped};
use anyhow::{bail, Context, Result};
use rlx_lab::LabProcess;
use std::time::{Duration, Instant};

use said::{events, is_node, AGENT, SCENARIO, WATCH};

/// Agents whose own CPU and RSS are sampled over the steady window.
const AGENT_SAMPLE: usize = 10;

/// Agents killed after the steady window, to time their `left`.
const CRASHES: usize = 20;

/// Size of the join storm of a full run.
const STORM: usize = 1000;

/// From the last join to the steady window: a new member's key is pinned
/// by the first handshake after it claimed its id alone for 5 s (the
/// coordinator's hold), and until then it is checked every 2.8-3.5 s; so
/// 5 s + 3.5 s + a margin for the handshakes of hundreds.
const SETTLE: Duration = Duration::from_secs(12);

/// The case name of `n` members and a steady window of `secs`.
pub(crate) fn case_name(n: usize, secs: u64) -> String {
    format!("{n} agents, steady {secs} s")
}

/// Runs the scenario at each size.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "scale: watch at rest",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let (mut sizes, steady): (Vec<usize>, Duration) = if ctx.quick {
        (vec![200], Duration::from_secs(20))
    } else {
        (vec![10, 50, 200, 1000], Duration::from_secs(60))
    };
    // One size alone (a profile of one, or a look at the fleet without
    // the smaller sizes' 8 minutes): RLX_BENCH_SCALE_SIZES=1000, no storm.
    let only: Option<Vec<usize>> = std::env::var("RLX_BENCH_SCALE_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    if let Some(only) = &only {
        sizes.clone_from(only);
    }
    ctx.notes.push(format!(
        "scale: n real `rlx-agent`s (each its own namespace, state directory and node key; \
         simulated caps) on one segment (a chain of bridges beyond {} hosts), `watch --json` \
         started once every agent announced. join_ms: from watch's spawn to the n-th `joined`; \
         then {} s of nothing changing: watch's CPU (utime + stime, % of one core), its RSS, \
         `left` events (0 is right), and the CPU and RSS of {AGENT_SAMPLE} of the agents. From \
         200 members, {CRASHES} agents are then SIGKILLed 500 ms apart, each one's `left` timed \
         from its signal. The join storm starts watch on an empty segment and spawns \
         {STORM} agents one after another under it.",
        rlx_lab::HOSTS_PER_BRIDGE,
        steady.as_secs()
    ));
    let limit: Option<f64> = std::env::var("RLX_BENCH_SCALE_MAX_CPU_PCT")
        .ok()
        .and_then(|v| v.parse().ok());
    for &n in &sizes {
        let pct = one(ctx, n, steady)?;
        if let (Some(max), Some(pct)) = (limit, pct) {
            if pct > max {
                bail!(
                    "watch at rest with {n} members used {pct:.2}% of one core, over the \
                     {max}% RLX_BENCH_SCALE_MAX_CPU_PCT allows"
                );
            }
        }
    }
    if !ctx.quick && only.is_none() {
        storm::run(ctx, STORM)?;
    }
    Ok(())
}

/// One size; returns watch's steady CPU % of one core, when measured.
fn one(ctx: &mut Ctx, n: usize, steady: Duration) -> Result<Option<f64>> {
    let case = case_name(n, steady.as_secs());
    let (dir, lab) = said::fleet(ctx, "scale", n)?;
    let mut agents: Vec<LabProcess> = Vec::with_capacity(n);
    for i in 1..=n {
        let (caps, _) = peers::write_caps(&dir, i)?;
        let c = peers::agent_command(&lab, i, &ctx.bins.agent, &caps, i);
        agents.push(lab.spawn(i, c).context("starting an agent")?);
    }
    let deadline = Instant::now() + Duration::from_secs(60 + n as u64 / 2);
    for a in &agents {
        let left = deadline.saturating_duration_since(Instant::now());
        a.wait_for_output("mDNS: announced on", left)
            .map_err(|e| anyhow::anyhow!("an agent never announced: {e}"))?;
    }
    ctx.command(
        AGENT,
        "rlx-agent --caps-file FILE --name NAME --interface IFACE",
    );
    ctx.command(WATCH, "rlx-discover watch --json --interface IFACE");
    let h0 = lab.host(0);
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["watch", "--json", "--interface", &h0.iface]);
    let started = Instant::now();
    let spawned = wall_ms();
    let w = lab.spawn(0, c)?;
    let out = Stamped::follow(w.stdout_path().to_path_buf());
    let joined = |out: &Stamped| {
        events(&out.lines())
            .iter()
            .filter(|(_, e)| e == "joined")
            .count()
    };
    let join_by = Instant::now() + Duration::from_secs(60);
    while joined(&out) < n && Instant::now() < join_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    let all = joined(&out);
    let join_ms = (all >= n).then(|| started.elapsed().as_secs_f64() * 1000.0);
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "join_ms",
        0,
        join_ms,
        Some(all as u64),
        Some(n as u64),
        "from watch's start until the last of the agents (all announced before) joined",
    );
    // Settle: every member's stream open and its node key pinned, so that
    // the window sees the steady pace (a handshake per member a minute),
    // not the first seconds' (one every 3 s per member until its key is
    // pinned).
    std::thread::sleep(SETTLE);
    let before_events = events(&out.lines()).len();
    let perf = std::env::var_os("RLX_BENCH_PERF_DIR").map(|d| {
        let path = std::path::Path::new(&d).join(format!("watch-{n}.perf.data"));
        std::process::Command::new("perf")
            .args(["record", "-F", "999", "--call-graph", "dwarf,16384", "-o"])
            .arg(&path)
            .args(["-p", &w.pid().to_string(), "--", "sleep"])
            .arg(steady.as_secs().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
    });
    let sampled: Vec<u32> = agents.iter().take(AGENT_SAMPLE).map(|a| a.pid()).collect();
    let agent_cpu0: Vec<Option<u64>> = sampled.iter().map(|&p| cpu_ns(p)).collect();
    let cpu0 = cpu_ns(w.pid());
    let t0 = Instant::now();
    std::thread::sleep(steady);
    let cpu1 = cpu_ns(w.pid());
    let secs = t0.elapsed().as_secs_f64();
    let agent_cpu1: Vec<Option<u64>> = sampled.iter().map(|&p| cpu_ns(p)).collect();
    if let Some(Ok(mut p)) = perf {
        let _ = p.wait();
    }
    let pct = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some((b.saturating_sub(a)) as f64 / 1e9 / secs * 100.0),
        _ => None,
    };
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "cpu_steady_pct",
        0,
        pct,
        None,
        None,
        format!("utime + stime over {secs:.0} s with nothing changing, % of one core"),
    );
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "rss_kb",
        0,
        rss_kb(w.pid()).map(|k| k as f64),
        None,
        None,
        "after the steady window",
    );
    let after: Vec<(f64, String)> = events(&out.lines())
        .into_iter()
        .skip(before_events)
        .collect();
    let left = after.iter().filter(|(_, e)| e == "left").count();
    ctx.record(
        SCENARIO,
        &case,
        WATCH,
        "left_at_rest",
        0,
        Some(left as f64),
        None,
        None,
        "`left` events over the steady window: 0 is right",
    );
    let per_agent: Vec<f64> = agent_cpu0
        .iter()
        .zip(&agent_cpu1)
        .filter_map(|(a, b)| {
            Some((b.as_ref()?.saturating_sub(*a.as_ref()?)) as f64 / 1e9 / secs * 100.0)
        })
        .collect();
    let mean =
        (!per_agent.is_empty()).then(|| per_agent.iter().sum::<f64>() / per_agent.len() as f64);
    ctx.record(
        SCENARIO,
        &case,
        AGENT,
        "cpu_idle_pct",
        0,
        mean,
        Some(per_agent.len() as u64),
        None,
        format!(
            "mean over {} of the agents, same window, % of one core",
            per_agent.len()
        ),
    );
    let rss: Vec<f64> = sampled
        .iter()
        .filter_map(|&p| rss_kb(p).map(|k| k as f64))
        .collect();
    ctx.record(
        SCENARIO,
        &case,
        AGENT,
        "rss_idle_kb",
        0,
        (!rss.is_empty()).then(|| rss.iter().sum::<f64>() / rss.len() as f64),
        Some(rss.len() as u64),
        None,
        format!("mean VmRSS of {} of the agents after the window", rss.len()),
    );
    if n >= 200 {
        crashes(ctx, &case, &agents, &out, spawned)?;
    }
    drop(agents);
    keep(&w, n);
    drop(w);
    Ok(pct)
}

/// With `RLX_BENCH_SCALE_KEEP=DIR`, watch's events and log of the run with
/// `n` members are copied to `DIR/watch-<n>.jsonl` and `.log`, for what the
/// figures do not say (which members joined when, what was refused).
fn keep(w: &LabProcess, n: usize) {
    let Some(dir) = std::env::var_os("RLX_BENCH_SCALE_KEEP") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    for (from, ext) in [(w.stdout_path(), "jsonl"), (w.stderr_path(), "log")] {
        let to = dir.join(format!("watch-{n}.{ext}"));
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::copy(from, &to)) {
            eprintln!(
                "scale: could not keep {} as {}: {e}",
                from.display(),
                to.display()
            );
        }
    }
}

/// The last [`CRASHES`] agents killed one every 500 ms; each one's time
/// from its SIGKILL to its `left` (`crash_left_ms`, p50 and max), those
/// never seen (`found` short of `expected`), and every other `left` after
/// the first kill (`false_left`: 0 is right).
fn crashes(
    ctx: &mut Ctx,
    case: &str,
    agents: &[LabProcess],
    out: &Stamped,
    spawned: f64,
) -> Result<()> {
    let k = CRASHES.min(agents.len() / 2);
    let first = wall_ms();
    let mut killed: Vec<(String, f64)> = Vec::with_capacity(k);
    for (j, a) in agents.iter().enumerate().skip(agents.len() - k) {
        let at = wall_ms();
        a.signal(nix::sys::signal::Signal::SIGKILL);
        killed.push((peers::node_name(j + 1), at));
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(3));
    let (placed, _) = placed_events(&out.lines(), spawned);
    let lefts: Vec<(f64, &str)> = placed
        .iter()
        .filter(|(t, e)| e["event"] == "left" && *t >= first)
        .map(|(t, e)| (*t, e["instance"].as_str().unwrap_or_default()))
        .collect();
    let mut ms: Vec<f64> = killed
        .iter()
        .filter_map(|(name, at)| {
            let (t, _) = lefts.iter().find(|(_, i)| is_node(i, name))?;
            Some((t - at).max(0.0))
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let false_left = lefts
        .iter()
        .filter(|(_, i)| !killed.iter().any(|(n, _)| is_node(i, n)))
        .count();
    let seen = Some(ms.len() as u64);
    let note = format!(
        "{k} agents SIGKILLed one every 500 ms after the steady window; from the signal to \
         the agent's `left` (event times placed on the bench's clock, within 5 ms)"
    );
    let p50 = ms.get(ms.len() / 2).copied();
    ctx.record(
        SCENARIO,
        case,
        WATCH,
        "crash_left_ms_p50",
        0,
        p50,
        seen,
        Some(k as u64),
        note.clone(),
    );
    ctx.record(
        SCENARIO,
        case,
        WATCH,
        "crash_left_ms_max",
        0,
        ms.last().copied(),
        seen,
        Some(k as u64),
        note,
    );
    ctx.record(
        SCENARIO,
        case,
        WATCH,
        "false_left",
        0,
        Some(false_left as f64),
        None,
        None,
        "`left` events after the first kill for members that were not killed: 0 is right",
    );
    Ok(())
}
