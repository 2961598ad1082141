//! **What a machine has** — the capabilities model and its JSON, the one
//! contract shared by `rlx-agent --probe`, the SSH source, the TCP handshake
//! and (through [`crate::txt`]) the mDNS announcement.
//!
//! ```json
//! {"id":"5f0c1d2e3a4b5c6d","hostname":"gpu-a","os":"linux","arch":"x86_64",
//!  "cores":32,"ram_total":137438953472,"ram_avail":120000000000,
//!  "disk_free":900000000000,"gflops":410.5,"io_mbps":1800.0,
//!  "devices":[{"device":"cuda","name":"NVIDIA RTX 4090","mem_bytes":25769803776,
//!              "unified":false,"gflops":0.0,"available":true}]}
//! ```
//!
//! There is one serde type and one parser ([`NodeCaps::from_json`]): the agent
//! prints with it, every coordinator source reads with it, so the two ends
//! cannot drift. Parsing is also where a stranger's numbers meet our planner,
//! so [`NodeCaps::validate`] rejects absurd values (10^18 bytes of RAM, a
//! million cores, NaN GFLOP/s) with a reason that names the field, rather than
//! letting a bogus node attract the biggest shard of a model.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A device kind this build of rlx knows how to plan for.
///
/// The label strings (`"cuda"`, `"metal"`...) are the wire form: they appear in
/// the caps JSON, in TXT `devN` values and in `device = "..."` in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// The host CPU: always present, the floor of every selection.
    Cpu,
    /// NVIDIA GPUs through CUDA.
    Cuda,
    /// AMD GPUs through ROCm/HIP.
    Rocm,
    /// Any GPU through Vulkan compute.
    Vulkan,
    /// Apple GPUs through Metal (unified memory).
    Metal,
    /// Apple Neural Engine: reported, never chosen for a pipeline stage.
    Ane,
}

impl Device {
    /// Every kind, in the order used for help texts and `--targets` defaults.
    pub const ALL: [Device; 6] = [
        Device::Cpu,
        Device::Cuda,
        Device::Rocm,
        Device::Vulkan,
        Device::Metal,
        Device::Ane,
    ];

    /// The wire label of this kind.
    pub fn label(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Rocm => "rocm",
            Device::Vulkan => "vulkan",
            Device::Metal => "metal",
            Device::Ane => "ane",
        }
    }

    /// True for kinds that can run a pipeline stage other than on the host CPU.
    pub fn is_accelerator(self) -> bool {
        !matches!(self, Device::Cpu | Device::Ane)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl FromStr for Device {
    type Err = String;

    /// Parses a label, accepting an optional `:N` index suffix (`cuda:1`) and
    /// ignoring ASCII case, because probes on other platforms print both.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let base = s.split_once(':').map_or(s, |(b, _)| b).trim();
        Device::ALL
            .into_iter()
            .find(|d| d.label().eq_ignore_ascii_case(base))
            .ok_or_else(|| {
                format!(
                    "unknown device `{s}` (known: {})",
                    Device::ALL.map(Device::label).join(", ")
                )
            })
    }
}

