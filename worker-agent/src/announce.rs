//! **Announce this node as `_rlx._tcp` over mDNS, keep the announcement
//! true, and say goodbye** — the agent's side of discovery.
//!
//! ```no_run
//! # async fn demo(caps: rlx_proto::caps::NodeCaps) -> anyhow::Result<()> {
//! use rlx_agent::announce::{AnnounceOptions, Announcer, Shutdown};
//! let stop = Shutdown::on_signals()?; // SIGINT/SIGTERM handlers, installed now
//! let announcer = Announcer::start(&caps, AnnounceOptions { port: 9100, ..Default::default() })?;
//! // ... serve the handshake, call `announcer.update(&fresh_caps)` now and then ...
//! stop.wait().await;
//! announcer.shutdown().await?; // goodbye packets (TTL 0) are out when this returns
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
//! ([`material_change`]: a device appears, vanishes or changes; free RAM moves
//! by a tenth of total RAM; free disk by a tenth of itself; and so on), at most
//! once per [`MIN_REANNOUNCE_INTERVAL`]. A change that arrives sooner is
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
//! # Measured (lab namespaces, python-zeroconf 0.47 as the browser)
//!
//! - start to seen with the full TXT record: 0.78-0.98 s (mdns-sd probes for
//!   0.75 s first), on loopback and across a bridged LAN alike;
//! - SIGTERM or SIGINT to removed at the browser: 1-3 ms (the first goodbye);
//!   the agent exits about 130 ms after the signal (the repeated goodbye);
//! - `update` to the new TXT at the browser: 0.76-0.98 s (the changed record is
//!   probed again, see [`Announcer::update`]);
//! - an interface coming up: announced there 5.8-5.9 s later with the
//!   daemon's 5 s poll (its check plus probing); going down: address
//!   withdrawn 4.1-4.2 s later. Woken by the kernel's notification instead:
//!   announced there 1.77-1.82 s later (the check 1 s after the
//!   notification plus probing); address withdrawn 0.17-0.24 s later (the
//!   link went down while the checks that followed it coming up were still
//!   running; from idle, within the 1 s to the first check);
//! - idle: 0 packets in a minute with nobody querying (7 at start, 3 for the
//!   goodbye), and no wake-ups once the start-up checks are over.

use crate::links::LinkChanges;
use mdns_sd::{DaemonEvent, DaemonStatus, IfKind, IfPredicate, ServiceDaemon, ServiceInfo};
use rlx_net::iface::{self, IfaceError};
use rlx_net::netguard::{self, GuardError};
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt::{self, TxtError};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

/// The DNS-SD service type every agent announces (RFC 6763 §7.2: `rlx` is
/// well under the 15-character limit, which mdns-sd enforces).
pub use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;

/// Shortest time between two announcements of changed caps. Each one costs
/// about five packets (three probes of the changed TXT record, two
/// announcements one second apart, RFC 6762 §8.3), so a box whose free RAM
/// swings all day puts at most ~10 packets a minute on the LAN, and none when
/// nothing changes. Coordinators that need exact numbers get them from the
/// handshake, so a 30 s lag in TXT costs nothing but a stale `browse` column.
pub const MIN_REANNOUNCE_INTERVAL: Duration = Duration::from_secs(30);

/// Free RAM must move by this percentage of total RAM to be re-announced:
/// about the size of one model shard on a small box; smaller swings are page
/// cache and allocator noise.
pub const RAM_FREE_THRESHOLD_PERCENT: u64 = 10;

/// ... and by at least this many bytes, so that a 4 GB board does not
/// re-announce for every 400 MB of page cache.
pub const RAM_FREE_THRESHOLD_MIN_BYTES: u64 = 512 << 20;

/// Free disk under the checkpoint dir must move by this percentage of the
/// last announced value: checkpoints arrive and leave in gigabytes, log files
/// in megabytes.
pub const DISK_FREE_THRESHOLD_PERCENT: u64 = 10;

