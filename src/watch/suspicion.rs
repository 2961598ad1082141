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

use super::event::{Event, Kind, Out};
use super::health::HEALTH_INTERVAL;
use super::liveness::{dial_cause, Liveness, MemberPulses, Reach, Tagged, Told, FOLLOW_RETRY};
use super::liveness::{Abort, Beat, ProbeFor};
use super::local::LocalHealth;
use super::member::{Live, Member, Suspicion};
use super::members::{Leave, Members};
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

/// The suspicion part: the members' streams (where they send what they
/// hear, and how many were opened), and the knobs that judge a silence.
/// Its state per member is in the member ([`super::member::Member`]'s
/// `live`, `suspicion`, `dark`, `held`, `probing`): the table is handed in
/// ([`Members`]), and a member found gone is returned as a [`Leave`].
pub(super) struct Suspicions {
    /// Where streams send what they hear (set while the engine runs).
    pulses: Option<tokio::sync::mpsc::UnboundedSender<Tagged>>,
    /// Streams opened so far: each one's id.
    streams: u64,
    /// How long a member may be suspect before it is `left`.
    timeout: Duration,
    /// How many nodes the cluster has (0: not known; the members seen).
    cluster_size: usize,
}

impl Suspicions {
    /// No streams yet; suspects left after `timeout`, partitions judged
    /// against a cluster of `cluster_size` nodes (or the members seen).
    pub(super) fn new(timeout: Duration, cluster_size: usize) -> Self {
        Suspicions {
            pulses: None,
            streams: 0,
            timeout,
            cluster_size,
        }
    }

    /// Sets the cluster's size unless one was given.
    pub(super) fn size_unless_set(&mut self, nodes: usize) {
        if self.cluster_size == 0 {
            self.cluster_size = nodes;
        }
    }

    /// Streams send what they hear to `tx` (`None`: the engine stopped).
    pub(super) fn listen(&mut self, tx: Option<tokio::sync::mpsc::UnboundedSender<Tagged>>) {
        self.pulses = tx;
    }

    /// Opens the streams due now (members just joined, or whose last
    /// stream failed [`FOLLOW_RETRY`] ago).
    pub(super) fn due_follows<L: Liveness>(
        &mut self,
        members: &mut Members,
        liveness: &L,
        now: Instant,
    ) {
        let Some(tx) = self.pulses.clone() else {
            return;
        };
        for (label, m) in members.each_mut() {
            let Live::Off { retry } = m.live else {
                continue;
            };
            if retry > now {
                continue;
            }
            self.streams += 1;
            let beat = Beat::new();
            let to = MemberPulses {
                label: label.clone(),
                generation: m.generation,
                stream: self.streams,
                tx: tx.clone(),
                beat: beat.clone(),
            };
            let (live, s) = (liveness.clone(), m.sighting.clone());
            let task = tokio::spawn(async move { live.follow(s, to).await });
            m.live = Live::Following {
                _task: Abort(task.abort_handle()),
                id: self.streams,
                heard: now,
                open: false,
                bound: false,
                beat,
            };
        }
    }

