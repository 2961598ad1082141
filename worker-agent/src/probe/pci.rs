//! **PCI devices that might compute** — display, 3D and processing-accelerator
//! functions from `/sys/bus/pci/devices`, the one inventory that sees every
//! card whether or not a driver or vendor library is installed.
//!
//! The vendor libraries (NVML, Vulkan) and amdgpu's sysfs files name devices
//! and give their memory; this scan is the safety net that makes sure a card
//! none of them claimed is still reported (see [`super::accel`]), and the
//! filter that keeps a server's management VGA or a VM's emulated display out
//! of the accelerator list.

use super::root::Root;
use rlx_proto::caps::PcieLink;
use std::cell::OnceCell;
use std::fmt;
use std::str::FromStr;

/// PCI vendor ids the probe treats specially.
pub mod vendor {
    /// NVIDIA: GPUs targeted through CUDA.
    pub const NVIDIA: u16 = 0x10de;
    /// AMD/ATI: GPUs targeted through ROCm.
    pub const AMD: u16 = 0x1002;
    /// Intel: GPUs targeted through Vulkan.
    pub const INTEL: u16 = 0x8086;
}

/// PCI base class + subclass (the upper 16 bits of the 24-bit class code)
/// of functions worth looking at: VGA, 3D controller (most datacenter GPUs),
/// other display controller (some Instinct cards), processing accelerator
/// (NPUs, TPUs and the like).
pub const COMPUTE_CLASSES: [u16; 4] = [0x0300, 0x0302, 0x0380, 0x1200];

/// Display functions that are known not to be accelerators, with why.
///
/// `None` as device id matches every device of the vendor. A server's BMC
/// exposes a tiny VGA for its remote console (ASPEED AST2x00, Matrox G200e
/// on HPE/Dell); a VM's emulated display is a frame buffer. Reporting them
/// would put a "GPU" with no compute in every server and VM.
pub const NOT_ACCELERATORS: &[(u16, Option<u16>, &str)] = &[
    (0x1a03, None, "ASPEED BMC management VGA"),
    (0x102b, None, "Matrox G200 management VGA"),
    (0x19e5, Some(0x1711), "HiSilicon BMC management VGA"),
    (0x1234, Some(0x1111), "QEMU standard VGA"),
    (0x1013, None, "Cirrus Logic emulated VGA"),
    (0x15ad, Some(0x0405), "VMware SVGA"),
    (0x1b36, Some(0x0100), "QXL paravirtual display"),
    (0x1af4, Some(0x1050), "virtio-gpu display"),
    (0x1414, Some(0x5353), "Hyper-V synthetic video"),
    (0x80ee, Some(0xbeef), "VirtualBox display"),
];

/// Why a display function is not an accelerator, if it is a known one.
pub fn not_an_accelerator(vendor: u16, device: u16) -> Option<&'static str> {
    NOT_ACCELERATORS
        .iter()
        .find(|(v, d, _)| *v == vendor && d.is_none_or(|d| d == device))
        .map(|(_, _, why)| *why)
}

/// A PCI address, `domain:bus:device.function`.
///
/// NVML prints the domain with 8 hex digits (`00000000:01:00.0`), sysfs with
/// 4 (`0000:01:00.0`); parsing both into numbers is what lets the two be
/// matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddr {
    /// PCI segment.
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number.
    pub device: u8,
    /// Function number.
    pub function: u8,
}