/// ... and by at least this many bytes (1 GiB).
pub const DISK_FREE_THRESHOLD_MIN_BYTES: u64 = 1 << 30;

/// A measured rate (CPU GFLOP/s, checkpoint MB/s) must change by this factor,
/// or go from unknown (0) to known or back, to be re-announced. Re-measuring
/// on a loaded box swings the result by 10-30%; a factor of 1.5 is a real
/// change (a new CPU governor, a different disk).
pub const MEASUREMENT_CHANGE_FACTOR: f64 = 1.5;

/// RFC 6763 §4.1.1: an instance name is at most 63 bytes of UTF-8.
pub const MAX_INSTANCE_NAME_BYTES: usize = 63;

/// RFC 1035 §2.3.4: a DNS label (the `<host>` of `<host>.local.`) is at most
/// 63 bytes.
const MAX_LABEL_BYTES: usize = 63;

/// How long to wait for the daemon to confirm an unregister or a shutdown.
/// It answers within milliseconds; two seconds means its thread is stuck.
const DAEMON_REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// How long to wait for mdns-sd's repeat of the goodbye packets, which it
/// schedules 120 ms after the first ones (`exec_command_unregister`).
const GOODBYE_REPEAT_TIMEOUT: Duration = Duration::from_millis(600);

/// How often to look at the daemon's counters while waiting for the repeat.
const GOODBYE_POLL: Duration = Duration::from_millis(20);

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

/// mdns-sd's counter of repeated goodbye packets (`Counter::UnregisterResend`).
const UNREGISTER_RESEND_METRIC: &str = "unregister-resend";

/// How the node is announced. `Default` gives port [`crate::cli::DEFAULT_PORT`], the host name as
/// instance name, the default interface rule and [`MIN_REANNOUNCE_INTERVAL`].
#[derive(Debug, Clone)]
pub struct AnnounceOptions {
    /// Instance name; `None` = the host name's first label.
    pub name: Option<String>,
    /// The worker (handshake) port, announced in the SRV record.
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
            port: crate::cli::DEFAULT_PORT,
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
    #[error("instance name {name:?} {why}; choose another with --name")]
    Name {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        why: String,
    },
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

/// What [`Announcer::update`] did with new caps.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// Not a material change: the TXT record stays as it is.
    Unchanged,
    /// Re-announced now, for this reason (see [`material_change`]).
    Announced(String),
    /// A material change, announced at `at` (the rate limit): the latest
    /// caps offered by then are the ones announced.
    Deferred {
        /// Why the caps changed materially.
        reason: String,
        /// When they will be announced.
        at: Instant,
    },
}

// ------------------------------------------------------------ change rule

/// Why `new` should be re-announced over `old`, or `None` when the
/// difference is not material. The rule, in the order checked:
///
/// 1. the device list differs in a device's label, name, memory, `unified` or
///    `available` (a device appeared, vanished or changed; device GFLOP/s are
///    measurements and follow rule 5);
/// 2. a descriptive field differs: `id`, `hostname`, `os`, `arch`, `version`,
///    `cluster`, `ckpt_dir`, `cores`, `ram_total`;
/// 3. free RAM moved by at least [`RAM_FREE_THRESHOLD_PERCENT`] of total RAM
///    and [`RAM_FREE_THRESHOLD_MIN_BYTES`];
/// 4. free disk moved by at least [`DISK_FREE_THRESHOLD_PERCENT`] of the old
///    value and [`DISK_FREE_THRESHOLD_MIN_BYTES`];
/// 5. CPU GFLOP/s or checkpoint MB/s went from unknown (0) to known or back,
///    or changed by [`MEASUREMENT_CHANGE_FACTOR`].
///
/// `addr` is not announced in TXT and is ignored.
pub fn material_change(old: &NodeCaps, new: &NodeCaps) -> Option<String> {
    if let Some(why) = device_change(old, new) {
        return Some(why);
    }
    macro_rules! same {
        ($($field:ident),*) => {$(
            if old.$field != new.$field {
                return Some(format!(
                    "`{}` changed from {:?} to {:?}",
                    stringify!($field), old.$field, new.$field
                ));
            }
        )*};
    }
    same!(id, hostname, os, arch, version, cluster, ckpt_dir, cores, ram_total);

    let ram_threshold =
        (new.ram_total / 100 * RAM_FREE_THRESHOLD_PERCENT).max(RAM_FREE_THRESHOLD_MIN_BYTES);
    if old.ram_avail.abs_diff(new.ram_avail) >= ram_threshold {
        return Some(format!(
            "free RAM moved from {} to {} (threshold {})",
            gib(old.ram_avail),
            gib(new.ram_avail),
            gib(ram_threshold)
        ));
    }
    let disk_threshold =
        (old.disk_free / 100 * DISK_FREE_THRESHOLD_PERCENT).max(DISK_FREE_THRESHOLD_MIN_BYTES);
    if old.disk_free.abs_diff(new.disk_free) >= disk_threshold {
        return Some(format!(
            "free disk moved from {} to {} (threshold {})",
            gib(old.disk_free),
            gib(new.disk_free),
            gib(disk_threshold)
        ));
    }
    for (what, a, b) in [
        ("CPU GFLOP/s", old.gflops, new.gflops),
        ("checkpoint MB/s", old.io_mbps, new.io_mbps),
    ] {
        if measurement_changed(a, b) {
            return Some(format!("{what} changed from {a} to {b}"));
        }
    }
    None
}

