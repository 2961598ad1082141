//! **Scenario 5: trust figures** — impostors tried and admitted,
//! malformed inputs tried and crashes, and a flood held with the
//! coordinator's memory.
//!
//! - Impostors and malformed handshakes: strangers on the worker port
//!   (`bench/py/hostile.py`, one per lab host) found by `expand` with a
//!   `subnet` and a `key_file` (subnet-found nodes pass the same handshake
//!   rules as mDNS ones), beside controls that hold the key. With a key no
//!   impostor may be admitted; no malformed reply may crash the coordinator.
//!   The same hosts are also scanned without a key, where the caps parser
//!   sees every malformed reply.
//! - Flood: a hostile announcer sends thousands of bogus instances while
//!   real agents run; `rlx-discover browse` must still find every real agent
//!   and keep its memory bounded (peak RSS from `wait4`). Needs `browse`.
//! - Relay ([`relay`]): a stranger relaying its worker
//!   port to a real keyed agent and announcing its TXT; no relay may be
//!   admitted, and a port-forward declared with `rlx-agent --advertise` is.
//! - `watch` under a flood ([`watch_flood`]): real agents
//!   started after 10,000 bogus instances still join, none of the bogus
//!   ones does, watch's memory stays bounded.
//! - Node keys ([`identity`]): the handshake timed with and
//!   without the per-node signature, with and without a cluster key.
//! - Forged goodbyes ([`goodbyes`]): `watch`'s CPU while a
//!   stranger sends 1,000 forged goodbyes a second for its members, against
//!   the same watch at rest; no member may leave.
//! - Fuzzing and property-test counts belong to the trust work (`fuzz/`);
//!   they are not re-measured here.

use crate::ctx::Ctx;
use crate::peers::{self, Publisher, AGENT_PORT, PORT};
use crate::proc::run_timed;
use anyhow::Result;
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

pub(crate) mod goodbyes;
pub(crate) mod identity;
mod key;
mod relay;
mod watch_flood;

use key::keygen;

/// Strangers that must never be admitted when the coordinator has a key.
const IMPOSTORS: [&str; 5] = ["plain", "noproof", "wrongkey", "replay", "replayfix"];
/// Replies that are broken on purpose: none may crash the coordinator.
const MALFORMED: [&str; 8] = [
    "silent",
    "garbage",
    "oversized",
    "badjson",
    "absurd",
    "nan",
    "wrongver",
    "slowloris",
];
/// Correct replies under the key: must be admitted.
const CONTROLS: [&str; 1] = ["right"];

/// The most one browse under the flood may take before it is killed and
/// recorded as unfinished.
const FLOOD_DEADLINE: Duration = Duration::from_secs(600);

const TOOL: &str = "rlx-discover expand (subnet + key_file)";
const TOOL_NOKEY: &str = "rlx-discover expand (subnet, no key)";

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    handshake_strangers(ctx)?;
    flood(ctx)?;
    // Each case builds its own lab: one that fails is reported and the
    // other still runs.
    type Case = fn(&mut Ctx) -> Result<()>;
    let cases: [(&str, Case); 4] = [
        ("trust: relay of a keyed agent", relay::run),
        ("trust: watch under a flood", watch_flood::run),
        ("trust: handshake with and without node keys", identity::run),
        ("trust: watch under forged goodbyes", goodbyes::run),
    ];
    for (what, case) in cases {
        if let Err(e) = case(ctx) {
            eprintln!("  {what} FAILED: {e:#}");
            ctx.not_measured(what, format!("failed: {e:#}"));
        }
    }
    ctx.not_measured(
        "trust: fuzzing / property-test execution counts",
        "recorded by the trust work with its fuzz targets, not re-run by this suite",
    );
    Ok(())
}

/// Every `{"host": .., "reason": ..}` object anywhere in `v`.
fn reasons(v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            if let (Some(h), Some(r)) = (
                m.get("host").and_then(|x| x.as_str()),
                m.get("reason").and_then(|x| x.as_str()),
            ) {
                out.push((h.to_string(), r.to_string()));
            }
            m.values().for_each(|x| reasons(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| reasons(x, out)),
        _ => {}
    }
}

