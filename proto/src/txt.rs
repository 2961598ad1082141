//! **TXT schema v1** — how an agent's caps ride in its `_rlx._tcp` DNS-SD TXT
//! record, and how a coordinator reads them back. One encoder, one decoder,
//! tested against each other and against hand-written bytes.
//!
//! ```text
//! txtvers=1  id=5f0c1d2e3a4b5c6d  inc=9a1b2c3d4e5f6071  agent=6184  worker=1
//! ssh=22  os=linux  arch=x86_64  cores=32
//! ram=137438953472  ramfree=120000000000  disk=900000000000
//! ckpt=/data/models  gflops=410.5  io=1800
//! dev0=cuda,25769803776,0,1,0,NVIDIA GeForce RTX 4090  ver=0.1.0
//! ```
//!
//! The full table, and how to announce a node by hand with `avahi-publish`, is
//! in `docs/protocol.md`. The rules this module enforces:
//!
//! - `txtvers=1` comes first (RFC 6763 §6.7); a record without it, or with
//!   another version, is refused.
//! - Each string is at most 255 bytes (RFC 6763 §6.1) and the whole record at
//!   most [`MAX_RECORD_BYTES`], so it fits one Ethernet frame. When it would
//!   not, [`encode`] gives up detail in a fixed order (see [`encode`]).
//! - Keys are case-insensitive and only the first of a repeated key counts
//!   (RFC 6763 §6.4); unknown keys are ignored so newer agents keep working.
//! - A value that does not parse, or that [`NodeCaps::validate`](crate::caps::NodeCaps::validate) finds absurd,
//!   refuses the whole announcement with a [`TxtError`] naming the key. The
//!   caller adds the host name when it reports it.
//!
//! # Layout
//! - `encoding`: [`encode`] and the wire forms of its pairs ([`to_rdata`],
//!   [`to_strings`], [`wire_len`], [`TxtPairs`]).
//! - `decoding`: [`decode`] and its front ends for wire bytes
//!   ([`decode_rdata`], [`split_rdata`]) and for mdns-sd
//!   ([`decode_properties`], [`strings_of`]).
//! - `error`: [`TxtError`], shared by both directions.
//! - `schema`: the keys ([`KEYS`], one constant each: [`CORES_KEY`], ...),
//!   [`TXT_VERSION`] and the size limits. Adding a key is a constant and a
//!   row of [`KEYS`] there, its value in `encoding` and `decoding`, and its
//!   row in `docs/protocol.md`.

mod decoding;
mod encoding;
mod error;
mod schema;
#[cfg(test)]
mod tests;

pub use decoding::{decode, decode_properties, decode_rdata, split_rdata, strings_of};
pub use encoding::{encode, to_rdata, to_strings, wire_len, TxtPairs};
pub use error::TxtError;
// Everything public in `schema`: the keys, the version and the limits, so
// that a new key is exported where it is defined.
pub use schema::*;
