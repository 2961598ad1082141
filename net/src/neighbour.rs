//! **ARP help** — small ARP frames that keep packet loss from costing whole
//! seconds, for the one-shot browse and for admission handshakes.
//!
//! Linux resolves a neighbour's MAC address with one ARP request a second
//! (`retrans_time_ms`), giving up after three. On a LAN that loses packets,
//! every lost ARP exchange therefore holds whatever waits behind it for a
//! full second: a responder's unicast reply to our legacy query, or our own
//! handshake SYN to an agent we have never talked to. Under heavy loss a
//! live agent can fail all of its handshake attempts because our kernel had
//! not resolved its MAC in time (what that cost before this module:
//! BENCHMARKS.md, "mDNS discovery").
//!
//! Two remedies, both only where this process may open a packet socket
//! (`CAP_NET_RAW`: root, as in the lab; elsewhere the kernel's own pace is
//! all there is):
//!
//! - [`ArpSocket::announce`]: a gratuitous ARP of our own address, which
//!   fills in a responder's pending entry for us (RFC 826's merge rule) and
//!   releases its queued replies (the browse sends these on a schedule).
//! - [`Nudger`]: while handshakes have been pending for [`NUDGE_AFTER`],
//!   reads the kernel's neighbour
//!   table (`/proc/net/arp`) every [`NUDGE_EVERY`] and, for each target our
//!   kernel is still resolving, sends an ARP request of its own, at most
//!   [`NUDGES_PER_TARGET`] per target and [`NUDGES_PER_SECOND`] in all. The
//!   target's reply completes the kernel's pending entry as if it answered
//!   the kernel's own request. While a handshake runs longer than
//!   [`STRUGGLING`], it also announces our own address on that interface
//!   (at most once per [`ANNOUNCE_EVERY`]): the target may be the one
//!   waiting, for our MAC, to send its SYN-ACK (with only our side nudged,
//!   a rare handshake under heavy loss still failed all its attempts).
//!   Nothing is sent while handshakes complete promptly, so a healthy LAN
//!   sees no extra frame.
//!
//! IPv6 neighbour discovery has the same one-second pace, and the same
//! help: the browse announces our IPv6 addresses ([`crate::ndp`]), and the
//! nudger watches IPv6 targets too, reading the kernel's IPv6 neighbour
//! table over netlink and sending Neighbor Solicitations of its own
//! ([`crate::neighbour6`]), and unsolicited Neighbor Advertisements of our
//! addresses while a handshake struggles, under the same bounds (the
//! budget per second is shared by both families). Without it, an IPv6-only
//! LAN under loss refused agents heard by mDNS at the handshake
//! (BENCHMARKS.md, "mDNS discovery", IPv6-only).
//!
//! # Platforms
//! Linux only: packet sockets (`AF_PACKET`), `/proc/net/arp` and the
//! netlink neighbour table have no
//! macOS counterpart short of BPF devices (`/dev/bpf*`, root only, one
//! device per interface), which would not earn their place for a
//! coordinator that macOS runs unprivileged anyway. Elsewhere
//! [`ArpSocket::open`] returns `None` and [`Nudger::watch`] sends nothing,
//! each saying so once at debug level; discovery and admission work as
//! before, at the kernel's own ARP pace (what that costs under loss:
//! BENCHMARKS.md, "mDNS discovery").

use crate::ndp::NdpSocket;
use crate::neighbour6::{self, Solicitor};
use crate::netguard;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often the neighbour table is read while handshakes are pending.
pub const NUDGE_EVERY: Duration = Duration::from_millis(100);

/// How long a target is watched before the neighbour table is read for
/// it: a handshake on a healthy LAN is over in milliseconds, and one whose
/// ARP exchange is lost waits a second for the kernel's next request, so
/// a first look after this long costs the lossy case little and spares a
/// busy coordinator (hundreds of members, a handshake always pending) a
/// read of the whole table every [`NUDGE_EVERY`] (docs/scale.md: at 1,000
/// members that read, and the nudges it led to, were most of `watch`'s
/// time).
pub const NUDGE_AFTER: Duration = Duration::from_millis(150);

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
            "ARP and IPv6 neighbour help are not available on this system (they need Linux \
             packet sockets and the netlink neighbour table): a lost ARP or neighbour-discovery \
             packet waits for the kernel's own retry"
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

/// Sends ARP requests (IPv4) and Neighbor Solicitations (IPv6) for
/// handshake targets the kernel is slow to resolve (see the module docs).
/// Cheap to keep: the background task runs only while targets are
/// registered, and ends with the last [`Target`].
pub struct Nudger {
    state: Mutex<NudgeState>,
}

