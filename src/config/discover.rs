//! **`[discover]`** — which sources run and how, with the defaults an empty
//! stanza means, and the checks the section passes at load time.
//!
//! ```toml
//! [discover]                 # empty: browse the LAN for rlx-agents over mDNS
//! ssh_hosts = ["node-a"]     # optional: ~/.ssh/config aliases to probe
//! subnet    = "10.0.0.0/24"  # optional: TCP-scan for running workers
//! port      = 9100           # the RLX worker's port, in every written addr
//! agent_port = 6184          # rlx-agent's own port (handshake)
//! hosts_port = 9000          # each rank's port in a written hosts.json
//! ckpt_dir  = "/data/models/GLM-5.3-Flash"
//! dns_sd    = { domain = "rlx.example.org" }  # optional: unicast DNS-SD
//! precision = "f16"         # optional: else the runtime's default, bf16
//! ```

use super::keypath::{Invalid, KeyRef};
use super::values::{DeviceList, DevicePolicy, Precision, Subnet};
use rlx_proto::dnssd::check_server;
use rlx_proto::service::{DEFAULT_AGENT_PORT, DEFAULT_WORKER_PORT};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Default transfer window of a link measurement, each way, ms: the most a
/// transfer runs when its rate never settles (a steady one ends after
/// 40-60 ms). Longer helps only on links whose rate wobbles (Wi-Fi).
pub const DEFAULT_LINK_WINDOW_MS: u64 = 250;

/// Default datagrams each way of the link map's UDP probe (loss and path
/// MTU): 2,000 over 250 ms know a loss of 2% to about ±0.6 points.
pub const DEFAULT_LINK_PROBE_PACKETS: u32 = 2000;

/// Default port each rank of the runtime's process group listens on in a
/// written `hosts.json` (`[discover] hosts_port`). The runtime has no
/// default of its own; 9000 is the port of its own `hosts.json` example
/// (`rlx_distributed::config`), clear of the worker's 9100 and the agent's
/// 6184 on the same box.
pub const DEFAULT_HOSTS_PORT: u16 = 9000;

