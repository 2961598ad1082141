//! **Every accelerator, once per target** — merges what NVML, amdgpu's sysfs,
//! the Vulkan loader and the PCI scan saw into the `devices` list.
//!
//! The rules, each chosen so that no card is lost and none is invented:
//! - A target is a way to run on a card, so one card may appear once per
//!   target: an RTX 4090 is `cuda` (through NVML) and also `vulkan` (through
//!   the loader), because a node whose rlx build has only the Vulkan backend
//!   can still use it. Within a target a card appears once (two Vulkan
//!   drivers for one card, e.g. NVIDIA's and NVK, give one entry).
//! - Every NVIDIA card on the PCI bus is `cuda`. One that NVML did not list
//!   (no driver, no NVML, bound to `vfio-pci`) is still reported, with
//!   `available = false` and a name that says why: the coordinator then tells
//!   the user "this box has a GPU you cannot use yet" instead of silently
//!   planning a CPU stage. Likewise AMD cards without amdgpu are `rocm`,
//!   unavailable, and Intel GPUs without a Vulkan driver are `vulkan`,
//!   unavailable.
//! - A PCI display or accelerator function that no probe can name (a vendor
//!   this build does not know) keeps a raw label `pci-vvvv:dddd`, so it is
//!   reported as unrecognised rather than folded into `cpu`.
//! - Software renderers and management VGAs are not accelerators (filtered
//!   in [`super::vulkan`] and [`super::pci`]).
//!
//! Order: cuda, rocm, vulkan, metal, ane, then unnamed devices; within a
//! kind, the vendor library's own order (the primary GPU first). Device
//! selection breaks memory ties by this order, so a card's `cuda` entry wins
//! over its `vulkan` twin.

use super::amd::AmdGpu;
use super::nvidia::NvidiaGpu;
use super::pci::{class_name, vendor, PciAddr, PciDevice};
use super::vulkan::{VulkanGpu, VulkanKind};
use rlx_proto::caps::{DeviceInfo, PcieLink};
use std::collections::HashSet;

/// What each source saw. Library results are `Err(reason)` when the library
/// is not usable at all.
#[derive(Debug)]
pub struct Sightings<'a> {
    /// PCI display/accelerator functions (management VGAs already dropped).
    pub pci: &'a [PciDevice],
    /// NVML's GPUs.
    pub nvidia: &'a Result<Vec<NvidiaGpu>, String>,
    /// amdgpu's cards.
    pub amd: &'a [AmdGpu],
    /// The Vulkan loader's devices.
    pub vulkan: &'a Result<Vec<VulkanGpu>, String>,
    /// Apple Metal / Neural Engine entries (empty elsewhere).
    pub apple: &'a [DeviceInfo],
}

fn dev(label: &str, name: String, mem_bytes: u64, unified: bool, available: bool) -> DeviceInfo {
    DeviceInfo {
        device: label.into(),
        name,
        mem_bytes,
        unified,
        gflops: 0.0,
        available,
        ..Default::default()
    }
}

/// Adds where a device sits and its PCIe link (sysfs's reading of the card,
/// else `fallback`, a vendor library's).
fn placed(
    mut d: DeviceInfo,
    addr: Option<PciAddr>,
    pci: &[PciDevice],
    fallback: Option<PcieLink>,
) -> DeviceInfo {
    d.pci = addr.map(|a| a.to_string());
    d.pcie = addr
        .and_then(|a| pci.iter().find(|p| p.addr == a))
        .and_then(|p| p.link)
        .or(fallback);
    d
}