#[derive(Default)]
struct NudgeState {
    /// The targets being watched.
    targets: HashMap<IpAddr, Watched>,
    /// When we last announced ourselves on each interface, per family
    /// (`true`: IPv6).
    announced: HashMap<(String, bool), Instant>,
    /// Whether the background task runs.
    running: bool,
    /// Nudges sent in all.
    sent: usize,
    /// Whether the IPv6 table could not be read (said once).
    said_no_table6: bool,
}

/// One target's state.
struct Watched {
    /// Live [`Target`]s for it.
    registrations: usize,
    /// Requests or solicitations sent for it.
    nudges: u32,
    /// When it was first registered.
    since: Instant,
}

/// The sockets nudges are sent from, opened on first use (`None`: nothing
/// can be sent there).
#[derive(Default)]
struct Senders {
    /// Packet sockets by interface, for ARP.
    arp: HashMap<String, Option<ArpSocket>>,
    /// Raw ICMPv6 sockets by (interface index, our source address), for
    /// solicitations.
    ns: HashMap<(u32, Ipv6Addr), Option<Solicitor>>,
    /// Raw ICMPv6 sockets by interface, for advertisements of our own.
    na: HashMap<String, Option<NdpSocket>>,
    /// Whether this network namespace may send to the link at all
    /// (`RLX_NETNS_GUARD`), asked once.
    allowed: Option<bool>,
}

impl Senders {
    /// Whether the guard lets nudges out of this namespace; a refusal is
    /// said once, at debug level (the handshakes go on without help).
    fn allowed(&mut self) -> bool {
        *self.allowed.get_or_insert_with(|| {
            match netguard::ensure_private_netns("neighbour nudges") {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!("no neighbour nudges: {e}");
                    false
                }
            }
        })
    }

    /// Sends `n`; whether it was sent.
    fn send(&mut self, n: &Nudge) -> bool {
        if !self.allowed() {
            return false;
        }
        match n {
            Nudge::Ask { ip, dev, ifindex } => self.ask(*ip, dev, *ifindex),
            Nudge::Announce { dev, v6: true } => self
                .na
                .entry(dev.clone())
                .or_insert_with(|| NdpSocket::open(dev))
                .as_ref()
                .is_some_and(NdpSocket::announce),
            Nudge::Announce { dev, v6: false } => self
                .arp
                .entry(dev.clone())
                .or_insert_with(|| ArpSocket::open(dev))
                .as_ref()
                .is_some_and(ArpSocket::announce),
        }
    }

    /// Asks the link for `ip` (on `dev`, index `ifindex`); whether it was sent.
    fn ask(&mut self, ip: IpAddr, dev: &str, ifindex: u32) -> bool {
        match ip {
            IpAddr::V4(v4) => self
                .arp
                .entry(dev.to_string())
                .or_insert_with(|| ArpSocket::open(dev))
                .as_ref()
                .is_some_and(|s| s.request(v4)),
            IpAddr::V6(v6) => {
                // From the address the handshake is sent from, so that the
                // target learns that one of ours (module docs of
                // `neighbour6`).
                let Some(src) = neighbour6::source_for(v6, ifindex) else {
                    return false;
                };
                self.ns
                    .entry((ifindex, src))
                    .or_insert_with(|| Solicitor::open(ifindex, src))
                    .as_ref()
                    .is_some_and(|s| s.solicit(v6))
            }
        }
    }
}

/// One frame the nudger decides to send.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Nudge {
    /// An ARP request or a Neighbor Solicitation for `ip`.
    Ask {
        ip: IpAddr,
        dev: String,
        ifindex: u32,
    },
    /// A gratuitous ARP (`v6` false) or unsolicited Neighbor
    /// Advertisements (`v6` true) of our own address(es) on `dev`.
    Announce { dev: String, v6: bool },
}

/// A watched target's entry in one of the kernel's neighbour tables.
struct Entry {
    ip: IpAddr,
    /// Interface name, and index (0 where unknown: IPv4).
    dev: String,
    ifindex: u32,
    resolved: bool,
}

