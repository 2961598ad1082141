//! **The handshake's fixed values** — its version, the proof's domain tag,
//! and the line bounds both sides enforce.

use crate::caps::limits;

/// The handshake version this build speaks (`"v"` in both messages).
///
/// Version 2 binds the proof to the connection it was made on (the
/// agent's accepted and declared endpoints, and the peer it saw), so that a
/// relay cannot pass a live proof on. An agent still answers a version 1
/// hello in version 1, for coordinators that predate it; a coordinator
/// holding a key refuses a version 1 reply (its proof is not bound).
pub const VERSION: u64 = 2;

/// Domain-separation tag at the start of every version 2 MAC input, so a
/// proof can never be mistaken for a MAC computed by another protocol (or
/// another version of this one) under the same key.
pub const PROOF_TAG: &[u8] = b"rlx-handshake-v2";

/// The tag of the version 1 proof, which covers no endpoint. Still made
/// for version 1 hellos and checked to tell a replay from an old agent.
pub const PROOF_TAG_V1: &[u8] = b"rlx-handshake-v1";

/// Domain-separation tag of the agent's node-key signature of a version 2
/// reply (`"node_sig"`): the same fields as the proof, under another tag,
/// so neither can pass for the other.
pub const NODE_SIG_TAG: &[u8] = b"rlx-node-sig-v2";

/// The tag of the node-key signature of a version 1 reply (no endpoints).
pub const NODE_SIG_TAG_V1: &[u8] = b"rlx-node-sig-v1";

/// Most endpoints an agent declares with `--advertise`. A handful covers
/// every port-forward in front of one machine; the bound keeps a reply's
/// endpoint list (and its MAC input) small.
pub const MAX_ADVERTISED: usize = 16;

/// Bytes of randomness in a nonce. 32 bytes (256 bits) make a repeat, and so
/// a successful replay, practically impossible across every coordinator
/// that will ever run.
pub const NONCE_BYTES: usize = 32;

/// Longest hello line an agent reads, newline included. A hello is about 100
/// bytes; 1 KiB leaves room for fields a later version may add while keeping
/// a garbage sender from costing the agent more than that.
pub const MAX_HELLO_BYTES: usize = 1024;

/// Longest reply line a client reads, newline included: the largest caps
/// JSON ([`limits::MAX_JSON_BYTES`]) plus room for the envelope.
pub const MAX_REPLY_BYTES: usize = limits::MAX_JSON_BYTES + 1024;