/// Merges the sightings into the accelerator list (the `cpu` entry is added
/// by the caller). `name_of(vendor, device)` names a PCI device from
/// `pci.ids`, when it can.
pub fn assemble(s: &Sightings, name_of: &dyn Fn(u16, u16) -> Option<String>) -> Vec<DeviceInfo> {
    let pci_name = |p: &PciDevice, fallback: &str| {
        name_of(p.vendor, p.device).unwrap_or_else(|| format!("{fallback} {}", p.ids()))
    };
    let mut out = Vec::new();

    // CUDA: NVML's list, then NVIDIA cards NVML did not list.
    let nv = s.nvidia.as_ref().map(Vec::as_slice).unwrap_or_default();
    let nv_seen: HashSet<PciAddr> = nv.iter().filter_map(|g| g.pci).collect();
    for g in nv {
        let mut d = dev("cuda", g.name.clone(), g.mem_bytes, false, true);
        d.mem_free = g.mem_free;
        d.compute = g.compute.clone();
        d.driver = g.driver.clone();
        d.cuda = g.cuda.clone();
        d.mig = g.mig;
        d.peers = g.peers.clone();
        out.push(placed(d, g.pci, s.pci, g.pcie));
    }
    for p in s
        .pci
        .iter()
        .filter(|p| p.vendor == vendor::NVIDIA && !nv_seen.contains(&p.addr))
    {
        let why = match s.nvidia {
            Err(reason) => reason.clone(),
            Ok(_) => format!("not visible to NVML (driver: {})", p.driver_text()),
        };
        let name = format!("{} at {}: {why}", pci_name(p, "NVIDIA GPU"), p.addr);
        out.push(dev("cuda", name, 0, false, false));
    }

    // Which card each Vulkan device is: used below to list each card once
    // per target, and here to learn which AMD cards are integrated (amdgpu's
    // sysfs does not say; Vulkan's device type does).
    let vk = s.vulkan.as_ref().map(Vec::as_slice).unwrap_or_default();
    let vk_cards = match_vulkan_cards(vk, s.pci);
    let integrated: HashSet<PciAddr> = vk
        .iter()
        .zip(&vk_cards)
        .filter(|(g, _)| g.kind == VulkanKind::Integrated)
        .filter_map(|(_, card)| *card)
        .collect();

    // ROCm: amdgpu's cards, then AMD cards without amdgpu.
    let amd_seen: HashSet<PciAddr> = s.amd.iter().filter_map(|g| g.pci).collect();
    for g in s.amd {
        let base = g
            .product_name
            .clone()
            .or_else(|| name_of(vendor::AMD, g.device))
            .unwrap_or_else(|| format!("AMD GPU {:04x}:{:04x}", vendor::AMD, g.device));
        // An APU's VRAM is a carve-out of host RAM.
        let unified = g.pci.is_some_and(|a| integrated.contains(&a));
        let mut d = if g.rocm_capable() {
            dev("rocm", base, g.mem_bytes, unified, true)
        } else {
            let driver = g.driver.as_deref().unwrap_or("none");
            let name = format!("{base}: ROCm needs the amdgpu driver (driver: {driver})");
            dev("rocm", name, g.mem_bytes, unified, false)
        };
        d.mem_free = g.mem_free;
        d.gfx = g.gfx.clone();
        out.push(placed(d, g.pci, s.pci, None));
    }
    for p in s
        .pci
        .iter()
        .filter(|p| p.vendor == vendor::AMD && !amd_seen.contains(&p.addr))
    {
        let name = format!(
            "{} at {}: amdgpu driver not bound (driver: {})",
            pci_name(p, "AMD GPU"),
            p.addr,
            p.driver_text()
        );
        out.push(dev("rocm", name, 0, false, false));
    }

    // Vulkan: the loader's devices, each PCI card once; then Intel GPUs the
    // loader did not list.
    let mut vk_seen: HashSet<PciAddr> = HashSet::new();
    for (g, card) in vk.iter().zip(vk_cards) {
        if g.kind == VulkanKind::Cpu {
            tracing::debug!(name = %g.name, "software Vulkan renderer is the CPU; not reported");
            continue;
        }
        if let Some(addr) = card {
            if !vk_seen.insert(addr) {
                tracing::debug!(name = %g.name, %addr, "second Vulkan driver for one card; listed once");
                continue;
            }
        }
        let unified = g.kind == VulkanKind::Integrated;
        let mut d = dev("vulkan", g.name.clone(), g.mem_bytes, unified, true);
        d.mem_free = g.mem_free;
        out.push(placed(d, card, s.pci, None));
    }
    for p in s
        .pci
        .iter()
        .filter(|p| p.vendor == vendor::INTEL && p.class >> 8 == 0x03 && !vk_seen.contains(&p.addr))
    {
        let why = match s.vulkan {
            Err(reason) => reason.clone(),
            Ok(_) => "not listed by the Vulkan loader".to_string(),
        };
        let name = format!("{} at {}: {why}", pci_name(p, "Intel GPU"), p.addr);
        out.push(dev("vulkan", name, 0, false, false));
    }

    out.extend(s.apple.iter().cloned());

    // Everything no probe could name keeps its raw PCI identity.
    for p in s.pci {
        let known_vendor = p.vendor == vendor::NVIDIA
            || p.vendor == vendor::AMD
            || (p.vendor == vendor::INTEL && p.class >> 8 == 0x03);
        if known_vendor || vk_seen.contains(&p.addr) {
            continue;
        }
        let what = name_of(p.vendor, p.device)
            .unwrap_or_else(|| format!("unknown {}", class_name(p.class)));
        let label = format!("pci-{}", p.ids());
        tracing::info!(%label, addr = %p.addr, "accelerator this build cannot name; reported by its PCI ids");
        out.push(dev(
            &label,
            format!("{what} at {}", p.addr),
            0,
            false,
            false,
        ));
    }
    out
}

