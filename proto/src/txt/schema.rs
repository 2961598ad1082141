//! **The schema's keys and numbers** — every TXT key of schema v1, the
//! version, and the size limits every encoder and decoder of schema v1 obeys
//! (RFC 6763 §6.1, §6.2).
//!
//! Each key's name is one constant here, and [`KEYS`] lists them with the
//! caps field each carries: the encoder, the decoder and the error messages
//! use these, never the strings. `docs/protocol.md` ("TXT schema v1") is the
//! table of their values. The unicast DNS-SD records add one key of their
//! own, the lease's [`EXPIRES_KEY`](crate::service::EXPIRES_KEY), which
//! schema v1 readers ignore as unknown.

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

/// `txtvers`: the schema version, [`TXT_VERSION`]. Always present and
/// always first (RFC 6763 §6.7): a record without it is not schema v1.
pub const TXTVERS_KEY: &str = "txtvers";

/// `id`: the node's identity ([`NodeCaps::id`]), 16 lowercase hex
/// characters, stable across restarts.
///
/// [`NodeCaps::id`]: crate::caps::NodeCaps::id
pub const ID_KEY: &str = "id";

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

/// The TXT key naming what holds the worker port when it is not an RLX
/// worker ([`NodeCaps::worker_held_by`]): `wheld=node_exporter (HTTP)`,
/// beside `worker=0`. Additive to schema v1: an older coordinator reads
/// `worker=0` alone (the worker is not up, which is true). Nine bytes or
/// fewer, as RFC 6763 §6.4 asks of keys.
///
/// [`NodeCaps::worker_held_by`]: crate::caps::NodeCaps::worker_held_by
pub const WORKER_HELD_KEY: &str = "wheld";

/// The TXT key saying whether an SSH server listened on the node when the
/// agent last looked, and on which port ([`NodeCaps::ssh_listening`],
/// [`NodeCaps::ssh_port`]): the port in decimal, or `0` when none did (the
/// RLX runtime probes and launches workers over ssh). Additive to schema
/// v1; absent means not checked.
///
/// [`NodeCaps::ssh_listening`]: crate::caps::NodeCaps::ssh_listening
/// [`NodeCaps::ssh_port`]: crate::caps::NodeCaps::ssh_port
pub const SSH_KEY: &str = "ssh";

/// `cluster`: the cluster name the agent was given ([`NodeCaps::cluster`]);
/// absent when it was given none. A filter, not security (docs/security.md,
/// "What `cluster` is for").
///
/// [`NodeCaps::cluster`]: crate::caps::NodeCaps::cluster
pub const CLUSTER_KEY: &str = "cluster";

/// `os`: the operating system, as Rust names it (`linux`, `macos`).
pub const OS_KEY: &str = "os";

/// `arch`: the CPU architecture, as Rust names it (`x86_64`, `aarch64`).
pub const ARCH_KEY: &str = "arch";

/// `cores`: the logical CPU count (`0` or absent: unknown).
pub const CORES_KEY: &str = "cores";

/// `ram`: total RAM in bytes ([`NodeCaps::ram_total`]).
///
/// [`NodeCaps::ram_total`]: crate::caps::NodeCaps::ram_total
pub const RAM_KEY: &str = "ram";

/// `ramfree`: available RAM in bytes ([`NodeCaps::ram_avail`]).
///
/// [`NodeCaps::ram_avail`]: crate::caps::NodeCaps::ram_avail
pub const RAM_FREE_KEY: &str = "ramfree";

/// `disk`: bytes free under the checkpoint directory
/// ([`NodeCaps::disk_free`]).
///
/// [`NodeCaps::disk_free`]: crate::caps::NodeCaps::disk_free
pub const DISK_KEY: &str = "disk";

/// `ckpt`: the checkpoint directory on that host ([`NodeCaps::ckpt_dir`]);
/// the first detail [`encode`](super::encode) gives up when the record
/// would not fit.
///
/// [`NodeCaps::ckpt_dir`]: crate::caps::NodeCaps::ckpt_dir
pub const CKPT_KEY: &str = "ckpt";

