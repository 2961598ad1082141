//! **How far an agent's clock is from ours**, read off one handshake.
//!
//! The agent writes its wall clock into the reply (`"time_ms"`, Unix
//! milliseconds, taken as it writes the line). The coordinator notes its own
//! wall clock when it sent the hello and when the reply arrived; the agent's
//! reading was taken somewhere between the two, so the offset is the
//! agent's time minus the midpoint, and it is known to within half the round
//! trip (plus a millisecond for the rounding of each reading). On a LAN that
//! is a few milliseconds: ample for telling a box whose NTP is off by
//! seconds or minutes from one that is fine, which is all `doctor` asks.
//! It is the same arithmetic as NTP's, with one sample.
//!
//! The reading is outside the proof: it is a diagnosis, never an input to
//! trust or admission, so a forged one can only make `doctor` warn.

use std::time::{SystemTime, UNIX_EPOCH};

/// An agent's clock offset from this machine's, as one handshake saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// The agent's clock minus ours, in milliseconds (positive: it is ahead).
    pub offset_ms: i64,
    /// The offset is known to within this many milliseconds either way
    /// (half the round trip, plus the readings' rounding).
    pub within_ms: u64,
}

impl ClockOffset {
    /// The offset of an agent whose clock read `agent_ms` in a reply to a
    /// hello we sent at `sent_ms` and whose reply we had at `got_ms` (all
    /// Unix milliseconds). `None` when our own clock stepped backwards in
    /// between (the readings cannot be trusted).
    pub fn from_exchange(sent_ms: u64, agent_ms: u64, got_ms: u64) -> Option<ClockOffset> {
        if got_ms < sent_ms {
            return None;
        }
        let rtt = got_ms - sent_ms;
        // Twice the midpoint, to stay in integers: 2·agent − (sent + got).
        let twice = 2 * i128::from(agent_ms) - i128::from(sent_ms) - i128::from(got_ms);
        let offset = (twice / 2) as i64;
        Some(ClockOffset {
            offset_ms: offset,
            within_ms: rtt.div_ceil(2) + 1,
        })
    }

    /// The smallest offset the reading allows: `|offset| - within`, at least
    /// zero. A clock is off by at least this much, whatever the network did.
    pub fn at_least_ms(&self) -> u64 {
        self.offset_ms.unsigned_abs().saturating_sub(self.within_ms)
    }
}

/// This machine's wall clock in Unix milliseconds (0 before 1970, which a
/// reading can then show as an absurd offset rather than a panic).
pub(super) fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_in_step_with_us_is_zero_off_within_half_the_round_trip() {
        let c = ClockOffset::from_exchange(1_000, 1_005, 1_010).unwrap();
        assert_eq!(c.offset_ms, 0);
        assert_eq!(c.within_ms, 6);
        assert_eq!(c.at_least_ms(), 0);
    }

    #[test]
    fn an_agent_ahead_or_behind_shows_the_sign_and_the_size() {
        let ahead = ClockOffset::from_exchange(10_000, 40_002, 10_004).unwrap();
        assert_eq!(ahead.offset_ms, 30_000);
        assert_eq!(ahead.at_least_ms(), 30_000 - 3);
        let behind = ClockOffset::from_exchange(10_000, 2, 10_004).unwrap();
        assert_eq!(behind.offset_ms, -10_000);
        assert_eq!(behind.at_least_ms(), 10_000 - 3);
    }

    #[test]
    fn our_clock_stepping_back_mid_exchange_gives_no_reading() {
        assert_eq!(ClockOffset::from_exchange(5_000, 5_000, 4_999), None);
    }

    #[test]
    fn a_slow_exchange_widens_the_bound_instead_of_claiming_an_offset() {
        // 2 s round trip, agent read in the middle of it: off by nothing
        // measurable, and the bound says so.
        let c = ClockOffset::from_exchange(0, 1_500, 2_000).unwrap();
        assert_eq!(c.offset_ms, 500);
        assert_eq!(c.within_ms, 1_001);
        assert_eq!(c.at_least_ms(), 0);
    }
}
