//! **Scenario 3: SSH probe of many hosts** — one OpenSSH server per lab
//! host, each host's probe taking about 1 s (a `remote_bin` wrapper that
//! sleeps 1 s, then runs `rlx-agent --probe --caps-file` with that host's
//! caps): `rlx-discover expand` with `[discover] ssh_hosts` against a serial
//! loop of ssh calls, which is what the seed did.

use crate::ctx::Ctx;
use crate::peers::write_caps;
use crate::proc::run_timed;
use anyhow::{ensure, Result};
use rlx_lab::kit::{sshd, Peer};
use rlx_lab::{Lab, LabOptions, LabProcess};
use std::time::Duration;

/// How long each host's probe takes to answer.
const PROBE_DELAY_S: &str = "1";

const OURS: &str = "rlx-discover expand (ssh_hosts)";
const SERIAL: &str = "serial ssh loop";

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !Peer::OpenSsh.present() {
        ctx.not_measured(
            "ssh: SSH probe of many hosts",
            format!(
                "OpenSSH not installed (apt-get install {})",
                Peer::OpenSsh.packages()
            ),
        );
        return Ok(());
    }
    let hosts = if ctx.quick { 10 } else { 30 };
    let dir = ctx.work.path().join("ssh");
    std::fs::create_dir_all(dir.join("bin"))?;
    sshd::prepare(&dir)?;
    let wrapper = dir.join("bin").join("bench-probe");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n# A host that takes about {PROBE_DELAY_S} s to answer, then the real probe.\n\
             sleep {PROBE_DELAY_S}\nexec {} \"$@\" --caps-file \"$RLX_BENCH_CAPS\"\n",
            ctx.bins.agent.display()
        ),
    )?;
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let lab = Lab::new(LabOptions {
        hosts: hosts + 1,
        ipv6: false,
    })?;
    let mut servers: Vec<LabProcess> = Vec::new();
    let mut ssh_config = String::new();
    for i in 1..=hosts {
        let (caps, _) = write_caps(&dir, i)?;
        let ip = lab.host(i).ip.to_string();
        let env = format!(
            "PATH={}:/usr/bin:/bin RLX_BENCH_CAPS={}",
            dir.join("bin").display(),
            caps.display()
        );
        let cfg = sshd::server_config(&dir, &format!("h{i}"), &ip, 22, &env)?;
        servers.push(lab.spawn(i, sshd::server_command(&cfg))?);
        ssh_config.push_str(&sshd::client_entry(&dir, &format!("h{i}"), &ip, 22));
    }
    let cfg_path = dir.join("ssh_config");
    std::fs::write(&cfg_path, ssh_config)?;
    let left = rlx_lab::kit::netns::wait_tcp(
        &lab.host(0).ns,
        (1..=hosts).map(|i| (lab.host(i).ip, 22).into()).collect(),
        Duration::from_secs(60),
    )?;
    ensure!(
        left.is_empty(),
        "sshd never listened at {left:?}\n{}",
        servers.first().map(|s| s.dump()).unwrap_or_default()
    );
    let aliases: Vec<String> = (1..=hosts).map(|i| format!("h{i}")).collect();
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt)?;
    let cluster = dir.join("cluster.toml");
    std::fs::write(
        &cluster,
        format!(
            "[discover]\nssh_hosts = [{}]\nckpt_dir = {:?}\nssh_config = {:?}\nremote_bin = \"bench-probe\"\n\
             ssh_timeout_ms = 10000\nmdns = false\n",
            aliases.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", "),
            ckpt.display().to_string(),
            cfg_path.display().to_string(),
        ),
    )?;
    let serial_script = format!(
        "for h in {}; do ssh -F {} $h bench-probe --probe --worker-port 9100 || echo FAILED $h; done",
        aliases.join(" "),
        cfg_path.display()
    );
    ctx.command(OURS, "rlx-discover expand --format json cluster.toml   # [discover] ssh_hosts = [h1..hN], remote_bin = \"bench-probe\", mdns = false");
    ctx.command(
        SERIAL,
        "for h in h1 .. hN; do ssh -F ssh_config $h bench-probe --probe --worker-port 9100; done",
    );
    ctx.notes.push(format!(
        "ssh: {hosts} lab hosts, one OpenSSH server each (ed25519 keys, BatchMode); `bench-probe` on \
         each host sleeps {PROBE_DELAY_S} s and then runs `rlx-agent --probe --caps-file` with that \
         host's caps. Coordinator in its own lab host. {}",
        if ctx.quick { "Quick mode uses 10 hosts instead of 30." } else { "" }
    ));
    let case = format!("{hosts} hosts, {PROBE_DELAY_S} s each");
    let expected = Some(hosts as u64);
    for rep in 0..ctx.reps {
        let order: [&str; 2] = if rep % 2 == 0 {
            [OURS, SERIAL]
        } else {
            [SERIAL, OURS]
        };
        for tool in order {
            let server_cpu0 = servers_cpu_ms(&servers);
            if tool == OURS {
                let mut c = lab.command(0, &ctx.bins.discover);
                c.args(["expand", "--format", "json"])
                    .arg(&cluster)
                    .env("RUST_LOG", "warn");
                let t = run_timed(&mut c, Duration::from_secs(120))?;
                record_cpu(ctx, &case, OURS, rep, &t, server_cpu0, &servers);
                let v: serde_json::Value = serde_json::from_str(&t.stdout).unwrap_or_default();
                let found = v["nodes"].as_array().map_or(0, |a| a.len()) as u64;
                let failed = v["report"]["failed"].as_array().map_or(0, |a| a.len());
                let note = format!(
                    "{}; {failed} failed; cpu {:.0} ms{}",
                    t.describe_status(),
                    t.cpu.as_secs_f64() * 1000.0,
                    if found < hosts as u64 {
                        format!(
                            "; first failure: {}",
                            v["report"]["failed"]
                                .get(0)
                                .map(|f| f.to_string())
                                .unwrap_or_else(|| t.stderr_tail(3))
                        )
                    } else {
                        String::new()
                    }
                );
                ctx.record(
                    "ssh",
                    &case,
                    OURS,
                    "wall_ms",
                    rep,
                    t.status.map(|_| t.wall_ms()),
                    Some(found),
                    expected,
                    note,
                );
            } else {
                let mut c = lab.command(0, "sh");
                c.args(["-c", &serial_script]);
                let t = run_timed(&mut c, Duration::from_secs(600))?;
                record_cpu(ctx, &case, SERIAL, rep, &t, server_cpu0, &servers);
                let found = t.stdout.lines().filter(|l| l.contains("\"id\"")).count() as u64;
                let note = format!(
                    "{}; cpu {:.0} ms{}",
                    t.describe_status(),
                    t.cpu.as_secs_f64() * 1000.0,
                    if found < hosts as u64 {
                        format!("; stderr: {}", t.stderr_tail(2))
                    } else {
                        String::new()
                    }
                );
                ctx.record(
                    "ssh",
                    &case,
                    SERIAL,
                    "wall_ms",
                    rep,
                    t.status.map(|_| t.wall_ms()),
                    Some(found),
                    expected,
                    note,
                );
            }
        }
    }
    drop(servers);
    drop(lab);
    Ok(())
}

