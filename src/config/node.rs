//! **`[[node]]`** — one machine of the cluster as the runtime reaches and
//! uses it, and the checks a hand-written node list passes at load time.
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

/// The checks a `[[node]]` list passes at load time: each node on its own,
/// then addresses unique and every `standby_for` naming another node.
pub(crate) fn check_nodes(nodes: &[NodeConfig]) -> Result<(), Invalid> {
    let mut seen = std::collections::HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let at = |k: &str| KeyRef::node(i, k);
        if let Err(why) = NodeAddr::parse(&n.addr) {
            return Err(Invalid(
                at("addr"),
                format!("[[node]] #{}: addr {why}", i + 1),
            ));
        }
        if let Some(j) = seen.insert(n.addr.clone(), i) {
            return Err(Invalid(
                at("addr"),
                format!(
                    "[[node]] #{} has the same addr {:?} as [[node]] #{}: each node needs its own address",
                    i + 1,
                    n.addr,
                    j + 1
                ),
            ));
        }
        n.check(i)?;
    }
    for (i, n) in nodes.iter().enumerate() {
        if let Some(target) = &n.standby_for {
            if target == &n.addr || !nodes.iter().any(|m| &m.addr == target) {
                return Err(Invalid(
                    KeyRef::node(i, "standby_for"),
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

impl NodeConfig {
    /// The checks of one node's own keys (`i` is its place in the list,
    /// from 0), after its `addr`.
    fn check(&self, i: usize) -> Result<(), Invalid> {
        let at = |k: &str| KeyRef::node(i, k);
        if let Some([a, b]) = self.layers {
            if a >= b {
                return Err(Invalid(
                    at("layers"),
                    format!(
                        "[[node]] #{}: layers = [{a}, {b}] is empty; write [first, last_exclusive]",
                        i + 1
                    ),
                ));
            }
        }
        if let Some(g) = self.max_ram_gb {
            if !g.is_finite() || g <= 0.0 {
                return Err(Invalid(
                    at("max_ram_gb"),
                    format!(
                        "[[node]] #{}: max_ram_gb must be a positive number of GB",
                        i + 1
                    ),
                ));
            }
        }
        match (self.role, &self.standby_for) {
            (Role::Standby, None) => Err(Invalid(
                at("role"),
                format!(
                    "[[node]] #{}: role = \"standby\" needs standby_for = \"<addr of the node it replaces>\"",
                    i + 1
                ),
            )),
            (Role::Worker, Some(_)) => Err(Invalid(
                at("standby_for"),
                format!("[[node]] #{}: standby_for is only meaningful with role = \"standby\"", i + 1),
            )),
            _ => Ok(()),
        }
    }
}
