//! **`watch` under injected faults, beside python-zeroconf and serf**: 50
//! real agents (10 in quick mode) and, for `--faults-minutes` (30 by
//! default; 2 in quick mode, CI's shorter run), one fault every 4-6 s on a
//! random idle agent, with faults of the whole cluster at fixed points
//! ([`plan`]):
//!
//! - crash: SIGKILL, the agent started again (a new process) 10 s later;
//! - pause: SIGSTOP for 1-15 s, then SIGCONT (a box loading a checkpoint);
//! - link down: `ip link set eth0 down` in the agent's host for 20 s (a
//!   vanished host), then up again;
//! - loss: 10% each way on an agent's link for 60 s (20 s in quick mode);
//! - the coordinator's own link at 10% loss as long, once or twice;
//! - a CPU hog, a busy loop per core, 20 s;
//! - the coordinator stopped (SIGSTOP) for 3 s, a few times.
//!
//! Every fault goes into an injection log with its wall-clock times, and
//! each tool's news is judged against it afterwards ([`judge`]): the
//! latency of each crash's `left`, each cut link's `left` and return, each
//! pause's `suspect` and `up`; and every `left` no crash or cut link
//! explains, which is a false death (`false_left`, and its rate per
//! injected fault), with what was going on when it came. The same faults
//! hit serf's agent on each host (killed, stopped, cut off with it), so
//! its `EventMemberFailed` are judged by the same rules.
//!
//! Lab: h0 the coordinator (`watch --json --config cluster.toml`, the
//! file written by one `expand --write`, so that `watch` knows the
//! cluster's size; python-zeroconf's browser; serf's coordinator agent),
//! h1..hN the agents (and a serf agent each).

mod judge;
mod plan;
mod serf;

use crate::ctx::Ctx;
use crate::peers::{self, Publisher};
use crate::proc::{cpu_ns, rss_kb};
use crate::stamp::{self, wall_ms, Stamped};
use anyhow::{Context, Result};
use judge::{Fault, Item, News, Speaks, Verdict};
use nix::sys::signal::Signal;
use plan::Kind;
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SCENARIO: &str = "faults";
/// The tools' names in the results (the report reads them).
pub(crate) const WATCH: &str = "rlx-discover watch --json --config";
pub(crate) const ZC: &str = "python-zeroconf AsyncServiceBrowser (zc_watch.py)";
pub(crate) const SERF: &str = "serf agent (memberlist SWIM, lan profile)";
pub(crate) const INJECTOR: &str = "fault injection log";
/// The tools whose news is judged, in the report's order.
pub(crate) const TOOLS: [&str; 3] = [WATCH, ZC, SERF];
/// The latency metrics, what each times, and its goal (p99, ms) if any.
pub(crate) const LATENCY: [(&str, &str, Option<f64>); 6] = [
    ("crash_left_ms", "SIGKILL to `left`", Some(200.0)),
    ("vanished_left_ms", "link down to `left`", Some(2500.0)),
    ("suspect_ms", "SIGSTOP to `suspect`", Some(1500.0)),
    ("up_ms", "SIGCONT to `up`", Some(500.0)),
    ("crash_rejoin_ms", "restart to `joined`/`restarted`", None),
    ("rejoin_ms", "link up to `joined` (or `up`)", None),
];
/// The schedule's seed: the same run each time.
const SEED: u64 = 27;
/// How long the agents, the browser and serf may take to be all seen.
const SETTLE_IN: Duration = Duration::from_secs(120);
/// Between the last fault's end and reading the news.
const TAIL: Duration = Duration::from_secs(3);
/// Usage is read this often.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// The case: agents and length.
pub(crate) fn case_name(agents: usize, minutes: f64) -> String {
    format!("{agents} agents, a fault every 4-6 s for {minutes} min")
}

/// `node-<i>` back to `i`, for the lab's agents.
fn agent_of(name: &str, agents: usize) -> Option<usize> {
    name.strip_prefix("node-")?
        .parse()
        .ok()
        .filter(|i| (1..=agents).contains(i))
}

