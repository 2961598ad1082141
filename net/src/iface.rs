//! **Which network interfaces mDNS uses, and which address a node gets** —
//! one rule shared by the agent and the coordinator.
//!
//! ```toml
//! [discover]
//! interfaces = ["eth0"]   # default: every up, multicast-capable, non-virtual interface
//! ```
//!
//! By default both sides use every interface that is up, multicast-capable,
//! has an address, and is not loopback, point-to-point or a known virtual
//! link ([`is_virtual_name`]): a coordinator that browsed `docker0` would
//! find containers, and one that browsed a VPN would leak the cluster's
//! announcements to it. `--interface` / `interfaces = [...]` override the
//! rule, and may name any existing interface, `lo` included: a test namespace
//! holding many agents on one host has only loopback (see [`select`]).
//!
//! Which of a node's addresses is dialled is not decided here: one rule for
//! every source does that (`rlx_discover`'s `pipeline/prefer.rs`,
//! docs/protocol.md, "Which address a machine on several networks gets").

use ipnet::IpNet;
use nix::net::if_::InterfaceFlags;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// One network interface and its IP addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Kernel name (`eth0`, `wlp3s0`, `lo`).
    pub name: String,
    /// Kernel interface index (what IPv6 scope ids and `IP_MULTICAST_IF` use).
    pub index: u32,
    /// `IFF_*` flags as reported by `getifaddrs`.
    pub flags: InterfaceFlags,
    /// IPv4 and IPv6 addresses with their prefix lengths, in kernel order.
    pub addrs: Vec<IpNet>,
}

impl Iface {
    /// `IFF_UP`: administratively up.
    pub fn is_up(&self) -> bool {
        self.flags.contains(InterfaceFlags::IFF_UP)
    }

    /// `IFF_LOOPBACK`.
    pub fn is_loopback(&self) -> bool {
        self.flags.contains(InterfaceFlags::IFF_LOOPBACK)
    }

    /// `IFF_MULTICAST`. Note that Linux's `lo` lacks it unless set with
    /// `ip link set lo multicast on`, yet mDNS over `lo` works either way.
    pub fn is_multicast(&self) -> bool {
        self.flags.contains(InterfaceFlags::IFF_MULTICAST)
    }

    /// `IFF_POINTOPOINT`: tun devices, WireGuard, PPP. mdns-sd never uses
    /// them, and announcing a cluster into a VPN is rarely wanted.
    pub fn is_point_to_point(&self) -> bool {
        self.flags.contains(InterfaceFlags::IFF_POINTOPOINT)
    }

    /// Whether `ip` lies in one of this interface's subnets.
    pub fn on_subnet(&self, ip: &IpAddr) -> bool {
        self.addrs.iter().any(|net| net.contains(ip))
    }

    /// Why the default rule leaves this interface out, or `None` if it is
    /// taken.
    pub fn default_exclusion(&self) -> Option<&'static str> {
        if !self.is_up() {
            Some("down")
        } else if self.is_loopback() {
            Some("loopback (name it explicitly to use it)")
        } else if !self.is_multicast() {
            Some("not multicast-capable")
        } else if self.is_point_to_point() {
            Some("point-to-point (VPN/tunnel)")
        } else if is_virtual_name(&self.name) {
            Some("virtual (container/VM/Apple peer-to-peer link)")
        } else if self.addrs.is_empty() {
            Some("no IP address")
        } else {
            None
        }
    }
}

impl fmt::Display for Iface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if !self.is_up() {
            write!(f, " (down)")?;
        }
        let addrs: Vec<String> = self.addrs.iter().map(|a| a.to_string()).collect();
        if !addrs.is_empty() {
            write!(f, " [{}]", addrs.join(", "))?;
        }
        Ok(())
    }
}

/// Name prefixes of virtual links the default rule skips, and why:
///
/// - `docker`, `br-`: Docker's default bridge and its compose networks (a
///   plain `br0` is often the host's real LAN bridge, so only `br-` is
///   skipped);
/// - `veth`: the host side of container links;
/// - `virbr`, `vnet`, `vboxnet`, `vmnet`: libvirt, VirtualBox and VMware
///   host-only networks;
/// - `cni`, `flannel`, `cali`, `podman`, `lxcbr`, `lxdbr`: Kubernetes, Podman and
///   LXC/LXD networking;
/// - `utun`, `awdl`, `llw`, `anpi`, `ap`: macOS tunnels, Apple Wireless Direct Link
///   and its low-latency companion, Apple's internal network interfaces
///   (`anpi`), and the access-point interface `ap1`.
pub const VIRTUAL_PREFIXES: &[&str] = &[
    "docker", "br-", "veth", "virbr", "vnet", "vboxnet", "vmnet", "cni", "flannel", "cali",
    "podman", "lxcbr", "lxdbr", "utun", "awdl", "llw", "anpi", "ap",
];