impl FromStr for PciAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{s}` is not a PCI address (expected dddd:bb:dd.f)");
        let (rest, function) = s.trim().rsplit_once('.').ok_or_else(bad)?;
        let mut parts = rest.rsplitn(3, ':');
        let device = parts.next().ok_or_else(bad)?;
        let bus = parts.next().ok_or_else(bad)?;
        let domain = parts.next().unwrap_or("0");
        let hex8 = |t: &str| u8::from_str_radix(t, 16).map_err(|_| bad());
        Ok(PciAddr {
            domain: u32::from_str_radix(domain, 16).map_err(|_| bad())?,
            bus: hex8(bus)?,
            device: hex8(device)?,
            function: hex8(function)?,
        })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Read from fixture files (`"pci": "0000:01:00.0"`).
impl<'de> serde::Deserialize<'de> for PciAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One display/accelerator function found on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// Where it sits.
    pub addr: PciAddr,
    /// Base class + subclass, e.g. `0x0302`.
    pub class: u16,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// The kernel driver bound to it (`nvidia`, `amdgpu`, `vfio-pci`), if any.
    pub driver: Option<String>,
    /// Its PCIe link as negotiated now, when sysfs says.
    pub link: Option<PcieLink>,
}

impl PciDevice {
    /// `vvvv:dddd`, the form `lspci -n` prints.
    pub fn ids(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor, self.device)
    }

    /// What the kernel has bound to it, for messages.
    pub fn driver_text(&self) -> &str {
        self.driver.as_deref().unwrap_or("none")
    }
}

/// Human name of a PCI class, for devices nobody else can name.
pub fn class_name(class: u16) -> &'static str {
    match class {
        0x0300 => "VGA controller",
        0x0302 => "3D controller",
        0x0380 => "display controller",
        0x1200 => "processing accelerator",
        _ => "PCI device",
    }
}

/// Lists the display/3D/accelerator functions under `/sys/bus/pci/devices`,
/// in address order. Management and emulated displays are dropped here, with
/// a debug log so `RUST_LOG=debug` shows why a card is missing.
pub fn scan(root: &Root) -> Vec<PciDevice> {
    let base = "/sys/bus/pci/devices";
    let mut found = Vec::new();
    for name in root.list(base) {
        let Ok(addr) = name.parse::<PciAddr>() else {
            continue;
        };
        let dir = format!("{base}/{name}");
        let Some(class) = root.read_hex(format!("{dir}/class")) else {
            continue;
        };
        let class = (class >> 8) as u16;
        if !COMPUTE_CLASSES.contains(&class) {
            continue;
        }
        let (Some(vendor), Some(device)) = (
            root.read_hex(format!("{dir}/vendor")),
            root.read_hex(format!("{dir}/device")),
        ) else {
            continue;
        };
        let (vendor, device) = (vendor as u16, device as u16);
        if let Some(why) = not_an_accelerator(vendor, device) {
            tracing::debug!(%addr, ids = format!("{vendor:04x}:{device:04x}"), why, "not an accelerator");
            continue;
        }
        found.push(PciDevice {
            addr,
            class,
            vendor,
            device,
            driver: root.link_name(format!("{dir}/driver")),
            link: pcie_link(root, &dir),
        });
    }
    found.sort_by_key(|d| d.addr);
    found
}

/// The negotiated PCIe link of the function at `dir`, from sysfs's
/// `current_link_speed` (`16.0 GT/s PCIe`; older kernels print `16 GT/s`)
/// and `current_link_width` (`16`). `None` when neither is readable (not
/// PCIe, a VM that hides them, a kernel before 4.13); a speed it does not
/// know gives generation 0, "unknown".
pub fn pcie_link(root: &Root, dir: &str) -> Option<PcieLink> {
    let speed = root.read(format!("{dir}/current_link_speed"));
    let width = root
        .read(format!("{dir}/current_link_width"))
        .and_then(|w| w.parse::<u8>().ok());
    let gen = speed.as_deref().and_then(pcie_gen);
    if gen.is_none() && width.is_none() {
        return None;
    }
    Some(PcieLink {
        gen: gen.unwrap_or(0),
        width: width.unwrap_or(0),
    })
}

/// PCIe generation from a transfer rate as sysfs prints it: each
/// generation doubles the rate from 5 GT/s on (gen 1 is 2.5 GT/s, gen 3 is
/// 8 GT/s after the encoding change).
fn pcie_gen(speed: &str) -> Option<u8> {
    let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
    [2.5, 5.0, 8.0, 16.0, 32.0, 64.0, 128.0]
        .iter()
        .position(|r| (gts - r).abs() < 0.01)
        .map(|i| i as u8 + 1)
}

/// Names from the `pci.ids` database (hwdata), when the machine has it.
///
/// Loaded on first use only: most probes name every device through NVML,
/// Vulkan or amdgpu and never need the 1.3 MB file.
#[derive(Debug)]
pub struct PciNames<'r> {
    root: &'r Root,
    text: OnceCell<Option<String>>,
}

impl<'r> PciNames<'r> {
    /// Where distributions install `pci.ids`.
    const PATHS: [&'static str; 3] = [
        "/usr/share/hwdata/pci.ids",
        "/usr/share/misc/pci.ids",
        "/usr/share/pci.ids",
    ];

    /// Names looked up under `root`.
    pub fn new(root: &'r Root) -> Self {
        PciNames {
            root,
            text: OnceCell::new(),
        }
    }

    /// A short human name such as `AMD/ATI Radeon RX 7900 XTX`, or `None`
    /// when the database is missing or does not know the device.
    pub fn name(&self, vendor: u16, device: u16) -> Option<String> {
        let text = self
            .text
            .get_or_init(|| {
                Self::PATHS
                    .iter()
                    .find_map(|p| std::fs::read_to_string(self.root.path(p)).ok())
            })
            .as_deref()?;
        lookup(text, vendor, device)
    }
}

/// Looks a device up in `pci.ids` text. Vendor lines start at column 0
/// (`10de  NVIDIA Corporation`), their devices follow indented by one tab.
/// Prefers the bracketed marketing name (`Navi 31 [Radeon RX 7900 XTX]`
/// gives `Radeon RX 7900 XTX`).
pub fn lookup(text: &str, vendor: u16, device: u16) -> Option<String> {
    let v_key = format!("{vendor:04x}  ");
    let d_key = format!("\t{device:04x}  ");
    let mut lines = text.lines();
    let vendor_name = lines.by_ref().find_map(|l| l.strip_prefix(&v_key))?;
    let device_name = lines
        .take_while(|l| l.starts_with('\t') || l.starts_with('#') || l.is_empty())
        .find_map(|l| l.strip_prefix(&d_key))?;
    let short = |s: &str| -> String {
        match (s.find('['), s.rfind(']')) {
            (Some(a), Some(b)) if a < b => s[a + 1..b].to_string(),
            _ => s.trim().to_string(),
        }
    };
    Some(format!("{} {}", short(vendor_name), short(device_name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_generations_are_read_from_the_transfer_rate_sysfs_prints() {
        for (speed, gen) in [
            ("2.5 GT/s PCIe", Some(1)),
            ("5.0 GT/s PCIe", Some(2)),
            ("8 GT/s", Some(3)),
            ("16.0 GT/s PCIe", Some(4)),
            ("32.0 GT/s PCIe", Some(5)),
            ("64.0 GT/s PCIe", Some(6)),
            ("Unknown", None),
            ("", None),
        ] {
            assert_eq!(pcie_gen(speed), gen, "{speed:?}");
        }
    }

    #[test]
    fn nvml_and_sysfs_spellings_of_one_address_are_equal() {
        let nvml: PciAddr = "00000000:01:00.0".parse().unwrap();
        let sysfs: PciAddr = "0000:01:00.0".parse().unwrap();
        assert_eq!(nvml, sysfs);
        assert_eq!(sysfs.to_string(), "0000:01:00.0");
        assert_eq!(
            "0001:c1:1f.7".parse::<PciAddr>().unwrap().to_string(),
            "0001:c1:1f.7"
        );
        assert!("card0".parse::<PciAddr>().is_err());
        assert!("0000:01:00".parse::<PciAddr>().is_err());
    }

    #[test]
    fn management_and_emulated_displays_are_not_accelerators() {
        assert!(
            not_an_accelerator(0x1a03, 0x2000).is_some(),
            "ASPEED AST2500"
        );
        assert!(
            not_an_accelerator(0x102b, 0x0536).is_some(),
            "Matrox G200eW3"
        );
        assert!(not_an_accelerator(0x1234, 0x1111).is_some(), "QEMU VGA");
        assert!(
            not_an_accelerator(0x10de, 0x2684).is_none(),
            "an RTX 4090 is one"
        );
        assert!(
            not_an_accelerator(0x1af4, 0x1041).is_none(),
            "only virtio's GPU id is listed"
        );
    }

    #[test]
    fn pci_ids_lookup_prefers_bracketed_names() {
        let db = "# comment\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]\n\t\t1002 0e3b  sub\n10de  NVIDIA Corporation\n\t2684  AD102 [GeForce RTX 4090]\n\t2330  GH100 SXM5 80GB\n1e52  Tenstorrent Inc\n\t401e  Wormhole\n";
        assert_eq!(
            lookup(db, 0x1002, 0x744c).as_deref(),
            Some("AMD/ATI Radeon RX 7900 XT/7900 XTX")
        );
        assert_eq!(
            lookup(db, 0x10de, 0x2330).as_deref(),
            Some("NVIDIA Corporation GH100 SXM5 80GB")
        );
        assert_eq!(
            lookup(db, 0x1e52, 0x401e).as_deref(),
            Some("Tenstorrent Inc Wormhole")
        );
        assert_eq!(
            lookup(db, 0x1002, 0x2684),
            None,
            "a device id under another vendor does not match"
        );
        assert_eq!(lookup(db, 0xabcd, 0x0001), None);
    }
}
