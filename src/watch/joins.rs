//! **Who joins** — announcements and zone browses considered, queued,
//! admitted under the bucket's rate, and the refusals reported: the
//! admission part of the engine. It reads the member table
//! ([`Members`]) and changes nothing in it: what passes admission is
//! handed back to the engine, which joins it there.

use super::admission::{
    self, Bucket, Priority, Queue, Refusals, MAX_IN_FLIGHT, RESERVED_IN_FLIGHT,
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
/// waiting, the rate they go at, the refusals' back-off, and who is in
/// admission now.
pub(super) struct Joins {
    refused: BTreeSet<(String, String)>,
    queue: Queue,
    bucket: Bucket,
    refusals: Refusals,
    /// Labels in admission now.
    admitting: BTreeSet<String>,
}

impl Joins {
    /// Nobody waiting, the bucket full at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Joins {
            refused: BTreeSet::new(),
            queue: Queue::default(),
            bucket: Bucket::new(now),
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

    /// The candidates the bucket lets through now, each its own admission
    /// (a dead one's whole handshake round delays no other).
    pub(super) fn take_admissions(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let mut jobs = Vec::new();
        let busy = |l: &str| self.admitting.contains(l);
        let (room, low) = self.rooms();
        let want = self.queue.ready(low, busy).min(room);
        if want == 0 {
            return jobs;
        }
        let n = self.bucket.take(want, now);
        if n == 0 {
            return jobs;
        }
        let admitting = &self.admitting;
        let fresh = self.queue.take(n, low, |l| admitting.contains(l));
        for s in fresh {
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
        let busy = |l: &str| self.admitting.contains(l);
        let (room, low) = self.rooms();
        (room > 0 && self.queue.ready(low, busy) > 0).then(|| self.bucket.next_at())
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
