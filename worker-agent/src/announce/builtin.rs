//! **The built-in responder** — the vendored mdns-sd daemon, which probes,
//! announces, answers and says goodbye for the agent on the interfaces the
//! announcer chose, and follows them as they come and go ([`super::ifaces`]).
//! The default on Linux; see "Responders" in [`super`] for the other.

use super::ifaces::{follow_links, lock, subscribe_links, DefaultRule};
use super::options::{
    mdns_err, AnnounceError, AnnounceOptions, Registration, DAEMON_REPLY_TIMEOUT,
};
use mdns_sd::{DaemonEvent, DaemonStatus, IfKind, IfPredicate, ServiceDaemon, ServiceInfo};
use rlx_net::iface;
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How long to wait for mdns-sd's repeat of the goodbye packets, which it
/// schedules 120 ms after the first ones (`exec_command_unregister`).
const GOODBYE_REPEAT_TIMEOUT: Duration = Duration::from_millis(600);

/// How often to look at the daemon's counters while waiting for the repeat.
const GOODBYE_POLL: Duration = Duration::from_millis(20);

/// mdns-sd's counter of repeated goodbye packets (`Counter::UnregisterResend`).
const UNREGISTER_RESEND_METRIC: &str = "unregister-resend";

/// The announcement of `caps`. Re-registrations keep mdns-sd's probing
/// on (it applies the flag to the whole service, so turning it off would
/// leave an interface that comes up later unprobed). The vendored mdns-sd
/// treats a re-registration under the same name and host as an update
/// (RFC 6762 §8.4, `vendor/mdns-sd/PATCHES.md` section 13): the verified
/// records stay answered and the new TXT is announced at once, twice,
/// without probing; mdns-sd does not mistake its own earlier record for
/// a conflict (tested).
pub(super) fn service_info(
    base: &Registration,
    caps: &NodeCaps,
) -> Result<ServiceInfo, AnnounceError> {
    let pairs = txt::encode(caps)?;
    let info = ServiceInfo::new(
        rlx_proto::service::MDNS_SERVICE_TYPE,
        &base.instance,
        &base.host,
        (),
        base.port,
        &pairs[..],
    )
    .map_err(mdns_err(format!(
        "build the announcement of {:?}",
        base.instance
    )))?
    .enable_addr_auto();
    Ok(info)
}

/// The running daemon and the tasks that follow it.
pub(super) struct Builtin {
    daemon: ServiceDaemon,
    /// Logs what the daemon reports and keeps the announced names.
    events: tokio::task::JoinHandle<()>,
    /// The link task; `None` when the daemon polls instead.
    link_task: Option<tokio::task::JoinHandle<()>>,
    shut_down: bool,
}

impl Builtin {
    /// Starts the daemon on the chosen interfaces and registers `info`.
    pub(super) fn start(
        runtime: &tokio::runtime::Handle,
        opts: &AnnounceOptions,
        chosen: &[iface::Iface],
        info: ServiceInfo,
        base: &Registration,
        names: Arc<Mutex<(String, String)>>,
    ) -> Result<Builtin, AnnounceError> {
        let daemon = ServiceDaemon::new().map_err(mdns_err("start the daemon"))?;
        let (monitor, rule) = match configure(&daemon, opts, chosen, info, base) {
            Ok(configured) => configured,
            Err(e) => {
                // Do not leave the daemon's thread running behind an error.
                let _ = daemon.shutdown();
                return Err(e);
            }
        };
        let events = runtime.spawn(follow_events(monitor, names));
        let link_task = subscribe_links(&daemon, rule)
            .map(|links| runtime.spawn(follow_links(daemon.clone(), links)));
        Ok(Builtin {
            daemon,
            events,
            link_task,
            shut_down: false,
        })
    }

    /// The daemon, for re-registrations.
    pub(super) fn daemon(&self) -> ServiceDaemon {
        self.daemon.clone()
    }

    /// Unregisters `fullname` and stops the daemon, returning once the
    /// goodbye packets (TTL 0) and mdns-sd's repeat of them have been sent.
    pub(super) async fn shutdown(mut self, fullname: &str) -> Result<bool, AnnounceError> {
        self.shut_down = true;
        if let Some(t) = &self.link_task {
            t.abort();
        }
        let resends_before = self.goodbye_repeats().await;
        let status = self
            .daemon
            .unregister(fullname)
            .map_err(mdns_err(format!("unregister {fullname}")))?;
        match tokio::time::timeout(DAEMON_REPLY_TIMEOUT, status.recv_async()).await {
            Ok(Ok(mdns_sd::UnregisterStatus::OK)) => {}
            Ok(Ok(mdns_sd::UnregisterStatus::NotFound)) => {
                warn!(instance = %fullname, "mDNS: nothing to unregister");
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
        self.events.abort();
        Ok(repeated)
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

impl Drop for Builtin {
    /// Best effort when [`Builtin::shutdown`] was not called: stopping the
    /// daemon still sends one goodbye per interface (mdns-sd's cleanup), but
    /// nothing waits for it.
    fn drop(&mut self) {
        if !self.shut_down {
            self.events.abort();
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

/// Logs what the daemon reports (renames, socket errors, addresses coming
/// and going) and keeps the announced names current.
async fn follow_events(
    monitor: mdns_sd::Receiver<DaemonEvent>,
    names: Arc<Mutex<(String, String)>>,
) {
    while let Ok(event) = monitor.recv_async().await {
        on_event(&names, event);
    }
    debug!("mDNS: daemon stopped; its events end");
}

fn on_event(names: &Mutex<(String, String)>, event: DaemonEvent) {
    match event {
        DaemonEvent::NameChange(change) => {
            let mut names = lock(names);
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
