//! **Scenario 4: what an idle agent costs** — RSS, CPU and packets on an
//! idle segment of `rlx-agent` beside avahi-daemon publishing one service
//! (plus the D-Bus daemon it needs) and a python-zeroconf publisher, each in
//! its own two-host lab, measured over the same window; and the wall time of
//! `rlx-agent --probe` with and without the GFLOP/s measurement.

use crate::ctx::{Bins, Ctx};
use crate::peers::{self, Publisher, AGENT_PORT};
use crate::proc::{cpu_ns, iface_packets, rss_kb, run_timed};
use anyhow::Result;
use rlx_lab::kit::avahi::Avahi;
use rlx_lab::{Lab, LabOptions, LabProcess};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const AGENT: &str = "rlx-agent (--caps-file)";
pub(crate) const AGENT_PROBING: &str = "rlx-agent";
pub(crate) const AVAHI: &str = "avahi-daemon (1 service)";
pub(crate) const AVAHI_DBUS: &str = "avahi-daemon + its dbus-daemon";
pub(crate) const PYZC: &str = "python-zeroconf publisher";

/// Whether `rlx-agent` run mode works yet: started with a caps file in a
/// loopback lab, it must keep running and accept on its handshake port.
pub fn agent_run_mode_works(bins: &Bins, work: &Path) -> bool {
    let Ok(lab) = Lab::loopback() else {
        return false;
    };
    let Ok((caps, _)) = peers::write_caps(work, 9999) else {
        return false;
    };
    let Ok(p) = lab.spawn(0, peers::agent_command(&lab, 0, &bins.agent, &caps, 9999)) else {
        return false;
    };
    let up = rlx_lab::kit::netns::wait_tcp(
        &lab.host(0).ns,
        vec![(lab.host(0).ip, AGENT_PORT).into()],
        Duration::from_secs(5),
    )
    .is_ok_and(|left| left.is_empty());
    let ok = up && p.try_wait().is_none();
    if !ok {
        eprintln!(
            "rlx-agent run mode not available yet: {}",
            p.stderr().lines().last().unwrap_or("")
        );
    }
    ok
}

struct Watched {
    tool: &'static str,
    lab: Lab,
    pids: Vec<u32>,
    _procs: Vec<LabProcess>,
    _avahi: Option<Avahi>,
}

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    probe_times(ctx)?;
    idle(ctx)
}

