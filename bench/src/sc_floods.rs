//! **Scenario 4, continued: what a stranger's flood costs a responder**
//! (filed under `footprint`): each publisher (the
//! agent, avahi-daemon, python-zeroconf) alone in a two-host lab, flooded
//! from the other host by `lab/py/responder_flood.py` at 400 packets/s
//! (20 s; 5 s in quick mode) with
//!
//! - `tc`: truncated PTR queries for `_rlx._tcp.local.` and their
//!   known-answer follow-ups (RFC 6762 §7.2 holds them);
//! - `records`: unsolicited responses with no PTR, SRV, TXT and A records
//!   of made-up names.
//!
//! Three runs per publisher and flood in full mode (one in quick), each a
//! fresh publisher in a fresh lab. Its RSS is read idle, every 250 ms under the flood (the peak), and 5 s
//! after it. The goal (PATCHES.md §28 of the vendored mdns-sd): the agent's
//! peak within a few MB of idle, where before the fix the same floods took
//! it past 60 MB and it stayed there.

use crate::ctx::Ctx;
use crate::peers::{self, Publisher};
use crate::proc::rss_kb;
use crate::sc_footprint::{AGENT, AVAHI, PYZC};
use anyhow::Result;
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// The flood kinds, as `responder_flood.py` names them.
pub(crate) const KINDS: [&str; 2] = ["tc", "records"];
/// Packets per second.
const RATE: u32 = 400;

/// The case a flood's samples are filed under.
pub(crate) fn case_name(kind: &str, secs: u64) -> String {
    format!("under a {kind} flood, {RATE} packets/s for {secs} s")
}

/// A publisher running in host 0 of `lab`: its pid, and what keeps it up.
fn start(ctx: &Ctx, lab: &Lab, tool: &str, dir: &Path) -> Result<(u32, Box<dyn std::any::Any>)> {
    if tool == AVAHI {
        let avahi = peers::start_avahi(lab, 0, 0)?;
        return Ok((avahi.daemon_pid().unwrap_or(0), Box::new(avahi)));
    }
    let kind = if tool == AGENT {
        Publisher::RlxAgent
    } else {
        Publisher::PythonZeroconf
    };
    let p = peers::start_publisher(lab, 0, 0, kind, &ctx.bins.agent, &ctx.scripts, dir)?;
    let procs = vec![(0usize, p)];
    peers::wait_publishers(lab, &procs, kind)?;
    let (_, p) = procs.into_iter().next().expect("one publisher");
    Ok((p.pid(), Box::new(p)))
}

/// Runs every flood against every publisher.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    let dir = ctx.work.path().join("floods");
    std::fs::create_dir_all(&dir)?;
    let dir = dir.as_path();
    let secs: u64 = if ctx.quick { 5 } else { 20 };
    let mut tools = vec![AVAHI, PYZC];
    if ctx.features.agent_run {
        tools.insert(0, AGENT);
    }
    ctx.command(
        "responder_flood.py",
        format!("/usr/bin/python3 lab/py/responder_flood.py tc|records IP {secs} {RATE}"),
    );
    // Three runs of each in full mode, each a fresh publisher in a fresh lab,
    // the order of the tools rotating: every row shows its spread.
    let reps: u32 = if ctx.quick { 1 } else { 3 };
    for kind in KINDS {
        let case = case_name(kind, secs);
        for rep in 0..reps {
            let mut order = tools.clone();
            order.rotate_left(rep as usize % tools.len());
            for tool in &order {
                let lab = Lab::new(LabOptions {
                    hosts: 2,
                    ipv6: false,
                })?;
                let (pid, _keep) = start(ctx, &lab, tool, dir)?;
                std::thread::sleep(Duration::from_secs(3));
                let idle = rss_kb(pid).unwrap_or(0);
                let mut c = lab.command(1, PYTHON);
                c.arg(rlx_lab::kit::script("responder_flood.py")).args([
                    kind,
                    &lab.host(1).ip.to_string(),
                    &secs.to_string(),
                    &RATE.to_string(),
                ]);
                let f = lab.spawn(1, c)?;
                let end = Instant::now() + Duration::from_secs(secs + 30);
                let mut peak = idle;
                while f.try_wait().is_none() && Instant::now() < end {
                    peak = peak.max(rss_kb(pid).unwrap_or(0));
                    std::thread::sleep(Duration::from_millis(250));
                }
                std::thread::sleep(Duration::from_secs(5));
                let after = rss_kb(pid).unwrap_or(0);
                peak = peak.max(after);
                let sent = f.stdout().lines().last().unwrap_or_default().to_string();
                for (metric, v) in [
                    ("rss_idle_kb", idle),
                    ("rss_peak_kb", peak),
                    ("rss_after_kb", after),
                    ("rss_growth_kb", peak.saturating_sub(idle)),
                ] {
                    ctx.record(
                        "footprint",
                        &case,
                        tool,
                        metric,
                        rep,
                        Some(v as f64),
                        None,
                        None,
                        if metric == "rss_growth_kb" {
                            sent.clone()
                        } else {
                            String::new()
                        },
                    );
                }
                eprintln!(
                "  footprint: {tool} {case}: RSS idle {idle} kB, peak {peak} kB, 5 s after {after} kB"
            );
            }
        }
    }
    Ok(())
}
