//! **What each link is** — the kind of an interface (Ethernet, Wi-Fi,
//! Thunderbolt, InfiniBand, virtual), its negotiated speed, its MTU and
//! whether RDMA runs over it, as the system knows them. No traffic is sent:
//! these are the kernel's words, not measurements.
//!
//! ```no_run
//! let ifaces = rlx_net::iface::default_interfaces()?;
//! for l in rlx_net::linkfacts::facts(&ifaces) {
//!     println!("{} {} {:?} Mbit/s mtu {}", l.name, l.kind.label(), l.speed_mbps, l.mtu);
//! }
//! # Ok::<(), rlx_net::iface::IfaceError>(())
//! ```
//!
//! A placement planner needs to know whether the Mac is on Wi-Fi or on
//! 10 GbE before it hands it a pipeline stage; Nomad reads the same sysfs
//! `speed` file for its fingerprint, exo labels interfaces the same way.
//!
//! # Platforms
//! - **Linux**: `/sys/class/net/<if>/` ([`read_sysfs`], testable on a fake
//!   root): `type` (ARPHRD: 1 Ethernet, 32 InfiniBand, 772 loopback),
//!   `wireless` or `phy80211` (Wi-Fi), `device/subsystem` (`thunderbolt`
//!   for thunderbolt-net), no `device` at all (a virtual link: bridge, veth,
//!   tun), `lower_*` (a bond or VLAN takes its first lower link's kind),
//!   `speed` (Mbit/s; -1 or unreadable when unknown, as on Wi-Fi and down
//!   links), `mtu`. RDMA: an RDMA device in `/sys/class/infiniband` on the
//!   same PCI function (`device/infiniband/`, or a matching `device` link),
//!   or a soft-RoCE device whose `parent` names the interface.
//! - **macOS**: `getifaddrs`' `AF_LINK` entries carry an `if_data` with
//!   `ifi_mtu`, `ifi_baudrate` (bit/s, 32 bits: a port faster than
//!   4.29 Gbit/s has no speed here yet) and `ifi_type`. macOS types Wi-Fi
//!   and Thunderbolt ports as Ethernet (`IFT_ETHER`) too; telling them
//!   apart needs the SystemConfiguration framework, which is not used yet,
//!   so a Mac's ports are `ethernet` or, for bridges and tunnels, `virtual`.
//! - **Elsewhere**: kind `unknown`, no speed, MTU 0.

use crate::iface::{is_virtual_name, Iface};
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// What an interface is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Wired Ethernet (RoCE-capable when [`LinkFacts::rdma`] is set).
    Ethernet,
    /// IEEE 802.11.
    Wifi,
    /// IP over Thunderbolt / USB4 (thunderbolt-net).
    Thunderbolt,
    /// IP over InfiniBand.
    Infiniband,
    /// No hardware behind it: loopback, bridge, veth, tunnel.
    Virtual,
    /// The system did not say.
    Unknown,
}

impl LinkKind {
    /// The wire label used in the caps JSON.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Ethernet => "ethernet",
            LinkKind::Wifi => "wifi",
            LinkKind::Thunderbolt => "thunderbolt",
            LinkKind::Infiniband => "infiniband",
            LinkKind::Virtual => "virtual",
            LinkKind::Unknown => "unknown",
        }
    }
}

/// What the system knows of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFacts {
    /// Kernel name.
    pub name: String,
    /// Its kind.
    pub kind: LinkKind,
    /// Negotiated speed, Mbit/s, when known.
    pub speed_mbps: Option<u64>,
    /// MTU, bytes; 0 when unknown.
    pub mtu: u32,
    /// Its addresses.
    pub addrs: Vec<IpAddr>,
    /// An RDMA device runs over it.
    pub rdma: bool,
}

/// The facts of each of `ifaces` on this host (see the module docs for
/// what each platform can tell).
pub fn facts(ifaces: &[Iface]) -> Vec<LinkFacts> {
    #[cfg(target_os = "macos")]
    let data = macos::link_data();
    ifaces
        .iter()
        .map(|i| {
            let addrs: Vec<IpAddr> = i.addrs.iter().map(|n| n.addr()).collect();
            #[cfg(target_os = "linux")]
            {
                read_sysfs(Path::new("/"), &i.name, addrs)
            }
            #[cfg(target_os = "macos")]
            {
                macos::facts(&i.name, addrs, data.get(&i.name))
            }
            #[cfg(not(any(target_os = "linux", target_os = "macos")))]
            {
                LinkFacts {
                    name: i.name.clone(),
                    kind: LinkKind::Unknown,
                    speed_mbps: None,
                    mtu: 0,
                    addrs,
                    rdma: false,
                }
            }
        })
        .collect()
}

