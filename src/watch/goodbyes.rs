//! **Goodbyes and departures** — a goodbye heard for a member, its check,
//! a member gone, and the revisits of departed instances.

use super::admission::{self, MAX_REMEMBERED};
use super::engine::{
    Revisit, Watch, CONFIRM_AFTER_GOODBYE, REVISIT_CAP, REVISIT_FIRST, REVISIT_FOR,
};
use super::event::{Event, Kind, Out};
use super::farewell::HOST_UP;
use super::health;
use super::inputs::Check;
use super::job::Job;
use super::liveness::{Liveness, ProbeFor, SILENT_AFTER};
use super::member::{another_machine, contender_refused, news, Live};
use super::node::{claim, incarnation_of};
use crate::pipeline::node::node_of;
use crate::sighting::{Discovery, Problem, Sighting};
use tokio::time::Instant;

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
    /// A goodbye (or an expiry) for `label`: a claim anyone can make, so the
    /// member is checked ([`farewell`]), never dropped on it.
    pub(super) fn goodbye(&mut self, label: &str) {
        let now = Instant::now();
        // A name of a member's machine under another name: its goodbye is a
        // claim about that member.
        let label = match self.aliases.get(label) {
            Some(k) if !self.members.contains_key(label) => k.as_str(),
            _ => label,
        };
        let Some(m) = self.members.get_mut(label) else {
            return;
        };
        self.goodbyes.heard += 1;
        if !m.farewell.heard(now) {
            self.goodbyes.folded += 1;
        }
    }

    /// The goodbye checks that may start now: one job per member at most
    /// (with the sighting to dial and the incarnation said goodbye for).
    pub(super) fn due_goodbyes(&mut self, now: Instant) -> Vec<(Job, Sighting, Option<String>)> {
        let mut jobs = Vec::new();
        for (label, m) in &mut self.members {
            if m.farewell.start(now) {
                let job = Job::Goodbye {
                    label: label.clone(),
                    generation: m.generation,
                    addr: m.sighting.addr.clone(),
                };
                jobs.push((job, claim(&m.sighting), m.incarnation.clone()));
            }
        }
        self.goodbyes.checked += jobs.len() as u64;
        jobs
    }

    /// The end of a goodbye check of `(generation, address)`: the same
    /// incarnation still answering refutes the goodbye (counted, logged,
    /// and the browse asked to re-learn the instance), another one is a
    /// restart, and no answer is a leave, with a last dial of the instance
    /// [`CONFIRM_AFTER_GOODBYE`] later. A failure at an address the member
    /// has since moved from says nothing of it.
    pub(super) fn goodbye_checked(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        (generation, dialled): (u64, &str),
        checked: Discovery,
    ) {
        let Some(m) = self
            .members
            .get_mut(label)
            .filter(|m| m.generation == generation)
        else {
            return; // it left (and maybe joined again) meanwhile
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
                self.goodbyes.refuted += 1;
                self.relearn = true;
                self.goodbyes.log_refuted(label);
            }
            let node = node_of(s, &self.defaults);
            news(out, label, m, &node, inc);
            m.node = node;
            m.sighting = s.clone();
            if let Some((c, _)) = m.contender.take() {
                let why = contender_refused(label, m, &c);
                // Backed off like any refusal: the same forged records
                // again in every snapshot are not dialled again each time.
                self.refusals.refused(admission::key_of(&c), Instant::now());
                self.report_refusals(out, &[Problem::stranger(c.source, label, why)]);
            }
            return;
        }
        if m.sighting.addr != dialled {
            tracing::debug!(
                "{label}: moved to {} while checked after a goodbye at {dialled}",
                m.sighting.addr
            );
            return;
        }
        // Its stream pulsing is its own word that it runs: the goodbye is
        // refuted without a handshake (which a flood of connections, or a
        // busy box, may have kept from answering in time).
        if answer.is_none() && m.pulsing(Instant::now(), SILENT_AFTER) {
            self.goodbyes.refuted += 1;
            self.relearn = true;
            self.goodbyes.log_refuted(label);
            return;
        }
        // No answer in time from a host that accepts connections is a
        // stalled agent, not a gone one: dialled again, it is a suspect.
        let stalled = answer.is_none()
            && checked
                .problems
                .iter()
                .any(|p| p.host == label && p.reason.ends_with(HOST_UP));
        if stalled && m.contender.is_none() {
            self.probe_soon(label, ProbeFor::Check);
            return;
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
        self.gone(
            out,
            label,
            format!("{cause}, and its check failed: {reason}"),
            true,
        );
    }

    /// Member `label` is no longer where it was (its check failed, or its
    /// address answers as another machine): a contender with its node id
    /// is the member moved (a new lease: `updated`, or `restarted`, in
    /// place); else it has left, with `why`, and a contender with another
    /// id joins under the name. `revisit` dials the instance again
    /// [`CONFIRM_AFTER_GOODBYE`] later, then on the revisit schedule
    /// ([`REVISIT_FIRST`]): a member that comes back is joined again.
    pub(super) fn gone(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        why: String,
        revisit: bool,
    ) {
        let Some(mut m) = self.members.remove(label) else {
            return;
        };
        let contender = m.contender.take();
        if let Some((c, announced)) = contender.as_ref().filter(|(c, _)| m.answers_as(c)) {
            let node = node_of(c, &self.defaults);
            news(out, label, &mut m, &node, incarnation_of(c));
            m.node = node;
            m.sighting = c.clone();
            m.announced = announced.clone();
            m.failed_once = false;
            m.next_check = Some(Instant::now() + health::next_interval(&mut self.rng));
            // Its stream was to the old address, or of the old process.
            m.live = Live::Off {
                retry: Instant::now(),
            };
            m.dark = None;
            m.held = false;
            if m.suspicion.take().is_some() {
                let why = format!("it answers at {}", m.sighting.addr);
                out.emit(
                    Kind::Up,
                    label,
                    Some(&m.node),
                    m.incarnation.as_deref(),
                    Some(why),
                );
            }
            self.members.insert(label.to_string(), m);
            return;
        }
        out.emit(
            Kind::Left,
            label,
            Some(&m.node),
            m.incarnation.as_deref(),
            Some(why),
        );
        self.left.record(label, m.incarnation.clone());
        if revisit {
            if self.confirming.len() >= MAX_REMEMBERED {
                self.confirming.pop_first();
            }
            let now = Instant::now();
            let r = Revisit {
                due: now + CONFIRM_AFTER_GOODBYE,
                sighting: m.sighting,
                left_at: now,
                round: 0,
            };
            self.confirming.insert(label.to_string(), r);
        }
        if let Some((c, announced)) = contender {
            self.join_or_update(out, c, announced);
        }
    }

    /// The end of a revisit of a departed instance: an agent answering
    /// (another incarnation, or the same one, whose goodbye check only lost
    /// its packets, or a box back on the LAN) joins again; a silent one is
    /// revisited later, until [`REVISIT_FOR`] after it left (nothing to
    /// report: it already left).
    pub(super) fn confirmed(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        (label, mut revisit): (&str, Revisit),
        checked: Discovery,
    ) {
        // A member again, in admission, or a newer leave waiting for its
        // own confirmation: this answer is not news.
        if self.members.contains_key(label)
            || self.admitting.contains(label)
            || self.confirming.contains_key(label)
        {
            return;
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
        self.report_refusals(out, &claims);
        // A machine that once answered its handshake must answer one again
        // (a port that only accepts is a stalled agent, not a return).
        let was_answered = revisit.sighting.evidence.answered();
        let answer = checked
            .sightings
            .into_iter()
            .find(|s| s.host == label && (s.evidence.answered() || !was_answered));
        match answer {
            Some(s) => {
                let announced = s.caps.as_ref().map(|c| c.to_json());
                self.join_or_update(out, s, announced);
            }
            None => {
                // Dialled again later, less and less often, for a while.
                let now = Instant::now();
                let wait = (REVISIT_FIRST * 2u32.saturating_pow(revisit.round)).min(REVISIT_CAP);
                revisit.round += 1;
                revisit.due = now + wait;
                if revisit.due.saturating_duration_since(revisit.left_at) > REVISIT_FOR {
                    tracing::debug!("{label} left and no longer answers: gone");
                    return;
                }
                if self.confirming.len() >= MAX_REMEMBERED {
                    self.confirming.pop_first();
                }
                self.confirming.insert(label.to_string(), revisit);
            }
        }
    }
}
