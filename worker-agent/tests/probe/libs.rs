//! The real GPU libraries of the machine running the tests (NVML, the Vulkan
//! loader): whatever is installed, asking must answer, not crash or hang.
//! On a machine without them both say why; on a GPU machine they list it.

use rlx_agent::probe::{AshVulkan, NvidiaLib, Nvml, VulkanLib};
use std::time::{Duration, Instant};

/// Generous: NVML start-up on a many-GPU box without the persistence daemon
/// takes around a second; anything near this bound is a hang.
const LIBRARY_DEADLINE: Duration = Duration::from_secs(10);

#[test]
fn the_real_nvml_answers_with_gpus_or_a_reason() {
    let t = Instant::now();
    match Nvml.devices() {
        Ok(gpus) => {
            eprintln!("NVML lists {} GPU(s): {gpus:?}", gpus.len());
            assert!(gpus.iter().all(|g| !g.name.is_empty()), "{gpus:?}");
        }
        Err(why) => {
            eprintln!("NVML not usable: {why}");
            assert!(!why.is_empty());
        }
    }
    assert!(t.elapsed() < LIBRARY_DEADLINE, "{:?}", t.elapsed());
}

#[test]
fn the_real_vulkan_loader_answers_with_devices_or_a_reason() {
    let t = Instant::now();
    match AshVulkan.devices() {
        Ok(devs) => {
            eprintln!("Vulkan lists {} device(s): {devs:?}", devs.len());
            assert!(devs.iter().all(|d| !d.name.is_empty()), "{devs:?}");
        }
        Err(why) => {
            eprintln!("Vulkan not usable: {why}");
            assert!(!why.is_empty());
        }
    }
    assert!(t.elapsed() < LIBRARY_DEADLINE, "{:?}", t.elapsed());
}
