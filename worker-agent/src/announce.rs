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
use crate::naming::{check_instance_name, unique_host_label, NameError, NodeNames};
use crate::shutdown::StopSignal;
use mdns_sd::{DaemonEvent, DaemonStatus, IfKind, IfPredicate, ServiceDaemon, ServiceInfo};
use rlx_net::iface::{self, IfaceError};
use rlx_net::netguard::{self, GuardError};
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt::{self, TxtError};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

mod ifaces;

use ifaces::{follow_links, lock, subscribe_links, DefaultRule};
pub use ifaces::{LINK_CHECK_SECS, LINK_SETTLE};

/// The DNS-SD service type every agent announces (RFC 6763 §7.2: `rlx` is
/// well under the 15-character limit, which mdns-sd enforces).
pub use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;

/// The change rules' outcome and default interval, part of this module's
/// surface: [`Announcer::update`] returns an [`Update`], and
/// [`AnnounceOptions`] defaults to [`MIN_REANNOUNCE_INTERVAL`].
pub use crate::change::{Update, MIN_REANNOUNCE_INTERVAL};

/// How long to wait for the daemon to confirm an unregister or a shutdown.
/// It answers within milliseconds; two seconds means its thread is stuck.
const DAEMON_REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// How long to wait for mdns-sd's repeat of the goodbye packets, which it
/// schedules 120 ms after the first ones (`exec_command_unregister`).
const GOODBYE_REPEAT_TIMEOUT: Duration = Duration::from_millis(600);

/// How often to look at the daemon's counters while waiting for the repeat.
const GOODBYE_POLL: Duration = Duration::from_millis(20);

/// mdns-sd's counter of repeated goodbye packets (`Counter::UnregisterResend`).
const UNREGISTER_RESEND_METRIC: &str = "unregister-resend";

/// How the node is announced. `Default` gives port
/// [`rlx_proto::service::DEFAULT_WORKER_PORT`], the host name as instance
/// name, the default interface rule and [`MIN_REANNOUNCE_INTERVAL`].
#[derive(Debug, Clone)]
pub struct AnnounceOptions {
    /// Instance name; `None` = the host name's first label.
    pub name: Option<String>,
    /// The worker port, announced in the SRV record (RFC 6763 §5: where the
    /// service is). The agent's own port rides in TXT
    /// ([`rlx_proto::txt::AGENT_PORT_KEY`]), from the caps.
    pub port: u16,
    /// Interfaces to announce on; empty = the default rule.
    pub interfaces: Vec<String>,
    /// Shortest time between re-announcements of changed caps.
    pub min_interval: Duration,
}

impl Default for AnnounceOptions {
    fn default() -> Self {
        AnnounceOptions {
            name: None,
            port: rlx_proto::service::DEFAULT_WORKER_PORT,
            interfaces: Vec::new(),
            min_interval: MIN_REANNOUNCE_INTERVAL,
        }
    }
}

