//! **What the watch engine reads** — the announcements (the continuous
//! mDNS browse), the DNS-SD zone it polls, and the check that admits a
//! candidate or confirms a member, each a trait so that tests drive the
//! engine with channels, fakes and paused time.

use crate::admit::{admit, Rules};
use crate::sighting::{Discovery, Problem, Sighting, Source};
use crate::sources::dns::{self, DnsSdOptions};
use crate::sources::mdns::{Change, ContinuousBrowse};
use std::future::Future;
use std::time::Duration;

/// How often the DNS-SD zone is browsed again. Each browse costs 1 + 2N
/// queries on BIND (see [`crate::sources::dns`]); every 5 s keeps joins and
/// clean leaves within seconds, well inside the records' 60 s TTL.
pub(crate) const DNS_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The suffix of DNS members' names: the same agent is also an mDNS
/// instance of the same name, and the two must not be one member.
pub(crate) const DNS_SUFFIX: &str = " (dns)";

/// The suffix added to an mDNS instance whose own name ends like a
/// member name of another source would (an instance named `X (dns)`).
pub(crate) const MDNS_SUFFIX: &str = " (mdns)";

/// The name a member goes by, inside the engine (its key) and in its
/// events (`instance`): one per (source, instance name), so that members
/// of different sources never share a key. A DNS-SD registration `X` is
/// `X (dns)`; an mDNS instance is its own name, unless that name ends in
/// [`DNS_SUFFIX`] or [`MDNS_SUFFIX`], which gets [`MDNS_SUFFIX`] added
/// (`X (dns)` is `X (dns) (mdns)`): without it, an mDNS instance named
/// `X (dns)` was the DNS member X, and a goodbye for it (anyone on the
/// LAN can send one) checked, and evicted, that member. Every name of a
/// DNS member ends in [`DNS_SUFFIX`] and no mDNS one does, and each
/// source's names give back the instance by one suffix stripped, so no
/// two (source, instance) pairs share a name.
pub(crate) fn member_name(source: Source, instance: &str) -> String {
    match source {
        Source::Dns => format!("{instance}{DNS_SUFFIX}"),
        _ if instance.ends_with(DNS_SUFFIX) || instance.ends_with(MDNS_SUFFIX) => {
            format!("{instance}{MDNS_SUFFIX}")
        }
        _ => instance.to_string(),
    }
}

/// Sightings and problems of one source under their member names
/// ([`member_name`]): the keys of the engine and the `instance` of events.
pub(crate) fn named(
    sightings: Vec<Sighting>,
    problems: Vec<Problem>,
) -> (Vec<Sighting>, Vec<Problem>) {
    let sightings = sightings
        .into_iter()
        .map(|mut s| {
            s.host = member_name(s.source, &s.host);
            s
        })
        .collect();
    let problems = problems
        .into_iter()
        .map(|mut pr| {
            pr.host = member_name(pr.source, &pr.host);
            pr
        })
        .collect();
    (sightings, problems)
}

/// Browses `zone` at once and every [`DNS_POLL_INTERVAL`], one browse at
/// a time, and sends each result to `tx`. Never ends: pending for ever
/// without a zone, or once the engine stopped listening.
pub(crate) async fn poll_zone<Z: Zone>(
    zone: Option<&mut Z>,
    tx: tokio::sync::mpsc::Sender<Result<Discovery, String>>,
) {
    let Some(zone) = zone else {
        return std::future::pending().await;
    };
    let mut tick = tokio::time::interval(DNS_POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let found = zone.browse().await;
        if tx.send(found).await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Where joins and goodbyes come from: the mDNS browse in production, a
/// channel in tests.
pub(crate) trait Announcements {
    /// The next change; `None` once the source has stopped for good. Must be
    /// cancel-safe: the watch drops it whenever another input is ready.
    fn next(&mut self) -> impl Future<Output = Option<Change>>;

    /// Asks the LAN again for the instances the source lost although
    /// their machines still answer (a goodbye found to be forged: mdns-sd
    /// dropped the instance from its cache all the same, and would never
    /// report its real goodbye). The source bounds how often it asks.
    fn relearn(&mut self);
}

impl Announcements for ContinuousBrowse {
    fn next(&mut self) -> impl Future<Output = Option<Change>> {
        ContinuousBrowse::next(self)
    }

    fn relearn(&mut self) {
        ContinuousBrowse::relearn(self)
    }
}

/// A unicast DNS-SD zone, browsed every [`DNS_POLL_INTERVAL`].
pub(crate) trait Zone {
    /// Every registration in the zone, or why the browse failed (then the
    /// DNS members are kept as they are: a failed query is no leave).
    fn browse(&mut self) -> impl Future<Output = Result<Discovery, String>>;
}

/// The zone `[discover] dns_sd` names, browsed by [`crate::sources::dns`].
#[derive(Debug, Clone)]
pub(crate) struct DnsZone {
    /// The domain, server and deadline.
    pub opts: DnsSdOptions,
    /// Start of the watch, for the sightings' `found_ms`.
    pub started: std::time::Instant,
}

impl Zone for DnsZone {
    async fn browse(&mut self) -> Result<Discovery, String> {
        dns::browse(&self.opts, self.started)
            .await
            .map(|b| b.discovery)
            .map_err(|e| e.to_string())
    }
}

/// How candidates and members are checked against the machines themselves:
/// admission (the handshake under the [`Rules`]) in production. It serves
/// both joins (is this announcement real?) and the health check (is this
/// member still there?): a sighting it returns is alive, a problem it
/// reports is not.
pub(crate) trait Check {
    /// The sightings that passed (with their fresh caps) and the problems.
    /// `Send`: checks run in their own tasks, beside the event loop.
    fn check(&self, d: Discovery) -> impl Future<Output = Discovery> + Send;
}

impl Check for Rules {
    fn check(&self, d: Discovery) -> impl Future<Output = Discovery> + Send {
        admit(d, self)
    }
}
