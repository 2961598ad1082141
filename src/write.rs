//! **Back into the user's file** — `expand --write`: the user's text with
//! the found nodes appended, each under its `# found by` comment, and what
//! changed or went missing ([`plan`]). The writer's side only: reading the
//! file's nodes and comments, and the atomic write that never clobbers a
//! concurrent edit, are the ground floor's ([`crate::clusterfile`]).
//!
//! ```no_run
//! use rlx_discover::clusterfile::{read, write_atomic};
//! use rlx_discover::write::plan;
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
//! ClusterConfig{file_nodes} ─► pipeline ─► Expansion ─► reconcile ─► Plan ─► clusterfile::write_atomic
//!      text ─────────────────────────────────────────► render ──┘
//! ```
//!
//! The rule of the whole room: the user's bytes are spliced, never
//! re-serialized, so a comment, a key order or a `\r\n` survives.

mod reconcile;
mod render;

pub use reconcile::{plan, prune_candidates, seen_this_run, Action, MissingNode, Origin, Plan};
pub use render::RenderError;