/// One device a node reported.
///
/// `device` stays a free string rather than a [`Device`]: a node running a
/// newer rlx can name a device this coordinator has never heard of, and that
/// must be reported (see `rlx_discover::select`), not lost in deserialization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Wire label: `cuda`, `rocm`, `vulkan`, `metal`, `ane`, `cpu`, or anything
    /// else the node's probe saw and could not name.
    pub device: String,
    /// Human name (`NVIDIA GeForce RTX 4090`).
    #[serde(default)]
    pub name: String,
    /// Device memory in bytes; 0 for unified devices (they share host RAM) and
    /// for devices whose memory the probe could not read.
    #[serde(default)]
    pub mem_bytes: u64,
    /// Shares host RAM (Apple Silicon, integrated GPUs).
    #[serde(default)]
    pub unified: bool,
    /// Measured or rated GFLOP/s; 0 = unknown.
    #[serde(default)]
    pub gflops: f64,
    /// Whether the node's own rlx build can target this device.
    #[serde(default = "yes")]
    pub available: bool,
    // The fields below are details for placement (docs/json.md,
    // "Capabilities"). Each is left out of the JSON when unknown, so an
    // agent that cannot read one sends what an older agent sent, and an
    // older coordinator, which ignores fields it does not know, reads the
    // rest unchanged.
    /// Free device memory in bytes when probed (NVML's `free`, amdgpu's
    /// total minus `mem_info_vram_used`); 0 = unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_free: u64,
    /// PCI address (`0000:18:00.0`), when the device is a PCI function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// The PCIe link as negotiated when probed (it can train down from what
    /// the slot allows, and idle GPUs drop their generation to save power).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<PcieLink>,
    /// NVIDIA: CUDA compute capability (`9.0` for an H100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<String>,
    /// NVIDIA: the kernel driver's version (`550.54.15`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// NVIDIA: the newest CUDA version the driver supports (`12.4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// AMD: the LLVM gfx target ROCm compiles for (`gfx1100`, `gfx942`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gfx: Option<String>,
    /// NVIDIA: whether Multi-Instance GPU mode is on. When it is, CUDA sees
    /// MIG instances, not the whole GPU, so `mem_bytes` is not one process's
    /// to use. `None`: the GPU has no MIG (or NVML would not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<bool>,
    /// How this GPU reaches each other GPU of its kind on the node (NVML's
    /// topology; what `nvidia-smi topo -m` prints). Empty: unknown, or the
    /// only one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerLink>,
}

fn yes() -> bool {
    true
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Default for DeviceInfo {
    /// An unnamed, available device with nothing known: for building one
    /// field by field (`DeviceInfo { device: "cuda".into(), ..Default::default() }`).
    fn default() -> Self {
        DeviceInfo {
            device: String::new(),
            name: String::new(),
            mem_bytes: 0,
            unified: false,
            gflops: 0.0,
            available: true,
            mem_free: 0,
            pci: None,
            pcie: None,
            compute: None,
            driver: None,
            cuda: None,
            gfx: None,
            mig: None,
            peers: Vec::new(),
        }
    }
}

/// A negotiated PCIe link: `{"gen": 4, "width": 16}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// PCIe generation (1 = 2.5 GT/s ... 6 = 64 GT/s); 0 = unknown.
    #[serde(default)]
    pub gen: u8,
    /// Lanes (`x16` is 16); 0 = unknown.
    #[serde(default)]
    pub width: u8,
}

/// How one GPU reaches another: `{"peer": 1, "path": "nvlink", "nvlinks": 18}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLink {
    /// The other GPU's index among this node's devices of the same kind
    /// (`1` is `cuda:1`).
    pub peer: u32,
    /// The closest path between the two, in `nvidia-smi topo -m` terms:
    /// `nvlink`; `internal` (one board, e.g. a K80); `pix` (one PCIe
    /// switch); `pxb` (several switches, no host bridge); `phb` (one host
    /// bridge); `node` (one NUMA node); `sys` (across sockets). Kept a
    /// string so that a newer agent's path is shown, not refused.
    pub path: String,
    /// Active NVLinks between the two (0 unless `path` is `nvlink`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub nvlinks: u32,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// One network interface the agent announces on:
/// `{"name":"eth0","kind":"ethernet","speed_mbps":10000,"mtu":9000,"addrs":["10.0.0.5"],"rdma":false}`.
///
/// The coordinator keys these by address (`addrs`) to learn the link behind
/// the address it chose for a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// Kernel name (`eth0`, `en0`).
    pub name: String,
    /// `ethernet`, `wifi`, `thunderbolt`, `infiniband`, `virtual`, or
    /// `unknown`. RoCE-capable Ethernet is `ethernet` with `rdma` true.
    /// A string, so a newer agent's kind is shown rather than refused.
    pub kind: String,
    /// Negotiated speed in Mbit/s, when the system knows it (Wi-Fi and
    /// virtual links usually do not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    /// MTU in bytes; 0 = unknown.
    #[serde(default)]
    pub mtu: u32,
    /// The interface's addresses.
    #[serde(default)]
    pub addrs: Vec<std::net::IpAddr>,
    /// An RDMA device (InfiniBand, RoCE, iWARP) is bound to this interface.
    #[serde(default)]
    pub rdma: bool,
}

