//! `rlx-discover`: the coordinator CLI. Parses flags, starts logging and
//! calls the library; all behaviour lives in `rlx_discover`.

use clap::Parser;
use rlx_discover::cli::{init_logging, run, Cli};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.quiet, cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rlx-discover: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
