//! **NVIDIA GPUs through NVML** — the driver's own management library,
//! loaded at run time so the agent runs on machines without it.
//!
//! `libnvidia-ml.so.1` ships with the NVIDIA driver, not with CUDA; if it is
//! there, the driver is loaded and CUDA can use the GPUs it lists. If it is
//! missing the probe reports no CUDA devices from NVML (not an error) and the
//! PCI scan still reports each NVIDIA card as `cuda`, unavailable, with a name
//! saying why (see [`super::accel`]).
//!
//! Beside name and memory, each GPU's placement facts come from NVML too:
//! free memory, compute capability, the driver and CUDA versions, the
//! PCIe link (used when sysfs has none), MIG mode, and how it reaches each
//! other GPU (NVLink, or the PCIe/CPU level `nvidia-smi topo -m` shows).
//! Any one NVML refuses (`NotSupported` on consumer cards) is left unknown.

use super::pci::PciAddr;
use rlx_proto::caps::{PcieLink, PeerLink};
use serde::Deserialize;

/// One GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct NvidiaGpu {
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Total framebuffer memory in bytes; 0 when NVML would not say.
    #[serde(default)]
    pub mem_bytes: u64,
    /// Where it sits on the PCI bus, to match it with the PCI scan.
    #[serde(default)]
    pub pci: Option<PciAddr>,
    /// Unallocated framebuffer memory when probed, bytes; 0 = unknown.
    #[serde(default)]
    pub mem_free: u64,
    /// CUDA compute capability, `major.minor`.
    #[serde(default)]
    pub compute: Option<String>,
    /// The driver's version (the same for every GPU of a box).
    #[serde(default)]
    pub driver: Option<String>,
    /// The newest CUDA version the driver supports, `major.minor`.
    #[serde(default)]
    pub cuda: Option<String>,
    /// The PCIe link as NVML reads it; sysfs's reading is preferred when
    /// there is one (see [`super::accel`]).
    #[serde(default)]
    pub pcie: Option<PcieLink>,
    /// MIG mode: `Some(true)` on, `Some(false)` capable but off, `None` not
    /// supported.
    #[serde(default)]
    pub mig: Option<bool>,
    /// How it reaches each other GPU, by NVML index.
    #[serde(default)]
    pub peers: Vec<PeerLink>,
}

/// Access to NVML, behind a trait so tests substitute a fake.
pub trait NvidiaLib: Send + Sync {
    /// Every GPU the driver exposes, in NVML index order (the order CUDA
    /// uses with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    ///
    /// `Err` means the library is not usable at all (not installed, driver
    /// not loaded); the message says which, for the PCI fallback's name.
    fn devices(&self) -> Result<Vec<NvidiaGpu>, String>;
}

/// The real NVML, through `nvml-wrapper` (which `dlopen`s
/// `libnvidia-ml.so.1`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Nvml;

impl NvidiaLib for Nvml {
    fn devices(&self) -> Result<Vec<NvidiaGpu>, String> {
        use nvml_wrapper::error::NvmlError;
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| match e {
            NvmlError::LibloadingError(_) => "NVML (libnvidia-ml.so.1) not installed".to_string(),
            NvmlError::DriverNotLoaded => "NVIDIA driver not loaded".to_string(),
            other => format!("NVML failed to start: {other}"),
        })?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("NVML cannot count devices: {e}"))?;
        // Per box, not per GPU: asked once.
        let driver = nvml.sys_driver_version().ok();
        let cuda = nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        let mut gpus = Vec::new();
        for i in 0..count {
            // One GPU that NVML refuses (no permission in a container, fallen
            // off the bus) must not hide the others.
            let dev = match nvml.device_by_index(i) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(index = i, error = %e, "NVML cannot open GPU; skipping it");
                    continue;
                }
            };
            let name = dev.name().unwrap_or_else(|e| {
                tracing::warn!(index = i, error = %e, "NVML gives no name");
                format!("NVIDIA GPU {i}")
            });
            let mem_bytes = dev.memory_info().map(|m| m.total).unwrap_or_else(|e| {
                tracing::warn!(index = i, error = %e, "NVML gives no memory size; reporting 0");
                0
            });
            let mem = dev.memory_info().ok();
            let pci = dev.pci_info().ok().and_then(|p| p.bus_id.parse().ok());
            let pcie = match (dev.current_pcie_link_gen(), dev.current_pcie_link_width()) {
                (Ok(gen), Ok(width)) => Some(PcieLink {
                    gen: gen.min(255) as u8,
                    width: width.min(255) as u8,
                }),
                _ => None,
            };
            gpus.push(NvidiaGpu {
                name,
                mem_bytes,
                pci,
                mem_free: mem.map_or(0, |m| m.free.min(m.total)),
                compute: dev
                    .cuda_compute_capability()
                    .ok()
                    .map(|c| format!("{}.{}", c.major, c.minor)),
                driver: driver.clone(),
                cuda: cuda.clone(),
                pcie,
                // NotSupported on GPUs without MIG: that is `None`.
                mig: dev.mig_mode().ok().map(|m| m.current == 1),
                peers: Vec::new(),
            });
        }
        peers(&nvml, &mut gpus);
        Ok(gpus)
    }
}

