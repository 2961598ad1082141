//! `rlx-discover scan`: which addresses of a block listen on the worker port.

use crate::cli::progress::Bars;
use anyhow::Result;
use clap::Args;
use rlx_discover::config::{Subnet, DEFAULT_PORT, DEFAULT_TIMEOUT_MS};
use rlx_discover::sources::subnet::{scan, DEFAULT_SCAN_CONCURRENCY};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `scan`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  rlx-discover scan 10.0.0.0/24\n  \
                        rlx-discover scan 10.1.0.0/16 --port 9100 --timeout-ms 200 --json\n")]
pub struct ScanArgs {
    /// The block to scan, at most a /16.
    pub cidr: String,
    /// Worker port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Per-connect timeout, ms.
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_MS)]
    pub timeout_ms: u64,
    /// Most connects in flight.
    #[arg(long, default_value_t = DEFAULT_SCAN_CONCURRENCY)]
    pub concurrency: usize,
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Scans and prints the open addresses; exit 1 when none.
pub fn run(a: ScanArgs, bars: &Bars) -> Result<ExitCode> {
    let net: Subnet = a.cidr.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    rlx_net::netguard::ensure_private_netns("a subnet scan")?;
    let r = crate::cli::runtime::runtime()?.block_on(scan(
        &net,
        a.port,
        Duration::from_millis(a.timeout_ms),
        a.concurrency,
        bars,
    ));
    if a.json {
        let v = serde_json::json!({
            "open": r.open.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "refused": r.refused,
            "silent": r.silent,
            "concurrency": r.concurrency,
            "elapsed_ms": r.elapsed.as_millis() as u64,
        });
        println!("{v}");
    } else {
        for a in &r.open {
            println!("{a}");
        }
        eprintln!(
            "{net}: {} open, {} refused, {} silent in {} ms ({} in flight)",
            r.open.len(),
            r.refused,
            r.silent,
            r.elapsed.as_millis(),
            r.concurrency
        );
    }
    Ok(if r.open.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
