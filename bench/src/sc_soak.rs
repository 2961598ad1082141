//! **`watch` under churn, for a long time**: ten real agents stopped (SIGTERM),
//! crashed (SIGKILL), restarted at once (kill -9 and start again, same id and
//! records) or started, one random action every 0.8 s, for `--soak-minutes` (30
//! by default), with `rlx-discover watch --json` and python-zeroconf's browser
//! (`bench/py/zc_watch.py`) on the same LAN. Selected with `--only soak` (not
//! part of a default run: it is long).
//!
//! Recorded:
//! - per tool, each action's latency against the ground truth (when the
//!   action was taken): join (start to `joined`/`restarted`; zeroconf:
//!   `added`/`updated`), goodbye-leave (SIGTERM to `left`; `removed`),
//!   crash-leave (SIGKILL to `left`; `removed`), restart (kill -9 + start
//!   to `restarted`; `updated`), with median and p95. Joins and restarts
//!   are also measured from the agent's first announcement (the time on
//!   its own "mDNS: announced on" log line), which is where the watch
//!   issue's 1 s bound starts: from its start they include the agent's
//!   own probing (RFC 6762 §8.1, about 750 ms), which no browser can
//!   shorten. An action whose
//!   agent was acted on again before its bound is not counted
//!   (overlapped); one the tool never reported is an unfinished sample.
//! - watch's RSS and CPU (and the browser's) sampled every 10 s: first and
//!   last minute, maximum, CPU % per half of the run, to show both stay
//!   flat (bounded tables).
//! - with `--soak-heap`, a second watch on the same LAN runs under
//!   heaptrack ([`crate::heap`]): its heap in use (the bytes it has
//!   allocated, without what the allocator keeps) at the same moments,
//!   which tells a leak from allocator settling when RSS creeps up; and
//!   the largest sites still allocated at the end, in the notes.
//!
//! Lab: h0 watch and the browser, h1-h10 the agents.

use crate::ctx::Ctx;
use crate::peers;
use crate::proc::{cpu_ns, rss_kb, status_kb};
use crate::stamp::{self, wall_ms, Stamped};
use anyhow::{Context, Result};
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

const SCENARIO: &str = "soak";
/// The tools' names in the results (the report's goals read them too).
pub(crate) const WATCH: &str = "rlx-discover watch --json";
pub(crate) const ZC: &str = "python-zeroconf AsyncServiceBrowser (zc_watch.py)";
pub(crate) const WATCH_HEAP: &str = "rlx-discover watch --json, under heaptrack";
const AGENTS: usize = 10;
const STEP: Duration = Duration::from_millis(800);
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// A tool's news of an action counts within this long of it (and before
/// the agent's next action); past it the action is unfinished for that
/// tool. Generous: python-zeroconf sees a crash only when the records'
/// 120 s TTL runs out.
pub(crate) const WINDOW: Duration = Duration::from_secs(150);
/// Actions acted on again within this long are not counted: none of the
/// bounds (1 s join, 2 s goodbye, 5 s crash) is that long.
const QUIET: Duration = Duration::from_secs(6);

/// How much earlier than the bench's clock a `watch` event may read, and
/// still count for the action it follows (at a latency of 0): watch's
/// start is placed on the wall clock within one poll of the truth
/// ([`stamp::offset`]), and the bench takes an action's time just before
/// the signal, so a `left` within milliseconds of a SIGTERM (the goodbye
/// heard on watch's own socket) can read a little before it. The same
/// slack as `tests/field/watch_churn.rs`; [`QUIET`] keeps it from taking a
/// previous action's news.
const CLOCK_SLACK: Duration = Duration::from_millis(250);

/// Each action's bound (docs/guide.md, "Seeing the LAN"), ms: join and
/// restart at the p95, a goodbye and a crash for every action. The report
/// judges the goals on them, the plots draw them.
pub(crate) const BOUND_MS: [(&str, f64); 4] = [
    ("join_ms", 1000.0),
    ("restart_ms", 1000.0),
    ("goodbye_leave_ms", 2000.0),
    ("crash_leave_ms", 5000.0),
];

/// The bound of one action's latency metric (see [`BOUND_MS`]).
pub(crate) fn bound_ms(metric: &str) -> Option<f64> {
    BOUND_MS.iter().find(|b| b.0 == metric).map(|b| b.1)
}

