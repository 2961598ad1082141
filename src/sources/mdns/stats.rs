//! **How a browse went** — the statistics of one run, the rule that let it
//! stop early, and the one-line [`Attempt`](crate::sighting::Attempt)
//! description the report prints.

use crate::sighting::Discovery;
use crate::sources::dnssd::MAX_INSTANCES;
use serde::Serialize;
use std::fmt::Write as _;

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
    /// Ms after the start at which the multicast path began (mdns-sd's
    /// browse and the extra standard queries); `None` when the legacy
    /// queries found the LAN clean and nothing multicast-answered was sent
    /// (see "A light browse" in the mDNS source's module docs).
    pub multicast_begun_ms: Option<u64>,
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
    /// Later legacy rounds not sent because the answers were already clean
    /// (every agent heard had answered every early query).
    pub legacy_rounds_skipped: usize,
    /// Legacy query packets not sent on one address family because the
    /// other family's queries reached every instance heard.
    pub legacy_family_skipped: usize,
    /// Legacy replies accepted.
    pub legacy_replies: usize,
    /// Extra standard (multicast-answered) query packets sent.
    pub standard_queries: usize,
    /// Gratuitous ARP announcements sent (needs `CAP_NET_RAW`; see
    /// `ARP_ANNOUNCE_MS`).
    pub arp_announcements: usize,
    /// Unsolicited IPv6 Neighbor Advertisements sent, the same help for
    /// IPv6 (needs `CAP_NET_RAW`; see `rlx_net::ndp`).
    pub na_announcements: usize,
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

/// Which rule let a browse stop before its window ended
/// ([`BrowseStats::stopped_early`]; docs/protocol.md explains each rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StopRule {
    /// Every agent answered every early query.
    #[serde(rename = "clean")]
    Clean,
    /// The measured loss left fewer than `STOP_RISK` agents expected to
    /// be still unheard.
    #[serde(rename = "loss estimate")]
    LossEstimate,
    /// mDNS heard nothing at all, and unicast DNS-SD (`dns_sd`) answered:
    /// a cluster reached through DNS, not on this link.
    #[serde(rename = "dns-sd answered")]
    DnsSdAnswered,
}

/// A browse: what it found and how it went.
#[derive(Debug, Clone, Default)]
pub struct Browse {
    /// Sightings, problems and the attempt, for the pipeline.
    pub discovery: Discovery,
    /// Details of the run.
    pub stats: BrowseStats,
}

/// What an early stop cannot see, said whenever a browse stopped early:
/// an agent that answers later than [`LATE_ANSWER`](super::schedule::LATE_ANSWER)
/// after a query, and what listens for it.
fn late_caveat() -> String {
    format!(
        "an agent answering more than {} ms after a query would be missed: [discover] \
         early_stop = false listens the whole window",
        super::schedule::LATE_ANSWER.as_millis()
    )
}

/// One line for the report: what was tried, for how long, with what result.
pub(super) fn describe_attempt(s: &BrowseStats) -> String {
    let mut w = format!(
        "mDNS browse of {} on {}: {} legacy queries{}; listened {} ms",
        s.service,
        s.interfaces.join(", "),
        s.legacy_queries,
        match (&s.multicast_error, s.multicast_begun_ms) {
            (Some(_), _) => " (multicast path unavailable)".to_string(),
            (None, Some(at)) => format!(" + standard multicast browsing from {at} ms"),
            (None, None) => " (no multicast-answered query: the LAN answered cleanly)".to_string(),
        },
        s.listened_ms
    );
    if s.stop_rule == Some(StopRule::Clean) {
        let _ = write!(
            w,
            " (stopped early: every agent heard answered every early query; {})",
            late_caveat()
        );
    } else if s.stop_rule == Some(StopRule::DnsSdAnswered) {
        let _ = write!(
            w,
            " (stopped early: no mDNS responder answered, and dns_sd did; {})",
            late_caveat()
        );
    } else if s.stop_rule == Some(StopRule::LossEstimate) {
        let _ = write!(
            w,
            " (stopped early on the loss estimate: agents answered {:.0}% of the early queries, \
             so fewer than {:.3} agents are expected to be still unheard; {})",
            s.answer_rate.unwrap_or(0.0) * 100.0,
            s.expected_missing.unwrap_or(f64::NAN),
            late_caveat()
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
    if s.na_announcements > 0 {
        let _ = write!(w, ", {} neighbour advertisements", s.na_announcements);
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
