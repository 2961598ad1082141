//! `rlx-discover scan`: which addresses of a block run an agent or listen on
//! the worker port, and what the listeners without an agent are.

use crate::cli::duration::Millis;
use crate::cli::progress::Bars;
use anyhow::Result;
use clap::Args;
use rlx_discover::config::{
    Subnet, DEFAULT_AGENT_PORT, DEFAULT_SCAN_CONCURRENCY, DEFAULT_TIMEOUT_MS, DEFAULT_WORKER_PORT,
};
use rlx_discover::scan::{scan, Identity, Listener, Ports, ScanOptions};
use std::process::ExitCode;

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover scan 10.0.0.0/24
  rlx-discover scan 10.1.0.0/16 --port 9100 --agent-port 6184 --timeout 200ms --json

{}",
        crate::cli::runtime::exit_status("no address was listening")
    )
}

/// Arguments of `scan`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct ScanArgs {
    /// The block to scan, at most a /16.
    pub cidr: String,
    /// The RLX worker's port.
    #[arg(long, default_value_t = DEFAULT_WORKER_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// rlx-agent's port, tried at the same time.
    #[arg(long, default_value_t = DEFAULT_AGENT_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    pub agent_port: u16,
    /// Per-connect timeout (300ms, 1s; a bare number is ms).
    #[arg(long = "timeout", visible_alias = "timeout-ms", value_name = "DURATION",
          default_value_t = Millis(DEFAULT_TIMEOUT_MS), value_parser = Millis::parse)]
    pub timeout_ms: Millis,
    /// Most connects in flight.
    #[arg(long, default_value_t = DEFAULT_SCAN_CONCURRENCY)]
    pub concurrency: usize,
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Scans and prints the open addresses; exit 1 when none.
pub fn run(a: ScanArgs, bars: &Bars) -> Result<ExitCode> {
    let net: Subnet = a.cidr.parse()?;
    // Stricter than the library's own check, which lets a loopback block
    // through for its tests: the command scans nothing from the machine's
    // initial namespace under the guard (the project's rule, as written).
    rlx_net::netguard::ensure_private_netns("a subnet scan")?;
    anyhow::ensure!(
        a.port != a.agent_port,
        "--port and --agent-port are both {}: the worker and the agent each have their own port",
        a.port
    );
    let ports = Ports {
        worker: a.port,
        agent: a.agent_port,
    };
    let opts = ScanOptions {
        net: net.clone(),
        ports,
        timeout: a.timeout_ms.duration(),
        concurrency: a.concurrency,
    };
    let r = crate::cli::runtime::runtime()?.block_on(scan(&opts, bars))?;
    let what = |l: &Listener| match l {
        Listener::Agent { worker_open, .. } => format!(
            "rlx-agent on port {}, worker {}",
            ports.agent,
            if *worker_open {
                "listening"
            } else {
                "not listening"
            }
        ),
        Listener::Bare { identity, .. } => match identity {
            Identity::Other { .. } => format!("{}: not an RLX worker", identity.describe()),
            Identity::Unknown { .. } => {
                format!(
                    "{}, no rlx-agent: nothing vouches for it",
                    identity.describe()
                )
            }
        },
    };
    if a.json {
        let found: Vec<serde_json::Value> = r
            .found
            .iter()
            .map(|l| {
                let (agent, worker_open, identity) = match l {
                    Listener::Agent { worker_open, .. } => (true, Some(*worker_open), None),
                    Listener::Bare { identity, .. } => (
                        false,
                        Some(true),
                        Some(match identity {
                            Identity::Other { protocol, .. } => (*protocol).to_string(),
                            Identity::Unknown { .. } => "unknown".into(),
                        }),
                    ),
                };
                serde_json::json!({
                    "addr": l.worker().to_string(),
                    "agent": agent,
                    "worker_open": worker_open,
                    "identity": identity,
                    "what": what(l),
                })
            })
            .collect();
        let v = serde_json::json!({
            "v": crate::cli::runtime::JSON_VERSION,
            "open": r.open().iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "found": found,
            "refused": r.refused,
            "silent": r.silent,
            "concurrency": r.concurrency,
            "elapsed_ms": r.elapsed.as_millis() as u64,
        });
        println!("{v}");
    } else {
        for l in &r.found {
            println!("{:<22} {}", l.worker().to_string(), what(l));
        }
        eprintln!(
            "{net}: {} listening, {} refused, {} silent in {} ms ({} addresses in flight)",
            r.found.len(),
            r.refused,
            r.silent,
            r.elapsed.as_millis(),
            r.concurrency
        );
    }
    Ok(if r.found.is_empty() {
        ExitCode::from(rlx_proto::exit::NEEDS_A_LOOK)
    } else {
        ExitCode::SUCCESS
    })
}
