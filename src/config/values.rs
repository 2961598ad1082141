//! **The value types of the cluster file** — device lists, precisions and
//! subnets, each parsed from the string the user wrote (devices and
//! precisions with the RLX runtime's own rules, [`super::runtime`]) and
//! written back as the same string.

use super::runtime::DeviceKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The largest subnet accepted: a /16 (65,534 hosts). With the concurrent
/// scan a /16 costs about 16 timeouts; anything larger is a typo for a
/// smaller network and would take minutes of SYNs across someone's LAN.
pub(crate) const MAX_SUBNET_PREFIX: u8 = 16;

/// Why a value of the cluster file (a device list, a precision, a device
/// policy, a subnet) is not one, in words that say what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(String);

impl From<String> for ValueError {
    fn from(why: String) -> Self {
        ValueError(why)
    }
}

/// The device(s) a node runs on, as the runtime reads them: one device or a
/// list, primary first, the rest CPU/host spill for weights that do not fit
/// (`"cuda"`, `"metal+cpu"`). Kept as the string the user wrote, so a
/// hand-written node is written back byte for byte; validated at load with
/// the runtime's own rule (`config::runtime`), so a name the runtime
/// refuses is refused here with its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DeviceList {
    raw: String,
    devices: Vec<DeviceKind>,
}

impl DeviceList {
    /// A list of one device of `kind`, as discovery writes it.
    pub fn single(kind: impl Into<DeviceKind>) -> Self {
        let kind = kind.into();
        DeviceList {
            raw: kind.label().to_string(),
            devices: vec![kind],
        }
    }

    /// The string as written (trimmed, as the runtime keeps it).
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The devices, primary first, each once.
    pub fn kinds(&self) -> impl Iterator<Item = DeviceKind> + '_ {
        self.devices.iter().copied()
    }

    /// The primary device: the one a stage runs on.
    pub fn primary(&self) -> DeviceKind {
        self.devices.first().copied().unwrap_or(DeviceKind::Cpu)
    }
}

impl Default for DeviceList {
    fn default() -> Self {
        DeviceList::single(DeviceKind::Cpu)
    }
}

impl FromStr for DeviceList {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        Ok(DeviceList {
            raw: s.trim().to_string(),
            devices: super::runtime::parse_device_list(s)?,
        })
    }
}

impl TryFrom<String> for DeviceList {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
        s.parse()
    }
}

impl From<DeviceList> for String {
    fn from(d: DeviceList) -> String {
        d.raw
    }
}

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// How many of a node's accelerators its `[[node]]` names
/// (`[discover] device_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DevicePolicy {
    /// The seed's rule: the one device kind with the most usable memory,
    /// written without an index (`cuda`), so the runtime picks the device.
    #[default]
    Best,
    /// Read as `best`, with a warning at load: it wrote every accelerator
    /// by index (`cuda:0,cuda:1`), which the RLX runtime refuses (it runs
    /// one device per node and has no device indices). Kept so that files
    /// which name it still load.
    All,
}

impl DevicePolicy {
    /// Wire label.
    pub fn as_str(self) -> &'static str {
        match self {
            DevicePolicy::Best => "best",
            DevicePolicy::All => "all",
        }
    }
}

impl TryFrom<String> for DevicePolicy {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
        match s.as_str() {
            "best" => Ok(DevicePolicy::Best),
            "all" => Ok(DevicePolicy::All),
            _ => Err(format!(
                "device_policy = {s:?} is not a policy: use \"best\" (the default and the \
                 only rule the RLX runtime can follow: one device kind per node)"
            )
            .into()),
        }
    }
}

impl From<DevicePolicy> for String {
    fn from(p: DevicePolicy) -> String {
        p.as_str().into()
    }
}

/// The numeric precision a node computes in, as the runtime reads it: an
/// open set (`f32`, `f16`, `bf16`, `mixed`, `fp8`, `nvfp4`, `mxfp4`,
/// `int8`, any `fNeXmY` minifloat...), checked with the runtime's own rule
/// and kept as written. The default is the runtime's, `bf16`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Precision(String);

impl Precision {
    /// The name, as the runtime keeps it (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Bits per weight, for comparing precisions.
    pub fn bits(&self) -> f64 {
        super::runtime::precision_bits(&self.0).unwrap_or(16.0)
    }
}

impl Default for Precision {
    fn default() -> Self {
        Precision(super::runtime::DEFAULT_PRECISION.into())
    }
}

impl FromStr for Precision {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let name = s.trim();
        match super::runtime::precision_bits(name) {
            Some(_) => Ok(Precision(name.to_string())),
            None => Err(super::runtime::unknown_precision(s).into()),
        }
    }
}

impl TryFrom<String> for Precision {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
        s.parse()
    }
}

impl From<Precision> for String {
    fn from(p: Precision) -> String {
        p.0
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A CIDR block to scan, validated at load time so the error carries a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Subnet(pub ipnet::Ipv4Net);

impl FromStr for Subnet {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
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
            )
            .into());
        }
        Ok(Subnet(net.trunc()))
    }
}

impl TryFrom<String> for Subnet {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
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
