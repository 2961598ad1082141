//! rlx patch: the daemon's wake-up times, bounded.
//!
//! Upstream keeps every wake-up in a `BinaryHeap` and pushes two for each
//! record of each response it reads (the record's expiry and its next
//! refresh), also for a record it already had. Those times lie up to a TTL
//! ahead, 75 minutes for a PTR record, so on a busy LAN the heap grew for
//! as long as the longest TTL: a soak of `watch` (10 agents, steady churn)
//! had 16,000 of them, 262 kB, after 30 minutes, and the count scales with
//! the traffic. Only the earliest matters: a wake-up runs every pending
//! duty (expiry, refresh, retransmissions, probes), and one that finds
//! nothing due costs one loop.
//!
//! Here a wake-up more than [`EXACT_WITHIN`] ahead is moved *later*, to the
//! next point of a grid whose step is 1/64 of the largest power of two at
//! or below its distance (a timer 1-2 s ahead moves by at most 15.6 ms,
//! one 64-128 s ahead by at most 1 s, one 75 min ahead by at most 64 s),
//! and equal times are kept once. Never earlier, so nothing due is missed;
//! at most 1/64 (1.6%) of the remaining time late, inside the 2% of jitter
//! RFC 6762 §5.2 already gives refresh queries. Because the steps are
//! powers of two on one epoch, the points at any moment number at most
//! about 128 per doubling of distance (those that came from coarser grids
//! as well as the current one): under 4,100 for any TTL that fits in 32
//! bits, about 1,700 for the 4,500 s PTR TTL, whatever the traffic. Timers
//! under [`EXACT_WITHIN`] ahead (response delays of 20-120 ms, probes 250
//! ms apart, goodbyes' 1 s) are kept exactly.

use std::collections::BTreeSet;
use std::convert::TryFrom;
use std::time::{Duration, Instant};

/// Wake-ups nearer than this are kept at their exact time.
pub(crate) const EXACT_WITHIN: Duration = Duration::from_secs(1);

/// Grid steps are the distance's power of two divided by this.
const STEPS_PER_DOUBLING: u128 = 64;

/// The pending wake-up times, earliest first.
#[derive(Debug)]
pub(crate) struct Timers {
    set: BTreeSet<Instant>,
    /// The grid's origin.
    epoch: Instant,
}

impl Timers {
    pub(crate) fn new(now: Instant) -> Self {
        Timers {
            set: BTreeSet::new(),
            epoch: now,
        }
    }

    /// Asks for a wake-up at `t` (or up to 1/64 of the way to it later).
    pub(crate) fn add(&mut self, t: Instant) {
        let t = self.coalesce(t, Instant::now());
        self.set.insert(t);
    }

    fn coalesce(&self, t: Instant, now: Instant) -> Instant {
        let ahead = t.saturating_duration_since(now);
        if ahead < EXACT_WITHIN || t < self.epoch {
            return t;
        }
        let ahead = ahead.as_nanos();
        let power = 1u128 << (127 - ahead.leading_zeros());
        let step = (power / STEPS_PER_DOUBLING).max(1);
        let since = t.duration_since(self.epoch).as_nanos();
        // Not `div_ceil`: the crate builds on Rust 1.71.
        let up = (since + step - 1) / step * step;
        u64::try_from(up).map_or(t, |n| self.epoch + Duration::from_nanos(n))
    }

    /// The earliest wake-up.
    pub(crate) fn peek(&self) -> Option<Instant> {
        self.set.first().copied()
    }

    /// Drops the wake-ups at or before `now`.
    pub(crate) fn pop_till(&mut self, now: Instant) {
        while self.set.first().is_some_and(|t| *t <= now) {
            self.set.pop_first();
        }
    }

    /// How many are pending (the daemon's `timer` metric).
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether a wake-up for `t` is pending: at `t`, or as late as
    /// coalescing may have moved it.
    #[cfg(test)]
    pub(crate) fn wakes_for(&self, t: Instant) -> bool {
        let most = t.saturating_duration_since(self.epoch) / 64;
        self.set.range(t..).next().is_some_and(|x| *x - t <= most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_wake_up_is_kept_exactly_and_a_far_one_moves_later_by_at_most_a_64th() {
        let now = Instant::now();
        let t = Timers::new(now - Duration::from_millis(3));
        let near = now + Duration::from_millis(120);
        assert_eq!(t.coalesce(near, now), near);
        for ahead_ms in [1_000u64, 1_500, 7_777, 120_000, 4_500_000] {
            let want = now + Duration::from_millis(ahead_ms);
            let got = t.coalesce(want, now);
            assert!(got >= want, "never earlier ({} ms)", ahead_ms);
            let late = got - want;
            assert!(
                late <= Duration::from_millis(ahead_ms) / 64,
                "{} ms ahead moved {:?}",
                ahead_ms,
                late
            );
        }
    }

    #[test]
    fn wake_ups_come_earliest_first_and_those_passed_are_dropped() {
        let now = Instant::now();
        let mut t = Timers::new(now);
        t.add(now + Duration::from_millis(300));
        t.add(now + Duration::from_millis(100));
        t.add(now + Duration::from_millis(100));
        assert_eq!(t.len(), 2, "equal times once");
        assert_eq!(t.peek(), Some(now + Duration::from_millis(100)));
        t.pop_till(now + Duration::from_millis(100));
        assert_eq!(t.peek(), Some(now + Duration::from_millis(300)));
    }

    /// Guards the soak's growth: a record answered again and again pushed
    /// its expiry (up to a 4,500 s TTL ahead) each time.
    #[test]
    fn wake_ups_stay_bounded_however_many_records_are_refreshed() {
        let start = Instant::now();
        let mut t = Timers::new(start);
        // 90 minutes of a busy LAN on a simulated clock: every 50 ms a
        // response whose records expire 120 s and 4,500 s ahead, with
        // refreshes at 80%.
        let mut most = 0;
        for i in 0..(90 * 60 * 20u64) {
            let now = start + Duration::from_millis(50 * i);
            for ttl in [120_000u64, 4_500_000] {
                for share in [80, 100] {
                    let at = now + Duration::from_millis(ttl * share / 100);
                    let c = t.coalesce(at, now);
                    t.set.insert(c);
                }
            }
            t.pop_till(now);
            most = most.max(t.len());
        }
        println!("{} wake-ups pending at most", most);
        assert!(most < 1_800, "{} wake-ups pending at most", most);
    }
}
