//! **mDNS source** — a one-shot browse of `_rlx._tcp` that finds every
//! `rlx-agent` on the LAN, fast on a clean network and without waiting out
//! the standard schedule on a lossy one, and hands each to the pipeline as a [`Sighting`](crate::sighting::Sighting).
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
//! packet costs a second or more, and a standard browser on a lossy link
//! cannot finish within a short window (BENCHMARKS.md compares the peers).
//! This source therefore runs two paths into one instance table:
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
//!   A one-shot browse starts it only when the legacy answers are not clean
//!   ("A light browse" below). The same wrapper serves a continuous `watch`.
//!
//! Each instance keeps the interface it was first heard on, and its address
//! is chosen among the addresses heard by the one rule every source uses
//! (`crate::pipeline::prefer`, docs/protocol.md, "Which address a machine
//! on several networks gets").
//!
//! # Schedule
//!
//! Legacy queries go out at `LEGACY_BURST_MS` (ten in the first second: a
//! bounded burst), then at intervals that start at one second and double (the
//! RFC 6762 §5.2 schedule). The first `EARLY_ROUNDS` carry no known
//! answers; later ones list every instance already resolved (a `PTR` with a
//! `KNOWN_ANSWER_TTL` above half the record's, RFC 6762 §7.1), so resolved
//! responders stay silent and only the missing ones answer. A legacy query
//! is one packet filled with known answers up to `MAX_QUERY_BYTES` (one
//! Ethernet frame on either family), the list rotating across rounds when
//! more are known; a standard query lists them all, in follow-up packets
//! with the TC bit when they do not fit one (RFC 6762 §7.2). Once the
//! answers are clean (every instance answered every early round and is
//! resolved) no later legacy round is sent while the browse waits out
//! `QUIET` (`legacy_round_wanted`): it would only draw the same replies
//! again. The legacy sockets ask for `RECV_BUFFER` of receive buffer, room
//! for the early rounds' replies of a few hundred agents arriving at once.
//!
//! Standard queries (answered by multicast, at most once a second per
//! record) go out at `EXTRA_QM_MS`, timed around the responders' rate
//! limit, besides mdns-sd's own, once the multicast path has begun (below).
//!
//! # A light browse
//!
//! Every multicast answer reaches every device on the segment: Wi-Fi
//! clients (woken from power save for it), printers, every other agent. A
//! browse that began with a standard query drew one multicast answer from
//! each agent: measured at 50 agents, about 50 packets and 19 KB that every
//! bystander received per discovery, where python-zeroconf's QU query drew
//! none. So a one-shot browse begins with legacy queries only, which every
//! responder answers by unicast to this host alone, and starts its
//! multicast path (mdns-sd's browse and the standard queries) at
//! `MULTICAST_DECISION` (200 ms, when the early rounds' answers are due)
//! only if it needs it: the answers are not clean (loss; nothing heard
//! yet; an instance heard but not answering), or it cannot stop early
//! anyway (`early_stop = false`, no legacy socket). A clean LAN then puts
//! only the early rounds on the segment: three queries of about 60 bytes
//! per interface and family. If the answers stop being clean later (a late
//! agent heard after 200 ms), the multicast path begins then.
//!
//! What it risks: a responder that ignores legacy queries (no
//! `rlx-agent`, avahi-daemon, mDNSResponder or python-zeroconf does) is not
//! heard by a browse of an otherwise clean LAN, unless it announces during
//! it; `watch` (which always browses by multicast), `early_stop = false`,
//! or any loss on the LAN finds it. Under loss the multicast path begins
//! 200 ms later than before, which the lossy benchmarks measure. A browse that did not stop early also
//! re-announces this host's MAC address by gratuitous ARP at
//! `ARP_ANNOUNCE_MS` when it may (`CAP_NET_RAW`), which releases unicast
//! replies stuck behind a lost ARP exchange at the responders.
//!
//! What each part buys, under loss and without `CAP_NET_RAW`, is measured
//! by `tests/mdns/browse.rs` and the benchmark suite (BENCHMARKS.md, "mDNS
//! browse"): the responders' one-second ARP retries and the standard
//! queries' one-second rate limit are what set the tail.
//!
//! # When it stops early
//!
//! A browse listens for the whole `browse` window unless the network is
//! clearly lossless: it stops as soon as
//!
//! 1. the first `EARLY_ROUNDS` legacy queries have been sent (without known
//!    answers, so every responder must answer each),
//! 2. every instance heard by either path answered every one of them and is
//!    fully resolved (or rejected with a reason), at least one was heard,
//! 3. nothing new arrived for `QUIET`,
//! 4. and the floor has passed: `EARLY_FLOOR_WITH_ARP` (500 ms: an agent
//!    answering `LATE_ANSWER`, 400 ms, after the first query is heard, a
//!    Wi-Fi client in power save or a loaded box; see there) when this
//!    process can announce its own address on every interface and family
//!    it browses (root, `CAP_NET_RAW`: gratuitous ARP for IPv4, unsolicited
//!    Neighbor Advertisements for IPv6, [`rlx_net::ndp`]), else
//!    `EARLY_FLOOR_WITHOUT_ARP` (1.1 s). A responder whose ARP exchange
//!    was lost is invisible on the legacy path until its ARP is resolved, and
//!    on a small network the others can all look clean meanwhile.
//!
//! A missing answer means loss (or a responder that ignores legacy
//! queries). Then the browse measures the loss instead of giving up on an
//! early stop: an agent that was never heard must have missed every query
//! so far that reached the network. A query lost on our own link is lost
//! for every responder at once, so only queries that some agent answered
//! count as chances; legacy queries carry no known answers (RFC 6762 §6.7;
//! avahi-daemon refuses those that do), so every responder answers each
//! one, by unicast to this host only, and any answer shows it went out. The chance that one agent's answer gets
//! through is measured on the early queries that went out, taken
//! `RATE_MARGIN` standard deviations low (a Wilson lower bound, so that
//! three agents with lucky answers do not look like a clean network). With
//! `n` agents heard, answer rate `q` and `k` chances (queries that went out,
//! answers due by `ROUND_WAIT`), the number still unheard is expected to
//! be `n·(1-q)^k / (1-(1-q)^k)`, and the browse stops once that is below
//! `STOP_RISK` (and conditions 2 for resolution, 3 and 4 hold): under
//! moderate loss with tens of agents that is well before the end of the
//! window; with one or two agents heard the estimate is too uncertain and
//! the browse listens to the end. Responders that ignore legacy queries
//! (heard only by multicast) count as answering none, which keeps the
//! estimate from stopping.
//!
//! One more rule stops a browse that heard nothing: when unicast DNS-SD
//! (`dns_sd`) has answered with at least one agent, no mDNS responder has
//! answered anything at all, `LATE_ANSWER` plus `SILENT_SLACK` (425 ms) has
//! passed since the first query (the long floor where neighbour exchanges
//! cannot be repaired) and `QUIET` since the DNS answer, the cluster is
//! taken to be beyond this link (a routed subnet found through DNS) and the
//! browse stops, about 0.43 s in, instead of listening its whole window.
//! `QUIET` is not added to the floor: it lets a stream of answers settle,
//! and nothing was heard. What it risks is the same as every early stop's:
//! an agent on this link that answers later than `LATE_ANSWER` would be
//! missed, and the report says so.
//!
//! The [`Attempt`](crate::sighting::Attempt) always says how long it listened, whether and why it
//! stopped early, and how many instances answered *late*: after the point
//! where a clean network would have let it stop. An empty result stops
//! early only by that rule, when DNS answered.
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
//!
//! # Layout
//!
//! - `wire`: names, the legacy query, the lenient reading of replies;
//! - `sockets`: the legacy query sockets and their readers;
//! - `browser`: the mdns-sd multicast path ([`MdnsBrowser`]);
//! - `table`: the bounded instance table both paths fill;
//! - `schedule`: when queries go out, the early-stop thresholds, the loss
//!   estimate; `stop`: the stop rules read off the table;
//! - `resolve`: the table read out as sightings, through the DNS-SD
//!   resolver shared with the unicast source ([`crate::sources::dnssd`]);
//! - `browse`: the one-shot browse loop, `stats`: how it went, `json`: its
//!   JSON view; `continuous`: the continuous browse of `watch` (with its
//!   own port-5353 reader, which knows who sent each answer).

mod browse;
mod browser;
mod continuous;
#[cfg(test)]
mod fixtures;
mod json;
mod options;
mod resolve;
mod schedule;
mod sockets;
mod stats;
mod stop;
mod table;
mod wire;

pub use browse::browse;
pub use json::browse_json;
pub(crate) use options::DialPolicy;
pub use options::{BrowseOptions, MdnsError};
pub use stats::{Browse, BrowseStats, StopRule};

pub(crate) use crate::sources::dnssd::MAX_INSTANCES;
pub(crate) use browse::discover;
pub(crate) use continuous::{Change, ContinuousBrowse};
