//! **`watch` under churn**: agents stopped (SIGTERM), crashed (SIGKILL)
//! and restarted (kill -9 and started again at once, same id and records)
//! at random, against a recorded ground truth. `watch --json` must keep the
//! stream's grammar per node (joined, (updated | restarted)*, left, ...),
//! report joins, goodbyes and crashes within their bounds, report the fast
//! restarts (as `restarted`, or `left` then `joined`), and end with the
//! agents actually running.
//!
//! Guards against three failures `watch` once had under churn: a restarted
//! agent whose records equal its dead predecessor's cached ones never
//! reported joined (no new event from mdns-sd), joins arriving in batches
//! seconds late behind health checks, and a restart faster than the health
//! check unseen.
//!
//! The schedule is random with a fixed seed (`RLX_CHURN_SEED`, printed on
//! failure); `RLX_CHURN_SECS` sets its length (default 20 s). Everything runs
//! inside namespaces built by [`rlx_lab`].

use nix::sys::signal::Signal;
use rlx_lab::kit::{self, promise};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// Agents in the lab, one per host (host 0 runs watch).
const AGENTS: usize = 12;

/// One random action every this long.
const STEP: Duration = Duration::from_millis(800);

/// From an agent's start to its `joined`: its own start-up and mDNS
/// probing (about 1 s) plus the promise below, with room for a loaded box
/// starting a process. The promise itself is checked from the agent's
/// first announcement.
const JOIN_BOUND: Duration = Duration::from_secs(6);
/// From the agent's first announcement (its own log line): the promise.
const ANNOUNCED_JOIN_BOUND: Duration = promise::JOINED.every;
/// A goodbye (SIGTERM): the promise.
const GOODBYE_BOUND: Duration = promise::GOODBYE_LEFT.every;

/// How much earlier than the test's clock an event's `at_ms` may read:
/// watch's origin is its own start, a little after the test took `t0`
/// (the process spawned in its namespace), so a `left` that comes within
/// milliseconds of a SIGTERM (the goodbye heard on watch's own socket, the
/// check refused at once) can carry an `at_ms` before the action's time.
/// Each agent's actions are 800 ms or more apart and overlaps are skipped,
/// so this takes no event of the previous action.
const CLOCK_SLACK_MS: u64 = 250;
/// A crash (SIGKILL) of a member that may be seconds old: the promise.
const CRASH_BOUND: Duration = promise::YOUNG_CRASH_LEFT.every;

/// What the schedule did to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Start,
    Stop,
    Crash,
    FastRestart,
}

/// `box{i}`'s agent on host `i`, with fixed caps (the same records every run).
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

/// The events `watch --json` printed so far ([`Proc::json_lines`]).
fn events(w: &Proc) -> Vec<Value> {
    w.json_lines()
}

/// The membership the events describe, checking the grammar on the way.
fn membership(evs: &[Value], seed: u64) -> BTreeSet<String> {
    let mut members = BTreeSet::new();
    for e in evs {
        assert_eq!(e["v"], 1, "seed {seed}: every line carries the schema: {e}");
        let who = e["instance"].as_str().unwrap_or_default().to_string();
        let ok = match e["event"].as_str() {
            Some("joined") => members.insert(who),
            Some("left") => members.remove(&who),
            Some("updated" | "restarted") => members.contains(&who),
            _ => true,
        };
        assert!(ok, "seed {seed}: out of order: {e}\nall: {evs:#?}");
    }
    members
}

fn pct(v: &mut [i64], p: f64) -> i64 {
    v.sort_unstable();
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(0)
}

fn summary(name: &str, v: &[i64]) -> String {
    let mut v = v.to_vec();
    format!(
        "{name}: n={} median {} ms, p95 {} ms, max {} ms",
        v.len(),
        pct(&mut v, 0.5),
        pct(&mut v, 0.95),
        pct(&mut v, 1.0)
    )
}

