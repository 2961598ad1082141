//! **Who joins** — announcements and zone browses considered, queued,
//! admitted at the pace of their lane ([`admission`]), and the refusals
//! reported: the
//! admission part of the engine. It reads the member table
//! ([`Members`]) and changes nothing in it: what passes admission is
//! handed back to the engine, which joins it there.

use super::admission::{
    self, Bucket, Pace, Priority, Queue, Refusals, Room, MAX_IN_FLIGHT, RESERVED_IN_FLIGHT,
};
use super::event::{Event, Kind, Out};
use super::job::Job;
use super::members::Members;
use super::node::one;
use crate::sighting::{Discovery, Problem, Sighting};
use std::collections::BTreeSet;
use tokio::time::Instant;

/// Most refusals remembered as already reported (then the oldest is
/// forgotten, and may be reported again).
pub(super) const MAX_REPORTED: usize = admission::MAX_REMEMBERED;

/// The admission part: the refusals already reported, the candidates
/// waiting, the rate each lane goes at, the refusals' back-off, and who is
/// in admission now.
pub(super) struct Joins {
    refused: BTreeSet<(String, String)>,
    queue: Queue,
    /// Members' changes and vouched candidates.
    fast: Bucket,
    /// The others.
    slow: Bucket,
    /// When each address was last dialled from the fast lane.
    pace: Pace,
    refusals: Refusals,
    /// Labels in admission now.
    admitting: BTreeSet<String>,
}