/// Whether `name` is a known virtual link (see [`VIRTUAL_PREFIXES`]).
///
/// `ap` matches only when followed by a digit (`ap1`), so that no real
/// name beginning with those letters is caught.
pub fn is_virtual_name(name: &str) -> bool {
    VIRTUAL_PREFIXES.iter().any(|p| match name.strip_prefix(p) {
        Some(rest) if *p == "ap" => rest.starts_with(|c: char| c.is_ascii_digit()),
        Some(_) => true,
        None => false,
    })
}

/// Why an interface list could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum IfaceError {
    /// `getifaddrs` failed (very unusual: out of memory or no netlink).
    #[error("cannot list network interfaces (getifaddrs): {0}")]
    List(nix::Error),
    /// A name given by `--interface` or `interfaces = [...]` does not exist.
    #[error("no network interface named {name:?}; available: {available}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The interfaces that exist, with their addresses.
        available: String,
    },
    /// A named interface exists but is down: mDNS on it would silently do
    /// nothing.
    #[error("network interface {name:?} is down; bring it up (`ip link set {name} up`) or choose another; available: {available}")]
    Down {
        /// The name asked for.
        name: String,
        /// The interfaces that exist, with their addresses.
        available: String,
    },
}

// By hand, not `#[from]`, so that `{:#}` says the cause once.
impl From<nix::Error> for IfaceError {
    fn from(e: nix::Error) -> Self {
        IfaceError::List(e)
    }
}

/// Every interface of this network namespace, in index order.
pub fn all_interfaces() -> Result<Vec<Iface>, IfaceError> {
    let mut by_name: BTreeMap<String, Iface> = BTreeMap::new();
    for ifa in nix::ifaddrs::getifaddrs()? {
        let entry = by_name
            .entry(ifa.interface_name.clone())
            .or_insert_with(|| Iface {
                index: nix::net::if_::if_nametoindex(ifa.interface_name.as_str()).unwrap_or(0),
                name: ifa.interface_name.clone(),
                flags: ifa.flags,
                addrs: Vec::new(),
            });
        if let Some(net) = ifa
            .address
            .as_ref()
            .and_then(|a| ip_and_prefix(a, ifa.netmask.as_ref()))
        {
            entry.addrs.push(net);
        }
    }
    let mut all: Vec<Iface> = by_name.into_values().collect();
    all.sort_by_key(|i| i.index);
    Ok(all)
}

/// An address and its netmask from `getifaddrs` as an [`IpNet`].
fn ip_and_prefix(
    addr: &nix::sys::socket::SockaddrStorage,
    mask: Option<&nix::sys::socket::SockaddrStorage>,
) -> Option<IpNet> {
    if let Some(v4) = addr.as_sockaddr_in() {
        let prefix = mask
            .and_then(|m| m.as_sockaddr_in())
            .map_or(32, |m| u32::from(m.ip()).leading_ones() as u8);
        IpNet::new(IpAddr::V4(v4.ip()), prefix).ok()
    } else if let Some(v6) = addr.as_sockaddr_in6() {
        let prefix = mask
            .and_then(|m| m.as_sockaddr_in6())
            .map_or(128, |m| u128::from(m.ip()).leading_ones() as u8);
        IpNet::new(IpAddr::V6(v6.ip()), prefix).ok()
    } else {
        None
    }
}

/// The interfaces mDNS uses when none are named (see the module docs).
/// Empty in a namespace with only loopback: pass `--interface lo` there.
pub fn default_interfaces() -> Result<Vec<Iface>, IfaceError> {
    Ok(filter_default(all_interfaces()?))
}

/// The default rule applied to a given list (testable with made-up data).
pub fn filter_default(all: Vec<Iface>) -> Vec<Iface> {
    all.into_iter()
        .filter(|i| i.default_exclusion().is_none())
        .collect()
}

/// The interfaces to use: the default rule when `explicit` is empty,
/// otherwise exactly the named ones, which must exist and be up.
pub fn select(explicit: &[String]) -> Result<Vec<Iface>, IfaceError> {
    let all = all_interfaces()?;
    if explicit.is_empty() {
        Ok(filter_default(all))
    } else {
        select_from(all, explicit)
    }
}

/// [`select`] with named interfaces, over a given list.
pub fn select_from(all: Vec<Iface>, explicit: &[String]) -> Result<Vec<Iface>, IfaceError> {
    let available = || describe(&all);
    let mut chosen: Vec<Iface> = Vec::new();
    for name in explicit {
        let Some(iface) = all.iter().find(|i| &i.name == name) else {
            return Err(IfaceError::Unknown {
                name: name.clone(),
                available: available(),
            });
        };
        if !iface.is_up() {
            return Err(IfaceError::Down {
                name: name.clone(),
                available: available(),
            });
        }
        if !chosen.iter().any(|c| &c.name == name) {
            chosen.push(iface.clone());
        }
    }
    Ok(chosen)
}

