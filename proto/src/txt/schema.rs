//! **The schema's numbers** — the TXT version and the size limits every
//! encoder and decoder of schema v1 obeys (RFC 6763 §6.1, §6.2).

/// The schema version this build writes and reads (`txtvers`).
pub const TXT_VERSION: &str = "1";

/// RFC 6763 §6.1: each TXT string is preceded by a one-byte length, so it
/// holds at most 255 bytes of `key=value`.
pub const MAX_STRING_BYTES: usize = 255;

/// Largest record [`encode`](super::encode) produces, counting each string's length byte
/// (the TXT RDATA size). 1300 bytes leaves room in a 1500-byte Ethernet frame
/// for the IP/UDP/DNS headers and the PTR, SRV and A records that travel with
/// it; measured: a 1.5 KB TXT went out IP-fragmented, which lossy Wi-Fi drops.
pub const MAX_RECORD_BYTES: usize = 1300;

/// Largest record [`decode`](super::decode) reads. RFC 6762 §17 caps an mDNS packet at 9000
/// bytes, so no real TXT is larger; past this the input is not a record but
/// an attack on the decoder's memory.
pub const MAX_DECODE_BYTES: usize = 9000;

/// First step when device names crowd the record: each name is cut to this
/// many bytes. Enough for "NVIDIA GeForce RTX 4090" and "AMD Radeon PRO
/// W7900"; the handshake carries the full names anyway.
pub const SHORT_NAME_BYTES: usize = 24;

/// The TXT key of the agent's incarnation ([`NodeCaps::incarnation`]): 16
/// lowercase hex characters chosen at random at each start. Additive to
/// schema v1: decoders that predate it ignore it as an unknown key, and a
/// record without it decodes with no incarnation.
///
/// [`NodeCaps::incarnation`]: crate::caps::NodeCaps::incarnation
pub const INCARNATION_KEY: &str = "inc";

/// The TXT key of the agent's own port ([`NodeCaps::agent_port`]): where
/// its handshake, link measurement and health checks are, while the SRV
/// record names the worker's port, the one the runtime dials. Additive to
/// schema v1: a record without it comes from an agent whose one port served
/// both, and its handshake is on the SRV port.
///
/// [`NodeCaps::agent_port`]: crate::caps::NodeCaps::agent_port
pub const AGENT_PORT_KEY: &str = "agent";

/// The TXT key saying whether the node's worker was listening when the
/// agent last looked ([`NodeCaps::worker_listening`]): `1` or `0`. Additive
/// to schema v1; absent means not checked.
///
/// [`NodeCaps::worker_listening`]: crate::caps::NodeCaps::worker_listening
pub const WORKER_KEY: &str = "worker";
