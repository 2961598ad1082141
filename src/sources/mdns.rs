//! **mDNS source** — a one-shot browse of `_rlx._tcp` that finds every
//! `rlx-agent` on the LAN in milliseconds on a clean network and within a few
//! seconds on a lossy one, and hands each to the pipeline as a [`Sighting`].
//!
//! ```toml
//! [discover]              # mdns = true is the default
//! browse_ms  = 2000       # the most a one-shot browse listens
//! interfaces = ["eth0"]   # default: every up, multicast-capable, non-virtual interface
//! ```
//!
//! # Two paths, one table
//!
//! Standard mDNS browsing (RFC 6762 §5.2) queries at 0, 1, 3, 7 s, and a
//! responder multicasts a record at most once a second (§6), so every lost
//! packet costs a second or more: python-zeroconf needs 7.2 s to see 50 agents
//! at 20% loss, and no standard browser finishes in 2 s (measured, see
//! `../shared/NOTES-mdns-sd.md`). This source therefore runs two paths into
//! one instance table:
//!
//! - **Legacy one-shot queries** (RFC 6762 §6.7), the fast path: a `PTR`
//!   question sent to the mDNS group from an ephemeral port, one socket per
//!   interface and address family. Responders answer each one by unicast,
//!   with `PTR`, `SRV`, `TXT` and `A`/`AAAA` in one packet and without the
//!   once-a-second limit, so one reply resolves an instance and a lost one is
//!   retried by the next query. DNS messages are built and parsed with
//!   `hickory-proto`.
//! - **Standard browsing** through mdns-sd ([`MdnsBrowser`]), the robust path:
//!   multicast answers need no ARP, which the unicast replies do (under loss
//!   Linux retries ARP only once a second, which is what bounds the legacy
//!   path's tail), and it resolves responders that ignore legacy queries.
//!   The same wrapper serves a continuous `watch`.
//!
//! Each instance keeps the interface it was first heard on, and its address
//! is chosen by [`iface::pick_address`] among the addresses heard there.
//!
//! # Schedule
//!
//! Legacy queries go out at [`LEGACY_BURST_MS`] (ten in the first second: a
//! bounded burst), then at intervals that start at one second and double (the
//! RFC 6762 §5.2 schedule). The first [`EARLY_ROUNDS`] carry no known
//! answers; later ones list every instance already resolved (a `PTR` with a
//! [`KNOWN_ANSWER_TTL`] above half the record's, RFC 6762 §7.1), so resolved
//! responders stay silent and only the missing ones answer.
//!
//! Standard queries (answered by multicast, at most once a second per
//! record) go out at [`EXTRA_QM_MS`], timed around the responders' rate
//! limit, besides mdns-sd's own. A browse that did not stop early also
//! re-announces this host's MAC address by gratuitous ARP at
//! [`ARP_ANNOUNCE_MS`] when it may (`CAP_NET_RAW`), which releases unicast
//! replies stuck behind a lost ARP exchange at the responders.
//!
//! Measured in a namespace lab, 50 mdns-sd responders (one per host) on one
//! bridge, ten runs each (`measure_fifty_responders_...` in
//! `tests/mdns_browse.rs`): lossless, the last agent resolved 13-21 ms after
//! the process started and the browse returned after 200 ms (early stop); at
//! 20% loss on the coordinator's link with every ARP cache flushed before
//! each run, 50/50 in 10 of 10 runs, the last at 253-616 ms; the same without
//! `CAP_NET_RAW` (no ARP announcements), 50/50 in 10 of 10 runs, the last at
//! 1.0-1.2 s in nine and 2.3 s in one: the responders' one-second ARP retries
//! and the standard queries' one-second rate limit set that tail.
//!
//! # When it stops early
//!
//! A browse listens for the whole `browse` window unless the network is
//! clearly lossless: it stops as soon as
//!
//! 1. the first [`EARLY_ROUNDS`] legacy queries have been sent (without known
//!    answers, so every responder must answer each),
//! 2. every instance heard by either path answered every one of them and is
//!    fully resolved (or rejected with a reason), at least one was heard,
//! 3. nothing new arrived for [`QUIET`],
//! 4. and the floor has passed: [`EARLY_FLOOR_WITH_ARP`] (250 ms) when this
//!    process can send gratuitous ARP (root, `CAP_NET_RAW`), else
//!    [`EARLY_FLOOR_WITHOUT_ARP`] (1.1 s). A responder whose ARP exchange
//!    was lost is invisible on the legacy path until its ARP is resolved, and
//!    on a small network the others can all look clean meanwhile.
//!
//! On a clean LAN that is about 250 ms after the start as root, 1.1 s
//! otherwise.
//!
//! A missing answer means loss (or a responder that ignores legacy
//! queries). Then the browse measures the loss instead of giving up on an
//! early stop: an agent that was never heard must have missed every query
//! so far that reached the network. A query lost on our own link is lost
//! for every responder at once, so only queries that some agent answered
//! count as chances; after the early rounds, [`SENTINELS`] resolved agents
//! are left out of each query's known-answer list in rotation so that they
//! answer and show it went out. The chance that one agent's answer gets
//! through is measured on the early queries that went out, taken
//! [`RATE_MARGIN`] standard deviations low (a Wilson lower bound, so that
//! three agents with lucky answers do not look like a clean network). With
//! `n` agents heard, answer rate `q` and `k` chances (queries that went out,
//! answers due by [`ROUND_WAIT`]), the number still unheard is expected to
//! be `n·(1-q)^k / (1-(1-q)^k)`, and the browse stops once that is below
//! [`STOP_RISK`] (and conditions 2 for resolution, 3 and 4 hold). At 20%
//! loss each way with 50 agents that is about 0.5-1 s instead of the whole
//! window; with one or two agents heard the estimate is too uncertain and
//! the browse listens to the end. Responders that ignore legacy queries
//! (heard only by multicast) count as answering none, which keeps the
//! estimate from stopping.
//!
//! The [`Attempt`] always says how long it listened, whether and why it
//! stopped early, and how many instances answered *late*: after the point
//! where a clean network would have let it stop. An empty result never
//! stops early.
//!
//! # Bounds
//!
//! At most [`MAX_INSTANCES`] instances and as many host names are kept, at
//! most [`MAX_INSTANCES_PER_SOURCE`] from any one source address and
//! [`MAX_UNSOURCED`] whose sender is unknown (first heard on the multicast
//! path), so a flood of bogus announcements from a stranger is counted, not
//! stored, and cannot crowd out the real agents that answer after it; a TXT record over
//! [`MAX_TXT_BYTES`] is refused; each host keeps at most
//! [`MAX_ADDRS_PER_HOST`] addresses; datagrams over 9000 bytes (RFC 6762 §17)
//! are dropped.

use crate::config::DiscoverSection;
use crate::pipeline::format_addr;
use crate::sighting::{Attempt, Discovery, Evidence, OnSighting, Problem, Sighting, Source};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::PTR;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use mdns_sd::{IfKind, ResolvedService, ScopedIp, ServiceDaemon, ServiceEvent};
use rlx_net::iface::{self, Iface, IfaceError};
use rlx_net::neighbour::ArpSocket;
use rlx_net::netguard::{self, GuardError};
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt::{self, TxtError};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The DNS-SD service type agents announce (the wire contract).
pub use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;

/// The mDNS port (RFC 6762 §3). Replies to legacy queries come from it.
pub const MDNS_PORT: u16 = 5353;

/// The IPv4 mDNS group.
const MDNS_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);

/// The IPv6 link-local mDNS group.
const MDNS_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb);

/// Most instances (and host names) one browse keeps. Far above any real
/// cluster, and at [`MAX_TXT_BYTES`] each it bounds the table to a few MB
/// however many bogus announcements a hostile host sends; the rest are
/// counted and reported.
pub const MAX_INSTANCES: usize = 4096;

/// Most instances kept per source address. A host runs one agent, a few at
/// most; a third-party stack announcing thousands of bogus instances from one
/// address must not fill the table and crowd out the real agents that answer
/// after it. 64 leaves room for a host that legitimately runs several.
pub const MAX_INSTANCES_PER_SOURCE: usize = 64;

/// Most instances kept whose sender is unknown: those first heard on the
/// multicast path, which does not tell who sent an answer (mdns-sd reports
/// what a record claims, and the address an announcement names is the
/// announcer's claim, not its source). The per-source cap cannot apply to
/// them, so a separate cap keeps a multicast flood from filling the table
/// the same way. Real agents also answer the legacy queries, from their
/// own address, and get a sourced slot there.
pub const MAX_UNSOURCED: usize = 256;

/// Largest TXT record accepted, counting each string's length byte. The
/// schema caps records at 1300 bytes (one Ethernet frame, [`txt::MAX_RECORD_BYTES`]);
/// anything larger was not written by a schema v1 announcer.
pub const MAX_TXT_BYTES: usize = txt::MAX_RECORD_BYTES;

/// Most addresses kept per host name: a dual-stack host with a few
/// interfaces has well under this; more is noise or an attack.
pub const MAX_ADDRS_PER_HOST: usize = 16;

/// When the legacy queries of the first second go out, ms after the start:
/// ten queries, the first three 50 ms apart (a responder answers within
/// about 10 ms, measured) so that a clean network is recognised by 200 ms,
/// then every 100-150 ms. Measured: a query every 100 ms at 20% loss found
/// 50/50 agents with a median of 204 ms when ARP caches were warm.
pub const LEGACY_BURST_MS: [u64; 10] = [0, 50, 100, 200, 300, 400, 500, 600, 750, 900];

/// After the burst, the gap before the next legacy query; each later gap
/// doubles (RFC 6762 §5.2: at least one second, increasing by a factor of two).
pub const LEGACY_BACKOFF_START: Duration = Duration::from_secs(1);

/// When the extra standard queries go out, ms after the start, each sent
/// twice (a lost query would waste a responder's one multicast answer per
/// second). mdns-sd's browse queries once at about 30 ms, then at 1030 ms
/// and 3030 ms; a responder multicasts a record at most once a second,
/// counted from its previous answer (sent 10 to 50 ms after a query), so
/// about half the responders refuse the 1030 ms query (measured: 28 of 50
/// answered a query at exactly 1.0 s, 50 of 50 at 1.1 s). These give every
/// responder a multicast answer near 0, 1.2 and 2.3 s: multicast answers need
/// no ARP, which is what delays the unicast replies to legacy queries under
/// loss. Sent from port 5353 (the source port is what makes a query standard,
/// RFC 6762 §6.7), with known answers (RFC 6762 §7.1).
pub const EXTRA_QM_MS: [u64; 3] = [0, 1150, 2300];

/// When a browse that has not stopped early re-announces this host's own
/// IPv4-to-MAC mapping (a gratuitous ARP, RFC 5227 §2.3), ms after the start.
/// The first three fall before the earliest early stop
/// ([`EARLY_FLOOR_WITH_ARP`]), so a responder whose ARP exchange was lost
/// is heard before the browse decides the network is clean.
///
/// Why: a responder replies to a legacy query by unicast, so it needs this
/// host's MAC. Under loss its ARP request or our ARP reply is lost, and Linux
/// retries only after a second (giving up after three), so the reply waits a
/// second or more in its queue. Any ARP packet from this host fills in the
/// responder's pending entry and releases the queued replies at once (RFC 826's
/// merge rule; Linux does the same for a pending entry). Nine small broadcasts
/// in 2.8 s, only on a network that did not look clean at 200 ms, only where
/// this process may open a packet socket (`CAP_NET_RAW`: root, as in the lab);
/// elsewhere the browse just waits for the responders' ARP retries.
pub const ARP_ANNOUNCE_MS: [u64; 12] = [
    20, 60, 120, 250, 400, 600, 800, 1000, 1300, 1700, 2200, 2800,
];

