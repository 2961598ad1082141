//! **The process around a subcommand** — its exit codes, logging to
//! stderr and the async runtime the subcommands share.

use anyhow::{Context, Result};

/// The exit codes: the table both programs share ([`rlx_proto::exit`]),
/// shown at the end of `rlx-discover --help` and in its man page.
pub const EXIT_CODES: &str = rlx_proto::exit::TABLE;

/// What exit 1 means for `expand`, the command scripts and CI gates run:
/// every cause, so that a 1 is never a guess (docs/reference.md, "Exit
/// codes").
pub const EXPAND_ONE: &str = "\
an ssh_hosts entry failed, a configured subnet or dns_sd found nothing, an
announcement claims the address of a node in the file, an id clash,
discovery found no node at all, a node appended earlier is no longer found,
or a hand-written node's machine answers at another address; with
--check-ssh a node's ssh failed; with --strict
also any refused announcement of a stranger (refused announcements of
machines not in the file that claim nothing of it are otherwise reported
only). With --write the file was still written. A found node whose machine
moved is updated in place and does not count";

/// A subcommand's `Exit status:` block: the shared table, then what this
/// subcommand's 1 means (`one`), so that every `--help` and man page says
/// it where the reader is.
pub fn exit_status(one: &str) -> String {
    format!("{EXIT_CODES}\nHere, 1 means: {one}.")
}

/// The `"v"` of every JSON output of `expand`, `browse`, `scan` and
/// `doctor` (`watch`'s event lines carry the library's own, also 1): raised
/// only when a field is renamed, removed or changes meaning; fields are
/// added without raising it (docs/json.md).
pub const JSON_VERSION: u32 = 1;

/// When the output is coloured (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless `NO_COLOR` is set (no-color.org).
    #[default]
    Auto,
    /// Always, even into a pipe or a file.
    Always,
    /// Never.
    Never,
}

impl Color {
    /// Whether to colour stderr: `no_color` is the `NO_COLOR` variable
    /// (any value but the empty string turns colour off, as no-color.org
    /// says), `terminal` whether stderr is one.
    pub fn enabled(self, no_color: Option<&std::ffi::OsStr>, terminal: bool) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// [`Color::enabled`] for this process's stderr and environment.
    pub fn for_stderr(self) -> bool {
        self.enabled(
            std::env::var_os("NO_COLOR").as_deref(),
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
    }
}

/// Starts logging to stderr: warnings by default, `-q` errors only, `-v`
/// info, `-vv` debug; `RUST_LOG` wins when set; coloured per `color`.
pub fn init_logging(quiet: bool, verbose: u8, color: Color) {
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
        .with_ansi(color.for_stderr())
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

#[cfg(test)]
mod tests {
    use super::Color;
    use std::ffi::OsStr;

    #[test]
    fn colour_follows_the_flag_then_no_color_then_the_terminal() {
        assert!(Color::Auto.enabled(None, true));
        assert!(!Color::Auto.enabled(None, false));
        assert!(!Color::Auto.enabled(Some(OsStr::new("1")), true));
        assert!(Color::Auto.enabled(Some(OsStr::new("")), true));
        assert!(Color::Always.enabled(Some(OsStr::new("1")), false));
        assert!(!Color::Never.enabled(None, true));
    }
}
