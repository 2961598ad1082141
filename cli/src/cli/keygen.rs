//! `rlx-discover keygen`: a fresh cluster key.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `keygen`.
#[derive(Debug, Args)]
#[command(after_help = format!(
    "Examples:\n  rlx-discover keygen /etc/rlx/cluster.key\n\n{}",
    crate::cli::runtime::exit_status("never (an existing file is an error, 2)")
))]
pub struct KeygenArgs {
    /// Where to write it; an existing file is never overwritten.
    #[arg(default_value = "rlx-cluster.key")]
    pub path: PathBuf,
}

/// Writes the key and says what to do with it.
pub fn run(a: KeygenArgs) -> Result<ExitCode> {
    let key = rlx_proto::keys::generate(&a.path)?;
    eprintln!(
        "wrote a new cluster key to {} (mode 0600, fingerprint {}); give it to every agent \
         with --key-file and to the coordinator with [discover] key_file",
        a.path.display(),
        key.fingerprint()
    );
    Ok(ExitCode::SUCCESS)
}
