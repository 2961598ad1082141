//! **The legacy query sockets** — one per interface and address family,
//! bound so that replies identify the interface, a reader task per socket,
//! and the short-lived port-5353 socket a standard query goes out from.

use super::wire::{MAX_PACKET, MDNS_PORT, MDNS_V4, MDNS_V6};
use rlx_net::iface::Iface;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Datagrams queued between the socket readers and the browse loop. The
/// kernel's socket buffer absorbs bursts beyond this.
pub(super) const READ_QUEUE: usize = 1024;

pub(super) struct Datagram {
    /// Index of the socket in the browse's socket list.
    pub(super) sock: usize,
    pub(super) src: SocketAddr,
    pub(super) bytes: Vec<u8>,
}

/// A legacy query socket: one per interface and address family.
pub(super) struct LegacySocket {
    /// Index of its interface in the browse's interface list.
    pub(super) iface: usize,
    pub(super) sock: Arc<UdpSocket>,
    /// The mDNS group on that interface.
    pub(super) dest: SocketAddr,
}

/// Receive buffer asked for on each legacy query socket. Every agent on the
/// link answers each early legacy query at once, by unicast: 200 agents and
/// three early rounds are 600 replies of about 270 bytes (each costs about
/// 1 KB of buffer in the kernel) within about 100 ms. Measured in the lab at
/// 200 agents on two cores: the browse's own thread waits for the CPU behind
/// the agents that its query woke, then 291 replies arrived in 10 ms, and
/// the default buffer (`net.core.rmem_default`, 208 KB) dropped about one
/// reply in ten on a lossless link, so the browse took the drops for packet
/// loss, missed its clean early stop and sent more rounds (more replies).
/// 2 MiB holds about 2000; the kernel caps the request at
/// `net.core.rmem_max` unless the process may exceed it (`CAP_NET_ADMIN`).
pub(super) const RECV_BUFFER: usize = 2 << 20;

/// Asks for [`RECV_BUFFER`] of receive buffer: beyond `net.core.rmem_max`
/// where this process may (`SO_RCVBUFFORCE`, `CAP_NET_ADMIN`), else as much
/// as the kernel allows. A refusal only leaves the default, so it is logged,
/// not returned.
///
/// `SO_RCVBUFFORCE` is Linux's; a Mac has `kern.ipc.maxsockbuf` as the only
/// cap, so there the plain request is all there is.
fn widen_receive_buffer(s: &Socket) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::sys::socket::{setsockopt, sockopt::RcvBufForce};
        if setsockopt(s, RcvBufForce, &RECV_BUFFER).is_ok() {
            return;
        }
    }
    if let Err(e) = s.set_recv_buffer_size(RECV_BUFFER) {
        tracing::debug!("mDNS query socket keeps its default receive buffer: {e}");
    }
}

/// Opens a legacy query socket per interface and address family. Errors are
/// returned as text for the report; the browse goes on with what opened.
pub(super) fn open_sockets(ifaces: &[Iface]) -> (Vec<LegacySocket>, Vec<String>) {
    let mut socks = Vec::new();
    let mut errors = Vec::new();
    for (k, i) in ifaces.iter().enumerate() {
        if let Some(a) = first_v4(i) {
            match open_v4(a) {
                Ok(sock) => socks.push(LegacySocket {
                    iface: k,
                    sock: Arc::new(sock),
                    dest: SocketAddr::V4(SocketAddrV4::new(MDNS_V4, MDNS_PORT)),
                }),
                Err(e) => errors.push(format!("{} IPv4 ({a}): {e}", i.name)),
            }
        }
        if let Some(a) = group_v6(i) {
            match open_v6(a, i.index) {
                Ok(sock) => socks.push(LegacySocket {
                    iface: k,
                    sock: Arc::new(sock),
                    dest: SocketAddr::V6(SocketAddrV6::new(MDNS_V6, MDNS_PORT, 0, i.index)),
                }),
                Err(e) => errors.push(format!("{} IPv6 ({a}): {e}", i.name)),
            }
        }
    }
    (socks, errors)
}

/// The IPv4 address queries leave `i` from: its first.
fn first_v4(i: &Iface) -> Option<Ipv4Addr> {
    i.addrs.iter().find_map(|n| match n.addr() {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    })
}

/// The IPv6 address queries leave `i` from: link-local first, as ff02::fb
/// is link-scoped and every IPv6 interface has one. Loopback has none and
/// IPv6 multicast over `lo` is not a thing, so it is skipped there.
fn group_v6(i: &Iface) -> Option<Ipv6Addr> {
    i.addrs
        .iter()
        .filter_map(|n| match n.addr() {
            IpAddr::V6(a) if !a.is_loopback() => Some(a),
            _ => None,
        })
        .min_by_key(|a| !a.is_unicast_link_local())
}

/// An IPv4 legacy query socket bound to the interface's address (so replies
/// identify the interface) with multicast leaving through it. Not
/// `connect()`ed: replies come from each responder's own address.
fn open_v4(addr: Ipv4Addr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    widen_receive_buffer(&s);
    s.bind(&SocketAddr::V4(SocketAddrV4::new(addr, 0)).into())?;
    s.set_multicast_if_v4(&addr)?;
    // RFC 6762 §11: mDNS packets are sent with IP TTL 255.
    s.set_multicast_ttl_v4(255)?;
    s.set_ttl_v4(255)?;
    UdpSocket::from_std(s.into())
}

