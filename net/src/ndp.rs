//! **Neighbour-discovery help** — the IPv6 counterpart of the gratuitous ARP
//! in [`crate::neighbour`]: unsolicited Neighbor Advertisements of our own
//! addresses, so that a lost neighbour-discovery exchange does not hold a
//! responder's unicast reply for a second.
//!
//! A responder that answers our legacy query by unicast must first resolve
//! our MAC address (RFC 4861 §7.2: a Neighbor Solicitation, retried every
//! `RetransTimer`, one second on Linux). Until then its reply waits in an
//! INCOMPLETE neighbour entry. An unsolicited Neighbor Advertisement to
//! all-nodes (`ff02::1`) carrying our link-layer address completes such an
//! entry (§7.2.5: "If the target's Neighbor Cache entry is in the
//! INCOMPLETE state when the advertisement is received ... the receiving
//! node records the link-layer address") and releases the queued reply, as
//! RFC 826's merge rule does for ARP. Entries that do not exist are not
//! created (Linux's `accept_untracked_na` is off by default), so a healthy
//! LAN's caches are not touched.
//!
//! Sending needs a raw ICMPv6 socket (`CAP_NET_RAW`: root, as in the lab);
//! elsewhere [`NdpSocket::open`] says so at debug level and returns `None`.

use std::net::{Ipv6Addr, SocketAddrV6};

/// ICMPv6 Neighbor Advertisement (RFC 4861 §4.4).
const NEIGHBOR_ADVERTISEMENT: u8 = 136;

/// The Override flag: the advertised address replaces a cached one.
const FLAG_OVERRIDE: u8 = 0x20;

/// Option type: Target Link-Layer Address (RFC 4861 §4.6.1).
const OPT_TARGET_LLADDR: u8 = 2;

/// All-nodes on the link.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// A raw ICMPv6 socket that advertises one interface's IPv6 addresses.
pub struct NdpSocket {
    sock: socket2::Socket,
    index: u32,
    mac: [u8; 6],
    addrs: Vec<Ipv6Addr>,
}

impl NdpSocket {
    /// Opens one for interface `name`, advertising every unicast IPv6
    /// address it has. `None` where neighbour discovery does not apply
    /// (loopback, no IPv6 address, no MAC) or a raw socket is not allowed.
    pub fn open(name: &str) -> Option<NdpSocket> {
        use socket2::{Domain, Protocol, Socket, Type};
        let ifas: Vec<_> = nix::ifaddrs::getifaddrs()
            .ok()?
            .filter(|a| a.interface_name == name)
            .collect();
        if ifas.iter().any(|a| {
            a.flags
                .contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK)
        }) {
            return None;
        }
        let addrs: Vec<Ipv6Addr> = ifas
            .iter()
            .filter_map(|a| Some(a.address.as_ref()?.as_sockaddr_in6()?.ip()))
            .filter(|ip| !ip.is_multicast() && !ip.is_unspecified() && !ip.is_loopback())
            .collect();
        if addrs.is_empty() {
            return None;
        }
        let mac = ifas
            .iter()
            .find_map(|a| a.address.as_ref()?.as_link_addr()?.addr())?;
        if mac == [0; 6] {
            return None;
        }
        let index = nix::net::if_::if_nametoindex(name).ok()?;
        let sock = match Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6)) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("no neighbour advertisements on {name} ({e}): needs CAP_NET_RAW");
                return None;
            }
        };
        // RFC 4861 §7.1.2: a receiver drops any neighbour-discovery message
        // whose hop limit is not 255 (it proves the sender is on-link).
        sock.set_multicast_hops_v6(255).ok()?;
        sock.set_multicast_if_v6(index).ok()?;
        sock.set_multicast_loop_v6(false).ok()?;
        crate::neighbour6::block_all_input(&sock, name);
        Some(NdpSocket {
            sock,
            index,
            mac,
            addrs,
        })
    }

    /// Advertises each of our addresses to all-nodes; whether every one
    /// was sent. The kernel fills in the ICMPv6 checksum.
    pub fn announce(&self) -> bool {
        let to = SocketAddrV6::new(ALL_NODES, 0, 0, self.index);
        self.addrs.iter().all(|a| {
            self.sock
                .send_to(&advertisement(*a, self.mac), &to.into())
                .is_ok()
        })
    }
}

/// An unsolicited Neighbor Advertisement of `target` at `mac` (RFC 4861
/// §4.4, §7.2.6): Override set, Solicited and Router clear, with the
/// Target Link-Layer Address option. The checksum is left zero for the
/// kernel (raw ICMPv6 sockets always compute it, RFC 3542 §3.1).
pub fn advertisement(target: Ipv6Addr, mac: [u8; 6]) -> [u8; 32] {
    let mut m = [0u8; 32];
    m[0] = NEIGHBOR_ADVERTISEMENT;
    m[4] = FLAG_OVERRIDE;
    m[8..24].copy_from_slice(&target.octets());
    m[24] = OPT_TARGET_LLADDR;
    m[25] = 1; // length in units of 8 bytes
    m[26..32].copy_from_slice(&mac);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of RFC 4861 §4.4 and §4.6.1, byte for byte.
    #[test]
    fn an_advertisement_carries_the_target_and_its_link_layer_address_with_override_set() {
        let t: Ipv6Addr = "fd52::7".parse().unwrap();
        let m = advertisement(t, [2, 0, 0, 0, 0, 7]);
        assert_eq!(m[0], 136, "type: Neighbor Advertisement");
        assert_eq!(m[1], 0, "code 0");
        assert_eq!(&m[2..4], &[0, 0], "checksum left to the kernel");
        assert_eq!(m[4], 0x20, "Override only: not a router, not solicited");
        assert_eq!(&m[5..8], &[0, 0, 0]);
        assert_eq!(&m[8..24], &t.octets());
        assert_eq!(&m[24..26], &[2, 1], "Target Link-Layer Address, 8 bytes");
        assert_eq!(&m[26..32], &[2, 0, 0, 0, 0, 7]);
    }

    #[test]
    fn loopback_has_no_neighbour_discovery() {
        assert!(NdpSocket::open("lo").is_none());
    }
}