fn idle(ctx: &mut Ctx) -> Result<()> {
    let (settle, window, windows) = if ctx.quick {
        (Duration::from_secs(4), Duration::from_secs(10), 1u32)
    } else {
        (Duration::from_secs(10), Duration::from_secs(60), 3)
    };
    let dir = ctx.work.path().join("footprint");
    std::fs::create_dir_all(&dir)?;
    let mut watched: Vec<Watched> = Vec::new();
    let new_lab = || {
        Lab::new(LabOptions {
            hosts: 2,
            ipv6: false,
        })
    };
    if ctx.features.agent_run {
        let lab = new_lab()?;
        let (caps, _) = peers::write_caps(&dir, 0)?;
        // Its own copy of the binary: two processes mapping one file share
        // its pages, which the kernel then neither charges fully to either
        // nor lets the agent page out (MADV_PAGEOUT skips shared pages). On
        // a real machine one agent runs alone.
        let own_copy = dir.join("rlx-agent-capsfile");
        std::fs::copy(&ctx.bins.agent, &own_copy)?;
        let p = lab.spawn(0, peers::agent_command(&lab, 0, &own_copy, &caps, 0))?;
        let procs = vec![(0usize, p)];
        peers::wait_publishers(&lab, &procs, Publisher::RlxAgent)?;
        let pids = vec![procs[0].1.pid()];
        watched.push(Watched {
            tool: AGENT,
            lab,
            pids,
            _procs: procs.into_iter().map(|(_, p)| p).collect(),
            _avahi: None,
        });
        ctx.command(
            AGENT,
            "rlx-agent --caps-file caps.json --name node-0 --interface eth0",
        );
        // The agent as users run it: probing this machine (and watching it
        // for material changes) instead of reading a caps file, and as
        // rlx-agent.service runs it: as a user that does not own the binary
        // (the unit's DynamicUser; here uid 65534), which changes what the
        // kernel lets it page out.
        let lab = new_lab()?;
        let state = dir.join("agent-state");
        std::fs::create_dir_all(&state)?;
        std::os::unix::fs::chown(&state, Some(65534), Some(65534))?;
        let mut c = lab.command(0, "unshare");
        c.args([
            "--uts",
            "sh",
            "-c",
            "hostname \"$0\" && exec setpriv --reuid 65534 --regid 65534 --clear-groups \"$@\"",
        ])
        .arg("bench-probing")
        .arg(&ctx.bins.agent)
        .args(["--interface", "eth0"])
        .arg("--state-dir")
        .arg(&state)
        .env("RUST_LOG", "info");
        let p = lab.spawn(0, c)?;
        let procs = vec![(0usize, p)];
        peers::wait_publishers(&lab, &procs, Publisher::RlxAgent)?;
        let pids = vec![procs[0].1.pid()];
        watched.push(Watched {
            tool: AGENT_PROBING,
            lab,
            pids,
            _procs: procs.into_iter().map(|(_, p)| p).collect(),
            _avahi: None,
        });
        ctx.command(
            AGENT_PROBING,
            "setpriv --reuid 65534 --regid 65534 --clear-groups rlx-agent --interface eth0 --state-dir DIR   # as the service's DynamicUser: not the binary's owner",
        );
    } else {
        ctx.not_measured(
            "footprint: idle rlx-agent (RSS, CPU, packets per minute)",
            "rlx-agent run mode (announce + handshake server) has not landed in this build",
        );
    }
    {
        let lab = new_lab()?;
        let avahi = peers::start_avahi(&lab, 0, 0)?;
        let pids = vec![avahi.daemon_pid().unwrap_or(0), avahi.dbus_pid()];
        watched.push(Watched {
            tool: AVAHI,
            lab,
            pids,
            _procs: Vec::new(),
            _avahi: Some(avahi),
        });
        ctx.command(AVAHI, "avahi-daemon --no-chroot --no-drop-root -f avahi-daemon.conf   # one static .service file; private dbus-daemon");
    }
    {
        let lab = new_lab()?;
        let p = peers::start_publisher(
            &lab,
            0,
            0,
            Publisher::PythonZeroconf,
            &ctx.bins.agent,
            &ctx.scripts,
            &dir,
        )?;
        let procs = vec![(0usize, p)];
        peers::wait_publishers(&lab, &procs, Publisher::PythonZeroconf)?;
        let pids = vec![procs[0].1.pid()];
        watched.push(Watched {
            tool: PYZC,
            lab,
            pids,
            _procs: procs.into_iter().map(|(_, p)| p).collect(),
            _avahi: None,
        });
        ctx.command(
            PYZC,
            "/usr/bin/python3 zc_publish.py node-0 IP 9100 caps.json txt.json",
        );
    }
    std::thread::sleep(settle);
    // Consecutive windows, one sample each: the spread of an idle figure.
    for rep in 0..windows {
        let start = Instant::now();
        let mut snap = Vec::new();
        for w in &watched {
            let (rx, tx) = iface_packets(&w.lab.host(0).ns, "eth0")?;
            let (idle_rx, _) = iface_packets(&w.lab.host(1).ns, "eth0")?;
            let cpu: Vec<u64> = w.pids.iter().map(|p| cpu_ns(*p).unwrap_or(0)).collect();
            let wake = wakeups(w.pids[0]);
            snap.push((rx, tx, idle_rx, cpu, wake));
        }
        eprintln!(
            "  footprint: idle window {} of {windows}, {} s",
            rep + 1,
            window.as_secs()
        );
        std::thread::sleep(window);
        let secs = start.elapsed().as_secs_f64();
        let case = format!("idle, {} s window", window.as_secs());
        for (k, w) in watched.iter().enumerate() {
            let (rx, tx) = iface_packets(&w.lab.host(0).ns, "eth0")?;
            let (idle_rx, _) = iface_packets(&w.lab.host(1).ns, "eth0")?;
            let (rx0, tx0, idle_rx0, cpu0, wake0) = &snap[k];
            let cpu: Vec<u64> = w.pids.iter().map(|p| cpu_ns(*p).unwrap_or(0)).collect();
            let rss: Vec<u64> = w.pids.iter().map(|p| rss_kb(*p).unwrap_or(0)).collect();
            let cpu_pct = |j: usize| (cpu[j].saturating_sub(cpu0[j])) as f64 / (secs * 1e9) * 100.0;
            let per_min = |d: u64| d as f64 * 60.0 / secs;
            ctx.record(
                "footprint",
                &case,
                w.tool,
                "wakeups_per_min",
                rep,
                Some(per_min(wakeups(w.pids[0]).saturating_sub(*wake0))),
                None,
                None,
                "times its threads were scheduled (/proc/PID/task/*/schedstat): an idle daemon that never wakes scores 0",
            );
            let note = format!(
                "received {} packets in the window; the idle host on the segment received {}",
                rx - rx0,
                idle_rx - idle_rx0
            );
            ctx.record(
                "footprint",
                &case,
                w.tool,
                "rss_kb",
                rep,
                Some(rss[0] as f64),
                None,
                None,
                rss_parts(w.pids[0]),
            );
            // PSS charges each shared page (libc, ...) to its sharers in
            // proportion: what this process really adds to the machine.
            let pss: Vec<u64> = w.pids.iter().map(|p| pss_kb(*p).unwrap_or(0)).collect();
            ctx.record(
                "footprint",
                &case,
                w.tool,
                "pss_kb",
                rep,
                Some(pss[0] as f64),
                None,
                None,
                "",
            );
            if w.tool == AVAHI {
                ctx.record(
                    "footprint",
                    &case,
                    AVAHI_DBUS,
                    "pss_kb",
                    rep,
                    Some((pss[0] + pss[1]) as f64),
                    None,
                    None,
                    format!("dbus-daemon alone {} kB", pss[1]),
                );
            }
            ctx.record(
                "footprint",
                &case,
                w.tool,
                "cpu_pct",
                rep,
                Some(cpu_pct(0)),
                None,
                None,
                format!(
                    "{:.1} ms of CPU in {secs:.0} s",
                    cpu[0].saturating_sub(cpu0[0]) as f64 / 1e6
                ),
            );
            ctx.record(
                "footprint",
                &case,
                w.tool,
                "tx_packets_per_min",
                rep,
                Some(per_min(tx - tx0)),
                None,
                None,
                note,
            );
            if rep == 0 {
                ctx.record(
                    "footprint",
                    &case,
                    w.tool,
                    "startup_tx_packets",
                    rep,
                    Some(*tx0 as f64),
                    None,
                    None,
                    "sent from the link's creation (before start-up) to the window",
                );
            }
            if w.tool == AVAHI {
                ctx.record(
                    "footprint",
                    &case,
                    AVAHI_DBUS,
                    "rss_kb",
                    rep,
                    Some((rss[0] + rss[1]) as f64),
                    None,
                    None,
                    format!("dbus-daemon alone {} kB", rss[1]),
                );
                ctx.record(
                    "footprint",
                    &case,
                    AVAHI_DBUS,
                    "cpu_pct",
                    rep,
                    Some(cpu_pct(0) + cpu_pct(1)),
                    None,
                    None,
                    "",
                );
            }
        }
    }
    ctx.notes.push(format!(
        "footprint: each publisher alone in its own 2-host lab (the second host idle on the \
         segment), measured over the same {} consecutive windows of {} s after {} s to settle \
         (one sample per window); RSS = VmRSS at the \
         end, CPU from /proc/PID/task/*/schedstat (ns), packets = tx on the publisher's eth0 \
         (/proc/net/dev in its namespace). `rlx-agent` is the agent as deployed (probing this \
         machine, GFLOP/s cached in its state directory); `rlx-agent (--caps-file)` announces \
         simulated caps.",
        windows,
        window.as_secs(),
        settle.as_secs()
    ));
    Ok(())
}

