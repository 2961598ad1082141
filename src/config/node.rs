//! **`[[node]]`** — one machine of the cluster as the RLX runtime reaches
//! and uses it (its `NodeConfig`, field by field), and what a hand-written
//! node list is warned about at load time.
//!
//! ```toml
//! [[node]]
//! addr     = "10.0.0.9:9100"
//! ckpt_dir = "/data/models/GLM-5.3-Flash"
//! device   = "cuda"
//! ```

use super::keypath::{Invalid, KeyRef};
use super::values::{DeviceList, Precision};
use crate::addr::NodeAddr;
use serde::{Deserialize, Serialize};

/// Where a node keeps the attention KV cache across decode steps: the
/// runtime's `KvPolicy`, `kv_cache = "none" | "host" | "device"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvPolicy {
    /// No persistent cache (the runtime's default).
    #[default]
    None,
    /// In host RAM.
    Host,
    /// On the compute device.
    Device,
}

/// What a node is doing: the runtime's `NodeRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Carries a stage (the runtime's default).
    #[default]
    Active,
    /// Loaded with the same layers as `standby_for` (or the largest stage),
    /// serving nothing until promoted.
    Standby,
    /// On its way out of the plan.
    Draining,
}

impl Role {
    /// The label written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Standby => "standby",
            Role::Draining => "draining",
        }
    }
}

/// One `[[node]]`: the runtime's `NodeConfig`, field by field, with its
/// types and defaults. Keys the runtime does not know are not refused (the
/// runtime ignores them); the loader warns about them instead, naming the
/// nearest known key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// What the runtime dials (and the worker binds): `IP:port`,
    /// `[v6]:port` or `host:port`.
    pub addr: String,
    /// How the runtime reaches the box to probe it, launch its worker and
    /// sync weights: an ssh alias, a host or an `ssh://host:port` URI.
    /// `None` means the coordinator's own box.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// Checkpoint directory on that host (required by the runtime).
    pub ckpt_dir: String,
    /// Device(s) the node runs on, primary first (default `cpu`).
    #[serde(default)]
    pub device: DeviceList,
    /// Compute precision (default `bf16`).
    #[serde(default)]
    pub precision: Precision,
    /// Where the KV cache lives (default `none`).
    #[serde(default)]
    pub kv_cache: KvPolicy,
    /// Per-node RNG seed, overriding the global one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng_seed: Option<u64>,
    /// Cap on this node's stage RAM, GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ram_gb: Option<f64>,
    /// Manual layer range `"a:b"` (with `[placement] policy = "manual"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<String>,
    /// Active, standby or draining (default `active`).
    #[serde(default)]
    pub role: Role,
    /// For a standby: the `addr` of the active node it mirrors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_for: Option<String>,
}

/// Every key of `[[node]]` the runtime reads, for the unknown-key warning.
pub(crate) const NODE_KEYS: &[&str] = &[
    "addr",
    "ssh",
    "ckpt_dir",
    "device",
    "precision",
    "kv_cache",
    "rng_seed",
    "max_ram_gb",
    "layers",
    "role",
    "standby_for",
];

impl NodeConfig {
    /// A node with the runtime's defaults for everything but the address.
    pub fn new(addr: impl Into<String>) -> Self {
        NodeConfig {
            addr: addr.into(),
            ssh: None,
            ckpt_dir: String::new(),
            device: DeviceList::default(),
            precision: Precision::default(),
            kv_cache: KvPolicy::default(),
            rng_seed: None,
            max_ram_gb: None,
            layers: None,
            role: Role::default(),
            standby_for: None,
        }
    }

    /// The manual layer range, read as the runtime reads it
    /// (`NodeConfig::manual_range`): `"a:b"`, each side trimmed; `None`
    /// when absent or unreadable (the runtime then ignores it).
    pub fn manual_range(&self) -> Option<std::ops::Range<usize>> {
        let (a, b) = self.layers.as_ref()?.split_once(':')?;
        Some(a.trim().parse().ok()?..b.trim().parse().ok()?)
    }
}

/// What a `[[node]]` list gets past the runtime but will not work as the
/// user meant: an address the runtime cannot dial, two nodes on one
/// address, a `layers` range it will ignore, a `standby_for` that names no
/// node. The runtime loads such a file, so these are warnings, each with
/// the key to point at; none stops `expand`.
pub(crate) fn node_warnings(nodes: &[NodeConfig]) -> Vec<Invalid> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let at = |k: &str| KeyRef::node(i, k);
        if let Err(why) = NodeAddr::parse(&n.addr) {
            out.push(Invalid(
                at("addr"),
                format!(
                    "[[node]] #{}: addr {why}: the runtime cannot dial it",
                    i + 1
                ),
            ));
        }
        if let Some(j) = seen.insert(n.addr.clone(), i) {
            out.push(Invalid(
                at("addr"),
                format!(
                    "[[node]] #{} has the same addr {:?} as [[node]] #{}: the runtime would \
                     start two workers on one address; give each node its own",
                    i + 1,
                    n.addr,
                    j + 1
                ),
            ));
        }
        if let Some(l) = &n.layers {
            match n.manual_range() {
                None => out.push(Invalid(
                    at("layers"),
                    format!(
                        "[[node]] #{}: layers = {l:?} is not a range the runtime reads, so it \
                         ignores it: write layers = \"first:end\", e.g. \"0:12\"",
                        i + 1
                    ),
                )),
                Some(r) if r.is_empty() => out.push(Invalid(
                    at("layers"),
                    format!("[[node]] #{}: layers = {l:?} is an empty range", i + 1),
                )),
                Some(_) => {}
            }
        }
        if let Some(g) = n.max_ram_gb {
            if !g.is_finite() || g <= 0.0 {
                out.push(Invalid(
                    at("max_ram_gb"),
                    format!(
                        "[[node]] #{}: max_ram_gb = {g} leaves this node no RAM for a stage",
                        i + 1
                    ),
                ));
            }
        }
        if let Some(target) = &n.standby_for {
            if n.role != Role::Standby {
                out.push(Invalid(
                    at("standby_for"),
                    format!(
                        "[[node]] #{}: standby_for is read only with role = \"standby\"",
                        i + 1
                    ),
                ));
            } else if target == &n.addr || !nodes.iter().any(|m| &m.addr == target) {
                out.push(Invalid(
                    at("standby_for"),
                    format!(
                        "[[node]] #{}: standby_for = {target:?} does not name another [[node]] \
                         addr, so the standby mirrors no node",
                        i + 1
                    ),
                ));
            }
        }
    }
    out
}

/// Keys of a `[[node]]` that the runtime does not read: it ignores them,
/// so a misspelt `devcie = "cuda"` would plan that box on its CPU without
/// a word. Each is named with its line and the nearest key the runtime
/// reads, when one is close.
pub(crate) fn unknown_keys(text: &str) -> Vec<Invalid> {
    let Ok(doc) = toml_edit::ImDocument::parse(text) else {
        return Vec::new();
    };
    let Some(toml_edit::Item::ArrayOfTables(nodes)) = doc.get("node") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, t) in nodes.iter().enumerate() {
        for (key, _) in t.iter() {
            if NODE_KEYS.contains(&key) {
                continue;
            }
            let hint = match rlx_proto::configfile::nearest(key, NODE_KEYS) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!("the keys it reads are {}", NODE_KEYS.join(", ")),
            };
            out.push(Invalid(
                KeyRef::node(i, key),
                format!(
                    "[[node]] #{}: the RLX runtime does not read `{}` and ignores it: {hint}",
                    i + 1,
                    crate::escape::untrusted(key)
                ),
            ));
        }
    }
    out
}