impl DeviceInfo {
    /// The kind, if this build recognises the label.
    pub fn parsed(&self) -> Option<Device> {
        self.device.parse().ok()
    }

    /// The kind, folding anything unrecognised into [`Device::Cpu`].
    ///
    /// Lossy on purpose for callers that only need "is this an accelerator I
    /// can use"; selection uses [`DeviceInfo::parsed`] so that an unknown label
    /// is reported instead of silently planned as a CPU.
    pub fn kind(&self) -> Device {
        self.parsed().unwrap_or(Device::Cpu)
    }

    /// Whether this build recognises the label.
    pub fn is_recognized(&self) -> bool {
        self.parsed().is_some()
    }
}

/// Everything a node says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeCaps {
    /// Stable node identity: 16 lowercase hex characters. Empty when the
    /// source could not learn one (an old agent, a hand-made caps file).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// This run of the agent: 16 lowercase hex characters (64 random bits)
    /// chosen at each start. A coordinator that sees it change knows the
    /// worker restarted (and lost its state) even when nothing else did:
    /// same id, address and records, a restart faster than any health
    /// check. `None` from agents that predate it (TXT key `inc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The agent's own public key (base64 of the 32 bytes of an Ed25519
    /// key, [`crate::identity`]): its handshake replies are signed with the
    /// secret half, and a coordinator pins it for the node id on first
    /// sight. `None` from agents that predate it (and in TXT, which never
    /// carries it: only a handshake proves possession).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_key: Option<String>,
    /// The node's host name (without `.local`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// Where the node says it can be dialled, if it knows (`host:port`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub addr: String,
    /// `linux`, `macos`, ...
    #[serde(default)]
    pub os: String,
    /// `x86_64`, `aarch64`, ...
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arch: String,
    /// Agent version that produced these caps.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Cluster name the agent was started with (a filter, not security).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Checkpoint directory on that host, if the agent was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ckpt_dir: Option<String>,
    /// Logical CPU count; 0 = unknown (a TXT record without `cores`).
    #[serde(default)]
    pub cores: u32,
    /// Bytes of RAM.
    pub ram_total: u64,
    /// Bytes of RAM available when probed.
    #[serde(default)]
    pub ram_avail: u64,
    /// Bytes free under the checkpoint directory.
    #[serde(default)]
    pub disk_free: u64,
    /// Every device the probe saw, accelerators and CPU alike.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// Measured CPU GFLOP/s; 0 = not measured.
    #[serde(default)]
    pub gflops: f64,
    /// Checkpoint read MB/s; 0 = unknown (empty dir, or not measured).
    #[serde(default)]
    pub io_mbps: f64,
    /// The interfaces the agent announces on, with what the system knows of
    /// each link. Empty: an older agent, or caps from a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkInfo>,
    /// The port of this node's RLX worker, the one the runtime dials (and
    /// the SRV record's). `None` from agents that predate the split of the
    /// two ports (their one port served both) and from TXT, where the SRV
    /// record carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_port: Option<u16>,
    /// Whether something listened on [`NodeCaps::worker_port`] when the
    /// agent last looked (at each re-probe and each handshake). `None`:
    /// not checked (an older agent, caps from a file). A worker that is not
    /// running is a fact, not an error: the runtime may start it over ssh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_listening: Option<bool>,
    /// What holds the worker port when something other than an RLX worker
    /// listens there, as the agent named it by the subnet scan's rules
    /// (`rlx_net::identify`): `node_exporter (HTTP)`. Given only with
    /// `worker_listening` false: node_exporter's default port is the
    /// worker's 9100, and "something listens" must not read as "the worker
    /// is up". `None`: nothing else holds it, or not checked (an older
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_held_by: Option<String>,
    /// The port of this node's agent (handshake, link measurement, health
    /// checks), when it is not the worker's. `None` from older agents, whose
    /// handshake is on the SRV port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_port: Option<u16>,
    /// Whether an SSH server listened on this box when the agent last looked
    /// (at start and each re-probe): the runtime probes and launches workers
    /// over ssh. `None`: not checked (an older agent, TXT without `ssh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_listening: Option<bool>,
    /// The port of that SSH server (its greeting began `SSH-`): given
    /// exactly when `ssh_listening` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_port: Option<u16>,
}

