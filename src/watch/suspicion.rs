//! **Between up and left** — what the engine does with what members'
//! streams tell ([`super::liveness`]), with the dials of silent members,
//! and with its own health:
//!
//! - a pulse after a suspicion is `up` at once;
//! - a dial that a silent member's host accepts makes it `suspect`, which
//!   ends in `up` when it pulses (or its handshake answers) again, or in
//!   `left` after the suspicion timeout ([`super::engine::SUSPECT_TIMEOUT`] by default);
//! - a refused dial is a confirmed death: `left`;
//! - a dial nobody answers makes the member dark: `left` as vanished after
//!   [`PARTITION_HOLD`], unless at least two members and more than half of
//!   the cluster (the larger of its file's nodes and the members seen) are
//!   dark together, which is a partition: one `partitioned` event, and the
//!   dark members held as suspects, not left while it lasts, up to the
//!   suspicion timeout. They are dialled every [`SUSPECT_PROBE`], and each
//!   is `up` as soon as it is reachable and pulses again. When the dark
//!   ones are no longer a majority, those still dark are judged one by one
//!   again.
//! - **local health** ([`super::local`]): the engine ticks every 50 ms; a
//!   tick more than 250 ms late means the watch itself was not running (SIGSTOPped,
//!   its cores saturated, the machine suspended), and then nobody's
//!   silence counts from before the stall, and no dial that overlapped it
//!   is believed unless it was refused (a refusal is the host's own word).
//!   A stalled observer would otherwise accuse every member at once
//!   (Lifeguard's local-health awareness, reduced to the one measure a
//!   single observer has: its own scheduling delay on the monotonic clock).

use super::engine::Watch;
use super::event::{Event, Kind, Out};
use super::inputs::Check;
use super::liveness::{
    dial_cause, Liveness, MemberPulses, Reach, Tagged, Told, FOLLOW_RETRY, SILENT_AFTER,
};
use super::liveness::{Abort, ProbeFor};
use super::member::{Live, Suspicion};
use crate::sighting::Sighting;
use std::time::Duration;
use tokio::time::Instant;

/// How long a dark member waits for others to go dark with it before it
/// is left as vanished: the members of one partition go silent within a
/// pulse interval of each other, and their dials end within as much.
pub(crate) const PARTITION_HOLD: Duration = Duration::from_millis(400);

/// How often a suspect or held member is dialled again.
pub(crate) const SUSPECT_PROBE: Duration = Duration::from_secs(1);

