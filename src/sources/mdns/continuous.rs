//! **The continuous browse of `watch`** — the multicast path kept running,
//! each event folded into the same instance table as a one-shot browse so
//! that a watched node is decoded, addressed and bounded exactly like a
//! browsed one.
//!
//! # Who sent it
//!
//! mdns-sd ([`MdnsBrowser`]) reports what a record claims, never who sent
//! the packet; counted by the address an announcement names, a stranger
//! announcing one instance per made-up address gets one share per
//! instance and fills the table, so that agents started after a flood
//! never join (docs/security.md, "`watch` under a flood"). So
//! a continuous browse also reads the multicast answers itself, from its
//! own socket on port 5353 ([`listen`]: shared with mdns-sd, as every mDNS
//! stack on a host shares it, and the kernel hands each socket a copy),
//! where `recvfrom` gives the real source: an instance first heard there is
//! counted in its sender's share ([`MAX_INSTANCES_PER_SOURCE`]); one first
//! heard through mdns-sd shares the unsourced slots ([`MAX_UNSOURCED`]).
//! A flooder thus holds at most 64 + 256 instances, and a real agent, heard
//! from its own address, always finds room. Answers from a source that is
//! not on the link of the interface they came in on, or not from port
//! 5353, are ignored (RFC 6762 §11). IPv6 answers are left to mdns-sd.
//!
//! # What is dialled
//!
//! With [`DialPolicy::OnLinkOrSource`] (the default of `watch` with a
//! cluster key) a complete instance whose address is neither on the subnet
//! of a browsed interface nor the real source of a packet that announced it
//! is refused with that reason, before any handshake: a stranger cannot make
//! the coordinator dial addresses of its choosing elsewhere.
//!
//! # Goodbyes
//!
//! A goodbye (TTL 0) is passed on as [`Change::Removed`] twice over: from
//! the browse's own socket the moment it is heard ([`wire::goodbyes_in`]),
//! and from mdns-sd when it drops the instance a second later (RFC 6762
//! §10.1), or when a record expires. Anyone can send one, so `watch` checks
//! the member and keeps it when it still answers; but mdns-sd has dropped
//! the instance all the same, and would report neither its changes nor its
//! real goodbye later. The browse's own socket still hears that goodbye,
//! whatever mdns-sd's cache holds, and [`ContinuousBrowse::relearn`] asks
//! the LAN for the lost instances again: a standard query (from port 5353,
//! so answered by multicast, which mdns-sd hears) listing every instance
//! the table holds as a known answer (RFC 6762 §7.1), so that only the lost
//! ones answer; at most one every [`RELEARN_EVERY`].
//!
//! # Pruning
//!
//! Instances that said goodbye (or that mdns-sd expired) and those not heard
//! for [`STALE_AFTER`] are dropped from the table at most every
//! [`PRUNE_EVERY`], and their shares given back: the bounds hold for what
//! is announced now.
//!
//! [`MAX_INSTANCES_PER_SOURCE`]: super::table::MAX_INSTANCES_PER_SOURCE
//! [`MAX_UNSOURCED`]: super::table::MAX_UNSOURCED

use super::browser::{BrowserEvent, MdnsBrowser};
use super::options::{BrowseOptions, DialPolicy, MdnsError};
use super::sockets::{group_destinations, send_standard_query_from, Datagram, READ_QUEUE};
use super::table::Table;
use super::wire::{self, lenient_message, on_link, strip_service, MAX_PACKET, MDNS_PORT, MDNS_V4};
use crate::sighting::{Problem, Sighting};
use hickory_proto::op::{Message, MessageType, OpCode};
use rlx_net::iface::{self, Iface};
use rlx_net::netguard;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long an instance may go unheard before it is pruned. mdns-sd
/// responders re-announce and answer every query; ten minutes is well past
/// the 120 s TTL of their SRV and address records, so only what is gone is
/// dropped. A member pruned from the table stays a member (leaves come from
/// goodbyes and health checks); it comes back with its next announcement.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(600);