/// Upper bounds on what a node may claim. Anything beyond is a bug or a lie,
/// and planning around it would hand a stranger the largest model shard.
pub mod limits {
    /// Logical cores: the largest single-image machines have a few thousand.
    pub const MAX_CORES: u32 = 16_384;
    /// RAM and device memory: 1 PiB. The biggest shared-memory systems sold
    /// have tens of TiB; 10^18 bytes is a lie.
    pub const MAX_MEM_BYTES: u64 = 1 << 50;
    /// Free disk: 64 PiB, far above any single mount a worker reads from.
    pub const MAX_DISK_BYTES: u64 = 1 << 56;
    /// GFLOP/s of one device or CPU: 10 PFLOP/s, well above any chip.
    pub const MAX_GFLOPS: f64 = 1.0e7;
    /// MB/s of checkpoint reads: 1 TB/s.
    pub const MAX_IO_MBPS: f64 = 1.0e6;
    /// Link speed in Mbit/s: 10 Tbit/s, ten times the fastest Ethernet.
    pub const MAX_LINK_MBPS: u64 = 10_000_000;
    /// MTU: the largest an IPv6 jumbogram-free link carries is 65535 bytes
    /// (Linux's `lo` reports 65536).
    pub const MAX_MTU: u32 = 65_536;
    /// Interfaces per node, and addresses per interface.
    pub const MAX_LINKS: usize = 64;
    /// PCIe generation (6 is current) and lanes (x32 is the widest defined).
    pub const MAX_PCIE_GEN: u8 = 16;
    /// See [`MAX_PCIE_GEN`].
    pub const MAX_PCIE_WIDTH: u8 = 32;
    /// Devices per node: 8-GPU boxes plus CPU, ANE and Vulkan views fit well
    /// under this; a stranger's 10,000-device record does not.
    pub const MAX_DEVICES: usize = 64;
    /// Any string field (RFC 6763 §6.1 caps a TXT string at 255 bytes).
    pub const MAX_STRING: usize = 255;
    /// Caps JSON as it arrives from a probe or a handshake.
    pub const MAX_JSON_BYTES: usize = 64 * 1024;
}

/// Why a set of caps was refused. Names the field so a user can find the
/// agent or caps file that produced it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CapsError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("not caps JSON: {0}")]
    Syntax(String),
    /// A field whose value cannot be true.
    #[error("`{field}` = {value} is not plausible: {why}")]
    Absurd {
        /// Field path, e.g. `devices[2].mem_bytes`.
        field: String,
        /// The value as received.
        value: String,
        /// What the limit is.
        why: String,
    },
}

