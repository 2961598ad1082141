//! **Scenario 1: mDNS discovery complete time** — N simulated agents, one
//! per lab host, and a fresh browser in another host whose link drops 0, 5
//! or 20% of packets each way: how long until all N are resolved (address,
//! port, TXT), and how many were found at all, for `rlx-discover browse
//! --json`, a python-zeroconf browser and `avahi-browse -rp` (plus what
//! `avahi-browse -rpt` returns when it exits by itself).
//!
//! Fairness: before every run the ARP caches of every host are flushed (a
//! coordinator that starts cold; unicast replies need ARP, multicast ones do
//! not), avahi-daemon is restarted (an empty cache: it caches everything it
//! overhears), and runs are spaced by [`GAP`] so that no browser meets the
//! once-a-second multicast rate limit (RFC 6762 §6) that the previous one
//! triggered. The tool order rotates every repetition. Every tool is timed
//! from its spawn: the two that report their own times (ours and
//! python-zeroconf) also say when their clock started, in Unix time, and
//! the bench adds their start-up ([`crate::proc::Timed::since_spawn_ms`]).

mod bystander;
mod segment;

use crate::ctx::Ctx;
use crate::peers::{self, Publisher};
use crate::proc::{run_streaming, run_timed, Timed};
use anyhow::Result;
use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use rlx_proto::service::SERVICE;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

/// From this many agents on, a default run measures the lossless case
/// only.
const FLEET: usize = 1000;

/// Pause between two browser runs: longer than the 1 s per-record
/// multicast rate limit a previous browser's queries may have started.
const GAP: Duration = Duration::from_millis(1500);

const OURS: &str = "rlx-discover browse";
const PYZC: &str = "python-zeroconf";
const AVAHI: &str = "avahi-browse -rp";
const AVAHI_T: &str = "avahi-browse -rpt (exits by itself)";
const EXPAND: &str = "rlx-discover expand (empty [discover])";

/// The tools of this scenario, in plot order.
pub const TOOLS: [&str; 3] = [OURS, PYZC, AVAHI];

/// Case name for N agents at `loss` percent (IPv4 LAN).
pub fn case_name(n: usize, loss: u8) -> String {
    format!("N={n} loss={loss}%")
}

/// Marks the cases run on an IPv6-only LAN.
pub const IPV6_ONLY: &str = "IPv6-only";

/// Case name for N agents at `loss` percent on an IPv6-only LAN when `v6`.
pub fn case_name_on(n: usize, loss: u8, v6: bool) -> String {
    if v6 {
        format!("{} {IPV6_ONLY}", case_name(n, loss))
    } else {
        case_name(n, loss)
    }
}