/// The processes of the run that faults act on.
struct Procs<'a> {
    lab: &'a Lab,
    agent_bin: PathBuf,
    caps: BTreeMap<usize, PathBuf>,
    agents: BTreeMap<usize, LabProcess>,
    serf_bin: Option<PathBuf>,
    serfs: BTreeMap<usize, LabProcess>,
    /// The coordinator's observers: watch, the browser, serf's.
    observers: Vec<u32>,
    hogs: Vec<LabProcess>,
    /// Links cut by 100% loss because `ip link set down` failed.
    cut_by_loss: BTreeSet<usize>,
}

impl Procs<'_> {
    fn start_agent(&mut self, i: usize) -> Result<()> {
        let c = peers::agent_command(self.lab, i, &self.agent_bin, &self.caps[&i], i);
        self.agents
            .insert(i, self.lab.spawn(i, c).context("starting an agent")?);
        if let Some(s) = &self.serf_bin {
            let join = Some(self.lab.host(0).ip);
            let c = serf::agent_command(self.lab, s, i, &peers::node_name(i), join);
            self.serfs
                .insert(i, self.lab.spawn(i, c).context("starting serf")?);
        }
        Ok(())
    }

    fn signal_host(&self, i: usize, sig: Signal) {
        for p in [self.agents.get(&i), self.serfs.get(&i)]
            .into_iter()
            .flatten()
        {
            p.signal(sig);
        }
    }

    /// Injects (`lift` false) or lifts fault `kind` of `agent`.
    fn act(&mut self, kind: Kind, agent: Option<usize>, lift: bool) -> Result<()> {
        let (i, lab) = (agent.unwrap_or(0), self.lab);
        let ip = |args: &[&str]| lab.exec(i, "ip", args).map(|_| ());
        match (kind, lift) {
            (Kind::Crash, false) => {
                for p in [self.agents.remove(&i), self.serfs.remove(&i)]
                    .into_iter()
                    .flatten()
                {
                    p.kill();
                }
            }
            (Kind::Crash, true) => self.start_agent(i)?,
            (Kind::Pause, false) => self.signal_host(i, Signal::SIGSTOP),
            (Kind::Pause, true) => self.signal_host(i, Signal::SIGCONT),
            (Kind::LinkDown, false) => {
                if let Err(e) = ip(&["link", "set", "eth0", "down"]) {
                    self.cut_by_loss.insert(i);
                    lab.set_loss(i, 100).with_context(|| {
                        format!("cutting h{i}'s link (ip link set down failed: {e})")
                    })?;
                }
            }
            (Kind::LinkDown, true) => {
                if self.cut_by_loss.contains(&i) {
                    self.lab.set_loss(i, 0)?;
                } else {
                    ip(&["link", "set", "eth0", "up"])?;
                    // A link down drops the routes through it: the lab's
                    // multicast route too.
                    ip(&["route", "replace", "224.0.0.0/4", "dev", "eth0"])?;
                }
            }
            (Kind::Loss | Kind::CoordLoss, false) => self.lab.set_loss(i, plan::LOSS_PCT)?,
            (Kind::Loss | Kind::CoordLoss, true) => self.lab.set_loss(i, 0)?,
            (Kind::CpuHog, false) => {
                for _ in 0..2 {
                    let mut c = self.lab.command(0, "sh");
                    c.args(["-c", "while :; do :; done"]);
                    self.hogs.push(self.lab.spawn(0, c)?);
                }
            }
            (Kind::CpuHog, true) => self.hogs.drain(..).for_each(|h| h.kill()),
            (Kind::CoordPause, lift) => {
                let sig = if lift {
                    Signal::SIGCONT
                } else {
                    Signal::SIGSTOP
                };
                for &pid in &self.observers {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
                }
            }
        }
        Ok(())
    }
}

