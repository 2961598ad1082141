//! **Announce this node as `_rlx._tcp` over mDNS, keep the announcement
//! true, and say goodbye** — the agent's side of discovery.
//!
//! ```no_run
//! # async fn demo(caps: rlx_proto::caps::NodeCaps) -> anyhow::Result<()> {
//! use rlx_agent::announce::{AnnounceOptions, Announcer};
//! use rlx_agent::shutdown::Shutdown;
//! use std::sync::Arc;
//! let stop = Shutdown::on_signals()?; // SIGINT/SIGTERM handlers, installed now
//! let (caps_tx, caps_rx) = tokio::sync::watch::channel(Arc::new(caps.clone()));
//! let announcer = Announcer::start(&caps, AnnounceOptions { port: 9100, ..Default::default() })?;
//! // ... serve the handshake, `caps_tx.send_replace(fresh_caps)` now and then ...
//! let sig = announcer.run(caps_rx, stop.wait()).await?;
//! // goodbye packets (TTL 0) are out when `run` returns
//! # let _ = (sig, caps_tx);
//! # Ok(()) }
//! ```
//!
//! What is announced (the contract is TXT schema v1, `docs/protocol.md`):
//! instance `<name>._rlx._tcp.local.` (the host name unless `--name`), SRV
//! port = the worker port, SRV target `<host>.local.`, TXT from
//! [`rlx_proto::txt::encode`], A/AAAA records = the addresses of the
//! selected interfaces only.
//!
//! # Interfaces
//!
//! By default every up, multicast-capable, non-virtual interface
//! ([`rlx_net::iface`]); `--interface` names them instead. Every other
//! interface is disabled on the daemon. Interfaces coming and going are
//! followed by mdns-sd itself: when its daemon checks, it re-lists the host's
//! interfaces, re-applies our selection, joins or leaves the multicast group,
//! and — because the service is registered with `enable_addr_auto` — adds or
//! withdraws its addresses and announces it on a new link. This module hands
//! mdns-sd a selection that stays correct as interfaces change (names for
//! `--interface`, a predicate backed by the default rule otherwise), and logs
//! the `IpAdd`/`IpDel` events the daemon reports. Calling `enable_interface`
//! again on every change would grow mdns-sd's selection list without bound;
//! it keeps every call.
//!
//! *When* the daemon checks is decided here. By itself mdns-sd checks every
//! [`mdns_sd::IP_CHECK_INTERVAL_IN_SECS_DEFAULT`] (5) seconds, forever: twelve
//! wake-ups a minute of an otherwise idle agent, and each one pulls the
//! daemon's code back into memory after [`crate::run::trim_resident_memory`].
//! Instead a small task listens for the kernel's link and address
//! notifications ([`crate::links`]) and turns the daemon's check on only
//! after one: every [`LINK_CHECK_SECS`] until [`LINK_SETTLE`] has passed
//! without another notification, then off again. So an idle agent is never
//! woken, and a change is acted on within about a second instead of five.
//! Where netlink is unavailable the daemon keeps its five-second poll.
//!
//! # Responders
//!
//! Who sends the packets is chosen per platform ([`Responder`]): on Linux
//! the built-in responder (`announce/builtin.rs`, the vendored mdns-sd), on macOS the
//! system's mDNSResponder through the DNS-SD client API (`announce/system.rs`), so
//! that a Mac has one responder on UDP 5353, not two. `responder =
//! "system"` asks for the system responder elsewhere too (avahi-daemon,
//! through avahi's `libdns_sd`), `"builtin"` for mdns-sd on a Mac. Where
//! the system responder cannot be reached, `auto` falls back to the
//! built-in one and says so. With the system responder, the host name, the
//! address records and following interfaces are the system's (see
//! `announce/system.rs`); everything else (the TXT record, the rate limit,
//! the goodbye) is the same for both.
//!
//! Note that `ServiceDaemon::new` joins the mDNS group on *every* interface
//! before any selection applies (see `../shared/NOTES-mdns-sd.md`), which is
//! why [`Announcer::start`] consults [`rlx_net::netguard`] first.
//!
//! # Keeping the TXT record true
//!
//! [`Announcer::update`] re-announces when the caps change materially
//! ([`crate::change::material_change`]: a device appears, vanishes or changes; free RAM moves
//! by a tenth of total RAM; free disk by a tenth of itself; and so on), at most
//! once per [`MIN_REANNOUNCE_INTERVAL`] (the [`crate::change`] rules). A change that arrives sooner is
//! announced when the interval ends, with the latest caps. Small drifts are
//! never announced: the handshake returns fresh caps anyway, and an idle agent
//! should put nothing on the network.
//!
//! # Name conflicts
//!
//! mdns-sd probes before announcing (RFC 6762 §8.1) and resolves a conflict by
//! renaming (`box (2)._rlx._tcp.local.`, host `box-2.local.`). It reports the
//! rename only as [`mdns_sd::DaemonEvent::NameChange`]; the watcher task logs
//! it at `warn` and [`Announcer::instance_name`] returns the new name.
//!
//! # Goodbye
//!
//! [`Announcer::shutdown`] unregisters (goodbye packets with TTL 0, RFC 6762
//! §10.1), waits until mdns-sd has also sent its one repeat of them, then
//! stops the daemon. Dropping the daemon instead would send nothing, and
//! browsers would keep a dead node for up to two minutes.
//!
//! # Timing
//!
//! What decides how soon a browser sees each change (the times measured in
//! the lab are in BENCHMARKS.md, "Agent footprint" and "`watch` under
//! churn"):
//!
//! - start: mdns-sd probes the names for 0.75 s (RFC 6762 §8.1), then
//!   announces with the full TXT record, on loopback and across a bridged
//!   LAN alike;
//! - SIGTERM or SIGINT: the first goodbye goes out at once, so a browser
//!   drops the node as soon as it hears it; the agent exits after mdns-sd's
//!   one repeat of it;
//! - [`Announcer::update`]: the new TXT is announced at once, not probed
//!   again (RFC 6762 §8.4, a change the vendored mdns-sd carries);
//! - an interface coming up or going down: the kernel's notification turns
//!   the daemon's interface check on ([`LINK_CHECK_SECS`] after it, instead
//!   of the daemon's own 5 s poll), so a new interface is announced after
//!   that check plus probing, and a removed address is withdrawn at that
//!   check;
//! - idle: nothing is sent while nobody queries, and nothing wakes the agent
//!   once the start-up checks are over.

