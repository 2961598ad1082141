//! `rlx-discover doctor`: checks this box for what keeps agents from being
//! found, and prints each check with its fix.

use anyhow::Result;
use clap::Args;
use rlx_discover::doctor::{diagnose, Status};
use rlx_discover::escape_line;
use std::process::ExitCode;

/// Arguments of `doctor`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct DoctorArgs {
    /// Where to look and whom to admit, as for browse.
    #[command(flatten)]
    pub lan: crate::cli::lan::LanArgs,
    /// How long the test query listens (3s, 800ms; a bare number is ms)
    /// [default: 3s, or browse_ms].
    #[arg(long = "browse", visible_alias = "browse-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub browse_ms: Option<u64>,
    /// Print JSON: {"checks": [{"check", "status", "detail", "fix"}], "healthy"}.
    #[arg(long)]
    pub json: bool,
}

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover doctor                          # every check, on every interface the browse uses
  rlx-discover doctor --interface eth1 --json  # one interface, for scripts
  rlx-discover doctor --config cluster.toml    # with the file's port, cluster and key

{}",
        crate::cli::runtime::exit_status(
            "a check failed (its fix is printed beside it); warnings alone exit 0"
        )
    )
}

/// Prints checks one per line, each fix under its check; returns how many
/// failed, warned and were skipped.
pub(crate) fn print_checks(checks: &[rlx_discover::doctor::Check]) -> (usize, usize, usize) {
    for c in checks {
        // Details quote what agents and strangers said (instance labels,
        // refusal reasons): one line each, never an escape sequence.
        println!(
            "{:<5} {:<16} {}",
            c.status.as_str(),
            c.check,
            escape_line(&c.detail)
        );
        if let Some(fix) = &c.fix {
            println!("{:<5} {:<16} fix: {}", "", "", escape_line(fix));
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    (
        count(Status::Fail),
        count(Status::Warn),
        count(Status::Skip),
    )
}

/// Runs the checks and prints them; exit 1 when one failed.
pub fn run(a: DoctorArgs) -> Result<ExitCode> {
    let d = a.lan.section(a.browse_ms, "doctor")?;
    let diag = crate::cli::runtime::runtime()?.block_on(diagnose(&d));
    if a.json {
        let mut v = serde_json::to_value(&diag)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("v".into(), crate::cli::runtime::JSON_VERSION.into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let (failed, warned, skipped) = print_checks(&diag.checks);
        let verdict = match (failed, warned) {
            (0, 0) => "healthy: nothing found that would hide an agent".to_string(),
            (0, w) => format!("healthy, with {w} warning(s)"),
            (f, _) => format!("{f} check(s) failed: see the fixes above"),
        };
        println!("{verdict} ({skipped} not checked)");
    }
    Ok(if diag.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(rlx_proto::exit::NEEDS_A_LOOK)
    })
}
