//! **Who listens on a TCP port here** — the kernel's own list of listening
//! TCP sockets in this network namespace, asked over netlink `sock_diag`
//! (`SOCK_DIAG_BY_FAMILY`, the interface `ss -ltn` uses), for IPv4 and
//! IPv6.
//!
//! Why not `/proc/net/tcp`: reading it walks the kernel's whole TCP hash
//! tables, every namespace's, and costs milliseconds even on an idle box,
//! once for `tcp` and again for `tcp6`, which a check run for every
//! handshake cannot afford; a `sock_diag` dump asked for the
//! LISTEN state only walks the listening sockets. And unlike a connect to
//! the port, it finds a listener bound to one address only, and the
//! listener never sees a probe.

use crate::netlink::{walk, NLMSG_HDR};
use std::io;

/// `SOCK_DIAG_BY_FAMILY`: the request and the type of each answer.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Bytes of `struct inet_diag_req_v2`, and the start of `struct
/// inet_diag_msg` up to its source port.
#[cfg(target_os = "linux")]
const REQ_V2: usize = 56;
/// `idiag_family, idiag_state, idiag_timer, idiag_retrans`, then the
/// socket id, whose first field is the source port (network order).
const MSG_SPORT: usize = 4;
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

/// One read of a dump, parsed: the listening ports in it, whether the dump
/// ended, and the kernel's error instead (a negative errno).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The source ports of the listening sockets in it.
    pub ports: Vec<u16>,
    /// Whether the dump ended (`NLMSG_DONE`) in it.
    pub done: bool,
    /// An `NLMSG_ERROR` the kernel sent instead.
    pub error: Option<i32>,
}

/// Parses netlink messages of a `sock_diag` dump (`nlmsghdr`, then
/// `inet_diag_msg`, aligned to 4 bytes); truncated and other messages are
/// skipped.
pub fn parse_listeners(buf: &[u8]) -> Parsed {
    let mut ports = Vec::new();
    let end = walk(buf, |t, msg| {
        if t == SOCK_DIAG_BY_FAMILY
            && msg.len() >= NLMSG_HDR + MSG_SPORT + 2
            && msg[NLMSG_HDR + 1] == TCP_LISTEN
        {
            let d = &msg[NLMSG_HDR..];
            ports.push(u16::from_be_bytes([d[MSG_SPORT], d[MSG_SPORT + 1]]));
        }
    });
    Parsed {
        ports,
        done: end.done,
        error: end.error,
    }
}

/// Whether a TCP socket listens on `port` in this network namespace, on any
/// address, IPv4 or IPv6. Errors: netlink `sock_diag` is not available
/// (not Linux, or a kernel without it).
#[cfg(target_os = "linux")]
pub fn tcp_listening(port: u16) -> io::Result<bool> {
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
    for (seq, family) in [(1, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        sendto(
            fd.as_raw_fd(),
            &dump_request(family, seq),
            &NetlinkAddr::new(0, 0),
            MsgFlags::empty(),
        )?;
        let mut found = false;
        loop {
            let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            if n == 0 {
                break;
            }
            let p = parse_listeners(&buf[..n]);
            found |= p.ports.contains(&port);
            match p.error {
                // A kernel without IPv6 has no AF_INET6 table to dump.
                Some(e) if -e == libc::EAFNOSUPPORT || -e == libc::ENOENT => break,
                Some(e) => return Err(io::Error::from_raw_os_error(-e)),
                None if p.done => break,
                None => {}
            }
        }
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Not available on this system.
#[cfg(not(target_os = "linux"))]
pub fn tcp_listening(_port: u16) -> io::Result<bool> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "netlink sock_diag is Linux's",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::NLMSG_DONE;

    /// A dump answer as the kernel writes it: a listener on 9100, an
    /// established socket on 6184 (never asked for, but skipped if sent),
    /// then the end.
    fn answer() -> Vec<u8> {
        let mut b = Vec::new();
        for (port, state) in [(9100u16, TCP_LISTEN), (6184, 1)] {
            let len = NLMSG_HDR + 72;
            let mut m = vec![0u8; len];
            m[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
            m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
            m[NLMSG_HDR] = 2;
            m[NLMSG_HDR + 1] = state;
            m[NLMSG_HDR + MSG_SPORT..NLMSG_HDR + MSG_SPORT + 2]
                .copy_from_slice(&port.to_be_bytes());
            b.extend(m);
        }
        let mut done = vec![0u8; NLMSG_HDR + 4];
        done[0..4].copy_from_slice(&((NLMSG_HDR + 4) as u32).to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        b.extend(done);
        b
    }

    #[test]
    fn listening_ports_are_read_in_network_order_and_other_states_skipped() {
        let p = parse_listeners(&answer());
        assert_eq!(p.ports, [9100]);
        assert!(p.done);
        assert_eq!(p.error, None);
    }

    #[test]
    fn a_truncated_answer_is_skipped_not_misread() {
        let a = answer();
        let p = parse_listeners(&a[..NLMSG_HDR + 10]);
        assert!(p.ports.is_empty() && !p.done);
    }

    /// Loopback only: a real listener in this namespace, then none.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_bound_listener_is_seen_and_a_closed_one_is_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(tcp_listening(port).unwrap());
        drop(l);
        assert!(!tcp_listening(port).unwrap());
        let l6 = std::net::TcpListener::bind("[::1]:0");
        if let Ok(l6) = l6 {
            assert!(
                tcp_listening(l6.local_addr().unwrap().port()).unwrap(),
                "IPv6 too"
            );
        }
    }
}
