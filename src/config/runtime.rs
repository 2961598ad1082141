//! **The RLX runtime's vocabulary** — the device names, the precision rule
//! and the top-level keys that the runtime (`rlx-distributed`'s
//! `ClusterConfig`, with `rlx-runtime`'s device parser) reads from a
//! cluster file, ported so that this crate accepts exactly what the runtime
//! accepts and refuses it in the runtime's words.
//!
//! ```toml
//! model = "unsloth/GLM-5.3-Flash-GGUF"   # required by the runtime
//! seq = 8
//! [placement]
//! policy = "auto"                        # auto | ram_balanced | throughput | manual
//! [[node]]
//! device = "metal+cpu"                   # primary first, then CPU spill
//! precision = "f8e4m3"                   # an open set: any fNeXmY minifloat
//! ```
//!
//! Why a port and not the crate: the runtime's crate pulls in its compiler
//! and executor (about a minute of build on two cores, and GPU back ends
//! behind features), which a discovery library embedded in that same
//! runtime must not depend on. The port is checked against the real crate,
//! not against a reading of it: `compat/` builds `rlx-distributed` and
//! requires that this module and the runtime accept and refuse the same
//! files (the runtime versions checked are in `compat/README.md`).

use serde::Deserialize;
use std::fmt;

/// A device the runtime can run a stage on (`rlx_driver::Device`), by its
/// canonical label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// Apple GPUs through Metal.
    Metal,
    /// Apple GPUs through MLX.
    Mlx,
    /// The Apple Neural Engine (Core ML).
    Ane,
    /// NVIDIA GPUs.
    Cuda,
    /// AMD GPUs through ROCm/HIP.
    Rocm,
    /// AMD's XDNA NPU.
    Xdna,
    /// A GPU in a Thunderbolt enclosure.
    Egpu,
    /// Intel GPUs through oneAPI / Level Zero.
    OneApi,
    /// Any GPU through wgpu.
    Gpu,
    /// Any GPU through Vulkan compute.
    Vulkan,
    /// OpenGL compute.
    OpenGl,
    /// Direct3D 12.
    DirectX,
    /// WebGPU.
    WebGpu,
    /// Google TPUs.
    Tpu,
    /// Qualcomm Hexagon.
    Hexagon,
}

impl DeviceKind {
    /// The runtime's canonical label (`rlx_runtime::device_label`).
    pub fn label(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Metal => "metal",
            DeviceKind::Mlx => "mlx",
            DeviceKind::Ane => "ane",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Rocm => "rocm",
            DeviceKind::Xdna => "xdna",
            DeviceKind::Egpu => "egpu",
            DeviceKind::OneApi => "oneapi",
            DeviceKind::Gpu => "gpu",
            DeviceKind::Vulkan => "vulkan",
            DeviceKind::OpenGl => "opengl",
            DeviceKind::DirectX => "directx",
            DeviceKind::WebGpu => "webgpu",
            DeviceKind::Tpu => "tpu",
            DeviceKind::Hexagon => "hexagon",
        }
    }

    /// The runtime's device parser (`rlx_runtime::parse_device`): trimmed,
    /// any ASCII case, with its aliases (`nvidia`, `mtl`, `coreml`, `hip`,
    /// `vk`...). The error text is the runtime's own.
    pub fn parse(s: &str) -> Result<DeviceKind, String> {
        let key = s.trim().to_ascii_lowercase();
        Ok(match key.as_str() {
            "cpu" => DeviceKind::Cpu,
            "metal" | "mtl" => DeviceKind::Metal,
            "mlx" => DeviceKind::Mlx,
            "ane" | "coreml" | "neural-engine" => DeviceKind::Ane,
            "cuda" | "nvidia" => DeviceKind::Cuda,
            "rocm" | "hip" | "amd" => DeviceKind::Rocm,
            "xdna" | "aie" | "aie2" | "ryzenai" | "ryzen-ai" | "amdnpu" => DeviceKind::Xdna,
            "egpu" | "tbgpu" | "thunderbolt" => DeviceKind::Egpu,
            "oneapi" | "levelzero" | "level-zero" | "l0" | "intel" | "sycl" => DeviceKind::OneApi,
            "gpu" | "wgpu" => DeviceKind::Gpu,
            "vulkan" | "vk" => DeviceKind::Vulkan,
            "opengl" | "gl" => DeviceKind::OpenGl,
            "directx" | "dx12" | "d3d12" => DeviceKind::DirectX,
            "webgpu" => DeviceKind::WebGpu,
            "tpu" => DeviceKind::Tpu,
            "hexagon" | "htp" | "qnn" => DeviceKind::Hexagon,
            "" => return Err("empty device name".into()),
            other => {
                return Err(format!(
                    "unknown device '{other}' (try: cpu, metal, mlx, ane, coreml, cuda, rocm, gpu, vulkan, tpu)"
                ))
            }
        })
    }

    /// The kind an rlx-agent reports for the hardware this device runs on,
    /// for comparing a hand-written device with what the machine has. MLX
    /// runs on the Apple GPU the agent reports as Metal. `None` for kinds
    /// no agent probes (an NPU, a TPU, a generic GPU API): nothing to
    /// compare with.
    pub fn agent_kind(self) -> Option<rlx_proto::caps::Device> {
        use rlx_proto::caps::Device;
        Some(match self {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda,
            DeviceKind::Rocm => Device::Rocm,
            DeviceKind::Vulkan => Device::Vulkan,
            DeviceKind::Metal | DeviceKind::Mlx => Device::Metal,
            DeviceKind::Ane => Device::Ane,
            _ => return None,
        })
    }
}