/// The PCI card behind each Vulkan device: the exact bus address when the
/// driver gives one (`VK_EXT_pci_bus_info`), else the first card with the
/// same ids not matched yet (identical twins are interchangeable here).
/// Two drivers for one card give the same address twice.
fn match_vulkan_cards(vk: &[VulkanGpu], pci: &[PciDevice]) -> Vec<Option<PciAddr>> {
    let mut taken: HashSet<PciAddr> = vk.iter().filter_map(|g| g.pci).collect();
    vk.iter()
        .map(|g| {
            if g.pci.is_some() || g.kind == VulkanKind::Cpu {
                return g.pci;
            }
            let card = pci
                .iter()
                .find(|p| {
                    u32::from(p.vendor) == g.vendor
                        && u32::from(p.device) == g.device
                        && !taken.contains(&p.addr)
                })
                .map(|p| p.addr);
            taken.extend(card);
            card
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pci(addr: &str, vendor: u16, device: u16, class: u16) -> PciDevice {
        PciDevice {
            addr: addr.parse().unwrap(),
            class,
            vendor,
            device,
            driver: None,
            link: None,
        }
    }

    fn nv(name: &str, mem: u64, addr: &str) -> NvidiaGpu {
        NvidiaGpu {
            name: name.into(),
            mem_bytes: mem,
            pci: Some(addr.parse().unwrap()),
            ..Default::default()
        }
    }

    fn vkdev(
        name: &str,
        kind: VulkanKind,
        ids: (u32, u32),
        mem: u64,
        addr: Option<&str>,
    ) -> VulkanGpu {
        VulkanGpu {
            name: name.into(),
            kind,
            vendor: ids.0,
            device: ids.1,
            mem_bytes: mem,
            pci: addr.map(|a| a.parse().unwrap()),
            mem_free: 0,
        }
    }

    fn run(
        pci: &[PciDevice],
        nvidia: Result<Vec<NvidiaGpu>, String>,
        amd: &[AmdGpu],
        vulkan: Result<Vec<VulkanGpu>, String>,
    ) -> Vec<DeviceInfo> {
        let s = Sightings {
            pci,
            nvidia: &nvidia,
            amd,
            vulkan: &vulkan,
            apple: &[],
        };
        assemble(&s, &|_, _| None)
    }

    fn labels(d: &[DeviceInfo]) -> Vec<(&str, bool)> {
        d.iter().map(|d| (d.device.as_str(), d.available)).collect()
    }

    const GB: u64 = 1 << 30;

    #[test]
    fn every_gpu_nvml_lists_is_reported_and_claims_its_pci_card() {
        let bus = [
            pci("0000:01:00.0", 0x10de, 0x2684, 0x0300),
            pci("0000:02:00.0", 0x10de, 0x2684, 0x0300),
        ];
        let d = run(
            &bus,
            Ok(vec![
                nv("RTX 4090", 24 * GB, "00000000:01:00.0"),
                nv("RTX 4090", 24 * GB, "00000000:02:00.0"),
            ]),
            &[],
            Err("no loader".into()),
        );
        assert_eq!(labels(&d), [("cuda", true), ("cuda", true)], "{d:#?}");
    }

    /// Guards against the "no NVML means no GPU" mistake: the card is there,
    /// the user needs to hear that it cannot be used yet.
    #[test]
    fn nvidia_cards_without_nvml_are_cuda_but_unavailable_with_the_reason() {
        let bus = [pci("0000:01:00.0", 0x10de, 0x2330, 0x0302)];
        let d = run(
            &bus,
            Err("NVIDIA driver not loaded".into()),
            &[],
            Err("no loader".into()),
        );
        assert_eq!(labels(&d), [("cuda", false)]);
        assert!(
            d[0].name.contains("driver not loaded") && d[0].name.contains("0000:01:00.0"),
            "{}",
            d[0].name
        );
        assert_eq!(d[0].mem_bytes, 0);
    }

    #[test]
    fn a_card_nvml_does_not_list_is_reported_with_its_driver() {
        let mut passthrough = pci("0000:02:00.0", 0x10de, 0x2330, 0x0302);
        passthrough.driver = Some("vfio-pci".into());
        let bus = [pci("0000:01:00.0", 0x10de, 0x2330, 0x0302), passthrough];
        let d = run(
            &bus,
            Ok(vec![nv("H100", 80 * GB, "0000:01:00.0")]),
            &[],
            Err("x".into()),
        );
        assert_eq!(labels(&d), [("cuda", true), ("cuda", false)]);
        assert!(d[1].name.contains("vfio-pci"), "{}", d[1].name);
    }

    /// Decision: Vulkan is a different target, so a CUDA card also appears as
    /// `vulkan`; the cuda entry comes first so it wins memory ties.
    #[test]
    fn the_vulkan_view_of_a_cuda_gpu_is_listed_after_it() {
        let bus = [pci("0000:01:00.0", 0x10de, 0x2684, 0x0300)];
        let d = run(
            &bus,
            Ok(vec![nv("RTX 4090", 24 * GB, "0000:01:00.0")]),
            &[],
            Ok(vec![vkdev(
                "NVIDIA GeForce RTX 4090",
                VulkanKind::Discrete,
                (0x10de, 0x2684),
                24 * GB,
                None,
            )]),
        );
        assert_eq!(labels(&d), [("cuda", true), ("vulkan", true)]);
        assert_eq!(d[1].mem_bytes, 24 * GB);
        assert!(!d[1].unified);
    }

    /// Each view of a card carries its details: NVML's for `cuda`, the
    /// Vulkan budget for `vulkan`, and sysfs's PCIe link for both.
    #[test]
    fn every_view_of_a_card_carries_its_free_memory_and_the_cards_pcie_link() {
        let mut bus = [pci("0000:01:00.0", 0x10de, 0x2684, 0x0300)];
        bus[0].link = Some(PcieLink { gen: 4, width: 8 });
        let mut g = nv("RTX 4090", 24 * GB, "0000:01:00.0");
        g.mem_free = 20 * GB;
        g.compute = Some("8.9".into());
        g.pcie = Some(PcieLink { gen: 1, width: 16 });
        let mut v = vkdev(
            "NVIDIA GeForce RTX 4090",
            VulkanKind::Discrete,
            (0x10de, 0x2684),
            24 * GB,
            Some("0000:01:00.0"),
        );
        v.mem_free = 19 * GB;
        let d = run(&bus, Ok(vec![g]), &[], Ok(vec![v]));
        assert_eq!((d[0].mem_free, d[1].mem_free), (20 * GB, 19 * GB));
        assert_eq!(d[0].compute.as_deref(), Some("8.9"));
        let sysfs = Some(PcieLink { gen: 4, width: 8 });
        assert_eq!(
            (d[0].pcie, d[1].pcie),
            (sysfs, sysfs),
            "sysfs wins over NVML"
        );
        assert_eq!(d[1].pci.as_deref(), Some("0000:01:00.0"));
        // Without a sysfs reading, NVML's is used.
        let mut g = nv("RTX 4090", 24 * GB, "0000:01:00.0");
        g.pcie = Some(PcieLink { gen: 1, width: 16 });
        let bare = [pci("0000:01:00.0", 0x10de, 0x2684, 0x0300)];
        let d = run(&bare, Ok(vec![g]), &[], Err("x".into()));
        assert_eq!(d[0].pcie, Some(PcieLink { gen: 1, width: 16 }));
    }

    #[test]
    fn two_vulkan_drivers_for_one_card_give_one_entry_but_twins_give_two() {
        let bus = [
            pci("0000:01:00.0", 0x10de, 0x2684, 0x0300),
            pci("0000:02:00.0", 0x10de, 0x2684, 0x0300),
        ];
        let v = |a: &str| {
            vkdev(
                "RTX 4090",
                VulkanKind::Discrete,
                (0x10de, 0x2684),
                24 * GB,
                Some(a),
            )
        };
        let d = run(
            &bus,
            Err("x".into()),
            &[],
            Ok(vec![
                v("0000:01:00.0"),
                v("0000:01:00.0"),
                v("0000:02:00.0"),
            ]),
        );
        let vk: Vec<_> = d.iter().filter(|d| d.device == "vulkan").collect();
        assert_eq!(vk.len(), 2, "{d:#?}");
        // Without bus info, identical twins are matched one card each.
        let nobus = vkdev(
            "RTX 4090",
            VulkanKind::Discrete,
            (0x10de, 0x2684),
            24 * GB,
            None,
        );
        let d = run(&bus, Err("x".into()), &[], Ok(vec![nobus.clone(), nobus]));
        assert_eq!(d.iter().filter(|d| d.device == "vulkan").count(), 2);
    }

    #[test]
    fn integrated_vulkan_gpus_are_unified_and_software_renderers_are_dropped() {
        let bus = [pci("0000:00:02.0", 0x8086, 0x46a6, 0x0300)];
        let d = run(
            &bus,
            Err("x".into()),
            &[],
            Ok(vec![
                vkdev(
                    "Intel(R) Iris(R) Xe Graphics",
                    VulkanKind::Integrated,
                    (0x8086, 0x46a6),
                    8 * GB,
                    None,
                ),
                vkdev(
                    "llvmpipe (LLVM 15.0.6, 256 bits)",
                    VulkanKind::Cpu,
                    (0x10005, 0),
                    16 * GB,
                    None,
                ),
            ]),
        );
        assert_eq!(labels(&d), [("vulkan", true)], "{d:#?}");
        assert!(d[0].unified);
    }

    #[test]
    fn intel_gpus_without_a_vulkan_driver_are_vulkan_but_unavailable() {
        let bus = [pci("0000:00:02.0", 0x8086, 0x46a6, 0x0300)];
        let d = run(
            &bus,
            Err("x".into()),
            &[],
            Err("no Vulkan loader (libvulkan.so.1)".into()),
        );
        assert_eq!(labels(&d), [("vulkan", false)]);
        assert!(d[0].name.contains("no Vulkan loader"), "{}", d[0].name);
    }

    /// Guards against an unknown vendor's card being dropped or counted as
    /// CPU: it keeps its raw PCI identity.
    #[test]
    fn an_accelerator_nobody_can_name_keeps_a_raw_pci_label() {
        let bus = [
            pci("0000:41:00.0", 0x1e52, 0x401e, 0x1200),
            pci("0000:00:0b.0", 0x8086, 0x7d1d, 0x1200),
        ];
        let d = run(&bus, Err("x".into()), &[], Err("x".into()));
        assert_eq!(
            labels(&d),
            [("pci-1e52:401e", false), ("pci-8086:7d1d", false)]
        );
        assert!(d[0].name.contains("processing accelerator") && d[0].name.contains("0000:41:00.0"));
        assert_eq!(d[0].mem_bytes, 0);
    }

    #[test]
    fn a_vulkan_driver_names_an_otherwise_unknown_card() {
        let bus = [pci("0000:03:00.0", 0x1ed5, 0x0300, 0x0300)];
        let d = run(
            &bus,
            Err("x".into()),
            &[],
            Ok(vec![vkdev(
                "MTT S80",
                VulkanKind::Discrete,
                (0x1ed5, 0x0300),
                16 * GB,
                None,
            )]),
        );
        assert_eq!(labels(&d), [("vulkan", true)]);
    }

    #[test]
    fn amd_cards_come_from_sysfs_and_those_without_amdgpu_are_unavailable() {
        let amd = [
            AmdGpu {
                card: "card0".into(),
                pci: Some("0000:03:00.0".parse().unwrap()),
                device: 0x744c,
                product_name: None,
                mem_bytes: 24 * GB,
                driver: Some("amdgpu".into()),
                mem_free: 0,
                gfx: None,
            },
            AmdGpu {
                card: "card1".into(),
                pci: Some("0000:04:00.0".parse().unwrap()),
                device: 0x6798,
                product_name: None,
                mem_bytes: 0,
                driver: Some("radeon".into()),
                mem_free: 0,
                gfx: None,
            },
        ];
        let bus = [
            pci("0000:03:00.0", 0x1002, 0x744c, 0x0300),
            pci("0000:04:00.0", 0x1002, 0x6798, 0x0300),
            pci("0000:05:00.0", 0x1002, 0x74a1, 0x1200),
        ];
        let d = run(&bus, Err("x".into()), &amd, Err("x".into()));
        assert_eq!(
            labels(&d),
            [("rocm", true), ("rocm", false), ("rocm", false)],
            "{d:#?}"
        );
        assert_eq!(d[0].name, "AMD GPU 1002:744c");
        assert!(d[1].name.contains("radeon"));
        assert!(d[2].name.contains("not bound"));
    }
}
