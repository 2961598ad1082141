//! **NVIDIA GPUs through NVML** — the driver's own management library,
//! loaded at run time so the agent runs on machines without it.
//!
//! `libnvidia-ml.so.1` ships with the NVIDIA driver, not with CUDA; if it is
//! there, the driver is loaded and CUDA can use the GPUs it lists. If it is
//! missing the probe reports no CUDA devices from NVML (not an error) and the
//! PCI scan still reports each NVIDIA card as `cuda`, unavailable, with a name
//! saying why (see [`super::accel`]).

use super::pci::PciAddr;
use serde::Deserialize;

/// One GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NvidiaGpu {
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Total framebuffer memory in bytes; 0 when NVML would not say.
    #[serde(default)]
    pub mem_bytes: u64,
    /// Where it sits on the PCI bus, to match it with the PCI scan.
    #[serde(default)]
    pub pci: Option<PciAddr>,
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
            let pci = dev.pci_info().ok().and_then(|p| p.bus_id.parse().ok());
            gpus.push(NvidiaGpu {
                name,
                mem_bytes,
                pci,
            });
        }
        Ok(gpus)
    }
}
