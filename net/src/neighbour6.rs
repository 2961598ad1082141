//! **IPv6 neighbour help for handshakes** — the IPv6 half of
//! [`crate::neighbour::Nudger`]: the kernel's IPv6 neighbour table, read
//! over netlink, and Neighbor Solicitations of our own for the targets it
//! is still resolving.
//!
//! Linux resolves an IPv6 neighbour the way it resolves an IPv4 one: one
//! Neighbor Solicitation a second (`RetransTimer`, RFC 4861 §10), three
//! tries. On a lossy IPv6-only LAN, a lost solicitation or advertisement
//! therefore holds a handshake SYN for a whole second, and agents heard by
//! mDNS were refused with "cannot connect: no answer within ..." once the
//! connect timeout ran out (BENCHMARKS.md, "mDNS discovery", IPv6-only).
//! The nudger reads
//! the table ([`table`], `RTM_GETNEIGH`) and, for each handshake target in
//! `INCOMPLETE` (or `FAILED`) state, sends a solicitation of its own
//! ([`Solicitor`]). The target's solicited advertisement completes our
//! kernel's pending entry whichever solicitation it answers (§7.2.5 does
//! not match advertisements to solicitations).
//!
//! The solicitation is sent from the address our kernel would use for the
//! handshake ([`source_for`]), with our link-layer address in the Source
//! Link-Layer Address option: by §7.2.3 the target then records that
//! address of ours as STALE, so its SYN-ACK need not wait for a
//! neighbour exchange of its own either.
//!
//! # Platforms
//! Linux only, like the ARP help: the table is read over a netlink route
//! socket. On macOS the neighbour table lives in the routing table
//! (`sysctl NET_RT_FLAGS`, `RTF_LLINFO`) and a raw ICMPv6 socket needs
//! root, which a macOS coordinator does not run as; [`table`] fails with
//! [`std::io::ErrorKind::Unsupported`] there and the nudger sends nothing
//! (handshakes go at the kernel's own pace, as before).

use crate::netlink::{u16_at, u32_at, walk, NLMSG_HDR};
use std::io;
use std::net::{Ipv6Addr, SocketAddrV6};

/// ICMPv6 Neighbor Solicitation (RFC 4861 §4.3).
const NEIGHBOR_SOLICITATION: u8 = 135;

/// Option type: Source Link-Layer Address (RFC 4861 §4.6.1).
const OPT_SOURCE_LLADDR: u8 = 1;

/// Next Header value of ICMPv6, for the checksum's pseudo-header.
const NEXT_HEADER_ICMPV6: u8 = 58;

/// `NUD_INCOMPLETE`: the kernel is soliciting (include/uapi/linux/neighbour.h).
pub const NUD_INCOMPLETE: u16 = 0x01;

/// `NUD_FAILED`: the kernel gave up; the next packet starts it again.
pub const NUD_FAILED: u16 = 0x20;

/// One entry of the kernel's IPv6 neighbour table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour6 {
    /// The neighbour's address.
    pub ip: Ipv6Addr,
    /// The interface it is on.
    pub ifindex: u32,
    /// Its `NUD_*` state bits.
    pub state: u16,
}

impl Neighbour6 {
    /// Whether our kernel is still resolving its link-layer address (or
    /// gave up): the case a solicitation of ours can cut short.
    pub fn resolving(&self) -> bool {
        self.state & (NUD_INCOMPLETE | NUD_FAILED) != 0
    }
}

