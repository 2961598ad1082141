//! **Who joins** — announcements and zone browses considered, queued,
//! admitted under the bucket's rate, and joined (or taken as news of a
//! member, or as a claim against one).

use super::admission::{self, Priority, MAX_IN_FLIGHT, MAX_REMEMBERED, RESERVED_IN_FLIGHT};
use super::engine::{Watch, MAX_REPORTED};
use super::event::{Event, Kind, Out};
use super::health;
use super::inputs::{named, Check};
use super::job::Job;
use super::liveness::Liveness;
use super::member::{news, Member};
use super::node::{incarnation_of, one};
use crate::pipeline::node::node_of;
use crate::pipeline::same_machine;
use crate::sighting::{Discovery, Problem, Sighting, Source};
use std::collections::BTreeSet;
use tokio::time::Instant;

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
    /// One DNS-SD browse's result: new registrations join through
    /// admission; a DNS member whose registration is missing is checked
    /// like a member said goodbye for ([`super::farewell`]), and leaves
    /// only if its machine does not answer: a registration missing from
    /// one answer (a server restarting, a lease renewed late, a forged or
    /// truncated reply) is not a departure.
    pub(super) fn dns_browsed(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        found: Result<Discovery, String>,
    ) {
        let found = match found {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("DNS-SD browse failed; keeping the DNS members as they are: {e}");
                return;
            }
        };
        let (sightings, problems) = named(found.sightings, found.problems);
        let present: BTreeSet<String> = sightings.iter().map(|s| s.host.clone()).collect();
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(k, m)| m.sighting.source == Source::Dns && !present.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        let now = Instant::now();
        for k in gone {
            if let Some(m) = self.members.get_mut(&k) {
                tracing::debug!("{k}: missing from the zone; checking its machine");
                m.farewell
                    .heard_because(now, "DNS registration missing from the zone");
            }
        }
        self.report_refusals(out, &problems);
        self.consider(sightings, &BTreeSet::new());
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

    /// Queues the sightings that are new or whose announcement changed,
    /// unless the same (address, id, TXT) was refused and its back-off has
    /// not run out. An instance announced again is no longer waiting for a
    /// confirmation: the announcement is its news.
    pub(super) fn consider(&mut self, sightings: Vec<Sighting>, vouched: &BTreeSet<String>) {
        let now = Instant::now();
        for s in sightings {
            let announced = s.caps.as_ref().map(|c| c.to_json());
            let member = self.members.get(&s.host);
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
            self.confirming.remove(&s.host);
            if !self.queue.push(s, prio) {
                tracing::debug!("admission queue full; a candidate waits for the next snapshot");
            }
        }
    }

    /// The candidates the bucket lets through now, each its own admission
    /// (a dead one's whole handshake round delays no other), and the
    /// goodbyes whose confirmation is due.
    pub(super) fn take_admissions(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let mut jobs = Vec::new();
        let due: Vec<String> = self
            .confirming
            .iter()
            .filter(|(_, r)| r.due <= now)
            .map(|(l, _)| l.clone())
            .collect();
        for label in due {
            if let Some(revisit) = self.confirming.remove(&label) {
                let d = one(super::node::claim(&revisit.sighting));
                jobs.push((
                    Job::Confirm {
                        label,
                        revisit: Box::new(revisit),
                    },
                    d,
                ));
            }
        }
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
    pub(super) fn rooms(&self) -> (usize, usize) {
        let n = self.admitting.len();
        (
            (MAX_IN_FLIGHT + RESERVED_IN_FLIGHT).saturating_sub(n),
            MAX_IN_FLIGHT.saturating_sub(n),
        )
    }

    /// The end of one admission: a refusal reported and remembered with
    /// its back-off, else joined (or updated, or restarted).
    pub(super) fn admitted(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        (label, started): (String, Instant),
        announced: Option<String>,
        key: admission::Key,
        checked: Discovery,
    ) {
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
        if let Some(s) = checked.sightings.into_iter().find(|s| s.host == label) {
            if self.left.last_word(&label, started, &s) {
                tracing::debug!("{label}: an answer from before it left; not a join");
                return;
            }
            self.refusals.forget(&key);
            self.join_or_update(out, s, announced);
        }
    }

    /// A sighting the machine itself confirmed: news of the member of its
    /// name when it is that member where it is (restarted when its
    /// incarnation changed, updated when its caps did materially); a claim
    /// checked against that member when it is not (another address, or
    /// another node id: kept as the member's contender, see [`Watch::gone`]);
    /// nothing new when it is the machine of another member; else a new
    /// member (joined).
    pub(super) fn join_or_update(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        s: Sighting,
        announced: Option<String>,
    ) {
        let label = s.host.clone();
        let node = node_of(&s, &self.defaults);
        let inc = incarnation_of(&s);
        if let Some(m) = self.members.get_mut(&label) {
            if m.is_here(&s) {
                news(out, &label, m, &node, inc);
                m.sighting = s;
                m.node = node;
                m.announced = announced;
            } else {
                tracing::debug!(
                    "{label}: a sighting at {} (id {}) under its name; checking the member at {}",
                    s.addr,
                    s.id().unwrap_or("none"),
                    m.sighting.addr
                );
                m.contender = Some((s, announced));
                m.farewell.heard(Instant::now());
            }
            return;
        }
        // The same machine already a member under another name (mDNS and
        // DNS both list a LAN agent, or a stranger announced a phantom
        // instance at a member's address): one member, by the rule
        // `expand` merges with. Its goodbyes are claims about that member.
        let twin = self
            .members
            .iter()
            .find(|(_, m)| same_machine(&m.sighting, &s));
        if let Some((k, _)) = twin {
            tracing::debug!("{label} is {k}'s machine, already a member: one member");
            if self.aliases.len() >= MAX_REMEMBERED {
                self.aliases.pop_first();
            }
            self.aliases.insert(label, k.clone());
            return;
        }
        self.aliases.remove(&label);
        out.emit(Kind::Joined, &label, Some(&node), inc.as_deref(), None);
        self.generation += 1;
        let next_check = Instant::now() + health::next_interval(&mut self.rng);
        let member = Member::new(s, node, (announced, inc), self.generation, next_check);
        self.members.insert(label, member);
    }
}