impl From<rlx_proto::caps::Device> for DeviceKind {
    /// Every kind an agent reports is a runtime device under the same label.
    fn from(d: rlx_proto::caps::Device) -> Self {
        use rlx_proto::caps::Device;
        match d {
            Device::Cpu => DeviceKind::Cpu,
            Device::Cuda => DeviceKind::Cuda,
            Device::Rocm => DeviceKind::Rocm,
            Device::Vulkan => DeviceKind::Vulkan,
            Device::Metal => DeviceKind::Metal,
            Device::Ane => DeviceKind::Ane,
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The runtime's device list (`DeviceList::from_str` with
/// `rlx_runtime::parse_device_list`): `+` and the list separators `,`, `;`
/// and space all separate; empty parts are skipped; a repeated device
/// counts once; at least one device. The error text is the runtime's.
pub(crate) fn parse_device_list(raw: &str) -> Result<Vec<DeviceKind>, String> {
    let raw = raw.trim();
    let mut out = Vec::new();
    for part in raw.replace('+', ",").split([',', ';', ' ']) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let d =
            DeviceKind::parse(part).map_err(|message| format!("bad device `{raw}`: {message}"))?;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    if out.is_empty() {
        return Err(format!("bad device `{raw}`: device list is empty"));
    }
    Ok(out)
}

/// The runtime's precision rule (`Precision::bits`): bits per weight, or
/// `None` for a name the runtime refuses. The set is open: the named
/// shorthands, and any `fNeXmY` minifloat.
pub(crate) fn precision_bits(name: &str) -> Option<f64> {
    Some(match name {
        "f32" => 32.0,
        "f16" | "bf16" | "mixed" => 16.0,
        "fp8" | "fp8e5m2" | "mxfp8" => 8.0,
        "int8" | "q8_0" => 8.5,
        "nvfp4" | "mxfp4" => 4.25,
        other => return minifloat_bits(other),
    })
}

/// Width of an `fNeXmY` minifloat name (`f8e4m3` -> 8), or of a bare `fN`
/// for the widths that exist (8, 16, 32, 64).
fn minifloat_bits(name: &str) -> Option<f64> {
    let rest = name.strip_prefix('f')?;
    let width: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if width.is_empty() {
        return None;
    }
    let bits: u32 = width.parse().ok()?;
    let tail = &rest[width.len()..];
    if tail.is_empty() {
        return matches!(bits, 8 | 16 | 32 | 64).then_some(bits as f64);
    }
    let em = tail.strip_prefix('e')?;
    let (e, m) = em.split_once('m')?;
    if e.is_empty() || m.is_empty() || !e.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    m.chars().all(|c| c.is_ascii_digit()).then_some(bits as f64)
}

/// The runtime's message for a precision it refuses.
pub(crate) fn unknown_precision(s: &str) -> String {
    format!(
        "unknown precision `{s}`; expected f32 | f16 | bf16 | mixed | fp8 | \
         mxfp8 | mxfp4 | nvfp4 | int8, or an fNeXmY minifloat such as f8e4m3"
    )
}

/// The runtime's default precision (`Precision::default`): what a node
/// without `precision` is planned in, and what a discovered node is written
/// with unless `[discover] precision` says otherwise.
pub const DEFAULT_PRECISION: &str = "bf16";

/// `[placement]` as the runtime reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Placement {
    #[serde(default)]
    pub policy: Option<PlacementPolicy>,
    #[serde(default)]
    pub objective: Option<Objective>,
}

/// How the runtime assigns layers to nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlacementPolicy {
    RamBalanced,
    Throughput,
    Auto,
    Manual,
}

/// `[placement.objective]` as the runtime reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Objective {
    #[serde(default)]
    pub optimize: Option<Optimize>,
    #[serde(default)]
    pub context: Option<usize>,
    #[serde(default)]
    pub hop_secs: Option<f64>,
    #[serde(default)]
    pub kv_bytes_per_layer_token: Option<u64>,
    #[serde(default)]
    pub on_unknown_kv: Option<UnknownKv>,
    #[serde(default)]
    pub kv_dtype: Option<String>,
    #[serde(default)]
    pub precision_ladder: Vec<LadderStep>,
}