/// The soak's case: its agents, pace and length.
pub(crate) fn case_name(minutes: f64) -> String {
    format!("{AGENTS} agents, an action every 0.8 s for {minutes} min")
}

/// How long the soak of `case` ran, minutes (the inverse of [`case_name`]).
pub(crate) fn case_minutes(case: &str) -> Option<f64> {
    case.strip_suffix(" min")?
        .rsplit_once(" for ")?
        .1
        .parse()
        .ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Start,
    Stop,
    Crash,
    Restart,
}

impl Act {
    /// The metric measured from the agent's first announcement, for the
    /// actions that start an agent.
    fn announced_metric(self) -> Option<&'static str> {
        match self {
            Act::Start => Some("join_after_announce_ms"),
            Act::Restart => Some("restart_after_announce_ms"),
            Act::Stop | Act::Crash => None,
        }
    }

    fn metric(self) -> &'static str {
        match self {
            Act::Start => "join_ms",
            Act::Stop => "goodbye_leave_ms",
            Act::Crash => "crash_leave_ms",
            Act::Restart => "restart_ms",
        }
    }
}

/// When an agent first announced, wall ms: the timestamp of the first
/// "mDNS: announced on" line in its log (tracing's RFC 3339 time, UTC, on
/// this machine's clock, the one [`wall_ms`] reads).
fn announced_wall(agent: &LabProcess) -> Option<f64> {
    announced_in(&agent.stderr())
}

fn announced_in(log: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains("mDNS: announced on"))?;
    let stamp = line.split_whitespace().next()?;
    let t = humantime::parse_rfc3339(stamp).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64() * 1000.0)
}