/// CPU time of the sshd servers so far, ms, including their reaped
/// children (the sessions and the remote commands): `utime + stime + cutime
/// + cstime` of `/proc/PID/stat`.
fn servers_cpu_ms(servers: &[LabProcess]) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick = 1000.0 / if ticks > 0 { ticks as f64 } else { 100.0 };
    servers
        .iter()
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", p.pid())).ok()?;
            // Fields after the `(comm)`, which may contain spaces.
            let rest = stat.rsplit_once(')')?.1;
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            // utime, stime, cutime, cstime are fields 14-17 (1-based), i.e.
            // 11-14 after the state field at index 0.
            Some(f.get(11..15)?.iter().sum::<f64>() * tick)
        })
        .sum()
}

/// Records where the CPU went in one run: the coordinator's side (the
/// command and its ssh clients) and the servers' side (sshd sessions and
/// the remote probes). On a real cluster the servers' share is spent on 30
/// other machines; in this lab all of it competes for the same cores.
fn record_cpu(
    ctx: &mut Ctx,
    case: &str,
    tool: &str,
    rep: u32,
    t: &crate::proc::Timed,
    server_cpu0: f64,
    servers: &[LabProcess],
) {
    // sshd reaps its sessions as they end; give the last ones a moment.
    std::thread::sleep(Duration::from_millis(200));
    let server = servers_cpu_ms(servers) - server_cpu0;
    ctx.record(
        "ssh",
        case,
        tool,
        "client_cpu_ms",
        rep,
        Some(t.cpu.as_secs_f64() * 1000.0),
        None,
        None,
        "",
    );
    ctx.record(
        "ssh",
        case,
        tool,
        "server_cpu_ms",
        rep,
        Some(server),
        None,
        None,
        "",
    );
}
