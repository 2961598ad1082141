//! **Following interfaces as they come and go** — the announcer's interface
//! selection as mdns-sd sees it ([`DefaultRule`], the default rule asked
//! again as interfaces change) and the link task that turns the daemon's
//! interface check on after a kernel notification and off once things
//! settle (see "Interfaces" in [`super`]).

use crate::links::LinkChanges;
use mdns_sd::ServiceDaemon;
use rlx_net::iface;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How old the default-rule interface list may be when the daemon asks about
/// an interface. The daemon asks once per address of every interface in one
/// pass, at most once a second: one `getifaddrs` per pass, not one per
/// address. A kernel notification makes the list stale at once.
const IFACE_SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(1);

/// The daemon's check interval, in seconds, while interfaces are changing:
/// its finest (the setting is in whole seconds; 0 turns the check off). The
/// first check comes this long after the kernel's notification.
pub const LINK_CHECK_SECS: u32 = 1;

/// How long the daemon keeps checking after the last notification before
/// its check is turned off again. Two and a half intervals: at least two
/// checks follow the last change, so one that ran while the kernel was still
/// applying it (a link up before its addresses, an IPv6 address still
/// tentative) is followed by one that sees the result. A link coming up
/// with DHCP gets its address seconds later; that address is a notification
/// of its own and starts this wait again.
pub const LINK_SETTLE: Duration = Duration::from_millis(2500);

/// The default interface rule as an mdns-sd predicate. The daemon calls it
/// from its own thread for every interface address on every IP check; it
/// answers from a snapshot of [`iface::default_interfaces`] at most
/// [`IFACE_SNAPSHOT_MAX_AGE`] old, and logs interfaces joining or leaving
/// the set.
pub(super) struct DefaultRule {
    /// When the list was taken (`None`: stale, take it again), and the names.
    snapshot: Mutex<(Option<Instant>, BTreeSet<String>)>,
}

impl DefaultRule {
    pub(super) fn new(initial: BTreeSet<String>) -> Self {
        DefaultRule {
            snapshot: Mutex::new((Some(Instant::now()), initial)),
        }
    }

    /// The kernel reported a change: the next question re-lists interfaces,
    /// however young the snapshot.
    pub(super) fn invalidate(&self) {
        lock(&self.snapshot).0 = None;
    }

    pub(super) fn allows(&self, name: &str) -> bool {
        let mut snap = lock(&self.snapshot);
        if snap.0.is_none_or(|t| t.elapsed() >= IFACE_SNAPSHOT_MAX_AGE) {
            match iface::default_interfaces() {
                Ok(list) => {
                    let now: BTreeSet<String> = list.into_iter().map(|i| i.name).collect();
                    for added in now.difference(&snap.1) {
                        info!(interface = %added, "mDNS: interface is up and now used");
                    }
                    for gone in snap.1.difference(&now) {
                        info!(interface = %gone, "mDNS: interface is down, gone or without an address; no longer used");
                    }
                    snap.1 = now;
                }
                Err(e) => warn!("mDNS: keeping the previous interface list: {e}"),
            }
            snap.0 = Some(Instant::now());
        }
        snap.1.contains(name)
    }
}

/// How the link task follows interfaces: kernel notifications, and whether
/// the daemon's check is on now.
pub(super) struct Links {
    changes: LinkChanges,
    /// The default rule's list, made stale by each notification (`None`
    /// with `--interface`: mdns-sd matches names itself).
    rule: Option<Arc<DefaultRule>>,
    /// While the daemon checks every [`LINK_CHECK_SECS`]: when to turn the
    /// check off.
    settle_at: Option<Instant>,
}

/// Subscribes to link and address notifications, and starts in the
/// "changing" state: the daemon checks a few times right away, which also
/// covers a change between the daemon's own first look and the
/// subscription. `None` when netlink is unavailable: the daemon keeps
/// polling every five seconds.
pub(super) fn subscribe_links(
    daemon: &ServiceDaemon,
    rule: Option<Arc<DefaultRule>>,
) -> Option<Links> {
    let changes = match LinkChanges::subscribe() {
        Ok(c) => c,
        Err(e) => {
            info!(
                "mDNS: following interfaces by polling every {} s (no kernel notifications: {e})",
                mdns_sd::IP_CHECK_INTERVAL_IN_SECS_DEFAULT
            );
            return None;
        }
    };
    if let Err(e) = daemon.set_ip_check_interval(LINK_CHECK_SECS) {
        warn!("mDNS: cannot set the interface check interval: {e}");
        return None;
    }
    Some(Links {
        changes,
        rule,
        settle_at: Some(Instant::now() + LINK_SETTLE),
    })
}

/// The link task: turns the daemon's interface check on when the kernel
/// reports a change and off once [`LINK_SETTLE`] has passed without
/// another. If the notifications fail, the daemon goes back to polling.
pub(super) async fn follow_links(daemon: ServiceDaemon, mut links: Links) {
    loop {
        let settle_at = links.settle_at;
        let settled = async {
            match settle_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = links.changes.next() => {
                if let Err(e) = changed {
                    warn!(
                        "mDNS: lost the kernel's interface notifications ({e}); \
                         polling every {} s instead",
                        mdns_sd::IP_CHECK_INTERVAL_IN_SECS_DEFAULT
                    );
                    let _ = daemon.set_ip_check_interval(mdns_sd::IP_CHECK_INTERVAL_IN_SECS_DEFAULT);
                    return;
                }
                if let Some(rule) = &links.rule {
                    rule.invalidate();
                }
                if links.settle_at.is_none() {
                    debug!("mDNS: the kernel reports an interface change; checking");
                    if let Err(e) = daemon.set_ip_check_interval(LINK_CHECK_SECS) {
                        warn!("mDNS: cannot start the interface check: {e}");
                    }
                }
                links.settle_at = Some(Instant::now() + LINK_SETTLE);
            }
            () = settled => {
                links.settle_at = None;
                if let Err(e) = daemon.set_ip_check_interval(0) {
                    warn!("mDNS: cannot stop the interface check: {e}");
                }
            }
        }
    }
}

/// Locks `m`, also after a panic elsewhere: the announcer's shared state is
/// plain data, still usable.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
