//! **What a browse is asked to do, and why it could not start** — the
//! options of a one-shot or continuous browse and the error of a browse
//! that found nothing to browse with.

use crate::config::DiscoverSection;
use crate::sighting::OnSighting;
use rlx_net::iface::IfaceError;
use rlx_net::netguard::GuardError;
use std::time::{Duration, Instant};

/// When another source (unicast DNS-SD) has answered, and with how many
/// sightings: a browse that hears nothing at all may then stop at its
/// early point instead of listening its whole window (see "When it stops
/// early" in [`super`]'s docs). `None` until it answers.
pub(crate) type AnsweredElsewhere = tokio::sync::watch::Receiver<Option<(Instant, usize)>>;

/// Which addresses a continuous browse lets through to admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum DialPolicy {
    /// Every complete instance, wherever its address is.
    #[default]
    Any,
    /// Only addresses on the subnet of a browsed interface, or the real
    /// source of a packet that announced the instance.
    OnLinkOrSource,
}

/// What a one-shot browse does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrowseOptions {
    /// Interfaces to browse on; empty means the default rule
    /// ([`iface::select`](rlx_net::iface::select)).
    pub interfaces: Vec<String>,
    /// The most it listens (`browse_ms`).
    pub browse: Duration,
    /// Stop before `browse` ends when the network is clearly lossless (see
    /// docs/protocol.md, "Conformance to RFC 6762"). `false` always listens the whole window.
    pub early_stop: bool,
    /// Told of each instance as soon as it is resolved (and again if its
    /// address or port changes), before the browse ends.
    pub(crate) on_resolved: Option<OnSighting>,
    /// Which announced addresses become sightings; the others are refused
    /// with the reason (`[discover] dial_off_link`).
    pub(crate) dial: DialPolicy,
    /// Told when `dns_sd` has answered: see [`AnsweredElsewhere`].
    pub(crate) elsewhere: Option<AnsweredElsewhere>,
}

impl Default for BrowseOptions {
    fn default() -> Self {
        BrowseOptions {
            interfaces: Vec::new(),
            browse: Duration::from_millis(crate::config::DEFAULT_BROWSE_MS),
            early_stop: true,
            on_resolved: None,
            dial: DialPolicy::Any,
            elsewhere: None,
        }
    }
}

impl BrowseOptions {
    /// The browse `[discover]` asks for: with a cluster key, only
    /// on-link addresses and addresses that announced themselves are
    /// dialled, unless `dial_off_link`.
    pub fn from_section(d: &DiscoverSection) -> Self {
        BrowseOptions {
            interfaces: d.interfaces.clone(),
            browse: Duration::from_millis(d.browse_ms),
            early_stop: d.early_stop,
            on_resolved: None,
            dial: if d.key_file.is_some() && !d.dial_off_link {
                DialPolicy::OnLinkOrSource
            } else {
                DialPolicy::Any
            },
            elsewhere: None,
        }
    }
}

/// Why a browse could not run at all (per-node failures are [`Problem`](crate::sighting::Problem)s).
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