/// One precision of `precision_ladder`, checked with the runtime's rule
/// (kept here, not as the node's `Precision`, so that this module depends
/// on nothing else of the config).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) struct LadderStep(String);

impl TryFrom<String> for LadderStep {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match precision_bits(s.trim()) {
            Some(_) => Ok(LadderStep(s)),
            None => Err(unknown_precision(&s)),
        }
    }
}

/// What the planner makes small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Optimize {
    Latency,
    Throughput,
    Memory,
}

/// What the planner does when the KV cache size is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum UnknownKv {
    Fail,
    Assume,
    Ignore,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_are_the_runtimes_with_its_aliases_and_any_case() {
        for (s, k) in [
            ("CUDA", DeviceKind::Cuda),
            ("nvidia", DeviceKind::Cuda),
            ("mtl", DeviceKind::Metal),
            ("coreml", DeviceKind::Ane),
            (" vk ", DeviceKind::Vulkan),
            ("hip", DeviceKind::Rocm),
            ("mlx", DeviceKind::Mlx),
        ] {
            assert_eq!(DeviceKind::parse(s), Ok(k), "{s}");
        }
        assert!(DeviceKind::parse("quantum")
            .unwrap_err()
            .contains("unknown device 'quantum'"));
    }

    #[test]
    fn a_device_list_takes_plus_and_the_list_separators_and_counts_a_device_once() {
        assert_eq!(
            parse_device_list("metal+cpu"),
            Ok(vec![DeviceKind::Metal, DeviceKind::Cpu])
        );
        assert_eq!(
            parse_device_list("cuda, cpu;cuda"),
            Ok(vec![DeviceKind::Cuda, DeviceKind::Cpu])
        );
        assert!(parse_device_list("+")
            .unwrap_err()
            .contains("device list is empty"));
        assert!(parse_device_list("cuda:0")
            .unwrap_err()
            .contains("unknown device 'cuda:0'"));
    }

    #[test]
    fn precisions_are_an_open_set_checked_as_the_runtime_checks_them() {
        for ok in [
            "f32", "bf16", "mixed", "fp8", "nvfp4", "mxfp4", "int8", "q8_0", "f8e4m3", "f6e3m2",
            "f64",
        ] {
            assert!(precision_bits(ok).is_some(), "{ok}");
        }
        for bad in [
            "fp32", "F32", "f8e4", "f8m3", "fe4m3", "f8e4mx", "f9", "bf", "i8", "",
        ] {
            assert!(precision_bits(bad).is_none(), "{bad}");
        }
    }
}
