//! **The handshake on the agent's port** — one definition of the two messages,
//! the proof, and the client, shared by `rlx-agent` and every coordinator
//! source.
//!
//! ```text
//! coordinator -> agent   {"rlx":"hello","v":1,"nonce":"<64 hex: 32 random bytes>"}\n
//! agent -> coordinator   {"rlx":"caps","v":1,"nonce":"<echo>","caps":{...},"proof":"<64 hex>"}\n
//! ```
//!
//! One line each way, then the agent closes. The hello may also carry the
//! coordinator's `"cluster"` name: an agent started with another `--cluster`
//! then answers with an error line naming its own cluster instead of its caps
//! (a filter against mix-ups between neighbouring clusters, not security:
//! anyone can claim any name). `proof` is present only when the agent has a
//! cluster key:
//!
//! ```text
//! proof = HMAC-SHA256(key, "rlx-handshake-v1" || nonce (32 raw bytes)
//!                          || u32be(len id)   || id
//!                          || u32be(len caps) || caps JSON bytes exactly as sent)
//! ```
//!
//! The verifier MACs the caps bytes it received (a [`RawValue`](serde_json::value::RawValue)), never a
//! re-serialization, so the two ends cannot disagree about formatting. The
//! agent echoes the nonce it proved: a reply replayed from an earlier
//! handshake carries the old nonce, verifies under it, and is reported as
//! [`HandshakeError::Replay`] rather than as a wrong key. `docs/protocol.md`
//! shows the exchange with a shell and a Python script.
//!
//! The client ([`query`]) holds one deadline for the whole exchange: a peer
//! that is slow, silent or endless cannot keep it past `timeout`, and the
//! reply is read only up to [`MAX_REPLY_BYTES`].
//!
//! # Layout
//! - `messages`: the hello, the reply and the error line, built and parsed.
//! - `proof`: the [`Nonce`] and the HMAC over it ([`prove`], [`verify`]).
//! - `answer`: the agent's side, one hello line in, one line out ([`answer`]).
//! - `client`: the coordinator's side ([`query`], [`check_reply`]) and why a
//!   node was not admitted ([`HandshakeError`]).

mod answer;
mod client;
mod messages;
mod proof;
#[cfg(test)]
mod tests;
mod wire;

pub use answer::answer;
pub use client::{
    check_reply, query, query_in_cluster, ConnectFailure, HandshakeError, HandshakeReply,
};
pub use messages::{hello_line, hello_line_for, parse_hello, reply_line, Hello, HelloError};
pub use proof::{prove, verify, verify_any, Nonce};
pub use wire::{MAX_HELLO_BYTES, MAX_REPLY_BYTES, NONCE_BYTES, PROOF_TAG, VERSION};