/// The part of a device that rule 1 of [`material_change`] compares.
type DeviceKey<'a> = (&'a str, &'a str, u64, bool, bool);

fn device_keys(caps: &NodeCaps) -> Vec<DeviceKey<'_>> {
    let mut keys: Vec<DeviceKey<'_>> = caps
        .devices
        .iter()
        .map(|d| {
            (
                d.device.as_str(),
                d.name.as_str(),
                d.mem_bytes,
                d.unified,
                d.available,
            )
        })
        .collect();
    keys.sort();
    keys
}

fn device_change(old: &NodeCaps, new: &NodeCaps) -> Option<String> {
    let (a, b) = (device_keys(old), device_keys(new));
    if a == b {
        return None;
    }
    let describe = |(label, name, mem, _, avail): &DeviceKey<'_>| {
        let avail = if *avail { "" } else { ", unavailable" };
        format!("{label} {name:?} ({}{avail})", gib(*mem))
    };
    if let Some(gone) = a.iter().find(|k| !b.contains(k)) {
        let appeared = b.iter().find(|k| !a.contains(k));
        return Some(match appeared {
            Some(new) => format!("device {} became {}", describe(gone), describe(new)),
            None => format!("device {} vanished", describe(gone)),
        });
    }
    match b.iter().find(|k| !a.contains(k)) {
        Some(new) => Some(format!("device {} appeared", describe(new))),
        // Same set, different multiplicity: one more or one less of a kind.
        None => Some(format!(
            "device count changed from {} to {}",
            a.len(),
            b.len()
        )),
    }
}