/// A registration of one target with a [`Nudger`]; dropping it ends it.
pub struct Target {
    nudger: Weak<Nudger>,
    ip: IpAddr,
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

/// The entries of the watched `targets` in the kernel's neighbour tables
/// (IPv4 from `/proc/net/arp`, IPv6 over netlink), reading only the
/// tables of the families watched. The IPv6 table's error, if any.
fn read_tables(targets: &HashSet<IpAddr>) -> (Vec<Entry>, Option<std::io::Error>) {
    let mut out = Vec::new();
    let mut err = None;
    if targets.iter().any(IpAddr::is_ipv4) {
        let table = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
        out.extend(
            neighbours(&table)
                .into_iter()
                .filter(|n| targets.contains(&IpAddr::V4(n.ip)))
                .map(|n| Entry {
                    ip: n.ip.into(),
                    dev: n.dev,
                    ifindex: 0,
                    resolved: n.resolved,
                }),
        );
    }
    if targets.iter().any(IpAddr::is_ipv6) {
        match neighbour6::table() {
            Ok(t) => out.extend(
                t.into_iter()
                    .filter(|n| targets.contains(&IpAddr::V6(n.ip)))
                    .filter_map(|n| {
                        let dev = nix::net::if_::if_indextoname(n.ifindex).ok()?;
                        Some(Entry {
                            ip: n.ip.into(),
                            dev: dev.to_str().ok()?.to_string(),
                            ifindex: n.ifindex,
                            resolved: !n.resolving(),
                        })
                    }),
            ),
            Err(e) => err = Some(e),
        }
    }
    (out, err)
}

impl NudgeState {
    /// One round over the watched targets' `entries`: asks for each one
    /// still unresolved (at most [`NUDGES_PER_TARGET`] each, and `budget`
    /// in all), then announces us on each interface where a handshake has
    /// run past [`STRUGGLING`] (at most once per [`ANNOUNCE_EVERY`]).
    /// `send` sends one frame and says whether it went.
    fn tick(
        &mut self,
        entries: Vec<Entry>,
        budget: &mut u32,
        send: &mut dyn FnMut(&Nudge) -> bool,
    ) {
        let mut struggling: Vec<(String, bool)> = Vec::new();
        for e in entries {
            let Some(t) = self.targets.get_mut(&e.ip) else {
                continue;
            };
            let on = (e.dev.clone(), e.ip.is_ipv6());
            if t.since.elapsed() >= STRUGGLING && !struggling.contains(&on) {
                struggling.push(on);
            }
            if e.resolved || t.nudges >= NUDGES_PER_TARGET || *budget == 0 {
                continue;
            }
            let ask = Nudge::Ask {
                ip: e.ip,
                dev: e.dev,
                ifindex: e.ifindex,
            };
            if send(&ask) {
                t.nudges += 1;
                self.sent += 1;
                *budget -= 1;
            }
        }
        // A handshake still running after STRUGGLING may be stuck on the
        // other side: the target waiting to learn our MAC for its SYN-ACK.
        // Announcing ourselves completes its pending (or failed) entry, as
        // the browse's announcements do for mDNS replies.
        for on in struggling {
            if self
                .announced
                .get(&on)
                .is_some_and(|t| t.elapsed() < ANNOUNCE_EVERY)
            {
                continue;
            }
            let announce = Nudge::Announce {
                dev: on.0.clone(),
                v6: on.1,
            };
            if send(&announce) {
                self.sent += 1;
                self.announced.insert(on, Instant::now());
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

    /// Nudges sent so far: ARP requests and announcements, Neighbor
    /// Solicitations and Advertisements.
    pub fn sent(&self) -> usize {
        self.state.lock().expect("nudger lock").sent
    }

    /// Watches `ip` until the returned [`Target`] is dropped. Must be called
    /// inside a tokio runtime.
    pub fn watch(self: &Arc<Self>, ip: IpAddr) -> Target {
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
        let mut senders = Senders::default();
        let mut budget_from = Instant::now();
        let mut budget = NUDGES_PER_SECOND;
        loop {
            tokio::time::sleep(NUDGE_EVERY).await;
            let Some(n) = me.upgrade() else { return };
            let watched: HashSet<IpAddr> = {
                let mut st = n.state.lock().expect("nudger lock");
                if st.targets.is_empty() {
                    st.running = false;
                    return;
                }
                st.targets
                    .iter()
                    .filter(|(_, t)| t.since.elapsed() >= NUDGE_AFTER)
                    .map(|(ip, _)| *ip)
                    .collect()
            };
            if watched.is_empty() {
                continue;
            }
            let (entries, table6_error) = read_tables(&watched);
            let mut st = n.state.lock().expect("nudger lock");
            if let Some(e) = table6_error.filter(|_| !st.said_no_table6) {
                st.said_no_table6 = true;
                tracing::debug!(
                    "IPv6 handshakes are not nudged: the kernel's neighbour table cannot be read ({e})"
                );
            }
            if budget_from.elapsed() >= Duration::from_secs(1) {
                budget_from = Instant::now();
                budget = NUDGES_PER_SECOND;
            }
            st.tick(entries, &mut budget, &mut |n| senders.send(n));
        }
    }
}

#[cfg(test)]
mod tests;
