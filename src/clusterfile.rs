//! **The cluster file itself, the ground floor** — what the user's file
//! says about its `[[node]]` tables beyond their keys (where each is, the
//! `# found by` comment that marks the ones rlx-discover appended, the node
//! id that recognises a machine that moved), and the one way to write the
//! file back (atomic, never over a concurrent edit).
//!
//! ```text
//!             text ─► nodes (FileNode: index, line, spans, found_by, id)
//!                       └─ provenance (the comment block above a header)
//! new text ─► writeback (Snapshot ─► write_atomic)
//! ```
//!
//! It depends on nothing else in the crate, so every room may use it:
//! [`crate::config`] reads the nodes once, when the file is loaded, and
//! carries them ([`crate::ClusterConfig::file_nodes`]); the pipeline's
//! identity rule reads their ids from there; [`crate::write`] splices the
//! text with their spans; [`crate::pins`] writes its pins file with the
//! same atomic write.

mod nodes;
pub(crate) mod provenance;
mod writeback;

pub use nodes::{file_nodes, FileNode, NodesError};
pub use writeback::{read, write_atomic, Snapshot, WriteError, Written};