fn measurement_changed(a: f64, b: f64) -> bool {
    let known = |v: f64| v.is_finite() && v > 0.0;
    match (known(a), known(b)) {
        (false, false) => false,
        (true, true) => a.max(b) / a.min(b) >= MEASUREMENT_CHANGE_FACTOR,
        _ => true,
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

// ------------------------------------------------------------- rate limit

/// The re-announcement rate limit, apart from the network so that it can be
/// tested with made-up clocks.
#[derive(Debug, Clone)]
struct Pacer {
    /// What the TXT record says now.
    announced: NodeCaps,
    /// When it was last (re-)registered.
    last: Instant,
    /// A material change waiting for the interval to end.
    pending: Option<NodeCaps>,
    min_interval: Duration,
}

impl Pacer {
    fn new(announced: NodeCaps, now: Instant, min_interval: Duration) -> Self {
        Pacer {
            announced,
            last: now,
            pending: None,
            min_interval,
        }
    }

    /// Offers new caps at `now`. On [`Update::Announced`] the caller
    /// registers `caps` at once.
    fn offer(&mut self, caps: &NodeCaps, now: Instant) -> Update {
        let Some(reason) = material_change(&self.announced, caps) else {
            // Back within the thresholds of what is announced: whatever was
            // pending is no longer worth a packet.
            self.pending = None;
            return Update::Unchanged;
        };
        let at = self.last + self.min_interval;
        if now >= at {
            self.announced = caps.clone();
            self.last = now;
            self.pending = None;
            Update::Announced(reason)
        } else {
            self.pending = Some(caps.clone());
            Update::Deferred { reason, at }
        }
    }

    /// When a pending change falls due.
    fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|_| self.last + self.min_interval)
    }

    /// The pending caps, if their time has come; they become the announced
    /// ones.
    fn due(&mut self, now: Instant) -> Option<NodeCaps> {
        if self.deadline().is_some_and(|at| now >= at) {
            let caps = self.pending.take()?;
            self.announced = caps.clone();
            self.last = now;
            Some(caps)
        } else {
            None
        }
    }
}

// --------------------------------------------------------------- names

/// The `<host>` of `<host>.local.`: the first label of the host name, with
/// anything but letters, digits and `-` turned into `-` (RFC 1123 §2.1 host
/// names), cut to 63 bytes. `rlx-agent` when nothing is left.
pub fn host_label(hostname: &str) -> String {
    let first = hostname.split('.').next().unwrap_or_default();
    let mut label: String = first
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    label.truncate(MAX_LABEL_BYTES);
    let label = label.trim_matches('-');
    if label.is_empty() {
        "rlx-agent".to_string()
    } else {
        label.to_string()
    }
}

