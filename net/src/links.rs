//! **Hear about interfaces coming and going instead of polling for them** —
//! a kernel socket that becomes readable when a link or an address appears,
//! changes or disappears: netlink on Linux, the route socket on macOS.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let mut changes = rlx_net::links::LinkChanges::subscribe()?;
//! loop {
//!     changes.next().await?; // asleep until the kernel reports a change
//!     // ... look at the interfaces again ...
//! }
//! # }
//! ```
//!
//! mdns-sd follows interfaces by listing them again every five seconds: twelve
//! wake-ups a minute for an agent that otherwise sleeps for hours. The
//! kernel announces every such change on the rtnetlink multicast groups
//! `RTMGRP_LINK`, `RTMGRP_IPV4_IFADDR` and `RTMGRP_IPV6_IFADDR` (rtnetlink(7)),
//! which is how avahi-daemon follows interfaces without waking up at all.
//! The agent's announcer turns mdns-sd's poll off while this socket works
//! and asks for a check only after the socket says something changed.
//!
//! The messages are not parsed: any message means "look again", and so does
//! `ENOBUFS` (the kernel dropped notifications because the socket's buffer
//! was full, so a change may have been missed). Looking again costs one
//! interface listing, so a spurious wake-up is harmless; a missed one would
//! leave the node unannounced on a new link.
//!
//! # Platforms
//! - **Linux**: a netlink route socket joined to the groups above.
//! - **macOS**: a `PF_ROUTE` socket (route(4)), where the kernel writes
//!   every routing message, as `configd` and mDNSResponder read them.
//!   Unlike netlink it has no groups to choose from and also carries route
//!   and ARP-entry changes (BSD keeps neighbours in the routing table), so
//!   [`route_message_is_a_link_change`] keeps only `RTM_IFINFO`,
//!   `RTM_IFINFO2`, `RTM_NEWADDR` and `RTM_DELADDR`. The `if-watch` crate
//!   (libp2p) was considered for both platforms: it reports address
//!   additions and removals only, so on Linux a link taken down with its
//!   IPv4 address kept (`ip link set down` keeps it) would go unnoticed, and
//!   it brings rtnetlink, the system configuration framework and a futures
//!   stack for what is one socket here.
//! - **Elsewhere**: [`LinkChanges::subscribe`] fails with
//!   [`std::io::ErrorKind::Unsupported`] and the caller keeps mdns-sd's
//!   five-second poll.

use std::io;

/// A subscription to the kernel's link and address change notifications.
#[derive(Debug)]
pub struct LinkChanges {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

/// Registers `fd` with the current tokio runtime's reactor. A failure (no
/// runtime, no I/O driver) is an error, not a panic.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn register(
    fd: std::os::fd::OwnedFd,
) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    tokio::runtime::Handle::try_current()
        .map_err(|e| io::Error::other(format!("no tokio runtime: {e}")))
        .and_then(|h| {
            let _guard = h.enter();
            // SAFETY: the AsyncFd takes the OwnedFd itself, so the descriptor
            // stays open, and is the same one, for exactly as long as it is
            // registered.
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            }
            .map_err(io::Error::from)
        })
}

/// Route socket message types (`rtm_type`) that mean an interface or one of
/// its addresses changed. Values from xnu's `bsd/net/route.h` (the same as
/// the `libc` crate's, checked at compile time on macOS below).
pub mod rtm {
    /// `RTM_NEWADDR`: an address was added to an interface.
    pub const NEWADDR: u8 = 0xc;
    /// `RTM_DELADDR`: an address was removed.
    pub const DELADDR: u8 = 0xd;
    /// `RTM_IFINFO`: an interface's flags (up, running) changed.
    pub const IFINFO: u8 = 0xe;
    /// `RTM_IFINFO2`: the same, extended form.
    pub const IFINFO2: u8 = 0x12;
    /// `RTM_VERSION` that these layouts belong to.
    pub const VERSION: u8 = 5;
}

#[cfg(target_os = "macos")]
const _: () = {
    assert!(rtm::NEWADDR as libc::c_int == libc::RTM_NEWADDR);
    assert!(rtm::DELADDR as libc::c_int == libc::RTM_DELADDR);
    assert!(rtm::IFINFO as libc::c_int == libc::RTM_IFINFO);
    assert!(rtm::IFINFO2 as libc::c_int == libc::RTM_IFINFO2);
    assert!(rtm::VERSION as libc::c_int == libc::RTM_VERSION);
};

/// Whether one message read from a macOS route socket says that a link or
/// an address changed. Every message starts with `u_short rtm_msglen;
/// u_char rtm_version; u_char rtm_type;` (`rt_msghdr`, `if_msghdr` and
/// `ifa_msghdr` alike). A message of another version is taken as a change:
/// a spurious look costs one interface listing, a missed change an
/// unannounced link.
pub fn route_message_is_a_link_change(msg: &[u8]) -> bool {
    let [_, _, version, kind, ..] = *msg else {
        return false;
    };
    version != rtm::VERSION
        || matches!(
            kind,
            rtm::NEWADDR | rtm::DELADDR | rtm::IFINFO | rtm::IFINFO2
        )
}