fn absurd(field: impl Into<String>, value: impl fmt::Display, why: impl Into<String>) -> CapsError {
    CapsError::Absurd {
        field: field.into(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// Checks that `id` is a node identity: 16 lowercase hex characters.
pub fn is_valid_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl NodeCaps {
    /// Parses and validates caps JSON (the `--probe` output, the handshake
    /// reply body). Input larger than [`limits::MAX_JSON_BYTES`] is refused
    /// before parsing.
    pub fn from_json(text: &str) -> Result<NodeCaps, CapsError> {
        if text.len() > limits::MAX_JSON_BYTES {
            return Err(CapsError::Syntax(format!(
                "{} bytes is larger than the {} byte limit for caps",
                text.len(),
                limits::MAX_JSON_BYTES
            )));
        }
        let caps: NodeCaps =
            serde_json::from_str(text.trim()).map_err(|e| CapsError::Syntax(e.to_string()))?;
        caps.validate()?;
        Ok(caps)
    }

    /// Serializes to the one-line JSON form printed by `rlx-agent --probe`.
    pub fn to_json(&self) -> String {
        // Serialization of plain data with no maps keyed by non-strings
        // cannot fail; NaN would, but validated caps never hold one.
        serde_json::to_string(self).expect("caps serialize")
    }

    /// Rejects values that cannot be true of a real machine.
    pub fn validate(&self) -> Result<(), CapsError> {
        use limits::*;
        if !self.id.is_empty() && !is_valid_id(&self.id) {
            return Err(absurd(
                "id",
                format!("{:?}", trunc(&self.id)),
                "a node id is 16 lowercase hex characters",
            ));
        }
        if let Some(inc) = &self.incarnation {
            if !is_valid_id(inc) {
                return Err(absurd(
                    "incarnation",
                    format!("{:?}", trunc(inc)),
                    "an incarnation is 16 lowercase hex characters (64 random bits)",
                ));
            }
        }
        if let Some(k) = &self.node_key {
            if crate::identity::NodePublicKey::parse(k).is_none() {
                return Err(absurd(
                    "node_key",
                    format!("{:?}", trunc(k)),
                    "a node key is the base64 of a 32-byte Ed25519 public key",
                ));
            }
        }
        for (field, v) in [
            ("hostname", &self.hostname),
            ("addr", &self.addr),
            ("os", &self.os),
            ("arch", &self.arch),
            ("version", &self.version),
        ] {
            check_string(field, v)?;
        }
        if let Some(c) = &self.cluster {
            check_string("cluster", c)?;
        }
        if let Some(h) = &self.worker_held_by {
            check_string("worker_held_by", h)?;
        }
        if let Some(c) = &self.ckpt_dir {
            if c.len() > 4096 || c.contains('\0') {
                return Err(absurd("ckpt_dir", trunc(c), "paths are at most 4096 bytes"));
            }
        }
        if self.cores > MAX_CORES {
            return Err(absurd(
                "cores",
                self.cores,
                format!("expected at most {MAX_CORES} logical cores (0 = unknown)"),
            ));
        }
        check_mem("ram_total", self.ram_total)?;
        check_mem("ram_avail", self.ram_avail)?;
        if self.ram_avail > self.ram_total {
            return Err(absurd(
                "ram_avail",
                self.ram_avail,
                format!("more than ram_total ({})", self.ram_total),
            ));
        }
        if self.disk_free > MAX_DISK_BYTES {
            return Err(absurd(
                "disk_free",
                self.disk_free,
                format!("more than {MAX_DISK_BYTES} bytes"),
            ));
        }
        check_float("gflops", self.gflops, MAX_GFLOPS)?;
        check_float("io_mbps", self.io_mbps, MAX_IO_MBPS)?;
        if self.devices.len() > MAX_DEVICES {
            return Err(absurd(
                "devices",
                format!("{} entries", self.devices.len()),
                format!("at most {MAX_DEVICES} devices per node"),
            ));
        }
        for (i, d) in self.devices.iter().enumerate() {
            if d.device.is_empty() {
                return Err(absurd(
                    format!("devices[{i}].device"),
                    "\"\"",
                    "a device needs a label",
                ));
            }
            check_string(&format!("devices[{i}].device"), &d.device)?;
            check_string(&format!("devices[{i}].name"), &d.name)?;
            check_mem(&format!("devices[{i}].mem_bytes"), d.mem_bytes)?;
            check_float(&format!("devices[{i}].gflops"), d.gflops, MAX_GFLOPS)?;
            d.validate_details(i)?;
        }
        if self.links.len() > MAX_LINKS {
            return Err(absurd(
                "links",
                format!("{} entries", self.links.len()),
                format!("at most {MAX_LINKS} interfaces per node"),
            ));
        }
        for (i, l) in self.links.iter().enumerate() {
            l.validate(i)?;
        }
        for (field, port) in [
            ("worker_port", self.worker_port),
            ("agent_port", self.agent_port),
            ("ssh_port", self.ssh_port),
        ] {
            if port == Some(0) {
                return Err(absurd(field, 0, "a port is 1-65535"));
            }
        }
        if self.ssh_port.is_some() != (self.ssh_listening == Some(true)) {
            return Err(absurd(
                "ssh_port",
                self.ssh_port.map_or("absent".into(), |p| p.to_string()),
                "an SSH port is given exactly when `ssh_listening` is true",
            ));
        }
        if self.worker_port.is_some() && self.worker_port == self.agent_port {
            return Err(absurd(
                "agent_port",
                self.agent_port.unwrap_or_default(),
                "the agent and the worker cannot share one port",
            ));
        }
        Ok(())
    }

    /// Memory of the largest accelerator (unified ones count as host RAM),
    /// for reports; 0 when the node has none.
    pub fn accelerator_mem(&self) -> u64 {
        self.devices
            .iter()
            .filter(|d| d.parsed().is_some_and(Device::is_accelerator))
            .map(|d| {
                if d.unified && d.mem_bytes == 0 {
                    self.ram_total
                } else {
                    d.mem_bytes
                }
            })
            .max()
            .unwrap_or(0)
    }
}

impl DeviceInfo {
    /// Checks the placement details of `devices[i]`.
    fn validate_details(&self, i: usize) -> Result<(), CapsError> {
        use limits::*;
        check_mem(&format!("devices[{i}].mem_free"), self.mem_free)?;
        if self.mem_free > self.mem_bytes && self.mem_bytes > 0 {
            return Err(absurd(
                format!("devices[{i}].mem_free"),
                self.mem_free,
                format!("more than mem_bytes ({})", self.mem_bytes),
            ));
        }
        for (key, v) in [
            ("pci", &self.pci),
            ("compute", &self.compute),
            ("driver", &self.driver),
            ("cuda", &self.cuda),
            ("gfx", &self.gfx),
        ] {
            if let Some(v) = v {
                check_string(&format!("devices[{i}].{key}"), v)?;
            }
        }
        if let Some(p) = self.pcie {
            if p.gen > MAX_PCIE_GEN || p.width > MAX_PCIE_WIDTH {
                return Err(absurd(
                    format!("devices[{i}].pcie"),
                    format!("gen {} x{}", p.gen, p.width),
                    format!("expected gen <= {MAX_PCIE_GEN}, width <= {MAX_PCIE_WIDTH}"),
                ));
            }
        }
        if self.peers.len() > MAX_DEVICES {
            return Err(absurd(
                format!("devices[{i}].peers"),
                format!("{} entries", self.peers.len()),
                format!("at most {MAX_DEVICES} peers"),
            ));
        }
        for (j, p) in self.peers.iter().enumerate() {
            check_string(&format!("devices[{i}].peers[{j}].path"), &p.path)?;
            if p.peer as usize >= MAX_DEVICES || p.nvlinks > 1024 {
                return Err(absurd(
                    format!("devices[{i}].peers[{j}]"),
                    format!("peer {} over {} NVLinks", p.peer, p.nvlinks),
                    format!("expected a peer index below {MAX_DEVICES} and at most 1024 links"),
                ));
            }
        }
        Ok(())
    }
}

impl LinkInfo {
    /// Checks `links[i]`.
    fn validate(&self, i: usize) -> Result<(), CapsError> {
        use limits::*;
        check_string(&format!("links[{i}].name"), &self.name)?;
        check_string(&format!("links[{i}].kind"), &self.kind)?;
        if let Some(s) = self.speed_mbps.filter(|s| *s > MAX_LINK_MBPS) {
            return Err(absurd(
                format!("links[{i}].speed_mbps"),
                s,
                format!("more than {MAX_LINK_MBPS} Mbit/s"),
            ));
        }
        if self.mtu > MAX_MTU {
            return Err(absurd(
                format!("links[{i}].mtu"),
                self.mtu,
                format!("more than {MAX_MTU} bytes"),
            ));
        }
        if self.addrs.len() > MAX_LINKS {
            return Err(absurd(
                format!("links[{i}].addrs"),
                format!("{} entries", self.addrs.len()),
                format!("at most {MAX_LINKS} addresses per interface"),
            ));
        }
        Ok(())
    }

    /// The speed as people say it: `10 GbE`, `1 GbE`, `100 Mb Ethernet`,
    /// `Wi-Fi`, `InfiniBand 200 Gb/s`; `None` when nothing is known.
    ///
    /// Built from the numbers, the known kinds and fixed words only: no
    /// string the agent sent (its `name`, an unknown `kind`) reaches the
    /// text, so it is safe to print as it is.
    pub fn describe(&self) -> Option<String> {
        let speed = self.speed_mbps.map(|m| {
            if m >= 1000 && m % 1000 == 0 {
                format!("{} Gb", m / 1000)
            } else if m >= 1000 {
                format!("{:.1} Gb", m as f64 / 1000.0)
            } else {
                format!("{m} Mb")
            }
        });
        let rdma = if self.rdma { " RDMA" } else { "" };
        Some(match (self.kind.as_str(), speed) {
            ("ethernet", Some(s)) if s.ends_with("Gb") => format!("{s}E{rdma}"),
            ("ethernet", Some(s)) => format!("{s} Ethernet{rdma}"),
            ("ethernet", None) if self.rdma => "Ethernet RDMA".to_string(),
            ("ethernet", None) => return None,
            ("wifi", Some(s)) => format!("Wi-Fi {s}/s"),
            ("wifi", None) => "Wi-Fi".to_string(),
            ("thunderbolt", Some(s)) => format!("Thunderbolt {s}/s"),
            ("thunderbolt", None) => "Thunderbolt".to_string(),
            ("infiniband", Some(s)) => format!("InfiniBand {s}/s"),
            ("infiniband", None) => "InfiniBand".to_string(),
            (_, Some(s)) => format!("{s}/s"),
            (_, None) => return None,
        })
    }
}

impl NodeCaps {
    /// The link facts of the interface holding `ip`, when the agent sent
    /// them.
    pub fn link_for(&self, ip: &std::net::IpAddr) -> Option<&LinkInfo> {
        self.links.iter().find(|l| l.addrs.contains(ip))
    }
}

fn trunc(s: &str) -> String {
    let mut end = s.len().min(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if end < s.len() {
        format!("{}…", &s[..end])
    } else {
        s.to_string()
    }
}

fn check_string(field: &str, v: &str) -> Result<(), CapsError> {
    if v.len() > limits::MAX_STRING {
        return Err(absurd(
            field,
            format!("{:?} ({} bytes)", trunc(v), v.len()),
            format!("strings are at most {} bytes", limits::MAX_STRING),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(absurd(
            field,
            format!("{:?}", trunc(v)),
            "control characters are not allowed",
        ));
    }
    Ok(())
}

fn check_mem(field: &str, v: u64) -> Result<(), CapsError> {
    if v > limits::MAX_MEM_BYTES {
        return Err(absurd(
            field,
            v,
            format!("more than {} bytes (1 PiB)", limits::MAX_MEM_BYTES),
        ));
    }
    Ok(())
}

fn check_float(field: &str, v: f64, max: f64) -> Result<(), CapsError> {
    if !v.is_finite() || !(0.0..=max).contains(&v) {
        return Err(absurd(
            field,
            v,
            format!("expected a finite number in 0..={max}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