/// Checks an instance name against RFC 6763 §4.1.1: 1 to 63 bytes of UTF-8,
/// no control characters.
pub fn check_instance_name(name: &str) -> Result<(), AnnounceError> {
    let why = if name.is_empty() {
        Some("is empty".to_string())
    } else if name.len() > MAX_INSTANCE_NAME_BYTES {
        Some(format!(
            "is {} bytes long; RFC 6763 §4.1.1 allows {MAX_INSTANCE_NAME_BYTES}",
            name.len()
        ))
    } else if name.chars().any(char::is_control) {
        Some("contains a control character".to_string())
    } else {
        None
    };
    match why {
        Some(why) => Err(AnnounceError::Name {
            name: name.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

fn this_host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

// ------------------------------------------------------------ interfaces

/// The default interface rule as an mdns-sd predicate. The daemon calls it
/// from its own thread for every interface address on every IP check; it
/// answers from a snapshot of [`iface::default_interfaces`] at most
/// [`IFACE_SNAPSHOT_MAX_AGE`] old, and logs interfaces joining or leaving
/// the set.
struct DefaultRule {
    /// When the list was taken (`None`: stale, take it again), and the names.
    snapshot: Mutex<(Option<Instant>, BTreeSet<String>)>,
}

impl DefaultRule {
    fn new(initial: BTreeSet<String>) -> Self {
        DefaultRule {
            snapshot: Mutex::new((Some(Instant::now()), initial)),
        }
    }

    /// The kernel reported a change: the next question re-lists interfaces,
    /// however young the snapshot.
    fn invalidate(&self) {
        lock(&self.snapshot).0 = None;
    }

    fn allows(&self, name: &str) -> bool {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data, still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ------------------------------------------------------------- announcer

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
    /// on: RFC 6762 §8.4 would let an update skip it, but mdns-sd applies
    /// the flag to the whole service, so an interface that comes up later
    /// would then get records that were never probed there and a conflict on
    /// that link would go unnoticed. Probing the changed TXT record costs
    /// 0.75 s of latency (measured: new TXT at python-zeroconf 0.76-0.98 s
    /// after `update`) and three small packets, once per
    /// [`MIN_REANNOUNCE_INTERVAL`] at most; mdns-sd does not mistake its own
    /// earlier record for a conflict (tested).
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
        let raw_host = if caps.hostname.is_empty() {
            this_host_name()
        } else {
            caps.hostname.clone()
        };
        let label = host_label(&raw_host);
        let instance = match &opts.name {
            Some(name) => name.clone(),
            None => {
                let first = raw_host.split('.').next().unwrap_or_default();
                if first.is_empty() {
                    label.clone()
                } else {
                    first.to_string()
                }
            }
        };
        check_instance_name(&instance)?;
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
    /// the announced ones ([`material_change`]) and the last announcement is
    /// at least the minimum interval old; defers a material change that
    /// comes sooner; ignores the rest. An error (caps that do not encode)
    /// leaves the current announcement in place.
    ///
    /// The changed TXT record is probed again before it goes out (about
    /// 0.75 s): mdns-sd can only turn probing off for a whole service, which
    /// would leave links that come up later unprobed.
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

/// How the link task follows interfaces: kernel notifications, and whether
/// the daemon's check is on now.
struct Links {
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
fn subscribe_links(daemon: &ServiceDaemon, rule: Option<Arc<DefaultRule>>) -> Option<Links> {
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
async fn follow_links(daemon: ServiceDaemon, mut links: Links) {
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

// ---------------------------------------------------------------- signals

/// What asked the agent to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`systemctl stop`, `kill`).
    Terminate,
    /// [`Shutdown::trigger`] from inside the program.
    Requested,
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Requested => "a stop request",
        })
    }
}

/// A stop request that every part of run mode can wait on: the handshake
/// server and the announcer each get a clone (take shutdown as an argument,
/// as mini-redis does). The first trigger wins and stays.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<Option<StopSignal>>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A stop request that only [`Shutdown::trigger`] fires (tests).
    pub fn new() -> Self {
        Shutdown {
            tx: Arc::new(watch::channel(None).0),
        }
    }

    /// A stop request fired by SIGINT or SIGTERM. The handlers are installed
    /// by this call, not when [`Shutdown::wait`] is first awaited, so create
    /// it before anything else: a SIGTERM that arrives earlier would kill the
    /// process without goodbyes. Must be called within a tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(std::io::Error::other(
                "Shutdown::on_signals must be called from within a tokio runtime",
            ));
        }
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let this = Shutdown::new();
        let tx = this.tx.clone();
        tokio::spawn(async move {
            let sig = tokio::select! {
                _ = int.recv() => StopSignal::Interrupt,
                _ = term.recv() => StopSignal::Terminate,
            };
            info!("{sig} received: sending mDNS goodbyes and exiting");
            tx.send_if_modified(|s| s.is_none() && s.replace(sig).is_none());
        });
        Ok(this)
    }

    /// Fires the stop request (no-op if it already fired).
    pub fn trigger(&self) {
        self.tx
            .send_if_modified(|s| s.is_none() && s.replace(StopSignal::Requested).is_none());
    }

    /// What fired, if anything has.
    pub fn fired(&self) -> Option<StopSignal> {
        *self.tx.borrow()
    }

    /// Resolves when the stop request fires (at once if it already has).
    pub async fn wait(&self) -> StopSignal {
        let mut rx = self.tx.subscribe();
        let fired = match rx.wait_for(Option::is_some).await {
            Ok(v) => *v,
            // The sender lives in `self`, so it cannot be dropped here.
            Err(_) => None,
        };
        fired.unwrap_or(StopSignal::Requested)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::caps::DeviceInfo;

    const GIB: u64 = 1 << 30;

    fn caps() -> NodeCaps {
        NodeCaps {
            id: "5f0c1d2e3a4b5c6d".into(),
            hostname: "gpu-a".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            version: "0.1.0".into(),
            cores: 16,
            ram_total: 64 * GIB,
            ram_avail: 48 * GIB,
            disk_free: 500 * GIB,
            devices: vec![gpu("NVIDIA GeForce RTX 4090", 24 * GIB)],
            gflops: 400.0,
            io_mbps: 1800.0,
            ..NodeCaps::default()
        }
    }

    fn gpu(name: &str, mem: u64) -> DeviceInfo {
        DeviceInfo {
            device: "cuda".into(),
            name: name.into(),
            mem_bytes: mem,
            unified: false,
            gflops: 80_000.0,
            available: true,
        }
    }

    #[test]
    fn identical_caps_are_not_a_material_change() {
        assert_eq!(material_change(&caps(), &caps()), None);
    }

    #[test]
    fn a_device_appearing_or_vanishing_is_material() {
        let mut more = caps();
        more.devices.push(gpu("NVIDIA GeForce RTX 4090", 24 * GIB));
        let why = material_change(&caps(), &more).expect("a second GPU is material");
        assert!(why.contains("count") || why.contains("appeared"), "{why}");

        let mut fewer = caps();
        fewer.devices.clear();
        let why = material_change(&caps(), &fewer).expect("a vanished GPU is material");
        assert!(why.contains("vanished"), "{why}");

        let mut other = caps();
        other.devices.push(DeviceInfo {
            device: "rocm".into(),
            ..gpu("AMD Radeon PRO W7900", 48 * GIB)
        });
        let why = material_change(&caps(), &other).expect("a new device is material");
        assert!(why.contains("appeared") && why.contains("rocm"), "{why}");
    }

    #[test]
    fn a_device_becoming_unavailable_is_material_but_its_gflops_are_not() {
        let mut off = caps();
        off.devices[0].available = false;
        assert!(material_change(&caps(), &off).is_some());

        let mut faster = caps();
        faster.devices[0].gflops *= 3.0;
        assert_eq!(material_change(&caps(), &faster), None);
    }

    #[test]
    fn free_ram_must_move_by_a_tenth_of_total_ram() {
        let mut small = caps();
        small.ram_avail -= 6 * GIB; // 64 GiB total: threshold 6.4 GiB
        assert_eq!(material_change(&caps(), &small), None);
        let mut big = caps();
        big.ram_avail -= 7 * GIB;
        let why = material_change(&caps(), &big).expect("7 GiB of 64 is material");
        assert!(why.contains("free RAM"), "{why}");
    }

    #[test]
    fn on_a_small_box_free_ram_must_move_by_at_least_the_minimum() {
        let mut a = caps();
        a.ram_total = 2 * GIB; // a tenth is 205 MiB, under the 512 MiB floor
        a.ram_avail = GIB;
        let mut b = a.clone();
        b.ram_avail = GIB - (300 << 20);
        assert_eq!(material_change(&a, &b), None);
        b.ram_avail = GIB - (600 << 20);
        assert!(material_change(&a, &b).is_some());
    }

    #[test]
    fn free_disk_must_move_by_a_tenth_of_itself_and_a_gibibyte() {
        let mut a = caps();
        a.disk_free = 5 * GIB;
        let mut b = a.clone();
        b.disk_free = 5 * GIB - GIB / 2; // a tenth, but under 1 GiB
        assert_eq!(material_change(&a, &b), None);
        b.disk_free = 3 * GIB;
        assert!(material_change(&a, &b).unwrap().contains("free disk"));
        let mut big = caps();
        big.disk_free += 40 * GIB; // 8% of 500 GiB
        assert_eq!(material_change(&caps(), &big), None);
    }

    #[test]
    fn measurements_matter_when_they_appear_or_change_by_half() {
        let mut unknown = caps();
        unknown.gflops = 0.0;
        assert!(material_change(&unknown, &caps()).is_some());
        let mut noisy = caps();
        noisy.gflops = 440.0;
        assert_eq!(material_change(&caps(), &noisy), None);
        noisy.io_mbps = 900.0;
        assert!(material_change(&caps(), &noisy)
            .unwrap()
            .contains("checkpoint"));
    }

    #[test]
    fn descriptive_fields_are_always_material_and_addr_never() {
        let mut c = caps();
        c.cluster = Some("lab".into());
        assert!(material_change(&caps(), &c).unwrap().contains("cluster"));
        let mut a = caps();
        a.addr = "10.0.0.1:9100".into();
        assert_eq!(material_change(&caps(), &a), None);
    }

    fn ram_drop(gib_less: u64) -> NodeCaps {
        let mut c = caps();
        c.ram_avail -= gib_less * GIB;
        c
    }

    #[test]
    fn a_material_change_after_the_interval_is_announced_at_once() {
        let t0 = Instant::now();
        let mut p = Pacer::new(caps(), t0, Duration::from_secs(30));
        let later = t0 + Duration::from_secs(31);
        assert!(matches!(
            p.offer(&ram_drop(10), later),
            Update::Announced(_)
        ));
        assert_eq!(p.announced, ram_drop(10));
        assert_eq!(p.deadline(), None);
    }

    #[test]
    fn a_material_change_within_the_interval_waits_and_the_latest_caps_win() {
        let t0 = Instant::now();
        let mut p = Pacer::new(caps(), t0, Duration::from_secs(30));
        let at = t0 + Duration::from_secs(30);
        assert_eq!(
            p.offer(&ram_drop(10), t0 + Duration::from_secs(1)),
            Update::Deferred {
                reason: material_change(&caps(), &ram_drop(10)).unwrap(),
                at
            }
        );
        assert!(matches!(
            p.offer(&ram_drop(20), t0 + Duration::from_secs(2)),
            Update::Deferred { .. }
        ));
        assert_eq!(p.due(t0 + Duration::from_secs(29)), None, "not yet due");
        assert_eq!(
            p.due(at),
            Some(ram_drop(20)),
            "the latest caps are announced"
        );
        assert_eq!(p.due(at + Duration::from_secs(1)), None, "only once");
        // The next change waits a full interval from that announcement.
        assert!(matches!(
            p.offer(&caps(), at + Duration::from_secs(5)),
            Update::Deferred { at: next, .. } if next == at + Duration::from_secs(30)
        ));
    }

    #[test]
    fn a_pending_change_that_reverts_is_dropped() {
        let t0 = Instant::now();
        let mut p = Pacer::new(caps(), t0, Duration::from_secs(30));
        assert!(matches!(
            p.offer(&ram_drop(10), t0 + Duration::from_secs(1)),
            Update::Deferred { .. }
        ));
        assert_eq!(
            p.offer(&ram_drop(1), t0 + Duration::from_secs(2)),
            Update::Unchanged
        );
        assert_eq!(p.deadline(), None);
        assert_eq!(p.due(t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn host_labels_are_the_first_dns_label_made_safe() {
        assert_eq!(host_label("gpu-a.lab.example.com"), "gpu-a");
        assert_eq!(host_label("my box_1"), "my-box-1");
        assert_eq!(host_label(""), "rlx-agent");
        assert_eq!(host_label("---"), "rlx-agent");
        assert_eq!(host_label(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn instance_names_follow_rfc_6763_limits() {
        assert!(check_instance_name("gpu box (rack 3)").is_ok());
        assert!(check_instance_name(&"é".repeat(31)).is_ok()); // 62 bytes
        let long = check_instance_name(&"x".repeat(64))
            .unwrap_err()
            .to_string();
        assert!(
            long.contains("64 bytes") && long.contains("--name"),
            "{long}"
        );
        assert!(check_instance_name("").is_err());
        assert!(check_instance_name("a\nb").is_err());
    }

    #[tokio::test]
    async fn a_shutdown_fires_once_and_every_waiter_sees_the_first_cause() {
        let s = Shutdown::new();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.wait().await })
        };
        assert_eq!(s.fired(), None);
        s.trigger();
        s.trigger();
        assert_eq!(waiter.await.unwrap(), StopSignal::Requested);
        assert_eq!(s.clone().wait().await, StopSignal::Requested);
    }

    #[test]
    fn start_outside_a_tokio_runtime_is_an_error_not_a_panic() {
        let err = Announcer::start(&caps(), AnnounceOptions::default()).unwrap_err();
        assert!(matches!(err, AnnounceError::NoRuntime), "{err}");
    }
}