/// Most multicast answers read a second from any one source address
/// (with a burst of as many): a responder sends a few a second, a flood
/// thousands. Beyond it the answers are dropped before they are decoded,
/// so one stranger cannot take the loop's time nor fill the queue that
/// the real agents' answers wait in (measured before this: at 2,500
/// packets a second from one flooder, 65,536 answers were dropped in 40 s,
/// the real agents' among them, and none joined).
pub(super) const MAX_ANSWERS_PER_SOURCE: u32 = 20;

/// Sources whose answer rate is tracked at once; when more send, the
/// tracking starts over (each source gets a fresh burst).
const TRACKED_SOURCES: usize = 4096;

/// How often the table is pruned at most (each prune is one pass over it).
pub(crate) const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// The shortest time between two re-learning queries
/// ([`ContinuousBrowse::relearn`]). RFC 6762 §5.2 has a querier wait at
/// least a second between two queries, and a responder multicasts a record
/// at most once a second (§6): mdns-sd drops the answer that would come
/// sooner, and delays its answers to a shared-record question by 20-120 ms
/// (§6), so two queries a second apart can draw one answer. A second plus
/// the spread of that delay, and a margin, gets every one. However many
/// goodbyes a stranger forges, the browse sends no more than one query (one
/// packet per 60 or so known answers) this often.
pub(crate) const RELEARN_EVERY: Duration = Duration::from_millis(1200);

/// What changed in a [`ContinuousBrowse`].
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// The current complete instances and the malformed ones (pending
    /// instances, still missing a record, are in neither).
    Snapshot {
        /// One per complete instance, with TXT caps.
        sightings: Vec<Sighting>,
        /// Malformed announcements, with reasons.
        problems: Vec<Problem>,
        /// The labels whose address is the real source of a packet that
        /// announced them (admission takes them first).
        vouched: BTreeSet<String>,
    },
    /// An instance said goodbye (or expired): its label.
    Removed(String),
}

/// The multicast path alone, kept running: the event source of `watch`.
/// Each event is folded into the same instance table as a one-shot browse,
/// so a watched node is decoded, addressed and bounded exactly like a
/// browsed one.
pub(crate) struct ContinuousBrowse {
    browser: MdnsBrowser,
    table: Table,
    opts: BrowseOptions,
    started: Instant,
    policy: DialPolicy,
    /// Multicast answers with their real source ([`listen`]).
    heard: Option<mpsc::Receiver<Datagram>>,
    reader: Option<JoinHandle<()>>,
    last_prune: Instant,
    /// Goodbyes heard on the browse's own socket, not yet passed on (at
    /// most [`READ_QUEUE`]).
    goodbyes: VecDeque<String>,
    /// When the next re-learning query goes out (`None`: none asked for).
    relearn_at: Option<Instant>,
    /// When the last one went out.
    relearned: Option<Instant>,
    /// A datagram taught the table something: a snapshot is owed.
    snapshot_due: bool,
    /// When the last snapshot went out: the next waits [`SNAPSHOT_GAP`].
    last_snapshot: Option<Instant>,
}

/// The least time between two snapshots. A query of the whole LAN (the
/// browse's own, or another host's) draws an answer from every agent
/// within about 120 ms (RFC 6762 §6's delay), each an event; a snapshot
/// per answer walked the whole table hundreds of times a second at a few
/// hundred agents. The first snapshot after a quiet spell goes out at
/// once, so a lone join is not delayed.
pub(crate) const SNAPSHOT_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// What woke [`ContinuousBrowse::next`].
enum Wake {
    Event(Option<BrowserEvent>),
    Datagram(Option<Datagram>),
    Relearn,
}

