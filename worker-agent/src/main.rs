//! `rlx-agent`: runs on every box of an RLX cluster. This file only parses
//! flags, starts logging and calls the library; see `rlx_agent` for the rest.

use clap::Parser;
use rlx_agent::cli::AgentArgs;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = AgentArgs::parse();
    init_logging(if args.probe { "warn" } else { "info" });
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rlx-agent: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG`: stdout is reserved for the caps
/// JSON that `--probe` callers (ssh, scripts) parse.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let caps = args.caps()?;
    if args.probe {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", caps.to_json())?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("rlx-agent: run mode is being wired (announce and handshake); use --probe for now");
    Ok(ExitCode::from(2))
}
