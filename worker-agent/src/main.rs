//! `rlx-agent`: runs on every box of an RLX cluster. This file only parses
//! flags, starts logging and calls the library; see `rlx_agent` for the rest.

use clap::CommandFactory;
use rlx_agent::cli::AgentArgs;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = AgentArgs::command().get_matches();
    let (args, config) = match rlx_agent::config::resolve(&matches) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("rlx-agent: error: {e:#}");
            return ExitCode::from(1);
        }
    };
    init_logging(if args.probe { "warn" } else { "info" });
    if let Some(path) = &config {
        tracing::info!(
            "settings from {} (flags and RLX_AGENT_* override it)",
            path.display()
        );
    }
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
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    // `--probe` opens no port: only a running agent needs its own port apart
    // from the worker's (a coordinator whose workers are on 6184 probes with
    // `--worker-port 6184`).
    if !args.probe {
        args.check_ports()?;
    }
    let caps = args.caps()?;
    if args.probe {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", caps.to_json())?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    // One thread: the agent answers a handful of handshakes a minute, and
    // mdns-sd runs its own thread; a multi-threaded runtime would only add
    // idle memory.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(rlx_agent::run::run(args, caps))?;
    Ok(ExitCode::SUCCESS)
}
