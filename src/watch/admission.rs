//! **Admission control of `watch`** — which announced candidates are
//! handed to admission (the handshake), and when: a queue orders them
//! (members' changes, then candidates whose address sent the announcement
//! itself, then new ones, then retries), two token buckets bound how many
//! a second (a fast lane for the first two, a slow one for the others),
//! one address is dialled at most every [`PER_ADDRESS_GAP`], and refusals
//! are remembered per (address, id, TXT) with an exponential back-off, so
//! a refused instance is not dialled again on every snapshot.
//!
//! Why two lanes: a rack of a thousand boxes powering on must join within
//! seconds (issue 41: 1,000 in 10 s), where a stranger's flood of
//! announcements must not make the coordinator dial the LAN at that pace.
//! The two differ in who is dialled: a vouched candidate's address is the
//! machine that sent the announcement itself, so the dial goes back to the
//! sender (a stranger can only make the coordinator dial the stranger, and
//! the per-address gap holds that to four a second however many names or
//! TXT tweaks it sends), while an unvouched one is an address someone
//! claimed, which could be anyone's.
//!
//! Hand-written rather than `governor`: the bucket runs on tokio's clock,
//! so the engine's tests run it under paused time like every other timer.

use crate::sighting::Sighting;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// The slow lane (candidates nobody vouched for, see the module): one
/// admission token every `ADMIT_EVERY`, at most 20 such candidates a
/// second, steadily. A stranger's flood of claims makes the coordinator
/// dial no more than that, however many instances or TXT tweaks it sends.
pub(crate) const ADMIT_EVERY: Duration = Duration::from_millis(50);

/// Tokens the slow lane's bucket holds: a burst of 32 candidates is
/// admitted without waiting.
pub(crate) const ADMIT_BURST: u32 = 32;

/// The fast lane (members' changes and vouched candidates): one token
/// every 5 ms, 200 a second, so a rack of 1,000 booting at once is
/// dialled within about 5 s; the handshakes are what bounds it then
/// ([`MAX_IN_FLIGHT`] at once).
pub(crate) const VOUCHED_EVERY: Duration = Duration::from_millis(5);

/// Tokens the fast lane's bucket holds.
pub(crate) const VOUCHED_BURST: u32 = 64;

/// One address is dialled for admission at most once per this (in the
/// fast lane, where a flood from one stranger would dial its own address):
/// four a second, a real agent's announcement and a change of it never
/// wait more than a quarter of a second.
pub(crate) const PER_ADDRESS_GAP: Duration = Duration::from_millis(250);

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

/// A token bucket on tokio's clock: `burst` tokens, one more every
/// `every`.
#[derive(Debug)]
pub(super) struct Bucket {
    every: Duration,
    burst: u32,
    tokens: u32,
    /// When the last token was added (or the bucket was last full).
    last: Instant,
}

impl Bucket {
    /// The slow lane's bucket, full at `now`: [`ADMIT_BURST`] tokens, one
    /// more every [`ADMIT_EVERY`].
    pub(super) fn slow(now: Instant) -> Self {
        Bucket::new(now, ADMIT_EVERY, ADMIT_BURST)
    }

    /// The fast lane's bucket, full at `now`: [`VOUCHED_BURST`] tokens, one
    /// more every [`VOUCHED_EVERY`].
    pub(super) fn fast(now: Instant) -> Self {
        Bucket::new(now, VOUCHED_EVERY, VOUCHED_BURST)
    }