/// (N, loss, IPv6-only) of a case name.
pub fn parse_case(case: &str) -> Option<(usize, u8, bool)> {
    let mut it = case.split_whitespace();
    let n = it.next()?.strip_prefix("N=")?.parse().ok()?;
    let loss = it
        .next()?
        .strip_prefix("loss=")?
        .strip_suffix('%')?
        .parse()
        .ok()?;
    match it.next() {
        None => Some((n, loss, false)),
        Some(IPV6_ONLY) if it.next().is_none() => Some((n, loss, true)),
        Some(_) => None,
    }
}

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    let mut ns: Vec<(usize, bool)> = match (&ctx.mdns_n[..], ctx.quick) {
        ([], true) => vec![1, 10],
        // 1,000 (issue 41's fleet) lossless only: a chained lab, and the
        // loss cases at that size would add most of an hour.
        ([], false) => vec![1, 10, 50, 100, 200, 1000],
        (given, _) => given.to_vec(),
    }
    .into_iter()
    .map(|n| (n, false))
    .collect();
    // IPv6-only LANs: 50 agents unless told otherwise.
    let v6_ns: Vec<usize> = match (&ctx.mdns_ipv6_n[..], ctx.quick, ctx.mdns_n.is_empty()) {
        ([], false, true) => vec![50],
        ([], _, _) => Vec::new(),
        (given, _, _) => given.to_vec(),
    };
    ns.extend(v6_ns.into_iter().map(|n| (n, true)));
    let losses: Vec<u8> = match (&ctx.mdns_loss[..], ctx.quick) {
        ([], true) => vec![0, 20],
        ([], false) => vec![0, 5, 20],
        (given, _) => given.to_vec(),
    };
    let publisher = if ctx.features.agent_run {
        Publisher::RlxAgent
    } else {
        Publisher::PythonZeroconf
    };
    ctx.notes.push(format!(
        "mdns: publishers are {}; one per lab host, browser in host 0, loss (nftables random \
         drop, both directions) on the browser's link only. Before every run all ARP caches are \
         flushed and avahi-daemon restarted (empty cache); runs are {} ms apart; the tool order \
         rotates every repetition. complete_ms is from each tool's spawn (the bench's wall \
         clock just before it), for all three: ours = the report's start of discovery \
         (`started_unix_us`) plus the largest per-node found_ms of `browse --json`; \
         python-zeroconf = its Zeroconf instance's creation (`started_unix_us`, after \
         imports) plus its time to the last service resolved (address, port, TXT); \
         avahi-browse -rp = to the N-th resolved line on its stdout. Peers get a deadline (10 s lossless, 20 s under loss; quick mode 5/8 s). \
         The figures under loss are Linux's, with ARP and IPv6 neighbour help (rlx-net's \
         neighbour and neighbour6 modules); a macOS coordinator has none, so each lost ARP exchange there holds a legacy-query \
         reply or a first handshake for the kernel's own one-second retry: without it, at 20% \
         loss with 50 agents, one to four live agents per run failed their handshake, and \
         lossless runs are unaffected. One more lab host, which runs nothing, is the \
         bystander: everything its interface receives during each run is counted (its rx \
         counters, and by kind from nftables at its ingress), ARP and all.",
        publisher.describe(),
        GAP.as_millis()
    ));
    if !ctx.features.browse {
        ctx.not_measured(
            "mdns: rlx-discover browse",
            "`rlx-discover browse --json` has not landed in this build; peers measured alone",
        );
    }
    let browse_args: Vec<String> = vec![
        "browse".into(),
        "--json".into(),
        "--interface".into(),
        "eth0".into(),
    ];
    ctx.command(OURS, format!("rlx-discover {}", browse_args.join(" ")));
    ctx.command(
        PYZC,
        "/usr/bin/python3 bench/py/zc_browse.py IP N DEADLINE_S",
    );
    ctx.command(
        AVAHI,
        format!(
            "avahi-browse -rp {SERVICE}   # killed once N services are resolved or at the deadline"
        ),
    );
    ctx.command(AVAHI_T, format!("avahi-browse -rpt {SERVICE}"));
    ctx.command(
        EXPAND,
        "rlx-discover expand --format json empty.toml   # the file holds only `[discover]`",
    );
    let dir = ctx.work.path().join("mdns");
    std::fs::create_dir_all(&dir)?;

    for &(n, v6) in &ns {
        // A cluster file per lab: `expand` pins the node keys it admits
        // beside its file (empty-N.pins), and each lab's agents have keys
        // of their own under the ids the last lab's had, so a file shared
        // between labs refused them as impostors (a run of 2026-12-06
        // found 100 of 200). Within a lab, the first run pins and the
        // others check the pins, as a user's repeated `expand` does.
        let empty = dir.join(format!("empty-{n}{}.toml", if v6 { "-v6" } else { "" }));
        std::fs::write(&empty, "[discover]\n")?;
        eprintln!(
            "  mdns: N={n}{}: building a {}-host lab and starting publishers",
            if v6 { " IPv6-only" } else { "" },
            n + 2
        );
        // Host 0 browses, hosts 1..=n publish, host n + 1 is a bystander
        // that runs nothing and counts what reaches it.
        let lab = Lab::new(LabOptions {
            hosts: n + 2,
            ipv6: v6,
        })?;
        if v6 {
            // IPv6-only: every host keeps its link-local and ULA addresses.
            for i in 0..=n + 1 {
                lab.exec(i, "ip", &["-4", "addr", "flush", "dev", "eth0"])?;
            }
        }
        let seg = match segment::Segment::install(&lab, 0) {
            Ok(s) => Some(s),
            Err(e) => {
                ctx.not_measured(
                    "mdns: load on the segment",
                    format!("the switch's counters could not be installed: {e:#}"),
                );
                None
            }
        };
        let by = match bystander::Bystander::install(&lab, n + 1, 0) {
            Ok(b) => Some(b),
            Err(e) => {
                ctx.not_measured(
                    "mdns: what a bystander receives",
                    format!("its counters could not be installed: {e:#}"),
                );
                None
            }
        };
        let mut procs: Vec<(usize, LabProcess)> = Vec::new();
        for i in 1..=n {
            procs.push((
                i,
                peers::start_publisher(&lab, i, i, publisher, &ctx.bins.agent, &ctx.scripts, &dir)?,
            ));
        }
        if let Err(e) = peers::wait_publishers_on(&lab, &procs, publisher, v6) {
            ctx.not_measured(
                &format!("mdns: N={n}"),
                format!("the {n} publishers did not all come up on this machine: {e:#}"),
            );
            continue;
        }
        // Let the publishers' own announcements and rate limits settle.
        std::thread::sleep(Duration::from_secs(2));
        let opts = AvahiOptions {
            host_name: Some(peers::avahi_host_name(0)),
            ..Default::default()
        };
        let mut avahi = match Avahi::start(&lab, 0, &opts) {
            Ok(a) => Some(a),
            Err(e) => {
                ctx.not_measured(
                    "mdns: avahi-browse",
                    format!("avahi-daemon did not start: {e:#}"),
                );
                None
            }
        };
        for &loss in &losses {
            if v6 && ctx.mdns_loss.is_empty() && loss == 5 {
                continue;
            }
            if n >= FLEET && ctx.mdns_loss.is_empty() && loss > 0 {
                continue;
            }
            lab.set_loss(0, loss)?;
            let case = case_name_on(n, loss, v6);
            let deadline = match (ctx.quick, loss) {
                (true, 0) => 5.0,
                (true, _) => 8.0,
                (false, 0) => 10.0,
                (false, _) => 20.0,
            };
            let mut tools: Vec<&str> = Vec::new();
            if ctx.features.browse {
                tools.push(OURS);
                tools.push(EXPAND);
            }
            tools.push(PYZC);
            if avahi.is_some() {
                tools.push(AVAHI);
                if !ctx.quick {
                    tools.push(AVAHI_T);
                }
            }
            for rep in 0..ctx.reps {
                let mut order = tools.clone();
                let len = order.len();
                order.rotate_left(rep as usize % len);
                for tool in order {
                    flush_neighbours(&lab);
                    if matches!(tool, AVAHI | AVAHI_T) {
                        if let Some(a) = avahi.as_mut() {
                            a.restart(&lab)?;
                        }
                    }
                    let before = seg.as_ref().and_then(|s| s.read().ok());
                    let by_before = by.as_ref().and_then(|b| b.read(&lab).ok());
                    let m = match tool {
                        OURS => ours(ctx, &lab, &browse_args, n, deadline),
                        EXPAND => expand(ctx, &lab, &empty, n),
                        PYZC => pyzc(ctx, &lab, n, deadline, v6),
                        AVAHI => avahi_rp(avahi.as_ref().expect("checked"), &lab, n, deadline),
                        _ => avahi_rpt(avahi.as_ref().expect("checked"), &lab, n),
                    };
                    let after = seg.as_ref().and_then(|s| s.read().ok());
                    // Late frames of the run (a handshake's last ACKs, ARP
                    // replies) still reach the bystander after the tool exits.
                    std::thread::sleep(Duration::from_millis(200));
                    let by_after = by.as_ref().and_then(|b| b.read(&lab).ok());
                    let mut counts: Vec<(&str, segment::Count)> = Vec::new();
                    if let (Some(b), Some(a)) = (before, after) {
                        counts.extend(a.since(&b).metrics());
                    }
                    if let (Some(b), Some(a)) = (by_before, by_after) {
                        counts.extend(a.since(&b).metrics());
                    }
                    {
                        for (metric, c) in counts {
                            for (unit, v) in [("pkts", c.packets), ("bytes", c.bytes)] {
                                ctx.record(
                                    "mdns",
                                    &case,
                                    tool,
                                    &format!("{metric}_{unit}"),
                                    rep,
                                    Some(v as f64),
                                    None,
                                    None,
                                    "",
                                );
                            }
                        }
                    }
                    match m {
                        Ok(m) => {
                            ctx.record(
                                "mdns",
                                &case,
                                tool,
                                "complete_ms",
                                rep,
                                m.complete_ms,
                                Some(m.found),
                                Some(n as u64),
                                m.note.clone(),
                            );
                            ctx.record(
                                "mdns",
                                &case,
                                tool,
                                "wall_ms",
                                rep,
                                Some(m.wall_ms),
                                Some(m.found),
                                Some(n as u64),
                                "",
                            );
                        }
                        // A lab set up wrong measures nothing: the suite stops.
                        Err(e) if e.is::<SetupError>() => return Err(e),
                        Err(e) => {
                            ctx.record(
                                "mdns",
                                &case,
                                tool,
                                "complete_ms",
                                rep,
                                None,
                                Some(0),
                                Some(n as u64),
                                format!("error: {e:#}"),
                            );
                        }
                    }
                    std::thread::sleep(GAP);
                }
            }
        }
        lab.set_loss(0, 0)?;
        drop(avahi);
        drop(procs);
    }
    Ok(())
}

