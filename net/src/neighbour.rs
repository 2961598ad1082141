//! **ARP help** — small ARP frames that keep packet loss from costing whole
//! seconds, for the one-shot browse and for admission handshakes.
//!
//! Linux resolves a neighbour's MAC address with one ARP request a second
//! (`retrans_time_ms`), giving up after three. On a LAN that loses packets,
//! every lost ARP exchange therefore holds whatever waits behind it for a
//! full second: a responder's unicast reply to our legacy query, or our own
//! handshake SYN to an agent we have never talked to. Measured at 20% loss
//! each way with 50 agents: one to four live agents per run failed their
//! handshake (four attempts over 2.25 s) because our kernel had not resolved
//! their MAC in time.
//!
//! Two remedies, both only where this process may open a packet socket
//! (`CAP_NET_RAW`: root, as in the lab; elsewhere the kernel's own pace is
//! all there is):
//!
//! - [`ArpSocket::announce`]: a gratuitous ARP of our own address, which
//!   fills in a responder's pending entry for us (RFC 826's merge rule) and
//!   releases its queued replies (the browse sends these on a schedule).
//! - [`Nudger`]: while handshakes are pending, reads the kernel's neighbour
//!   table (`/proc/net/arp`) every [`NUDGE_EVERY`] and, for each target our
//!   kernel is still resolving, sends an ARP request of its own, at most
//!   [`NUDGES_PER_TARGET`] per target and [`NUDGES_PER_SECOND`] in all. The
//!   target's reply completes the kernel's pending entry as if it answered
//!   the kernel's own request. While a handshake runs longer than
//!   [`STRUGGLING`], it also announces our own address on that interface
//!   (at most once per [`ANNOUNCE_EVERY`]): the target may be the one
//!   waiting, for our MAC, to send its SYN-ACK (measured: one live agent in
//!   about a thousand handshakes at 20% loss failed all four attempts with
//!   only our side nudged). Nothing is sent while handshakes complete
//!   promptly, so a healthy LAN sees no extra frame.
//!
//! IPv6 neighbour discovery has the same one-second pace. The browse
//! announces our IPv6 addresses too ([`crate::ndp`]); handshakes over IPv6
//! are not nudged (agents are found over IPv4 first wherever both exist).
//!
//! # Platforms
//! Linux only: packet sockets (`AF_PACKET`) and `/proc/net/arp` have no
//! macOS counterpart short of BPF devices (`/dev/bpf*`, root only, one
//! device per interface), which would not earn their place for a
//! coordinator that macOS runs unprivileged anyway. Elsewhere
//! [`ArpSocket::open`] returns `None` and [`Nudger::watch`] sends nothing,
//! each saying so once at debug level; discovery and admission work as
//! before, at the kernel's own ARP pace (what that costs under loss:
//! `BENCHMARKS.md`).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often the neighbour table is read while handshakes are pending.
pub const NUDGE_EVERY: Duration = Duration::from_millis(100);

/// ARP requests sent for one target at most: with 20% loss each way an ARP
/// exchange succeeds 64% of the time, so eight leave about one chance in
/// three thousand of the kernel still waiting (then its own once-a-second
/// requests go on).
pub const NUDGES_PER_TARGET: u32 = 8;

/// ARP requests sent in all per second at most, so that a flood of bogus
/// announcements naming addresses where nobody lives cannot make us flood
/// the segment with broadcasts in turn.
pub const NUDGES_PER_SECOND: u32 = 200;

/// How long a handshake may run before the nudger also announces our own
/// address on its interface: a healthy one on a LAN answers in
/// milliseconds.
pub const STRUGGLING: Duration = Duration::from_millis(300);

/// Announcements of our own address per interface while handshakes
/// struggle: at most one per this interval.
pub const ANNOUNCE_EVERY: Duration = Duration::from_millis(300);

/// A packet socket that sends ARP frames from one interface.
pub struct ArpSocket {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    #[cfg(target_os = "linux")]
    dest: nix::sys::socket::LinkAddr,
    mac: [u8; 6],
    ip: Ipv4Addr,
}

