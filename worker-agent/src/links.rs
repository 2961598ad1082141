//! **Hear about interfaces coming and going instead of polling for them** —
//! a netlink route socket that becomes readable when a link or an address
//! appears, changes or disappears.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let mut changes = rlx_agent::links::LinkChanges::subscribe()?;
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
//! [`crate::announce`] turns mdns-sd's poll off while this socket works and
//! asks for a check only after the socket says something changed.
//!
//! The messages are not parsed: any message means "look again", and so does
//! `ENOBUFS` (the kernel dropped notifications because the socket's buffer
//! was full, so a change may have been missed). Looking again costs one
//! interface listing, so a spurious wake-up is harmless; a missed one would
//! leave the node unannounced on a new link.
//!
//! Linux only: elsewhere [`LinkChanges::subscribe`] fails with
//! [`std::io::ErrorKind::Unsupported`] and the caller keeps polling.

use std::io;

/// A subscription to the kernel's link and address change notifications.
#[derive(Debug)]
pub struct LinkChanges {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
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
        // A failure here (no runtime, no I/O driver) must not panic the caller.
        let fd = tokio::runtime::Handle::try_current()
            .map_err(|e| io::Error::other(format!("no tokio runtime: {e}")))
            .and_then(|h| {
                let _guard = h.enter();
                // SAFETY: the AsyncFd takes the OwnedFd itself, so the
                // descriptor stays open, and is the same one, for exactly as
                // long as it is registered.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd,
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(io::Error::from)
            })?;
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

#[cfg(not(target_os = "linux"))]
impl LinkChanges {
    /// Not available on this system: the caller keeps polling.
    pub fn subscribe() -> io::Result<LinkChanges> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "link change notifications are implemented for Linux (netlink) only",
        ))
    }

    /// Never returns (there is no subscription to wait on).
    pub async fn next(&mut self) -> io::Result<()> {
        std::future::pending().await
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