impl Joins {
    /// Nobody waiting, the buckets full at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Joins {
            refused: BTreeSet::new(),
            queue: Queue::default(),
            fast: Bucket::fast(now),
            slow: Bucket::slow(now),
            pace: Pace::default(),
            refusals: Refusals::default(),
            admitting: BTreeSet::new(),
        }
    }

    /// Whether `label` is in admission now.
    pub(super) fn admitting(&self, label: &str) -> bool {
        self.admitting.contains(label)
    }

    /// Reports each refusal once per host and reason: a malformed
    /// announcement repeats in every snapshot. At most [`MAX_REPORTED`]
    /// are remembered.
    pub(super) fn report_refusals(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        problems: &[Problem],
    ) {
        for pr in problems {
            let key = (pr.host.clone(), pr.reason.clone());
            if self.refused.contains(&key) {
                continue;
            }
            if self.refused.len() >= MAX_REPORTED {
                self.refused.pop_first();
            }
            self.refused.insert(key);
            out.emit(Kind::Refused, &pr.host, None, None, Some(pr.reason.clone()));
        }
    }

    /// A contender found not to be the member whose name it claims: backed
    /// off like any refusal (the same forged records again in every
    /// snapshot are not dialled again each time), and reported.
    pub(super) fn refuse_contender(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        c: &Sighting,
        problem: Problem,
    ) {
        self.refusals.refused(admission::key_of(c), Instant::now());
        self.report_refusals(out, &[problem]);
    }

    /// Queues the sightings that are new or whose announcement changed,
    /// unless the same (address, id, TXT) was refused and its back-off has
    /// not run out. Returns the instances taken up: an instance announced
    /// again is no longer waiting for a revisit, the announcement is its
    /// news.
    pub(super) fn consider(
        &mut self,
        members: &Members,
        sightings: Vec<Sighting>,
        vouched: &BTreeSet<String>,
    ) -> Vec<String> {
        let now = Instant::now();
        let mut taken = Vec::new();
        for s in sightings {
            let announced = s.caps.as_ref().map(|c| c.to_json());
            let member = members.member(&s.host);
            if member.is_some_and(|m| m.announced == announced && m.sighting.addr == s.addr) {
                continue;
            }
            let key = admission::key_of(&s);
            if self.refusals.blocked(&key, now) {
                continue;
            }
            let prio = if member.is_some() {
                Priority::Member
            } else if vouched.contains(&s.host) {
                Priority::Vouched
            } else if self.refusals.known(&key) {
                Priority::Retry
            } else {
                Priority::New
            };
            taken.push(s.host.clone());
            if !self.queue.push(s, prio) {
                tracing::debug!("admission queue full; a candidate waits for the next snapshot");
            }
        }
        taken
    }

    /// The candidates the buckets let through now, each its own admission
    /// (a dead one's whole handshake round delays no other).
    pub(super) fn take_admissions(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let mut jobs = Vec::new();
        let (room, low) = self.rooms();
        if room == 0 || self.queue.len() == 0 {
            return jobs;
        }
        let room = Room {
            fast: self.fast.available(now).min(room),
            slow: self.slow.available(now).min(low),
            total: room,
        };
        let (admitting, pace) = (&self.admitting, &self.pace);
        // One address once per batch too: the pace learns of it after.
        let mut batch = BTreeSet::new();
        let fresh = self.queue.take(
            room,
            |l| admitting.contains(l),
            |s| pace.free_at(&s.addr, now).is_none() && batch.insert(s.addr.clone()),
        );
        for (prio, s) in fresh {
            if prio.fast() {
                self.fast.spend(1);
                self.pace.went(&s.addr, now);
            } else {
                self.slow.spend(1);
            }
            self.admitting.insert(s.host.clone());
            let job = Job::Admit {
                label: s.host.clone(),
                announced: s.caps.as_ref().map(|c| c.to_json()),
                key: admission::key_of(&s),
                started: now,
            };
            jobs.push((job, one(s)));
        }
        tracing::debug!(
            "{} in admission, {} queued",
            self.admitting.len(),
            self.queue.len()
        );
        jobs
    }

    /// When the next candidate may go: `None` when none waits or the most
    /// are already in admission (then a finished check wakes the loop).
    pub(super) fn next_admission(&self) -> Option<Instant> {
        let (room, low) = self.rooms();
        if room == 0 || self.queue.len() == 0 {
            return None;
        }
        let now = Instant::now();
        let busy = |l: &str| self.admitting.contains(l);
        let free_at = |s: &Sighting| self.pace.free_at(&s.addr, now);
        let (fast, slow) = self.queue.ready(busy, |s| free_at(s).is_none());
        [
            (fast > 0).then(|| self.fast.next_at()),
            (slow > 0 && low > 0).then(|| self.slow.next_at()),
            self.queue.held_until(busy, free_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Room in admission: for any candidate, and for new or retried ones
    /// ([`MAX_IN_FLIGHT`], with [`RESERVED_IN_FLIGHT`] more kept for the
    /// others).
    fn rooms(&self) -> (usize, usize) {
        let n = self.admitting.len();
        (
            (MAX_IN_FLIGHT + RESERVED_IN_FLIGHT).saturating_sub(n),
            MAX_IN_FLIGHT.saturating_sub(n),
        )
    }

    /// The end of one admission: a refusal reported and remembered with
    /// its back-off; else the sighting to join (or to update, or restart,
    /// a member with), unless it is the last word of an incarnation that
    /// has left since the check started.
    pub(super) fn admitted(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        members: &Members,
        (label, started): (String, Instant),
        key: admission::Key,
        checked: Discovery,
    ) -> Option<Sighting> {
        let now = Instant::now();
        self.admitting.remove(&label);
        for pr in &checked.problems {
            if pr.host == label {
                let wait = self.refusals.refused(key.clone(), now);
                // A snapshot that came while it was being checked queued
                // it again: that copy waits out the back-off too.
                self.queue.remove_if(&pr.host, &key);
                tracing::debug!(
                    "{} refused ({}); not dialled again for {wait:?}",
                    pr.host,
                    pr.reason
                );
            }
        }
        self.report_refusals(out, &checked.problems);
        let s = checked.sightings.into_iter().find(|s| s.host == label)?;
        if members.last_word(&label, started, &s) {
            tracing::debug!("{label}: an answer from before it left; not a join");
            return None;
        }
        self.refusals.forget(&key);
        Some(s)
    }
}
