//! `rlx-agent`: runs on every box of an RLX cluster. This file only parses
//! flags, starts logging and calls the library; see `rlx_agent` for the rest.

use clap::CommandFactory;
use rlx_agent::cli::{AgentArgs, AgentCommand, LogFormat};
use rlx_proto::exit::{ERROR, NEEDS_A_LOOK};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = AgentArgs::command().get_matches();
    if let Err(e) = rlx_agent::cli::check_usage(&matches) {
        e.exit();
    }
    let (args, config) = match rlx_agent::config::resolve(&matches) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("rlx-agent: error: {e:#}");
            return ExitCode::from(ERROR);
        }
    };
    let default = match (args.quiet, args.verbose) {
        (true, _) => "warn",
        (false, 0) if args.probe || args.command.is_some() => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    init_logging(default, &args);
    if args.probe || args.command.is_some() {
        // `rlx-agent --probe | head` must end quietly like any Unix filter, not
        // panic on a closed stdout. Only for the commands that print and
        // exit: a running agent keeps Rust's ignored SIGPIPE.
        // SAFETY: setting a signal disposition to SIG_DFL before any thread
        // exists has no preconditions.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigDfl,
            );
        }
    }
    if let Some(path) = &config {
        tracing::info!(
            "settings from {} (flags and RLX_AGENT_* override it)",
            path.display()
        );
    }
    match run(&args, config.as_deref()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rlx-agent: error: {e:#}");
            ExitCode::from(ERROR)
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (else `default`), as text or JSON
/// (`--log-format`): stdout is reserved for the caps JSON that `--probe`
/// callers (ssh, scripts) parse, and for `check --json`.
fn init_logging(default: &str, args: &AgentArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => builder.json().with_current_span(false).init(),
        LogFormat::Text => builder.with_ansi(args.color.for_stderr()).init(),
    }
}

fn run(args: &AgentArgs, config: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(AgentCommand::Check { json }) => return check(args, config, *json),
        None => {}
    }
    // `--probe` opens no port: only a running agent needs its own port apart
    // from the worker's (a coordinator whose workers are on 6184 probes with
    // `--worker-port 6184`).
    if !args.probe {
        args.check_ports()?;
    }
    if args.probe {
        let caps = args.probe_caps()?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", caps.to_json())?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let caps = args.caps()?;
    // One thread: the agent answers a handful of handshakes a minute, and
    // mdns-sd runs its own thread; a multi-threaded runtime would only add
    // idle memory.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(rlx_agent::run::run(args, caps))?;
    Ok(ExitCode::SUCCESS)
}

/// `rlx-agent check`: the checks, printed; exit 1 when one failed (every
/// error, config or run, exits 2: the one table, [`rlx_proto::exit`]).
fn check(
    args: &AgentArgs,
    config: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let checks = rt.block_on(rlx_agent::check::run_checks(args, config));
    let healthy = !checks
        .iter()
        .any(|c| c.status == rlx_net::check::Status::Fail);
    if json {
        let v = serde_json::json!({ "v": 1, "checks": checks, "healthy": healthy });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", rlx_agent::check::render(&checks));
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(NEEDS_A_LOOK)
    })
}
