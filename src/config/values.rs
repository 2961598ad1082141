//! **The value types of the cluster file** — device lists, precisions and
//! subnets, each parsed from the string the user wrote and written back as
//! the same string.

use rlx_proto::caps::Device;
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

    /// Devices of one `kind` by index (`cuda:0,cuda:1`).
    pub fn indexed(kind: Device, indices: impl IntoIterator<Item = u32>) -> Self {
        DeviceList(
            indices
                .into_iter()
                .map(|i| DeviceSpec {
                    kind,
                    index: Some(i),
                })
                .collect(),
        )
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
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty entry in device list `{s}`").into());
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
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
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

/// How many of a node's accelerators its `[[node]]` names
/// (`[discover] device_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DevicePolicy {
    /// The seed's rule: the one device kind with the most usable memory,
    /// written without an index (`cuda`), so the runtime picks the device.
    #[default]
    Best,
    /// Every accelerator of that kind, by index (`cuda:0,cuda:1`), for
    /// nodes that have several; nodes with one are written as with `best`.
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
                "device_policy = {s:?} is not a policy: use \"best\" (the default: one device \
                 kind, the runtime picks the device) or \"all\" (every accelerator of that \
                 kind, e.g. cuda:0,cuda:1)"
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
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Precision::F32),
            "f16" | "fp16" => Ok(Precision::F16),
            "bf16" => Ok(Precision::Bf16),
            "int8" | "i8" => Ok(Precision::Int8),
            _ => Err(format!("unknown precision `{s}` (expected f32, f16, bf16 or int8)").into()),
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
        p.as_str().to_string()
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