/// Reads the facts of interface `name` from a Linux sysfs under `root`
/// (`/` on the host, a fixture tree in tests).
pub fn read_sysfs(root: &Path, name: &str, addrs: Vec<IpAddr>) -> LinkFacts {
    let dir = root.join("sys/class/net").join(name);
    let speed_mbps = read(&dir.join("speed"))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|s| *s > 0)
        .map(|s| s as u64);
    LinkFacts {
        name: name.to_string(),
        kind: kind(root, name, 0),
        speed_mbps,
        mtu: read(&dir.join("mtu"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        addrs,
        rdma: rdma(root, name),
    }
}

/// ARPHRD values from `<linux/if_arp.h>`.
const ARPHRD_ETHER: u32 = 1;
const ARPHRD_INFINIBAND: u32 = 32;
const ARPHRD_LOOPBACK: u32 = 772;

/// The kind of `name`; `depth` bounds the walk down stacked links (a VLAN
/// on a bond on two ports is depth 2).
fn kind(root: &Path, name: &str, depth: u8) -> LinkKind {
    let dir = root.join("sys/class/net").join(name);
    let ty: Option<u32> = read(&dir.join("type")).and_then(|s| s.parse().ok());
    if ty == Some(ARPHRD_INFINIBAND) {
        return LinkKind::Infiniband;
    }
    if ty == Some(ARPHRD_LOOPBACK) {
        return LinkKind::Virtual;
    }
    if dir.join("wireless").exists() || dir.join("phy80211").exists() {
        return LinkKind::Wifi;
    }
    if link_name(&dir.join("device/subsystem")).as_deref() == Some("thunderbolt") {
        return LinkKind::Thunderbolt;
    }
    let lower = list(&dir)
        .into_iter()
        .find_map(|e| e.strip_prefix("lower_").map(str::to_string));
    if let Some(lower) = lower.filter(|_| depth < 4) {
        return kind(root, &lower, depth + 1);
    }
    if fs::symlink_metadata(dir.join("device")).is_err() || is_virtual_name(name) {
        return LinkKind::Virtual;
    }
    match ty {
        Some(ARPHRD_ETHER) => LinkKind::Ethernet,
        _ => LinkKind::Unknown,
    }
}

/// Whether an RDMA device is bound to `name` (see the module docs).
fn rdma(root: &Path, name: &str) -> bool {
    let dir = root.join("sys/class/net").join(name);
    if !list(&dir.join("device/infiniband")).is_empty() {
        return true;
    }
    let function = link_name(&dir.join("device"));
    let ib = root.join("sys/class/infiniband");
    list(&ib).iter().any(|dev| {
        let d = ib.join(dev);
        read(&d.join("parent")).as_deref() == Some(name)
            || (function.is_some() && link_name(&d.join("device")) == function)
    })
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn link_name(p: &Path) -> Option<String> {
    let t: PathBuf = fs::read_link(p).ok()?;
    Some(t.file_name()?.to_string_lossy().into_owned())
}

fn list(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(target_os = "macos")]
mod macos {
    //! `if_data` from `getifaddrs`' `AF_LINK` entries.
    use super::{LinkFacts, LinkKind};
    use crate::iface::is_virtual_name;
    use std::collections::HashMap;
    use std::net::IpAddr;

    /// `ifi_type`, `ifi_mtu`, `ifi_baudrate` (bit/s) by interface name.
    pub(super) type Data = HashMap<String, (u8, u32, u64)>;

    /// `IFT_ETHER`, `IFT_LOOP`, `IFT_BRIDGE` from `<net/if_types.h>`.
    const IFT_ETHER: u8 = 0x06;
    const IFT_LOOP: u8 = 0x18;
    const IFT_BRIDGE: u8 = 0xd1;

    pub(super) fn link_data() -> Data {
        let mut out = Data::new();
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs fills `head` with a list we free below.
        if unsafe { libc::getifaddrs(&mut head) } != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "getifaddrs failed; no link facts");
            return out;
        }
        let mut p = head;
        while !p.is_null() {
            // SAFETY: `p` is a node of the list getifaddrs returned.
            let ifa = unsafe { &*p };
            // SAFETY: a non-null ifa_addr points at a sockaddr; AF_LINK
            // entries' ifa_data points at their `if_data` (getifaddrs(3)).
            unsafe {
                if !ifa.ifa_addr.is_null()
                    && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_LINK
                    && !ifa.ifa_data.is_null()
                {
                    let d = &*(ifa.ifa_data as *const libc::if_data);
                    let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned();
                    out.insert(name, (d.ifi_type, d.ifi_mtu, u64::from(d.ifi_baudrate)));
                }
            }
            p = ifa.ifa_next;
        }
        // SAFETY: `head` came from getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(head) };
        out
    }

    pub(super) fn facts(name: &str, addrs: Vec<IpAddr>, d: Option<&(u8, u32, u64)>) -> LinkFacts {
        let (ty, mtu, baud) = d.copied().unwrap_or((0, 0, 0));
        let kind = match ty {
            _ if is_virtual_name(name) => LinkKind::Virtual,
            IFT_LOOP | IFT_BRIDGE => LinkKind::Virtual,
            IFT_ETHER => LinkKind::Ethernet,
            _ => LinkKind::Unknown,
        };
        LinkFacts {
            name: name.to_string(),
            kind,
            // The 32-bit field saturates above 4.29 Gbit/s: a 10 GbE port
            // reads u32::MAX, which is a floor, not a speed (`if_data64`
            // from sysctl NET_RT_IFLIST2 would hold it; not read yet).
            speed_mbps: (baud >= 1_000_000 && baud < u64::from(u32::MAX))
                .then_some(baud / 1_000_000),
            mtu,
            addrs,
            rdma: false,
        }
    }
}

#[cfg(test)]
mod tests;