/// The kernel's neighbour-table limits (`net.ipv4.neigh.default.gc_thresh1-3`),
/// raised to at least a number of entries and put back when dropped.
struct NeighbourLimits(Vec<(String, String)>);

impl NeighbourLimits {
    const KEYS: [&'static str; 3] = ["gc_thresh1", "gc_thresh2", "gc_thresh3"];

    fn raise(entries: usize) -> Result<NeighbourLimits> {
        let mut saved = Vec::new();
        for (k, key) in Self::KEYS.iter().enumerate() {
            let path = format!("/proc/sys/net/ipv4/neigh/default/{key}");
            let old = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {path}"))?
                .trim()
                .to_string();
            // thresh1 below which nothing is collected, thresh3 the hard cap.
            let want = entries * (k + 1);
            if old.parse::<usize>().unwrap_or(0) < want {
                std::fs::write(&path, want.to_string())
                    .with_context(|| format!("raising {path} to {want}"))?;
                saved.push((path, old));
            }
        }
        Ok(NeighbourLimits(saved))
    }
}

impl Drop for NeighbourLimits {
    fn drop(&mut self) {
        for (path, old) in &self.0 {
            let _ = std::fs::write(path, old);
        }
    }
}

/// watch's news: its `at_ms` placed on the wall clock by its stamped lines.
fn watch_news(lines: &[(f64, String)], spawned: f64, agents: usize) -> (Vec<Item>, f64) {
    let (events, start) = stamp::placed_events(lines, spawned);
    let news = events
        .iter()
        .filter_map(|(at, e)| {
            let what = match e["event"].as_str()? {
                "left" => News::Left,
                "joined" | "restarted" => News::Joined,
                "suspect" => News::Suspect,
                "up" => News::Up,
                "partitioned" => News::Partitioned,
                _ => return None,
            };
            let who = agent_of(e["instance"].as_str().unwrap_or_default(), agents);
            Some((*at, who, what))
        })
        .collect();
    (news, start - spawned)
}

fn zc_news(out: &str, agents: usize) -> Vec<Item> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| {
            let what = match e["event"].as_str()? {
                "removed" => News::Left,
                "added" | "updated" => News::Joined,
                _ => return None,
            };
            Some((
                e["wall_ms"].as_f64()?,
                agent_of(e["name"].as_str()?, agents),
                what,
            ))
        })
        .collect()
}

fn serf_news(lines: &[(f64, String)], agents: usize) -> Vec<Item> {
    lines
        .iter()
        .filter_map(|(seen, l)| {
            let (kind, name) = serf::member_event(l)?;
            let what = match kind {
                "Failed" | "Leave" => News::Left,
                "Join" => News::Joined,
                _ => return None,
            };
            Some((*seen, agent_of(name, agents), what))
        })
        .collect()
}

/// Who of `1..=agents` each tool has seen join so far.
fn joined(news: &[Item]) -> BTreeSet<usize> {
    let mut m = BTreeSet::new();
    for &(_, who, what) in news {
        if let Some(i) = who {
            match what {
                News::Joined => m.insert(i),
                News::Left => m.remove(&i),
                _ => false,
            };
        }
    }
    m
}

