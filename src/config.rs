//! **The cluster file** — `cluster.toml`'s `[discover]` stanza and its
//! `[[node]]` list, loaded with errors that point at the line to fix.
//!
//! ```toml
//! [discover]                 # empty: browse the LAN for rlx-agents over mDNS
//! ssh_hosts = ["node-a"]     # optional: ~/.ssh/config aliases to probe
//! subnet    = "10.0.0.0/24"  # optional: TCP-scan for running workers
//! ckpt_dir  = "/data/models/GLM-5.3-Flash"
//!
//! [[node]]                   # hand-written nodes are kept as they are
//! addr     = "10.0.0.9:9100"
//! ckpt_dir = "/data/models/GLM-5.3-Flash"
//! device   = "cuda"
//! ```
//!
//! The file belongs to the user, so a mistake in it must never become a panic
//! or a silently ignored key: unknown keys in `[discover]` and `[[node]]` are
//! errors that name the key, and every error carries the file and line. Other
//! top-level tables belong to the RLX runtime and are left alone.

use rlx_proto::caps::Device;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Default worker port, as in the seed.
pub use rlx_proto::service::DEFAULT_PORT;
/// Default per-host TCP connect timeout for scans and handshakes.
pub const DEFAULT_TIMEOUT_MS: u64 = 300;
/// Default time a one-shot mDNS browse listens at most. Agents already
/// running answer within tens of milliseconds on a quiet LAN, and the browse
/// then stops early; the window is for lossy networks, where the slowest
/// answers wait on ARP retries (one second each) and the responders'
/// one-multicast-answer-per-second limit: 3 s covers two of each.
pub const DEFAULT_BROWSE_MS: u64 = 3000;
/// Default overall deadline for one SSH probe (connect, auth, run the probe).
pub const DEFAULT_SSH_TIMEOUT_MS: u64 = 10_000;
/// The largest subnet accepted: a /16 (65,534 hosts). With the concurrent
/// scan a /16 costs about 16 timeouts; anything larger is a typo for a
/// smaller network and would take minutes of SYNs across someone's LAN.
pub const MAX_SUBNET_PREFIX: u8 = 16;

// ---------------------------------------------------------------------------
// Value types
// ---------------------------------------------------------------------------

/// One or more devices a node runs on: `"cuda"`, `"cuda:0,cuda:1"`, `"cpu"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DeviceList(Vec<DeviceSpec>);

/// One device: a kind and an optional index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The kind.
    pub kind: Device,
    /// Which one of that kind, when the node has several.
    pub index: Option<u32>,
}

impl DeviceList {
    /// A list of one device of `kind`.
    pub fn single(kind: Device) -> Self {
        DeviceList(vec![DeviceSpec { kind, index: None }])
    }

    /// The canonical string form (`"cuda:0,cuda:1"`).
    pub fn as_str(&self) -> String {
        self.0
            .iter()
            .map(|d| match d.index {
                Some(i) => format!("{}:{i}", d.kind),
                None => d.kind.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The devices in the list.
    pub fn specs(&self) -> &[DeviceSpec] {
        &self.0
    }

    /// The kinds named in the list.
    pub fn kinds(&self) -> impl Iterator<Item = Device> + '_ {
        self.0.iter().map(|d| d.kind)
    }
}

impl Default for DeviceList {
    fn default() -> Self {
        DeviceList::single(Device::Cpu)
    }
}

impl FromStr for DeviceList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty entry in device list `{s}`"));
            }
            let (kind, index) = match part.split_once(':') {
                Some((k, i)) => (
                    k,
                    Some(i.parse::<u32>().map_err(|_| {
                        format!("device index in `{part}` must be a number, e.g. cuda:0")
                    })?),
                ),
                None => (part, None),
            };
            out.push(DeviceSpec {
                kind: kind.parse()?,
                index,
            });
        }
        Ok(DeviceList(out))
    }
}