fn probe_times(ctx: &mut Ctx) -> Result<()> {
    let reps = if ctx.quick { 3 } else { 10 };
    let state = ctx.work.path().join("probe-state");
    ctx.command(
        "rlx-agent --probe (GFLOP/s measured)",
        "rlx-agent --probe --state-dir EMPTY_DIR",
    );
    ctx.command(
        "rlx-agent --probe (GFLOP/s cached)",
        "rlx-agent --probe --state-dir DIR_FROM_PREVIOUS_RUN",
    );
    ctx.command(
        "rlx-agent --probe --no-bench",
        "rlx-agent --probe --no-bench",
    );
    let case = "this machine";
    for rep in 0..reps {
        let cold = state.join(format!("cold-{rep}"));
        std::fs::create_dir_all(&cold)?;
        let runs: [(&str, Vec<String>); 3] = [
            (
                "rlx-agent --probe (GFLOP/s measured)",
                vec![
                    "--probe".into(),
                    "--state-dir".into(),
                    cold.display().to_string(),
                ],
            ),
            (
                "rlx-agent --probe (GFLOP/s cached)",
                vec![
                    "--probe".into(),
                    "--state-dir".into(),
                    cold.display().to_string(),
                ],
            ),
            (
                "rlx-agent --probe --no-bench",
                vec!["--probe".into(), "--no-bench".into()],
            ),
        ];
        // The cached run must follow the measured one; the no-bench run
        // alternates before and after them.
        let order: Vec<usize> = if rep % 2 == 0 {
            vec![0, 1, 2]
        } else {
            vec![2, 0, 1]
        };
        for k in order {
            let (tool, args) = &runs[k];
            let mut c = Command::new(&ctx.bins.agent);
            c.args(args);
            let t = run_timed(&mut c, Duration::from_secs(30))?;
            let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
            let ok = t.status.is_some_and(|s| s.success()) && v.get("cores").is_some();
            let note = format!(
                "{}; gflops {}; cpu {:.0} ms; peak RSS {} kB",
                t.describe_status(),
                v["gflops"],
                t.cpu.as_secs_f64() * 1000.0,
                t.maxrss_kb
            );
            ctx.record(
                "footprint",
                case,
                tool,
                "wall_ms",
                rep,
                ok.then(|| t.wall_ms()),
                None,
                None,
                note,
            );
        }
    }
    ctx.notes.push(
        "probe: `rlx-agent --probe` run directly (it sends no packets); \"GFLOP/s measured\" uses an \
         empty --state-dir so the measurement runs, \"cached\" reuses that directory right after."
            .into(),
    );
    Ok(())
}