fn handshake_strangers(ctx: &mut Ctx) -> Result<()> {
    let dir = ctx.work.path().join("trust");
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("cluster.key");
    keygen(ctx, &key)?;
    let modes: Vec<&str> = IMPOSTORS
        .iter()
        .chain(MALFORMED.iter())
        .chain(CONTROLS.iter())
        .copied()
        .collect();
    let real_agent = ctx.features.agent_run;
    let hosts = modes.len() + 1 + usize::from(real_agent);
    let lab = Lab::new(LabOptions { hosts, ipv6: false })?;
    let mut by_ip: BTreeMap<Ipv4Addr, &str> = BTreeMap::new();
    let mut procs: Vec<LabProcess> = Vec::new();
    for (k, mode) in modes.iter().enumerate() {
        let i = k + 1;
        let (caps, _) = peers::write_caps(&dir, i)?;
        let mut c = lab.command(i, PYTHON);
        c.arg(&ctx.scripts.hostile)
            .arg(mode)
            .arg(lab.host(i).ip.to_string())
            .arg(AGENT_PORT.to_string())
            .arg(&caps)
            .arg(&key);
        procs.push(lab.spawn(i, c)?);
        by_ip.insert(lab.host(i).ip, mode);
    }
    if real_agent {
        let i = hosts - 1;
        let (caps, _) = peers::write_caps(&dir, i)?;
        let mut c = peers::agent_command(&lab, i, &ctx.bins.agent, &caps, i);
        c.arg("--key-file").arg(&key);
        procs.push(lab.spawn(i, c)?);
        by_ip.insert(lab.host(i).ip, "rlx-agent");
    }
    let live: Vec<Ipv4Addr> = by_ip.keys().copied().collect();
    let left = rlx_lab::kit::netns::wait_tcp(
        &lab.host(0).ns,
        live.iter().map(|a| (*a, AGENT_PORT).into()).collect(),
        peers::STARTUP,
    )?;
    anyhow::ensure!(left.is_empty(), "hostile peers never listened at {left:?}");
    lab.silence_tcp(0, lab.subnet(), AGENT_PORT, &live)?;
    let x = lab.subnet().addr().octets()[1];
    let net = format!("10.{x}.1.0/24");
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt)?;
    let keyed = dir.join("keyed.toml");
    let open = dir.join("open.toml");
    let base = format!(
        "[discover]\nsubnet = {net:?}\nport = {PORT}\ntimeout_ms = 300\nmdns = false\nckpt_dir = {:?}\n",
        ckpt.display().to_string()
    );
    std::fs::write(
        &keyed,
        format!("{base}key_file = {:?}\n", key.display().to_string()),
    )?;
    std::fs::write(&open, &base)?;
    ctx.command(TOOL, format!("rlx-discover expand --format json keyed.toml   # [discover] subnet = \"{net}\", key_file, mdns = false"));
    ctx.command(TOOL_NOKEY, format!("rlx-discover expand --format json open.toml   # [discover] subnet = \"{net}\", mdns = false"));
    ctx.notes.push(format!(
        "trust: impostors {} and malformed replies {} (bench/py/hostile.py), one per lab host, \
         found by a subnet scan; controls holding the key: `right`{}.",
        IMPOSTORS.join(", "),
        MALFORMED.join(", "),
        if real_agent {
            " and a real rlx-agent --key-file"
        } else {
            ""
        }
    ));
    let reps = ctx.reps;
    for rep in 0..reps {
        for (tool, cfg) in [(TOOL, &keyed), (TOOL_NOKEY, &open)] {
            let mut c = lab.command(0, &ctx.bins.discover);
            c.args(["expand", "--format", "json"])
                .arg(cfg)
                .env("RUST_LOG", "warn");
            let t = run_timed(&mut c, Duration::from_secs(120))?;
            let v: serde_json::Value = serde_json::from_str(&t.stdout).unwrap_or_default();
            let admitted: Vec<&str> = v["nodes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| {
                            let addr = n["addr"].as_str()?;
                            let ip: Ipv4Addr = addr.rsplit_once(':')?.0.parse().ok()?;
                            by_ip.get(&ip).copied()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut why = Vec::new();
            reasons(&v["report"], &mut why);
            let why: Vec<String> = why
                .iter()
                .filter_map(|(h, r)| {
                    let ip: Ipv4Addr = h.split(':').next()?.parse().ok()?;
                    let r: String = r.chars().take(140).collect();
                    Some(format!("{}: {}", by_ip.get(&ip)?, r))
                })
                .collect();
            let crashed = t.crashed() || t.status.is_none();
            let status = t.describe_status();
            let case = "handshake strangers on the worker port";
            if tool == TOOL {
                let imp = admitted.iter().filter(|m| IMPOSTORS.contains(m)).count();
                let bad = admitted.iter().filter(|m| MALFORMED.contains(m)).count();
                let good = admitted
                    .iter()
                    .filter(|m| CONTROLS.contains(m) || **m == "rlx-agent")
                    .count();
                let controls = CONTROLS.len() + usize::from(real_agent);
                ctx.record(
                    "trust",
                    case,
                    tool,
                    "impostors_tried",
                    rep,
                    Some(IMPOSTORS.len() as f64),
                    None,
                    None,
                    "",
                );
                ctx.record(
                    "trust",
                    case,
                    tool,
                    "impostors_admitted",
                    rep,
                    Some(imp as f64),
                    None,
                    None,
                    why.join(" | "),
                );
                ctx.record(
                    "trust",
                    case,
                    tool,
                    "malformed_admitted",
                    rep,
                    Some(bad as f64),
                    None,
                    None,
                    "",
                );
                ctx.record(
                    "trust",
                    case,
                    tool,
                    "controls_admitted",
                    rep,
                    Some(good as f64),
                    Some(good as u64),
                    Some(controls as u64),
                    "",
                );
            }
            ctx.record(
                "trust",
                case,
                tool,
                "malformed_tried",
                rep,
                Some(MALFORMED.len() as f64),
                None,
                None,
                "",
            );
            ctx.record(
                "trust",
                case,
                tool,
                "crashes",
                rep,
                Some(f64::from(u8::from(crashed))),
                None,
                None,
                status.clone(),
            );
            ctx.record(
                "trust",
                case,
                tool,
                "wall_ms",
                rep,
                t.status.map(|_| t.wall_ms()),
                None,
                None,
                format!("{status}; peak RSS {} kB", t.maxrss_kb),
            );
        }
    }
    Ok(())
}