impl TryFrom<String> for DeviceList {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<DeviceList> for String {
    fn from(d: DeviceList) -> String {
        d.as_str()
    }
}

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// Numeric precision a node computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Precision {
    /// 32-bit float: runs everywhere, the safe default for a node whose
    /// hardware nobody has checked.
    #[default]
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit integer weights.
    Int8,
}

impl Precision {
    /// Wire label.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Precision::F32),
            "f16" | "fp16" => Ok(Precision::F16),
            "bf16" => Ok(Precision::Bf16),
            "int8" | "i8" => Ok(Precision::Int8),
            _ => Err(format!(
                "unknown precision `{s}` (expected f32, f16, bf16 or int8)"
            )),
        }
    }
}

impl TryFrom<String> for Precision {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Precision> for String {
    fn from(p: Precision) -> String {
        p.as_str().to_string()
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// KV-cache settings of a node; all optional, the runtime picks defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvCache {
    /// Precision of cached keys/values (defaults to the node's precision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// Upper bound on cached tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl KvCache {
    /// True when nothing is set (so it is left out of written configs).
    pub fn is_default(&self) -> bool {
        *self == KvCache::default()
    }
}

/// What a node does in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Runs a stage.
    #[default]
    Worker,
    /// Idles until the node named by `standby_for` fails.
    Standby,
}

impl Role {
    /// True for the default role (left out of written configs).
    pub fn is_default(&self) -> bool {
        *self == Role::Worker
    }
}

/// A CIDR block to scan, validated at load time so the error carries a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Subnet(pub ipnet::Ipv4Net);

impl FromStr for Subnet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let net: ipnet::Ipv4Net = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an IPv4 CIDR block; write it like 10.0.0.0/24"))?;
        if net.prefix_len() < MAX_SUBNET_PREFIX {
            return Err(format!(
                "`{s}` has {} addresses; the largest subnet scanned is a /{MAX_SUBNET_PREFIX} \
                 ({} hosts): split it, or list the /{MAX_SUBNET_PREFIX}s your workers are on",
                1u64 << (32 - net.prefix_len()),
                (1u64 << (32 - MAX_SUBNET_PREFIX)) - 2
            ));
        }
        Ok(Subnet(net.trunc()))
    }
}