/// One line listing interfaces and their addresses, for error messages and
/// the "nothing found" hint.
pub fn describe(all: &[Iface]) -> String {
    if all.is_empty() {
        return "none".into();
    }
    all.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, flags: InterfaceFlags, addrs: &[&str]) -> Iface {
        Iface {
            name: name.into(),
            index: 1,
            flags,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn lan() -> InterfaceFlags {
        InterfaceFlags::IFF_UP
            | InterfaceFlags::IFF_RUNNING
            | InterfaceFlags::IFF_BROADCAST
            | InterfaceFlags::IFF_MULTICAST
    }

    fn lo() -> Iface {
        iface(
            "lo",
            InterfaceFlags::IFF_UP | InterfaceFlags::IFF_LOOPBACK,
            &["127.0.0.1/8", "::1/128"],
        )
    }

    fn eth0() -> Iface {
        iface(
            "eth0",
            lan(),
            &["192.168.1.20/24", "fd00:1::20/64", "fe80::1/64"],
        )
    }

    fn names(list: &[Iface]) -> Vec<&str> {
        list.iter().map(|i| i.name.as_str()).collect()
    }

    #[test]
    fn the_default_takes_up_multicast_lan_interfaces_and_skips_everything_else() {
        let all = vec![
            lo(),
            eth0(),
            iface("wlan0", lan(), &["10.0.0.5/16"]),
            iface("br0", lan(), &["192.168.2.1/24"]),
            iface("docker0", lan(), &["172.17.0.1/16"]),
            iface("br-3f2a", lan(), &["172.18.0.1/16"]),
            iface("veth12ab", lan(), &["fe80::2/64"]),
            iface("virbr0", lan(), &["192.168.122.1/24"]),
            iface("utun3", lan(), &["fe80::3/64"]),
            iface("awdl0", lan(), &["fe80::4/64"]),
            iface("ap1", lan(), &["fe80::5/64"]),
            iface(
                "wg0",
                InterfaceFlags::IFF_UP
                    | InterfaceFlags::IFF_POINTOPOINT
                    | InterfaceFlags::IFF_MULTICAST,
                &["10.8.0.2/24"],
            ),
            iface("eth1", lan() - InterfaceFlags::IFF_UP, &["10.1.0.5/16"]),
            iface(
                "eth2",
                lan() - InterfaceFlags::IFF_MULTICAST,
                &["10.2.0.5/16"],
            ),
            iface("eth3", lan(), &[]),
        ];
        assert_eq!(names(&filter_default(all)), ["eth0", "wlan0", "br0"]);
    }

    #[test]
    fn virtual_names_are_matched_by_prefix_without_catching_real_names() {
        for v in [
            "docker0", "veth9", "br-abc", "virbr1", "utun0", "awdl0", "llw0", "ap1",
        ] {
            assert!(is_virtual_name(v), "{v} should be virtual");
        }
        for real in ["eth0", "br0", "wlan0", "enp3s0", "en0", "apple0", "bond0"] {
            assert!(!is_virtual_name(real), "{real} should not be virtual");
        }
    }

    #[test]
    fn a_loopback_only_namespace_has_no_default_but_lo_can_be_named() {
        assert!(filter_default(vec![lo()]).is_empty());
        let chosen = select_from(vec![lo()], &["lo".into()]).unwrap();
        assert_eq!(names(&chosen), ["lo"]);
    }

    #[test]
    fn naming_a_missing_interface_lists_the_available_ones() {
        let err = select_from(vec![lo(), eth0()], &["eth9".into()]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("\"eth9\""), "{msg}");
        assert!(msg.contains("lo [127.0.0.1/8"), "{msg}");
        assert!(msg.contains("eth0 [192.168.1.20/24"), "{msg}");
    }

    #[test]
    fn naming_a_down_interface_is_an_error_that_says_how_to_bring_it_up() {
        let down = iface("eth1", lan() - InterfaceFlags::IFF_UP, &["10.1.0.5/16"]);
        let msg = select_from(vec![down], &["eth1".into()])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("ip link set eth1 up"), "{msg}");
    }

    #[test]
    fn naming_an_interface_twice_uses_it_once() {
        let chosen = select_from(vec![eth0()], &["eth0".into(), "eth0".into()]).unwrap();
        assert_eq!(names(&chosen), ["eth0"]);
    }

    #[test]
    fn the_machine_lists_its_interfaces_with_prefixes() {
        let all = all_interfaces().expect("getifaddrs");
        let lo = all
            .iter()
            .find(|i| i.is_loopback())
            .expect("a loopback interface");
        assert!(lo.index > 0);
        if lo.addrs.iter().any(|a| a.addr().is_ipv4()) {
            assert!(lo.addrs.contains(&"127.0.0.1/8".parse().unwrap()), "{lo}");
        }
    }
}
