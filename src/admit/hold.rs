//! **A new pin held a few seconds, for a coordinator that never stops**
//! (`watch`, a runtime's `LiveWatch`). `expand` judges a whole run's
//! handshakes at once, so two node keys claiming one new id in that run pin
//! neither ([`super::identities`]). `watch` admits each candidate as its
//! handshake finishes: without a hold, whichever claimant's admission
//! finished first would be pinned, and the real machine, a moment later,
//! refused as an impostor. So a new id's key is pinned only once it has
//! been the only key claiming the id for [`PIN_HOLD`]; a second key within
//! that time makes the id contested, and neither is pinned until one of
//! them has gone unclaimed for [`PIN_HOLD`].
//!
//! Meanwhile the members are admitted as new (unpinned), as `expand` would
//! in one run, and the rule for two machines claiming one id decides which
//! is the member. A member's health check judges it again every few
//! seconds, so its pin lands within a check of the hold's end.

use rlx_proto::identity::NodePublicKey;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long a new id's key must be its only claimant before it is pinned:
/// longer than a second agent's admission takes (one handshake round,
/// about 4.3 s at worst, is within one more health check), short enough
/// that a real member is pinned within seconds of joining.
pub(crate) const PIN_HOLD: Duration = Duration::from_secs(5);

/// Most ids held at once: a stranger announcing ids by the thousand costs
/// this bound, the oldest hold going first (it is pinned a check later).
const MAX_HELD: usize = 4096;

/// What [`PinHold::observe`] decided for one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// The key has been the id's only claimant for [`PIN_HOLD`]: pin it.
    Pin,
    /// Not yet: admitted as new, pinned at a later check.
    Wait,
    /// Another key claimed the id within [`PIN_HOLD`]: pin neither.
    /// `began` on the claim that made it contested (said once, not at
    /// every check while it lasts).
    Contested { began: bool },
}

#[derive(Debug)]
struct Held {
    /// When the current set of claimants began.
    since: Instant,
    /// Each key claiming the id, with when it was last seen.
    keys: Vec<(NodePublicKey, Instant)>,
}

/// The ids whose pins are held, for one coordinator's lifetime.
#[derive(Debug, Default)]
pub(crate) struct PinHold {
    held: HashMap<String, Held>,
}

impl PinHold {
    /// Records that `key` claims the unpinned `id` now, and says whether
    /// to pin it.
    pub(crate) fn observe(&mut self, id: &str, key: NodePublicKey, now: Instant) -> Hold {
        if !self.held.contains_key(id) && self.held.len() >= MAX_HELD {
            if let Some(oldest) = self
                .held
                .iter()
                .min_by_key(|(_, h)| h.since)
                .map(|(k, _)| k.clone())
            {
                self.held.remove(&oldest);
            }
        }
        let h = self.held.entry(id.to_string()).or_insert(Held {
            since: now,
            keys: Vec::new(),
        });
        // A claimant not heard from for the whole hold has given up.
        h.keys
            .retain(|(_, last)| now.saturating_duration_since(*last) <= PIN_HOLD);
        let mut added = false;
        match h.keys.iter_mut().find(|(k, _)| *k == key) {
            Some(seen) => seen.1 = now,
            None => {
                h.keys.push((key, now));
                h.since = now;
                added = true;
            }
        }
        if h.keys.len() > 1 {
            Hold::Contested { began: added }
        } else if now.saturating_duration_since(h.since) >= PIN_HOLD {
            self.held.remove(id);
            Hold::Pin
        } else {
            Hold::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::identity::NodeKey;

    fn key(b: u8) -> NodePublicKey {
        NodeKey::from_seed([b; 32]).public()
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_id_is_pinned_only_after_its_key_was_the_only_claimant_for_the_hold() {
        let mut h = PinHold::default();
        let t = Instant::now();
        assert_eq!(h.observe("a", key(1), t), Hold::Wait);
        assert_eq!(
            h.observe("a", key(1), t + Duration::from_secs(3)),
            Hold::Wait
        );
        assert_eq!(h.observe("a", key(1), t + PIN_HOLD), Hold::Pin);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_key_within_the_hold_pins_neither_until_one_is_gone_for_the_hold() {
        let mut h = PinHold::default();
        let t = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(h.observe("a", key(1), t), Hold::Wait);
        assert_eq!(
            h.observe("a", key(2), t + s),
            Hold::Contested { began: true }
        );
        assert_eq!(
            h.observe("a", key(1), t + 4 * s),
            Hold::Contested { began: false }
        );
        assert_eq!(
            h.observe("a", key(1), t + 6 * s),
            Hold::Contested { began: false }
        );
        // Key 2 was last seen at 1 s: by 7 s it has been gone for more
        // than the hold, and key 1 is pinned.
        assert_eq!(h.observe("a", key(1), t + 7 * s), Hold::Pin);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_claimant_of_an_id_is_not_pinned_when_another_answers_a_moment_later() {
        let mut h = PinHold::default();
        let t = Instant::now();
        assert_eq!(h.observe("a", key(2), t), Hold::Wait);
        assert_eq!(
            h.observe("a", key(1), t + Duration::from_millis(300)),
            Hold::Contested { began: true }
        );
        assert_eq!(
            h.observe("a", key(2), t + PIN_HOLD),
            Hold::Contested { began: false }
        );
    }
}