/// `gflops`: the measured CPU GFLOP/s (`0`: unknown).
pub const GFLOPS_KEY: &str = "gflops";

/// `io`: the checkpoint read rate in MB/s ([`NodeCaps::io_mbps`]; `0`:
/// unknown).
///
/// [`NodeCaps::io_mbps`]: crate::caps::NodeCaps::io_mbps
pub const IO_KEY: &str = "io";

/// `ver`: the agent's version ([`NodeCaps::version`]).
///
/// [`NodeCaps::version`]: crate::caps::NodeCaps::version
pub const AGENT_VERSION_KEY: &str = "ver";

/// What the device keys start with: device `N` of the record is
/// `devN` ([`device_key`]), `N` in decimal without leading zeros and below
/// [`MAX_DEVICES`](crate::caps::limits::MAX_DEVICES). Its value is
/// `<label>,<mem_bytes>,<unified>,<available>,<gflops>,<name>`.
pub const DEVICE_KEY_PREFIX: &str = "dev";

/// How an error names the device keys as a group, when no one `devN` is at
/// fault (too many devices).
pub const DEVICE_KEYS: &str = "devN";

/// The key of device `n`: `dev0`, `dev1`, ...
pub fn device_key(n: usize) -> String {
    format!("{DEVICE_KEY_PREFIX}{n}")
}

/// One TXT key of schema v1 other than the device keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxtKey {
    /// The key on the wire, lowercase (readers compare keys
    /// case-insensitively, RFC 6763 §6.4).
    pub name: &'static str,
    /// The [`NodeCaps`](crate::caps::NodeCaps) field it carries, by its
    /// JSON name, so that a caps validation error names the key it came
    /// from; `None` for [`TXTVERS_KEY`].
    pub field: Option<&'static str>,
}

const fn key(name: &'static str, field: &'static str) -> TxtKey {
    TxtKey {
        name,
        field: Some(field),
    }
}

/// Every key of schema v1 but the device keys, in the order
/// [`encode`](super::encode) writes them; the device keys go between
/// [`IO_KEY`] and [`AGENT_VERSION_KEY`]. A key not listed here (and not a
/// device key) is unknown to this build, and readers skip it.
pub const KEYS: [TxtKey; 18] = [
    TxtKey {
        name: TXTVERS_KEY,
        field: None,
    },
    key(ID_KEY, "id"),
    key(INCARNATION_KEY, "incarnation"),
    key(AGENT_PORT_KEY, "agent_port"),
    key(WORKER_KEY, "worker_listening"),
    key(WORKER_HELD_KEY, "worker_held_by"),
    key(SSH_KEY, "ssh_port"),
    key(CLUSTER_KEY, "cluster"),
    key(OS_KEY, "os"),
    key(ARCH_KEY, "arch"),
    key(CORES_KEY, "cores"),
    key(RAM_KEY, "ram_total"),
    key(RAM_FREE_KEY, "ram_avail"),
    key(DISK_KEY, "disk_free"),
    key(CKPT_KEY, "ckpt_dir"),
    key(GFLOPS_KEY, "gflops"),
    key(IO_KEY, "io_mbps"),
    key(AGENT_VERSION_KEY, "version"),
];

/// Whether `name` (lowercased) is a key of schema v1: one of [`KEYS`] or a
/// device key.
pub(super) fn is_key(name: &str) -> bool {
    KEYS.iter().any(|k| k.name == name) || device_index(name).is_some()
}

/// `N` of a device key `devN`: decimal without leading zeros, below
/// [`MAX_DEVICES`](crate::caps::limits::MAX_DEVICES). Anything else
/// (`dev64`, `dev01`, `devx`) is not a device key.
pub(super) fn device_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix(DEVICE_KEY_PREFIX)?;
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    let n: usize = digits.parse().ok()?;
    (n < crate::caps::limits::MAX_DEVICES).then_some(n)
}