use crate::change::Pacer;
use crate::naming::{check_instance_name, unique_host_label, NodeNames};
use crate::shutdown::StopSignal;
use mdns_sd::ServiceDaemon;
use rlx_net::iface;
use rlx_net::netguard;
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

mod builtin;
mod ifaces;
mod options;
mod system;

use options::{mdns_err, Registration};
pub use options::{AnnounceError, AnnounceOptions, Responder};

use ifaces::lock;
pub use ifaces::{LINK_CHECK_SECS, LINK_SETTLE};

/// The DNS-SD service type every agent announces (RFC 6763 §7.2: `rlx` is
/// well under the 15-character limit, which mdns-sd enforces).
pub use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;

/// The change rules' outcome and default interval, part of this module's
/// surface: [`Announcer::update`] returns an [`Update`], and
/// [`AnnounceOptions`] defaults to [`MIN_REANNOUNCE_INTERVAL`].
pub use crate::change::{Update, MIN_REANNOUNCE_INTERVAL};

/// Whether the system responder's client library opens here: its name,
/// or why not (for `rlx-agent check`).
pub fn system_library() -> Result<&'static str, String> {
    system::probe_library()
        .map(|()| system::LIBRARY)
        .map_err(|e| e.to_string())
}

/// State shared by the [`Announcer`] handle and its watcher task.
struct Shared {
    pacer: Mutex<Pacer>,
    /// Wakes the watcher when a deferred deadline appears or moves.
    wake: Notify,
    /// The instance's full name and host name as announced now (after any
    /// conflict renames), kept by the responder's event follower.
    names: Arc<Mutex<(String, String)>>,
    base: Registration,
}

/// The running responder.
enum Backend {
    Builtin(builtin::Builtin),
    System(system::System),
}

/// What the watcher re-announces through: a cheap clone of the backend's
/// handle.
#[derive(Clone)]
enum Publisher {
    Builtin(ServiceDaemon),
    System(system::Handle),
}

impl Publisher {
    /// Announces `caps` (checked to encode by the caller).
    fn publish(&self, base: &Registration, caps: &NodeCaps) -> Result<(), AnnounceError> {
        match self {
            Publisher::Builtin(daemon) => daemon
                .register(builtin::service_info(base, caps)?)
                .map_err(mdns_err(format!("re-register {:?}", base.instance))),
            Publisher::System(h) => h.update_txt(system::txt_rdata(&txt::encode(caps)?)?),
        }
    }
}

/// The running announcement. Create it with [`Announcer::start`] inside a
/// tokio runtime; end it with [`Announcer::shutdown`] (dropping it sends
/// goodbyes too, but without waiting for their repeat).
pub struct Announcer {
    backend: Option<Backend>,
    publisher: Publisher,
    fullname: String,
    shared: Arc<Shared>,
    watcher: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for Announcer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Announcer")
            .field("fullname", &self.fullname)
            .finish_non_exhaustive()
    }
}

