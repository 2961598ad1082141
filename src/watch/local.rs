//! **The engine's own health** — whether the watch itself ran on time:
//! Lifeguard's local-health awareness, reduced to the one measure a single
//! observer has, its own scheduling delay on the monotonic clock. A stalled
//! observer (SIGSTOPped, its cores saturated, the machine suspended) would
//! otherwise read its members' unread pulses as their silence, and accuse
//! them all at once.

use std::time::Duration;
use tokio::time::Instant;

/// The engine's tick: how often silences, suspicions and its own health
/// are looked at.
pub(crate) const TICK: Duration = Duration::from_millis(50);

/// While every member is at rest the engine ticks this often at most (and
/// at its first deadline, if sooner): a tick then only looks at the
/// engine's own health. A stall long enough to be read as a member's
/// silence (the 1 s of silence less a pulse interval, about 700 ms) still
/// makes the next tick late by more than [`STALL_AFTER`].
pub(crate) const REST_TICK: Duration = Duration::from_millis(200);

/// A tick this much later than due means the engine was stalled.
pub(crate) const STALL_AFTER: Duration = Duration::from_millis(250);

/// The engine's view of its own scheduling: when it was last found
/// stalled.
#[derive(Debug)]
pub(crate) struct LocalHealth {
    due: Instant,
    /// When the last stall was noticed (its end).
    stall_end: Option<Instant>,
    /// Stalls noticed since the start.
    pub(crate) stalls: u64,
}

impl LocalHealth {
    pub(crate) fn new(now: Instant) -> Self {
        LocalHealth {
            due: now + TICK,
            stall_end: None,
            stalls: 0,
        }
    }

    /// The engine looks at `now` (each turn of its loop, before anything
    /// is judged): how late its tick is, when that is a stall. Looked at
    /// first thing, so that no silence is judged on a clock that jumped.
    pub(crate) fn observe(&mut self, now: Instant) -> Option<Duration> {
        let late = now.saturating_duration_since(self.due);
        (late > STALL_AFTER).then(|| {
            self.stall_end = Some(now);
            self.stalls += 1;
            self.due = now + TICK;
            late
        })
    }

    /// The tick came, at `now`; the next one is due [`TICK`] later.
    #[cfg(test)]
    pub(crate) fn ticked(&mut self, now: Instant) {
        self.due = now + TICK;
    }

    /// When the next tick is due.
    pub(crate) fn next_tick(&self) -> Instant {
        self.due
    }

    /// The next tick is due at `at` (the engine chose it): a tick that
    /// much later than that is a stall.
    pub(crate) fn tick_at(&mut self, at: Instant) {
        self.due = at;
    }

    /// Where a silence that began at `heard` counts from: not before the
    /// last stall ended.
    pub(crate) fn quiet_since(&self, heard: Instant) -> Instant {
        self.stall_end.map_or(heard, |e| e.max(heard))
    }

    /// Whether a dial started at `started` ran with the engine healthy
    /// throughout.
    pub(crate) fn trusts(&self, started: Instant) -> bool {
        self.stall_end.is_none_or(|e| e < started)
    }
}