/// Twelve agents, `watch --json` on the same LAN, and a random schedule of
/// stops, crashes, fast restarts and starts every 0.8 s: the stream keeps
/// its grammar, each action is reported within its bound, fast restarts are
/// `restarted` events, and the final membership is the agents running.
#[test]
fn under_random_churn_watch_reports_every_join_leave_and_restart_within_its_bound() {
    let Some(labs) = require_lab() else {
        return;
    };
    let seed: u64 = std::env::var("RLX_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let secs: u64 = std::env::var("RLX_CHURN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    eprintln!("churn: seed {seed} (RLX_CHURN_SEED), {secs} s (RLX_CHURN_SECS)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let lab = labs.hosts(AGENTS + 1);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0"]).env(
        "RUST_LOG",
        std::env::var("WATCH_LOG").unwrap_or("warn".into()),
    );
    let (t0, wall0) = (Instant::now(), SystemTime::now());
    let w = Proc::spawn(&lab, 0, cmd);
    let at = |t: Instant| t.duration_since(t0).as_millis() as u64;

    // (when, agent, what), the ground truth; every agent process started,
    // kept to the end for its log (when it first announced).
    let mut truth: Vec<(u64, usize, Act)> = Vec::new();
    let mut procs: Vec<Proc> = Vec::new();
    let mut started: BTreeMap<usize, usize> = BTreeMap::new();
    let mut running: BTreeMap<usize, usize> = BTreeMap::new();
    for i in 1..=AGENTS {
        truth.push((at(Instant::now()), i, Act::Start));
        started.insert(truth.len() - 1, procs.len());
        running.insert(i, procs.len());
        procs.push(agent(&lab, i, d));
    }
    kit::eventually(Duration::from_secs(30), "every agent joined", || {
        let m = membership(&events(&w), seed);
        if m.len() == AGENTS {
            Ok(())
        } else {
            Err(format!("{m:?}"))
        }
    });

    let end = Instant::now() + Duration::from_secs(secs);
    let mut tick = Instant::now();
    while Instant::now() < end {
        tick += STEP;
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
        let i = 1 + rng.usize(..AGENTS);
        let act = match running.contains_key(&i) {
            false => Act::Start,
            true => [Act::Stop, Act::Crash, Act::FastRestart][rng.usize(..3)],
        };
        let now = at(Instant::now());
        match act {
            Act::Start => {}
            Act::Stop => {
                procs[running.remove(&i).unwrap()].signal(Signal::SIGTERM);
            }
            Act::Crash | Act::FastRestart => procs[running.remove(&i).unwrap()].kill(),
        }
        if matches!(act, Act::Start | Act::FastRestart) {
            started.insert(truth.len(), procs.len());
            running.insert(i, procs.len());
            procs.push(agent(&lab, i, d));
        }
        truth.push((now, i, act));
    }

    // Past every bound, the membership the events describe is what runs.
    let want: BTreeSet<String> = running.keys().map(|i| format!("box{i}")).collect();
    kit::eventually(CRASH_BOUND * 2, "the final membership", || {
        let m = membership(&events(&w), seed);
        if m == want {
            Ok(())
        } else {
            Err(format!("seed {seed}: events say {m:?}, running {want:?}"))
        }
    });
    let evs = events(&w);

    // Each action against the first news of its agent after it, unless the
    // agent's next action came before that news was due (overlapped).
    let (mut joins, mut goodbyes, mut crashes, mut restarts): (
        Vec<i64>,
        Vec<i64>,
        Vec<i64>,
        Vec<i64>,
    ) = Default::default();
    let mut after_announcement: Vec<i64> = vec![];
    let (mut overlapped, mut restarted_events, mut failures) = (0, 0, Vec::new());
    for (k, &(t, i, act)) in truth.iter().enumerate() {
        let bound = bound_of(act);
        let next = truth[k + 1..]
            .iter()
            .find(|(_, j, _)| *j == i)
            .map_or(u64::MAX, |(t, _, _)| *t);
        // The news of the agent's previous action may still be on its way.
        let prev_due = truth[..k]
            .iter()
            .rfind(|(_, j, _)| *j == i)
            .map_or(0, |&(p, _, a)| p + bound_of(a).as_millis() as u64);
        if next < t + bound.as_millis() as u64 || prev_due > t {
            overlapped += 1;
            continue;
        }
        let who = format!("box{i}");
        let news: Vec<(&str, u64)> = evs
            .iter()
            .filter(|e| e["instance"] == who.as_str() && e["event"] != "refused")
            .filter_map(|e| Some((e["event"].as_str()?, e["at_ms"].as_u64()?)))
            .filter(|(_, a)| *a + CLOCK_SLACK_MS >= t && *a < next)
            .collect();
        // A start while the crashed predecessor is still a member (its
        // crash not yet seen) is a restart.
        let expected: &[&str] = match act {
            Act::Start => &["joined", "restarted"],
            Act::Stop | Act::Crash => &["left"],
            // `joined` when the process killed had not joined yet.
            Act::FastRestart => &["restarted", "left", "joined"],
        };
        let Some(&(kind, a)) = news.first() else {
            failures.push(format!("{act:?} box{i} at {t} ms: no news at all"));
            continue;
        };
        if !expected.contains(&kind) {
            failures.push(format!(
                "{act:?} box{i} at {t} ms: first news {kind} at {a} ms"
            ));
            continue;
        }
        // A fast restart seen as left then joined is a restart too, late.
        let done = match (act, kind) {
            (Act::FastRestart, "left") => news.iter().find(|(k, _)| *k == "joined").map(|n| n.1),
            _ => Some(a),
        };
        let Some(done) = done else {
            failures.push(format!(
                "{act:?} box{i} at {t} ms: left at {a} ms, never back"
            ));
            continue;
        };
        let lat = done.saturating_sub(t);
        if lat > bound.as_millis() as u64 {
            failures.push(format!("{act:?} box{i} at {t} ms: {kind} after {lat} ms"));
        }
        if let Some(ann) = started
            .get(&k)
            .and_then(|&p| first_announced(&procs[p], wall0))
        {
            // Negative when the join beat the agent's own log line (it is
            // written once mdns-sd has sent the announcement) or the
            // clocks' origins differ (watch's at_ms starts a little later).
            let lat = done as i64 - ann as i64;
            after_announcement.push(lat);
            if lat > ANNOUNCED_JOIN_BOUND.as_millis() as i64 {
                failures.push(format!(
                    "{act:?} box{i}: {kind} {lat} ms after its first announcement at {ann} ms"
                ));
            }
        }
        match act {
            Act::Start => joins.push(lat as i64),
            Act::Stop => goodbyes.push(lat as i64),
            Act::Crash => crashes.push(lat as i64),
            Act::FastRestart => {
                restarted_events += usize::from(kind == "restarted");
                restarts.push(lat as i64)
            }
        }
    }
    eprintln!(
        "churn (seed {seed}, {} actions, {overlapped} overlapped): {}; {}; {}; {}; {} ({} as \
         `restarted`); latencies from the action (joins: from the process start)",
        truth.len(),
        summary("join", &joins),
        summary(
            "joined or restarted after the first announcement",
            &after_announcement
        ),
        summary("goodbye-leave", &goodbyes),
        summary("crash-leave", &crashes),
        summary("fast restart", &restarts),
        restarted_events
    );
    let compact: Vec<String> = evs
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {}",
                e["at_ms"], e["event"], e["instance"], e["reason"]
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "seed {seed}: {failures:#?}\ntruth: {truth:?}\nevents: {compact:#?}"
    );
    // A kill -9 and a start again is seen as it happens now: the killed
    // agent's liveness connection ends and its port refuses a dial before
    // the new process listens (about 0.8 s to start here), so it is `left`
    // then `joined`, each within its bound (checked above). `restarted`
    // comes when the new process answers before the crash is confirmed (a
    // supervisor's restart in milliseconds): src/watch/tests/live.rs.
    eprintln!(
        "fast restarts: {restarted_events} reported `restarted`, the others left then joined"
    );
    drop(procs);
}

