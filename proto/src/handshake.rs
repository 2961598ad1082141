//! **The handshake on the agent's port** — one definition of the two messages,
//! the proof, and the client, shared by `rlx-agent` and every coordinator
//! source.
//!
//! ```text
//! coordinator -> agent   {"rlx":"hello","v":2,"nonce":"<64 hex: 32 random bytes>"}\n
//! agent -> coordinator   {"rlx":"caps","v":2,"nonce":"<echo>","caps":{...},
//!                         "local":"10.0.0.2:9100","peer":"10.0.0.1:40312",
//!                         "advertised":["198.51.100.7:9100"],"proof":"<64 hex>",
//!                         "node_sig":"<base64>","time_ms":1796130990123}\n
//! ```
//!
//! One line each way, then the agent closes (unless the hello says
//! `"follow":true`: the connection then stays open as a liveness stream,
//! [`follow`]). The hello may also carry the coordinator's `"cluster"`
//! name: an agent started with another `--cluster` then answers with an
//! error line naming its own cluster instead of its caps (a filter against
//! mix-ups between neighbouring clusters, not security: anyone can claim
//! any name). `local` is where the agent accepted the
//! connection, `peer` where it came from, `advertised` the endpoints its
//! operator declared with `--advertise` (absent when none). `proof` is
//! present only when the agent has a cluster key:
//!
//! ```text
//! proof = HMAC-SHA256(key, "rlx-handshake-v2" || nonce (32 raw bytes)
//!                          || u32be(len id)    || id
//!                          || u32be(len caps)  || caps JSON bytes exactly as sent
//!                          || u32be(len local) || local || u32be(len peer) || peer
//!                          || u32be(count advertised) || (u32be(len a) || a)...)
//! ```
//!
//! A coordinator holding a key admits a reply only if the proof binds the
//! connection it made: `local` is the address it dialled (or the dialled
//! address is in `advertised`, a declared port-forward) and `peer` its own
//! end of the connection. A relay's connection to the agent has other ends,
//! so its proof is refused as [`HandshakeError::Relayed`]. A version 1
//! hello still gets the version 1 reply (no endpoints, tag
//! `"rlx-handshake-v1"`, the fields up to caps) for coordinators that
//! predate the binding; a coordinator of this version holding a key refuses
//! it ([`HandshakeError::Unbound`]).
//!
//! An agent with its own node key ([`crate::identity`]) puts the public
//! half in its caps (`node_key`) and signs the same fields as the proof,
//! under the tag `"rlx-node-sig-v2"`, with it (`node_sig`, base64), with or
//! without a cluster key: a coordinator that pinned the key for the node id
//! can tell this machine from another member that claims its id. Both
//! fields are additive: older coordinators ignore them, and a reply without
//! them (an older agent) is checked as before ([`HandshakeReply::node_key`]
//! is then `None`).
//!
//! The verifier MACs the caps bytes and endpoint strings it received (a
//! [`RawValue`](serde_json::value::RawValue)), never a re-serialization, so
//! the two ends cannot disagree about formatting; it compares the endpoints
//! as parsed addresses. The
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
//! - `measure`, `measure_client`: link measurement on the same port (its own
//!   message type: RTT, upload, download; [`measure_link`]).
//! - [`measure_peer`]: one agent measures its link to another (the
//!   all-pairs link map), under the cluster key at both ends.
//! - `measure_sense`: the limits measured figures must fall within to
//!   count (a rate's shortest window, 1 Tbit/s, a round trip's bounds).
//! - [`measure_udp`]: the measurement's UDP probe, loss and path MTU each
//!   way (tagged datagrams, a don't-fragment ladder).
//! - `follow`: the liveness stream on the same port (the hello with
//!   `"follow":true`, then the agent's pulses; [`follow_in_cluster`]).
//! - `clock`: the agent's clock offset, read off a reply's `"time_ms"`
//!   ([`ClockOffset`]; `rlx-discover doctor` shows it).
//! - `client`: the coordinator's side ([`query`], [`check_reply`]) and why a
//!   node was not admitted ([`HandshakeError`]).

mod answer;
#[cfg(test)]
mod binding_tests;
mod client;
mod clock;
pub mod follow;
mod follow_polled;
pub mod measure;
mod measure_client;
pub mod measure_peer;
pub mod measure_sense;
#[cfg(test)]
mod measure_tests;
pub mod measure_udp;
mod messages;
#[cfg(test)]
mod node_sig_tests;
pub mod path_check;
mod proof;
#[cfg(test)]
mod tests;
mod wire;

pub use answer::{answer, answer_signed};
pub use client::{
    check_reply, query, query_in_cluster, ConnectFailure, HandshakeError, HandshakeReply,
    RelayedPath,
};
pub use clock::ClockOffset;
pub use follow::{
    bye_line, follow_in_cluster, is_ping, pace_of, ping_line, ping_line_pacing, ping_pace,
    pulse_line, pulse_line_paced, Follower, Heard, FOLLOWER_IDLE, MAX_FOLLOWERS, MAX_FOLLOW_LINE,
    MAX_PULSE_INTERVAL, PING_INTERVAL, PULSE_INTERVAL,
};
pub use follow_polled::{Polled, Visit};
pub use measure_client::{
    measure_link, mtu_hint, rate_text, LinkMeasurement, MeasureError, DRAIN_GRACE,
};
pub use messages::{
    endpoint_text, follow_hello_line, hello_line, hello_line_for, parse_hello, reply_line,
    reply_line_signed, reply_line_v1, reply_line_v1_signed, Binding, Hello, HelloError,
};
pub use proof::{node_message, node_sign, node_verify, prove, verify, verify_any, BoundTo, Nonce};
pub use wire::{
    MAX_ADVERTISED, MAX_HELLO_BYTES, MAX_REPLY_BYTES, NODE_SIG_TAG, NODE_SIG_TAG_V1, NONCE_BYTES,
    PROOF_TAG, PROOF_TAG_V1, VERSION,
};
