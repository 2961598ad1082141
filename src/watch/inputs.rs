//! **What the watch engine reads** — the announcements (the continuous
//! mDNS browse), the DNS-SD zone it polls, and the check that admits a
//! candidate or confirms a member, each a trait so that tests drive the
//! engine with channels, fakes and paused time.

use crate::admit::{admit, Rules};
use crate::sighting::Discovery;
use crate::sources::dns::{self, DnsSdOptions};
use crate::sources::mdns::{Change, ContinuousBrowse};
use std::future::Future;
use std::time::Duration;

/// How often the DNS-SD zone is browsed again. Each browse costs 1 + 2N
/// queries on BIND (see [`crate::sources::dns`]); every 5 s keeps joins and
/// clean leaves within seconds, well inside the records' 60 s TTL.
pub(crate) const DNS_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Where joins and goodbyes come from: the mDNS browse in production, a
/// channel in tests.
pub(crate) trait Announcements {
    /// The next change; `None` once the source has stopped for good. Must be
    /// cancel-safe: the watch drops it whenever another input is ready.
    fn next(&mut self) -> impl Future<Output = Option<Change>>;
}

impl Announcements for ContinuousBrowse {
    fn next(&mut self) -> impl Future<Output = Option<Change>> {
        ContinuousBrowse::next(self)
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
