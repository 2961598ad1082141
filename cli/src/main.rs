//! `rlx-discover`: the coordinator CLI. Parses flags, starts logging and
//! calls the library; all behaviour lives in `rlx_discover`. (What the
//! program does for its users is the `Cli` doc comment, its `--help`.)

use clap::Parser;
mod cli;

use cli::{init_logging, run, Cli};
use std::process::ExitCode;

fn main() -> ExitCode {
    // `rlx-discover browse | head` must end quietly like any Unix filter,
    // not panic on a closed stdout: restore the default SIGPIPE action that
    // the Rust runtime ignores.
    // SAFETY: setting a signal disposition to SIG_DFL before any thread
    // exists has no preconditions.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        );
    }
    let cli = Cli::parse();
    init_logging(cli.quiet, cli.verbose, cli.color);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rlx-discover: error: {e:#}");
            ExitCode::from(rlx_proto::exit::ERROR)
        }
    }
}
