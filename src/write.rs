//! **Back into the user's file** — `expand --write`: the user's text with
//! the found nodes appended ([`render`]), what changed or went missing
//! ([`reconcile`]), the atomic write that never clobbers a concurrent edit
//! ([`writeback`]), and the `# found by` comments read back ([`provenance`],
//! [`marks`]) so that a machine that moved is recognised.
//!
//! ```text
//! ClusterConfig ─► marks ─► pipeline ─► Expansion ─► reconcile ─► Plan ─► writeback
//!      text ───────────────────────────────────────► render ──┘
//! ```
//!
//! The rule of the whole room: the user's bytes are spliced, never
//! re-serialized, so a comment, a key order or a `\r\n` survives.

pub mod marks;
pub mod provenance;
pub mod reconcile;
pub mod render;
pub mod writeback;