#[cfg(target_os = "linux")]
impl LinkChanges {
    /// Opens a netlink route socket in this process's network namespace,
    /// joined to the link, IPv4 address and IPv6 address groups. Call it
    /// inside a tokio runtime (the socket is registered with its reactor).
    ///
    /// Errors: netlink is unavailable (a seccomp filter, a kernel without
    /// it) or there is no tokio runtime with I/O enabled.
    pub fn subscribe() -> io::Result<LinkChanges> {
        use nix::sys::socket::{
            bind, socket, AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType,
        };
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )?;
        let groups = libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR;
        // Port id 0: the kernel assigns one. The group mask is a bit set.
        bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &NetlinkAddr::new(0, groups as u32),
        )?;
        let fd = register(fd)?;
        Ok(LinkChanges { fd })
    }

    /// Waits until the kernel reports at least one change, then reads every
    /// notification already queued, so that a burst (a link coming up brings
    /// a link message and one per address) wakes the caller once.
    ///
    /// Cancel-safe: dropping the future loses no change that has not been
    /// read, and a change read is reported by this call's `Ok`.
    pub async fn next(&mut self) -> io::Result<()> {
        use nix::errno::Errno;
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        // Large enough for a typical burst in one read; a longer message is
        // truncated, which is fine: its content is not used.
        let mut buf = [0u8; 8192];
        loop {
            let mut guard = self.fd.readable().await?;
            let mut changed = false;
            loop {
                match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                    Ok(_) => changed = true,
                    // Notifications were dropped: something changed.
                    Err(Errno::ENOBUFS) => changed = true,
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => {
                        guard.clear_ready();
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if changed {
                return Ok(());
            }
        }
    }
}

#[cfg(target_os = "macos")]
impl LinkChanges {
    /// Opens a route socket (`PF_ROUTE`, all address families). Call it
    /// inside a tokio runtime (the socket is registered with its reactor).
    ///
    /// Errors: the socket cannot be opened (a sandbox forbids it) or there
    /// is no tokio runtime with I/O enabled.
    pub fn subscribe() -> io::Result<LinkChanges> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: plain socket(2); a negative return is checked before use.
        let raw = unsafe { libc::socket(libc::PF_ROUTE, libc::SOCK_RAW, libc::AF_UNSPEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: fcntl on a descriptor we own, with integer arguments.
        let ok = unsafe {
            libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC) >= 0
                && libc::fcntl(raw, libc::F_SETFL, libc::O_NONBLOCK) >= 0
        };
        if !ok {
            return Err(io::Error::last_os_error());
        }
        Ok(LinkChanges { fd: register(fd)? })
    }

    /// Waits until the kernel reports a link or address change, reading
    /// (and dropping) the route and ARP-entry messages in between, then
    /// reads every message already queued, so that a burst wakes the
    /// caller once. Cancel-safe, as on Linux.
    pub async fn next(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // One message per read; the headers are small, the addresses after
        // them are not needed, and a longer message is truncated.
        let mut buf = [0u8; 2048];
        loop {
            let mut guard = self.fd.readable().await?;
            let mut changed = false;
            loop {
                // SAFETY: reads at most `buf.len()` bytes into `buf`.
                let n =
                    unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n >= 0 {
                    changed |= route_message_is_a_link_change(&buf[..n as usize]);
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // The socket buffer overflowed: a change may be lost.
                    Some(libc::ENOBUFS) => changed = true,
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN) => {
                        guard.clear_ready();
                        break;
                    }
                    _ => return Err(e),
                }
            }
            if changed {
                return Ok(());
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
impl LinkChanges {
    /// Not available on this system: the caller keeps polling.
    pub fn subscribe() -> io::Result<LinkChanges> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "link change notifications are implemented for Linux (netlink) and macOS \
             (route socket) only",
        ))
    }

    /// Never returns (there is no subscription to wait on).
    pub async fn next(&mut self) -> io::Result<()> {
        std::future::pending().await
    }
}

#[cfg(test)]
mod route_message_tests {
    use super::*;

    /// Headers as the macOS kernel writes them (`rtm_msglen` little-endian,
    /// `rtm_version` 5, `rtm_type`), cut after the type: the rest is not read.
    fn header(kind: u8) -> [u8; 4] {
        [0x70, 0x00, rtm::VERSION, kind]
    }

    #[test]
    fn interface_and_address_messages_are_changes() {
        for kind in [rtm::NEWADDR, rtm::DELADDR, rtm::IFINFO, rtm::IFINFO2] {
            assert!(route_message_is_a_link_change(&header(kind)), "{kind:#x}");
        }
    }

    #[test]
    fn route_and_arp_entry_messages_are_not() {
        // RTM_ADD, RTM_DELETE, RTM_CHANGE, RTM_RESOLVE, RTM_NEWMADDR, RTM_DELMADDR
        for kind in [0x1, 0x2, 0x3, 0xb, 0xf, 0x10] {
            assert!(!route_message_is_a_link_change(&header(kind)), "{kind:#x}");
        }
    }

    #[test]
    fn a_message_of_an_unknown_version_is_taken_as_a_change_and_a_runt_is_not() {
        assert!(route_message_is_a_link_change(&[0x70, 0, 9, 0x1]));
        assert!(!route_message_is_a_link_change(&[0x70, 0, 5]));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribing_works_inside_a_runtime() {
        // No change is provoked here: that needs a private network
        // namespace (see tests/announce.rs). Opening the socket does not.
        LinkChanges::subscribe().expect("a netlink route socket");
    }

    #[test]
    fn subscribing_outside_a_runtime_is_an_error_not_a_panic() {
        let err = LinkChanges::subscribe().expect_err("no runtime");
        assert!(err.to_string().contains("tokio"), "{err}");
    }
}