/// The solicited-node multicast address of `target` (RFC 4291 §2.7.1):
/// `ff02::1:ff` and the target's low 24 bits, where its owner listens.
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let o = target.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The ICMPv6 checksum of `msg` sent from `src` to `dst` (RFC 4443 §2.3):
/// the one's complement sum over the IPv6 pseudo-header (RFC 8200 §8.1:
/// source, destination, upper-layer length, next header) and the message
/// with its checksum field taken as zero.
pub fn icmpv6_checksum(src: Ipv6Addr, dst: Ipv6Addr, msg: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut add = |bytes: &[u8]| {
        for c in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(&src.octets());
    add(&dst.octets());
    add(&(msg.len() as u32).to_be_bytes());
    add(&[0, 0, 0, NEXT_HEADER_ICMPV6]);
    add(&msg[..2]);
    add(&msg[4..]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A Neighbor Solicitation for `target` from `src` at `mac` (RFC 4861
/// §4.3), to be sent to `target`'s solicited-node address with hop limit
/// 255, carrying the Source Link-Layer Address option and its checksum.
pub fn solicitation(src: Ipv6Addr, mac: [u8; 6], target: Ipv6Addr) -> [u8; 32] {
    let mut m = [0u8; 32];
    m[0] = NEIGHBOR_SOLICITATION;
    m[8..24].copy_from_slice(&target.octets());
    m[24] = OPT_SOURCE_LLADDR;
    m[25] = 1; // length in units of 8 bytes
    m[26..32].copy_from_slice(&mac);
    let sum = icmpv6_checksum(src, solicited_node(target), &m);
    m[2..4].copy_from_slice(&sum.to_be_bytes());
    m
}

/// The address our kernel would send from to reach `target` on interface
/// `ifindex` (connecting a UDP socket sends nothing). `None` when there is
/// no route.
pub fn source_for(target: Ipv6Addr, ifindex: u32) -> Option<Ipv6Addr> {
    let scope = if target.is_unicast_link_local() {
        ifindex
    } else {
        0
    };
    let s = std::net::UdpSocket::bind("[::]:0").ok()?;
    s.connect(SocketAddrV6::new(target, 9, 0, scope)).ok()?;
    match s.local_addr().ok()? {
        std::net::SocketAddr::V6(a) => Some(*a.ip()),
        std::net::SocketAddr::V4(_) => None,
    }
}

/// A raw ICMPv6 socket that sends Neighbor Solicitations from one of our
/// addresses on one interface.
pub struct Solicitor {
    sock: socket2::Socket,
    ifindex: u32,
    src: Ipv6Addr,
    mac: [u8; 6],
}

impl Solicitor {
    /// Opens one sending from `src` on interface `ifindex`. `None` where
    /// neighbour discovery does not apply (no MAC), `src` is not ours, or
    /// a raw socket is not allowed (no `CAP_NET_RAW`; said at debug level).
    pub fn open(ifindex: u32, src: Ipv6Addr) -> Option<Solicitor> {
        use socket2::{Domain, Protocol, Socket, Type};
        let name = nix::net::if_::if_indextoname(ifindex).ok()?;
        let name = name.to_str().ok()?;
        let mac = nix::ifaddrs::getifaddrs()
            .ok()?
            .filter(|a| a.interface_name == name)
            .find_map(|a| a.address.as_ref()?.as_link_addr()?.addr())?;
        if mac == [0; 6] {
            return None;
        }
        let sock = match Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6)) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("no neighbour solicitations on {name} ({e}): needs CAP_NET_RAW");
                return None;
            }
        };
        let scope = if src.is_unicast_link_local() {
            ifindex
        } else {
            0
        };
        // Bound to `src`, so the IPv6 source matches the pseudo-header the
        // checksum was computed over and the address the target records.
        sock.bind(&SocketAddrV6::new(src, 0, 0, scope).into())
            .ok()?;
        // RFC 4861 §7.1.1: a receiver drops a solicitation whose hop limit
        // is not 255.
        sock.set_multicast_hops_v6(255).ok()?;
        sock.set_multicast_if_v6(ifindex).ok()?;
        sock.set_multicast_loop_v6(false).ok()?;
        block_all_input(&sock, name);
        Some(Solicitor {
            sock,
            ifindex,
            src,
            mac,
        })
    }

    /// Sends "who has `target`?" to its solicited-node address; whether it
    /// was sent.
    pub fn solicit(&self, target: Ipv6Addr) -> bool {
        let to = SocketAddrV6::new(solicited_node(target), 0, 0, self.ifindex);
        self.sock
            .send_to(&solicitation(self.src, self.mac, target), &to.into())
            .is_ok()
    }
}