/// `NVML_NVLINK_MAX_LINKS` of `nvml.h` (18 on Hopper and Blackwell), which
/// `nvml-wrapper` does not re-export: links are numbered below it.
const NVLINK_MAX_LINKS: u32 = 18;

/// Fills in each GPU's path to every other one: NVLink when a link of one
/// ends at the other (counted), or when the two reach each other over
/// NVLink through an NVSwitch (NVML's P2P status; then every active link
/// counts); otherwise the PCIe/CPU level of their closest common ancestor.
/// Pairs NVML cannot describe are left out, not guessed.
fn peers(nvml: &nvml_wrapper::Nvml, gpus: &mut [NvidiaGpu]) {
    use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus};
    let n = gpus.len() as u32;
    for i in 0..n {
        let Ok(a) = nvml.device_by_index(i) else {
            continue;
        };
        // Where each active NVLink of `a` ends.
        let mut ends: Vec<Option<PciAddr>> = Vec::new();
        for link in 0..NVLINK_MAX_LINKS {
            let l = a.link_wrapper_for(link);
            if l.is_active().unwrap_or(false) {
                ends.push(l.remote_pci_info().ok().and_then(|p| p.bus_id.parse().ok()));
            }
        }
        let mut found = Vec::new();
        for j in (0..n).filter(|j| *j != i) {
            let Ok(b) = nvml.device_by_index(j) else {
                continue;
            };
            let direct = ends
                .iter()
                .filter(|e| e.is_some() && **e == gpus[j as usize].pci)
                .count() as u32;
            let switched = matches!(
                a.p2p_status(&b, P2pCapabilitiesIndex::NvLink),
                Ok(P2pStatus::Ok)
            );
            let peer = if direct > 0 || switched {
                Some(PeerLink {
                    peer: j,
                    path: "nvlink".into(),
                    nvlinks: if direct > 0 {
                        direct
                    } else {
                        ends.len() as u32
                    },
                })
            } else {
                common_ancestor(&a, b).map(|path| PeerLink {
                    peer: j,
                    path: path.into(),
                    nvlinks: 0,
                })
            };
            found.extend(peer);
        }
        gpus[i as usize].peers = found;
    }
}

/// `nvidia-smi topo -m`'s name for the closest common ancestor of two GPUs.
#[cfg(target_os = "linux")]
fn common_ancestor(a: &nvml_wrapper::Device, b: nvml_wrapper::Device) -> Option<&'static str> {
    use nvml_wrapper::enum_wrappers::device::TopologyLevel;
    Some(match a.topology_common_ancestor(b).ok()? {
        TopologyLevel::Internal => "internal",
        TopologyLevel::Single => "pix",
        TopologyLevel::Multiple => "pxb",
        TopologyLevel::HostBridge => "phb",
        TopologyLevel::Node => "node",
        TopologyLevel::System => "sys",
    })
}

/// NVML's topology queries exist on Linux only.
#[cfg(not(target_os = "linux"))]
fn common_ancestor(_: &nvml_wrapper::Device, _: nvml_wrapper::Device) -> Option<&'static str> {
    None
}
