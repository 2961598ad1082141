//! **Standard mDNS browsing through mdns-sd** — the multicast path of a
//! one-shot browse and the event source of a continuous `watch`, restricted
//! to the chosen interfaces and kept alive when mdns-sd drops its channel.

use super::options::MdnsError;
use mdns_sd::{IfKind, ResolvedService, ServiceDaemon, ServiceEvent};
use rlx_net::iface::Iface;
use rlx_net::netguard;
use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;
use std::time::{Duration, Instant};

/// mdns-sd's event channel capacity (`EVENT_CHANNEL_CAPACITY` in 0.21).
const MDNS_SD_CHANNEL: usize = 1000;

/// The first wait before [`MdnsBrowser`] subscribes again after mdns-sd
/// closed its event channel (it does so silently when 1000 events wait).
/// Each new subscription replays mdns-sd's whole cache into the new
/// channel, two events per cached instance: under a flood of thousands of
/// bogus instances the replay alone overflows it again at once, so
/// re-subscribing in a tight loop only burns the tries (the old rule, eight
/// tries and then give up, ended `watch` within a second of a 10,000
/// instance flood). Waiting, doubling up to [`REBROWSE_MAX`], keeps the
/// multicast path alive for when the flood ends, while the browse's own
/// port-5353 reader goes on hearing the real agents meanwhile.
const REBROWSE_FIRST: Duration = Duration::from_millis(100);

/// The longest wait between two subscriptions.
const REBROWSE_MAX: Duration = Duration::from_secs(5);

/// A channel that has stayed open this long resets the wait: the overload
/// that closed it is over.
const REBROWSE_CALM: Duration = Duration::from_secs(60);

/// What the standard browse reports.
#[derive(Debug, Clone)]
pub(crate) enum BrowserEvent {
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
/// again after a wait that doubles while the overload lasts
/// (`REBROWSE_FIRST` to `REBROWSE_MAX`), rather than going quiet.
pub(crate) struct MdnsBrowser {
    daemon: ServiceDaemon,
    /// `None` until the browse begins ([`MdnsBrowser::start_quiet`]).
    events: Option<mdns_sd::Receiver<ServiceEvent>>,
    /// How many times the channel was closed on us.
    rebrowses: u32,
    /// The wait before the next subscription.
    backoff: Duration,
    /// When to subscribe again, while the channel is closed (kept here so a
    /// cancelled `next` resumes the same wait).
    resubscribe_at: Option<Instant>,
    /// When the channel was last closed.
    last_close: Option<Instant>,
}

impl MdnsBrowser {
    /// Starts browsing on `ifaces` only. Checks the network-namespace guard
    /// first: the daemon joins the mDNS group on every up interface as soon
    /// as it starts, before the interface restriction applies.
    pub(crate) fn start(ifaces: &[Iface]) -> Result<Self, MdnsError> {
        let mut b = Self::start_quiet(ifaces)?;
        if let Err(e) = b.begin() {
            b.shutdown();
            return Err(e);
        }
        Ok(b)
    }

    /// Starts the daemon on `ifaces` without browsing yet: it sends nothing
    /// until [`MdnsBrowser::begin`]. A one-shot browse begins only when its
    /// legacy queries show that it needs the multicast path (see "A light
    /// browse" in [`super`]'s docs), so that a browse of a clean LAN draws
    /// no multicast answers, which every device on the segment receives.
    pub(crate) fn start_quiet(ifaces: &[Iface]) -> Result<Self, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let daemon = ServiceDaemon::new().map_err(|e| MdnsError::Daemon(e.to_string()))?;
        let setup = || -> Result<(), mdns_sd::Error> {
            daemon.disable_interface(IfKind::All)?;
            let names: Vec<IfKind> = ifaces
                .iter()
                .map(|i| IfKind::Name(i.name.clone()))
                .collect();
            daemon.enable_interface(names)
        };
        match setup() {
            Ok(()) => Ok(MdnsBrowser {
                daemon,
                events: None,
                rebrowses: 0,
                backoff: REBROWSE_FIRST,
                resubscribe_at: None,
                last_close: None,
            }),
            Err(e) => {
                let _ = daemon.shutdown();
                Err(MdnsError::Daemon(e.to_string()))
            }
        }
    }

    /// Begins browsing (mdns-sd's first query goes out); a no-op once
    /// begun.
    pub(crate) fn begin(&mut self) -> Result<(), MdnsError> {
        if self.events.is_none() {
            let rx = self
                .daemon
                .browse(SERVICE_TYPE)
                .map_err(|e| MdnsError::Daemon(e.to_string()))?;
            self.events = Some(rx);
        }
        Ok(())
    }

    /// Whether [`MdnsBrowser::begin`] was called.
    pub(crate) fn begun(&self) -> bool {
        self.events.is_some()
    }

    /// The next event, or `None` when the daemon is gone for good; never
    /// returns before the browse has begun. Cancel-safe: a wait to
    /// subscribe again resumes where it was.
    pub(crate) async fn next(&mut self) -> Option<BrowserEvent> {
        loop {
            if let Some(at) = self.resubscribe_at {
                tokio::time::sleep_until(at.into()).await;
                self.resubscribe_at = None;
                match self.daemon.browse(SERVICE_TYPE) {
                    Ok(rx) => self.events = Some(rx),
                    Err(e) => {
                        tracing::warn!("mdns-sd browse failed: {e}");
                        return None;
                    }
                }
            }
            let Some(events) = self.events.as_ref() else {
                return std::future::pending().await;
            };
            match events.recv_async().await {
                Ok(ServiceEvent::ServiceFound(_, fullname)) => {
                    return Some(BrowserEvent::Found(fullname))
                }
                Ok(ServiceEvent::ServiceResolved(r)) => return Some(BrowserEvent::Resolved(r)),
                Ok(ServiceEvent::ServiceRemoved(_, fullname)) => {
                    return Some(BrowserEvent::Removed(fullname))
                }
                Ok(_) => continue,
                Err(_) => {
                    let now = Instant::now();
                    if self
                        .last_close
                        .is_some_and(|t| now.duration_since(t) >= REBROWSE_CALM)
                    {
                        self.backoff = REBROWSE_FIRST;
                    }
                    self.last_close = Some(now);
                    self.rebrowses += 1;
                    tracing::warn!(
                        "mdns-sd closed the browse channel ({} events waited: a flood, or a \
                         slow consumer); browsing again in {} ms (closed {} times so far)",
                        MDNS_SD_CHANNEL,
                        self.backoff.as_millis(),
                        self.rebrowses
                    );
                    self.resubscribe_at = Some(now + self.backoff);
                    self.backoff = (self.backoff * 2).min(REBROWSE_MAX);
                }
            }
        }
    }

    /// Stops the daemon (a browser sends no goodbyes; nothing waits).
    pub(crate) fn shutdown(self) {
        let _ = self.daemon.shutdown();
    }
}
