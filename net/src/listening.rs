//! **Who listens on a TCP port here** — the kernel's own list of listening
//! TCP sockets in this network namespace, asked over netlink `sock_diag`
//! (`SOCK_DIAG_BY_FAMILY`, the interface `ss -ltn` uses), for IPv4 and
//! IPv6: whether a port has a listener ([`tcp_listening`]), and the
//! address each listener is bound to ([`tcp_listeners`]), so that a caller
//! that must talk to one (the agent's SSH check) dials an address it
//! really accepts on, not loopback, which a server bound to one LAN address
//! refuses.
//!
//! Why not `/proc/net/tcp`: reading it walks the kernel's whole TCP hash
//! tables, every namespace's, and costs milliseconds even on an idle box,
//! once for `tcp` and again for `tcp6`, which a check run for every
//! handshake cannot afford; a `sock_diag` dump asked for the
//! LISTEN state only walks the listening sockets. And unlike a connect to
//! the port, it finds a listener bound to one address only, and the
//! listener never sees a probe.

use crate::netlink::{u32_at, walk, NLMSG_HDR};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// `SOCK_DIAG_BY_FAMILY`: the request and the type of each answer.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Bytes of `struct inet_diag_req_v2`, and the start of `struct
/// inet_diag_msg` up to its source port.
#[cfg(target_os = "linux")]
const REQ_V2: usize = 56;
/// `idiag_family, idiag_state, idiag_timer, idiag_retrans`, then the
/// socket id (`struct inet_diag_sockid`), whose first field is the source
/// port (network order).
const MSG_SPORT: usize = 4;
/// The socket id's source address: 16 bytes, of which IPv4 uses the first
/// 4 (after the source and destination ports).
const MSG_SRC: usize = 8;
/// The socket id's interface index (host order), after the two addresses:
/// the scope of an IPv6 link-local address.
const MSG_IF: usize = 40;
/// Bytes of the message up to the end of the socket id's interface index:
/// a shorter answer is truncated and skipped.
const MSG_MIN: usize = MSG_IF + 4;
/// `TCP_LISTEN` (include/net/tcp_states.h).
const TCP_LISTEN: u8 = 10;

/// The request for a dump of `family`'s (`AF_INET`, `AF_INET6`) listening
/// TCP sockets.
#[cfg(target_os = "linux")]
fn dump_request(family: u8, seq: u32) -> [u8; NLMSG_HDR + REQ_V2] {
    const NLM_F_REQUEST: u16 = 0x1;
    const NLM_F_DUMP: u16 = 0x300;
    let mut r = [0u8; NLMSG_HDR + REQ_V2];
    r[0..4].copy_from_slice(&((NLMSG_HDR + REQ_V2) as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&seq.to_ne_bytes());
    let req = &mut r[NLMSG_HDR..];
    req[0] = family;
    req[1] = libc::IPPROTO_TCP as u8;
    // idiag_states: the LISTEN state only.
    req[4..8].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    r
}

/// One read of a dump, parsed: the listening sockets in it, whether the
/// dump ended, and the kernel's error instead (a negative errno).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The local address and port of each listening socket in it: `0.0.0.0`
    /// or `::` for a socket bound to every address; an IPv6 link-local
    /// address carries its interface as the scope id.
    pub listeners: Vec<SocketAddr>,
    /// Whether the dump ended (`NLMSG_DONE`) in it.
    pub done: bool,
    /// An `NLMSG_ERROR` the kernel sent instead.
    pub error: Option<i32>,
}

/// Parses netlink messages of a `sock_diag` dump (`nlmsghdr`, then
/// `inet_diag_msg`, aligned to 4 bytes); truncated messages, other states
/// and other families are skipped.
pub fn parse_listeners(buf: &[u8]) -> Parsed {
    let mut listeners = Vec::new();
    let end = walk(buf, |t, msg| {
        if t != SOCK_DIAG_BY_FAMILY || msg.len() < NLMSG_HDR + MSG_MIN {
            return;
        }
        let d = &msg[NLMSG_HDR..];
        if d[1] != TCP_LISTEN {
            return;
        }
        let port = u16::from_be_bytes([d[MSG_SPORT], d[MSG_SPORT + 1]]);
        let src = &d[MSG_SRC..MSG_SRC + 16];
        let addr = match i32::from(d[0]) {
            libc::AF_INET => {
                let ip = Ipv4Addr::new(src[0], src[1], src[2], src[3]);
                SocketAddr::V4(SocketAddrV4::new(ip, port))
            }
            libc::AF_INET6 => {
                let mut b = [0u8; 16];
                b.copy_from_slice(src);
                let ip = Ipv6Addr::from(b);
                // Only a link-local address needs its interface to be dialled.
                let scope = if ip.is_unicast_link_local() {
                    u32_at(d, MSG_IF)
                } else {
                    0
                };
                SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))
            }
            _ => return,
        };
        listeners.push(addr);
    });
    Parsed {
        listeners,
        done: end.done,
        error: end.error,
    }
}