    /// What a stream told; the member's leave when it is gone (its agent
    /// said goodbye on it).
    pub(super) fn pulsed(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        members: &mut Members,
        t: Tagged,
    ) -> Option<Leave> {
        let now = Instant::now();
        let m = members.member_of(&t.label, t.generation)?;
        let Live::Following {
            id,
            heard,
            open,
            bound,
            ..
        } = &mut m.live
        else {
            return None;
        };
        if *id != t.stream {
            return None; // a stream replaced since
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
                    // Proved by the key the member was admitted with, not
                    // merely by none at all.
                    *bound = pinned.is_some() && node_key == pinned;
                    *heard = now;
                    m.reset_unanswered = false;
                    return None;
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
                pulsing(out, &t.label, m, now);
            }
            Told::Facts(f) => {
                // News (or the first word of a new stream) is checked by
                // handshake now; the same facts again are no news.
                if m.facts_checked.as_deref() != Some(f.as_str()) && m.next_check.is_some() {
                    m.next_check = Some(now);
                }
                m.facts = Some(f);
            }
            Told::Bye => {
                let why = "goodbye on its liveness connection (its agent is stopping)";
                return Some(Leave::revisited(why.to_string()));
            }
            Told::Ended { why, reset } => {
                tracing::debug!("{}: {why}; dialling its port", t.label);
                m.reset_unanswered |= reset;
                m.next_check = m.next_check.map(|c| c.min(now + HEALTH_INTERVAL));
                m.live = Live::Off {
                    retry: now + FOLLOW_RETRY,
                };
                members.dial_soon(&t.label, ProbeFor::Ended);
            }
            Told::Unsupported => {
                m.live = Live::Unsupported;
                m.next_check = m.next_check.map(|c| c.min(now + HEALTH_INTERVAL));
            }
            Told::Failed { why, refused } => {
                tracing::debug!("{}: its stream could not be opened: {why}", t.label);
                m.next_check = m.next_check.map(|c| c.min(now + HEALTH_INTERVAL));
                m.live = Live::Off {
                    retry: now + FOLLOW_RETRY,
                };
                if refused {
                    members.dial_soon(&t.label, ProbeFor::Ended);
                }
            }
        }
        None
    }

    /// The members whose pulses are news (suspect or dark ones): their
    /// streams are asked to pass the next one on as a message, and one that
    /// already pulsed since (its pulse stored before it was asked) is
    /// taken as pulsing now. Every tick.
    pub(super) fn beats(
        &self,
        out: &mut Out<impl FnMut(Event)>,
        members: &mut Members,
        now: Instant,
    ) {
        for (label, m) in members.each_mut() {
            let Some(since) = m.suspicion.as_ref().map(|s| s.since).or(m.dark) else {
                continue;
            };
            let Live::Following {
                beat, open: true, ..
            } = &m.live
            else {
                continue;
            };
            beat.want();
            if beat.last().is_some_and(|b| b > since) {
                pulsing(out, label, m, now);
            }
        }
    }

    /// The dials to start now: those asked for, members whose stream went
    /// silent, and suspect or held members due for another.
    pub(super) fn due_probes(
        &self,
        members: &mut Members,
        health: &LocalHealth,
        now: Instant,
    ) -> Vec<Probe> {
        let mut due: Vec<(String, ProbeFor)> = members.take_wanted();
        for (label, m) in members.each() {
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
                now.saturating_duration_since(health.quiet_since(h)) >= m.silence()
            });
            if silent {
                due.push((label.clone(), ProbeFor::Silence));
            }
        }
        let mut probes = Vec::new();
        for (label, why) in due {
            let Some(m) = members.member_mut(&label) else {
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

    /// The end of a dial of member `label`, started at `started`; the
    /// member's leave when its port refuses connections.
    pub(super) fn reached(
        &self,
        out: &mut Out<impl FnMut(Event)>,
        (members, health): (&mut Members, &LocalHealth),
        (label, generation, why, started): (&str, u64, ProbeFor, Instant),
        reach: Reach,
    ) -> Option<Leave> {
        let now = Instant::now();
        let trusted = reach == Reach::Refused || health.trusts(started);
        let m = members.member_of(label, generation)?;
        m.probing = false;
        if !trusted {
            tracing::debug!("{label}: a dial overlapped the watch's own stall; dialled again");
            return None;
        }
        // A stream pulsing now outranks a dial's verdict from before.
        if why != ProbeFor::Ended && m.pulsing(now, m.silence()) {
            m.dark = None;
            return None;
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
                return Some(Leave::revisited(why));
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
                    return None; // the new stream tells
                }
                if m.suspicion.is_none() {
                    m.suspicion = Some(Suspicion {
                        since: now,
                        next_probe: now + SUSPECT_PROBE,
                    });
                    let why = format!(
                        "{cause}, while its host accepts connections: a stalled or busy agent, \
                         not yet dead (left after {} s more of this)",
                        self.timeout.as_secs()
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
        None
    }

    /// Suspicions that timed out: each member's leave. The first half of
    /// the tick's judgement; the engine departs them before the second
    /// ([`Suspicions::due_dark`]), which counts who is left.
    pub(super) fn expired(&self, members: &Members, now: Instant) -> Vec<(String, Leave)> {
        let timeout = self.timeout;
        // Held members too: a partition explains a silence, it does not
        // keep a member for ever. One that nothing has heard from for the
        // whole suspicion timeout is left, whatever the reason.
        let expired: Vec<(String, Duration, bool)> = members
            .each()
            .filter_map(|(l, m)| {
                let s = m.suspicion.as_ref()?;
                let for_ = now.saturating_duration_since(s.since);
                (for_ >= timeout).then(|| (l.clone(), for_, m.held))
            })
            .collect();
        expired
            .into_iter()
            .map(|(label, for_, held)| {
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
                (label, Leave::revisited(why))
            })
            .collect()
    }

    /// Dark members whose hold ended: vanished (each one's leave), or a
    /// partition (reported here, and nobody left).
    pub(super) fn due_dark(
        &self,
        out: &mut Out<impl FnMut(Event)>,
        members: &mut Members,
        now: Instant,
    ) -> Vec<(String, Leave)> {
        let dark: Vec<String> = members
            .each()
            .filter(|(_, m)| m.dark.is_some() || m.held)
            .map(|(l, _)| l.clone())
            .collect();
        let cluster = self.cluster_size.max(members.size());
        let partition = dark.len() >= 2 && dark.len() * 2 > cluster;
        let held = members.each().filter(|(_, m)| m.held).count();
        if !partition && held > 0 {
            // The dark ones are a minority again: each one still held is
            // dialled afresh and judged on its own (dark again: vanished;
            // back: a new stream, then `up`).
            let released: Vec<String> = members
                .each_mut()
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
                members.dial_soon(&label, ProbeFor::Suspect);
            }
        }
        let due: Vec<String> = members
            .each()
            .filter(|(_, m)| !m.held && m.dark.is_some_and(|d| d + PARTITION_HOLD <= now))
            .map(|(l, _)| l.clone())
            .collect();
        if due.is_empty() {
            return Vec::new();
        }
        if partition {
            self.partition(out, members, &dark, now);
            return Vec::new();
        }
        let mut leaves = Vec::new();
        for label in due {
            let Some(m) = members.member(&label) else {
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
            leaves.push((label, Leave::revisited(why)));
        }
        leaves
    }

    /// More than half of the cluster is dark: the `dark` members held (each
    /// a suspect), and one `partitioned` event naming both sides.
    fn partition(
        &self,
        out: &mut Out<impl FnMut(Event)>,
        members: &mut Members,
        dark: &[String],
        now: Instant,
    ) {
        for label in dark {
            let Some(m) = members.member_mut(label) else {
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
        let reachable: Vec<String> = members
            .each()
            .filter(|(_, m)| !m.held)
            .map(|(l, _)| l.clone())
            .collect();
        let all_dark = dark.to_vec();
        let reason = format!(
            "{} of {} members went dark together (cluster of {}): a partition, or this \
             coordinator's own link; none is reported left while it lasts",
            all_dark.len(),
            members.size(),
            self.cluster_size.max(members.size())
        );
        tracing::warn!("{reason}: unreachable {all_dark:?}");
        out.partitioned(reachable, all_dark, reason);
    }
}

/// Member `label` pulses: no longer dark, and `up` if it was suspect.
fn pulsing(out: &mut Out<impl FnMut(Event)>, label: &str, m: &mut Member, now: Instant) {
    m.dark = None;
    if let Some(s) = m.suspicion.take() {
        m.held = false;
        let why = format!(
            "it pulses again, after {} ms suspect",
            now.saturating_duration_since(s.since).as_millis()
        );
        out.emit(
            Kind::Up,
            label,
            Some(&m.node),
            m.incarnation.as_deref(),
            Some(why),
        );
    }
}
