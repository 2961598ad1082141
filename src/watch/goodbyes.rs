//! **Goodbyes and revisits** — a goodbye heard for a member and its check
//! ([`super::farewell`]), the counts they come to, and the revisits of
//! departed instances. It works on the member table it is handed
//! ([`Members`]); what a check concludes (a member gone, a contender
//! refused, an instance back) it returns for the engine to act on.

use super::admission::MAX_REMEMBERED;
use super::event::{Event, Out};
use super::farewell::{GoodbyeCounts, HOST_UP};
use super::job::Job;
use super::liveness::ProbeFor;
use super::member::{another_machine, contender_refused, news, Revisit};
use super::members::Members;
use super::node::{claim, incarnation_of, one};
use crate::sighting::{Discovery, Problem, Sighting};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long after a member left its instance is dialled again, quietly:
/// an agent answering then (another incarnation, or one whose goodbye
/// check only lost its packets) joins again, where nothing else might
/// bring it back (its records can equal the cached ones).
pub(crate) const CONFIRM_AFTER_GOODBYE: Duration = Duration::from_millis(1500);

/// After the first, a departed instance is dialled again after this,
/// doubling up to [`REVISIT_CAP`], for [`REVISIT_FOR`] after it left: a
/// box whose link was down for 20 s, or that rebooted, is joined again
/// when it answers, though its mDNS records may equal the cached ones and
/// never be news (the "never reported it back").
pub(crate) const REVISIT_FIRST: Duration = Duration::from_secs(5);

/// The longest wait between two revisits of a departed instance.
pub(crate) const REVISIT_CAP: Duration = Duration::from_secs(15);

/// How long after it left a departed instance is revisited at all.
pub(crate) const REVISIT_FOR: Duration = Duration::from_secs(600);

/// What a goodbye check came to, for the engine to act on.
pub(super) enum AfterGoodbye {
    /// The member is still there, or moved meanwhile, or is dialled
    /// (a stalled agent): nothing more.
    Kept,
    /// The member answered where it is: its contender (another node id
    /// under its name) is refused with `problem`.
    Refuse {
        contender: Box<Sighting>,
        problem: Box<Problem>,
    },
    /// The member is gone, for this reason (and revisited).
    Gone(String),
}

/// What a revisit found: claims on the departed member's pinned identity
/// to report, and the instance back, to join.
pub(super) struct Revisited {
    pub(super) claims: Vec<Problem>,
    pub(super) back: Option<Sighting>,
}

/// The goodbyes part: the counts, the departed instances to revisit, and
/// whether the browse is to re-learn its instances.
#[derive(Default)]
pub(super) struct Goodbyes {
    counts: GoodbyeCounts,
    /// Instances that left, to be dialled again: at most
    /// [`MAX_REMEMBERED`].
    revisits: BTreeMap<String, Revisit>,
    /// A goodbye was refuted since the browse was last asked to re-learn.
    relearn: bool,
}

impl Goodbyes {
    /// A goodbye (or an expiry) for `label`: a claim anyone can make, so the
    /// member is checked ([`super::farewell`]), never dropped on it.
    pub(super) fn said(&mut self, members: &mut Members, label: &str) {
        let now = Instant::now();
        // A name of a member's machine under another name: its goodbye is a
        // claim about that member.
        let Some(m) = members.claimed_about(label) else {
            return;
        };
        self.counts.heard += 1;
        if !m.farewell.claimed(now) {
            self.counts.folded += 1;
        }
    }

    /// Whether the browse is to re-learn its instances (a goodbye was
    /// refuted since it was last asked); asked once.
    pub(super) fn take_relearn(&mut self) -> bool {
        std::mem::take(&mut self.relearn)
    }

    /// The goodbye checks that may start now: one job per member at most
    /// (with the sighting to dial and the incarnation said goodbye for).
    pub(super) fn due_checks(
        &mut self,
        members: &mut Members,
        now: Instant,
    ) -> Vec<(Job, Sighting, Option<String>)> {
        let mut jobs = Vec::new();
        for (label, m) in members.each_mut() {
            if m.farewell.start(now) {
                let job = Job::Goodbye {
                    label: label.clone(),
                    generation: m.generation,
                    addr: m.sighting.addr.clone(),
                };
                jobs.push((job, claim(&m.sighting), m.incarnation.clone()));
            }
        }
        self.counts.checked += jobs.len() as u64;
        jobs
    }

    /// The goodbye was refuted for `label`: counted, logged, and the
    /// browse asked to re-learn the instance.
    fn refuted(&mut self, label: &str) {
        self.counts.refuted += 1;
        self.relearn = true;
        self.counts.log_refuted(label);
    }