/// Says once, at debug level, that this system has no ARP help.
#[cfg(not(target_os = "linux"))]
fn say_unavailable() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::debug!(
            "ARP help is not available on this system (it needs Linux packet sockets): \
             a lost ARP packet waits for the kernel's own retry"
        )
    });
}

impl ArpSocket {
    /// Not available on this system: always `None` (see the module docs).
    #[cfg(not(target_os = "linux"))]
    pub fn open(_name: &str) -> Option<ArpSocket> {
        say_unavailable();
        None
    }

    /// Opens one for interface `name`, sending as its first IPv4 address.
    /// `None` where ARP does not apply (loopback, no IPv4 address, no MAC)
    /// or a packet socket is not allowed (no `CAP_NET_RAW`).
    #[cfg(target_os = "linux")]
    pub fn open(name: &str) -> Option<ArpSocket> {
        use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType, SockaddrLike};
        let addrs: Vec<_> = nix::ifaddrs::getifaddrs()
            .ok()?
            .filter(|a| a.interface_name == name)
            .collect();
        if addrs.iter().any(|a| {
            a.flags
                .contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK)
        }) {
            return None;
        }
        let ip = addrs
            .iter()
            .find_map(|a| Some(a.address.as_ref()?.as_sockaddr_in()?.ip()))?;
        let mac = addrs
            .iter()
            .find_map(|a| a.address.as_ref()?.as_link_addr()?.addr())?;
        if mac == [0; 6] {
            return None;
        }
        let index = nix::net::if_::if_nametoindex(name).ok()?;
        let fd = match socket(
            AddressFamily::Packet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::debug!("no ARP frames on {name} ({e}): needs CAP_NET_RAW");
                return None;
            }
        };
        const ETH_P_ARP: u16 = 0x0806;
        let sll = nix::libc::sockaddr_ll {
            sll_family: nix::libc::AF_PACKET as u16,
            sll_protocol: ETH_P_ARP.to_be(),
            sll_ifindex: index as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 6,
            sll_addr: [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0],
        };
        // SAFETY: `sll` is a fully initialised sockaddr_ll on the stack, and
        // the length given is its size; `from_raw` copies it.
        let dest = unsafe {
            nix::sys::socket::LinkAddr::from_raw(
                (&sll as *const nix::libc::sockaddr_ll).cast(),
                Some(std::mem::size_of::<nix::libc::sockaddr_ll>() as u32),
            )
        }?;
        Some(ArpSocket { fd, dest, mac, ip })
    }

    /// Broadcasts a gratuitous ARP of our own address; whether it was sent.
    pub fn announce(&self) -> bool {
        self.send(&arp_request(self.mac, self.ip, self.ip))
    }

    /// Broadcasts "who has `target`?"; whether it was sent.
    pub fn request(&self, target: Ipv4Addr) -> bool {
        self.send(&arp_request(self.mac, self.ip, target))
    }

    #[cfg(target_os = "linux")]
    fn send(&self, frame: &[u8; 28]) -> bool {
        use nix::sys::socket::{sendto, MsgFlags};
        use std::os::fd::AsRawFd;
        sendto(self.fd.as_raw_fd(), frame, &self.dest, MsgFlags::empty()).is_ok()
    }

    /// Never called: no `ArpSocket` exists on this system.
    #[cfg(not(target_os = "linux"))]
    fn send(&self, _frame: &[u8; 28]) -> bool {
        false
    }
}

/// An ARP request (Ethernet/IPv4) from `mac`/`ip` for `target`; with
/// `target == ip` it is a gratuitous announcement (RFC 5227 §2.3).
pub fn arp_request(mac: [u8; 6], ip: Ipv4Addr, target: Ipv4Addr) -> [u8; 28] {
    let mut f = [0u8; 28];
    f[0..2].copy_from_slice(&1u16.to_be_bytes()); // hardware: Ethernet
    f[2..4].copy_from_slice(&0x0800u16.to_be_bytes()); // protocol: IPv4
    f[4] = 6;
    f[5] = 4;
    f[6..8].copy_from_slice(&1u16.to_be_bytes()); // request
    f[8..14].copy_from_slice(&mac);
    f[14..18].copy_from_slice(&ip.octets());
    f[24..28].copy_from_slice(&target.octets());
    f
}