/// Why announcing failed. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    /// The network-namespace guard refused (tests only, `RLX_NETNS_GUARD=1`).
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// A named interface does not exist or is down, or none could be listed.
    #[error("cannot choose interfaces for mDNS: {0}")]
    Interfaces(#[from] IfaceError),
    /// The caps cannot be written as TXT schema v1.
    #[error("cannot announce these caps: {0}")]
    Txt(#[from] TxtError),
    /// The instance name is not usable.
    #[error(transparent)]
    Name(#[from] NameError),
    /// mdns-sd refused or failed an operation.
    #[error("mDNS: cannot {what}: {source}")]
    Mdns {
        /// What was being done (`start the daemon`, `register ...`).
        what: String,
        /// mdns-sd's error.
        source: mdns_sd::Error,
    },
    /// The daemon did not answer in time.
    #[error("mDNS: the daemon did not confirm {what} within {DAEMON_REPLY_TIMEOUT:?}; goodbye packets may not have been sent")]
    Timeout {
        /// What was waited for.
        what: &'static str,
    },
    /// [`Announcer::start`] was called outside a tokio runtime.
    #[error("Announcer::start must be called from within a tokio runtime (it spawns the task that watches the mDNS daemon)")]
    NoRuntime,
}

fn mdns_err(what: impl Into<String>) -> impl FnOnce(mdns_sd::Error) -> AnnounceError {
    let what = what.into();
    move |source| AnnounceError::Mdns { what, source }
}

/// State shared by the [`Announcer`] handle and its watcher task.
struct Shared {
    pacer: Mutex<Pacer>,
    /// Wakes the watcher when a deferred deadline appears or moves.
    wake: Notify,
    /// The instance's full name and host name as announced now (after any
    /// conflict renames).
    names: Mutex<(String, String)>,
    base: Registration,
}

/// What stays the same across re-registrations.
#[derive(Debug, Clone)]
struct Registration {
    instance: String,
    host: String,
    port: u16,
}

impl Registration {
    /// The announcement of `caps`. Re-registrations keep mdns-sd's probing
    /// on (it applies the flag to the whole service, so turning it off would
    /// leave an interface that comes up later unprobed). The vendored mdns-sd
    /// treats a re-registration under the same name and host as an update
    /// (RFC 6762 §8.4, `vendor/mdns-sd/PATCHES.md` section 13): the verified
    /// records stay answered and the new TXT is announced at once, twice,
    /// without probing; mdns-sd does not mistake its own earlier record for
    /// a conflict (tested).
    fn service_info(&self, caps: &NodeCaps) -> Result<ServiceInfo, AnnounceError> {
        let pairs = txt::encode(caps)?;
        let info = ServiceInfo::new(
            SERVICE_TYPE,
            &self.instance,
            &self.host,
            (),
            self.port,
            &pairs[..],
        )
        .map_err(mdns_err(format!(
            "build the announcement of {:?}",
            self.instance
        )))?
        .enable_addr_auto();
        Ok(info)
    }
}

/// The running announcement. Create it with [`Announcer::start`] inside a
/// tokio runtime; end it with [`Announcer::shutdown`] (dropping it sends
/// goodbyes too, but without waiting for their repeat).
pub struct Announcer {
    daemon: ServiceDaemon,
    fullname: String,
    shared: Arc<Shared>,
    watcher: tokio::task::JoinHandle<()>,
    /// The link task; `None` when the daemon polls instead.
    link_task: Option<tokio::task::JoinHandle<()>>,
    shut_down: bool,
}

impl fmt::Debug for Announcer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Announcer")
            .field("fullname", &self.fullname)
            .finish_non_exhaustive()
    }
}

impl Announcer {
    /// Starts the mDNS daemon on the chosen interfaces and registers
    /// `caps`. The service becomes visible after mdns-sd's probing, about
    /// one second later.
    ///
    /// Errors: the netns guard refused; a named interface is missing or
    /// down; the caps do not encode as TXT; the instance name is unusable;
    /// the daemon could not start; no tokio runtime.
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
        // Validate everything before the daemon exists: a refused start must
        // not have touched the network.
        let info = base.service_info(caps)?;
        let fullname = info.get_fullname().to_string();
        let chosen = iface::select(&opts.interfaces)?;
        netguard::ensure_private_netns("mDNS announcements")?;

        let daemon = ServiceDaemon::new().map_err(mdns_err("start the daemon"))?;
        let (monitor, rule) = match configure(&daemon, &opts, &chosen, info, &base) {
            Ok(configured) => configured,
            Err(e) => {
                // Do not leave the daemon's thread running behind an error.
                let _ = daemon.shutdown();
                return Err(e);
            }
        };