/// A dial to start: the member, its membership, why, and whom.
pub(super) struct Probe {
    pub(super) label: String,
    pub(super) generation: u64,
    pub(super) why: ProbeFor,
    pub(super) sighting: Sighting,
}

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
    /// Opens the streams due now (members just joined, or whose last
    /// stream failed [`FOLLOW_RETRY`] ago).
    pub(super) fn due_follows(&mut self, now: Instant) {
        let Some(tx) = self.pulses.clone() else {
            return;
        };
        for (label, m) in &mut self.members {
            let Live::Off { retry } = m.live else {
                continue;
            };
            if retry > now {
                continue;
            }
            self.streams += 1;
            let to = MemberPulses {
                label: label.clone(),
                generation: m.generation,
                stream: self.streams,
                tx: tx.clone(),
            };
            let (live, s) = (self.liveness.clone(), m.sighting.clone());
            let task = tokio::spawn(async move { live.follow(s, to).await });
            m.live = Live::Following {
                _task: Abort(task.abort_handle()),
                id: self.streams,
                heard: now,
                open: false,
            };
        }
    }

    /// What a stream told.
    pub(super) fn pulsed(&mut self, out: &mut Out<impl FnMut(Event)>, t: Tagged) {
        let now = Instant::now();
        let Some(m) = self
            .members
            .get_mut(&t.label)
            .filter(|m| m.generation == t.generation)
        else {
            return;
        };
        let Live::Following {
            id, heard, open, ..
        } = &mut m.live
        else {
            return;
        };
        if *id != t.stream {
            return; // a stream replaced since
        }
        match t.told {
            Told::Opened {
                id,
                incarnation,
                node_key,
            } => {
                let pinned = m.sighting.caps.as_ref().and_then(|c| c.node_key.clone());
                let same = id.as_deref() == m.sighting.id()
                    && incarnation == m.incarnation
                    && (pinned.is_none() || node_key == pinned);
                if same {
                    *open = true;
                    *heard = now;
                    m.reset_unanswered = false;
                    return;
                }
                // Another machine, or another incarnation, answers there:
                // the member's handshake settles which (admission, pins and
                // all), now.
                tracing::debug!(
                    "{}: its stream was answered by id {id:?}, incarnation {incarnation:?}; \
                     checking it now",
                    t.label
                );
                m.live = Live::Off {
                    retry: now + FOLLOW_RETRY,
                };
                if m.next_check.is_some() {
                    m.next_check = Some(now);
                }
            }
            Told::Pulse => {
                *heard = now;
                m.dark = None;
                if let Some(s) = m.suspicion.take() {
                    m.held = false;
                    let why = format!(
                        "it pulses again, after {} ms suspect",
                        now.saturating_duration_since(s.since).as_millis()
                    );
                    out.emit(
                        Kind::Up,
                        &t.label,
                        Some(&m.node),
                        m.incarnation.as_deref(),
                        Some(why),
                    );
                }
            }
            Told::Bye => {
                let why = "goodbye on its liveness connection (its agent is stopping)";
                self.gone(out, &t.label, why.to_string(), true);
            }
            Told::Ended { why, reset } => {
                tracing::debug!("{}: {why}; dialling its port", t.label);
                m.reset_unanswered |= reset;
                m.live = Live::Off {
                    retry: now + FOLLOW_RETRY,
                };
                self.probe_soon(&t.label, ProbeFor::Ended);
            }
            Told::Unsupported => m.live = Live::Unsupported,
            Told::Failed { why, refused } => {
                tracing::debug!("{}: its stream could not be opened: {why}", t.label);
                m.live = Live::Off {
                    retry: now + FOLLOW_RETRY,
                };
                if refused {
                    self.probe_soon(&t.label, ProbeFor::Ended);
                }
            }
        }
    }

    /// Asks for member `label` to be dialled at the next turn of the loop.
    pub(super) fn probe_soon(&mut self, label: &str, why: ProbeFor) {
        if !self.wanted.iter().any(|(l, _)| l == label) {
            self.wanted.push((label.to_string(), why));
        }
    }

    /// The dials to start now: those asked for, members whose stream went
    /// silent, and suspect or held members due for another.
    pub(super) fn due_probes(&mut self, now: Instant) -> Vec<Probe> {
        let mut due: Vec<(String, ProbeFor)> = std::mem::take(&mut self.wanted);
        for (label, m) in &self.members {
            if m.probing || due.iter().any(|(l, _)| l == label) {
                continue;
            }
            if let Some(s) = &m.suspicion {
                if s.next_probe <= now {
                    due.push((label.clone(), ProbeFor::Suspect));
                }
                continue;
            }
            if m.dark.is_some() {
                continue; // judged at its hold's end
            }
            let silent = m.heard().is_some_and(|h| {
                now.saturating_duration_since(self.health.quiet_since(h)) >= SILENT_AFTER
            });
            if silent {
                due.push((label.clone(), ProbeFor::Silence));
            }
        }
        let mut probes = Vec::new();
        for (label, why) in due {
            let Some(m) = self.members.get_mut(&label) else {
                continue;
            };
            if m.probing {
                continue;
            }
            m.probing = true;
            if let Some(s) = &mut m.suspicion {
                s.next_probe = now + SUSPECT_PROBE;
            }
            probes.push(Probe {
                label,
                generation: m.generation,
                why,
                sighting: m.sighting.clone(),
            });
        }
        probes
    }

    /// The end of a dial of member `label`, started at `started`.
    pub(super) fn reached(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        (label, generation, why, started): (&str, u64, ProbeFor, Instant),
        reach: Reach,
    ) {
        let now = Instant::now();
        let trusted = reach == Reach::Refused || self.health.trusts(started);
        let Some(m) = self
            .members
            .get_mut(label)
            .filter(|m| m.generation == generation)
        else {
            return;
        };
        m.probing = false;
        if !trusted {
            tracing::debug!("{label}: a dial overlapped the watch's own stall; dialled again");
            return;
        }
        // A stream pulsing now outranks a dial's verdict from before.
        if why != ProbeFor::Ended && m.pulsing(now, SILENT_AFTER) {
            m.dark = None;
            return;
        }
        let silent_for = m
            .heard()
            .map_or(now.saturating_duration_since(started), |h| {
                now.saturating_duration_since(h)
            });
        let cause = dial_cause(why, silent_for);
        match reach {
            Reach::Refused => {
                let why = format!("{cause}, and its port refuses connections: its agent is gone");
                self.gone(out, label, why, true);
            }
            Reach::Accepted => {
                m.dark = None;
                let stuck = m.held || !matches!(m.live, Live::Following { open: true, .. });
                if stuck && !matches!(m.live, Live::Unsupported) {
                    // Back after a partition (its old stream may sit in
                    // TCP's back-off for seconds), or its stream ended:
                    // a fresh one at once.
                    m.live = Live::Off { retry: now };
                }
                if why == ProbeFor::Ended || m.held {
                    return; // the new stream tells
                }
                if m.suspicion.is_none() {
                    m.suspicion = Some(Suspicion {
                        since: now,
                        next_probe: now + SUSPECT_PROBE,
                    });
                    let why = format!(
                        "{cause}, while its host accepts connections: a stalled or busy agent, \
                         not yet dead (left after {} s more of this)",
                        self.tuning.suspect_timeout.as_secs()
                    );
                    out.emit(
                        Kind::Suspect,
                        label,
                        Some(&m.node),
                        m.incarnation.as_deref(),
                        Some(why),
                    );
                }
            }
            Reach::Silent => {
                if !m.held {
                    m.dark.get_or_insert(now);
                }
            }
        }
    }

    /// Suspicions that timed out, and dark members whose hold ended:
    /// vanished, or a partition.
    pub(super) fn due_suspicions(&mut self, out: &mut Out<impl FnMut(Event)>, now: Instant) {
        let timeout = self.tuning.suspect_timeout;
        // Held members too: a partition explains a silence, it does not
        // keep a member for ever. One that nothing has heard from for the
        // whole suspicion timeout is left, whatever the reason.
        let expired: Vec<(String, Duration, bool)> = self
            .members
            .iter()
            .filter_map(|(l, m)| {
                let s = m.suspicion.as_ref()?;
                let for_ = now.saturating_duration_since(s.since);
                (for_ >= timeout).then(|| (l.clone(), for_, m.held))
            })
            .collect();
        for (label, for_, held) in expired {
            let why = if held {
                format!(
                    "unreachable for {} s in a partition (the suspicion timeout)",
                    for_.as_secs()
                )
            } else {
                format!(
                    "suspect for {} s without a pulse or an answer (the suspicion timeout)",
                    for_.as_secs()
                )
            };
            self.gone(out, &label, why, true);
        }
        let dark: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.dark.is_some() || m.held)
            .map(|(l, _)| l.clone())
            .collect();
        let cluster = self.tuning.cluster_size.max(self.members.len());
        let partition = dark.len() >= 2 && dark.len() * 2 > cluster;
        let held = self.members.values().filter(|m| m.held).count();
        if !partition && held > 0 {
            // The dark ones are a minority again: each one still held is
            // dialled afresh and judged on its own (dark again: vanished;
            // back: a new stream, then `up`).
            let released: Vec<String> = self
                .members
                .iter_mut()
                .filter(|(_, m)| m.held)
                .map(|(l, m)| {
                    m.held = false;
                    // Its old stream may sit in TCP's back-off for seconds.
                    if !matches!(m.live, Live::Unsupported) {
                        m.live = Live::Off { retry: now };
                    }
                    l.clone()
                })
                .collect();
            for label in released {
                self.probe_soon(&label, ProbeFor::Suspect);
            }
        }
        let due: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| !m.held && m.dark.is_some_and(|d| d + PARTITION_HOLD <= now))
            .map(|(l, _)| l.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        if partition {
            self.partition(out, &dark, now);
            return;
        }
        for label in due {
            let Some(m) = self.members.get(&label) else {
                continue;
            };
            let silent = m
                .heard()
                .map(|h| {
                    format!(
                        "no pulse for {} ms",
                        now.saturating_duration_since(h).as_millis()
                    )
                })
                .unwrap_or_else(|| "its checks went unanswered".to_string());
            let why = format!(
                "vanished: {silent}, and nothing answers at {}",
                m.sighting.addr
            );
            self.gone(out, &label, why, true);
        }
    }

    /// More than half of the cluster is dark: the `dark` members held (each
    /// a suspect), and one `partitioned` event naming both sides.
    fn partition(&mut self, out: &mut Out<impl FnMut(Event)>, dark: &[String], now: Instant) {
        for label in dark {
            let Some(m) = self.members.get_mut(label) else {
                continue;
            };
            m.held = true;
            m.dark = None;
            // Already a suspect (reported), or one from now on through the
            // partition event.
            if m.suspicion.is_none() {
                m.suspicion = Some(Suspicion {
                    since: now,
                    next_probe: now + SUSPECT_PROBE,
                });
            }
        }
        let reachable: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| !m.held)
            .map(|(l, _)| l.clone())
            .collect();
        let all_dark = dark.to_vec();
        let reason = format!(
            "{} of {} members went dark together (cluster of {}): a partition, or this \
             coordinator's own link; none is reported left while it lasts",
            all_dark.len(),
            self.members.len(),
            self.tuning.cluster_size.max(self.members.len())
        );
        tracing::warn!("{reason}: unreachable {all_dark:?}");
        out.partitioned(reachable, all_dark, reason);
    }
}