/// One entry of the kernel's IPv4 neighbour table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// The neighbour's address.
    pub ip: Ipv4Addr,
    /// The interface it is on.
    pub dev: String,
    /// Whether its MAC address is known (`ATF_COM`).
    pub resolved: bool,
}

/// The entries of the kernel's IPv4 neighbour table (`/proc/net/arp` text).
pub fn neighbours(proc_net_arp: &str) -> Vec<Neighbour> {
    proc_net_arp
        .lines()
        .skip(1)
        .filter_map(|l| {
            // IP address, HW type, Flags, HW address, Mask, Device
            let f: Vec<&str> = l.split_whitespace().collect();
            let [ip, _, flags, _, _, dev] = f[..] else {
                return None;
            };
            let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
            Some(Neighbour {
                ip: ip.parse().ok()?,
                dev: dev.to_string(),
                resolved: flags & 0x2 != 0,
            })
        })
        .collect()
}

/// Sends ARP requests for handshake targets the kernel is slow to resolve
/// (see the module docs). Cheap to keep: the background task runs only
/// while targets are registered, and ends with the last [`Target`].
pub struct Nudger {
    state: Mutex<NudgeState>,
}

#[derive(Default)]
struct NudgeState {
    /// The targets being watched.
    targets: HashMap<Ipv4Addr, Watched>,
    /// When we last announced ourselves on each interface.
    announced: HashMap<String, Instant>,
    /// Whether the background task runs.
    running: bool,
    /// Packet sockets by interface (`None`: cannot send there).
    sockets: HashMap<String, Option<ArpSocket>>,
    /// Nudges sent in all.
    sent: usize,
}

/// One target's state.
struct Watched {
    /// Live [`Target`]s for it.
    registrations: usize,
    /// ARP requests sent for it.
    nudges: u32,
    /// When it was first registered.
    since: Instant,
}

/// The packet socket for interface `dev`, opened on first use (`None`:
/// nothing can be sent there).
fn socket_for<'a>(
    sockets: &'a mut HashMap<String, Option<ArpSocket>>,
    dev: &str,
) -> Option<&'a ArpSocket> {
    sockets
        .entry(dev.to_string())
        .or_insert_with(|| ArpSocket::open(dev))
        .as_ref()
}

/// A registration of one target with a [`Nudger`]; dropping it ends it.
pub struct Target {
    nudger: Weak<Nudger>,
    ip: Ipv4Addr,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(n) = self.nudger.upgrade() {
            let mut st = n.state.lock().expect("nudger lock");
            if let Some(e) = st.targets.get_mut(&self.ip) {
                e.registrations -= 1;
                if e.registrations == 0 {
                    st.targets.remove(&self.ip);
                }
            }
        }
    }
}

impl Nudger {
    /// A nudger with no target.
    pub fn new() -> Arc<Nudger> {
        Arc::new(Nudger {
            state: Mutex::new(NudgeState::default()),
        })
    }

    /// Nudges sent so far.
    pub fn sent(&self) -> usize {
        self.state.lock().expect("nudger lock").sent
    }

    /// Watches `ip` until the returned [`Target`] is dropped. Must be called
    /// inside a tokio runtime.
    pub fn watch(self: &Arc<Self>, ip: Ipv4Addr) -> Target {
        let mut st = self.state.lock().expect("nudger lock");
        st.targets
            .entry(ip)
            .or_insert(Watched {
                registrations: 0,
                nudges: 0,
                since: Instant::now(),
            })
            .registrations += 1;
        // Elsewhere there is no neighbour table to read nor socket to send
        // from: the registration is kept (so `Target` means the same
        // everywhere) but nothing runs.
        #[cfg(not(target_os = "linux"))]
        say_unavailable();
        if !st.running && cfg!(target_os = "linux") {
            st.running = true;
            tokio::spawn(Self::run(Arc::downgrade(self)));
        }
        Target {
            nudger: Arc::downgrade(self),
            ip,
        }
    }

