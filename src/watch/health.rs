//! **When each member's health is checked** — its own schedule, jittered,
//! so that the checks of many members spread out instead of arriving as one
//! burst, and a dead member's slow check delays nobody else's.
//!
//! # The arithmetic
//!
//! Each member is checked (one handshake) after an interval drawn uniformly
//! from [[`HEALTH_INTERVAL`] − [`HEALTH_JITTER`], [`HEALTH_INTERVAL`]] =
//! [2.8 s, 3.5 s], mean 3.15 s. At 200 agents that is 200 / 3.15 ≈ 63
//! handshakes a second per coordinator, down from 100 with the former fixed
//! 2 s (docs/security.md, "`watch` under a flood").
//!
//! A check refused at once (the agent's process died and its host resets
//! the connection) is checked again [`RECHECK_AFTER`] later, and only a
//! second failure is a leave: one stray reset is not a death, and a
//! supervisor's fast restart is answered by the new process (a `restarted`,
//! not a `left` and a `joined`). Crash bound: at most 3.5 s to the next
//! check + 0.3 s to the re-check + two resets (milliseconds) ≈ 3.8 s,
//! inside the 5 s the runtime is promised.
//!
//! A check that failed only after [`SETTLED_AFTER`] or more (the host does
//! not answer at all: the whole handshake round of
//! [`crate::admit::ATTEMPTS`] attempts already retried it) is final at
//! once: a vanished host is seen within 3.5 s + 4.3 s ≈ 7.8 s.

use std::time::Duration;

/// The longest interval between two health checks of one member.
pub(crate) const HEALTH_INTERVAL: Duration = Duration::from_millis(3500);

/// How much shorter than [`HEALTH_INTERVAL`] an interval may be drawn.
pub(crate) const HEALTH_JITTER: Duration = Duration::from_millis(700);

/// The longest interval between two health checks of a member whose
/// liveness stream tells of its facts (an agent that sends the facts
/// digest in its pulses): its pulses say it runs, a change of its facts
/// is checked at once, and this check is only the net under both. At 200
/// members that is about 3 handshakes a second instead of 63.
pub(crate) const FACTS_INTERVAL: Duration = Duration::from_secs(60);

/// How long after a quickly refused check the member is checked again.
pub(crate) const RECHECK_AFTER: Duration = Duration::from_millis(300);

/// A failed check that took at least this long had its retries already
/// (the handshake round's own attempts): no re-check.
pub(crate) const SETTLED_AFTER: Duration = Duration::from_secs(1);

/// The interval before the next check of a member whose stream tells of
/// its facts, drawn from `rng`: within the last fifth of
/// [`FACTS_INTERVAL`], so that the checks of many members spread out.
pub(super) fn facts_interval(rng: &mut fastrand::Rng) -> Duration {
    let fifth = FACTS_INTERVAL.as_millis() as u64 / 5;
    FACTS_INTERVAL - Duration::from_millis(rng.u64(0..=fifth))
}

/// The interval before a member's next check, drawn from `rng`.
pub(super) fn next_interval(rng: &mut fastrand::Rng) -> Duration {
    let jitter = HEALTH_JITTER.as_millis() as u64;
    HEALTH_INTERVAL - Duration::from_millis(rng.u64(0..=jitter))
}
