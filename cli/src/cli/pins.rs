//! `rlx-discover pins`: the node id -> node key pins a coordinator learned
//! on first sight (`rlx_discover::pins`), listed, or one forgotten so the
//! next run pins the key it then sees (a machine reinstalled on purpose).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rlx_discover::pins::Pins;
use rlx_discover::ClusterConfig;
use std::path::PathBuf;
use std::process::ExitCode;

const EXAMPLES: &str = "\
Examples:
  rlx-discover pins list --config cluster.toml
  rlx-discover pins forget 0123456789abcdef --config cluster.toml
  rlx-discover pins forget 0123456789abcdef --pins-file /etc/rlx/cluster.pins

The pins file is `<cluster file's stem>.pins` beside the cluster file
(cluster.toml -> cluster.pins) unless [discover] pins_file names another.
Forget a pin only for a machine you reinstalled (or whose state directory
you wiped): a refusal naming two fingerprints is otherwise another machine
claiming that node's id.";

fn after_help() -> String {
    format!(
        "{EXAMPLES}\n\n{}",
        crate::cli::runtime::exit_status(FORGET_ONE)
    )
}

/// What 1 means for `pins` (only `forget` exits 1).
const FORGET_ONE: &str = "pins forget found no pin for the id, so there was nothing to forget; \
                          pins list never exits 1";

/// Arguments of `pins`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct PinsArgs {
    /// What to do with the pins.
    #[command(subcommand)]
    pub action: PinsAction,
}

/// Which pins file: the cluster file's, or one named.
#[derive(Debug, Args)]
pub struct Where {
    /// The cluster file whose pins to use (its [discover] pins_file, else
    /// <stem>.pins beside it).
    #[arg(long, value_name = "PATH", conflicts_with = "pins_file")]
    pub config: Option<PathBuf>,
    /// The pins file itself.
    #[arg(long, value_name = "PATH")]
    pub pins_file: Option<PathBuf>,
}

/// The `pins` actions.
#[derive(Debug, Subcommand)]
pub enum PinsAction {
    /// Print every pin: node id, key fingerprint, and the comment (host,
    /// first seen).
    #[command(after_help = after_help())]
    List(Where),
    /// Drop the pin of a node id, so that the next run pins the key it
    /// then sees (after a real reinstall).
    #[command(after_help = after_help())]
    Forget {
        /// The node id (16 hex characters).
        id: String,
        /// Which pins file.
        #[command(flatten)]
        at: Where,
    },
}

/// Runs `pins`.
pub fn run(a: PinsArgs) -> Result<ExitCode> {
    match a.action {
        PinsAction::List(at) => {
            let pins = open(&at)?;
            let path = pins
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            if pins.iter().next().is_none() {
                eprintln!(
                    "no pins in {path} (a node is pinned the first time it proves its node key)"
                );
            }
            for (id, pin) in pins.iter() {
                println!(
                    "{id}  {}  {}",
                    pin.key.fingerprint(),
                    rlx_discover::escape_line(&pin.comment)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PinsAction::Forget { id, at } => {
            if !rlx_proto::caps::is_valid_id(&id) {
                bail!("{id:?} is not a node id (16 lowercase hex characters; `rlx-discover pins list` shows them)");
            }
            let mut pins = open(&at)?;
            let path = pins
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let Some(old) = pins.get(&id).cloned() else {
                eprintln!("{id} is not pinned in {path}: nothing to forget");
                return Ok(ExitCode::from(rlx_proto::exit::NEEDS_A_LOOK));
            };
            pins.forget(&id);
            pins.save(std::slice::from_ref(&id))
                .with_context(|| format!("forgetting {id} in {path}"))?;
            eprintln!(
                "forgot {id} ({}, {}) in {path}: the next run pins the key it then proves",
                old.key.fingerprint(),
                rlx_discover::escape_line(&old.comment)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The pins file `at` names.
fn open(at: &Where) -> Result<Pins> {
    let path = match (&at.pins_file, &at.config) {
        (Some(p), _) => p.clone(),
        (None, Some(c)) => {
            let cfg = ClusterConfig::load(c)?;
            match cfg.discover.and_then(|d| d.pins_file) {
                Some(p) => p,
                None => rlx_discover::pins::default_path(c),
            }
        }
        (None, None) => bail!("name the pins: --config cluster.toml, or --pins-file PATH"),
    };
    Ok(Pins::load(&path)?)
}
