//! **A watch from `[discover]`** — the one constructor a runtime needs to
//! follow the cluster's membership: the continuous mDNS browse, the DNS-SD
//! zone, the admission rules and the dial policy that a `[discover]`
//! stanza means, with the same secure defaults as `rlx-discover watch`.
//!
//! ```no_run
//! use rlx_discover::{DiscoverSection, Kind, LiveWatch, WatchOptions};
//! # async fn demo(d: DiscoverSection) -> anyhow::Result<()> {
//! let watch = LiveWatch::start(&d, WatchOptions::default())?;
//! let stop = tokio::signal::ctrl_c();
//! watch
//!     .run(async { let _ = stop.await; }, |e| {
//!         if e.event == Kind::Left {
//!             println!("re-plan without {}", e.instance);
//!         }
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The defaults, and the one way to lift each:
//! - **With a cluster key, only on-link addresses are dialled**: an
//!   announcement naming an address off the browsed interfaces' subnets,
//!   which its sender does not hold itself, is refused
//!   ([`DialPolicy::OnLinkOrSource`], docs/security.md), so a stranger
//!   cannot make the coordinator dial addresses of its choosing. The same
//!   rule holds for `expand` and `browse`. A routed network between
//!   coordinator and agents lifts it with `[discover] dial_off_link = true`
//!   (for every entry point) or [`WatchOptions::dial_off_link`].
//! - The admission rules are `[discover]`'s ([`Rules::from_section`]): its
//!   key, its cluster filter, its timeout.
//! - mDNS is browsed unless `mdns = false` with a `dns_sd` zone to poll
//!   instead; the zone is polled every [`crate::watch::DNS_POLL_INTERVAL`].

use crate::admit::{Rules, RulesError};
use crate::config::{ClusterConfig, DiscoverSection};
use crate::pipeline::NodeDefaults;
use crate::sources::dns::DnsSdOptions;
use crate::sources::mdns::{BrowseOptions, ContinuousBrowse, DialPolicy, MdnsError};
use crate::watch::{
    DnsZone, Event, InFile, Streams, Watch, WatchError, WatchTuning, SUSPECT_TIMEOUT,
};
use roster::Roster;
use std::future::Future;
use std::time::Instant;

/// What an embedding may change of [`LiveWatch::start`]'s defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WatchOptions {
    /// With a cluster key, also dial announced addresses off the browsed
    /// interfaces' subnets that their announcer does not hold (a routed
    /// network between coordinator and agents). Off by default: see the
    /// module doc.
    pub dial_off_link: bool,
    /// How long a member may stay `suspect` (its host answering, its agent
    /// silent: loading a checkpoint, swapping, stopped) before it is
    /// reported `left`: [`LiveWatch::SUSPECT_TIMEOUT`] (two minutes) by
    /// default. A runtime that would rather re-plan sooner than wait for a
    /// busy box sets a shorter one; a confirmed death (a refused port, a
    /// reset stream, a vanished host) is `left` at once whatever this is.
    pub suspect_timeout: std::time::Duration,
    /// How many nodes the cluster has, usually its file's `[[node]]`
    /// count: when more than half of the larger of this and the members
    /// seen go dark together, `watch` reports one `partitioned` event and
    /// holds them instead of a `left` for each. 0 (the default) counts the
    /// members seen only.
    pub cluster_size: usize,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            dial_off_link: false,
            suspect_timeout: SUSPECT_TIMEOUT,
            cluster_size: 0,
        }
    }
}

impl WatchOptions {
    /// The defaults with [`WatchOptions::dial_off_link`] set to `yes`.
    pub fn dial_off_link(mut self, yes: bool) -> Self {
        self.dial_off_link = yes;
        self
    }

    /// These options with [`WatchOptions::suspect_timeout`] set.
    pub fn suspect_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.suspect_timeout = timeout;
        self
    }

    /// These options with [`WatchOptions::cluster_size`] set.
    pub fn cluster_size(mut self, nodes: usize) -> Self {
        self.cluster_size = nodes;
        self
    }
}

