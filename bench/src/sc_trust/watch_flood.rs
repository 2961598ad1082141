//! **`watch` under a flood**, measured: the lab case of
//! `tests/heavy/watch_flood.rs`, repeated. A stranger announces K bogus
//! `_rlx._tcp` instances (10,000; 300 in quick mode) from the mDNS port
//! (`bench/py/flood.py ... 5353`, so both of watch's readers hear it: its
//! own port-5353 reader, which knows each packet's source, and mdns-sd's);
//! `rlx-discover watch --json` with a cluster key is started under the
//! flood, and once it is refusing the flood three real keyed agents start.
//!
//! Per run: each real agent's time from its start to its `joined` event
//! (median and max of the three), how many of the three joined, bogus
//! instances that joined (must be 0), refusals printed, and watch's peak
//! RSS (`VmHWM` of the live process, read just before it is stopped).
//!
//! Lab: h0 watch, h1-h3 the agents, h4 the flooder.

use super::key::keygen;
use crate::ctx::Ctx;
use crate::peers;
use crate::proc::status_kb;
use crate::results::median_with_failures;
use anyhow::Result;
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::time::{Duration, Instant};

const TOOL: &str = "rlx-discover watch --json (key_file)";
/// Real agents started under the flood.
const REAL: usize = 3;
/// Refusals watch must have printed before the agents start: the flood is
/// heard and being refused.
const REFUSALS_FIRST: usize = 10;
/// How long watch may take to refuse that many, and the agents to join,
/// before the run is recorded as unfinished.
const DEADLINE: Duration = Duration::from_secs(60);

/// How a `watch` that exited by itself under the flood ended.
struct Exit {
    /// After its start.
    after_ms: u64,
    /// Its exit status.
    status: String,
    /// How many times it logged that mdns-sd closed the browse channel.
    rebrowses: usize,
    /// Its last line on stderr.
    last: String,
}