/// How many of the first legacy queries are sent without known answers and
/// must be answered by every instance for an early stop. Three: with one or
/// two, a single lucky round trip per responder at 20% loss (0.64 chance
/// each) would too often look lossless.
pub const EARLY_ROUNDS: usize = 3;

/// Earliest early stop when this process can send gratuitous ARP (see
/// [`ARP_ANNOUNCE_MS`]): after the first three announcements have released
/// any unicast reply stuck behind a lost ARP exchange.
pub const EARLY_FLOOR_WITH_ARP: Duration = Duration::from_millis(250);

/// Earliest early stop without `CAP_NET_RAW`. A responder whose ARP request
/// for us was lost is silent on the legacy path until Linux retries ARP one
/// second later, and on a small network the other responders may all look
/// clean meanwhile: stopping before the retry would report a partial list as
/// complete (measured: 4 of 5 agents at 10% loss). So a browse that cannot
/// announce its own MAC waits past the first retry.
pub const EARLY_FLOOR_WITHOUT_ARP: Duration = Duration::from_millis(1100);

/// How long nothing new must arrive before an early stop: ten times the
/// slowest reply latency measured (10 ms).
pub const QUIET: Duration = Duration::from_millis(100);

/// The most agents a browse may expect to have missed when it stops on a
/// lossy network (see "When it stops early" in the module docs): one run in
/// a hundred, at worst, would lack an agent that listening to the end of the
/// window would have found.
pub const STOP_RISK: f64 = 0.01;

/// How many standard deviations below the measured answer rate the loss
/// estimate assumes (a Wilson lower bound): with few agents the measured
/// rate is uncertain, and a browse must not stop on a lucky guess.
pub const RATE_MARGIN: f64 = 2.0;

/// Resolved instances left out of each later legacy query's known-answer
/// list, in rotation, so that they answer it: their answers show which
/// queries reached the network (on a lossy link a multicast query is lost
/// for every responder at once, so a query nobody answered is no chance at
/// all). Two: both replies are lost only one time in 25 at 20% loss.
pub const SENTINELS: usize = 2;

/// How long after a query went out it counts as a chance every responder
/// had to answer: ten times the slowest reply latency measured, and after
/// the next ARP announcement ([`ARP_ANNOUNCE_MS`]) has released replies
/// stuck behind a lost ARP exchange.
pub const ROUND_WAIT: Duration = Duration::from_millis(100);

/// TTL given to known answers. RFC 6762 §7.1: a responder stays silent only
/// if the listed TTL is above half the record's true TTL; PTR records live
/// 4500 s (RFC 6762 §10), and the replies to legacy queries carry a capped
/// 10 s TTL that must not be echoed back.
pub const KNOWN_ANSWER_TTL: u32 = 4500;

/// Largest legacy query sent: the known-answer list stops growing here so a
/// query fits one Ethernet frame (1500 bytes less IP and UDP headers). About
/// 50 known answers with short instance names fit; the list rotates across
/// queries when more are known.
const MAX_QUERY_BYTES: usize = 1400;

/// Largest mDNS datagram (RFC 6762 §17); anything larger is dropped.
const MAX_PACKET: usize = 9000;

/// Datagrams queued between the socket readers and the browse loop. The
/// kernel's socket buffer absorbs bursts beyond this.
const READ_QUEUE: usize = 1024;

/// How often [`MdnsBrowser`] re-subscribes after mdns-sd closed its event
/// channel (it does so silently when the consumer falls 1000 events behind)
/// before giving up on the multicast path.
const MAX_REBROWSE: u32 = 8;

// ------------------------------------------------------------------ options

/// What a one-shot browse does.
#[derive(Debug, Clone)]
pub struct BrowseOptions {
    /// Interfaces to browse on; empty means the default rule
    /// ([`iface::select`]).
    pub interfaces: Vec<String>,
    /// The most it listens (`browse_ms`).
    pub browse: Duration,
    /// Stop before `browse` ends when the network is clearly lossless (see
    /// the module docs). `false` always listens the whole window.
    pub early_stop: bool,
    /// Told of each instance as soon as it is resolved (and again if its
    /// address or port changes), before the browse ends.
    pub on_resolved: Option<OnSighting>,
}

impl Default for BrowseOptions {
    fn default() -> Self {
        BrowseOptions {
            interfaces: Vec::new(),
            browse: Duration::from_millis(crate::config::DEFAULT_BROWSE_MS),
            early_stop: true,
            on_resolved: None,
        }
    }
}

impl BrowseOptions {
    /// The browse `[discover]` asks for.
    pub fn from_section(d: &DiscoverSection) -> Self {
        BrowseOptions {
            interfaces: d.interfaces.clone(),
            browse: Duration::from_millis(d.browse_ms),
            early_stop: true,
            on_resolved: None,
        }
    }
}

/// Why a browse could not run at all (per-node failures are [`Problem`]s).
#[derive(Debug, thiserror::Error)]
pub enum MdnsError {
    /// `RLX_NETNS_GUARD=1` and this is the machine's real network.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// The interface list could not be read, or a named one is missing/down.
    #[error(transparent)]
    Iface(#[from] IfaceError),
    /// The default rule matched no interface.
    #[error(
        "no network interface to browse on: none is up, multicast-capable, non-virtual and \
         addressed; name one with --interface or `interfaces = [...]` in [discover] \
         (available: {available})"
    )]
    NoInterface {
        /// The interfaces that exist.
        available: String,
    },
    /// Neither a query socket nor the mDNS daemon could be opened.
    #[error("cannot browse mDNS on {interfaces}: {reasons}")]
    NoPath {
        /// The interfaces tried.
        interfaces: String,
        /// What failed, per socket and for the daemon.
        reasons: String,
    },
    /// mdns-sd refused to start or to browse.
    #[error("the mDNS daemon (mdns-sd) failed: {0}")]
    Daemon(String),
}

// ---------------------------------------------------------------- the result

/// How a browse went, for the report, the JSON output and the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BrowseStats {
    /// The service type browsed.
    pub service: String,
    /// Interfaces browsed on.
    pub interfaces: Vec<String>,
    /// Legacy query sockets that could not be opened, with the reason.
    pub socket_errors: Vec<String>,
    /// Why the mdns-sd multicast path did not run (or stopped), if so.
    pub multicast_error: Option<String>,
    /// How long it listened, ms.
    pub listened_ms: u64,
    /// The most it would have listened (`browse`), ms.
    pub window_ms: u64,
    /// Whether it stopped before the window ended: on a clearly lossless
    /// network, or once the measured loss made a missed agent unlikely.
    pub stopped_early: bool,
    /// Which rule stopped it early, if one did.
    pub stop_rule: Option<StopRule>,
    /// Share of the early queries the heard agents answered, as measured,
    /// when any was heard.
    pub answer_rate: Option<f64>,
    /// Agents expected to be still unheard when it stopped (the loss
    /// estimate; 0 when it stopped as clean), when any was heard.
    pub expected_missing: Option<f64>,
    /// Why it did not stop early, when it did not.
    pub why_full_window: Option<String>,
    /// Ms after the start of the browse at which an early stop was first
    /// possible: an instance resolved after this answered *late*.
    pub early_point_ms: u64,
    /// Instances heard (resolved, rejected or incomplete).
    pub answered: usize,
    /// Instances first resolved after [`BrowseStats::early_point_ms`].
    pub late: usize,
    /// Legacy query packets sent (all sockets).
    pub legacy_queries: usize,
    /// Legacy replies accepted.
    pub legacy_replies: usize,
    /// Extra standard (multicast-answered) query packets sent.
    pub standard_queries: usize,
    /// Gratuitous ARP announcements sent (needs `CAP_NET_RAW`; see
    /// [`ARP_ANNOUNCE_MS`]).
    pub arp_announcements: usize,
    /// Resolution events from the multicast path.
    pub multicast_events: usize,
    /// Instances and host names ignored because [`MAX_INSTANCES`] was reached.
    pub over_limit: usize,
    /// Datagrams dropped as not ours or malformed.
    pub ignored_datagrams: usize,
    /// Replies from responders (port 5353, on the link) that could not be
    /// decoded at all; any one of them rules out an early stop.
    pub unparsed_replies: usize,
}

/// Which rule let a browse stop before its window ended (see "When it
/// stops early" in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StopRule {
    /// Every agent answered every early query.
    #[serde(rename = "clean")]
    Clean,
    /// The measured loss left fewer than [`STOP_RISK`] agents expected to
    /// be still unheard.
    #[serde(rename = "loss estimate")]
    LossEstimate,
}

/// A browse: what it found and how it went.
#[derive(Debug, Clone, Default)]
pub struct Browse {
    /// Sightings, problems and the attempt, for the pipeline.
    pub discovery: Discovery,
    /// Details of the run.
    pub stats: BrowseStats,
}

/// The mDNS source for the pipeline: [`browse`], with a failure to browse at
/// all reported as a [`Problem`] (other sources go on).
pub async fn discover(opts: &BrowseOptions, started: Instant) -> Discovery {
    match browse(opts, started).await {
        Ok(b) => b.discovery,
        Err(e) => {
            let mut d = Discovery::default();
            d.problems.push(Problem {
                source: Source::Mdns,
                host: "mDNS browse".into(),
                reason: e.to_string(),
            });
            d.attempts.push(Attempt {
                source: Source::Mdns,
                what: format!("mDNS browse of {SERVICE_TYPE}: could not start ({e})"),
                elapsed_ms: 0,
                answered: 0,
                stopped_early: None,
                late: None,
            });
            d
        }
    }
}

/// The JSON form of a [`Discovery`]: `{"sightings": [...], "problems": [...],
/// "attempts": [...]}`, each sighting with its `found_ms`.
pub fn discovery_json(d: &Discovery) -> serde_json::Value {
    serde_json::json!({
        "sightings": d.sightings,
        "problems": d.problems,
        "attempts": d.attempts,
    })
}

/// [`discovery_json`] plus a `"stats"` object ([`BrowseStats`]).
pub fn browse_json(b: &Browse) -> serde_json::Value {
    let mut v = discovery_json(&b.discovery);
    v["stats"] = serde_json::to_value(&b.stats).unwrap_or_default();
    v
}

// ------------------------------------------------------------ the browse loop

/// One datagram read by a socket reader.
struct Datagram {
    /// Index of the socket in the browse's socket list.
    sock: usize,
    src: SocketAddr,
    bytes: Vec<u8>,
}

/// A legacy query socket: one per interface and address family.
struct LegacySocket {
    /// Index of its interface in the browse's interface list.
    iface: usize,
    sock: Arc<UdpSocket>,
    /// The mDNS group on that interface.
    dest: SocketAddr,
}