    async fn run(me: Weak<Nudger>) {
        let mut budget_from = Instant::now();
        let mut budget = NUDGES_PER_SECOND;
        loop {
            tokio::time::sleep(NUDGE_EVERY).await;
            let Some(n) = me.upgrade() else { return };
            let table = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
            let mut st = n.state.lock().expect("nudger lock");
            if st.targets.is_empty() {
                st.running = false;
                return;
            }
            if budget_from.elapsed() >= Duration::from_secs(1) {
                budget_from = Instant::now();
                budget = NUDGES_PER_SECOND;
            }
            let mut struggling: Vec<String> = Vec::new();
            for n in neighbours(&table) {
                let st = &mut *st;
                let Some(t) = st.targets.get_mut(&n.ip) else {
                    continue;
                };
                if t.since.elapsed() >= STRUGGLING && !struggling.contains(&n.dev) {
                    struggling.push(n.dev.clone());
                }
                if n.resolved || t.nudges >= NUDGES_PER_TARGET || budget == 0 {
                    continue;
                }
                if socket_for(&mut st.sockets, &n.dev).is_some_and(|s| s.request(n.ip)) {
                    t.nudges += 1;
                    st.sent += 1;
                    budget -= 1;
                }
            }
            // A handshake still running after STRUGGLING may be stuck on the
            // other side: the target waiting to learn our MAC for its
            // SYN-ACK. Announcing ourselves completes its pending (or failed)
            // entry, as the browse's announcements do for mDNS replies.
            for dev in struggling {
                let st = &mut *st;
                if st
                    .announced
                    .get(&dev)
                    .is_some_and(|t| t.elapsed() < ANNOUNCE_EVERY)
                {
                    continue;
                }
                if socket_for(&mut st.sockets, &dev).is_some_and(ArpSocket::announce) {
                    st.sent += 1;
                    st.announced.insert(dev, Instant::now());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_is_a_request_for_our_own_address() {
        let f = arp_request(
            [2, 0, 0, 0, 0, 9],
            Ipv4Addr::new(10, 9, 1, 1),
            Ipv4Addr::new(10, 9, 1, 1),
        );
        assert_eq!(
            f,
            [
                0, 1, 8, 0, 6, 4, 0, 1, // Ethernet, IPv4, lengths, request
                2, 0, 0, 0, 0, 9, 10, 9, 1, 1, // sender MAC and IP
                0, 0, 0, 0, 0, 0, 10, 9, 1, 1, // target MAC unknown, target IP = ours
            ]
        );
    }

    #[test]
    fn a_request_asks_for_the_target_and_tells_our_address() {
        let f = arp_request(
            [2, 0, 0, 0, 0, 9],
            Ipv4Addr::new(10, 9, 1, 1),
            Ipv4Addr::new(10, 9, 1, 7),
        );
        assert_eq!(&f[14..18], &[10, 9, 1, 1]);
        assert_eq!(&f[18..24], &[0; 6]);
        assert_eq!(&f[24..28], &[10, 9, 1, 7]);
    }

    #[test]
    fn neighbour_entries_say_whether_the_mac_is_known() {
        let table = "\
IP address       HW type     Flags       HW address            Mask     Device
10.9.1.7         0x1         0x0         00:00:00:00:00:00     *        eth0
10.9.1.8         0x1         0x2         02:11:22:33:44:55     *        eth0
10.9.2.9         0x1         0x0         00:00:00:00:00:00     *        eth1
garbage line
";
        let n = |ip: &str, dev: &str, resolved| Neighbour {
            ip: ip.parse().unwrap(),
            dev: dev.into(),
            resolved,
        };
        assert_eq!(
            neighbours(table),
            vec![
                n("10.9.1.7", "eth0", false),
                n("10.9.1.8", "eth0", true),
                n("10.9.2.9", "eth1", false),
            ]
        );
    }

    #[test]
    fn no_arp_socket_opens_on_loopback_or_a_missing_interface() {
        assert!(ArpSocket::open("lo").is_none());
        assert!(ArpSocket::open("rlx-no-such-if").is_none());
    }
}