impl TryFrom<String> for Subnet {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Subnet> for String {
    fn from(s: Subnet) -> String {
        s.0.to_string()
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// ---------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------

/// One `[[node]]`: everything the runtime needs to reach and use a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// What the runtime dials: `IP:port`, `[v6]:port` or `alias:port`.
    pub addr: String,
    /// SSH alias used to start the worker, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// Checkpoint directory on that host.
    #[serde(default)]
    pub ckpt_dir: String,
    /// Device(s) the node runs on.
    #[serde(default)]
    pub device: DeviceList,
    /// Compute precision.
    #[serde(default)]
    pub precision: Precision,
    /// KV-cache settings.
    #[serde(default, skip_serializing_if = "KvCache::is_default")]
    pub kv_cache: KvCache,
    /// Fixed RNG seed for reproducible sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng_seed: Option<u64>,
    /// Cap on host RAM the worker may use, GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ram_gb: Option<f64>,
    /// Pinned layer range `[first, last_exclusive]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<[u32; 2]>,
    /// Worker or standby.
    #[serde(default, skip_serializing_if = "Role::is_default")]
    pub role: Role,
    /// For a standby: the `addr` of the node it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_for: Option<String>,
}

impl NodeConfig {
    /// A node with defaults for everything but the address.
    pub fn new(addr: impl Into<String>) -> Self {
        NodeConfig {
            addr: addr.into(),
            ssh: None,
            ckpt_dir: String::new(),
            device: DeviceList::default(),
            precision: Precision::default(),
            kv_cache: KvCache::default(),
            rng_seed: None,
            max_ram_gb: None,
            layers: None,
            role: Role::default(),
            standby_for: None,
        }
    }
}

/// The `[discover]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverSection {
    /// SSH aliases/hosts to probe (real hardware info, trusted by SSH).
    #[serde(default)]
    pub ssh_hosts: Vec<String>,
    /// CIDR to TCP-scan for already-running workers.
    #[serde(default)]
    pub subnet: Option<Subnet>,
    /// Worker port (SSH-found nodes and the scan).
    #[serde(default = "default_port")]
    pub port: u16,
    /// Checkpoint directory, as it appears on the discovered hosts.
    #[serde(default)]
    pub ckpt_dir: Option<String>,
    /// Force a device instead of picking the best each host reports.
    #[serde(default)]
    pub device: Option<DeviceList>,
    /// Precision for discovered nodes.
    #[serde(default)]
    pub precision: Option<Precision>,
    /// Per-host TCP connect (and handshake) timeout, milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Browse mDNS. Defaults to true: an empty `[discover]` means "find
    /// everything on the LAN".
    #[serde(default = "yes")]
    pub mdns: bool,
    /// How long a one-shot browse listens, milliseconds.
    #[serde(default = "default_browse_ms")]
    pub browse_ms: u64,
    /// Admit only agents announcing this cluster name (a filter, not security).
    #[serde(default)]
    pub cluster: Option<String>,
    /// Shared-secret key file; agents must prove it in the handshake.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// What ssh runs on the remote host.
    #[serde(default = "default_remote_bin")]
    pub remote_bin: String,
    /// Overall deadline for one SSH probe, milliseconds.
    #[serde(default = "default_ssh_timeout_ms")]
    pub ssh_timeout_ms: u64,
    /// An ssh_config file passed to ssh with `-F` (default: the user's own).
    #[serde(default)]
    pub ssh_config: Option<PathBuf>,
    /// Prefer curve25519 key exchange for the probes
    /// ([`crate::sources::ssh::FAST_KEX`]: saves about 90 ms of CPU per
    /// host); `false` leaves ssh's own choice.
    #[serde(default = "default_true")]
    pub ssh_fast_kex: bool,
    /// Network interfaces mDNS uses (default: every up, multicast-capable,
    /// non-virtual one).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Most TCP connects in flight during a subnet scan.
    #[serde(default = "default_scan_concurrency")]
    pub scan_concurrency: usize,
    /// Browse `_rlx._tcp.<domain>` on a unicast DNS server too (nodes
    /// beyond the LAN; [`crate::sources::dns`]).
    #[serde(default)]
    pub dns_sd: Option<DnsSdSection>,
}

/// `dns_sd = { domain = "rlx.example.org", server = "10.0.0.53:53" }`: where
/// agents register (`rlx-agent --register dns://SERVER/ZONE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsSdSection {
    /// The domain holding `_rlx._tcp` (the agents' `--register` zone).
    pub domain: String,
    /// `HOST`, `HOST:PORT` or `[IPv6]:PORT`; default: the first
    /// `nameserver` of `/etc/resolv.conf`.
    #[serde(default)]
    pub server: Option<String>,
    /// Ask for the whole zone first (one query, when the server allows this
    /// host to transfer it), falling back to per-instance queries.
    #[serde(default)]
    pub zone_transfer: bool,
}

fn default_port() -> u16 {
    DEFAULT_PORT
}
fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn default_browse_ms() -> u64 {
    DEFAULT_BROWSE_MS
}
fn default_ssh_timeout_ms() -> u64 {
    DEFAULT_SSH_TIMEOUT_MS
}
fn default_true() -> bool {
    true
}
fn default_remote_bin() -> String {
    "rlx-agent".into()
}
fn default_scan_concurrency() -> usize {
    crate::sources::subnet::DEFAULT_SCAN_CONCURRENCY
}
fn yes() -> bool {
    true
}

impl Default for DiscoverSection {
    fn default() -> Self {
        // An empty table deserializes to exactly the defaults above.
        toml::from_str("").expect("defaults")
    }
}

/// The parts of `cluster.toml` this tool reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct RawFile {
    #[serde(default)]
    discover: Option<DiscoverSection>,
    #[serde(default)]
    node: Vec<NodeConfig>,
}