impl Announcer {
    /// Starts the chosen responder ([`AnnounceOptions::responder`]) and
    /// registers `caps`. The service becomes visible after probing, about
    /// one second later.
    ///
    /// Errors: the netns guard refused; a named interface is missing or
    /// down; the caps do not encode as TXT; the instance name is unusable;
    /// the responder could not start; no tokio runtime.
    pub fn start(caps: &NodeCaps, opts: AnnounceOptions) -> Result<Announcer, AnnounceError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| AnnounceError::NoRuntime)?;
        let NodeNames { label, instance } = NodeNames::of(&caps.hostname, opts.name.as_deref());
        check_instance_name(&instance)?;
        // The mDNS host name is unique by construction (`<host>-<id>`), so
        // clones of one image never claim one `<host>.local.` and nothing
        // needs renaming (see docs/protocol.md, "Names").
        let label = unique_host_label(&label, &caps.id);
        let base = Registration {
            instance,
            host: format!("{label}.local."),
            port: opts.port,
        };
        // Validate everything before a responder hears of it: a refused
        // start must not have touched the network.
        let info = builtin::service_info(&base, caps)?;
        let txt = system::txt_rdata(&txt::encode(caps)?)?;
        let fullname = info.get_fullname().to_string();
        let chosen = iface::select(&opts.interfaces)?;
        // The system responder multicasts for us: the guard holds for it too.
        netguard::ensure_private_netns("mDNS announcements")?;

        let names = Arc::new(Mutex::new((fullname.clone(), base.host.clone())));
        let mut backend = None;
        if opts.responder.wants_system() {
            let spec = system::Spec {
                instance: &base.instance,
                service: SERVICE_TYPE.trim_end_matches(".local."),
                port: base.port,
                txt,
                interfaces: if opts.interfaces.is_empty() {
                    Vec::new()
                } else {
                    chosen.iter().map(|i| (i.name.clone(), i.index)).collect()
                },
            };
            match system::System::start(spec, names.clone()) {
                Ok(s) => {
                    // The system responder names the host: say so, not ours.
                    lock(&names).1 = String::from("(the system's host name)");
                    backend = Some(Backend::System(s));
                }
                Err(e) if opts.responder == Responder::Auto => {
                    warn!("{e}; announcing with the built-in responder instead");
                }
                Err(e) => return Err(e),
            }
        }
        let backend = match backend {
            Some(b) => b,
            None => Backend::Builtin(builtin::Builtin::start(
                &runtime,
                &opts,
                &chosen,
                info,
                &base,
                names.clone(),
            )?),
        };
        let publisher = match &backend {
            Backend::Builtin(b) => Publisher::Builtin(b.daemon()),
            Backend::System(s) => Publisher::System(s.handle()),
        };
        let shared = Arc::new(Shared {
            pacer: Mutex::new(Pacer::new(caps.clone(), Instant::now(), opts.min_interval)),
            wake: Notify::new(),
            names,
            base,
        });
        let watcher = runtime.spawn(announce_deferred(publisher.clone(), shared.clone()));
        Ok(Announcer {
            backend: Some(backend),
            publisher,
            fullname,
            shared,
            watcher,
        })
    }

    /// Which responder is announcing: [`Responder::Builtin`] or
    /// [`Responder::System`] (never `Auto`).
    pub fn responder(&self) -> Responder {
        match &self.publisher {
            Publisher::Builtin(_) => Responder::Builtin,
            Publisher::System(_) => Responder::System,
        }
    }

    /// Offers fresh caps. Re-announces now if they differ materially from
    /// the announced ones ([`crate::change::material_change`]) and the last announcement is
    /// at least the minimum interval old; defers a material change that
    /// comes sooner; ignores the rest. An error (caps that do not encode)
    /// leaves the current announcement in place.
    ///
    /// The changed TXT record goes out at once (announced twice, RFC 6762
    /// §8.4), and the service stays answered throughout: neither responder
    /// probes an update again.
    pub fn update(&self, caps: &NodeCaps) -> Result<Update, AnnounceError> {
        // Refuse caps that cannot be announced before they can be scheduled.
        system::txt_rdata(&txt::encode(caps)?)?;
        builtin::service_info(&self.shared.base, caps)?;
        let outcome = lock(&self.shared.pacer).offer(caps, Instant::now());
        match &outcome {
            Update::Announced(reason) => {
                info!(instance = %self.instance_name(), "mDNS: re-announcing: {reason}");
                self.publisher.publish(&self.shared.base, caps)?;
            }
            Update::Deferred { reason, at } => {
                debug!(
                    "mDNS: re-announcing in {:?} (rate limit): {reason}",
                    at.saturating_duration_since(Instant::now())
                );
                self.shared.wake.notify_one();
            }
            Update::Unchanged => {}
        }
        Ok(outcome)
    }

    /// Keeps the announcement current until `shutdown` resolves, then says
    /// goodbye: shutdown is an argument, as in mini-redis's `server::run`.
    /// Every caps that `caps` receives is offered to [`Announcer::update`];
    /// when `shutdown` resolves, [`Announcer::shutdown`] sends the goodbye
    /// packets and this returns what stopped it once they are out.
    pub async fn run(
        self,
        mut caps: watch::Receiver<Arc<NodeCaps>>,
        shutdown: impl Future<Output = StopSignal>,
    ) -> Result<StopSignal, AnnounceError> {
        tokio::pin!(shutdown);
        let sig = loop {
            tokio::select! {
                // A stop request wins over caps that arrive with it.
                biased;
                sig = &mut shutdown => break sig,
                changed = caps.changed() => {
                    if changed.is_err() {
                        // The sender is gone: run mode is ending; wait for stop.
                        break (&mut shutdown).await;
                    }
                    let fresh = caps.borrow_and_update().clone();
                    match self.update(&fresh) {
                        Ok(Update::Announced(why)) => info!("re-announced: {why}"),
                        Ok(Update::Deferred { reason, .. }) => {
                            debug!("change deferred by the rate limit: {reason}")
                        }
                        Ok(Update::Unchanged) => {}
                        Err(e) => warn!("could not re-announce: {e:#}"),
                    }
                }
            }
        };
        info!("{sig}: saying goodbye");
        self.shutdown().await?;
        Ok(sig)
    }

    /// The full instance name registered (`box._rlx._tcp.local.`), before
    /// any conflict rename.
    pub fn fullname(&self) -> &str {
        &self.fullname
    }

    /// What tells the built-in responder that an address proved it
    /// receives what is sent to it (a peer of the handshake server,
    /// [`crate::proved`]): its QU questions may then get unicast answers
    /// bigger than they are (vendor/mdns-sd/PATCHES.md §36). `None` with
    /// the system responder, which has no such rule.
    pub fn source_prover(&self) -> Option<impl Fn(std::net::IpAddr) + Send + Sync + 'static> {
        match &self.publisher {
            Publisher::Builtin(daemon) => {
                let daemon = daemon.clone();
                Some(move |ip| {
                    if let Err(e) = daemon.prove_source(ip) {
                        tracing::debug!(%ip, error = %e, "could not tell mDNS that {ip} is proved");
                    }
                })
            }
            Publisher::System(_) => None,
        }
    }

    /// The full instance name as announced now: differs from
    /// [`Announcer::fullname`] after a conflict rename (`box (2)._rlx...`).
    pub fn instance_name(&self) -> String {
        lock(&self.shared.names).0.clone()
    }

    /// The host name as announced now (`box-5f0c1d.local.`, or
    /// `box-5f0c1d-2.local.` after a conflict); with the system responder,
    /// which names the host itself, `(the system's host name)`.
    pub fn host_name(&self) -> String {
        lock(&self.shared.names).1.clone()
    }

    /// Withdraws the service, returning once the goodbye packets (TTL 0)
    /// are out (with the built-in responder, also mdns-sd's repeat of
    /// them), so browsers drop this node within about a second.
    pub async fn shutdown(mut self) -> Result<(), AnnounceError> {
        // No deferred re-announcement may sneak in after the goodbye.
        self.watcher.abort();
        let started = Instant::now();
        let repeated = match self.backend.take() {
            Some(Backend::Builtin(b)) => b.shutdown(&self.fullname).await?,
            Some(Backend::System(s)) => {
                s.shutdown().await?;
                true
            }
            None => return Ok(()),
        };
        info!(
            instance = %self.instance_name(),
            repeated,
            "mDNS: goodbye sent in {:?}",
            started.elapsed()
        );
        Ok(())
    }
}

impl Drop for Announcer {
    /// Best effort when [`Announcer::shutdown`] was not called: the backend
    /// still says goodbye as it stops, but nothing waits for it.
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// The watcher task: announces changes the rate limit deferred, when due.
async fn announce_deferred(publisher: Publisher, shared: Arc<Shared>) {
    loop {
        let deadline = lock(&shared.pacer).deadline();
        let due = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shared.wake.notified() => {}
            () = due => {
                let caps = lock(&shared.pacer).due(Instant::now());
                if let Some(caps) = caps {
                    info!("mDNS: re-announcing changed caps (deferred by the rate limit)");
                    if let Err(e) = publisher.publish(&shared.base, &caps) {
                        warn!("mDNS: cannot re-announce: {e}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_outside_a_tokio_runtime_is_an_error_not_a_panic() {
        let err = Announcer::start(&crate::change::tests::caps(), AnnounceOptions::default())
            .unwrap_err();
        assert!(matches!(err, AnnounceError::NoRuntime), "{err}");
    }
}