/// Why a watch could not start. Each says which part and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The key file of `[discover]` cannot be used.
    #[error(transparent)]
    Rules(#[from] RulesError),
    /// The mDNS browse cannot start (the namespace guard, no interface, no
    /// socket).
    #[error(transparent)]
    Mdns(#[from] MdnsError),
    /// `dns_sd` names a domain or server that cannot be used.
    #[error("[discover] dns_sd: {0}")]
    DnsSd(String),
}

mod roster;

/// A watch ready to run: its inputs built from `[discover]`.
pub struct LiveWatch {
    engine: Watch<Rules, Streams>,
    browse: Option<ContinuousBrowse>,
    zone: Option<DnsZone>,
    /// Keyed: a member's id proves who it is only with the cluster key.
    keyed: bool,
    /// The cluster file's nodes, with [`LiveWatch::with_file`].
    roster: Option<Roster>,
}

impl LiveWatch {
    /// The longest interval between two health checks of a member whose
    /// agent does not tell its facts on its liveness stream (each is drawn
    /// up to 0.7 s shorter): such a member's changes are seen at its next
    /// check, and without a stream its crash too.
    pub const HEALTH_INTERVAL: std::time::Duration = crate::watch::health::HEALTH_INTERVAL;

    /// The longest interval between two health checks of a member whose
    /// stream tells its facts: a change of them is checked at once, so
    /// this is only a net.
    pub const FACTS_INTERVAL: std::time::Duration = crate::watch::health::FACTS_INTERVAL;

    /// How often a DNS-SD zone is browsed again.
    pub const DNS_POLL_INTERVAL: std::time::Duration = crate::watch::DNS_POLL_INTERVAL;

    /// The default suspicion timeout ([`WatchOptions::suspect_timeout`]).
    pub const SUSPECT_TIMEOUT: std::time::Duration = SUSPECT_TIMEOUT;

    /// Builds the watch `d` asks for, starting its browse now (so call it
    /// inside a tokio runtime); events begin when [`LiveWatch::run`] does.
    pub fn start(d: &DiscoverSection, opts: WatchOptions) -> Result<LiveWatch, StartError> {
        let started = Instant::now();
        let mut rules = Rules::from_section(d)?;
        let keyed = rules.keys.is_some();
        // Admissions finish one by one here: a new pin waits to be sure
        // no second key claims its id (crate::admit::hold).
        rules.pin_hold = Some(Default::default());
        let browse = if d.mdns || d.dns_sd.is_none() {
            // The dial policy `[discover]` asks for (on-link only with a
            // key), which the embedding may lift.
            let mut bo = BrowseOptions::from_section(d);
            if opts.dial_off_link {
                bo.dial = DialPolicy::Any;
            }
            Some(ContinuousBrowse::start(&bo, started)?)
        } else {
            None
        };
        let zone = match &d.dns_sd {
            Some(s) => Some(DnsZone {
                opts: DnsSdOptions::from_section(s, d.browse_ms).map_err(StartError::DnsSd)?,
                started,
            }),
            None => None,
        };
        Ok(LiveWatch {
            engine: Watch::new(
                (
                    rules.clone(),
                    Streams {
                        rules,
                        poller: Default::default(),
                    },
                ),
                NodeDefaults::from(d),
                WatchTuning {
                    suspect_timeout: opts.suspect_timeout,
                    cluster_size: opts.cluster_size,
                },
                started.into(),
            ),
            browse,
            zone,
            keyed,
            roster: None,
        })
    }

    /// This watch, saying in each event which `[[node]]` of `cfg` the
    /// member is ([`Event::in_file`]), by the identity rule `expand` uses:
    /// the node id its comments name when the member proves it, else its
    /// address. Give it the file the `[discover]` came from (or any file
    /// listing the cluster's nodes). When
    /// [`WatchOptions::cluster_size`] was left at 0, the file's node count
    /// is the cluster's size for partitions.
    pub fn with_file(mut self, cfg: &ClusterConfig) -> LiveWatch {
        self.engine.size_unless_set(cfg.nodes.len());
        self.roster = Some(Roster::new(cfg, self.keyed));
        self
    }

    /// The file's nodes ([`LiveWatch::with_file`]) as they stand before
    /// the first event: all down. Empty without a file.
    pub fn file_nodes(&self) -> Vec<InFile> {
        self.roster.as_ref().map(Roster::listed).unwrap_or_default()
    }

    /// [`LiveWatch::start`], waiting while no interface is up to browse
    /// on: a coordinator booting before its network, a laptop undocked.
    /// `waiting` is called once, with the interfaces that exist, when the
    /// wait begins (for a log line); the list is read again every
    /// [`LiveWatch::INTERFACE_POLL`], as `rlx-agent` waits for its first
    /// interface. Every other error, and an interface named in
    /// `[discover] interfaces` that is missing or down, is returned at
    /// once: that is a mistake to fix, not a network still coming up.
    pub async fn start_when_up(
        d: &DiscoverSection,
        opts: WatchOptions,
        waiting: impl FnOnce(&str),
    ) -> Result<LiveWatch, StartError> {
        let mut waiting = Some(waiting);
        loop {
            match LiveWatch::start(d, opts.clone()) {
                Err(StartError::Mdns(MdnsError::NoInterface { available })) => {
                    if let Some(say) = waiting.take() {
                        say(&available);
                    }
                    tokio::time::sleep(Self::INTERFACE_POLL).await;
                }
                other => return other,
            }
        }
    }

    /// How often [`LiveWatch::start_when_up`] looks for an interface
    /// again: the list is one `getifaddrs` call, and a watch that starts
    /// within a second of the link coming up misses no agent (they
    /// announce for seconds, and answer the browse's queries).
    pub const INTERFACE_POLL: std::time::Duration = std::time::Duration::from_secs(1);

    /// The interfaces the mDNS browse listens on (empty without one).
    pub fn interfaces(&self) -> Vec<String> {
        self.browse
            .as_ref()
            .map(ContinuousBrowse::interfaces)
            .unwrap_or_default()
    }

    /// The DNS-SD domain polled, if any.
    pub fn zone(&self) -> Option<String> {
        self.zone.as_ref().map(|z| z.opts.domain.to_string())
    }

    /// Runs until `stop` completes, handing each event to `emit` in order
    /// (the stream's grammar is in the crate docs of `watch`: per instance
    /// `joined`, then changes, then `left`); the browse is shut down at the end.
    pub async fn run(
        mut self,
        stop: impl Future<Output = ()>,
        mut emit: impl FnMut(Event),
    ) -> Result<(), WatchError> {
        let mut roster = self.roster.take();
        let placed = |mut e: Event| {
            if let Some(r) = roster.as_mut() {
                e.in_file = r.apply(&e);
            }
            emit(e)
        };
        let ran = self
            .engine
            .run(self.browse.as_mut(), self.zone.as_mut(), stop, placed)
            .await;
        if let Some(b) = self.browse {
            b.shutdown();
        }
        ran
    }
}
