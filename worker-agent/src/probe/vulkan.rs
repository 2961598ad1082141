//! **Vulkan devices through the loader** — `libvulkan.so.1` opened at run
//! time with `ash`, so a machine without a Vulkan loader still runs the agent
//! (and simply has no Vulkan devices).
//!
//! Vulkan is a target of its own: an NVIDIA or AMD GPU that is also listed as
//! `cuda`/`rocm` is listed again as `vulkan`, because a node whose rlx build
//! has only the Vulkan backend can still use it (see [`super::accel`]).
//! Software renderers (llvmpipe/lavapipe, `VK_PHYSICAL_DEVICE_TYPE_CPU`) are
//! the CPU under another name and are not reported.

use super::pci::PciAddr;
use serde::Deserialize;

/// `VkPhysicalDeviceType`, reduced to what the probe needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VulkanKind {
    /// A card with its own memory.
    Discrete,
    /// Part of the CPU package, sharing host RAM: reported as unified.
    Integrated,
    /// A GPU passed through or paravirtualised in a VM.
    Virtual,
    /// A software renderer running on the CPU: never reported.
    Cpu,
    /// Anything else the driver says.
    Other,
}

/// One physical device as the Vulkan loader enumerates it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VulkanGpu {
    /// `deviceName` (`AMD Radeon RX 7900 XTX (RADV NAVI31)`).
    pub name: String,
    /// Device type.
    pub kind: VulkanKind,
    /// `vendorID`: the PCI vendor id for PCI devices.
    #[serde(default)]
    pub vendor: u32,
    /// `deviceID`: the PCI device id for PCI devices.
    #[serde(default)]
    pub device: u32,
    /// Size of the largest `DEVICE_LOCAL` memory heap, bytes.
    #[serde(default)]
    pub mem_bytes: u64,
    /// PCI address from `VK_EXT_pci_bus_info`, when the driver offers it.
    #[serde(default)]
    pub pci: Option<PciAddr>,
    /// Free memory of that heap, bytes: `VK_EXT_memory_budget`'s budget
    /// (what a process may allocate before allocations start to fail, after
    /// what other processes hold) less this process's usage. 0 when the
    /// driver lacks the extension.
    #[serde(default)]
    pub mem_free: u64,
}

/// Access to the Vulkan loader, behind a trait so tests substitute a fake.
pub trait VulkanLib: Send + Sync {
    /// Every physical device, in the loader's order. `Err` means Vulkan is
    /// not usable at all (no loader, no driver); the message says which.
    fn devices(&self) -> Result<Vec<VulkanGpu>, String>;
}

/// The real loader, through `ash` with dynamic loading.
#[derive(Debug, Default, Clone, Copy)]
pub struct AshVulkan;

impl VulkanLib for AshVulkan {
    fn devices(&self) -> Result<Vec<VulkanGpu>, String> {
        use ash::vk;
        // SAFETY: loading the system Vulkan loader runs its initialisers; that
        // is the documented way to use it and nothing else is loaded.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| format!("no Vulkan loader (libvulkan.so.1): {e}"))?;
        // SAFETY: plain query on a valid entry.
        let loader_version = unsafe { entry.try_enumerate_instance_version() }
            .ok()
            .flatten()
            .unwrap_or(vk::API_VERSION_1_0);
        // 1.1 brings vkGetPhysicalDeviceProperties2, needed for PCI bus info.
        let api = loader_version.min(vk::API_VERSION_1_1);
        let app = vk::ApplicationInfo::default()
            .application_name(c"rlx-agent")
            .api_version(api);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: `info` and `app` outlive the call; no allocator callbacks.
        let instance = unsafe { entry.create_instance(&info, None) }
            .map_err(|e| format!("Vulkan instance creation failed ({e}): no usable driver"))?;
        // SAFETY: `instance` is valid until destroyed below and every physical
        // device handle comes from it.
        let result = unsafe { enumerate(&instance, api) };
        // SAFETY: nothing created from the instance is still alive.
        unsafe { instance.destroy_instance(None) };
        result
    }
}

/// Reads every physical device of `instance`.
///
/// # Safety
/// `instance` must be a live instance created with API version `api`.
unsafe fn enumerate(instance: &ash::Instance, api: u32) -> Result<Vec<VulkanGpu>, String> {
    use ash::vk;
    let handles = instance
        .enumerate_physical_devices()
        .map_err(|e| format!("Vulkan cannot list devices: {e}"))?;
    let mut out = Vec::new();
    for pd in handles {
        let props = instance.get_physical_device_properties(pd);
        let name = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "Vulkan device".into());
        let kind = match props.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => VulkanKind::Discrete,
            vk::PhysicalDeviceType::INTEGRATED_GPU => VulkanKind::Integrated,
            vk::PhysicalDeviceType::VIRTUAL_GPU => VulkanKind::Virtual,
            vk::PhysicalDeviceType::CPU => VulkanKind::Cpu,
            _ => VulkanKind::Other,
        };
        let mem = instance.get_physical_device_memory_properties(pd);
        // The largest DEVICE_LOCAL heap: its size, and its index for the
        // budget below.
        let heap = mem
            .memory_heaps_as_slice()
            .iter()
            .enumerate()
            .filter(|(_, h)| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .max_by_key(|(_, h)| h.size);
        let mem_bytes = heap.map_or(0, |(_, h)| h.size);
        let v11 = api >= vk::API_VERSION_1_1 && props.api_version >= vk::API_VERSION_1_1;
        let exts = if v11 {
            instance
                .enumerate_device_extension_properties(pd)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let has_ext =
            |name: &std::ffi::CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
        let has_pci_ext = has_ext(vk::EXT_PCI_BUS_INFO_NAME);
        let mem_free = match heap {
            Some((i, h)) if has_ext(vk::EXT_MEMORY_BUDGET_NAME) => {
                let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
                let mut props2 =
                    vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
                instance.get_physical_device_memory_properties2(pd, &mut props2);
                budget.heap_budget[i]
                    .saturating_sub(budget.heap_usage[i])
                    .min(h.size)
            }
            _ => 0,
        };
        let pci = has_pci_ext.then(|| {
            let mut bus = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
            let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut bus);
            instance.get_physical_device_properties2(pd, &mut props2);
            PciAddr {
                domain: bus.pci_domain,
                bus: bus.pci_bus as u8,
                device: bus.pci_device as u8,
                function: bus.pci_function as u8,
            }
        });
        out.push(VulkanGpu {
            name,
            kind,
            vendor: props.vendor_id,
            device: props.device_id,
            mem_bytes,
            pci,
            mem_free,
        });
    }
    Ok(out)
}