/// Runs the scenario for `ctx.faults_minutes`.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "faults: watch under injected faults",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let agents = if ctx.quick { 10 } else { 50 };
    let minutes = ctx.faults_minutes;
    let shape = plan::Shape {
        agents,
        length_s: minutes * 60.0,
        loss_s: if ctx.quick { 20.0 } else { 60.0 },
        seed: SEED,
    };
    let schedule = plan::plan(shape);
    let case = case_name(agents, minutes);
    let dir = ctx.work.path().join("faults");
    std::fs::create_dir_all(&dir)?;
    // Every lab host shares the kernel's one neighbour table, whose limits
    // (gc_thresh3, 1024 by default) count the entries of all namespaces:
    // serf's full mesh of 51 hosts needs 2,550, and past the limit no new
    // ARP entry is made, so every TCP handshake and unicast reply fails
    // while multicast goes on ("neighbor table overflow!" in dmesg). On a
    // real LAN each host has its own table. Raised for the run, restored.
    let _neigh = NeighbourLimits::raise((agents + 1) * (agents + 1) * 2)?;
    let lab = Lab::new(LabOptions {
        hosts: agents + 1,
        ipv6: false,
    })?;
    let iface = lab.host(0).iface.clone();
    let serf_bin = serf::find();
    match &serf_bin {
        Some(s) => {
            ctx.command(
                SERF,
                "serf agent -node=NAME -bind=IP:7946 -rpc-addr=127.0.0.1:7373 \
                 [-retry-join=COORDINATOR:7946 -retry-interval=1s] (log read from the \
                 coordinator's agent)",
            );
            ctx.notes.push(format!(
                "faults: serf beside watch: Debian's serf ({}), which embeds memberlist (Debian \
                 packages memberlist only as a Go library, golang-github-hashicorp-memberlist-dev)",
                serf::version(s)
            ));
        }
        None => ctx.not_measured(
            "faults: serf (memberlist) beside watch",
            "serf is not installed (apt-get install serf)",
        ),
    }
    let mut procs = Procs {
        lab: &lab,
        agent_bin: ctx.bins.agent.clone(),
        caps: (1..=agents)
            .map(|i| Ok((i, peers::write_caps(&dir, i)?.0)))
            .collect::<Result<_>>()?,
        agents: BTreeMap::new(),
        serf_bin: None,
        serfs: BTreeMap::new(),
        observers: Vec::new(),
        hogs: Vec::new(),
        cut_by_loss: BTreeSet::new(),
    };
    let mut started = Vec::new();
    for i in 1..=agents {
        let c = peers::agent_command(&lab, i, &procs.agent_bin, &procs.caps[&i], i);
        started.push((i, lab.spawn(i, c)?));
    }
    peers::wait_publishers(&lab, &started, Publisher::RlxAgent)?;
    procs.agents = started.into_iter().collect();

    // The cluster file: what `watch` counts "more than half" of.
    let cfg = dir.join("cluster.toml");
    std::fs::write(&cfg, "[discover]\nbrowse_ms = 2000\n")?;
    let mut listed = 0;
    for _ in 0..3 {
        let out = lab
            .command(0, &ctx.bins.discover)
            .args(["expand", "--write", "-q"])
            .arg(&cfg)
            .output()?;
        listed = std::fs::read_to_string(&cfg)?.matches("[[node]]").count();
        if listed >= agents {
            break;
        }
        eprintln!(
            "  faults: expand wrote {listed} of {agents} nodes: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }

    let serf0 = match &serf_bin {
        Some(s) => {
            let p = lab.spawn(0, serf::agent_command(&lab, s, 0, "coordinator", None))?;
            p.wait_for_output("Serf agent running", Duration::from_secs(30))
                .map_err(|e| anyhow::anyhow!(e))?;
            procs.serf_bin = Some(s.clone());
            for i in 1..=agents {
                let c = serf::agent_command(&lab, s, i, &peers::node_name(i), Some(lab.host(0).ip));
                procs.serfs.insert(i, lab.spawn(i, c)?);
            }
            Some(p)
        }
        None => None,
    };
    let mut serf_lines = serf0
        .as_ref()
        .map(|p| Stamped::follow(p.stdout_path().to_path_buf()));
    let script = dir.join("zc_watch.py");
    std::fs::write(&script, include_str!("../py/zc_watch.py"))?;
    let mut c = lab.command(0, PYTHON);
    c.arg(&script).arg(lab.host(0).ip.to_string()).arg(format!(
        "{}",
        (SETTLE_IN.as_secs_f64() + shape.length_s + 60.0).round()
    ));
    let z = lab.spawn(0, c)?;
    z.wait_for_output("ready", Duration::from_secs(60))
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["watch", "--json", "--interface", &iface, "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "warn");
    let watch_spawned = wall_ms();
    let w = lab.spawn(0, c)?;
    let mut watch_lines = Stamped::follow(w.stdout_path().to_path_buf());
    ctx.command(
        WATCH,
        "rlx-discover watch --json --interface IFACE --config CLUSTER.toml (the file from one \
         `rlx-discover expand --write`)",
    );
    ctx.command(ZC, "/usr/bin/python3 bench/py/zc_watch.py IP SECONDS");
    procs.observers = [
        Some(w.pid()),
        Some(z.pid()),
        serf0.as_ref().map(|p| p.pid()),
    ]
    .into_iter()
    .flatten()
    .collect();

    // Everyone seen by every tool before the first fault.
    let all: BTreeSet<usize> = (1..=agents).collect();
    let deadline = Instant::now() + SETTLE_IN;
    let seen = |serf_lines: &Option<Stamped>| {
        [
            joined(&watch_news(&watch_lines.lines(), watch_spawned, agents).0),
            joined(&zc_news(&z.stdout(), agents)),
            serf_lines
                .as_ref()
                .map_or(all.clone(), |s| joined(&serf_news(&s.lines(), agents))),
        ]
    };
    while Instant::now() < deadline && seen(&serf_lines).iter().any(|s| *s != all) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = seen(&serf_lines);
    if before[0] != all {
        // Why watch has not seen everyone: its events so far by kind, and
        // the last lines it logged.
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (_, l) in watch_lines.lines() {
            if let Ok(e) = serde_json::from_str::<Value>(&l) {
                *kinds
                    .entry(e["event"].as_str().unwrap_or("?").to_string())
                    .or_default() += 1;
            }
        }
        let err = w.stderr();
        let tail: Vec<&str> = err.lines().rev().take(6).collect();
        let state = std::fs::read_to_string(format!("/proc/{}/stat", w.pid()))
            .ok()
            .and_then(|s| {
                s.rsplit(") ")
                    .next()
                    .map(|r| r.chars().next().unwrap_or('?'))
            })
            .unwrap_or('-');
        let out_len = std::fs::metadata(w.stdout_path()).map_or(0, |m| m.len());
        ctx.notes.push(format!(
            "faults: before the first fault watch (state {state}, {out_len} bytes of output) had \
             printed {kinds:?}; its last log lines: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let ready_in = (SETTLE_IN - deadline.saturating_duration_since(Instant::now())).as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));

    // The injection, on the schedule.
    let mut actions: Vec<(f64, usize, bool)> = schedule
        .iter()
        .enumerate()
        .flat_map(|(k, p)| [(p.at, k, false), (p.at + p.dur, k, true)])
        .collect();
    // Lifts before injections at the same moment.
    actions.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.2.cmp(&a.2)));
    let mut log: Vec<Fault> = schedule
        .iter()
        .map(|p| Fault {
            kind: p.kind,
            agent: p.agent,
            start: f64::NAN,
            end: f64::NAN,
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, pids) = (stop.clone(), procs.observers.clone());
        std::thread::spawn(move || {
            let mut max = vec![0u64; pids.len()];
            while !stop.load(Ordering::Relaxed) {
                for (m, &p) in max.iter_mut().zip(&pids) {
                    *m = (*m).max(rss_kb(p).unwrap_or(0));
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
            max
        })
    };
    let cpu0: Vec<u64> = procs
        .observers
        .iter()
        .map(|&p| cpu_ns(p).unwrap_or(0))
        .collect();
    let t0 = Instant::now();
    let from = wall_ms();
    let mut failures: Vec<String> = Vec::new();
    for (at, k, lift) in actions {
        std::thread::sleep(
            (t0 + Duration::from_secs_f64(at)).saturating_duration_since(Instant::now()),
        );
        let now = wall_ms();
        if lift {
            log[k].end = now;
        } else {
            log[k].start = now;
        }
        let p = &schedule[k];
        if let Err(e) = procs.act(p.kind, p.agent, lift) {
            failures.push(format!("{} at {at:.1} s: {e:#}", p.kind.name()));
        }
        // The dead are reaped as they go.
        for a in procs.agents.values().chain(procs.serfs.values()) {
            let _ = a.try_wait();
        }
    }
    std::thread::sleep(TAIL);
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let cpu1: Vec<u64> = procs
        .observers
        .iter()
        .map(|&p| cpu_ns(p).unwrap_or(0))
        .collect();
    let rss_max = sampler.join().unwrap_or_default();

    // The news, judged.
    let (watch, late_start) = watch_news(&watch_lines.finish(), watch_spawned, agents);
    let zc = zc_news(&z.stdout(), agents);
    let serf = serf_lines.as_mut().map(|s| serf_news(&s.finish(), agents));
    let mut verdicts: Vec<(&str, Verdict)> = vec![
        (
            WATCH,
            judge::judge(&log, &watch, from, Speaks { suspect: true }),
        ),
        (ZC, judge::judge(&log, &zc, from, Speaks { suspect: false })),
    ];
    if let Some(s) = &serf {
        verdicts.push((SERF, judge::judge(&log, s, from, Speaks { suspect: false })));
    }
    let count = |kind: Kind| log.iter().filter(|f| f.kind == kind).count();
    for kind in Kind::ALL {
        let n = count(kind) as f64;
        let metric = format!("injected_{}", kind.name());
        ctx.record(
            SCENARIO,
            &case,
            INJECTOR,
            &metric,
            0,
            Some(n),
            None,
            None,
            "",
        );
    }
    let total = log.len();
    ctx.record(
        SCENARIO,
        &case,
        INJECTOR,
        "injected_total",
        0,
        Some(total as f64),
        None,
        None,
        format!("seed {SEED}"),
    );
    for (tool, v) in &verdicts {
        record_verdict(ctx, &case, tool, v, total);
    }
    for (k, tool) in [WATCH, ZC, SERF].iter().enumerate().take(rss_max.len()) {
        ctx.record(
            SCENARIO,
            &case,
            tool,
            "rss_kb max",
            0,
            Some(rss_max[k] as f64),
            None,
            None,
            "",
        );
        let pct = cpu1[k].saturating_sub(cpu0[k]) as f64 / 1e9 / elapsed * 100.0;
        ctx.record(
            SCENARIO,
            &case,
            tool,
            "cpu_pct",
            0,
            Some(pct),
            None,
            None,
            "",
        );
    }

    let names = |s: &BTreeSet<usize>| {
        let missing: Vec<String> = all.difference(s).map(|i| peers::node_name(*i)).collect();
        if missing.is_empty() {
            "all".to_string()
        } else {
            format!("all but {}", missing.join(", "))
        }
    };
    ctx.notes.push(format!(
        "faults: {case}; seed {SEED}; {total} faults injected ({}); agent faults every 4-6 s on \
         a random idle agent, at most {} agents dark at once, loss windows {:.0} s. Before the \
         first fault (after {ready_in:.0} s) watch had seen {}, python-zeroconf {}, serf {}. \
         The cluster file listed {listed} nodes. Links cut with `ip link set eth0 down` ({} \
         with 100% loss instead, `ip link` failing). watch's `at_ms` placed on the wall clock \
         from its stamped output: its clock started {late_start:.0} ms after its spawn. Load \
         average at the end {}.",
        Kind::ALL
            .iter()
            .map(|k| format!("{} {}", count(*k), k.name()))
            .collect::<Vec<_>>()
            .join(", "),
        shape.max_dark(),
        shape.loss_s,
        names(&before[0]),
        names(&before[1]),
        if serf_bin.is_some() {
            names(&before[2])
        } else {
            "not run".into()
        },
        procs.cut_by_loss.len(),
        crate::machine::loadavg()
    ));
    for (tool, v) in &verdicts {
        if v.false_left.is_empty() && v.unexplained_suspect.is_empty() {
            continue;
        }
        let list = |x: &[(f64, usize, String)]| judge::listed(x, from, 12);
        ctx.notes.push(format!(
            "faults: {tool}: false `left` {}{}{}",
            v.false_left.len(),
            if v.false_left.is_empty() {
                String::new()
            } else {
                format!(": {}", list(&v.false_left))
            },
            if v.unexplained_suspect.is_empty() {
                String::new()
            } else {
                format!(
                    "; unexplained `suspect` {}: {}",
                    v.unexplained_suspect.len(),
                    list(&v.unexplained_suspect)
                )
            }
        ));
    }
    for f in &failures {
        ctx.notes.push(format!("faults: an injection failed: {f}"));
    }
    drop(procs);
    // CI's guard of the promise "0 false `left`" (judge::FAIL_ON_FALSE_LEFT).
    match verdicts.iter().find(|(t, _)| *t == WATCH) {
        Some((_, v)) => v.fail_on_false_left(from),
        None => Ok(()),
    }
}

/// One tool's verdict as samples: each latency, the false deaths and
/// their rate, and (watch) the unexplained suspicions, the short pauses
/// without one and the partitions.
fn record_verdict(ctx: &mut Ctx, case: &str, tool: &str, v: &Verdict, total: usize) {
    let mut reps: BTreeMap<&str, u32> = BTreeMap::new();
    for &(metric, value, why) in &v.latencies {
        let rep = reps.entry(metric).or_default();
        let note = if value.is_none() { why } else { "" };
        ctx.record(SCENARIO, case, tool, metric, *rep, value, None, None, note);
        *rep += 1;
    }
    let by = v
        .false_left_by_context()
        .iter()
        .map(|(why, n)| format!("{n} under {why}"))
        .collect::<Vec<_>>()
        .join(", ");
    let n = v.false_left.len() as f64;
    ctx.record(
        SCENARIO,
        case,
        tool,
        "false_left",
        0,
        Some(n),
        None,
        None,
        by,
    );
    let rate = n / (total.max(1) as f64);
    let note = format!("of {total} faults injected");
    ctx.record(
        SCENARIO,
        case,
        tool,
        "false_left_per_fault",
        0,
        Some(rate),
        None,
        None,
        note,
    );
    if tool == WATCH {
        let counts = [
            ("unexplained_suspect", v.unexplained_suspect.len() as f64),
            (
                "pauses_without_suspect",
                f64::from(v.pauses_without_suspect),
            ),
            ("partitioned_events", f64::from(v.partitioned)),
        ];
        for (metric, n) in counts {
            ctx.record(SCENARIO, case, tool, metric, 0, Some(n), None, None, "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_labs_agents_are_named_back_to_their_host() {
        assert_eq!(agent_of("node-7", 10), Some(7));
        assert_eq!(agent_of("node-11", 10), None);
        assert_eq!(agent_of("node-0", 10), None);
        assert_eq!(agent_of("coordinator", 10), None);
    }

    #[test]
    fn watchs_clock_is_set_by_its_promptest_line() {
        let lines = vec![
            (
                1_000_120.0,
                r#"{"event":"joined","at_ms":100,"instance":"node-1"}"#.to_string(),
            ),
            (
                1_000_900.0,
                r#"{"event":"left","at_ms":800,"instance":"node-1"}"#.to_string(),
            ),
        ];
        let (news, late) = watch_news(&lines, 1_000_000.0, 3);
        assert_eq!(late, 20.0);
        assert_eq!(news[1], (1_000_820.0, Some(1), News::Left));
    }

    #[test]
    fn every_metric_judged_names_its_goal_or_none() {
        for m in ["crash_left_ms", "vanished_left_ms", "suspect_ms", "up_ms"] {
            assert!(LATENCY.iter().any(|l| l.0 == m && l.2.is_some()), "{m}");
        }
    }
}