/// (wall ms, instance, event) of each line, watch's `at_ms` placed on the
/// wall clock by when its lines were seen ([`stamp::offset`]): its own
/// start comes some tens of ms after the spawn (`spawned`).
fn watch_news(lines: &[(f64, String)], spawned: f64) -> Vec<(f64, String, String)> {
    stamp::placed_events(lines, spawned)
        .0
        .into_iter()
        .filter_map(|(at, e)| {
            Some((
                at,
                e["instance"].as_str()?.to_string(),
                e["event"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn zc_news(z: &LabProcess) -> Vec<(f64, String, String)> {
    z.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| {
            Some((
                e["wall_ms"].as_f64()?,
                e["name"].as_str()?.to_string(),
                e["event"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// One reading of watch's (`[0]`) and the browser's (`[1]`) use.
struct Usage {
    /// Seconds into the run.
    at: f64,
    /// Resident set, kB.
    rss: [u64; 2],
    /// Its anonymous part, kB (`RssAnon`): heap, stacks, allocator caches.
    /// The rest is the program's files (code paged in as paths first run,
    /// bounded by the binary's size) and shared memory.
    anon: [u64; 2],
    /// CPU time so far, ns.
    cpu: [u64; 2],
}

/// A figure over the first minute, the minute around each quarter and the
/// last minute of a run `total` seconds long: whether a rise between the
/// first and last minute levels off (allocator warm-up, tables at their
/// bound) or keeps climbing (a leak).
fn quarters(
    total: f64,
    mean: impl Fn(f64, f64) -> Option<f64>,
) -> [(&'static str, Option<f64>); 5] {
    let around = |q: f64| mean(total * q - 30.0, total * q + 30.0);
    [
        ("first minute", mean(0.0, 60.0)),
        ("at 25%", around(0.25)),
        ("at 50%", around(0.5)),
        ("at 75%", around(0.75)),
        ("last minute", mean(total - 70.0, total)),
    ]
}

fn p95(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * 0.95).round() as usize)
        .copied()
}

/// Runs the soak for `ctx.soak_minutes`.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "soak: watch under churn",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let minutes = ctx.soak_minutes;
    let length = Duration::from_secs_f64(minutes * 60.0);
    let case = case_name(minutes);
    let dir = ctx.work.path().join("soak");
    std::fs::create_dir_all(&dir)?;
    let lab = Lab::new(LabOptions {
        hosts: AGENTS + 1,
        ipv6: false,
    })?;
    let script = dir.join("zc_watch.py");
    std::fs::write(&script, include_str!("../py/zc_watch.py"))?;
    let mut caps = BTreeMap::new();
    for i in 1..=AGENTS {
        caps.insert(i, peers::write_caps(&dir, i)?.0);
    }
    let agent_bin = ctx.bins.agent.clone();
    let start_agent = |i: usize| -> Result<LabProcess> {
        let c = peers::agent_command(&lab, i, &agent_bin, &caps[&i], i);
        lab.spawn(i, c).context("starting an agent")
    };

    let h0 = lab.host(0);
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["watch", "--json", "--interface", &h0.iface]);
    let watch_wall = wall_ms();
    let w = lab.spawn(0, c)?;
    let mut w_lines = Stamped::follow(w.stdout_path().to_path_buf());
    // heaptrack, and where its data is kept.
    let heaptrack = match (&ctx.soak_heap, crate::heap::Heaptrack::find()) {
        (None, _) => None,
        (Some(keep), Ok(h)) => Some((h, keep.clone())),
        (Some(_), Err(why)) => {
            ctx.not_measured("soak: watch's heap in use", &why);
            None
        }
    };
    let raw = dir.join("watch.heaptrack.raw");
    let heap_watch = match &heaptrack {
        Some((h, _)) => {
            let mut c = lab.command(0, "env");
            c.args(h.env_args(&raw)).arg(&ctx.bins.discover).args([
                "watch",
                "--json",
                "--interface",
                &h0.iface,
            ]);
            ctx.command(
                WATCH_HEAP,
                "env LD_PRELOAD=libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=FILE \
                 rlx-discover watch --json --interface IFACE",
            );
            Some((lab.spawn(0, c)?, Instant::now()))
        }
        None => None,
    };
    let mut c = lab.command(0, PYTHON);
    c.arg(&script)
        .arg(h0.ip.to_string())
        .arg(format!("{}", length.as_secs() + 200));
    let z = lab.spawn(0, c)?;
    z.wait_for_output("ready", Duration::from_secs(60))
        .map_err(|e| anyhow::anyhow!(e))?;
    ctx.command(WATCH, "rlx-discover watch --json --interface IFACE");
    ctx.command(ZC, "/usr/bin/python3 bench/py/zc_watch.py IP SECONDS");

    let mut rng = fastrand::Rng::with_seed(15);
    let mut truth: Vec<(f64, usize, Act)> = Vec::new();
    // The process each Start or Restart in `truth` began (same index).
    let mut began: Vec<Option<usize>> = Vec::new();
    let mut procs: Vec<LabProcess> = Vec::new();
    let mut running: BTreeMap<usize, usize> = BTreeMap::new();
    for i in 1..=AGENTS {
        truth.push((wall_ms(), i, Act::Start));
        began.push(Some(procs.len()));
        running.insert(i, procs.len());
        procs.push(start_agent(i)?);
    }
    let mut usage: Vec<Usage> = Vec::new();
    let t0 = Instant::now();
    let end = t0 + length;
    let (mut tick, mut next_sample) = (t0, t0);
    while Instant::now() < end {
        if Instant::now() >= next_sample {
            next_sample += SAMPLE_EVERY;
            let pids = [w.pid(), z.pid()];
            usage.push(Usage {
                at: t0.elapsed().as_secs_f64(),
                rss: pids.map(|p| rss_kb(p).unwrap_or(0)),
                anon: pids.map(|p| status_kb(p, "RssAnon:").unwrap_or(0)),
                cpu: pids.map(|p| cpu_ns(p).unwrap_or(0)),
            });
        }
        tick += STEP;
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        let i = 1 + rng.usize(..AGENTS);
        let act = if running.contains_key(&i) {
            [Act::Stop, Act::Crash, Act::Restart][rng.usize(..3)]
        } else {
            Act::Start
        };
        let now = wall_ms();
        match act {
            Act::Start => {}
            Act::Stop => {
                procs[running.remove(&i).unwrap()].signal(nix::sys::signal::Signal::SIGTERM);
            }
            Act::Crash | Act::Restart => procs[running.remove(&i).unwrap()].kill(),
        }
        began.push(None);
        if matches!(act, Act::Start | Act::Restart) {
            *began.last_mut().unwrap() = Some(procs.len());
            running.insert(i, procs.len());
            procs.push(start_agent(i)?);
        }
        truth.push((now, i, act));
        // The dead are reaped as they go: the table of processes is the
        // only thing here that grows with the run.
        for p in &procs {
            let _ = p.try_wait();
        }
    }
    std::thread::sleep(Duration::from_secs(10));
    let heap = match (&heaptrack, heap_watch) {
        (Some((h, keep)), Some((hw, started))) => {
            // Ctrl-C: watch ends its run and heaptrack writes its last data.
            hw.signal(nix::sys::signal::Signal::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(30);
            while hw.try_wait().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            hw.kill();
            match h.read(&raw, keep) {
                // On the soak's clock: heaptrack counts from the program's start.
                Ok(r) => Some((r, t0.duration_since(started).as_secs_f64(), keep)),
                Err(e) => {
                    ctx.not_measured("soak: watch's heap in use", format!("{e:#}"));
                    None
                }
            }
        }
        _ => None,
    };
    let watch = watch_news(&w_lines.finish(), watch_wall);
    let zc = zc_news(&z);
    let mut members = std::collections::BTreeSet::new();
    for (_, who, ev) in &watch {
        match ev.as_str() {
            "joined" => {
                members.insert(who.clone());
            }
            "left" => {
                members.remove(who);
            }
            _ => {}
        }
    }
    let want: std::collections::BTreeSet<String> =
        running.keys().map(|&i| peers::node_name(i)).collect();
    ctx.notes.push(format!(
        "soak: {case}; seed 15; {} actions; load average at the end {}. At the end watch's \
         events describe {} members, {} agents run{}.",
        truth.len(),
        crate::machine::loadavg(),
        members.len(),
        want.len(),
        if members == want {
            " (the same)".to_string()
        } else {
            format!(" (MISMATCH: events {members:?}, running {want:?})")
        }
    ));

    for (tool, news, wants) in [
        (
            WATCH,
            &watch,
            [
                &["joined", "restarted"][..],
                &["left"][..],
                &["left"][..],
                &["restarted", "joined"][..],
            ],
        ),
        (
            ZC,
            &zc,
            [
                &["added", "updated"][..],
                &["removed"][..],
                &["removed"][..],
                &["updated", "added"][..],
            ],
        ),
    ] {
        let mut lat: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut reps: BTreeMap<&str, u32> = BTreeMap::new();
        for (k, &(t, i, act)) in truth.iter().enumerate() {
            let next = truth[k + 1..]
                .iter()
                .find(|(_, j, _)| *j == i)
                .map_or(f64::MAX, |x| x.0);
            // Quiet before too: an agent stopped right after its start may
            // never have announced, and a previous action's news may still
            // be on its way.
            let prev = truth[..k]
                .iter()
                .rfind(|(_, j, _)| *j == i)
                .map_or(f64::MIN, |x| x.0);
            let quiet = QUIET.as_secs_f64() * 1000.0;
            if next < t + quiet || prev > t - quiet {
                continue;
            }
            let until = next.min(t + WINDOW.as_secs_f64() * 1000.0);
            let name = peers::node_name(i);
            let want = wants[act as usize];
            let slack = CLOCK_SLACK.as_secs_f64() * 1000.0;
            let first = news
                .iter()
                .filter(|(at, who, ev)| {
                    *who == name && *at >= t - slack && *at < until && ev != "refused"
                })
                .find(|(_, _, ev)| want.contains(&ev.as_str()));
            let rep = reps.entry(act.metric()).or_default();
            let value = first.map(|(at, _, _)| (at - t).max(0.0));
            ctx.record(
                SCENARIO,
                &case,
                tool,
                act.metric(),
                *rep,
                value,
                None,
                None,
                if value.is_none() {
                    "not reported within the window"
                } else {
                    ""
                },
            );
            *rep += 1;
            if let Some(v) = value {
                lat.entry(act.metric()).or_default().push(v);
            }
            if let Some(metric) = act.announced_metric() {
                let announced = began[k].and_then(|p| announced_wall(&procs[p]));
                let rep = reps.entry(metric).or_default();
                let value = first
                    .zip(announced)
                    .map(|((at, _, _), a)| (at - a).max(0.0));
                ctx.record(
                    SCENARIO,
                    &case,
                    tool,
                    metric,
                    *rep,
                    value,
                    None,
                    None,
                    match (first, announced) {
                        (None, _) => "not reported within the window",
                        (Some(_), None) => "the agent's log has no announcement",
                        _ => "",
                    },
                );
                *rep += 1;
                if let Some(v) = value {
                    lat.entry(metric).or_default().push(v);
                }
            }
        }
        for (metric, v) in lat {
            ctx.record(
                SCENARIO,
                &case,
                tool,
                &format!("{metric} p95"),
                0,
                p95(&v),
                None,
                None,
                format!(
                    "p95 of the {} actions reported, of {} judged",
                    v.len(),
                    reps[metric]
                ),
            );
        }
    }

    // Flat or not: the first and last minute, the minute around each
    // quarter, the maximum, CPU per half.
    let total = t0.elapsed().as_secs_f64().max(1.0);
    for (tool, k) in [(WATCH, 0usize), (ZC, 1)] {
        let mean = |from: f64, to: f64, field: fn(&Usage) -> [u64; 2]| {
            let v: Vec<f64> = usage
                .iter()
                .filter(|u| u.at >= from && u.at < to)
                .map(|u| field(u)[k] as f64)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        for (name, field) in [
            ("rss_kb", (|u| u.rss) as fn(&Usage) -> [u64; 2]),
            ("rss_anon_kb", |u| u.anon),
        ] {
            for (when, v) in quarters(total, |a, b| mean(a, b, field)) {
                ctx.record(
                    SCENARIO,
                    &case,
                    tool,
                    &format!("{name} {when}"),
                    0,
                    v,
                    None,
                    None,
                    "",
                );
            }
            let max = usage.iter().map(|u| field(u)[k]).max().map(|m| m as f64);
            ctx.record(
                SCENARIO,
                &case,
                tool,
                &format!("{name} max"),
                0,
                max,
                None,
                None,
                "",
            );
        }
        let half = usage.len() / 2;
        if half >= 1 {
            let pct = |a: &Usage, b: &Usage| {
                (b.at > a.at)
                    .then(|| b.cpu[k].saturating_sub(a.cpu[k]) as f64 / 1e9 / (b.at - a.at) * 100.0)
            };
            let (a, m, b) = (&usage[0], &usage[half], &usage[usage.len() - 1]);
            for (metric, v) in [
                ("cpu_pct first half", pct(a, m)),
                ("cpu_pct second half", pct(m, b)),
            ] {
                ctx.record(SCENARIO, &case, tool, metric, 0, v, None, None, "");
            }
        }
    }
    if let Some((r, before, keep)) = heap {
        for (when, v) in quarters(total, |a, b| r.mean_kb(a + before, b + before)) {
            let metric = format!("heap_kb {when}");
            ctx.record(SCENARIO, &case, WATCH_HEAP, &metric, 0, v, None, None, "");
        }
        ctx.record(
            SCENARIO,
            &case,
            WATCH_HEAP,
            "heap_kb max",
            0,
            r.max_kb(),
            None,
            None,
            "",
        );
        ctx.notes.push(format!(
            "soak: heaptrack's {} snapshots of the second watch (data and report in {}); the \
             largest sites still allocated when it ended: {}",
            r.timeline.len(),
            keep.display(),
            if r.leaks.is_empty() {
                "none".to_string()
            } else {
                r.leaks.join("; ")
            }
        ));
    }
    drop(procs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soak_case_names_its_length_and_gives_it_back() {
        assert_eq!(case_minutes(&case_name(45.0)), Some(45.0));
        assert_eq!(case_minutes(&case_name(0.5)), Some(0.5));
        assert_eq!(case_minutes("10 agents"), None);
    }

    #[test]
    fn every_action_kind_has_a_bound() {
        for act in [Act::Start, Act::Stop, Act::Crash, Act::Restart] {
            assert!(bound_ms(act.metric()).is_some(), "{}", act.metric());
        }
    }

    #[test]
    fn the_first_announcement_is_read_off_the_agents_log_on_the_wall_clock() {
        let log = "2026-12-03T11:25:53.536850Z  INFO rlx_agent::announce: mDNS: registered\n\
                   2026-12-03T11:25:54.287000Z  INFO rlx_agent::announce: mDNS: announced on eth0 \
                   name=a\n\
                   2026-12-03T11:25:55.000000Z  INFO rlx_agent::announce: mDNS: announced on eth1";
        assert_eq!(announced_in(log), Some(1_796_297_154_287.0));
        assert_eq!(announced_in("2026-12-03T11:25:53Z  INFO probing"), None);
    }
}
