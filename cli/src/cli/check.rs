//! `rlx-discover check`: the pre-launch path check
//! ([`rlx_discover::prelaunch`]) of the launch that CONFIG and a
//! `hosts.json` describe: every worker port, every rank's address and
//! port, every lower rank's way to it with full-size packets.

use crate::cli::links::{Ring, Setup};
use anyhow::{Context, Result};
use clap::Args;
use rlx_discover::linkmap::{hosts_json, measure_map, HostsOptions};
use rlx_discover::prelaunch::{check_launch, read_hosts_json, Status};
use std::path::PathBuf;
use std::process::ExitCode;

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover check cluster.toml --hosts-json hosts.json  # the file the runtime will read
  rlx-discover check cluster.toml                          # hosts.json as `links` would write it
  rlx-discover check cluster.toml --json

{}",
        crate::cli::runtime::exit_status(
            "a path, a port or an agent failed its check (each named, with its fix)"
        )
    )
}

/// Arguments of `check`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct CheckArgs {
    /// The cluster file: its nodes, and its [discover] (the key is required).
    pub config: PathBuf,
    /// The runtime's hosts.json to check [default: measure the link map and
    /// check the hosts.json `links --hosts-json` would write].
    #[arg(long, value_name = "PATH")]
    pub hosts_json: Option<PathBuf>,
    /// Without --hosts-json: the rank order of the hosts.json checked.
    #[arg(long, value_enum, default_value_t = Ring::File, value_name = "ORDER")]
    pub ring: Ring,
    /// The cluster key file [default: [discover] key_file].
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Print JSON: {"v":1,"checks":[{"check","status","detail","fix"}],"healthy","took_ms"}.
    #[arg(long)]
    pub json: bool,
}

/// Runs the check and prints it; exit 1 when something failed.
pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let setup = Setup::load(&a.config, a.key_file.clone(), None, "the path check")?;
    let given = match &a.hosts_json {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Some(read_hosts_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?)
        }
        None => None,
    };
    let rt = crate::cli::runtime::runtime()?;
    let report = rt.block_on(async {
        let (found, unresolved) = setup.targets().await?;
        for u in &unresolved {
            eprintln!("left out: {}", rlx_discover::escape_line(u));
        }
        let hosts = match given {
            Some(h) => h,
            None => {
                let map = measure_map(&found, &setup.opts).await;
                let opts = HostsOptions {
                    port: setup.discover.hosts_port,
                    ring: a.ring.into(),
                };
                let written = hosts_json(&map, &opts)?;
                eprintln!("checking hosts.json as links would write it:");
                eprint!("{}", written.to_json());
                read_hosts_json(&written.to_json()).map_err(anyhow::Error::msg)?
            }
        };
        anyhow::Ok(check_launch(&found, &hosts, &setup.opts).await)
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let (failed, _, _) = crate::cli::doctor::print_checks(&report.checks);
        let ranks = report
            .checks
            .iter()
            .filter(|c| c.check == "rank" && c.status == Status::Ok)
            .count();
        if failed == 0 {
            println!(
                "ready to launch: {ranks} rank(s) reachable as the runtime will dial them ({:.1} s)",
                report.took_ms as f64 / 1000.0
            );
        } else {
            println!("{failed} check(s) failed: see the fixes above");
        }
    }
    Ok(if report.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