/// One browser run.
struct Measured {
    /// Until all N were resolved; `None` if not all were.
    complete_ms: Option<f64>,
    found: u64,
    wall_ms: f64,
    note: String,
}

/// Flushes every lab host's ARP cache (all at once).
fn flush_neighbours(lab: &Lab) {
    let children: Vec<_> = lab
        .hosts()
        .iter()
        .filter_map(|h| {
            Command::new("ip")
                .args(["-n", &h.ns, "neigh", "flush", "all"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    for mut c in children {
        let _ = c.wait();
    }
}

/// Per-node (name, found_ms) from `rlx-discover browse --json`, whatever
/// the exact shape: a list under `nodes`, `sightings` or `agents`, or a
/// top-level list, of objects carrying `found_ms`.
pub fn parse_ours(v: &serde_json::Value) -> Vec<(String, f64)> {
    let list = ["nodes", "sightings", "agents"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|x| x.as_array()))
        .or_else(|| v.as_array());
    let Some(list) = list else { return Vec::new() };
    list.iter()
        .filter_map(|o| {
            let ms = o.get("found_ms")?.as_f64()?;
            let name = ["host", "name", "instance", "addr"]
                .iter()
                .find_map(|k| o.get(*k).and_then(|x| x.as_str()))
                .unwrap_or("?")
                .to_string();
            Some((name, ms))
        })
        .collect()
}

fn ours(ctx: &Ctx, lab: &Lab, args: &[String], n: usize, deadline: f64) -> Result<Measured> {
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(args).env("RUST_LOG", "warn");
    let t = run_timed(&mut c, Duration::from_secs_f64(deadline.max(10.0) + 20.0))?;
    let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
    keep_json(&t.stdout);
    let nodes = parse_ours(&v);
    let names: BTreeSet<&str> = nodes.iter().map(|(h, _)| h.as_str()).collect();
    let found = names.len() as u64;
    let last = nodes.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    let startup = from_spawn(&t, &v["report"]["started_unix_us"]);
    Ok(Measured {
        complete_ms: (found >= n as u64).then_some(last + startup.unwrap_or(0.0)),
        found,
        wall_ms: t.wall_ms(),
        note: format!(
            "{}; {}; {}; cpu {:.0} ms; peak RSS {} kB{}",
            t.describe_status(),
            describe_startup(startup),
            describe_report(&v["report"]),
            t.cpu.as_secs_f64() * 1000.0,
            t.maxrss_kb,
            if v.is_null() {
                format!("; no JSON: {}", t.stderr_tail(2))
            } else {
                String::new()
            }
        ),
    })
}

/// Milliseconds from the spawn of `t` to the start its JSON reports
/// (`started_unix_us`): the start-up that a tool's own times leave out.
fn from_spawn(t: &Timed, started_unix_us: &serde_json::Value) -> Option<f64> {
    t.since_spawn_ms(started_unix_us.as_u64()?)
}

/// The start-up part of a from-spawn time, for the sample's note (and a
/// loud note when the tool did not say when it started, so that a figure
/// without its start-up is never taken for one with it).
fn describe_startup(startup: Option<f64>) -> String {
    match startup {
        Some(ms) => format!("spawn to start {ms:.1} ms"),
        None => "start time not reported: complete_ms counts from its own start".into(),
    }
}

/// With `RLX_BENCH_KEEP_JSON=DIR`, keeps each `browse --json` output in DIR
/// (for profiling a case: per-node found_ms and the browse's stats).
fn keep_json(stdout: &str) {
    if let Some(dir) = std::env::var_os("RLX_BENCH_KEEP_JSON") {
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir);
        let k = std::fs::read_dir(&dir).map_or(0, |d| d.count());
        let _ = std::fs::write(dir.join(format!("browse-{k:03}.json")), stdout);
    }
}

/// What a report (browse or expand JSON) says was tried, and how many were
/// refused, with the first reason.
fn describe_report(report: &serde_json::Value) -> String {
    let tried: Vec<String> = report["tried"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    format!(
                        "{} ({} ms)",
                        t["what"].as_str().unwrap_or("?"),
                        t["elapsed_ms"]
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let failed = report["failed"].as_array().map_or(0, |a| a.len());
    format!(
        "{}; {failed} refused{}",
        tried.join(", "),
        report["failed"]
            .get(0)
            .map(|f| format!(
                " (first: {} {})",
                f["host"].as_str().unwrap_or(""),
                f["reason"].as_str().unwrap_or("")
            ))
            .unwrap_or_default()
    )
}

/// A fault of the scenario itself, not of a tool measured: it stops the
/// suite rather than becoming a row.
#[derive(Debug)]
struct SetupError(String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

fn expand(ctx: &Ctx, lab: &Lab, cfg: &std::path::Path, n: usize) -> Result<Measured> {
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["expand", "--format", "json"])
        .arg(cfg)
        .env("RUST_LOG", "warn");
    let t = run_timed(&mut c, Duration::from_secs(60))?;
    let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
    let found = v["nodes"].as_array().map_or(0, |a| a.len()) as u64;
    // Every agent of the lab is genuine: a node refused for its pinned key
    // means the scenario set the lab up wrong (as a pins file shared
    // between labs once did), and no figure of it is a measurement.
    let impostors: Vec<&str> = v["report"]["failed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["reason"].as_str())
        .filter(|r| r.contains("pinned"))
        .collect();
    if let Some(first) = impostors.first() {
        return Err(SetupError(format!(
            "expand refused {} of the lab's own agents for their pinned keys (first: {first}): \
             the scenario's setup is wrong, not the figures",
            impostors.len()
        ))
        .into());
    }
    Ok(Measured {
        complete_ms: (found >= n as u64 && t.status.is_some()).then(|| t.wall_ms()),
        found,
        wall_ms: t.wall_ms(),
        note: format!(
            "{}; {}; cpu {:.0} ms; peak RSS {} kB{}",
            t.describe_status(),
            describe_report(&v["report"]),
            t.cpu.as_secs_f64() * 1000.0,
            t.maxrss_kb,
            if v.is_null() {
                format!("; no JSON: {}", t.stderr_tail(2))
            } else {
                String::new()
            }
        ),
    })
}

fn pyzc(ctx: &Ctx, lab: &Lab, n: usize, deadline: f64, v6: bool) -> Result<Measured> {
    let mut c = lab.command(0, PYTHON);
    c.arg(&ctx.scripts.zc_browse)
        .arg(lab.host(0).ip.to_string())
        .arg(n.to_string())
        .arg(deadline.to_string());
    if v6 {
        c.arg("v6");
    }
    let t: Timed = run_timed(&mut c, Duration::from_secs_f64(deadline + 20.0))?;
    let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
    let found = v["found"].as_array().map_or(0, |a| a.len()) as u64;
    let startup = from_spawn(&t, &v["started_unix_us"]);
    Ok(Measured {
        complete_ms: v["complete_ms"]
            .as_f64()
            .map(|ms| ms + startup.unwrap_or(0.0)),
        found,
        wall_ms: t.wall_ms(),
        note: format!(
            "{}; {} (imports {:.0} ms of it); cpu {:.0} ms; peak RSS {} kB{}",
            t.describe_status(),
            describe_startup(startup),
            v["import_ms"].as_f64().unwrap_or(0.0),
            t.cpu.as_secs_f64() * 1000.0,
            t.maxrss_kb,
            if v.is_null() {
                format!("; no JSON: {}", t.stderr_tail(2))
            } else {
                String::new()
            }
        ),
    })
}

/// Unique service names among `avahi-browse -p` resolved (`=`) lines.
fn avahi_resolved(lines: impl Iterator<Item = String>) -> BTreeSet<String> {
    lines
        .filter(|l| l.starts_with("=;"))
        .filter_map(|l| l.split(';').nth(3).map(str::to_string))
        .collect()
}

fn avahi_rp(avahi: &Avahi, lab: &Lab, n: usize, deadline: f64) -> Result<Measured> {
    let mut c = avahi.client(lab, "avahi-browse");
    c.args(["-rp", SERVICE]);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let (lines, t) = run_streaming(&mut c, Duration::from_secs_f64(deadline), |ls| {
        if let Some((_, l)) = ls.last() {
            seen.extend(avahi_resolved(std::iter::once(l.clone())));
        }
        seen.len() >= n
    })?;
    let mut names = BTreeSet::new();
    let mut complete = None;
    for (at, l) in &lines {
        names.extend(avahi_resolved(std::iter::once(l.clone())));
        if names.len() >= n && complete.is_none() {
            complete = Some(at.as_secs_f64() * 1000.0);
        }
    }
    Ok(Measured {
        complete_ms: complete,
        found: names.len() as u64,
        wall_ms: t.wall_ms(),
        note: if complete.is_some() {
            String::new()
        } else {
            format!("deadline {deadline} s")
        },
    })
}

fn avahi_rpt(avahi: &Avahi, lab: &Lab, n: usize) -> Result<Measured> {
    let mut c = avahi.client(lab, "avahi-browse");
    c.args(["-rpt", SERVICE]);
    let t = run_timed(&mut c, Duration::from_secs(60))?;
    let names = avahi_resolved(t.stdout.lines().map(str::to_string));
    let found = names.len() as u64;
    Ok(Measured {
        complete_ms: (found >= n as u64).then(|| t.wall_ms()),
        found,
        wall_ms: t.wall_ms(),
        note: format!("{} with {found} of {n}", t.describe_status()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_times_are_read_from_any_list_of_objects_with_found_ms() {
        let v = serde_json::json!({"sightings": [
            {"host": "node-1", "found_ms": 12},
            {"host": "node-2", "found_ms": 40.5},
            {"host": "x"}
        ]});
        assert_eq!(
            parse_ours(&v),
            vec![("node-1".to_string(), 12.0), ("node-2".to_string(), 40.5)]
        );
        let v = serde_json::json!([{"name": "a", "found_ms": 1}]);
        assert_eq!(parse_ours(&v).len(), 1);
    }

    #[test]
    fn case_names_round_trip_with_the_kind_of_lan() {
        assert_eq!(
            parse_case(&case_name_on(200, 5, false)),
            Some((200, 5, false))
        );
        assert_eq!(
            parse_case(&case_name_on(50, 20, true)),
            Some((50, 20, true))
        );
        assert_eq!(
            crate::plot::mdns::parse_mdns_case(&case_name_on(50, 20, true)),
            None
        );
        assert_eq!(parse_case("N=5 loss=0% other"), None);
    }

    #[test]
    fn avahi_resolved_lines_count_once_per_service() {
        let lines = [
            "+;eth0;IPv4;node-1;_rlx._tcp;local",
            "=;eth0;IPv4;node-1;_rlx._tcp;local;node-1.local;10.1.1.2;9100;\"txtvers=1\"",
            "=;eth0;IPv4;node-1;_rlx._tcp;local;node-1.local;10.1.1.2;9100;\"txtvers=1\"",
            "=;eth0;IPv4;node-2;_rlx._tcp;local;node-2.local;10.1.1.3;9100;\"txtvers=1\"",
        ];
        assert_eq!(avahi_resolved(lines.iter().map(|s| s.to_string())).len(), 2);
    }
}
