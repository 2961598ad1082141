//! **Scenario 2: subnet scan** — a /24, a /20 (and a /16 for ours) where 3
//! addresses listen on the worker port and every other address silently
//! drops the SYN (nftables in the scanner's namespace, [`Lab::silence_tcp`]),
//! 300 ms per-connect timeout: `rlx-discover scan` against `nmap -sT -Pn`
//! with nmap's `-T4` timing and with timing tuned for this case, plus the
//! seed's serial loop (hosts x timeout, computed, not run).

use crate::ctx::Ctx;
use crate::peers::PORT;
use crate::proc::run_timed;
use anyhow::Result;
use ipnet::Ipv4Net;
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The per-connect timeout of the scenario (the seed's default `timeout_ms`).
const TIMEOUT_MS: u64 = 300;

/// A listener that accepts and closes: something alive on the port (its
/// first argument).
const LISTENER: &str =
    "import socket,sys\ns=socket.create_server(('0.0.0.0',int(sys.argv[1])),backlog=512)\n\
                        while True:\n    c,_=s.accept(); c.close()\n";

/// Tools of this scenario.
const OURS: &str = "rlx-discover scan";
const NMAP_T4: &str = "nmap -sT -Pn -T4";
const NMAP_TUNED: &str = "nmap -sT -Pn tuned";
const SERIAL: &str = "seed serial loop (computed)";

fn nmap_args(tuned: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "-sT",
        "-Pn",
        "-n",
        "-p",
        &PORT.to_string(),
        "-T4",
        "-oG",
        "-",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if tuned {
        a.extend(
            [
                "--max-retries",
                "0",
                "--initial-rtt-timeout",
                "300ms",
                "--max-rtt-timeout",
                "300ms",
                "--min-hostgroup",
                "256",
                "--min-parallelism",
                "256",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
    }
    a
}

/// Live hosts nmap's grepable output reports open.
fn nmap_open(out: &str) -> Vec<Ipv4Addr> {
    out.lines()
        .filter(|l| l.contains(&format!("{PORT}/open")))
        .filter_map(|l| {
            l.strip_prefix("Host: ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    let lab = Lab::new(LabOptions {
        hosts: 4,
        ipv6: false,
    })?;
    let live: Vec<Ipv4Addr> = (1..4).map(|i| lab.host(i).ip).collect();
    let _listeners = (1..4)
        .map(|i| {
            let mut c = lab.command(i, PYTHON);
            c.args(["-c", LISTENER, &PORT.to_string()]);
            lab.spawn(i, c)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let left = rlx_lab::kit::netns::wait_tcp(
        &lab.host(0).ns,
        live.iter().map(|a| (*a, PORT).into()).collect(),
        Duration::from_secs(30),
    )?;
    anyhow::ensure!(left.is_empty(), "listeners never came up: {left:?}");
    lab.silence_tcp(0, lab.subnet(), PORT, &live)?;

    let x = lab.subnet().addr().octets()[1];
    let net24 = Ipv4Net::new(Ipv4Addr::new(10, x, 1, 0), 24)?;
    let net20 = Ipv4Net::new(Ipv4Addr::new(10, x, 0, 0), 20)?;
    let net16 = lab.subnet();
    ctx.command(
        OURS,
        format!("rlx-discover scan CIDR --port {PORT} --timeout-ms {TIMEOUT_MS} --json"),
    );
    ctx.command(NMAP_T4, format!("nmap {} CIDR", nmap_args(false).join(" ")));
    ctx.command(
        NMAP_TUNED,
        format!("nmap {} CIDR", nmap_args(true).join(" ")),
    );
    ctx.command(
        SERIAL,
        format!(
            "(addresses in CIDR - 2) x {TIMEOUT_MS} ms: the seed connects one address at a time"
        ),
    );
    ctx.notes.push(format!(
        "scan: scanner in its own namespace; 3 listeners ({}) accept on port {PORT}; every other \
         address of the lab's /16 silently dropped (nftables output rule in the scanner's \
         namespace), so each costs a full connect timeout. nmap runs with -n (no reverse DNS; \
         there is no DNS server in the lab).",
        live.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let reps = ctx.reps;
    let cases: Vec<(&str, Ipv4Net, Vec<&str>)> = vec![
        ("/24", net24, vec![OURS, NMAP_TUNED, NMAP_T4]),
        ("/20", net20, vec![OURS, NMAP_TUNED]),
        ("/16", net16, vec![OURS]),
    ];
    for (case, net, tools) in &cases {
        let hosts = (1u64 << (32 - net.prefix_len())) - 2;
        let sample = crate::results::Sample {
            scenario: "scan".into(),
            case: (*case).into(),
            tool: SERIAL.into(),
            metric: "wall_ms".into(),
            rep: 0,
            value: Some((hosts * TIMEOUT_MS) as f64),
            found: None,
            expected: Some(live.len() as u64),
            computed: true,
            load1: 0.0,
            others_cpu_pct: None,
            note: format!("{hosts} addresses x {TIMEOUT_MS} ms, computed"),
        };
        ctx.samples.push(sample);
        // Rotating the order each repetition: no tool always goes first.
        for rep in 0..reps {
            let mut order = tools.clone();
            let len = order.len();
            order.rotate_left(rep as usize % len);
            for tool in order {
                measure(ctx, &lab, case, *net, tool, rep, &live)?;
            }
        }
    }
    // nmap's -T4 timing on the /20 takes about 10 minutes: once, full mode only.
    if ctx.quick {
        ctx.not_measured(
            "scan: /20 nmap -sT -Pn -T4",
            "skipped in quick mode (about 10 minutes per run)",
        );
    } else {
        measure(ctx, &lab, "/20", net20, NMAP_T4, 0, &live)?;
    }
    Ok(())
}

fn measure(
    ctx: &mut Ctx,
    lab: &Lab,
    case: &str,
    net: Ipv4Net,
    tool: &str,
    rep: u32,
    live: &[Ipv4Addr],
) -> Result<()> {
    let expected = Some(live.len() as u64);
    let count = |open: &[Ipv4Addr]| live.iter().filter(|a| open.contains(a)).count() as u64;
    match tool {
        OURS => {
            let mut c = lab.command(0, &ctx.bins.discover);
            c.args(["scan", &net.to_string(), "--port", &PORT.to_string()])
                .args(["--timeout-ms", &TIMEOUT_MS.to_string(), "--json"]);
            let t = run_timed(&mut c, Duration::from_secs(120))?;
            let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
            let open: Vec<Ipv4Addr> = v["open"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str()?.split(':').next()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            let note = format!(
                "{}; internal elapsed {} ms; {} in flight; cpu {:.0} ms; peak RSS {} kB",
                t.describe_status(),
                v["elapsed_ms"],
                v["concurrency"],
                t.cpu.as_secs_f64() * 1000.0,
                t.maxrss_kb
            );
            let ok = t.status.is_some();
            ctx.record(
                "scan",
                case,
                tool,
                "wall_ms",
                rep,
                ok.then(|| t.wall_ms()),
                Some(count(&open)),
                expected,
                note,
            );
        }
        NMAP_T4 | NMAP_TUNED => {
            let mut c = lab.command(0, "nmap");
            c.args(nmap_args(tool == NMAP_TUNED)).arg(net.to_string());
            let timeout = if tool == NMAP_T4 && net.prefix_len() < 24 {
                Duration::from_secs(1800)
            } else {
                Duration::from_secs(600)
            };
            let t = run_timed(&mut c, timeout)?;
            let open = nmap_open(&t.stdout);
            let note = format!(
                "{}; cpu {:.0} ms",
                t.describe_status(),
                t.cpu.as_secs_f64() * 1000.0
            );
            let ok = t.status.is_some();
            ctx.record(
                "scan",
                case,
                tool,
                "wall_ms",
                rep,
                ok.then(|| t.wall_ms()),
                Some(count(&open)),
                expected,
                note,
            );
        }
        _ => unreachable!("unknown scan tool {tool}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_hosts_are_read_from_nmap_grepable_output() {
        let out = "# Nmap 7.93 scan\nHost: 10.5.1.2 ()\tStatus: Up\n\
                   Host: 10.5.1.2 ()\tPorts: 9100/open/tcp//jetdirect///\n\
                   Host: 10.5.1.9 ()\tPorts: 9100/filtered/tcp//jetdirect///\n";
        assert_eq!(nmap_open(out), vec![Ipv4Addr::new(10, 5, 1, 2)]);
    }
}
