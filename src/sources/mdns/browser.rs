//! **Standard mDNS browsing through mdns-sd** — the multicast path of a
//! one-shot browse and the event source of a continuous `watch`, restricted
//! to the chosen interfaces and kept alive when mdns-sd drops its channel.

use super::options::MdnsError;
use mdns_sd::{IfKind, ResolvedService, ServiceDaemon, ServiceEvent};
use rlx_net::iface::Iface;
use rlx_net::netguard;
use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;

/// How often [`MdnsBrowser`] re-subscribes after mdns-sd closed its event
/// channel (it does so silently when the consumer falls 1000 events behind)
/// before giving up on the multicast path.
const MAX_REBROWSE: u32 = 8;

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
