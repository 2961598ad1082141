//! **Admission control of `watch`** — which announced candidates are
//! handed to admission (the handshake), and when: a token bucket bounds how
//! many a second, a queue orders them (members' changes, then candidates
//! whose address sent the announcement itself, then new ones, then
//! retries), and refusals are remembered per (address, id, TXT) with an
//! exponential back-off, so a refused instance is not dialled again on
//! every snapshot.
//!
//! Hand-written rather than `governor`: the bucket runs on tokio's clock,
//! so the engine's tests run it under paused time like every other timer.

use crate::sighting::Sighting;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// One admission token comes every `ADMIT_EVERY`: at most 20 candidates a
/// second are dialled, steadily. A real cluster joins at that pace (a
/// 100-node cluster in 5 s); a stranger's flood makes the coordinator dial
/// no more than that, however many instances or TXT tweaks it sends.
pub(crate) const ADMIT_EVERY: Duration = Duration::from_millis(50);

/// Tokens the bucket holds: a burst of 32 candidates (a rack booting at
/// once) is admitted without waiting.
pub(crate) const ADMIT_BURST: u32 = 32;

/// Most new or retried candidates in admission at once (a handshake to a
/// host that does not answer takes the whole round, about 4.3 s).
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// Admissions kept for members whose announcement changed and for
/// candidates whose address sent the announcement itself, beyond
/// [`MAX_IN_FLIGHT`]: a flood of unreachable candidates holding every
/// slot does not keep a real agent waiting for one.
pub(crate) const RESERVED_IN_FLIGHT: usize = 16;

/// The first back-off after a refusal; each further refusal of the same
/// (address, id, TXT) doubles it, up to [`RETRY_CAP`].
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(5);

/// The longest back-off: a refused candidate is tried again at least every
/// five minutes (a machine that was down and came back joins by then).
pub(crate) const RETRY_CAP: Duration = Duration::from_secs(300);

/// Most refusals remembered, and most candidates queued: the instance
/// table's own bound ([`crate::sources::mdns::MAX_INSTANCES`]).
pub(crate) const MAX_REMEMBERED: usize = crate::sources::mdns::MAX_INSTANCES;

/// A token bucket on tokio's clock: [`ADMIT_BURST`] tokens, one more every
/// [`ADMIT_EVERY`].
#[derive(Debug)]
pub(super) struct Bucket {
    tokens: u32,
    /// When the last token was added (or the bucket was last full).
    last: Instant,
}

impl Bucket {
    pub(super) fn new(now: Instant) -> Self {
        Bucket {
            tokens: ADMIT_BURST,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let earned =
            (now.saturating_duration_since(self.last).as_nanos() / ADMIT_EVERY.as_nanos()) as u32;
        if earned == 0 {
            return;
        }
        self.tokens = (self.tokens + earned).min(ADMIT_BURST);
        self.last = if self.tokens == ADMIT_BURST {
            now
        } else {
            self.last + ADMIT_EVERY * earned
        };
    }

    /// Takes up to `want` tokens; returns how many it got.
    pub(super) fn take(&mut self, want: usize, now: Instant) -> usize {
        self.refill(now);
        let n = (self.tokens as usize).min(want);
        self.tokens -= n as u32;
        n
    }

    /// When the next token is there.
    pub(super) fn next_at(&self) -> Instant {
        if self.tokens > 0 {
            self.last
        } else {
            self.last + ADMIT_EVERY
        }
    }
}

/// What a refusal is remembered by: the address dialled, the node id and
/// the TXT caps announced. A changed TXT or address is another candidate
/// (it may have been fixed), but it still waits for a token.
pub(super) type Key = (String, Option<String>, Option<String>);

/// The key of a sighting.
pub(super) fn key_of(s: &Sighting) -> Key {
    (
        s.addr.clone(),
        s.caps.as_ref().map(|c| c.id.clone()),
        s.caps.as_ref().map(|c| c.to_json()),
    )
}

#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    until: Instant,
}

/// A refusal whose back-off ended this long ago and that was not refused
/// again is forgotten: its candidate was not retried (the instance is gone:
/// a crashed incarnation's cached record, an address that moved), so there
/// is nothing left to back off. A candidate still being refused is retried
/// when its back-off ends and refused again, so its entry stays, and its
/// back-off keeps doubling.
pub(super) const FORGET_AFTER: Duration = RETRY_CAP;

/// How often the map is swept for refusals to forget.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Refusals remembered, with their back-off; at most [`MAX_REMEMBERED`],
/// and in steady state only those of the last [`RETRY_CAP`] +
/// [`FORGET_AFTER`]. Without that sweep a churning cluster (each crashed
/// incarnation is a key of its own: its TXT carries the incarnation) filled
/// the map to its bound over hours, about 500 bytes a crash (the key's caps
/// JSON and address).
#[derive(Debug, Default)]
pub(super) struct Refusals {
    map: HashMap<Key, Backoff>,
    /// When the map was last swept (`None`: never).
    swept: Option<Instant>,
}