/// Where a process's resident memory is: anonymous (heap, stacks) versus
/// file-backed (the executable and libraries, shared with other copies).
fn rss_parts(pid: u32) -> String {
    format!(
        "RssAnon {} kB, RssFile {} kB (of which its own executable {} kB), VmHWM {} kB, {} threads",
        crate::proc::status_kb(pid, "RssAnon:").unwrap_or(0),
        crate::proc::status_kb(pid, "RssFile:").unwrap_or(0),
        exe_rss_kb(pid).unwrap_or(0),
        crate::proc::status_kb(pid, "VmHWM:").unwrap_or(0),
        std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
    )
}

/// Resident kB of the mappings of the process's own executable file (its
/// code and read-only data, as opposed to shared libraries).
fn exe_rss_kb(pid: u32) -> Option<u64> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe.to_string_lossy().into_owned();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut total = 0;
    let mut in_exe = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping header: "start-end perms offset dev inode path".
            in_exe = line.split_whitespace().nth(5) == Some(exe.as_str());
        } else if in_exe && first == "Rss:" {
            total += line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
        }
    }
    Some(total)
}

/// Proportional set size, kB (`Pss:` of `/proc/PID/smaps_rollup`).
fn pss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    s.lines()
        .find(|l| l.starts_with("Pss:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// How many times a process's threads have run so far (third field of
/// `/proc/PID/task/*/schedstat`): timer wake-ups of an idle daemon.
fn wakeups(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| {
            std::fs::read_to_string(t.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .nth(2)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
