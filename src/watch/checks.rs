//! **Health checks** — each member's handshake on its own jittered
//! schedule ([`health`]), and what its end says. A part with no state of
//! its own: it works on the member table it is handed ([`Members`]), and a
//! member it finds gone is returned as a [`Leave`] for the engine to act on.

use super::event::{Event, Kind, Out};
use super::health::{self, FACTS_INTERVAL};
use super::job::Job;
use super::liveness::ProbeFor;
use super::member::{another_machine, news, Live};
use super::members::{Leave, Members};
use super::node::{claim, incarnation_of, one};
use crate::sighting::Discovery;
use tokio::time::Instant;

/// The health checks due now, one job per member, each taken off the
/// schedule until it ends. A member whose stream is a session bound to its
/// pinned key, with nothing new to check ([`super::member::Member::bound_session`]),
/// is not handshaken: its check is put off by [`FACTS_INTERVAL`].
pub(super) fn due(members: &mut Members, now: Instant) -> Vec<(Job, Discovery)> {
    let mut jobs = Vec::new();
    for (label, m) in members.each_mut() {
        if m.next_check.is_some_and(|t| t <= now) {
            if m.bound_session(now) {
                m.next_check = Some(now + FACTS_INTERVAL);
                continue;
            }
            m.next_check = None;
            m.facts_checked.clone_from(&m.facts);
            let job = Job::Health {
                label: label.clone(),
                generation: m.generation,
                started: now,
                addr: m.sighting.addr.clone(),
            };
            jobs.push((job, one(claim(&m.sighting))));
        }
    }
    jobs
}

/// When the next health check or goodbye check is due.
pub(super) fn next_due(members: &Members) -> Option<Instant> {
    members
        .each()
        .flat_map(|(_, m)| [m.next_check, m.farewell.due_at()])
        .flatten()
        .min()
}

/// The end of one member's health check of `(generation, address)`:
/// alive (perhaps restarted or updated), refused at once (checked
/// again shortly, once), or gone. A failure at an address the member
/// has since moved from (a new lease announced while the check ran)
/// says nothing of it: it is checked at the new one on schedule.
/// Returns the member's leave when it is gone.
pub(super) fn checked(
    out: &mut Out<impl FnMut(Event)>,
    members: &mut Members,
    (label, generation, dialled): (&str, u64, &str),
    started: Instant,
    checked: Discovery,
) -> Option<Leave> {
    let now = Instant::now();
    // None: it left (and maybe joined again) meanwhile.
    let (m, make) = members.member_with(label, generation)?;
    let answer = checked
        .sightings
        .into_iter()
        .find(|s| s.host == label && m.answered_by(s));
    if let Some(s) = answer.as_ref().filter(|s| !m.answers_as(s)) {
        let why = format!("health check failed: {}", another_machine(s));
        return Some(Leave {
            why,
            revisit: false,
        });
    }
    if let Some(s) = answer {
        m.failed_once = false;
        m.reset_unanswered = false;
        // Facts told while it was checked are checked next, at once.
        m.next_check = Some(if m.facts != m.facts_checked {
            now
        } else {
            now + make.interval_for(m)
        });
        let node = make.node(&s);
        news(out, label, m, &node, incarnation_of(&s));
        m.node = node;
        m.sighting = s;
        // Its agent answers: a suspicion ends, and a stream that has
        // gone quiet meanwhile is opened afresh.
        if let Some(was) = m.suspicion.take() {
            m.held = false;
            m.dark = None;
            if !m.pulsing(now, m.silence()) && !matches!(m.live, Live::Unsupported) {
                m.live = Live::Off { retry: now };
            }
            let why = format!(
                "its handshake answers again, after {} ms suspect",
                now.saturating_duration_since(was.since).as_millis()
            );
            out.emit(
                Kind::Up,
                label,
                Some(&m.node),
                m.incarnation.as_deref(),
                Some(why),
            );
        }
        return None;
    }
    if m.sighting.addr != dialled {
        tracing::debug!(
            "{label}: moved to {} while checked at {dialled}",
            m.sighting.addr
        );
        m.next_check = Some(now + make.interval());
        return None;
    }
    let reason = checked
        .problems
        .iter()
        .find(|p| p.host == label)
        .map_or("the check lost it", |p| p.reason.as_str())
        .to_string();
    // Its stream's pulses vouch for it: a handshake lost to a flood of
    // connections, or to a busy box, is not a death.
    if m.pulsing(now, m.silence()) {
        tracing::debug!("{label}: health check failed ({reason}) while it pulses; kept");
        m.failed_once = false;
        m.next_check = Some(now + make.interval());
        return None;
    }
    let quick = now.saturating_duration_since(started) < health::SETTLED_AFTER;
    if !m.failed_once && quick {
        tracing::debug!("{label}: health check refused ({reason}); checking again");
        m.failed_once = true;
        m.next_check = Some(now + health::RECHECK_AFTER);
        return None;
    }
    if quick {
        // Refused (or answered wrongly) twice: its host is up and its
        // agent is not.
        return Some(Leave::revisited(format!("health check failed: {reason}")));
    }
    // Its stream was reset (a stalled agent's is not) and now its port
    // proves nothing for a whole round: no proof, no suspicion. Another
    // host took its address (and accepts there), or its agent hangs.
    if m.reset_unanswered {
        let why = format!(
            "its liveness connection was reset, and what accepts connections at {dialled} \
             proves nothing for a whole handshake round ({reason}): another host has its \
             address, or its agent hangs"
        );
        return Some(Leave::revisited(why));
    }
    // Unanswered for the whole round: a stalled agent or a vanished
    // host, which a dial tells apart. Checked again on schedule.
    tracing::debug!("{label}: health check unanswered ({reason}); dialling its port");
    m.failed_once = false;
    m.next_check = Some(now + make.interval());
    members.dial_soon(label, ProbeFor::Check);
    None
}
