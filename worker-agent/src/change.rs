//! **When changed caps are worth a packet** — the change rules of the
//! agent: [`material_change`] decides whether new caps differ enough from the
//! announced ones to be announced again, and the pacer (`Pacer`) spaces those
//! announcements at least [`MIN_REANNOUNCE_INTERVAL`] apart. The mDNS
//! announcer ([`crate::announce`]) follows both; the DNS registration
//! ([`crate::register`]) re-registers at once on a material change, so a
//! coordinator sees the same changes whichever way it discovers the node.
//!
//! Nothing here touches the network: the pacer takes the clock as an
//! argument, so its tests run with made-up instants.

use rlx_proto::caps::NodeCaps;
use std::time::{Duration, Instant};

/// Shortest time between two announcements of changed caps. Each one costs
/// two packets (two announcements one second apart, RFC 6762 §8.3, §8.4: an
/// update is not probed again), so a box whose free RAM
/// swings all day puts at most ~4 packets a minute on the LAN, and none when
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

/// What [`crate::announce::Announcer::update`] (through the pacer)
/// did with new caps.
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
///    `cluster`, `ckpt_dir`, `cores`, `ram_total`, the two ports, whether
///    the worker listens, and whether (and on which port) an SSH server
///    does;
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
    same!(
        id,
        hostname,
        os,
        arch,
        version,
        cluster,
        ckpt_dir,
        cores,
        ram_total,
        worker_port,
        agent_port,
        worker_listening,
        ssh_listening,
        ssh_port
    );

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
pub(crate) struct Pacer {
    /// What the TXT record says now.
    announced: NodeCaps,
    /// When it was last (re-)registered.
    last: Instant,
    /// A material change waiting for the interval to end.
    pending: Option<NodeCaps>,
    min_interval: Duration,
}

impl Pacer {
    pub(crate) fn new(announced: NodeCaps, now: Instant, min_interval: Duration) -> Self {
        Pacer {
            announced,
            last: now,
            pending: None,
            min_interval,
        }
    }

    /// Offers new caps at `now`. On [`Update::Announced`] the caller
    /// registers `caps` at once.
    pub(crate) fn offer(&mut self, caps: &NodeCaps, now: Instant) -> Update {
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
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|_| self.last + self.min_interval)
    }

    /// The pending caps, if their time has come; they become the announced
    /// ones.
    pub(crate) fn due(&mut self, now: Instant) -> Option<NodeCaps> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rlx_proto::caps::DeviceInfo;

    const GIB: u64 = 1 << 30;

    /// A GPU box's caps, the starting point of the change tests.
    pub(crate) fn caps() -> NodeCaps {
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
            ..Default::default()
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

    /// The runtime launches workers over ssh: sshd starting, stopping or
    /// moving port is news for every coordinator.
    #[test]
    fn an_ssh_server_starting_stopping_or_moving_is_material() {
        let mut none = caps();
        none.ssh_listening = Some(false);
        let mut up = caps();
        up.ssh_listening = Some(true);
        up.ssh_port = Some(22);
        let why = material_change(&none, &up).expect("sshd started");
        assert!(why.contains("ssh_listening"), "{why}");
        assert!(material_change(&up, &none).is_some(), "sshd stopped");
        let mut moved = up.clone();
        moved.ssh_port = Some(2222);
        let why = material_change(&up, &moved).expect("sshd moved");
        assert!(why.contains("ssh_port"), "{why}");
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
}
