//! **The `rlx-discover` command line** — clap definitions (their doc
//! comments are the help text) and one module per subcommand. It lives in
//! the library so that completions, man pages and tests see the same
//! definitions the binary parses.
//!
//! Doc comments on the clap types are the `--help` text, where `[discover]`
//! and `[[node]]` mean the TOML tables, not documentation links.
#![allow(rustdoc::broken_intra_doc_links)]

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod browse;
pub mod completions;
pub mod demo;
pub mod expand;
pub mod keygen;
pub mod lan;
pub mod man;
pub mod scan;
pub mod watch;

/// The exit codes, shown in `--help` and documented in the README.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success: every configured source answered and the output is complete
  1  output printed, but something needs a look: a host failed or was refused,
     discovery found no node at all, or a node appended earlier is no longer
     found (see the report on stderr); with --write the file was still written
  2  error: bad config or flags, a refused operation (e.g. --write when the
     file changed during discovery), or an I/O failure";

/// Find the machines of an RLX cluster and write their [[node]] list.
#[derive(Debug, Parser)]
#[command(name = "rlx-discover", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Print less: errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print more (repeat for debug output); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Expand CONFIG's [discover] stanza into [[node]] entries and print the
    /// result, or update CONFIG in place (--write); the report goes to stderr.
    Expand(expand::ExpandArgs),
    /// Browse the LAN once for rlx-agents and print a table (or --json).
    Browse(browse::BrowseArgs),
    /// Run the whole product on a private network of namespaces: simulated
    /// machines with rlx-agent, discovered from an empty [discover].
    Demo(demo::DemoArgs),
    /// TCP-scan a CIDR block for listeners on the worker port.
    Scan(scan::ScanArgs),
    /// Watch the LAN: joined / updated / left events as agents come and go.
    Watch(watch::WatchArgs),
    /// Write a new cluster key (32 random bytes, hex, mode 0600).
    Keygen(keygen::KeygenArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page, or write every page into a directory.
    Man(man::ManArgs),
}

/// Starts logging to stderr: warnings by default, `-q` errors only, `-v`
/// info, `-vv` debug; `RUST_LOG` wins when set.
pub fn init_logging(quiet: bool, verbose: u8) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// The async runtime the subcommands share. Two workers: discovery is I/O
/// bound, and the machines it runs on are often small.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs a parsed command line; the exit code follows [`EXIT_CODES`].
pub fn run(cli: Cli) -> Result<ExitCode> {
    let quiet = cli.quiet;
    crate::progress::enable(cli.quiet, cli.verbose);
    match cli.command {
        Command::Expand(a) => expand::run(a, quiet),
        Command::Browse(a) => browse::run(a, quiet),
        Command::Demo(a) => demo::run(a),
        Command::Scan(a) => scan::run(a),
        Command::Watch(a) => watch::run(a),
        Command::Keygen(a) => keygen::run(a),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
    }
}