/// Whether a TCP socket listens on `port` in this network namespace, on any
/// address, IPv4 or IPv6. Errors: netlink `sock_diag` is not available
/// (not Linux, or a kernel without it).
pub fn tcp_listening(port: u16) -> io::Result<bool> {
    Ok(tcp_listeners()?.iter().any(|a| a.port() == port))
}

/// Every listening TCP socket in this network namespace, IPv4 then IPv6,
/// as the address and port it is bound to (see [`Parsed::listeners`]).
/// Errors: netlink `sock_diag` is not available (not Linux, or a kernel
/// without it).
#[cfg(target_os = "linux")]
pub fn tcp_listeners() -> io::Result<Vec<SocketAddr>> {
    use nix::sys::socket::{
        recv, sendto, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
        SockProtocol, SockType,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    // A dump is answered at once; the timeout only keeps a wedged kernel
    // from holding the caller.
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    )?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut all = Vec::new();
    for (seq, family) in [(1, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        sendto(
            fd.as_raw_fd(),
            &dump_request(family, seq),
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )?;
        loop {
            let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            if n == 0 {
                break;
            }
            let p = parse_listeners(&buf[..n]);
            all.extend(p.listeners);
            match p.error {
                // A kernel without IPv6 has no AF_INET6 table to dump.
                Some(e) if -e == libc::EAFNOSUPPORT || -e == libc::ENOENT => break,
                Some(e) => return Err(io::Error::from_raw_os_error(-e)),
                None if p.done => break,
                None => {}
            }
        }
    }
    Ok(all)
}

/// Not available on this system.
#[cfg(not(target_os = "linux"))]
pub fn tcp_listeners() -> io::Result<Vec<SocketAddr>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "netlink sock_diag is Linux's",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::NLMSG_DONE;

    /// One `inet_diag_msg` as the kernel writes it (72 bytes after the
    /// header).
    fn message(family: i32, state: u8, src: &[u8], port: u16, ifindex: u32) -> Vec<u8> {
        let len = NLMSG_HDR + 72;
        let mut m = vec![0u8; len];
        m[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let d = &mut m[NLMSG_HDR..];
        d[0] = family as u8;
        d[1] = state;
        d[MSG_SPORT..MSG_SPORT + 2].copy_from_slice(&port.to_be_bytes());
        d[MSG_SRC..MSG_SRC + src.len()].copy_from_slice(src);
        d[MSG_IF..MSG_IF + 4].copy_from_slice(&ifindex.to_ne_bytes());
        m
    }

    /// A dump answer: a listener on 9100 on every IPv4 address, an
    /// established socket on 6184 (never asked for, but skipped if sent),
    /// sshd on one LAN address and on one IPv6 link-local address of
    /// interface 3, then the end.
    fn answer() -> Vec<u8> {
        let link_local: Ipv6Addr = "fe80::1".parse().unwrap();
        let mut b = Vec::new();
        b.extend(message(libc::AF_INET, TCP_LISTEN, &[0; 4], 9100, 0));
        b.extend(message(libc::AF_INET, 1, &[10, 0, 0, 5], 6184, 0));
        b.extend(message(libc::AF_INET, TCP_LISTEN, &[10, 0, 0, 5], 22, 2));
        b.extend(message(
            libc::AF_INET6,
            TCP_LISTEN,
            &link_local.octets(),
            22,
            3,
        ));
        let mut done = vec![0u8; NLMSG_HDR + 4];
        done[0..4].copy_from_slice(&((NLMSG_HDR + 4) as u32).to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        b.extend(done);
        b
    }

    #[test]
    fn listeners_are_read_with_their_address_and_port_and_other_states_skipped() {
        let p = parse_listeners(&answer());
        let want: Vec<SocketAddr> = vec![
            "0.0.0.0:9100".parse().unwrap(),
            "10.0.0.5:22".parse().unwrap(),
            SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 22, 0, 3)),
        ];
        assert_eq!(p.listeners, want);
        assert!(p.done);
        assert_eq!(p.error, None);
    }

    #[test]
    fn a_truncated_answer_is_skipped_not_misread() {
        let a = answer();
        let p = parse_listeners(&a[..NLMSG_HDR + 10]);
        assert!(p.listeners.is_empty() && !p.done);
        // A message that claims fewer bytes than the socket id is skipped.
        let mut short = message(libc::AF_INET, TCP_LISTEN, &[0; 4], 9100, 0);
        let len = NLMSG_HDR + MSG_MIN - 1;
        short.truncate(len);
        short[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        assert!(parse_listeners(&short).listeners.is_empty());
    }

    /// Loopback only: a real listener in this namespace, then none.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_bound_listener_is_seen_with_its_address_and_a_closed_one_is_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        assert!(tcp_listening(at.port()).unwrap());
        assert!(
            tcp_listeners().unwrap().contains(&at),
            "listed as bound: {at}"
        );
        drop(l);
        assert!(!tcp_listening(at.port()).unwrap());
        let l6 = std::net::TcpListener::bind("[::1]:0");
        if let Ok(l6) = l6 {
            assert!(
                tcp_listening(l6.local_addr().unwrap().port()).unwrap(),
                "IPv6 too"
            );
        }
    }
}