impl Refusals {
    /// Whether `key` was refused and its back-off has not run out.
    pub(super) fn blocked(&self, key: &Key, now: Instant) -> bool {
        self.map.get(key).is_some_and(|b| b.until > now)
    }

    /// Whether `key` was refused before (a retry).
    pub(super) fn known(&self, key: &Key) -> bool {
        self.map.contains_key(key)
    }

    /// Records a refusal of `key`; returns the back-off it now waits.
    pub(super) fn refused(&mut self, key: Key, now: Instant) -> Duration {
        self.sweep(now);
        if !self.map.contains_key(&key) && self.map.len() >= MAX_REMEMBERED {
            self.map.retain(|_, b| b.until > now);
            if self.map.len() >= MAX_REMEMBERED {
                // Still full of live back-offs: forget the one due soonest.
                if let Some(k) = self
                    .map
                    .iter()
                    .min_by_key(|(_, b)| b.until)
                    .map(|(k, _)| k.clone())
                {
                    self.map.remove(&k);
                }
            }
        }
        let b = self.map.entry(key).or_insert(Backoff {
            failures: 0,
            until: now,
        });
        b.failures = b.failures.saturating_add(1);
        let wait = RETRY_FIRST
            .saturating_mul(1 << (b.failures - 1).min(16))
            .min(RETRY_CAP);
        b.until = now + wait;
        wait
    }

    /// Forgets the refusals whose back-off ended over [`FORGET_AFTER`] ago,
    /// at most once every [`SWEEP_EVERY`].
    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|t| now < t + SWEEP_EVERY) {
            return;
        }
        self.swept = Some(now);
        self.map.retain(|_, b| b.until + FORGET_AFTER > now);
        // Give back what a burst of refusals made the table grow to.
        self.map.shrink_to(self.map.len() * 2);
    }

    /// Forgets `key` (it was admitted).
    pub(super) fn forget(&mut self, key: &Key) {
        self.map.remove(key);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Which candidates go first, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Priority {
    /// A member whose announcement changed.
    Member,
    /// Its address is the real source of a packet that announced it.
    Vouched,
    /// Never refused.
    New,
    /// Refused before, its back-off over.
    Retry,
}

/// Candidates waiting for a token, one per label (the latest sighting);
/// at most [`MAX_REMEMBERED`].
#[derive(Debug, Default)]
pub(super) struct Queue {
    items: BTreeMap<String, (Priority, u64, Sighting)>,
    seq: u64,
}

impl Queue {
    /// Queues `s` (replacing an older sighting of the same label). Returns
    /// false when the queue is full: the candidate comes back with the next
    /// snapshot.
    pub(super) fn push(&mut self, s: Sighting, prio: Priority) -> bool {
        if !self.items.contains_key(&s.host) && self.items.len() >= MAX_REMEMBERED {
            return false;
        }
        self.seq += 1;
        let seq = match self.items.get(&s.host) {
            Some((_, old, q)) if key_of(q) == key_of(&s) => *old,
            _ => self.seq,
        };
        self.items.insert(s.host.clone(), (prio, seq, s));
        true
    }

    /// Removes `label` if what is queued for it has refusal key `key`.
    pub(super) fn remove_if(&mut self, label: &str, key: &Key) {
        if self
            .items
            .get(label)
            .is_some_and(|(_, _, s)| key_of(s) == *key)
        {
            self.items.remove(label);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Takes up to `n` candidates, first by priority then by arrival, of
    /// which at most `low` new or retried ones, skipping the labels `busy`
    /// (already in admission).
    pub(super) fn take(
        &mut self,
        n: usize,
        low: usize,
        busy: impl Fn(&str) -> bool,
    ) -> Vec<Sighting> {
        let mut order: Vec<(Priority, u64, String)> = self
            .items
            .iter()
            .filter(|(l, _)| !busy(l))
            .map(|(l, (p, seq, _))| (*p, *seq, l.clone()))
            .collect();
        order.sort();
        let mut lows = 0;
        order
            .into_iter()
            .filter(|(p, _, _)| {
                let is_low = *p >= Priority::New;
                lows += usize::from(is_low);
                !is_low || lows <= low
            })
            .take(n)
            .filter_map(|(_, _, l)| self.items.remove(&l).map(|(_, _, s)| s))
            .collect()
    }

    /// How many could be taken now: not `busy`, and at most `low` new or
    /// retried ones.
    pub(super) fn ready(&self, low: usize, busy: impl Fn(&str) -> bool) -> usize {
        let (mut high, mut lows) = (0, 0);
        for (l, (p, _, _)) in &self.items {
            if busy(l) {
                continue;
            }
            if *p >= Priority::New {
                lows += 1;
            } else {
                high += 1;
            }
        }
        high + lows.min(low)
    }
}