    /// The end of a goodbye check of `(generation, address)`: the same
    /// incarnation still answering refutes the goodbye, another one is a
    /// restart, and no answer is a leave, with a last dial of the instance
    /// [`CONFIRM_AFTER_GOODBYE`] later. A failure at an address the member
    /// has since moved from says nothing of it.
    pub(super) fn checked(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        members: &mut Members,
        (label, generation, dialled): (&str, u64, &str),
        checked: Discovery,
    ) -> AfterGoodbye {
        let Some((m, make)) = members.member_with(label, generation) else {
            return AfterGoodbye::Kept; // it left (and maybe joined again) meanwhile
        };
        let cause = m.farewell.cause();
        m.farewell.done();
        let answer = checked
            .sightings
            .into_iter()
            .find(|s| s.host == label && m.answered_by(s));
        if let Some(s) = answer.as_ref().filter(|s| m.answers_as(s)) {
            let inc = incarnation_of(s);
            if inc == m.incarnation {
                self.refuted(label);
            }
            let node = make.node(s);
            news(out, label, m, &node, inc);
            m.node = node;
            m.sighting = s.clone();
            if let Some((c, _)) = m.contender.take() {
                let why = contender_refused(label, m, &c);
                let problem = Problem::stranger(c.source, label, why);
                return AfterGoodbye::Refuse {
                    contender: Box::new(c),
                    problem: Box::new(problem),
                };
            }
            return AfterGoodbye::Kept;
        }
        if m.sighting.addr != dialled {
            tracing::debug!(
                "{label}: moved to {} while checked after a goodbye at {dialled}",
                m.sighting.addr
            );
            return AfterGoodbye::Kept;
        }
        // Its stream pulsing is its own word that it runs: the goodbye is
        // refuted without a handshake (which a flood of connections, or a
        // busy box, may have kept from answering in time).
        if answer.is_none() && m.pulsing(Instant::now(), m.silence()) {
            self.refuted(label);
            return AfterGoodbye::Kept;
        }
        // No answer in time from a host that accepts connections is a
        // stalled agent, not a gone one: dialled again, it is a suspect.
        let stalled = answer.is_none()
            && checked
                .problems
                .iter()
                .any(|p| p.host == label && p.reason.ends_with(HOST_UP));
        if stalled && m.contender.is_none() {
            members.dial_soon(label, ProbeFor::Check);
            return AfterGoodbye::Kept;
        }
        let reason = match answer {
            Some(other) => another_machine(&other),
            None => checked
                .problems
                .iter()
                .find(|p| p.host == label)
                .map_or("the check lost it", |p| p.reason.as_str())
                .to_string(),
        };
        let cause = if m.contender.is_some() {
            "its records changed"
        } else {
            cause
        };
        AfterGoodbye::Gone(format!("{cause}, and its check failed: {reason}"))
    }

    /// Departed instance `label`, last at `sighting`, is dialled again
    /// [`CONFIRM_AFTER_GOODBYE`] from now, then on the revisit schedule
    /// ([`REVISIT_FIRST`]): a member that comes back is joined again.
    pub(super) fn revisit_later(&mut self, label: &str, sighting: Sighting) {
        if self.revisits.len() >= MAX_REMEMBERED {
            self.revisits.pop_first();
        }
        let now = Instant::now();
        let r = Revisit {
            due: now + CONFIRM_AFTER_GOODBYE,
            sighting,
            left_at: now,
            round: 0,
        };
        self.revisits.insert(label.to_string(), r);
    }

    /// `label` is heard of again (announced): no longer revisited.
    pub(super) fn stop_revisiting(&mut self, label: &str) {
        self.revisits.remove(label);
    }

    /// The revisits due now, each its own job.
    pub(super) fn due_revisits(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let due: Vec<String> = self
            .revisits
            .iter()
            .filter(|(_, r)| r.due <= now)
            .map(|(l, _)| l.clone())
            .collect();
        let mut jobs = Vec::new();
        for label in due {
            if let Some(revisit) = self.revisits.remove(&label) {
                let d = one(claim(&revisit.sighting));
                let revisit = Box::new(revisit);
                jobs.push((Job::Confirm { label, revisit }, d));
            }
        }
        jobs
    }

    /// When the next revisit is due.
    pub(super) fn next_revisit(&self) -> Option<Instant> {
        self.revisits.values().map(|r| r.due).min()
    }

    /// The end of a revisit of a departed instance: an agent answering
    /// (another incarnation, or the same one, whose goodbye check only lost
    /// its packets, or a box back on the LAN) is back, to join again; a
    /// silent one is revisited later, until [`REVISIT_FOR`] after it left
    /// (nothing to report: it already left). `taken`: `label` is a member
    /// again or in admission, and this answer is not news.
    pub(super) fn revisited(
        &mut self,
        (label, mut revisit): (&str, Revisit),
        taken: bool,
        checked: Discovery,
    ) -> Option<Revisited> {
        // A member again, in admission, or a newer leave waiting for its
        // own confirmation: this answer is not news.
        if taken || self.revisits.contains_key(label) {
            return None;
        }
        // A claim on the departed member's pinned identity at its address
        // (another key, or none) is the user's concern, never a silent
        // reschedule: reported once, like any admission's refusal.
        let claims: Vec<Problem> = checked
            .problems
            .iter()
            .filter(|p| p.host == label && p.pin_clash.is_some())
            .cloned()
            .collect();
        // A machine that once answered its handshake must answer one again
        // (a port that only accepts is a stalled agent, not a return).
        let was_answered = revisit.sighting.evidence.answered();
        let back = checked
            .sightings
            .into_iter()
            .find(|s| s.host == label && (s.evidence.answered() || !was_answered));
        if back.is_none() {
            // Dialled again later, less and less often, for a while.
            let now = Instant::now();
            let wait = (REVISIT_FIRST * 2u32.saturating_pow(revisit.round)).min(REVISIT_CAP);
            revisit.round += 1;
            revisit.due = now + wait;
            if revisit.due.saturating_duration_since(revisit.left_at) > REVISIT_FOR {
                tracing::debug!("{label} left and no longer answers: gone");
            } else {
                if self.revisits.len() >= MAX_REMEMBERED {
                    self.revisits.pop_first();
                }
                self.revisits.insert(label.to_string(), revisit);
            }
        }
        Some(Revisited { claims, back })
    }
}