/// How long the news of `act` may take (generous; see the constants).
fn bound_of(act: Act) -> Duration {
    match act {
        Act::Start | Act::FastRestart => JOIN_BOUND,
        Act::Stop => GOODBYE_BOUND,
        Act::Crash => CRASH_BOUND,
    }
}

/// When agent `p` first announced itself, in ms since `wall0`, from its
/// log (`mDNS: announced on ...`, stamped by tracing in RFC 3339).
fn first_announced(p: &Proc, wall0: SystemTime) -> Option<u64> {
    let log = p.0.stderr();
    let line = log.lines().find(|l| l.contains("mDNS: announced on"))?;
    let stamp = humantime::parse_rfc3339(line.split_whitespace().next()?).ok()?;
    Some(stamp.duration_since(wall0).ok()?.as_millis() as u64)
}

/// `watch --config`: the file's nodes are listed down until a member
/// matches one (by its `addr` here), and a member in none of them is a
/// newcomer (no `in_file`).
#[test]
fn watch_with_a_cluster_file_tells_its_nodes_up_or_down_beside_newcomers() {
    let Some(labs) = require_lab() else {
        return;
    };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = d.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[node]]\naddr = \"{}:9100\"\nckpt_dir = \"/m\"\ndevice = \"cpu\"\n\n[[node]]\naddr = \"10.9.9.9:9100\"\nckpt_dir = \"/m\"\ndevice = \"cpu\"\n",
            lab.host(1).ip
        ),
    )
    .unwrap();
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0", "--config"])
        .arg(&cfg);
    let w = Proc::spawn(&lab, 0, cmd);
    let _a1 = agent(&lab, 1, d);
    let _a2 = agent(&lab, 2, d);
    let evs = kit::eventually(Duration::from_secs(30), "both joined", || {
        let evs = events(&w);
        let n = evs.iter().filter(|e| e["event"] == "joined").count();
        if n == 2 {
            Ok(evs)
        } else {
            Err(format!("{evs:?}"))
        }
    });
    let joined = |who: &str| {
        evs.iter()
            .find(|e| e["event"] == "joined" && e["instance"] == who)
            .unwrap()
            .clone()
    };
    assert_eq!(joined("box1")["in_file"]["line"], 1);
    assert_eq!(joined("box1")["in_file"]["up"], true);
    assert!(joined("box2").get("in_file").is_none(), "a newcomer");
}
