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
        out.push(AmdGpu {
            pci: root.link_name(&dev).and_then(|n| n.parse().ok()),
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