/// The events `watch --json` printed so far.
fn events(w: &LabProcess) -> Vec<Value> {
    w.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn count(evs: &[Value], kind: &str) -> usize {
    evs.iter().filter(|e| e["event"] == kind).count()
}

/// `at_ms` of the `joined` event of each real agent (`None`: not yet).
fn joined_at(evs: &[Value]) -> Vec<Option<u64>> {
    (1..=REAL)
        .map(|i| {
            let name = peers::node_name(i);
            evs.iter()
                .find(|e| e["event"] == "joined" && e["instance"] == name.as_str())
                .and_then(|e| e["at_ms"].as_u64())
        })
        .collect()
}

/// Runs the `watch` flood case.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "trust: watch under a flood",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let k: usize = if ctx.quick { 300 } else { 10_000 };
    let dir = ctx.work.path().join("watch-flood");
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("cluster.key");
    keygen(ctx, &key)?;
    let cfg = dir.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!("[discover]\nkey_file = {:?}\n", key.display().to_string()),
    )?;
    let lab = Lab::new(LabOptions {
        hosts: REAL + 2,
        ipv6: false,
    })?;
    let flooder = REAL + 1;
    let x = lab.subnet().addr().octets()[1];
    let script = dir.join("flood.py");
    std::fs::write(&script, include_str!("../../py/flood.py"))?;
    let mut c = lab.command(flooder, PYTHON);
    c.arg(&script)
        .arg(lab.host(flooder).ip.to_string())
        .arg(k.to_string())
        .arg("0.5")
        .arg(format!("10.{x}"))
        .arg("5353");
    let f = lab.spawn(flooder, c)?;
    f.wait_for_output("ready", Duration::from_secs(120))
        .map_err(|e| anyhow::anyhow!(e))?;
    ctx.command(
        "flood (from port 5353)",
        format!(
            "/usr/bin/python3 bench/py/flood.py IP {k} 0.5 PREFIX 5353   # {k} bogus instances \
             re-sent every 0.5 s from the mDNS port"
        ),
    );
    ctx.command(
        TOOL,
        "rlx-discover watch --json --for-ms 180000 --config cluster.toml   # [discover] key_file",
    );
    ctx.notes.push(format!(
        "trust: watch under a flood (the lab case of tests/heavy/watch_flood.rs): \
         {k} bogus instances sent from the mDNS port by one stranger (so watch's own reader, \
         which knows each packet's source, hears them as well as mdns-sd), `watch --json` with \
         a cluster key started under it, and once it has printed {REFUSALS_FIRST} refusals, \
         {REAL} real keyed agents started. `join_ms_*`: from each agent's start to its `joined` \
         event (watch's `at_ms`, whose clock starts a few ms after its spawn); `vmhwm_kb`: \
         watch's peak RSS; `bogus_joined` and `watch_exited` must be 0."
    ));
    let case = format!("watch: {k} bogus instances, then {REAL} real agents");
    let reps = ctx.reps;
    // Runs in which watch exited by itself, with what it said last.
    let mut exits: Vec<Exit> = Vec::new();
    for rep in 0..reps {
        let mut c = lab.command(0, &ctx.bins.discover);
        c.args(["watch", "--json", "--for-ms", "180000", "--config"])
            .arg(&cfg)
            .env("RUST_LOG", "warn");
        let t0 = Instant::now();
        let w = lab.spawn(0, c)?;
        let pid = w.pid();
        // A watch that exits under the flood (it should not) ends the run:
        // recorded as unfinished, with what it said.
        let mut exited = None;
        let until = Instant::now() + DEADLINE;
        while count(&events(&w), "refused") < REFUSALS_FIRST && Instant::now() < until {
            if let Some(s) = w.try_wait() {
                exited = Some((s, t0.elapsed()));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let refused_before = count(&events(&w), "refused");
        let mut started_ms = Vec::new();
        let mut agents = Vec::new();
        if exited.is_none() {
            for i in 1..=REAL {
                let (caps, _) = peers::write_caps(&dir, i)?;
                let mut c = peers::agent_command(&lab, i, &ctx.bins.agent, &caps, i);
                c.arg("--key-file").arg(&key);
                started_ms.push(t0.elapsed().as_millis() as u64);
                agents.push(lab.spawn(i, c)?);
            }
            let until = Instant::now() + DEADLINE;
            while joined_at(&events(&w)).iter().any(Option::is_none) && Instant::now() < until {
                if let Some(s) = w.try_wait() {
                    exited = Some((s, t0.elapsed()));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // VmHWM is the peak so far: read while watch still runs.
        let peak = exited.is_none().then(|| status_kb(pid, "VmHWM:")).flatten();
        let evs = events(&w);
        let exit_note = exited.map(|(s, at)| {
            let err = w.stderr();
            let lines: Vec<&str> = err.lines().collect();
            let last = lines.last().copied().unwrap_or_default();
            eprintln!(
                "  watch under the flood exited ({s}) after {} ms; its last lines:\n{}",
                at.as_millis(),
                lines[lines.len().saturating_sub(12)..].join("\n")
            );
            let rebrowses = lines
                .iter()
                .filter(|l| l.contains("closed the browse channel"))
                .count();
            exits.push(Exit {
                after_ms: at.as_millis() as u64,
                status: s.to_string(),
                rebrowses,
                last: last.to_string(),
            });
            format!(
                "; watch exited ({s}) {} ms after its start: {last}",
                at.as_millis()
            )
        });
        drop(agents);
        drop(w);
        let mut joins: Vec<Option<f64>> = joined_at(&evs)
            .iter()
            .zip(&started_ms)
            .map(|(at, s)| at.map(|a| a.saturating_sub(*s) as f64))
            .collect();
        joins.resize(REAL, None);
        let joined = joins.iter().flatten().count() as u64;
        let ours: Vec<String> = (1..=REAL).map(peers::node_name).collect();
        let bogus = evs
            .iter()
            .filter(|e| e["event"] == "joined")
            .filter(|e| !ours.iter().any(|n| e["instance"] == n.as_str()))
            .count();
        let refused = count(&evs, "refused");
        let all = joined == REAL as u64;
        let note = format!(
            "{refused_before} refusals before the agents started (after {} ms), {refused} in \
             all; agents joined {} ms after their start{}",
            started_ms.first().copied().unwrap_or(0),
            joins
                .iter()
                .map(|j| j.map_or("never".into(), |v| format!("{v:.0}")))
                .collect::<Vec<_>>()
                .join(" / "),
            exit_note.unwrap_or_default()
        );
        let max = all.then(|| joins.iter().flatten().copied().fold(0.0, f64::max));
        ctx.record(
            "trust",
            &case,
            TOOL,
            "join_ms_median",
            rep,
            median_with_failures(&joins),
            Some(joined),
            Some(REAL as u64),
            note,
        );
        ctx.record(
            "trust",
            &case,
            TOOL,
            "join_ms_max",
            rep,
            max,
            Some(joined),
            Some(REAL as u64),
            "",
        );
        ctx.record(
            "trust",
            &case,
            TOOL,
            "agents_joined",
            rep,
            Some(joined as f64),
            Some(joined),
            Some(REAL as u64),
            "",
        );
        ctx.record(
            "trust",
            &case,
            TOOL,
            "bogus_joined",
            rep,
            Some(bogus as f64),
            None,
            None,
            "",
        );
        // Must be 0: watch runs until stopped, a flood or not.
        ctx.record(
            "trust",
            &case,
            TOOL,
            "watch_exited",
            rep,
            Some(f64::from(u8::from(exited.is_some()))),
            None,
            None,
            "",
        );
        ctx.record(
            "trust",
            &case,
            TOOL,
            "refusals_printed",
            rep,
            Some(refused as f64),
            None,
            None,
            "",
        );
        ctx.record(
            "trust",
            &case,
            TOOL,
            "vmhwm_kb",
            rep,
            peak.map(|p| p as f64),
            None,
            None,
            "",
        );
        std::thread::sleep(Duration::from_millis(1500));
    }
    drop(f);
    if !exits.is_empty() {
        // The table says "unfinished"; this says what happened.
        let list = |f: &dyn Fn(&Exit) -> String| {
            let mut v: Vec<String> = exits.iter().map(f).collect();
            v.dedup();
            v.join(", ")
        };
        ctx.notes.push(format!(
            "trust: watch under a flood: in {} of {reps} runs `watch` exited by itself under the \
             flood of {k}, {} ms after its start ({}), having logged \"mdns-sd closed the browse \
             channel (consumer too slow?); browsing again\" {} times, then: {}. Its figures for \
             those runs are unfinished.",
            exits.len(),
            list(&|e| e.after_ms.to_string()),
            list(&|e| e.status.clone()),
            list(&|e| e.rebrowses.to_string()),
            list(&|e| format!("`{}`", e.last)),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evs(lines: &[&str]) -> Vec<Value> {
        lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn each_real_agent_s_first_join_is_found_and_the_others_are_not() {
        let e = evs(&[
            r#"{"event": "refused", "at_ms": 10, "instance": "bogus-1"}"#,
            r#"{"event": "joined", "at_ms": 2500, "instance": "node-2"}"#,
            r#"{"event": "joined", "at_ms": 2100, "instance": "node-1"}"#,
            r#"{"event": "joined", "at_ms": 2900, "instance": "node-1"}"#,
            r#"{"event": "joined", "at_ms": 3000, "instance": "bogus-7"}"#,
        ]);
        assert_eq!(joined_at(&e), vec![Some(2100), Some(2500), None]);
        assert_eq!(count(&e, "refused"), 1);
        assert_eq!(count(&e, "joined"), 4);
    }
}