/// Default per-host TCP connect timeout for scans and handshakes.
pub const DEFAULT_TIMEOUT_MS: u64 = 300;
/// Default time a one-shot mDNS browse listens at most. Agents already
/// running answer within tens of milliseconds on a quiet LAN, and the browse
/// then stops early; the window is for lossy networks, where the slowest
/// answers wait on ARP retries (one second each) and the responders'
/// one-multicast-answer-per-second limit: 3 s covers two of each.
pub(crate) const DEFAULT_BROWSE_MS: u64 = 3000;
/// Default overall deadline for one SSH probe (connect, auth, run the probe).
pub(crate) const DEFAULT_SSH_TIMEOUT_MS: u64 = 10_000;
/// Most addresses in flight at once during a subnet scan
/// (`scan_concurrency` overrides it), each with two connects (the agent's
/// port and the worker's). A /16 at 4096 in flight costs 16 rounds of
/// `timeout_ms` against silent hosts; the open-file soft limit is raised to
/// fit the sockets.
pub const DEFAULT_SCAN_CONCURRENCY: usize = 4096;

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
    /// Worker port: the RLX worker's, which every written `addr` names
    /// (SSH-found nodes, and the port a scan looks for workers on).
    #[serde(default = "default_port")]
    pub port: u16,
    /// The agents' own port, where a scan asks for the handshake (mDNS and
    /// DNS-SD agents announce theirs in TXT).
    #[serde(default = "default_agent_port")]
    pub agent_port: u16,
    /// Checkpoint directory, as it appears on the discovered hosts.
    #[serde(default)]
    pub ckpt_dir: Option<String>,
    /// Force a device instead of picking the best each host reports.
    #[serde(default)]
    pub device: Option<DeviceList>,
    /// How many accelerators a discovered node's `device` names: `best`,
    /// the seed's rule and the only one the runtime can follow (`all` is
    /// read as `best`, with a warning).
    #[serde(default)]
    pub device_policy: DevicePolicy,
    /// Precision for discovered nodes; without it they get the runtime's
    /// default (`bf16`), as a hand-written node without `precision` does.
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
    /// With a `key_file`, also dial announced addresses off the browsed
    /// interfaces' subnets that their announcer does not hold itself (a
    /// routed network between coordinator and agents). Off by default, for
    /// `expand`, `browse`, `watch` and an embedding alike: otherwise anyone
    /// could make the coordinator dial addresses of their choosing
    /// (docs/security.md, "Relays, NATs and port-forwards").
    #[serde(default)]
    pub dial_off_link: bool,
    /// Let a one-shot browse stop before `browse_ms` once the LAN looks
    /// complete (docs/protocol.md, "When a browse stops early"). `false`
    /// listens the whole window: for agents that answer later than
    /// `LATE_ANSWER` (a Wi-Fi power save deeper than three beacons, a box
    /// starved of CPU for longer).
    #[serde(default = "yes")]
    pub early_stop: bool,
    /// Measure the RTT and throughput to every added node (the same as
    /// `--links`): 0.1-0.6 s per node, one node at a time per interface
    /// of this machine (see `docs/protocol.md`, "Link measurement").
    #[serde(default)]
    pub measure_links: bool,
    /// The port every rank listens on in a written `hosts.json` (the
    /// runtime's process group, `src/linkmap/hosts.rs`).
    #[serde(default = "default_hosts_port")]
    pub hosts_port: u16,
    /// Transfer window of a link measurement, each way, milliseconds.
    #[serde(default = "default_link_window_ms")]
    pub link_window_ms: u64,
    /// Datagrams each way of the UDP probe that measures each path's loss
    /// and MTU in the link map (0: no probe).
    #[serde(default = "default_link_probe_packets")]
    pub link_probe_packets: u32,
    /// Shared-secret key file; agents must prove it in the handshake.
    /// Loaded from a cluster file, a relative path is taken from the
    /// cluster file's directory, as `pins_file` is.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// `key_file` came from the `--key-file` flag, not the file: its
    /// errors name the flag. Not a key of the file: set by the caller.
    #[serde(skip)]
    pub key_file_from_flag: bool,
    /// Where node id -> node key pins are kept (`src/pins.rs`). Loaded from
    /// a cluster file it defaults to `<stem>.pins` beside it, and a
    /// relative path is taken from the cluster file's directory; without a
    /// cluster file (`None`) the pins live in memory for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins_file: Option<PathBuf>,
    /// Read the pins file but never write it (`expand --dry-run`, which
    /// changes nothing). Not a key of the file: set by the caller.
    #[serde(skip)]
    pub pins_read_only: bool,
    /// What ssh runs on the remote host.
    #[serde(default = "default_remote_bin")]
    pub remote_bin: String,
    /// Overall deadline for one SSH probe, milliseconds.
    #[serde(default = "default_ssh_timeout_ms")]
    pub ssh_timeout_ms: u64,
    /// An ssh_config file passed to ssh with `-F` (default: the user's own).
    #[serde(default)]
    pub ssh_config: Option<PathBuf>,
    /// Prefer curve25519 key exchange for the probes (the cheapest one
    /// OpenSSH offers, which matters with hundreds of hosts at once; see
    /// BENCHMARKS.md); `false` leaves ssh's own choice.
    #[serde(default = "default_true")]
    pub ssh_fast_kex: bool,
    /// Network interfaces mDNS uses (default: every up, multicast-capable,
    /// non-virtual one).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Most addresses in flight during a subnet scan (two connects each).
    #[serde(default = "default_scan_concurrency")]
    pub scan_concurrency: usize,
    /// Browse `_rlx._tcp.<domain>` on a unicast DNS server too (nodes
    /// beyond the LAN; docs/protocol.md §5).
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
    DEFAULT_WORKER_PORT
}
fn default_agent_port() -> u16 {
    DEFAULT_AGENT_PORT
}
fn default_hosts_port() -> u16 {
    DEFAULT_HOSTS_PORT
}
fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn default_link_window_ms() -> u64 {
    DEFAULT_LINK_WINDOW_MS
}
fn default_link_probe_packets() -> u32 {
    DEFAULT_LINK_PROBE_PACKETS
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
    DEFAULT_SCAN_CONCURRENCY
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

impl DiscoverSection {
    /// The checks `[discover]` passes at load time; the first failure
    /// names its key.
    pub(crate) fn check(&self) -> Result<(), Invalid> {
        let at = |k: &str| KeyRef::at("discover", k);
        if !self.ssh_hosts.is_empty() && self.ckpt_dir.as_deref().unwrap_or("").is_empty() {
            return Err(Invalid(
                at("ssh_hosts"),
                "[discover] ssh_hosts needs `ckpt_dir`: the checkpoint path as it appears \
                 on those hosts (add ckpt_dir = \"/data/models/...\" to [discover])"
                    .into(),
            ));
        }
        if let Some(h) = self
            .ssh_hosts
            .iter()
            .find(|h| h.trim().is_empty() || h.starts_with('-'))
        {
            return Err(Invalid(
                at("ssh_hosts"),
                format!("[discover] ssh_hosts entry {h:?} is not a host name or ssh alias"),
            ));
        }
        if self.port == 0 {
            return Err(Invalid(
                at("port"),
                "[discover] port must be 1-65535".into(),
            ));
        }
        if self.agent_port == 0 {
            return Err(Invalid(
                at("agent_port"),
                "[discover] agent_port must be 1-65535".into(),
            ));
        }
        if self.agent_port == self.port {
            return Err(Invalid(
                at("agent_port"),
                format!(
                    "[discover] agent_port = {} is also `port`, the worker's: the agent and the \
                     RLX worker each need their own port (defaults: port = {DEFAULT_WORKER_PORT}, \
                     agent_port = {DEFAULT_AGENT_PORT})",
                    self.agent_port
                ),
            ));
        }
        if self.hosts_port == 0 {
            return Err(Invalid(
                at("hosts_port"),
                format!("[discover] hosts_port must be 1-65535 (default {DEFAULT_HOSTS_PORT})"),
            ));
        }
        if let Some((key, clash)) = [("port", self.port), ("agent_port", self.agent_port)]
            .into_iter()
            .find(|&(_, p)| p == self.hosts_port)
        {
            return Err(Invalid(
                at("hosts_port"),
                format!(
                    "[discover] hosts_port = {clash} is also `{key}`: a rank of the process \
                     group listens on it on the same box, so give it its own port (default \
                     {DEFAULT_HOSTS_PORT})"
                ),
            ));
        }
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err(Invalid(
                at("timeout_ms"),
                format!(
                    "[discover] timeout_ms = {} is out of range: use 1..=60000 (default {DEFAULT_TIMEOUT_MS})",
                    self.timeout_ms
                ),
            ));
        }
        if !(1..=600_000).contains(&self.browse_ms) {
            return Err(Invalid(
                at("browse_ms"),
                format!(
                    "[discover] browse_ms = {} is out of range: use 1..=600000 (default {DEFAULT_BROWSE_MS})",
                    self.browse_ms
                ),
            ));
        }
        if !(1..=600_000).contains(&self.ssh_timeout_ms) {
            return Err(Invalid(
                at("ssh_timeout_ms"),
                format!(
                    "[discover] ssh_timeout_ms = {} is out of range: use 1..=600000 (default {DEFAULT_SSH_TIMEOUT_MS})",
                    self.ssh_timeout_ms
                ),
            ));
        }
        if !(1..=65_536).contains(&self.scan_concurrency) {
            return Err(Invalid(
                at("scan_concurrency"),
                "[discover] scan_concurrency must be 1..=65536".into(),
            ));
        }
        if self.remote_bin.trim().is_empty() {
            return Err(Invalid(
                at("remote_bin"),
                "[discover] remote_bin is empty".into(),
            ));
        }
        if let Some(c) = &self.cluster {
            if c.is_empty() || c.len() > 63 || c.chars().any(char::is_control) {
                return Err(Invalid(
                    at("cluster"),
                    "[discover] cluster must be 1-63 printable characters".into(),
                ));
            }
        }
        if let Some(dns) = &self.dns_sd {
            dns.check()?;
        }
        let max_window = rlx_proto::handshake::measure::MAX_MS;
        if !(10..=max_window).contains(&self.link_window_ms) {
            return Err(Invalid(
                at("link_window_ms"),
                format!(
                    "[discover] link_window_ms = {} is out of range: use 10..={max_window} (an \
                     agent sends at most {max_window} ms each way; default {DEFAULT_LINK_WINDOW_MS})",
                    self.link_window_ms
                ),
            ));
        }
        let max_probe = rlx_proto::handshake::measure_udp::MAX_UDP_PACKETS;
        if self.link_probe_packets > max_probe {
            return Err(Invalid(
                at("link_probe_packets"),
                format!(
                    "[discover] link_probe_packets = {} is out of range: use 0..={max_probe} (an \
                     agent sends and counts at most {max_probe} datagrams each way; 0 turns the \
                     loss and MTU probe off; default {DEFAULT_LINK_PROBE_PACKETS})",
                    self.link_probe_packets
                ),
            ));
        }
        if self.measure_links && !self.mdns && self.subnet.is_none() && self.dns_sd.is_none() {
            return Err(Invalid(
                at("measure_links"),
                "[discover] measure_links = true measures the links to agents found on the \
                 network, but mdns = false and no subnet or dns_sd finds any (ssh_hosts \
                 are probed, not measured): enable a network source or drop measure_links"
                    .into(),
            ));
        }
        if self.interfaces.iter().any(|i| i.trim().is_empty()) {
            return Err(Invalid(
                at("interfaces"),
                "[discover] interfaces has an empty name".into(),
            ));
        }
        Ok(())
    }
}

impl DiscoverSection {
    /// What the stanza gets past the checks but does not do as written.
    pub(crate) fn warnings(&self) -> Vec<Invalid> {
        let mut out = Vec::new();
        if self.device_policy == DevicePolicy::All {
            out.push(Invalid(
                KeyRef::at("discover", "device_policy"),
                "[discover] device_policy = \"all\" is read as \"best\": it wrote every \
                 accelerator by index (cuda:0,cuda:1), which the RLX runtime refuses (one \
                 device per node, no indices); remove the key"
                    .into(),
            ));
        }
        out
    }
}

impl DnsSdSection {
    /// The checks `dns_sd = { ... }` passes; errors point at `dns_sd`.
    fn check(&self) -> Result<(), Invalid> {
        let at = || KeyRef::at("discover", "dns_sd");
        if let Err(why) = rlx_proto::service::parse_domain(&self.domain) {
            return Err(Invalid(at(), format!("[discover] dns_sd.domain: {why}")));
        }
        if let Some(Err(why)) = self.server.as_deref().map(check_server) {
            return Err(Invalid(at(), format!("[discover] dns_sd.server: {why}")));
        }
        Ok(())
    }
}
