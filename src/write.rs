//! **Back into the user's file** — `expand --write`: the user's text with
//! the found nodes appended, what changed or went missing ([`plan`]), the
//! atomic write that never clobbers a concurrent edit ([`read`],
//! [`write_atomic`]), and the `# found by` comments read back
//! ([`file_nodes`]) so that a machine that moved is recognised.
//!
//! ```no_run
//! use rlx_discover::write::{plan, read, write_atomic};
//! use rlx_discover::{expand_config, ClusterConfig, Overrides, Silent};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::path::Path::new("cluster.toml");
//! let (text, snapshot) = read(path)?;
//! let cfg = ClusterConfig::parse(path, &text)?;
//! let exp = expand_config(&cfg, &Overrides::default(), &Silent).await?;
//! let plan = plan(&cfg, &exp, None, "2026-12-02 10:00 UTC")?;
//! if plan.text != text {
//!     write_atomic(&snapshot, &plan.text)?; // refused if the file changed meanwhile
//! }
//! # Ok(()) }
//! ```
//!
//! ```text
//! ClusterConfig ─► marks ─► pipeline ─► Expansion ─► reconcile ─► Plan ─► writeback
//!      text ───────────────────────────────────────► render ──┘
//! ```
//!
//! The rule of the whole room: the user's bytes are spliced, never
//! re-serialized, so a comment, a key order or a `\r\n` survives.

pub(crate) mod marks;
mod provenance;
mod reconcile;
mod render;
mod writeback;

pub use reconcile::{plan, prune_candidates, seen_this_run, Action, MissingNode, Origin, Plan};
pub use render::{file_nodes, FileNode, RenderError};
pub use writeback::{read, write_atomic, Snapshot, WriteError, Written};