fn flood(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.browse {
        ctx.not_measured(
            "trust: flood held, coordinator RSS",
            "needs `rlx-discover browse --json`, which has not landed in this build",
        );
        return Ok(());
    }
    // Quick mode: enough to exercise the bounds, small enough that its
    // admission round stays within the quick budget.
    let k: usize = if ctx.quick { 300 } else { 10_000 };
    let real = 3;
    let publisher = if ctx.features.agent_run {
        Publisher::RlxAgent
    } else {
        Publisher::PythonZeroconf
    };
    let dir = ctx.work.path().join("flood");
    std::fs::create_dir_all(&dir)?;
    let lab = Lab::new(LabOptions {
        hosts: real + 2,
        ipv6: false,
    })?;
    let mut procs = Vec::new();
    for i in 1..=real {
        procs.push((
            i,
            peers::start_publisher(&lab, i, i, publisher, &ctx.bins.agent, &ctx.scripts, &dir)?,
        ));
    }
    peers::wait_publishers(&lab, &procs, publisher)?;
    let flooder = real + 1;
    let x = lab.subnet().addr().octets()[1];
    let script = dir.join("flood.py");
    std::fs::write(&script, include_str!("../py/flood.py"))?;
    let mut c = lab.command(flooder, PYTHON);
    c.arg(&script)
        .arg(lab.host(flooder).ip.to_string())
        .arg(k.to_string())
        .arg("1.0")
        .arg(format!("10.{x}"));
    let f = lab.spawn(flooder, c)?;
    f.wait_for_output("ready", Duration::from_secs(120))
        .map_err(|e| anyhow::anyhow!(e))?;
    ctx.command("flood", format!("/usr/bin/python3 bench/py/flood.py IP {k} 1.0 PREFIX   # {k} bogus instances re-sent every second"));
    let case = format!("{k} bogus instances + {real} real agents");
    let reps = ctx.reps;
    for rep in 0..reps {
        let mut c = lab.command(0, &ctx.bins.discover);
        c.args(["browse", "--json", "--interface", "eth0"])
            .env("RUST_LOG", "warn");
        // Generous: how long a flood stretches a one-shot browse is one of
        // the figures (every bogus address gets an admission handshake).
        let t = run_timed(&mut c, FLOOD_DEADLINE)?;
        let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
        let hosts: Vec<String> = crate::sc_mdns::parse_ours(&v)
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        let found = (1..=real)
            .filter(|i| hosts.iter().any(|h| h.contains(&peers::node_name(*i))))
            .count() as u64;
        let report = &v["report"];
        let refused = report["failed"].as_array().map_or(0, |a| a.len());
        let answered: Vec<String> = report["tried"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| format!("{} answered in {} ms", t["answered"], t["elapsed_ms"]))
                    .collect()
            })
            .unwrap_or_default();
        let note = format!(
            "{}; {}; {refused} refused{}",
            t.describe_status(),
            answered.join(", "),
            if v.is_null() {
                format!("; no JSON: {}", t.stderr_tail(2))
            } else {
                String::new()
            }
        );
        ctx.record(
            "trust",
            &case,
            "rlx-discover browse",
            "peak_rss_kb",
            rep,
            Some(t.maxrss_kb as f64),
            Some(found),
            Some(real as u64),
            note,
        );
        ctx.record(
            "trust",
            &case,
            "rlx-discover browse",
            "wall_ms",
            rep,
            t.status.map(|_| t.wall_ms()),
            Some(found),
            Some(real as u64),
            "",
        );
        ctx.record(
            "trust",
            &case,
            "rlx-discover browse",
            "crashes",
            rep,
            Some(f64::from(u8::from(t.crashed()))),
            None,
            None,
            "",
        );
        std::thread::sleep(Duration::from_millis(1500));
    }
    drop(f);
    drop(procs);
    Ok(())
}