/// The IPv6 counterpart of [`open_v4`].
fn open_v6(addr: Ipv6Addr, index: u32) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    widen_receive_buffer(&s);
    s.set_only_v6(true)?;
    let scope = if addr.is_unicast_link_local() {
        index
    } else {
        0
    };
    s.bind(&SocketAddr::V6(SocketAddrV6::new(addr, 0, 0, scope)).into())?;
    s.set_multicast_if_v6(index)?;
    s.set_multicast_hops_v6(255)?;
    s.set_unicast_hops_v6(255)?;
    UdpSocket::from_std(s.into())
}

/// Reads datagrams from one socket into the browse loop until aborted.
pub(super) async fn read_loop(k: usize, sock: Arc<UdpSocket>, tx: mpsc::Sender<Datagram>) {
    let mut buf = vec![0u8; MAX_PACKET + 1];
    loop {
        match sock.recv_from(&mut buf).await {
            Ok((n, _)) if n > MAX_PACKET => continue,
            Ok((n, src)) => {
                let d = Datagram {
                    sock: k,
                    src,
                    bytes: buf[..n].to_vec(),
                };
                if tx.send(d).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!("mDNS query socket: {e}");
                // Errors on an unconnected UDP socket are transient (ICMP);
                // do not spin on a persistent one.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Sends a standard query (source port 5353) on the interface and family
/// of `s`, from a socket opened and closed around the send: it shares port
/// 5353 with mdns-sd and any local responder (`SO_REUSEADDR`/`SO_REUSEPORT`,
/// as they set too) for microseconds, so it never takes their unicast
/// traffic. The multicast answers reach mdns-sd's socket. Returns whether it
/// was sent.
pub(super) fn send_standard_query(s: &LegacySocket, bytes: &[u8]) -> bool {
    match s.sock.local_addr() {
        Ok(local) => send_standard_query_from(local.ip(), s.dest, bytes),
        Err(e) => {
            tracing::debug!("standard mDNS query to {}: {e}", s.dest);
            false
        }
    }
}

/// The mDNS groups a standard query goes to on `ifaces`: each interface's
/// IPv4 group with the address it leaves from, and its IPv6 group (scoped
/// to it) with its link-local address, as [`open_sockets`] picks them.
pub(super) fn group_destinations(ifaces: &[Iface]) -> Vec<(IpAddr, SocketAddr)> {
    let mut out = Vec::new();
    for i in ifaces {
        if let Some(a) = first_v4(i) {
            let dest = SocketAddrV4::new(MDNS_V4, MDNS_PORT);
            out.push((IpAddr::V4(a), SocketAddr::V4(dest)));
        }
        if let Some(a) = group_v6(i) {
            let dest = SocketAddrV6::new(MDNS_V6, MDNS_PORT, 0, i.index);
            out.push((IpAddr::V6(a), SocketAddr::V6(dest)));
        }
    }
    out
}

/// [`send_standard_query`] from the interface address `local` to the group
/// `dest` (IPv6: scoped to its interface).
pub(super) fn send_standard_query_from(local: IpAddr, dest: SocketAddr, bytes: &[u8]) -> bool {
    let open = || -> std::io::Result<Socket> {
        let (domain, any) = match dest {
            SocketAddr::V4(_) => (
                Domain::IPV4,
                SocketAddr::from((Ipv4Addr::UNSPECIFIED, MDNS_PORT)),
            ),
            SocketAddr::V6(_) => (
                Domain::IPV6,
                SocketAddr::from((Ipv6Addr::UNSPECIFIED, MDNS_PORT)),
            ),
        };
        let q = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        q.set_reuse_address(true)?;
        q.set_reuse_port(true)?;
        match (local, dest) {
            (IpAddr::V4(local), _) => {
                q.set_multicast_if_v4(&local)?;
                q.set_multicast_ttl_v4(255)?;
            }
            (IpAddr::V6(_), d) => {
                q.set_only_v6(true)?;
                if let SocketAddr::V6(d) = d {
                    q.set_multicast_if_v6(d.scope_id())?;
                }
                q.set_multicast_hops_v6(255)?;
            }
        }
        q.bind(&any.into())?;
        Ok(q)
    };
    match open().and_then(|q| q.send_to(bytes, &dest.into())) {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!("standard mDNS query to {dest}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards against the default receive buffer (208 KB) on the legacy
    /// query sockets: at 200 agents it dropped about one reply in ten of
    /// the early rounds on a lossless link, which cost the clean early stop.
    #[tokio::test]
    async fn a_legacy_query_socket_has_room_for_a_burst_of_replies_beyond_the_default() {
        let sock = open_v4(Ipv4Addr::LOCALHOST).unwrap();
        let s = socket2::SockRef::from(&sock);
        // Linux reports twice what was set (its bookkeeping overhead); the
        // default is reported as is.
        let default = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .unwrap_or(212_992);
        let got = s.recv_buffer_size().unwrap();
        assert!(got > default, "{got} bytes, the default is {default}");
    }
}