/// Tells the kernel to queue no incoming ICMPv6 message on `sock` (RFC
/// 3542 §3.2, `ICMP6_FILTER` with every type blocked): a raw ICMPv6 socket
/// otherwise receives a copy of every one, and this one is never read, so
/// its buffer would only fill. A failure costs that memory, nothing more;
/// it is said at debug level.
pub(crate) fn block_all_input(sock: &socket2::Socket, name: &str) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        /// `ICMP6_FILTER` (linux/icmpv6.h); on Linux a set bit blocks.
        const ICMP6_FILTER: libc::c_int = 1;
        let filter = [u32::MAX; 8];
        // SAFETY: `filter` is a live `struct icmp6_filter` (256 bits) on the
        // stack and its exact size is passed.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_ICMPV6,
                ICMP6_FILTER,
                filter.as_ptr().cast(),
                std::mem::size_of_val(&filter) as libc::socklen_t,
            )
        };
        if r != 0 {
            tracing::debug!(
                "the solicitation socket on {name} keeps receiving ICMPv6: {}",
                io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (sock, name);
}

/// `RTM_NEWNEIGH`, the type of each entry in a neighbour dump.
const RTM_NEWNEIGH: u16 = 28;
/// `RTM_GETNEIGH`, the dump request.
#[cfg(target_os = "linux")]
const RTM_GETNEIGH: u16 = 30;
/// `NDA_DST`: the neighbour's address attribute.
const NDA_DST: u16 = 1;
/// Bytes of `struct ndmsg`.
const NDMSG: usize = 12;
/// `AF_INET6` as the kernel numbers it on Linux.
const AF_INET6: u8 = 10;

/// One read of a neighbour dump, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The IPv6 entries in it.
    pub entries: Vec<Neighbour6>,
    /// Whether the dump ended (`NLMSG_DONE`) in it.
    pub done: bool,
    /// An `NLMSG_ERROR` the kernel sent instead (a negative errno).
    pub error: Option<i32>,
}

/// Parses netlink messages read from a neighbour dump (`RTM_NEWNEIGH`:
/// `nlmsghdr`, `ndmsg`, then attributes, all in host byte order and
/// aligned to 4 bytes). Messages of other types and truncated ones are
/// skipped.
pub fn parse_neighbours(buf: &[u8]) -> Parsed {
    let mut entries = Vec::new();
    let end = walk(buf, |t, msg| {
        let len = msg.len();
        if t != RTM_NEWNEIGH || len < NLMSG_HDR + NDMSG || msg[NLMSG_HDR] != AF_INET6 {
            return;
        }
        let nd = &msg[NLMSG_HDR..];
        let ifindex = u32_at(nd, 4);
        let state = u16_at(nd, 8);
        let mut a = NLMSG_HDR + NDMSG;
        while a + 4 <= len {
            let alen = usize::from(u16_at(msg, a));
            if alen < 4 || a + alen > len {
                break;
            }
            if u16_at(msg, a + 2) == NDA_DST && alen == 4 + 16 {
                let mut ip = [0u8; 16];
                ip.copy_from_slice(&msg[a + 4..a + 20]);
                entries.push(Neighbour6 {
                    ip: Ipv6Addr::from(ip),
                    ifindex,
                    state,
                });
            }
            a += (alen + 3) & !3;
        }
    });
    Parsed {
        entries,
        done: end.done,
        error: end.error,
    }
}

/// The request for a dump of the IPv6 neighbour table.
#[cfg(target_os = "linux")]
fn dump_request(seq: u32) -> [u8; NLMSG_HDR + NDMSG] {
    const NLM_F_REQUEST: u16 = 0x1;
    const NLM_F_DUMP: u16 = 0x300;
    let mut r = [0u8; NLMSG_HDR + NDMSG];
    r[0..4].copy_from_slice(&((NLMSG_HDR + NDMSG) as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&seq.to_ne_bytes());
    r[NLMSG_HDR] = AF_INET6;
    r
}

/// The kernel's IPv6 neighbour table, in this process's network
/// namespace. Errors: netlink is unavailable or the kernel refused.
#[cfg(target_os = "linux")]
pub fn table() -> io::Result<Vec<Neighbour6>> {
    use nix::sys::socket::{
        recv, sendto, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
        SockProtocol, SockType,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    // A dump is answered at once; the timeout only keeps a wedged kernel
    // from holding the nudger.
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    )?;
    sendto(
        fd.as_raw_fd(),
        &dump_request(1),
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
        if n == 0 {
            return Ok(entries);
        }
        let p = parse_neighbours(&buf[..n]);
        entries.extend(p.entries);
        if let Some(errno) = p.error {
            return Err(io::Error::from_raw_os_error(-errno));
        }
        if p.done {
            return Ok(entries);
        }
    }
}

/// Not available on this system (see the module docs).
#[cfg(not(target_os = "linux"))]
pub fn table() -> io::Result<Vec<Neighbour6>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the IPv6 neighbour table is read over Linux netlink only",
    ))
}

#[cfg(test)]
mod tests;