    fn new(now: Instant, every: Duration, burst: u32) -> Self {
        Bucket {
            every,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let earned =
            (now.saturating_duration_since(self.last).as_nanos() / self.every.as_nanos()) as u32;
        if earned == 0 {
            return;
        }
        self.tokens = self.tokens.saturating_add(earned).min(self.burst);
        self.last = if self.tokens == self.burst {
            now
        } else {
            self.last + self.every * earned
        };
    }

    /// The tokens there at `now`.
    pub(super) fn available(&mut self, now: Instant) -> usize {
        self.refill(now);
        self.tokens as usize
    }

    /// Spends `n` of the tokens [`Bucket::available`] said were there.
    pub(super) fn spend(&mut self, n: usize) {
        self.tokens = self
            .tokens
            .saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// When the next token is there.
    pub(super) fn next_at(&self) -> Instant {
        if self.tokens > 0 {
            self.last
        } else {
            self.last + self.every
        }
    }
}

/// When each address was last dialled for admission in the fast lane: at
/// most once per [`PER_ADDRESS_GAP`]. At most [`MAX_REMEMBERED`] addresses
/// (those whose gap is over are forgotten first).
#[derive(Debug, Default)]
pub(super) struct Pace {
    last: HashMap<String, Instant>,
}

impl Pace {
    /// When `addr` may be dialled again (`None`: now).
    pub(super) fn free_at(&self, addr: &str, now: Instant) -> Option<Instant> {
        let at = *self.last.get(addr)? + PER_ADDRESS_GAP;
        (at > now).then_some(at)
    }

    /// `addr` is dialled at `now`.
    pub(super) fn went(&mut self, addr: &str, now: Instant) {
        if self.last.len() >= MAX_REMEMBERED && !self.last.contains_key(addr) {
            self.last.retain(|_, t| *t + PER_ADDRESS_GAP > now);
            if self.last.len() >= MAX_REMEMBERED {
                // All within their gap (a flood of addresses): the fast
                // lane's bucket bounds them anyway.
                return;
            }
        }
        self.last.insert(addr.to_string(), now);
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

impl Priority {
    /// Whether it goes in the fast lane (see the module).
    pub(super) fn fast(self) -> bool {
        self <= Priority::Vouched
    }
}

/// How many of each lane may be taken at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Room {
    /// Members' changes and vouched candidates.
    pub(super) fast: usize,
    /// New or retried candidates.
    pub(super) slow: usize,
    /// Both together.
    pub(super) total: usize,
}

/// Candidates waiting for a token, one per label (the latest sighting);
/// at most [`MAX_REMEMBERED`]. Kept in order too (priority, then
/// arrival), so that taking a few of a thousand waiting does not sort
/// them all.
#[derive(Debug, Default)]
pub(super) struct Queue {
    items: HashMap<String, (Priority, u64, Sighting)>,
    order: BTreeSet<(Priority, u64, String)>,
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
        let label = s.host.clone();
        if let Some((p, old, _)) = self.items.insert(label.clone(), (prio, seq, s)) {
            self.order.remove(&(p, old, label.clone()));
        }
        self.order.insert((prio, seq, label));
        true
    }

    fn remove(&mut self, label: &str) -> Option<(Priority, Sighting)> {
        let (p, seq, s) = self.items.remove(label)?;
        self.order.remove(&(p, seq, label.to_string()));
        Some((p, s))
    }

    /// Removes `label` if what is queued for it has refusal key `key`.
    pub(super) fn remove_if(&mut self, label: &str, key: &Key) {
        if self
            .items
            .get(label)
            .is_some_and(|(_, _, s)| key_of(s) == *key)
        {
            self.remove(label);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Takes, first by priority then by arrival, at most `room` of each
    /// lane, skipping the labels `busy` (already in admission) and the
    /// fast-lane candidates `may_go` holds back (their address's gap).
    pub(super) fn take(
        &mut self,
        room: Room,
        busy: impl Fn(&str) -> bool,
        mut may_go: impl FnMut(&Sighting) -> bool,
    ) -> Vec<(Priority, Sighting)> {
        let (mut fast, mut slow) = (0, 0);
        let mut chosen = Vec::new();
        for (p, _, label) in &self.order {
            if fast + slow >= room.total || (fast >= room.fast && slow >= room.slow) {
                break;
            }
            if busy(label) {
                continue;
            }
            if p.fast() {
                if fast < room.fast && may_go(&self.items[label].2) {
                    fast += 1;
                    chosen.push(label.clone());
                }
            } else if slow < room.slow {
                slow += 1;
                chosen.push(label.clone());
            }
        }
        chosen.iter().filter_map(|l| self.remove(l)).collect()
    }

    /// The soonest a waiting fast-lane candidate held back only by its
    /// address's gap may go, as `free_at` tells (`None`: none is).
    pub(super) fn held_until(
        &self,
        busy: impl Fn(&str) -> bool,
        free_at: impl Fn(&Sighting) -> Option<Instant>,
    ) -> Option<Instant> {
        self.order
            .iter()
            .take_while(|(p, _, _)| p.fast())
            .filter(|(_, _, l)| !busy(l))
            .filter_map(|(_, _, l)| free_at(&self.items[l].2))
            .min()
    }

    /// How many could be taken now per lane: not `busy`, and in the fast
    /// lane those `may_go` lets through.
    pub(super) fn ready(
        &self,
        busy: impl Fn(&str) -> bool,
        may_go: impl Fn(&Sighting) -> bool,
    ) -> (usize, usize) {
        let (mut fast, mut slow) = (0, 0);
        for (p, _, l) in &self.order {
            if busy(l) {
                continue;
            }
            if !p.fast() {
                slow += 1;
            } else if may_go(&self.items[l].2) {
                fast += 1;
            }
        }
        (fast, slow)
    }
}
