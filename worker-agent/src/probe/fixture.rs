//! **GPU libraries for fixture trees** — a fixture root describes another
//! machine, so the real NVML and Vulkan loader (which describe this one) must
//! not be mixed in. `gpu-libs.json` at the fixture's top says what the fake
//! libraries return:
//!
//! ```json
//! {"nvml": [{"name": "NVIDIA H100 80GB HBM3", "mem_bytes": 85520809984, "pci": "0000:18:00.0"}],
//!  "vulkan": {"error": "no Vulkan loader (libvulkan.so.1)"}}
//! ```
//!
//! A list means the library loaded and returned those devices; `{"error":
//! ...}` or a missing key means it is not usable, with that reason. An NVML
//! entry may also carry what NVML tells of each GPU (`mem_free`, `compute`,
//! `driver`, `cuda`, `pcie`, `mig`, `peers`: see [`NvidiaGpu`]), a Vulkan
//! entry its budget's `mem_free`.

use super::nvidia::{NvidiaGpu, NvidiaLib};
use super::vulkan::{VulkanGpu, VulkanLib};
use serde::Deserialize;
use std::path::Path;

/// File name of the fake-library description inside a fixture root.
pub const FILE: &str = "gpu-libs.json";

/// One fake library's answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LibAnswer<T> {
    /// Loaded, with these devices.
    Devices(Vec<T>),
    /// Not usable, for this reason.
    Error {
        /// Why (as the real library wrapper would say it).
        error: String,
    },
}

impl<T: Clone> LibAnswer<T> {
    fn get(answer: &Option<Self>, lib: &str) -> Result<Vec<T>, String> {
        match answer {
            Some(LibAnswer::Devices(d)) => Ok(d.clone()),
            Some(LibAnswer::Error { error }) => Err(error.clone()),
            None => Err(format!("{lib} not present in this fixture")),
        }
    }
}

/// Fake NVML and Vulkan loader for one fixture (also usable directly in
/// tests).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureLibs {
    /// NVML's answer.
    #[serde(default)]
    pub nvml: Option<LibAnswer<NvidiaGpu>>,
    /// The Vulkan loader's answer.
    #[serde(default)]
    pub vulkan: Option<LibAnswer<VulkanGpu>>,
}

impl FixtureLibs {
    /// Reads `<root>/gpu-libs.json`; a fixture without one has neither
    /// library. A malformed file is an error naming it, so a typo in a
    /// fixture fails the test instead of silently dropping GPUs.
    pub fn load(root: &Path) -> anyhow::Result<FixtureLibs> {
        let path = root.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("fixture library file {}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FixtureLibs::default()),
            Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        }
    }
}

impl NvidiaLib for FixtureLibs {
    fn devices(&self) -> Result<Vec<NvidiaGpu>, String> {
        LibAnswer::get(&self.nvml, "NVML")
    }
}

impl VulkanLib for FixtureLibs {
    fn devices(&self) -> Result<Vec<VulkanGpu>, String> {
        LibAnswer::get(&self.vulkan, "Vulkan loader")
    }
}
