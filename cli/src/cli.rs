//! **The `rlx-discover` command line** — one module per subcommand, the
//! clap definitions in [`command`], and [`run`], which hands a parsed
//! command line to its subcommand. All behaviour lives in the library
//! (`rlx_discover`); these modules parse, call and print.

use anyhow::Result;
use clap::CommandFactory;
use std::process::ExitCode;

pub mod browse;
pub mod check;
pub mod command;
pub mod completions;
pub mod demo;
pub mod doctor;
pub mod duration;
pub mod expand;
pub mod heatmap;
pub mod keygen;
pub mod lan;
pub mod links;
pub mod man;
pub mod pins;
pub mod progress;
pub mod runtime;
pub mod scan;
pub mod table;
pub mod watch;

pub use command::{Cli, Command};
pub use runtime::init_logging;

/// Runs a parsed command line; the exit code follows [`runtime::EXIT_CODES`].
pub fn run(cli: Cli) -> Result<ExitCode> {
    let quiet = cli.quiet;
    let bars = progress::Bars::new(cli.quiet, cli.verbose);
    match cli.command {
        Command::Expand(a) => expand::run(a, quiet, &bars),
        Command::Browse(a) => browse::run(a, quiet, &bars),
        Command::Demo(a) => demo::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Scan(a) => scan::run(a, &bars),
        Command::Watch(a) => watch::run(a),
        Command::Links(a) => links::run(a),
        Command::Check(a) => check::run(a),
        Command::Keygen(a) => keygen::run(a),
        Command::Pins(a) => pins::run(a),
        Command::Completions(a) => completions::run(a, Cli::command()),
        Command::Man(a) => man::run(a, Cli::command()),
        Command::LabWorker(a) => demo::lab_worker(a),
    }
}