/// Browses `_rlx._tcp` once (see the module docs) and returns what it found.
///
/// Checks the network-namespace guard before any socket exists. Fails only
/// when nothing can be browsed at all; everything per node is a [`Problem`].
pub async fn browse(opts: &BrowseOptions, started: Instant) -> Result<Browse, MdnsError> {
    netguard::ensure_private_netns("an mDNS browse")?;
    let ifaces = iface::select(&opts.interfaces)?;
    if ifaces.is_empty() {
        return Err(MdnsError::NoInterface {
            available: iface::describe(&iface::all_interfaces()?),
        });
    }
    let t0 = Instant::now();
    let names: Vec<String> = ifaces.iter().map(|i| i.name.clone()).collect();
    let (socks, socket_errors) = open_sockets(&ifaces);
    let mut browser = match MdnsBrowser::start(&ifaces) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!("mDNS multicast path unavailable, legacy queries only: {e}");
            if socks.is_empty() {
                return Err(MdnsError::NoPath {
                    interfaces: names.join(", "),
                    reasons: format!("{}; daemon: {e}", socket_errors.join("; ")),
                });
            }
            None
        }
    };
    let mut stats = BrowseStats {
        service: SERVICE_TYPE.into(),
        interfaces: names.clone(),
        socket_errors,
        multicast_error: browser
            .is_none()
            .then(|| "mdns-sd did not start (see the log)".to_string()),
        window_ms: opts.browse.as_millis() as u64,
        ..BrowseStats::default()
    };

    let (tx, mut rx) = mpsc::channel::<Datagram>(READ_QUEUE);
    let mut readers = JoinSet::new();
    for (k, s) in socks.iter().enumerate() {
        readers.spawn(read_loop(k, s.sock.clone(), tx.clone()));
    }
    drop(tx);

    let mut id_bytes = [0u8; 2];
    let _ = getrandom::fill(&mut id_bytes);
    let base_id = u16::from_be_bytes(id_bytes);
    let mut rounds: HashMap<u16, usize> = HashMap::new();
    let mut round = 0usize;
    let mut table = Table::new(ifaces);
    table.multicast_by_claim = socks.is_empty();
    let deadline = t0 + opts.browse;
    let kickers: Vec<ArpSocket> = table
        .ifaces
        .iter()
        .filter_map(|i| ArpSocket::open(&i.name))
        .collect();
    let floor = if kickers.is_empty() {
        EARLY_FLOOR_WITHOUT_ARP
    } else {
        EARLY_FLOOR_WITH_ARP
    };
    let early_point =
        t0 + (Duration::from_millis(LEGACY_BURST_MS[EARLY_ROUNDS - 1]) + QUIET).max(floor);
    let mut last_change = t0;
    // Early stop needs legacy queries; without sockets it cannot be judged.
    let early_possible = opts.early_stop && !socks.is_empty();

    let mut next_qm = 0usize;
    let mut next_kick = 0usize;

    loop {
        match &opts.on_resolved {
            Some(hook) => {
                for s in table.take_resolved(opts, started, deadline) {
                    (hook.0)(&s);
                }
            }
            None => table.newly_resolved.clear(),
        }
        let now = Instant::now();
        if early_possible
            && stats.unparsed_replies == 0
            && now >= early_point
            && now >= last_change + QUIET
        {
            if table.clean() {
                stats.stopped_early = true;
                stats.stop_rule = Some(StopRule::Clean);
                stats.expected_missing = Some(0.0);
                break;
            }
            let (k, _) = matured(now - t0, round);
            if let Some(e) = table.expected_missing(k).filter(|&e| e < STOP_RISK) {
                stats.stopped_early = true;
                stats.stop_rule = Some(StopRule::LossEstimate);
                stats.expected_missing = Some(e);
                break;
            }
        }
        if now >= deadline {
            break;
        }
        // Send every legacy round that is due.
        while !socks.is_empty() && t0 + legacy_offset(round) <= now {
            let id = base_id.wrapping_add(round as u16);
            rounds.insert(id, round);
            let known = if round < EARLY_ROUNDS {
                Vec::new()
            } else {
                table.known_answers(round, SENTINELS)
            };
            match legacy_query(id, &known) {
                Ok(bytes) => {
                    for s in &socks {
                        match s.sock.send_to(&bytes, s.dest).await {
                            Ok(_) => stats.legacy_queries += 1,
                            Err(e) => tracing::debug!(
                                "legacy mDNS query on {} to {}: {e}",
                                table.ifaces[s.iface].name,
                                s.dest
                            ),
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot build a legacy mDNS query: {e}"),
            }
            round += 1;
        }
        // The extra standard queries, each sent twice (a lost query would
        // waste the responders' one multicast answer per second).
        while next_qm < EXTRA_QM_MS.len() && t0 + Duration::from_millis(EXTRA_QM_MS[next_qm]) <= now
        {
            // RFC 6762 §18.1: multicast queries carry ID 0.
            if let Ok(bytes) = legacy_query(0, &table.known_answers(next_qm, 0)) {
                for s in &socks {
                    for _ in 0..2 {
                        stats.standard_queries += usize::from(send_standard_query(s, &bytes));
                    }
                }
            }
            next_qm += 1;
        }
        while next_kick < ARP_ANNOUNCE_MS.len()
            && t0 + Duration::from_millis(ARP_ANNOUNCE_MS[next_kick]) <= now
        {
            for k in &kickers {
                stats.arp_announcements += usize::from(k.announce());
            }
            next_kick += 1;
        }
        let mut wake = deadline;
        if !socks.is_empty() {
            wake = wake.min(t0 + legacy_offset(round));
            if let Some(&at) = EXTRA_QM_MS.get(next_qm) {
                wake = wake.min(t0 + Duration::from_millis(at));
            }
        }
        if let (false, Some(&at)) = (kickers.is_empty(), ARP_ANNOUNCE_MS.get(next_kick)) {
            wake = wake.min(t0 + Duration::from_millis(at));
        }
        if early_possible {
            wake = wake.min(early_point.max(last_change + QUIET).max(now));
            // The loss estimate changes when another query's answers are due.
            if let (_, Some(next)) = matured(now - t0, round) {
                wake = wake.min(t0 + next);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            d = rx.recv() => {
                let Some(d) = d else { continue };
                let s = &socks[d.sock];
                match parse_reply(&d.bytes, d.src, &table.ifaces[s.iface], &rounds) {
                    Some((msg, r)) => {
                        stats.legacy_replies += 1;
                        if table.apply_reply_from(&msg, Some(d.src.ip()), s.iface, r, Instant::now()) {
                            last_change = Instant::now();
                        }
                    }
                    None => {
                        stats.ignored_datagrams += 1;
                        // A responder answered (port 5353, on the link) in a
                        // form the decoder rejects as a whole: it may be an
                        // agent we cannot see on this path, so the network
                        // cannot be judged clean.
                        if d.src.port() == MDNS_PORT
                            && on_link(&d.src.ip(), &table.ifaces[s.iface])
                            && Message::from_vec(&d.bytes).is_err()
                            && lenient_message(&d.bytes).is_none()
                        {
                            stats.unparsed_replies += 1;
                        }
                    }
                }
            }
            ev = next_event(&mut browser) => match ev {
                Some(ev) => {
                    stats.multicast_events += 1;
                    if table.apply_event(&ev, Instant::now()) {
                        last_change = Instant::now();
                    }
                }
                None => {
                    tracing::warn!("mDNS multicast path closed; continuing with legacy queries");
                    stats.multicast_error = Some("the mdns-sd event channel closed".into());
                    browser = None;
                }
            },
        }
    }
    let stopped = Instant::now();
    readers.abort_all();
    if let Some(b) = browser {
        b.shutdown();
    }

    stats.listened_ms = ms(stopped - t0);
    stats.early_point_ms = ms(early_point - t0);
    stats.answer_rate = table.answer_rate().map(|(ok, of)| ok as f64 / of as f64);
    if stats.expected_missing.is_none() {
        let (k, _) = matured(stopped - t0, round);
        stats.expected_missing = table.expected_missing(k).filter(|e| e.is_finite());
    }
    stats.over_limit = table.over_limit;
    if !stats.stopped_early {
        stats.why_full_window = Some(if !opts.early_stop {
            "early stop disabled".into()
        } else if socks.is_empty() {
            "no legacy query socket, so loss could not be judged".into()
        } else if stats.unparsed_replies > 0 {
            format!(
                "{} reply(ies) from responders could not be decoded, so answers may be missing \
                 from the fast path",
                stats.unparsed_replies
            )
        } else {
            table.why_not_clean()
        });
    }
    let (sightings, problems) = table.finish(opts, started, deadline);
    stats.answered = table.heard();
    stats.late = table.late(early_point);
    let attempt = Attempt {
        source: Source::Mdns,
        what: describe_attempt(&stats),
        elapsed_ms: stats.listened_ms,
        answered: stats.answered,
        stopped_early: Some(stats.stopped_early),
        late: Some(stats.late),
    };
    Ok(Browse {
        discovery: Discovery {
            sightings,
            problems,
            attempts: vec![attempt],
        },
        stats,
    })
}

/// How many of the `sent` legacy rounds are older than [`ROUND_WAIT`]
/// `elapsed` after the start (their answers are in), and when the next one
/// matures, if one is pending.
fn matured(elapsed: Duration, sent: usize) -> (usize, Option<Duration>) {
    let k = (0..sent)
        .take_while(|&r| legacy_offset(r) + ROUND_WAIT <= elapsed)
        .count();
    (k, (k < sent).then(|| legacy_offset(k) + ROUND_WAIT))
}

/// The number of responders expected to be still unheard after `chances`
/// queries that reached the network, when `heard` were heard and answered
/// `answered` of the `asked` such early queries put to them (see "When it
/// stops early" in the module docs). Infinite when nothing can be
/// inferred.
pub fn expected_unheard(heard: usize, answered: usize, asked: usize, chances: u32) -> f64 {
    if heard == 0 || asked == 0 || chances == 0 {
        return f64::INFINITY;
    }
    // Wilson score lower bound of the answer rate.
    let n = asked as f64;
    let p = (answered as f64 / n).clamp(0.0, 1.0);
    let z2 = RATE_MARGIN * RATE_MARGIN;
    let centre = p + z2 / (2.0 * n);
    let spread = RATE_MARGIN * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let q = ((centre - spread) / (1.0 + z2 / n)).max(0.0);
    let miss_all = (1.0 - q).powi(chances as i32);
    if miss_all >= 1.0 {
        return f64::INFINITY;
    }
    heard as f64 * miss_all / (1.0 - miss_all)
}

/// The next mDNS event, or never when the multicast path is off.
async fn next_event(browser: &mut Option<MdnsBrowser>) -> Option<BrowserEvent> {
    match browser.as_mut() {
        Some(b) => b.next().await,
        None => std::future::pending().await,
    }
}

/// When legacy query `round` goes out, counted from the start.
fn legacy_offset(round: usize) -> Duration {
    match LEGACY_BURST_MS.get(round) {
        Some(&at) => Duration::from_millis(at),
        None => {
            let last = Duration::from_millis(LEGACY_BURST_MS[LEGACY_BURST_MS.len() - 1]);
            let after = (round - LEGACY_BURST_MS.len()) as u32;
            // Gaps of 1, 2, 4, ... s: the sum of the first n+1 is 2^(n+1) - 1.
            let gaps = (1u64 << (after + 1).min(30)) - 1;
            last + LEGACY_BACKOFF_START * gaps as u32
        }
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// One line for the report: what was tried, for how long, with what result.
fn describe_attempt(s: &BrowseStats) -> String {
    let mut w = format!(
        "mDNS browse of {} on {}: {} legacy queries{}; listened {} ms",
        s.service,
        s.interfaces.join(", "),
        s.legacy_queries,
        if s.multicast_error.is_none() {
            " + standard multicast browsing"
        } else {
            " (multicast path unavailable)"
        },
        s.listened_ms
    );
    if s.stop_rule == Some(StopRule::Clean) {
        let _ = write!(
            w,
            " (stopped early: every agent answered every early query)"
        );
    } else if s.stop_rule == Some(StopRule::LossEstimate) {
        let _ = write!(
            w,
            " (stopped early on the loss estimate: agents answered {:.0}% of the early queries, \
             so fewer than {:.3} agents are expected to be still unheard)",
            s.answer_rate.unwrap_or(0.0) * 100.0,
            s.expected_missing.unwrap_or(f64::NAN)
        );
    } else {
        let _ = write!(w, " of {} ms", s.window_ms);
        if let Some(why) = &s.why_full_window {
            let _ = write!(w, " (full window: {why})");
        }
    }
    if s.standard_queries > 0 {
        let _ = write!(w, ", {} extra standard queries", s.standard_queries);
    }
    if s.arp_announcements > 0 {
        let _ = write!(w, ", {} ARP announcements", s.arp_announcements);
    }
    let _ = write!(
        w,
        "; {} answered, {} late (after {} ms)",
        s.answered, s.late, s.early_point_ms
    );
    if s.over_limit > 0 {
        let _ = write!(
            w,
            "; {} more names ignored over the {MAX_INSTANCES}-instance limit",
            s.over_limit
        );
    }
    w
}

// ------------------------------------------------------------------ sockets

/// Opens a legacy query socket per interface and address family. Errors are
/// returned as text for the report; the browse goes on with what opened.
fn open_sockets(ifaces: &[Iface]) -> (Vec<LegacySocket>, Vec<String>) {
    let mut socks = Vec::new();
    let mut errors = Vec::new();
    for (k, i) in ifaces.iter().enumerate() {
        let v4 = i.addrs.iter().find_map(|n| match n.addr() {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        });
        if let Some(a) = v4 {
            match open_v4(a) {
                Ok(sock) => socks.push(LegacySocket {
                    iface: k,
                    sock: Arc::new(sock),
                    dest: SocketAddr::V4(SocketAddrV4::new(MDNS_V4, MDNS_PORT)),
                }),
                Err(e) => errors.push(format!("{} IPv4 ({a}): {e}", i.name)),
            }
        }
        // Link-local first: ff02::fb is link-scoped, and every IPv6 interface
        // has one. Loopback has none and IPv6 multicast over `lo` is not a
        // thing, so it is skipped there.
        let v6 = i
            .addrs
            .iter()
            .filter_map(|n| match n.addr() {
                IpAddr::V6(a) if !a.is_loopback() => Some(a),
                _ => None,
            })
            .min_by_key(|a| !a.is_unicast_link_local());
        if let Some(a) = v6 {
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

/// An IPv4 legacy query socket bound to the interface's address (so replies
/// identify the interface) with multicast leaving through it. Not
/// `connect()`ed: replies come from each responder's own address.
fn open_v4(addr: Ipv4Addr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
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
async fn read_loop(k: usize, sock: Arc<UdpSocket>, tx: mpsc::Sender<Datagram>) {
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
fn send_standard_query(s: &LegacySocket, bytes: &[u8]) -> bool {
    let open = || -> std::io::Result<Socket> {
        let (domain, any) = match s.dest {
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
        match s.sock.local_addr()? {
            SocketAddr::V4(local) => {
                q.set_multicast_if_v4(local.ip())?;
                q.set_multicast_ttl_v4(255)?;
            }
            SocketAddr::V6(_) => {
                q.set_only_v6(true)?;
                if let SocketAddr::V6(d) = s.dest {
                    q.set_multicast_if_v6(d.scope_id())?;
                }
                q.set_multicast_hops_v6(255)?;
            }
        }
        q.bind(&any.into())?;
        Ok(q)
    };
    match open().and_then(|q| q.send_to(bytes, &s.dest.into())) {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!("standard mDNS query to {}: {e}", s.dest);
            false
        }
    }
}

// ------------------------------------------------------------ DNS messages

/// `_rlx._tcp.local.` as a DNS name.
fn service_name() -> Name {
    let [service, proto] = rlx_proto::service::SERVICE_LABELS;
    Name::from_labels([service, proto, "local"]).expect("valid service name")
}

/// `<label>._rlx._tcp.local.`; the label is raw bytes (DNS-SD instance names
/// are UTF-8 with spaces, dots and punctuation, never IDNA-encoded).
fn instance_name(label: &[u8]) -> Option<Name> {
    let [service, proto] = rlx_proto::service::SERVICE_LABELS;
    Name::from_labels([label, service.as_bytes(), proto.as_bytes(), b"local"]).ok()
}

/// The instance label of `<label>._rlx._tcp.local.`, or `None` for any
/// other name.
fn instance_label(name: &Name, service: &Name) -> Option<Vec<u8>> {
    if name.num_labels() != service.num_labels() + 1 || !service.zone_of(name) {
        return None;
    }
    name.iter().next().map(<[u8]>::to_vec)
}

/// A host name as a map key: labels joined by dots, lowercase, no final dot
/// (the form mdns-sd's strings reduce to as well).
fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS name as text, labels joined by dots with no escaping and a final
/// dot (how mdns-sd writes names, so both paths meet in one key).
fn name_text(name: &Name) -> String {
    let mut s = String::new();
    for l in name.iter() {
        s.push_str(&String::from_utf8_lossy(l));
        s.push('.');
    }
    s
}

/// A legacy one-shot query (RFC 6762 §6.7): one `PTR` question for
/// [`SERVICE_TYPE`], QU bit clear (the source port already asks for a
/// unicast reply), and `known` instances as known answers (RFC 6762 §7.1)
/// until the message would exceed [`MAX_QUERY_BYTES`].
fn legacy_query(id: u16, known: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let service = service_name();
    let mut msg = Message::new();
    msg.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(false);
    msg.add_query(Query::query(service.clone(), RecordType::PTR));
    // Header, question (name + type + class); each known answer is a
    // compressed owner (2), type/class/TTL/length (10), and the rdata: the
    // instance label plus a pointer to the service name (2).
    let mut size = 12 + SERVICE_TYPE.len() + 1 + 4;
    for label in known {
        let rr = 2 + 10 + 1 + label.len() + 2;
        if size + rr > MAX_QUERY_BYTES {
            break;
        }
        let Some(name) = instance_name(label) else {
            continue;
        };
        msg.add_answer(Record::from_rdata(
            service.clone(),
            KNOWN_ANSWER_TTL,
            RData::PTR(PTR(name)),
        ));
        size += rr;
    }
    msg.to_vec().map_err(|e| e.to_string())
}

/// Accepts a datagram on a legacy socket as a reply to one of our queries:
/// from port 5353 (RFC 6762 §6.7), from an on-link address (§11), a
/// response to an ID we sent. Returns the message and the query round.
fn parse_reply(
    bytes: &[u8],
    src: SocketAddr,
    on: &Iface,
    rounds: &HashMap<u16, usize>,
) -> Option<(Message, usize)> {
    if src.port() != MDNS_PORT || !on_link(&src.ip(), on) {
        return None;
    }
    let msg = Message::from_vec(bytes)
        .ok()
        .or_else(|| lenient_message(bytes))?;
    if msg.message_type() != MessageType::Response
        || msg.op_code() != OpCode::Query
        || msg.response_code() != ResponseCode::NoError
    {
        return None;
    }
    let round = *rounds.get(&msg.id())?;
    Some((msg, round))
}

/// Decodes a reply record by record, skipping the records whose data does
/// not decode instead of refusing the whole message (python-zeroconf 0.47
/// writes NSEC records that hickory-proto rejects, and one bad record would
/// otherwise hide the PTR, SRV, TXT and A beside it). Every record still
/// goes through hickory-proto; only the framing (RFC 1035 §4.1.3: name,
/// type, class, TTL, length, data) is walked here, to know where the next
/// record starts.
fn lenient_message(bytes: &[u8]) -> Option<Message> {
    use hickory_proto::op::Header;
    use hickory_proto::rr::DNSClass;
    use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, Restrict};
    let mut d = BinDecoder::new(bytes);
    let header = Header::read(&mut d).ok()?;
    let mut msg = Message::new();
    msg.set_id(header.id())
        .set_message_type(header.message_type())
        .set_op_code(header.op_code())
        .set_response_code(header.response_code());
    for _ in 0..header.query_count() {
        msg.add_query(Query::read(&mut d).ok()?);
    }
    let sections = [
        header.answer_count(),
        header.name_server_count(),
        header.additional_count(),
    ];
    for (section, count) in sections.into_iter().enumerate() {
        for _ in 0..count {
            let name = Name::read(&mut d).ok()?;
            let rtype = RecordType::from(d.read_u16().ok()?.unverified());
            let class = d.read_u16().ok()?.unverified();
            let ttl = d.read_u32().ok()?.unverified();
            let len = d.read_u16().ok()?.unverified();
            let start = d.index();
            // Decode the data with a decoder over the whole message, so
            // compressed names in it resolve; then step over it either way.
            let mut at = BinDecoder::new(bytes);
            at.read_slice(start).ok()?;
            let data = RData::read(&mut at, rtype, Restrict::new(len));
            d.read_slice(usize::from(len)).ok()?;
            let Ok(data) = data else { continue };
            let mut rec = Record::from_rdata(name, ttl, data);
            // mDNS sets the top bit of the class for cache-flush (RFC 6762
            // §10.2); the class itself is the low 15 bits.
            rec.set_dns_class(DNSClass::from(class & 0x7fff));
            match section {
                0 => msg.add_answer(rec),
                1 => msg.add_name_server(rec),
                _ => msg.add_additional(rec),
            };
        }
    }
    Some(msg)
}

/// Whether `ip` is on the local link of `on` (RFC 6762 §11 source check).
fn on_link(ip: &IpAddr, on: &Iface) -> bool {
    match ip {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => true,
        ip if ip.is_loopback() => on.is_loopback(),
        ip => on.on_subnet(ip),
    }
}

// ------------------------------------------------------------ the instance table

/// The SRV record of an instance.
#[derive(Debug, Clone, PartialEq)]
struct Srv {
    port: u16,
    /// The target host as announced (`box.local.`).
    host: String,
}

/// What is known of an instance's TXT record.
#[derive(Debug, Clone, PartialEq)]
enum Txt {
    /// The record's strings, within [`MAX_TXT_BYTES`].
    Strings(Vec<Vec<u8>>),
    /// A record of this many bytes, refused.
    TooBig(usize),
}

/// One announced instance, as far as it is known.
#[derive(Debug, Clone)]
struct Instance {
    /// The instance name as announced.
    label: String,
    srv: Option<Srv>,
    txt: Option<Txt>,
    /// Index of the interface it was first heard on.
    heard_on: Option<usize>,
    /// Bit `r` set: answered early legacy round `r`.
    early: u32,
    /// When it first had SRV, TXT and a usable address.
    complete_at: Option<Instant>,
    /// When it first had SRV, TXT and a routable address.
    routable_at: Option<Instant>,
    /// Said goodbye (TTL 0) during the browse.
    removed: bool,
}

/// Everything heard during one browse, bounded (see the module docs).
struct Table {
    ifaces: Vec<Iface>,
    instances: Vec<Instance>,
    /// Lowercased instance label -> index in `instances`.
    index: HashMap<String, usize>,
    /// Host key -> (address, interface index) as heard.
    hosts: HashMap<String, Vec<(IpAddr, usize)>>,
    /// Names ignored because a limit was reached.
    over_limit: usize,
    /// Instances created per source address ([`MAX_INSTANCES_PER_SOURCE`]).
    per_source: HashMap<IpAddr, usize>,
    /// Instances created without a source address ([`MAX_UNSOURCED`]).
    unsourced: usize,
    /// Host names created per source address.
    host_sources: HashMap<IpAddr, usize>,
    /// Instances resolved since [`Table::take_resolved`] last ran.
    newly_resolved: Vec<usize>,
    /// Bit `r` set: some instance answered legacy round `r`, so that query
    /// reached the network.
    delivered: u64,
    /// Whether instances first heard on the multicast path count the
    /// address they announce as their source (see [`MAX_UNSOURCED`]).
    multicast_by_claim: bool,
}

impl Table {
    fn new(ifaces: Vec<Iface>) -> Self {
        Table {
            ifaces,
            instances: Vec::new(),
            index: HashMap::new(),
            hosts: HashMap::new(),
            over_limit: 0,
            per_source: HashMap::new(),
            unsourced: 0,
            host_sources: HashMap::new(),
            newly_resolved: Vec::new(),
            delivered: 0,
            multicast_by_claim: true,
        }
    }

    /// The index of instance `label`, added if new and there is room: in the
    /// table, for its source address (`None`: heard by name only).
    fn instance(&mut self, label: &str, source: Option<IpAddr>) -> Option<usize> {
        let key = label.to_lowercase();
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        let room = match source {
            Some(ip) => self.per_source.get(&ip).copied().unwrap_or(0) < MAX_INSTANCES_PER_SOURCE,
            None => self.unsourced < MAX_UNSOURCED,
        };
        if self.instances.len() >= MAX_INSTANCES || !room {
            self.over_limit += 1;
            return None;
        }
        match source {
            Some(ip) => *self.per_source.entry(ip).or_insert(0) += 1,
            None => self.unsourced += 1,
        }
        self.instances.push(Instance {
            label: label.to_string(),
            srv: None,
            txt: None,
            heard_on: None,
            early: 0,
            complete_at: None,
            routable_at: None,
            removed: false,
        });
        self.index.insert(key, self.instances.len() - 1);
        Some(self.instances.len() - 1)
    }

    /// Records an address of `host`, heard from `source`. New host names
    /// share the table like instances do: at most
    /// [`MAX_INSTANCES_PER_SOURCE`] per source address, so a flood of bogus
    /// host names cannot leave the real agents' hosts without an address.
    fn add_addr(&mut self, host: &str, ip: IpAddr, iface: usize, source: Option<IpAddr>) {
        let key = host_key(host);
        if !self.hosts.contains_key(&key) {
            let room = match source {
                Some(src) => {
                    self.host_sources.get(&src).copied().unwrap_or(0) < MAX_INSTANCES_PER_SOURCE
                }
                None => true,
            };
            if self.hosts.len() >= MAX_INSTANCES || !room {
                self.over_limit += 1;
                return;
            }
            if let Some(src) = source {
                *self.host_sources.entry(src).or_insert(0) += 1;
            }
        }
        let addrs = self.hosts.entry(key).or_default();
        if !addrs.contains(&(ip, iface)) && addrs.len() < MAX_ADDRS_PER_HOST {
            addrs.push((ip, iface));
        }
    }

    fn set_txt(&mut self, i: usize, strings: Vec<Vec<u8>>) {
        let size: usize = strings.iter().map(|s| 1 + s.len()).sum();
        self.instances[i].txt = Some(if size > MAX_TXT_BYTES {
            Txt::TooBig(size)
        } else {
            Txt::Strings(strings)
        });
    }

    /// Applies a legacy reply heard on interface `iface` to query `round`.
    /// Returns true if something new was learnt (an instance appeared or
    /// became resolved).
    #[cfg(test)]
    fn apply_reply(&mut self, msg: &Message, iface: usize, round: usize, now: Instant) -> bool {
        self.apply_reply_from(msg, None, iface, round, now)
    }

    /// Folds a legacy reply from `src` (its source address) into the table.
    fn apply_reply_from(
        &mut self,
        msg: &Message,
        src: Option<IpAddr>,
        iface: usize,
        round: usize,
        now: Instant,
    ) -> bool {
        let service = service_name();
        let before = self.progress();
        let mut answered: Vec<usize> = Vec::new();
        for rec in msg.answers().iter().chain(msg.additionals()) {
            let name = rec.name();
            match rec.data() {
                RData::PTR(PTR(target))
                    if name.num_labels() == service.num_labels() && service.zone_of(name) =>
                {
                    let Some(label) = instance_label(target, &service) else {
                        continue;
                    };
                    let Some(i) = self.instance(&String::from_utf8_lossy(&label), src) else {
                        continue;
                    };
                    if rec.ttl() == 0 {
                        self.instances[i].removed = true;
                        continue;
                    }
                    answered.push(i);
                }
                RData::SRV(srv) => {
                    let Some(label) = instance_label(name, &service) else {
                        continue;
                    };
                    let Some(i) = self.instance(&String::from_utf8_lossy(&label), src) else {
                        continue;
                    };
                    self.instances[i].srv = Some(Srv {
                        port: srv.port(),
                        host: name_text(srv.target()),
                    });
                    answered.push(i);
                }
                RData::TXT(t) => {
                    let Some(label) = instance_label(name, &service) else {
                        continue;
                    };
                    let Some(i) = self.instance(&String::from_utf8_lossy(&label), src) else {
                        continue;
                    };
                    self.set_txt(i, t.txt_data().iter().map(|s| s.to_vec()).collect());
                    answered.push(i);
                }
                RData::A(a) => self.add_addr(&name_text(name), IpAddr::V4(a.0), iface, src),
                RData::AAAA(a) => self.add_addr(&name_text(name), IpAddr::V6(a.0), iface, src),
                _ => {}
            }
        }
        for &i in &answered {
            let inst = &mut self.instances[i];
            inst.heard_on.get_or_insert(iface);
            if round < EARLY_ROUNDS {
                inst.early |= 1 << round;
            }
        }
        if !answered.is_empty() && round < 64 {
            self.delivered |= 1 << round;
        }
        self.refresh(now);
        self.progress() != before
    }

    /// Applies an event of the multicast path. Returns true if something
    /// new was learnt.
    fn apply_event(&mut self, ev: &BrowserEvent, now: Instant) -> bool {
        let before = self.progress();
        match ev {
            BrowserEvent::Found(fullname) => {
                if let Some(label) = strip_service(fullname) {
                    self.instance(label, None);
                }
            }
            BrowserEvent::Removed(fullname) => {
                if let Some(i) = strip_service(fullname).and_then(|l| self.lookup(l)) {
                    self.instances[i].removed = true;
                }
            }
            BrowserEvent::Resolved(r) => self.apply_resolved(r),
        }
        self.refresh(now);
        self.progress() != before
    }

    fn lookup(&self, label: &str) -> Option<usize> {
        self.index.get(&label.to_lowercase()).copied()
    }

    fn apply_resolved(&mut self, r: &ResolvedService) {
        let Some(label) = strip_service(&r.fullname) else {
            return;
        };
        // Who sent it is unknown here. With the legacy path running, every
        // real agent is also heard there from its own address, so the
        // multicast path shares the unsourced slots: otherwise a flood naming
        // a different address per bogus instance would pass for thousands of
        // sources (measured: a 10,000-instance flood kept 4096 instances and
        // held the browse's admission for 147 s). A continuous browse has no
        // legacy path and counts each announced address as a source.
        let source = if self.multicast_by_claim {
            r.addresses.iter().find_map(|a| match a {
                ScopedIp::V4(v4) => Some(IpAddr::V4(*v4.addr())),
                ScopedIp::V6(v6) => Some(IpAddr::V6(*v6.addr())),
                _ => None,
            })
        } else {
            None
        };
        let Some(i) = self.instance(label, source) else {
            return;
        };
        // Back after a goodbye (an agent restarted): live again.
        self.instances[i].removed = false;
        if !r.host.is_empty() {
            self.instances[i].srv = Some(Srv {
                port: r.port,
                host: r.host.clone(),
            });
        }
        // mdns-sd resolves before the TXT record arrives, with empty
        // properties: that is "not yet known", not an empty record.
        let strings = txt::strings_of(&r.txt_properties);
        if !strings.is_empty() {
            self.set_txt(i, strings);
        }
        let mut first_iface = None;
        for a in &r.addresses {
            let (ip, names): (IpAddr, Vec<&str>) = match a {
                ScopedIp::V4(v4) => (
                    IpAddr::V4(*v4.addr()),
                    v4.interface_ids()
                        .iter()
                        .map(|id| id.name.as_str())
                        .collect(),
                ),
                ScopedIp::V6(v6) => (IpAddr::V6(*v6.addr()), vec![v6.scope_id().name.as_str()]),
                _ => continue,
            };
            for name in names {
                if let Some(k) = self.ifaces.iter().position(|i| i.name == name) {
                    first_iface.get_or_insert(k);
                    self.add_addr(&r.host, ip, k, source);
                }
            }
        }
        if let Some(k) = first_iface {
            self.instances[i].heard_on.get_or_insert(k);
        }
    }

    /// (instances heard, instances resolved): what "something new" means.
    fn progress(&self) -> (usize, usize) {
        let live = self.instances.iter().filter(|i| !i.removed);
        let mut heard = 0;
        let mut done = 0;
        for i in live {
            heard += 1;
            done += usize::from(i.complete_at.is_some());
        }
        (heard, done)
    }

    /// The candidate addresses of instance `i` and the interface they were
    /// heard on: those heard on its first interface, or all if none were.
    fn candidates(&self, i: usize) -> Option<(Vec<IpAddr>, usize)> {
        let inst = &self.instances[i];
        let srv = inst.srv.as_ref()?;
        let addrs = self.hosts.get(&host_key(&srv.host))?;
        let on = inst.heard_on.unwrap_or(addrs.first()?.1);
        let here: Vec<IpAddr> = addrs
            .iter()
            .filter(|(_, k)| *k == on)
            .map(|(ip, _)| *ip)
            .collect();
        if here.is_empty() {
            // Heard on one interface, addresses on another (multi-homed
            // querier): take those of the interface the first came from.
            let k0 = addrs[0].1;
            let there = addrs.iter().filter(|(_, k)| *k == k0).map(|(ip, _)| *ip);
            return Some((there.collect(), k0));
        }
        Some((here, on))
    }

    /// The address chosen for instance `i` and the interface it goes with.
    fn chosen(&self, i: usize) -> Option<(IpAddr, usize)> {
        let (cands, on) = self.candidates(i)?;
        iface::pick_address(&cands, &self.ifaces[on]).map(|ip| (ip, on))
    }

    /// Stamps instances that just became resolved.
    fn refresh(&mut self, now: Instant) {
        for i in 0..self.instances.len() {
            let inst = &self.instances[i];
            if inst.routable_at.is_some() || inst.srv.is_none() || inst.txt.is_none() {
                continue;
            }
            let Some((ip, _)) = self.chosen(i) else {
                continue;
            };
            let inst = &mut self.instances[i];
            if inst.complete_at.is_none() {
                inst.complete_at = Some(now);
                self.newly_resolved.push(i);
            }
            if is_routable(&ip) {
                inst.routable_at = Some(now);
            }
        }
    }

    /// Instance labels to list as known answers in query `round`: those
    /// resolved, rotated by the round so that, past what fits in one query,
    /// each gets its turn; the first `sentinels` of the rotation are left
    /// out, so that they answer and show the query went out.
    fn known_answers(&self, round: usize, sentinels: usize) -> Vec<Vec<u8>> {
        let done: Vec<&Instance> = self
            .instances
            .iter()
            .filter(|i| !i.removed && i.complete_at.is_some())
            .collect();
        if done.is_empty() {
            return Vec::new();
        }
        let n = done.len();
        let left_out = |k: usize| (0..sentinels.min(n)).any(|j| (round * sentinels + j) % n == k);
        let start = (round * 50) % n;
        (start..n)
            .chain(0..start)
            .filter(|&k| !left_out(k))
            .map(|k| done[k].label.as_bytes().to_vec())
            .collect()
    }

    /// The early-stop test (see the module docs): at least one instance, and
    /// every instance answered every early round and is resolved.
    fn clean(&self) -> bool {
        let all_rounds = (1u32 << EARLY_ROUNDS) - 1;
        let mut live = self.instances.iter().filter(|i| !i.removed).peekable();
        live.peek().is_some() && live.all(|i| i.early == all_rounds && i.complete_at.is_some())
    }

    /// (early queries answered, early queries asked) over the live
    /// instances, counting only the early rounds that reached the network,
    /// when any instance is live: the measured answer rate. Instances heard
    /// only by multicast count as answering none.
    fn answer_rate(&self) -> Option<(usize, usize)> {
        let live: Vec<&Instance> = self.instances.iter().filter(|i| !i.removed).collect();
        if live.is_empty() {
            return None;
        }
        let out = (self.delivered as u32) & ((1 << EARLY_ROUNDS) - 1);
        let answered = live
            .iter()
            .map(|i| (i.early & out).count_ones() as usize)
            .sum();
        Some((answered, live.len() * out.count_ones() as usize))
    }

    /// Responders expected to be still unheard after the first `matured`
    /// legacy rounds ([`expected_unheard`]; each round that reached the
    /// network is a chance); `None` while nothing was heard or an instance
    /// heard is not yet resolved (it is not done either way).
    fn expected_missing(&self, matured: usize) -> Option<f64> {
        let (answered, asked) = self.answer_rate()?;
        let mut live = self.instances.iter().filter(|i| !i.removed);
        if !live.all(|i| i.complete_at.is_some()) {
            return None;
        }
        let mask = if matured >= 64 {
            u64::MAX
        } else {
            (1u64 << matured) - 1
        };
        Some(expected_unheard(
            self.heard(),
            answered,
            asked,
            (self.delivered & mask).count_ones(),
        ))
    }

    /// Why [`Table::clean`] is false, in words for the report.
    fn why_not_clean(&self) -> String {
        let all_rounds = (1u32 << EARLY_ROUNDS) - 1;
        let live: Vec<&Instance> = self.instances.iter().filter(|i| !i.removed).collect();
        if live.is_empty() {
            return "nothing answered, so it listened the whole window".into();
        }
        let missed = live.iter().filter(|i| i.early != all_rounds).count();
        let unresolved = live.iter().filter(|i| i.complete_at.is_none()).count();
        let mut parts = Vec::new();
        if missed > 0 {
            parts.push(format!(
                "{missed} of {} missed an early query (packet loss, or a responder that ignores legacy queries)",
                live.len()
            ));
        }
        if unresolved > 0 {
            parts.push(format!("{unresolved} not fully resolved"));
        }
        if parts.is_empty() {
            "answers were still arriving".into()
        } else {
            parts.join("; ")
        }
    }

    /// Instances heard and not gone.
    fn heard(&self) -> usize {
        self.instances.iter().filter(|i| !i.removed).count()
    }

    /// Instances first resolved after `point`.
    fn late(&self, point: Instant) -> usize {
        self.instances
            .iter()
            .filter(|i| !i.removed && i.complete_at.is_some_and(|t| t > point))
            .count()
    }

    /// Turns the table into sightings and problems, in the order heard.
    fn finish(
        &self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
    ) -> (Vec<Sighting>, Vec<Problem>) {
        self.snapshot(opts, started, deadline, true)
    }

    /// [`Table::finish`]; with `settled = false` (a continuous browse),
    /// instances still missing a record are pending, not problems.
    fn snapshot(
        &self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
        settled: bool,
    ) -> (Vec<Sighting>, Vec<Problem>) {
        let mut sightings = Vec::new();
        let mut problems = Vec::new();
        for i in 0..self.instances.len() {
            match self.entry(i, opts, started, deadline, settled) {
                Entry::Found(s) => sightings.push(*s),
                Entry::Problem(p) => problems.push(p),
                Entry::Pending => {}
            }
        }
        (sightings, problems)
    }

    /// Sightings of the instances resolved since the last call, for
    /// [`BrowseOptions::on_resolved`]. (An address that changes later is
    /// not passed on again: the sighting at the end of the browse carries
    /// the final one, and admission checks that.)
    fn take_resolved(
        &mut self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
    ) -> Vec<Sighting> {
        std::mem::take(&mut self.newly_resolved)
            .into_iter()
            .filter_map(|i| match self.entry(i, opts, started, deadline, false) {
                Entry::Found(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// What instance `i` amounts to now: a sighting, a problem, or (when
    /// not `settled`) still pending.
    fn entry(
        &self,
        i: usize,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
        settled: bool,
    ) -> Entry {
        let window = opts.browse.as_millis();
        let inst = &self.instances[i];
        if inst.removed {
            return Entry::Pending;
        }
        let problem = |reason: String| {
            Entry::Problem(Problem {
                source: Source::Mdns,
                host: inst.label.clone(),
                reason,
            })
        };
        let on = inst
            .heard_on
            .map(|k| self.ifaces[k].name.as_str())
            .unwrap_or("?");
        let Some(srv) = &inst.srv else {
            if !settled {
                return Entry::Pending;
            }
            return problem(format!(
                "announced on {on}, but its SRV record (port and host) did not arrive \
                 within the {window} ms browse; a longer browse_ms may help"
            ));
        };
        let Some((ip, k)) = self.chosen(i) else {
            if !settled {
                return Entry::Pending;
            }
            let heard: Vec<String> = self
                .hosts
                .get(&host_key(&srv.host))
                .map(|a| a.iter().map(|(ip, _)| ip.to_string()).collect())
                .unwrap_or_default();
            return problem(if heard.is_empty() {
                format!(
                    "host {} (port {}) announced on {on}, but no address for it arrived \
                     within the {window} ms browse",
                    srv.host, srv.port
                )
            } else {
                format!(
                    "host {} (port {}) announced only unusable addresses ({}) on {on}",
                    srv.host,
                    srv.port,
                    heard.join(", ")
                )
            });
        };
        let strings = match &inst.txt {
            None if !settled => return Entry::Pending,
            None => {
                return problem(format!(
                    "host {} announced no TXT record within the {window} ms browse; \
                     TXT schema v1 needs at least `txtvers=1`",
                    srv.host
                ));
            }
            Some(Txt::TooBig(n)) => {
                return problem(format!(
                    "host {}: TXT record of {n} bytes is over the {MAX_TXT_BYTES}-byte \
                     limit of TXT schema v1; announcement ignored",
                    srv.host
                ));
            }
            Some(Txt::Strings(s)) => s,
        };
        let mut caps: NodeCaps = match txt::decode(strings) {
            Ok(c) => c,
            Err(e) => return problem(txt_problem(&e, &inst.label, &srv.host)),
        };
        let iface = &self.ifaces[k];
        let addr = match ip {
            IpAddr::V6(v6) if v6.is_unicast_link_local() => {
                format!("[{v6}%{}]:{}", iface.name, srv.port)
            }
            ip => format_addr(ip, srv.port),
        };
        let host = srv.host.trim_end_matches('.');
        caps.hostname = host.strip_suffix(".local").unwrap_or(host).to_string();
        caps.addr = addr.clone();
        let at = inst.routable_at.or(inst.complete_at).unwrap_or(deadline);
        Entry::Found(Box::new(Sighting {
            source: Source::Mdns,
            host: inst.label.clone(),
            addr,
            ip: Some(ip),
            port: srv.port,
            ssh: None,
            caps: Some(caps),
            evidence: Evidence::Txt,
            heard_on: Some(iface.name.clone()),
            found_ms: ms(at.saturating_duration_since(started)),
        }))
    }
}

/// What one instance of the table amounts to.
enum Entry {
    Found(Box<Sighting>),
    Problem(Problem),
    /// Not resolved yet (a continuous browse), or gone.
    Pending,
}

/// The reason for a malformed announcement: the TXT error (which names the
/// key) plus the instance and host, so the user knows which machine to fix.
fn txt_problem(e: &TxtError, label: &str, host: &str) -> String {
    format!("{e} (instance `{label}` on host {host}); announcement ignored")
}

/// `box._rlx._tcp.local.` -> `box` (case-insensitive suffix).
fn strip_service(fullname: &str) -> Option<&str> {
    let suffix = format!(".{SERVICE_TYPE}");
    let cut = fullname.len().checked_sub(suffix.len())?;
    if cut == 0 || !fullname.is_char_boundary(cut) {
        return None;
    }
    fullname[cut..]
        .eq_ignore_ascii_case(&suffix)
        .then(|| &fullname[..cut])
}

/// Neither loopback nor link-local.
fn is_routable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local(),
        IpAddr::V6(v6) => !v6.is_loopback() && !v6.is_unicast_link_local(),
    }
}

// ------------------------------------------------------------ the mdns-sd path

/// What the standard browse reports.
#[derive(Debug, Clone)]
pub enum BrowserEvent {
    /// An instance exists (`PTR` seen), not yet resolved.
    Found(String),
    /// An instance resolved or changed (new address, new TXT): an upsert.
    Resolved(Box<ResolvedService>),
    /// An instance said goodbye or expired.
    Removed(String),
}

/// Standard mDNS browsing of [`SERVICE_TYPE`] through mdns-sd, restricted to
/// chosen interfaces: the multicast path of a one-shot browse and the event
/// source of a continuous `watch`.
///
/// Drain it promptly with [`MdnsBrowser::next`]: mdns-sd closes the event
/// channel silently when 1000 events are waiting, and `next` then browses
/// again (up to `MAX_REBROWSE` = 8 times) rather than going quiet.
pub struct MdnsBrowser {
    daemon: ServiceDaemon,
    events: mdns_sd::Receiver<ServiceEvent>,
    rebrowses: u32,
}

impl MdnsBrowser {
    /// Starts browsing on `ifaces` only. Checks the network-namespace guard
    /// first: the daemon joins the mDNS group on every up interface as soon
    /// as it starts, before the interface restriction applies.
    pub fn start(ifaces: &[Iface]) -> Result<Self, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let daemon = ServiceDaemon::new().map_err(|e| MdnsError::Daemon(e.to_string()))?;
        let setup = || -> Result<mdns_sd::Receiver<ServiceEvent>, mdns_sd::Error> {
            daemon.disable_interface(IfKind::All)?;
            let names: Vec<IfKind> = ifaces
                .iter()
                .map(|i| IfKind::Name(i.name.clone()))
                .collect();
            daemon.enable_interface(names)?;
            daemon.browse(SERVICE_TYPE)
        };
        match setup() {
            Ok(events) => Ok(MdnsBrowser {
                daemon,
                events,
                rebrowses: 0,
            }),
            Err(e) => {
                let _ = daemon.shutdown();
                Err(MdnsError::Daemon(e.to_string()))
            }
        }
    }

    /// The next event, or `None` when the daemon is gone for good.
    pub async fn next(&mut self) -> Option<BrowserEvent> {
        loop {
            match self.events.recv_async().await {
                Ok(ServiceEvent::ServiceFound(_, fullname)) => {
                    return Some(BrowserEvent::Found(fullname))
                }
                Ok(ServiceEvent::ServiceResolved(r)) => return Some(BrowserEvent::Resolved(r)),
                Ok(ServiceEvent::ServiceRemoved(_, fullname)) => {
                    return Some(BrowserEvent::Removed(fullname))
                }
                Ok(_) => continue,
                Err(_) => {
                    if self.rebrowses >= MAX_REBROWSE {
                        return None;
                    }
                    self.rebrowses += 1;
                    tracing::warn!(
                        "mdns-sd closed the browse channel (consumer too slow?); browsing again"
                    );
                    match self.daemon.browse(SERVICE_TYPE) {
                        Ok(rx) => self.events = rx,
                        Err(e) => {
                            tracing::warn!("mdns-sd browse failed: {e}");
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// Stops the daemon (a browser sends no goodbyes; nothing waits).
    pub fn shutdown(self) {
        let _ = self.daemon.shutdown();
    }
}

// ------------------------------------------------------- continuous browse

/// What changed in a [`ContinuousBrowse`].
#[derive(Debug, Clone)]
pub enum Change {
    /// The current complete instances and the malformed ones (pending
    /// instances, still missing a record, are in neither).
    Snapshot {
        /// One per complete instance, with TXT caps.
        sightings: Vec<Sighting>,
        /// Malformed announcements, with reasons.
        problems: Vec<Problem>,
    },
    /// An instance said goodbye (or expired): its label.
    Removed(String),
}

/// The multicast path alone, kept running: the event source of `watch`.
/// Each event is folded into the same instance table as a one-shot browse,
/// so a watched node is decoded, addressed and bounded exactly like a
/// browsed one.
pub struct ContinuousBrowse {
    browser: MdnsBrowser,
    table: Table,
    opts: BrowseOptions,
    started: Instant,
}

impl ContinuousBrowse {
    /// Starts browsing (guard first, then the interfaces of `opts`).
    pub fn start(opts: &BrowseOptions, started: Instant) -> Result<Self, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let ifaces = iface::select(&opts.interfaces)?;
        if ifaces.is_empty() {
            return Err(MdnsError::NoInterface {
                available: iface::describe(&iface::all_interfaces()?),
            });
        }
        let browser = MdnsBrowser::start(&ifaces)?;
        Ok(ContinuousBrowse {
            browser,
            table: Table::new(ifaces),
            opts: opts.clone(),
            started,
        })
    }

    /// The names of the interfaces browsed.
    pub fn interfaces(&self) -> Vec<String> {
        self.table.ifaces.iter().map(|i| i.name.clone()).collect()
    }

    /// Waits for the next event and says what changed; `None` when the
    /// mDNS daemon is gone for good.
    pub async fn next(&mut self) -> Option<Change> {
        let ev = self.browser.next().await?;
        let now = Instant::now();
        if let BrowserEvent::Removed(fullname) = &ev {
            let label = strip_service(fullname).map(str::to_string);
            self.table.apply_event(&ev, now);
            if let Some(l) = label {
                return Some(Change::Removed(l));
            }
        } else {
            self.table.apply_event(&ev, now);
        }
        // Every snapshot carries every resolved instance; nothing to pass on.
        self.table.newly_resolved.clear();
        let (sightings, problems) = self.table.snapshot(&self.opts, self.started, now, false);
        Some(Change::Snapshot {
            sightings,
            problems,
        })
    }

    /// Stops the daemon.
    pub fn shutdown(self) {
        self.browser.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA, SRV, TXT};
    use nix::net::if_::InterfaceFlags;

    fn eth0() -> Iface {
        Iface {
            name: "eth0".into(),
            index: 2,
            flags: InterfaceFlags::IFF_UP | InterfaceFlags::IFF_MULTICAST,
            addrs: vec![
                "10.9.1.1/16".parse().unwrap(),
                "fd52::1/64".parse().unwrap(),
                "fe80::1/64".parse().unwrap(),
            ],
        }
    }

    fn txt_rec(label: &str, strings: &[&str]) -> Record {
        Record::from_rdata(
            instance_name(label.as_bytes()).unwrap(),
            10,
            RData::TXT(TXT::new(strings.iter().map(|s| s.to_string()).collect())),
        )
    }

    /// A legacy reply as an mdns-sd responder sends it: PTR answer, SRV,
    /// TXT and address records as additionals.
    fn reply(id: u16, label: &str, host: &str, port: u16, txt: &[&str], ips: &[&str]) -> Message {
        let mut m = Message::new();
        m.set_id(id)
            .set_message_type(MessageType::Response)
            .set_op_code(OpCode::Query)
            .set_authoritative(true);
        m.add_query(Query::query(service_name(), RecordType::PTR));
        let inst = instance_name(label.as_bytes()).unwrap();
        let host_name = Name::from_ascii(host).unwrap();
        m.add_answer(Record::from_rdata(
            service_name(),
            10,
            RData::PTR(PTR(inst.clone())),
        ));
        m.add_additional(Record::from_rdata(
            inst,
            10,
            RData::SRV(SRV::new(0, 0, port, host_name.clone())),
        ));
        m.add_additional(txt_rec(label, txt));
        for ip in ips {
            let rd = match ip.parse::<IpAddr>().unwrap() {
                IpAddr::V4(a) => RData::A(A(a)),
                IpAddr::V6(a) => RData::AAAA(AAAA(a)),
            };
            m.add_additional(Record::from_rdata(host_name.clone(), 10, rd));
        }
        // Through the wire form, as the browse sees it.
        Message::from_vec(&m.to_vec().unwrap()).unwrap()
    }

    const GOOD: &[&str] = &[
        "txtvers=1",
        "id=5f0c1d2e3a4b5c6d",
        "cores=16",
        "ram=68719476736",
        "dev0=cuda,25769803776,0,1,0,RTX 4090",
    ];

    fn opts() -> BrowseOptions {
        BrowseOptions {
            browse: Duration::from_millis(2000),
            ..Default::default()
        }
    }

    #[test]
    fn a_legacy_query_asks_for_rlx_ptr_records_and_lists_known_answers_with_a_long_ttl() {
        let known = vec![b"box a".to_vec(), b"gpu (2)".to_vec()];
        let bytes = legacy_query(0x1234, &known).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.id(), 0x1234);
        assert_eq!(m.message_type(), MessageType::Query);
        assert_eq!(m.queries().len(), 1);
        assert_eq!(m.queries()[0].query_type(), RecordType::PTR);
        assert_eq!(m.queries()[0].name(), &service_name());
        assert!(
            !m.queries()[0].mdns_unicast_response(),
            "QU bit must be clear"
        );
        assert_eq!(m.answers().len(), 2);
        for (rec, want) in m.answers().iter().zip(&known) {
            assert_eq!(rec.ttl(), KNOWN_ANSWER_TTL);
            let RData::PTR(PTR(t)) = rec.data() else {
                panic!("not a PTR: {rec:?}")
            };
            assert_eq!(instance_label(t, &service_name()).as_ref(), Some(want));
        }
    }

    #[test]
    fn the_known_answer_list_stops_before_a_query_outgrows_one_frame() {
        let known: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("node-{i:04}").into_bytes())
            .collect();
        let bytes = legacy_query(1, &known).unwrap();
        assert!(bytes.len() <= MAX_QUERY_BYTES, "{} bytes", bytes.len());
        let n = Message::from_vec(&bytes).unwrap().answers().len();
        assert!(n >= 50, "only {n} known answers fit");
    }

    #[test]
    fn one_legacy_reply_resolves_an_instance_with_caps_port_and_the_address_on_the_heard_subnet() {
        let mut t = Table::new(vec![eth0()]);
        let m = reply(
            7,
            "box",
            "box.local.",
            9100,
            GOOD,
            &["fe80::2", "192.168.7.7", "10.9.1.5"],
        );
        let t0 = Instant::now();
        assert!(t.apply_reply(&m, 0, 0, t0));
        let (s, p) = t.finish(&opts(), t0, t0 + Duration::from_secs(2));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(s.len(), 1);
        let s = &s[0];
        assert_eq!(s.host, "box");
        assert_eq!(s.addr, "10.9.1.5:9100", "the address on eth0's subnet wins");
        assert_eq!(s.port, 9100);
        assert_eq!(s.heard_on.as_deref(), Some("eth0"));
        assert_eq!(s.evidence, Evidence::Txt);
        let caps = s.caps.as_ref().unwrap();
        assert_eq!(caps.cores, 16);
        assert_eq!(caps.hostname, "box");
        assert_eq!(caps.devices[0].mem_bytes, 25769803776);
    }

    #[test]
    fn an_ipv6_only_instance_gets_a_bracketed_routable_address() {
        let mut t = Table::new(vec![eth0()]);
        let m = reply(
            7,
            "v6box",
            "v6box.local.",
            9100,
            GOOD,
            &["fe80::9", "fd52::9"],
        );
        let t0 = Instant::now();
        t.apply_reply(&m, 0, 0, t0);
        let (s, _) = t.finish(&opts(), t0, t0);
        assert_eq!(s[0].addr, "[fd52::9]:9100");
    }

    #[test]
    fn a_malformed_announcement_is_a_problem_naming_the_key_and_instance_and_spares_the_others() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        t.apply_reply(
            &reply(7, "good", "good.local.", 9100, GOOD, &["10.9.1.5"]),
            0,
            0,
            t0,
        );
        t.apply_reply(
            &reply(
                7,
                "bad",
                "bad.local.",
                9100,
                &["txtvers=1", "cores=abc"],
                &["10.9.1.6"],
            ),
            0,
            0,
            t0,
        );
        let (s, p) = t.finish(&opts(), t0, t0);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].host, "good");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].host, "bad");
        for needle in ["`cores`", "bad", "bad.local."] {
            assert!(
                p[0].reason.contains(needle),
                "{needle:?} missing: {}",
                p[0].reason
            );
        }
    }

    #[test]
    fn a_txt_record_over_the_cap_is_refused() {
        let mut t = Table::new(vec![eth0()]);
        let big = format!("pad={}", "x".repeat(250));
        let mut strings: Vec<&str> = GOOD.to_vec();
        for _ in 0..6 {
            strings.push(&big);
        }
        let t0 = Instant::now();
        t.apply_reply(
            &reply(7, "fat", "fat.local.", 9100, &strings, &["10.9.1.5"]),
            0,
            0,
            t0,
        );
        let (s, p) = t.finish(&opts(), t0, t0);
        assert!(s.is_empty());
        assert!(p[0].reason.contains("1300-byte"), "{}", p[0].reason);
    }

    /// python-zeroconf 0.47 writes NSEC records hickory-proto refuses; the
    /// PTR, SRV, TXT and A beside one must still be read.
    #[test]
    fn a_reply_with_an_undecodable_record_keeps_the_records_beside_it() {
        use hickory_proto::serialize::binary::BinEncodable;
        let good = reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]);
        let mut bytes = good.to_bytes().unwrap();
        // One more additional record: root name, type NSEC (47), class IN,
        // TTL 10, and 3 bytes of data that are no valid NSEC.
        bytes.extend_from_slice(&[0, 0, 47, 0, 1, 0, 0, 0, 10, 0, 3, 0xff, 0xff, 0xff]);
        let adds = u16::from_be_bytes([bytes[10], bytes[11]]) + 1;
        bytes[10..12].copy_from_slice(&adds.to_be_bytes());
        assert!(
            Message::from_vec(&bytes).is_err(),
            "hickory refuses the whole message"
        );
        let m = lenient_message(&bytes).expect("the rest decodes");
        assert_eq!(m.answers().len(), good.answers().len());
        assert_eq!(m.additionals().len(), good.additionals().len());
        let mut t = Table::new(vec![eth0()]);
        t.apply_reply(&m, 0, 0, Instant::now());
        let (s, _) = t.finish(&opts(), Instant::now(), Instant::now());
        assert_eq!(s.len(), 1, "the instance resolves from the good records");
    }

    #[test]
    fn the_table_stops_growing_at_its_limit_and_counts_the_rest() {
        let mut t = Table::new(vec![eth0()]);
        // Many sources, a few instances each: only the global cap applies.
        for i in 0..MAX_INSTANCES + 10 {
            let src = IpAddr::V4(Ipv4Addr::from(0x0a09_0000 + (i / 8) as u32));
            t.instance(&format!("n{i}"), Some(src));
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES);
        assert_eq!(t.over_limit, 10);
        assert!(
            t.instance("n0", None).is_some(),
            "known names still resolve"
        );
    }

    /// A flood of bogus instances from one host must not crowd out the real
    /// agents that answer after it.
    #[test]
    fn a_flood_from_one_address_cannot_fill_the_table() {
        let mut t = Table::new(vec![eth0()]);
        let flooder = IpAddr::V4(Ipv4Addr::new(10, 9, 1, 66));
        for i in 0..10_000 {
            t.instance(&format!("bogus{i}"), Some(flooder));
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES_PER_SOURCE);
        for i in 0..10_000 {
            t.instance(&format!("named{i}"), None);
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES_PER_SOURCE + MAX_UNSOURCED);
        let real = IpAddr::V4(Ipv4Addr::new(10, 9, 1, 5));
        assert!(
            t.instance("real-agent", Some(real)).is_some(),
            "room is left for real agents"
        );
        assert_eq!(
            t.over_limit,
            2 * 10_000 - MAX_INSTANCES_PER_SOURCE - MAX_UNSOURCED
        );
    }

    #[test]
    fn an_early_stop_needs_every_instance_to_answer_every_early_round() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        assert!(!t.clean(), "an empty browse never stops early");
        for r in 0..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                r,
                t0,
            );
        }
        assert!(t.clean());
        // A second instance that missed round 1.
        for r in [0, 2] {
            t.apply_reply(
                &reply(7, "b", "b.local.", 9100, GOOD, &["10.9.1.6"]),
                0,
                r,
                t0,
            );
        }
        assert!(!t.clean());
        assert!(
            t.why_not_clean().contains("1 of 2 missed"),
            "{}",
            t.why_not_clean()
        );
    }

    #[test]
    fn an_instance_known_only_from_multicast_prevents_an_early_stop() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        for r in 0..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                r,
                t0,
            );
        }
        t.apply_event(&BrowserEvent::Found("quiet._rlx._tcp.local.".into()), t0);
        assert!(!t.clean());
    }

    #[test]
    fn a_goodbye_removes_an_instance() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        t.apply_reply(
            &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
            0,
            0,
            t0,
        );
        t.apply_event(&BrowserEvent::Removed("A._rlx._tcp.local.".into()), t0);
        let (s, p) = t.finish(&opts(), t0, t0);
        assert!(s.is_empty() && p.is_empty());
    }

    #[test]
    fn replies_are_accepted_only_from_port_5353_on_link_to_a_query_we_sent() {
        let m = reply(42, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]);
        let bytes = m.to_vec().unwrap();
        let rounds: HashMap<u16, usize> = [(42, 0)].into();
        let on = eth0();
        let ok: SocketAddr = "10.9.1.5:5353".parse().unwrap();
        assert!(parse_reply(&bytes, ok, &on, &rounds).is_some());
        assert!(parse_reply(&bytes, "10.9.1.5:5354".parse().unwrap(), &on, &rounds).is_none());
        assert!(parse_reply(&bytes, "8.8.8.8:5353".parse().unwrap(), &on, &rounds).is_none());
        assert!(parse_reply(&bytes, ok, &on, &[(43, 0)].into()).is_none());
        assert!(parse_reply(b"junk", ok, &on, &rounds).is_none());
    }

    #[test]
    fn instance_names_with_spaces_and_dots_survive_the_round_trip() {
        let n = instance_name("GPU box (2).lab".as_bytes()).unwrap();
        let bytes = {
            let mut m = Message::new();
            m.add_answer(Record::from_rdata(service_name(), 1, RData::PTR(PTR(n))));
            m.to_vec().unwrap()
        };
        let m = Message::from_vec(&bytes).unwrap();
        let RData::PTR(PTR(t)) = m.answers()[0].data() else {
            panic!()
        };
        assert_eq!(
            instance_label(t, &service_name()).unwrap(),
            b"GPU box (2).lab".to_vec()
        );
        assert_eq!(
            strip_service("GPU box (2).lab._rlx._tcp.local."),
            Some("GPU box (2).lab")
        );
        assert_eq!(strip_service("x._http._tcp.local."), None);
    }

    #[test]
    fn a_round_counts_once_its_answers_are_due() {
        let at = |ms| Duration::from_millis(ms);
        assert_eq!(matured(at(0), 1), (0, Some(ROUND_WAIT)));
        // At 999 ms: ten rounds sent (the last at 900 ms), nine due.
        assert_eq!(matured(at(999), 10), (9, Some(at(1000))));
        assert_eq!(matured(at(1000), 10), (10, None));
        assert_eq!(matured(at(3000), 11), (11, None));
    }

    /// Builds a table of `n` resolved agents that answered the early rounds
    /// in `early` (bit per round), with `delivered` rounds marked as having
    /// reached the network.
    fn table_of(n: usize, early: &[u32], delivered: u64) -> Table {
        let mut t = Table::new(vec![eth0()]);
        for k in 0..n {
            let i = t.instance(&format!("a{k}"), None).unwrap();
            t.instances[i].early = early[k % early.len()];
            t.instances[i].complete_at = Some(Instant::now());
        }
        t.delivered = delivered;
        t
    }

    #[test]
    fn only_queries_that_someone_answered_count_as_chances() {
        // 20 agents, every one answered the early rounds 0 and 2; round 1
        // was lost on our own link (nobody answered it).
        let t = table_of(20, &[0b101], 0b101);
        assert_eq!(t.answer_rate(), Some((40, 40)));
        // Rounds 3..=9 matured, none answered: only two chances.
        let two = t.expected_missing(10).unwrap();
        assert_eq!(two, expected_unheard(20, 40, 40, 2));
        let mut more = t;
        more.delivered |= 0b11_1111_1000;
        assert!(more.expected_missing(10).unwrap() < two);
    }

    #[test]
    fn an_unresolved_instance_leaves_nothing_to_estimate() {
        let mut t = table_of(5, &[0b111], 0b111);
        t.instances[2].complete_at = None;
        assert_eq!(t.expected_missing(3), None);
        assert_eq!(table_of(0, &[0], 0).expected_missing(3), None);
    }

    #[test]
    fn later_queries_leave_sentinels_out_of_their_known_answers() {
        let t = table_of(5, &[0b111], 0b111);
        assert_eq!(t.known_answers(4, 0).len(), 5);
        assert_eq!(t.known_answers(4, SENTINELS).len(), 5 - SENTINELS);
        // The sentinels rotate: over rounds, every agent takes a turn.
        let mut left_out = std::collections::BTreeSet::new();
        let all: Vec<Vec<u8>> = t.known_answers(0, 0);
        for r in 0..10 {
            let listed = t.known_answers(r, SENTINELS);
            left_out.extend(all.iter().filter(|l| !listed.contains(l)).cloned());
        }
        assert_eq!(left_out.len(), 5);
    }

    #[test]
    fn a_lossless_network_leaves_no_agent_expected_unheard() {
        let e = expected_unheard(50, 150, 150, 3);
        assert!(e < STOP_RISK / 10.0, "{e}");
    }

    /// 20% loss each way on the coordinator's link: of the queries that go
    /// out, 80% of an agent's replies arrive. With 50 agents heard, eight
    /// chances are enough; four are not.
    #[test]
    fn at_twenty_percent_loss_fifty_agents_make_a_missed_one_unlikely_after_eight_chances() {
        let answered = 120; // 80% of 150
        assert!(expected_unheard(50, answered, 150, 8) < STOP_RISK);
        assert!(expected_unheard(50, answered, 150, 4) > STOP_RISK);
    }

    #[test]
    fn one_or_two_agents_heard_are_too_few_to_estimate_the_loss_within_a_window() {
        // 14 chances: everything a 3 s window sends.
        assert!(expected_unheard(1, 2, 3, 14) > STOP_RISK);
        assert!(expected_unheard(2, 4, 6, 14) > STOP_RISK);
    }

    #[test]
    fn agents_heard_only_by_multicast_keep_the_estimate_from_stopping() {
        // Ten agents that ignore legacy queries: no early answers at all.
        assert!(expected_unheard(10, 0, 30, 14).is_infinite());
        assert!(expected_unheard(0, 0, 0, 14).is_infinite());
    }

    #[test]
    fn more_chances_and_a_higher_answer_rate_only_lower_the_estimate() {
        for k in 1..20 {
            assert!(expected_unheard(20, 40, 60, k + 1) < expected_unheard(20, 40, 60, k));
        }
        for a in 1..60 {
            assert!(expected_unheard(20, a + 1, 60, 8) < expected_unheard(20, a, 60, 8));
        }
    }

    #[test]
    fn the_legacy_schedule_is_a_bounded_burst_then_doubling_gaps() {
        let in_first_second = (0..100)
            .filter(|&r| legacy_offset(r) < Duration::from_secs(1))
            .count();
        assert_eq!(in_first_second, 10);
        assert_eq!(legacy_offset(10), Duration::from_millis(1900));
        assert_eq!(legacy_offset(11), Duration::from_millis(3900));
        assert_eq!(legacy_offset(12), Duration::from_millis(7900));
        for r in 1..30 {
            assert!(legacy_offset(r) > legacy_offset(r - 1));
        }
    }
}