/// A loaded cluster file.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Where it was read from (for messages and write-back).
    pub path: PathBuf,
    /// The file's text as read.
    pub text: String,
    /// The `[discover]` stanza, if present.
    pub discover: Option<DiscoverSection>,
    /// The hand-written nodes, in file order.
    pub nodes: Vec<NodeConfig>,
}

/// A problem in a config file: where it is and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
    /// The offending source line, for display.
    pub snippet: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.message)?,
            None => write!(f, "{}: {}", self.path.display(), self.message)?,
        }
        if let (Some(l), Some(s)) = (self.line, &self.snippet) {
            write!(f, "\n  {l:>4} | {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn line_text(text: &str, line: usize) -> Option<String> {
    text.lines().nth(line - 1).map(|s| s.trim_end().to_string())
}

impl ClusterConfig {
    /// Reads and validates a cluster file.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the cluster file: {e}"),
            snippet: None,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates cluster-file text; `path` is used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<ClusterConfig, ConfigError> {
        let err_at = |offset: Option<usize>, message: String| {
            let line = offset.map(|o| line_of(text, o));
            ConfigError {
                path: path.to_path_buf(),
                line,
                snippet: line.and_then(|l| line_text(text, l)),
                message,
            }
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let start = e.span().map(|s| s.start);
            err_at(start, describe_toml_error(text, &e))
        })?;
        let cfg = ClusterConfig {
            path: path.to_path_buf(),
            text: text.to_string(),
            discover: raw.discover,
            nodes: raw.node,
        };
        cfg.check()
            .map_err(|(key_path, message)| err_at(span_of(text, &key_path), message))?;
        Ok(cfg)
    }

    /// Checks that need more than one key; returns the key path to point at.
    fn check(&self) -> Result<(), (Vec<KeyRef>, String)> {
        use KeyRef::{Idx, Key};
        if let Some(d) = &self.discover {
            let at = |k: &str| vec![Key("discover".into()), Key(k.into())];
            if !d.ssh_hosts.is_empty() && d.ckpt_dir.as_deref().unwrap_or("").is_empty() {
                return Err((
                    at("ssh_hosts"),
                    "[discover] ssh_hosts needs `ckpt_dir`: the checkpoint path as it appears \
                     on those hosts (add ckpt_dir = \"/data/models/...\" to [discover])"
                        .into(),
                ));
            }
            if let Some(h) = d
                .ssh_hosts
                .iter()
                .find(|h| h.trim().is_empty() || h.starts_with('-'))
            {
                return Err((
                    at("ssh_hosts"),
                    format!("[discover] ssh_hosts entry {h:?} is not a host name or ssh alias"),
                ));
            }
            if d.port == 0 {
                return Err((at("port"), "[discover] port must be 1-65535".into()));
            }
            if !(1..=60_000).contains(&d.timeout_ms) {
                return Err((
                    at("timeout_ms"),
                    format!(
                        "[discover] timeout_ms = {} is out of range: use 1..=60000 (default {DEFAULT_TIMEOUT_MS})",
                        d.timeout_ms
                    ),
                ));
            }
            if !(1..=600_000).contains(&d.browse_ms) {
                return Err((
                    at("browse_ms"),
                    format!(
                        "[discover] browse_ms = {} is out of range: use 1..=600000 (default {DEFAULT_BROWSE_MS})",
                        d.browse_ms
                    ),
                ));
            }
            if !(1..=600_000).contains(&d.ssh_timeout_ms) {
                return Err((
                    at("ssh_timeout_ms"),
                    format!(
                        "[discover] ssh_timeout_ms = {} is out of range: use 1..=600000 (default {DEFAULT_SSH_TIMEOUT_MS})",
                        d.ssh_timeout_ms
                    ),
                ));
            }
            if !(1..=65_536).contains(&d.scan_concurrency) {
                return Err((
                    at("scan_concurrency"),
                    "[discover] scan_concurrency must be 1..=65536".into(),
                ));
            }
            if d.remote_bin.trim().is_empty() {
                return Err((at("remote_bin"), "[discover] remote_bin is empty".into()));
            }
            if let Some(c) = &d.cluster {
                if c.is_empty() || c.len() > 63 || c.chars().any(char::is_control) {
                    return Err((
                        at("cluster"),
                        "[discover] cluster must be 1-63 printable characters".into(),
                    ));
                }
            }
            if let Some(dns) = &d.dns_sd {
                if let Err(why) = rlx_proto::service::parse_domain(&dns.domain) {
                    return Err((at("dns_sd"), format!("[discover] dns_sd.domain: {why}")));
                }
                if let Some(Err(why)) = dns.server.as_deref().map(rlx_proto::dnssd::check_server) {
                    return Err((at("dns_sd"), format!("[discover] dns_sd.server: {why}")));
                }
            }
            if d.interfaces.iter().any(|i| i.trim().is_empty()) {
                return Err((
                    at("interfaces"),
                    "[discover] interfaces has an empty name".into(),
                ));
            }
        }
        let mut seen = std::collections::HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let at = |k: &str| vec![Key("node".into()), Idx(i), Key(k.into())];
            if let Err(why) = check_addr(&n.addr) {
                return Err((at("addr"), format!("[[node]] #{}: addr {why}", i + 1)));
            }
            if let Some(j) = seen.insert(n.addr.clone(), i) {
                return Err((
                    at("addr"),
                    format!(
                        "[[node]] #{} has the same addr {:?} as [[node]] #{}: each node needs its own address",
                        i + 1,
                        n.addr,
                        j + 1
                    ),
                ));
            }
            if let Some([a, b]) = n.layers {
                if a >= b {
                    return Err((
                        at("layers"),
                        format!("[[node]] #{}: layers = [{a}, {b}] is empty; write [first, last_exclusive]", i + 1),
                    ));
                }
            }
            if let Some(g) = n.max_ram_gb {
                if !g.is_finite() || g <= 0.0 {
                    return Err((
                        at("max_ram_gb"),
                        format!(
                            "[[node]] #{}: max_ram_gb must be a positive number of GB",
                            i + 1
                        ),
                    ));
                }
            }
            match (n.role, &n.standby_for) {
                (Role::Standby, None) => {
                    return Err((
                        at("role"),
                        format!(
                            "[[node]] #{}: role = \"standby\" needs standby_for = \"<addr of the node it replaces>\"",
                            i + 1
                        ),
                    ))
                }
                (Role::Worker, Some(_)) => {
                    return Err((
                        at("standby_for"),
                        format!("[[node]] #{}: standby_for is only meaningful with role = \"standby\"", i + 1),
                    ))
                }
                _ => {}
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(target) = &n.standby_for {
                if target == &n.addr || !self.nodes.iter().any(|m| &m.addr == target) {
                    return Err((
                        vec![Key("node".into()), Idx(i), Key("standby_for".into())],
                        format!(
                            "[[node]] #{}: standby_for = {target:?} does not name another [[node]] addr",
                            i + 1
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Validates a node address: `host:port` or `[v6]:port`.
pub fn check_addr(addr: &str) -> Result<(), String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!(
            "{addr:?} needs a port, e.g. \"{addr}:{DEFAULT_PORT}\""
        ));
    };
    if host.is_empty() {
        return Err(format!("{addr:?} has no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("{addr:?}: write IPv6 addresses as \"[addr]:port\""));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{addr:?} has an invalid port `{port}` (1-65535)")),
    }
}

/// A step in a key path, for finding a span in the document.
#[derive(Debug, Clone)]
enum KeyRef {
    Key(String),
    Idx(usize),
}

/// Byte offset of the key at `path` in `text`, for line numbers. Falls back
/// to the nearest enclosing table when the key itself is absent.
fn span_of(text: &str, path: &[KeyRef]) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut table: &toml_edit::Table = doc.as_table();
    let mut best = None;
    let mut steps = path.iter().peekable();
    while let Some(step) = steps.next() {
        let KeyRef::Key(k) = step else { return best };
        let Some((key, value)) = table.get_key_value(k) else {
            return best;
        };
        best = key.span().map(|s| s.start).or(best);
        match (value, steps.peek()) {
            (toml_edit::Item::ArrayOfTables(a), Some(KeyRef::Idx(i))) => {
                steps.next();
                let Some(t) = a.get(*i) else { return best };
                best = t.span().map(|s| s.start).or(best);
                table = t;
            }
            (toml_edit::Item::Table(t), _) => table = t,
            _ => return best,
        }
    }
    best
}

/// Turns a toml/serde error into a message that names the key and says what
/// to do, keeping toml's own description of the problem.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    if msg.starts_with("unknown field") {
        // "unknown field `devcie`, expected one of `addr`, ..."
        return format!("{msg}: remove the key or fix its spelling");
    }
    let Some(span) = e.span() else { return msg };
    let start = span.start.min(text.len());
    // The key is whatever precedes `=` on the line where the bad value starts.
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..start];
    match before.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => {
            let key = key.trim();
            let hint = if msg.contains("expected u16")
                || msg.contains("expected u64")
                || msg.contains("expected u32")
            {
                " (write a whole number without quotes)"
            } else if msg.contains("expected a boolean") {
                " (write true or false)"
            } else {
                ""
            };
            format!("`{key}`: {msg}{hint}")
        }
        _ => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
        ClusterConfig::parse(Path::new("cluster.toml"), text)
    }

    #[test]
    fn an_empty_discover_stanza_means_browse_with_defaults() {
        let c = parse("[discover]\n").unwrap();
        let d = c.discover.unwrap();
        assert!(d.mdns);
        assert_eq!(d.port, DEFAULT_PORT);
        assert_eq!(d.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(d.remote_bin, "rlx-agent");
    }

    #[test]
    fn dns_sd_is_an_inline_table_checked_with_its_line() {
        let c =
            parse("[discover]\ndns_sd = { domain = \"lab.test\", server = \"10.0.0.53:5300\" }\n")
                .unwrap();
        let dns = c.discover.unwrap().dns_sd.unwrap();
        assert_eq!(
            (dns.domain.as_str(), dns.server.as_deref()),
            ("lab.test", Some("10.0.0.53:5300"))
        );
        let e = parse("[discover]\nmdns = false\ndns_sd = { domain = \"a..b\" }\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("dns_sd.domain"), "{e}");
        let e = parse("[discover]\ndns_sd = { domain = \"lab.test\", server = \"ns:0\" }\n")
            .unwrap_err();
        assert!(
            e.message.contains("dns_sd.server") && e.message.contains("port"),
            "{e}"
        );
        let e = parse("[discover]\ndns_sd = { domian = \"lab.test\" }\n").unwrap_err();
        assert!(e.message.contains("unknown field `domian`"), "{e}");
    }

    #[test]
    fn device_lists_round_trip_through_their_string_form() {
        let d: DeviceList = "cuda:0, cuda:1".parse().unwrap();
        assert_eq!(d.as_str(), "cuda:0,cuda:1");
        assert!("cuda:x".parse::<DeviceList>().is_err());
        assert!("".parse::<DeviceList>().is_err());
    }

    #[test]
    fn a_hand_written_node_keeps_every_seed_field() {
        let c = parse(
            r#"
[[node]]
addr = "a:9100"
ssh = "a"
ckpt_dir = "/pinned"
device = "cuda:0,cuda:1"
precision = "f16"
kv_cache = { precision = "int8", max_tokens = 8192 }
rng_seed = 7
max_ram_gb = 40.0
layers = [0, 24]

[[node]]
addr = "b:9100"
role = "standby"
standby_for = "a:9100"
"#,
        )
        .unwrap();
        let n = &c.nodes[0];
        assert_eq!(n.device.as_str(), "cuda:0,cuda:1");
        assert_eq!(n.kv_cache.max_tokens, Some(8192));
        assert_eq!(n.layers, Some([0, 24]));
        assert_eq!(c.nodes[1].role, Role::Standby);
    }
}
