//! **What went wrong while building or using a lab**, naming the command or
//! the file.

use std::path::PathBuf;

/// What went wrong while building or using a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A command ran and failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// A command could not be started at all.
    #[error("cannot run `{cmd}`: {source} (are iproute2, nftables and util-linux installed?)")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file the lab needs could not be written or read.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// This machine cannot build a lab here (see [`lab_support`](crate::lab_support)).
    #[error("{0}")]
    Unsupported(String),
    /// The request does not fit the lab (a loss on a loopback lab, ...).
    #[error("{0}")]
    Invalid(String),
    /// A program started in the lab did not say it was ready in time, or
    /// exited first; the message carries its command line and output.
    #[error("{0}")]
    NotReady(String),
}

/// Result with [`LabError`].
pub type Result<T, E = LabError> = std::result::Result<T, E>;