impl ContinuousBrowse {
    /// Starts browsing (guard first, then the interfaces of `opts`).
    pub(crate) fn start(opts: &BrowseOptions, started: Instant) -> Result<Self, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let ifaces = iface::select(&opts.interfaces)?;
        if ifaces.is_empty() {
            return Err(MdnsError::NoInterface {
                available: iface::describe(&iface::all_interfaces()?),
            });
        }
        let browser = MdnsBrowser::start(&ifaces)?;
        let (heard, reader) = match listen(ifaces.clone()) {
            Ok((rx, task)) => (Some(rx), Some(task)),
            Err(e) => {
                tracing::warn!(
                    "cannot read mDNS answers with their source (port 5353: {e}); \
                     every instance shares the {} unsourced slots",
                    super::table::MAX_UNSOURCED
                );
                (None, None)
            }
        };
        let mut table = Table::new(ifaces);
        table.multicast_by_claim = false;
        table.resolved_replaces = true;
        Ok(ContinuousBrowse {
            browser,
            table,
            opts: opts.clone(),
            started,
            // The policy the options ask for, from the first snapshot on.
            policy: opts.dial,
            heard,
            reader,
            last_prune: Instant::now(),
            goodbyes: VecDeque::new(),
            relearn_at: None,
            relearned: None,
            snapshot_due: false,
            last_snapshot: None,
        })
    }

    /// Asks the LAN again, soon, for the instances it no longer holds
    /// although their machines still answer (see "Goodbyes" in the module
    /// doc): a standard query goes out at the next [`RELEARN_EVERY`]
    /// boundary, one for any number of calls until then.
    pub(crate) fn relearn(&mut self) {
        if self.relearn_at.is_some() {
            return;
        }
        let now = Instant::now();
        self.relearn_at = Some(self.relearned.map_or(now, |t| (t + RELEARN_EVERY).max(now)));
    }

    /// Sends the re-learning query on every browsed interface and family:
    /// every complete instance of the table is a known answer, so only the
    /// ones missing from it (and from mdns-sd's cache) answer.
    fn send_relearn(&mut self, now: Instant) {
        self.relearn_at = None;
        self.relearned = Some(now);
        let known: Vec<Vec<u8>> = self
            .table
            .instances
            .iter()
            .filter(|i| !i.removed && i.complete_at.is_some())
            .map(|i| i.label.as_bytes().to_vec())
            .collect();
        let packets = match wire::standard_queries(&known) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!("re-learning query not built: {e}");
                return;
            }
        };
        let mut sent = 0;
        for (local, dest) in group_destinations(&self.table.ifaces) {
            for p in &packets {
                sent += usize::from(send_standard_query_from(local, dest, p));
            }
        }
        tracing::debug!(
            "asked the LAN again for lost instances: {sent} packet(s), {} known answer(s)",
            known.len()
        );
    }

    /// The names of the interfaces browsed.
    pub(crate) fn interfaces(&self) -> Vec<String> {
        self.table.ifaces.iter().map(|i| i.name.clone()).collect()
    }

    /// Waits for the next event and says what changed; `None` when the
    /// mDNS daemon is gone for good. Cancel-safe: nothing is lost when the
    /// future is dropped between events.
    pub(crate) async fn next(&mut self) -> Option<Change> {
        loop {
            if let Some(label) = self.goodbyes.pop_front() {
                return Some(Change::Removed(label));
            }
            let gap_ends = self.last_snapshot.map(|t| t + SNAPSHOT_GAP);
            let now = Instant::now();
            if self.snapshot_due && gap_ends.is_none_or(|t| t <= now) {
                self.snapshot_due = false;
                self.table.newly_resolved.clear();
                return Some(self.snapshot(now));
            }
            // Yield to the runtime now and then: mdns-sd's channel does not
            // take part in tokio's cooperative budget, and under a flood
            // it is always ready, which would keep this loop (and whatever
            // polls it) from ever giving the other tasks their turn.
            tokio::task::consume_budget().await;
            let relearn_at = self.relearn_at;
            let owed = gap_ends.filter(|_| self.snapshot_due);
            let woke = tokio::select! {
                ev = self.browser.next() => Wake::Event(ev),
                d = next_datagram(&mut self.heard) => Wake::Datagram(d),
                () = async {
                    match owed {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                } => continue,
                () = async {
                    match relearn_at {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                } => Wake::Relearn,
            };
            let now = Instant::now();
            let removed = match woke {
                Wake::Relearn => {
                    self.send_relearn(now);
                    continue;
                }
                Wake::Event(None) => return None,
                Wake::Event(Some(ev)) => {
                    let (label, removed) = match &ev {
                        BrowserEvent::Removed(full) => (strip_service(full), true),
                        BrowserEvent::Resolved(r) => (strip_service(&r.fullname), false),
                        // Nothing is complete on a PTR alone.
                        BrowserEvent::Found(_) => (None, false),
                    };
                    let label = label.map(str::to_string);
                    if let Some(l) = &label {
                        self.log_event(l, removed);
                    }
                    self.table.apply_event(&ev, now);
                    self.maybe_prune(now);
                    // An instance the table has no room for changes nothing:
                    // no snapshot (a flood would make one per bogus record).
                    match label {
                        Some(l) if removed => Some(l),
                        Some(l) if self.table.lookup(&l).is_some() => None,
                        _ => continue,
                    }
                }
                Wake::Datagram(None) => {
                    tracing::warn!("the mDNS answer reader stopped; going on with mdns-sd alone");
                    self.heard = None;
                    continue;
                }
                Wake::Datagram(Some(d)) => {
                    // Its goodbyes go first; what it taught the table, in
                    // the snapshot after them.
                    self.snapshot_due |= self.on_datagram(&d, now);
                    self.maybe_prune(now);
                    continue;
                }
            };
            if let Some(l) = removed {
                return Some(Change::Removed(l));
            }
            // Every snapshot carries every resolved instance; nothing to
            // pass on. Owed, and sent at the top of the loop once the gap
            // since the last one is over.
            self.snapshot_due = true;
        }
    }

    /// Logs what mdns-sd says of `label` when it is news of its presence:
    /// a removal, or a resolution of an instance the table had lost (one
    /// re-learnt after a goodbye).
    fn log_event(&self, label: &str, removed: bool) {
        let held = self
            .table
            .lookup(label)
            .is_some_and(|i| !self.table.instances[i].removed);
        if removed {
            tracing::debug!(
                "mdns-sd removed {label} (a goodbye a second ago, or its records expired)"
            );
        } else if !held {
            tracing::debug!("mdns-sd resolved {label}, which the browse had lost");
        }
    }

    /// Prunes the table if [`PRUNE_EVERY`] has passed since the last time.
    fn maybe_prune(&mut self, now: Instant) {
        if now < self.last_prune + PRUNE_EVERY {
            return;
        }
        self.last_prune = now;
        let stale = now.checked_sub(STALE_AFTER).unwrap_or(self.started);
        let n = self.table.prune(stale);
        if n > 0 {
            tracing::debug!("pruned {n} instance(s) gone or unheard");
        }
    }

    /// A multicast answer into the table, counted in its sender's share.
    /// Returns whether something new was learnt (only then is a snapshot
    /// worth making: a flood repeats itself many times a second).
    fn on_datagram(&mut self, d: &Datagram, now: Instant) -> bool {
        if d.src.port() != MDNS_PORT {
            return false;
        }
        let ip = d.src.ip();
        let Some(k) = self.table.ifaces.iter().position(|i| on_link(&ip, i)) else {
            return false;
        };
        let Some(msg) = Message::from_vec(&d.bytes)
            .ok()
            .or_else(|| lenient_message(&d.bytes))
        else {
            return false;
        };
        if msg.message_type() != MessageType::Response || msg.op_code() != OpCode::Query {
            return false;
        }
        for label in wire::goodbyes_in(&msg) {
            tracing::debug!("goodbye for {label} heard from {}", d.src);
            if self.goodbyes.len() >= READ_QUEUE {
                tracing::debug!("goodbye for {label} dropped: {READ_QUEUE} waiting (a flood?)");
                break;
            }
            if !self.goodbyes.contains(&label) {
                self.goodbyes.push_back(label);
            }
        }
        // No legacy round: the early-round bookkeeping is the one-shot's.
        self.table
            .apply_reply_from(&msg, Some(ip), k, usize::MAX, now)
    }

    /// The table read out, with the dial policy applied.
    fn snapshot(&mut self, now: Instant) -> Change {
        self.last_snapshot = Some(now);
        let (found, mut problems) = self.table.snapshot(&self.opts, self.started, now, false);
        let vouched: BTreeSet<String> = (0..self.table.instances.len())
            .filter(|&i| self.table.vouched(i))
            .map(|i| self.table.instances[i].label.clone())
            .collect();
        let mut sightings = Vec::with_capacity(found.len());
        for s in found {
            match dial_refusal(self.policy, &s, &self.table.ifaces, &vouched) {
                Some(reason) => problems.push(
                    Problem::stranger(s.source, s.host.clone(), reason)
                        .claiming(Some(s.addr.clone()), s.id().map(str::to_string)),
                ),
                None => sightings.push(s),
            }
        }
        Change::Snapshot {
            sightings,
            problems,
            vouched,
        }
    }

    /// Stops the daemon and the reader.
    pub(crate) fn shutdown(self) {
        if let Some(r) = self.reader {
            r.abort();
        }
        self.browser.shutdown();
    }
}

/// Why `s` is not dialled under `policy`, or `None` when it may be.
pub(super) fn dial_refusal(
    policy: DialPolicy,
    s: &Sighting,
    ifaces: &[Iface],
    vouched: &BTreeSet<String>,
) -> Option<String> {
    if policy == DialPolicy::Any || vouched.contains(&s.host) {
        return None;
    }
    let ip = s.ip?;
    if ifaces.iter().any(|i| on_link(&ip, i)) {
        return None;
    }
    Some(format!(
        "announced address {ip} is not on the subnet of a browsed interface and did not send \
         the announcement; with a cluster key watch dials only those (a relay or a stranger \
         may be pointing it elsewhere; `--dial-off-link` allows it)"
    ))
}

/// The next multicast answer, or never when there is no reader.
async fn next_datagram(rx: &mut Option<mpsc::Receiver<Datagram>>) -> Option<Datagram> {
    match rx.as_mut() {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// Opens a socket on port 5353 (`SO_REUSEADDR`/`SO_REUSEPORT`, as mdns-sd
/// and other stacks set) joined to the IPv4 mDNS group on each interface,
/// and a reader that passes on each datagram with its source: only those
/// from port 5353 on the link of a browsed interface, at most
/// [`MAX_ANSWERS_PER_SOURCE`] a second from each source. When the loop
/// still falls behind, datagrams are dropped (and counted in the log)
/// rather than queued without bound: a flood must not grow memory.
fn listen(ifaces: Vec<Iface>) -> std::io::Result<(mpsc::Receiver<Datagram>, JoinHandle<()>)> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, MDNS_PORT)).into())?;
    let mut joined = 0;
    for i in &ifaces {
        for a in &i.addrs {
            if let IpAddr::V4(v4) = a.addr() {
                match s.join_multicast_v4(&MDNS_V4, &v4) {
                    Ok(()) => joined += 1,
                    Err(e) => tracing::debug!("joining the mDNS group on {}: {e}", i.name),
                }
                break;
            }
        }
    }
    if joined == 0 {
        return Err(std::io::Error::other(
            "no IPv4 interface to join the group on",
        ));
    }
    let sock = UdpSocket::from_std(s.into())?;
    let (tx, rx) = mpsc::channel(READ_QUEUE);
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; MAX_PACKET + 1];
        let mut dropped: u64 = 0;
        let mut limited: u64 = 0;
        let mut rates = SourceRates::default();
        loop {
            match sock.recv_from(&mut buf).await {
                Ok((n, _)) if n > MAX_PACKET => continue,
                Ok((_, src))
                    if src.port() != MDNS_PORT || !ifaces.iter().any(|i| on_link(&src.ip(), i)) =>
                {
                    continue
                }
                Ok((_, src)) if !rates.admit(src.ip(), Instant::now()) => {
                    limited += 1;
                    if limited.is_power_of_two() {
                        tracing::warn!(
                            "{limited} mDNS answer(s) ignored from sources sending more than \
                             {MAX_ANSWERS_PER_SOURCE} a second (last: {}; a flood?)",
                            src.ip()
                        );
                    }
                }
                Ok((n, src)) => {
                    let d = Datagram {
                        sock: 0,
                        src,
                        bytes: buf[..n].to_vec(),
                    };
                    match tx.try_send(d) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            dropped += 1;
                            if dropped.is_power_of_two() {
                                tracing::warn!(
                                    "{dropped} mDNS answer(s) dropped: more than {READ_QUEUE} \
                                     waiting (a flood?)"
                                );
                            }
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
                Err(e) => {
                    tracing::debug!("mDNS answer socket: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    });
    Ok((rx, task))
}

/// Per-source token buckets for [`MAX_ANSWERS_PER_SOURCE`].
#[derive(Default)]
struct SourceRates {
    /// Source -> (tokens, when last refilled).
    buckets: std::collections::HashMap<IpAddr, (f64, Instant)>,
}

impl SourceRates {
    /// Whether an answer from `ip` at `now` is within its rate; takes a
    /// token if so.
    fn admit(&mut self, ip: IpAddr, now: Instant) -> bool {
        if self.buckets.len() >= TRACKED_SOURCES && !self.buckets.contains_key(&ip) {
            self.buckets.clear();
        }
        let cap = f64::from(MAX_ANSWERS_PER_SOURCE);
        let (tokens, last) = self.buckets.entry(ip).or_insert((cap, now));
        let earned = now.saturating_duration_since(*last).as_secs_f64() * cap;
        *tokens = (*tokens + earned).min(cap);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sighting::{Evidence, Source};
    use crate::sources::mdns::fixtures::eth0;

    fn at(ip: &str) -> Sighting {
        Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source: Source::Mdns,
            host: "box".into(),
            addr: format!("{ip}:9100"),
            ip: ip.parse().ok(),
            port: 9100,
            agent_port: Some(9100),
            worker_reachable: None,
            ssh: None,
            caps: None,
            evidence: Evidence::Txt,
            heard_on: None,
            found_ms: 0,
        }
    }

    /// Guards against a stranger making a keyed watch dial addresses of
    /// its choosing anywhere: only on-link addresses, or the packet's real
    /// source, pass.
    #[test]
    fn with_the_on_link_policy_only_on_link_or_self_announced_addresses_are_dialled() {
        let ifaces = [eth0()];
        let none = BTreeSet::new();
        let on = DialPolicy::OnLinkOrSource;
        assert_eq!(dial_refusal(on, &at("10.9.7.7"), &ifaces, &none), None);
        assert_eq!(dial_refusal(on, &at("fe80::7"), &ifaces, &none), None);
        let why = dial_refusal(on, &at("203.0.113.5"), &ifaces, &none).expect("refused");
        assert!(
            why.contains("203.0.113.5") && why.contains("--dial-off-link"),
            "{why}"
        );
        let vouched: BTreeSet<String> = ["box".to_string()].into();
        assert_eq!(
            dial_refusal(on, &at("203.0.113.5"), &ifaces, &vouched),
            None
        );
        let any = DialPolicy::Any;
        assert_eq!(dial_refusal(any, &at("203.0.113.5"), &ifaces, &none), None);
    }

    #[test]
    fn a_source_sending_more_than_its_rate_is_cut_off_and_others_are_not() {
        let mut r = SourceRates::default();
        let t = Instant::now();
        let flooder: IpAddr = "10.9.1.66".parse().unwrap();
        let agent: IpAddr = "10.9.1.5".parse().unwrap();
        let passed = (0..1000).filter(|_| r.admit(flooder, t)).count();
        assert_eq!(
            passed, MAX_ANSWERS_PER_SOURCE as usize,
            "a burst, then nothing"
        );
        assert!(r.admit(agent, t), "another source has its own share");
        assert!(
            r.admit(flooder, t + Duration::from_secs(1)),
            "refilled in time"
        );
    }
}
