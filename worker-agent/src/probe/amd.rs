//! **AMD GPUs through amdgpu's sysfs files** — no library needed: the
//! amdgpu kernel driver (the one ROCm runs on) publishes each card's VRAM
//! size in `/sys/class/drm/cardN/device/mem_info_vram_total`.

use super::pci::{vendor, PciAddr};
use super::root::Root;

/// One AMD GPU seen through DRM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdGpu {
    /// The DRM card (`card0`), for logs.
    pub card: String,
    /// Where it sits, to match it with the PCI scan.
    pub pci: Option<PciAddr>,
    /// PCI device id, to name it from `pci.ids` when amdgpu gives no name.
    pub device: u16,
    /// `product_name` from the board's FRU EEPROM (server cards have one).
    pub product_name: Option<String>,
    /// VRAM in bytes; 0 when amdgpu did not say.
    pub mem_bytes: u64,
    /// Kernel driver bound to the card.
    pub driver: Option<String>,
    /// VRAM not in use when probed (total minus `mem_info_vram_used`),
    /// bytes; 0 = unknown.
    pub mem_free: u64,
    /// The LLVM target ROCm compiles for (`gfx1100`), from the KFD topology.
    pub gfx: Option<String>,
}

impl AmdGpu {
    /// ROCm runs on the amdgpu driver only: a card driven by the legacy
    /// `radeon` driver (or none) is present but not usable. `mem_info_*`
    /// files exist only under amdgpu, so they count as proof too.
    pub fn rocm_capable(&self) -> bool {
        self.driver.as_deref() == Some("amdgpu") || self.mem_bytes > 0
    }
}

/// Every `card<N>` under `/sys/class/drm` whose PCI vendor is AMD, in card
/// order. Connector entries (`card0-DP-1`) and render nodes are skipped.
pub fn scan(root: &Root) -> Vec<AmdGpu> {
    let mut cards: Vec<(u32, String)> = root
        .list("/sys/class/drm")
        .into_iter()
        .filter_map(|n| Some((n.strip_prefix("card")?.parse().ok()?, n)))
        .collect();
    cards.sort();
    let kfd = gfx_targets(root);
    let mut out = Vec::new();
    for (_, card) in cards {
        let dev = format!("/sys/class/drm/{card}/device");
        if root.read_hex(format!("{dev}/vendor")) != Some(u32::from(vendor::AMD)) {
            continue;
        }
        let mem_bytes = root
            .read_u64(format!("{dev}/mem_info_vram_total"))
            .unwrap_or(0);
        if mem_bytes == 0 {
            tracing::debug!(%card, "amdgpu reports no VRAM size");
        }
        let used = root.read_u64(format!("{dev}/mem_info_vram_used"));
        let pci: Option<PciAddr> = root.link_name(&dev).and_then(|n| n.parse().ok());
        out.push(AmdGpu {
            gfx: pci.and_then(|a| kfd.get(&a).cloned()),
            mem_free: used.map_or(0, |u| mem_bytes.saturating_sub(u)),
            pci,
            device: root.read_hex(format!("{dev}/device")).unwrap_or(0) as u16,
            product_name: root
                .read(format!("{dev}/product_name"))
                .filter(|s| !s.is_empty()),
            mem_bytes,
            driver: root.link_name(format!("{dev}/driver")),
            card,
        });
    }
    out
}

/// The gfx target of each GPU the ROCm kernel driver (KFD) knows, by PCI
/// address. `/sys/class/kfd/kfd/topology/nodes/N/properties` holds one
/// `key value` per line; GPU nodes have a `gfx_target_version` (major *
/// 10000 + minor * 100 + stepping: 110000 is gfx1100, 90010 is gfx90a) and
/// say where they sit with `domain` and `location_id` (bus << 8 | device
/// << 3 | function). CPU nodes have version 0 and are skipped.
pub fn gfx_targets(root: &Root) -> std::collections::HashMap<PciAddr, String> {
    let base = "/sys/class/kfd/kfd/topology/nodes";
    let mut out = std::collections::HashMap::new();
    for node in root.list(base) {
        let Some(text) = root.read(format!("{base}/{node}/properties")) else {
            continue;
        };
        let prop = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
            })
        };
        let (Some(version), Some(loc)) = (prop("gfx_target_version"), prop("location_id")) else {
            continue;
        };
        if version == 0 {
            continue;
        }
        let addr = PciAddr {
            domain: prop("domain").unwrap_or(0) as u32,
            bus: (loc >> 8) as u8,
            device: ((loc >> 3) & 0x1f) as u8,
            function: (loc & 0x7) as u8,
        };
        out.insert(addr, gfx_name(version));
    }
    out
}

/// `gfx1100` from 110000: the major version in decimal, minor and stepping
/// as one hex digit each (LLVM's naming, e.g. gfx90a, gfx942).
pub fn gfx_name(version: u64) -> String {
    let (major, minor, step) = (version / 10000, (version / 100) % 100, version % 100);
    format!("gfx{major}{minor:x}{step:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kfd_target_versions_name_llvm_gfx_targets() {
        assert_eq!(gfx_name(110000), "gfx1100");
        assert_eq!(gfx_name(90010), "gfx90a");
        assert_eq!(gfx_name(90402), "gfx942");
        assert_eq!(gfx_name(100302), "gfx1032");
    }
}