        let shared = Arc::new(Shared {
            pacer: Mutex::new(Pacer::new(caps.clone(), Instant::now(), opts.min_interval)),
            wake: Notify::new(),
            names: Mutex::new((fullname.clone(), base.host.clone())),
            base,
        });
        let watcher = runtime.spawn(watch_daemon(daemon.clone(), monitor, shared.clone()));
        let link_task = subscribe_links(&daemon, rule)
            .map(|links| runtime.spawn(follow_links(daemon.clone(), links)));
        Ok(Announcer {
            daemon,
            fullname,
            shared,
            watcher,
            link_task,
            shut_down: false,
        })
    }

    /// Offers fresh caps. Re-announces now if they differ materially from
    /// the announced ones ([`crate::change::material_change`]) and the last announcement is
    /// at least the minimum interval old; defers a material change that
    /// comes sooner; ignores the rest. An error (caps that do not encode)
    /// leaves the current announcement in place.
    ///
    /// The changed TXT record goes out at once (announced twice, RFC 6762
    /// §8.4), and the service stays answered throughout: the vendored
    /// mdns-sd does not probe an update again.
    pub fn update(&self, caps: &NodeCaps) -> Result<Update, AnnounceError> {
        // Refuse caps that cannot be announced before they can be scheduled.
        let info = self.shared.base.service_info(caps)?;
        let outcome = lock(&self.shared.pacer).offer(caps, Instant::now());
        match &outcome {
            Update::Announced(reason) => {
                info!(instance = %self.instance_name(), "mDNS: re-announcing: {reason}");
                self.daemon
                    .register(info)
                    .map_err(mdns_err(format!("re-register {}", self.fullname)))?;
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

    /// The full instance name as announced now: differs from
    /// [`Announcer::fullname`] after a conflict rename (`box (2)._rlx...`).
    pub fn instance_name(&self) -> String {
        lock(&self.shared.names).0.clone()
    }

    /// The host name as announced now (`box.local.`, or `box-2.local.` after
    /// a conflict).
    pub fn host_name(&self) -> String {
        lock(&self.shared.names).1.clone()
    }

    /// Unregisters the service and stops the daemon, returning once the
    /// goodbye packets (TTL 0) and mdns-sd's repeat of them have been sent,
    /// so browsers drop this node within about a second.
    pub async fn shutdown(mut self) -> Result<(), AnnounceError> {
        self.shut_down = true;
        // No deferred re-announcement may sneak in after the goodbye.
        self.watcher.abort();
        if let Some(t) = &self.link_task {
            t.abort();
        }
        let started = Instant::now();
        let resends_before = self.goodbye_repeats().await;
        let status = self
            .daemon
            .unregister(&self.fullname)
            .map_err(mdns_err(format!("unregister {}", self.fullname)))?;
        match tokio::time::timeout(DAEMON_REPLY_TIMEOUT, status.recv_async()).await {
            Ok(Ok(mdns_sd::UnregisterStatus::OK)) => {}
            Ok(Ok(mdns_sd::UnregisterStatus::NotFound)) => {
                warn!(instance = %self.fullname, "mDNS: nothing to unregister");
            }
            Ok(Err(_)) | Err(_) => return Err(AnnounceError::Timeout { what: "unregister" }),
        }
        // mdns-sd repeats the goodbye once, 120 ms later, and forgets the
        // repeat if the daemon stops first: wait for its counter to move.
        // (Nothing is repeated when no interface had an address; then this
        // waits out GOODBYE_REPEAT_TIMEOUT.)
        let deadline = Instant::now() + GOODBYE_REPEAT_TIMEOUT;
        let mut repeated = false;
        while Instant::now() < deadline {
            if self.goodbye_repeats().await > resends_before {
                repeated = true;
                break;
            }
            tokio::time::sleep(GOODBYE_POLL).await;
        }
        let status = self
            .daemon
            .shutdown()
            .map_err(mdns_err("shut the daemon down"))?;
        match tokio::time::timeout(DAEMON_REPLY_TIMEOUT, status.recv_async()).await {
            Ok(Ok(DaemonStatus::Shutdown)) => {}
            Ok(Ok(other)) => debug!("mDNS: daemon status after shutdown: {other:?}"),
            Ok(Err(_)) | Err(_) => return Err(AnnounceError::Timeout { what: "shutdown" }),
        }
        info!(
            instance = %self.instance_name(),
            repeated,
            "mDNS: goodbye sent in {:?}",
            started.elapsed()
        );
        Ok(())
    }

    /// mdns-sd's count of repeated goodbye packets, 0 if unknown.
    async fn goodbye_repeats(&self) -> i64 {
        let Ok(rx) = self.daemon.get_metrics() else {
            return 0;
        };
        match tokio::time::timeout(DAEMON_REPLY_TIMEOUT, rx.recv_async()).await {
            Ok(Ok(m)) => m.get(UNREGISTER_RESEND_METRIC).copied().unwrap_or(0),
            _ => 0,
        }
    }
}

impl Drop for Announcer {
    /// Best effort when [`Announcer::shutdown`] was not called: stopping the
    /// daemon still sends one goodbye per interface (mdns-sd's cleanup), but
    /// nothing waits for it.
    fn drop(&mut self) {
        if !self.shut_down {
            self.watcher.abort();
            if let Some(t) = &self.link_task {
                t.abort();
            }
            let _ = self.daemon.shutdown();
        }
    }
}

/// Applies the interface selection, subscribes to the daemon's events and
/// registers the service (the part of [`Announcer::start`] that talks to a
/// running daemon).
fn configure(
    daemon: &ServiceDaemon,
    opts: &AnnounceOptions,
    chosen: &[iface::Iface],
    info: ServiceInfo,
    base: &Registration,
) -> Result<(mdns_sd::Receiver<DaemonEvent>, Option<Arc<DefaultRule>>), AnnounceError> {
    let fullname = info.get_fullname().to_string();
    daemon
        .disable_interface(IfKind::All)
        .map_err(mdns_err("disable interfaces"))?;
    let names: Vec<String> = chosen.iter().map(|i| i.name.clone()).collect();
    let rule = if !opts.interfaces.is_empty() {
        let kinds: Vec<IfKind> = names.iter().map(|n| IfKind::Name(n.clone())).collect();
        daemon
            .enable_interface(kinds)
            .map_err(mdns_err(format!("enable interfaces {names:?}")))?;
        None
    } else {
        let rule = Arc::new(DefaultRule::new(names.iter().cloned().collect()));
        let asked = rule.clone();
        daemon
            .enable_interface(IfKind::Predicate(IfPredicate::new(move |intf| {
                asked.allows(&intf.name)
            })))
            .map_err(mdns_err("enable the default interfaces"))?;
        Some(rule)
    };
    if chosen.is_empty() {
        let all = iface::all_interfaces()
            .map(|a| iface::describe(&a))
            .unwrap_or_default();
        warn!(
            "mDNS: no interface to announce on yet (none is up, multicast-capable and \
             non-virtual; present: {all}); announcing as soon as one comes up. \
             Use --interface NAME to choose one (--interface lo to test on one host)"
        );
    } else {
        info!("mDNS: announcing on {}", iface::describe(chosen));
    }
    // Subscribed after the selection is applied, so that the IpDel/IpAdd
    // churn of the selection itself is not reported as interfaces coming
    // and going.
    let monitor = daemon.monitor().map_err(mdns_err("monitor the daemon"))?;
    daemon
        .register(info)
        .map_err(mdns_err(format!("register {fullname}")))?;
    info!(
        instance = %fullname,
        host = %base.host,
        port = opts.port,
        "mDNS: registered; probing for conflicts, then announcing"
    );
    Ok((monitor, rule))
}

/// The watcher task: logs what the daemon reports (renames, socket errors,
/// addresses coming and going) and announces deferred changes when due.
async fn watch_daemon(
    daemon: ServiceDaemon,
    monitor: mdns_sd::Receiver<DaemonEvent>,
    shared: Arc<Shared>,
) {
    loop {
        let deadline = lock(&shared.pacer).deadline();
        let due = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = monitor.recv_async() => match event {
                Ok(event) => on_event(&shared, event),
                Err(_) => {
                    debug!("mDNS: daemon stopped; watcher ends");
                    return;
                }
            },
            () = shared.wake.notified() => {}
            () = due => {
                let caps = lock(&shared.pacer).due(Instant::now());
                if let Some(caps) = caps {
                    match shared.base.service_info(&caps) {
                        Ok(info) => {
                            info!("mDNS: re-announcing changed caps (deferred by the rate limit)");
                            if let Err(e) = daemon.register(info) {
                                warn!("mDNS: cannot re-announce: {e}");
                            }
                        }
                        Err(e) => warn!("mDNS: cannot re-announce: {e}"),
                    }
                }
            }
        }
    }
}

fn on_event(shared: &Shared, event: DaemonEvent) {
    match event {
        DaemonEvent::NameChange(change) => {
            let mut names = lock(&shared.names);
            let (what, slot) = if change.rr_type == mdns_sd::RRType::SRV
                || change.rr_type == mdns_sd::RRType::TXT
            {
                ("instance name", &mut names.0)
            } else {
                ("host name", &mut names.1)
            };
            // mdns-sd reports one event per renamed record (SRV and TXT, A
            // and AAAA) and per interface: say it once.
            if *slot == change.new_name {
                debug!(interface = %change.intf_name, "mDNS: {what} rename repeated: {}", change.new_name);
                return;
            }
            *slot = change.new_name.clone();
            warn!(
                interface = %change.intf_name,
                "mDNS name conflict: {what} {} is already taken on the network; \
                 announcing as {} (RFC 6762 §9). Give each agent a distinct --name to avoid this",
                change.original,
                change.new_name
            );
        }
        DaemonEvent::Error(e) => warn!("mDNS daemon error: {e}"),
        DaemonEvent::IpAdd(ip) => info!(%ip, "mDNS: announcing on a new address"),
        DaemonEvent::IpDel(ip) => info!(%ip, "mDNS: address gone; no longer announced"),
        DaemonEvent::Announce(name, on) => info!(%name, "mDNS: announced on {on}"),
        other => debug!("mDNS: {other:?}"),
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
