//! **The handshake's fixed values** — its version, the proof's domain tag,
//! and the line bounds both sides enforce.

use crate::caps::limits;

/// The handshake version this build speaks (`"v"` in both messages).
pub const VERSION: u64 = 1;

/// Domain-separation tag at the start of every MAC input, so a proof can
/// never be mistaken for a MAC computed by another protocol under the same
/// key, and a future version can change the input without ambiguity.
pub const PROOF_TAG: &[u8] = b"rlx-handshake-v1";

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
