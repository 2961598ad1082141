//! **A member and its news** — what the engine keeps of each member, and
//! how a fresh answer from its machine becomes `restarted` or `updated`.

use super::event::{Event, Kind, Out};
use super::farewell::Farewell;
use super::liveness::{Abort, Beat};
use super::node::material;
use crate::pipeline::report::AddedNode;
use crate::sighting::Sighting;
use tokio::time::Instant;

/// A current member.
pub(super) struct Member {
    pub(super) sighting: Sighting,
    pub(super) node: AddedNode,
    /// Caps as first seen by mDNS (TXT), to tell a real update from the
    /// handshake's fresher copy of the same announcement.
    pub(super) announced: Option<String>,
    /// The incarnation its handshake told, to tell a restart.
    pub(super) incarnation: Option<String>,
    /// Which membership of this label this is: a check started for an
    /// earlier one (it left and joined again meanwhile) is not this one's.
    pub(super) generation: u64,
    /// When its next health check is due (`None`: one is under way).
    pub(super) next_check: Option<Instant>,
    /// Its last check was refused at once; the next failure is a leave.
    pub(super) failed_once: bool,
    /// Its stream failed with a reset, and nothing has answered as it
    /// since: a stalled agent's kernel keeps its connections (no reset),
    /// so a port that then accepts and proves nothing for a whole round
    /// is another host at its address, or an agent that hangs.
    pub(super) reset_unanswered: bool,
    /// The goodbyes said for it, and their checks.
    pub(super) farewell: Farewell,
    /// A confirmed sighting under its name that is not where, or not what,
    /// the member is (another address, or another node id), with its
    /// announcement: held until the member's own check tells whether the
    /// member is still there ([`Member::answers_as`]). Only the latest.
    pub(super) contender: Option<(Sighting, Option<String>)>,
    /// Its liveness stream ([`super::liveness`]).
    pub(super) live: Live,
    /// Since when it is suspect (reported `suspect`, or unreachable in a
    /// `partitioned`), and when it is dialled next.
    pub(super) suspicion: Option<Suspicion>,
    /// A dial of its port is under way.
    pub(super) probing: bool,
    /// When a dial found nothing answering at its address: the member is
    /// dark, and vanished unless a partition holds it.
    pub(super) dark: Option<Instant>,
    /// Dark in a reported partition: held, not left, until it answers.
    pub(super) held: bool,
    /// The digest of its facts its stream last told
    /// ([`rlx_proto::handshake::follow::facts_of`]), when its agent sends
    /// one.
    pub(super) facts: Option<String>,
    /// What [`Member::facts`] was when its last health check began: a
    /// digest that differs is news, checked by handshake at once.
    pub(super) facts_checked: Option<String>,
}

/// A member's liveness stream.
#[derive(Debug)]
pub(super) enum Live {
    /// Not followed now: a stream is opened at `retry`.
    Off { retry: Instant },
    /// Opening (`open` false) or open: `heard` is its last pulse (or the
    /// opening), `id` tells its messages from a replaced stream's.
    Following {
        _task: Abort,
        id: u64,
        heard: Instant,
        open: bool,
        /// Its opening proved the node key the member was admitted with
        /// (the follow reply's signature, bound to this connection): the
        /// stream is a session of that key, and what it tells is the
        /// member's own word until it ends ([`Member::bound_session`]).
        bound: bool,
        /// Its pulses' times, stored by its task ([`Beat`]).
        beat: std::sync::Arc<Beat>,
    },
    /// The agent predates the stream: handshakes only.
    Unsupported,
}

/// A member's suspicion.
#[derive(Debug, Clone)]
pub(super) struct Suspicion {
    pub(super) since: Instant,
    pub(super) next_probe: Instant,
}

impl Member {
    /// A new member: checked first at `next_check`, its stream opened at
    /// once.
    pub(super) fn new(
        sighting: Sighting,
        node: AddedNode,
        (announced, incarnation): (Option<String>, Option<String>),
        generation: u64,
        next_check: Instant,
    ) -> Member {
        Member {
            sighting,
            node,
            announced,
            incarnation,
            generation,
            next_check: Some(next_check),
            failed_once: false,
            reset_unanswered: false,
            farewell: Default::default(),
            contender: None,
            live: Live::Off {
                retry: Instant::now(),
            },
            suspicion: None,
            probing: false,
            dark: None,
            held: false,
            facts: None,
            facts_checked: None,
        }
    }

    /// When its stream last told anything, if one is open: its pulses
    /// vouch for it.
    pub(super) fn heard(&self) -> Option<Instant> {
        match &self.live {
            Live::Following {
                heard,
                open: true,
                beat,
                ..
            } => Some(beat.last().map_or(*heard, |b| b.max(*heard))),
            _ => None,
        }
    }

    /// Whether its open stream tells of its facts, so that a handshake is
    /// needed only when they change ([`super::health::FACTS_INTERVAL`] at
    /// most between two, as a net).
    pub(super) fn told_facts(&self) -> bool {
        self.facts.is_some() && matches!(self.live, Live::Following { open: true, .. })
    }

    /// Whether its periodic handshake can be left out: its stream is a
    /// session bound to its pinned node key (the follow reply was signed
    /// by that key on this connection), it pulses, its facts are those
    /// last checked, and nothing about it is in doubt (no suspicion, no
    /// failed check, no claim, no goodbye). The handshake would prove the
    /// same key over again and return the same facts: at 200 members
    /// that was three signature checks a second proving nothing new
    /// (issue 41). A change of facts or key (the key is in the digest),
    /// the stream's end, or a doubt brings the handshake back at once or
    /// within [`super::health::HEALTH_INTERVAL`].
    pub(super) fn bound_session(&self, now: Instant) -> bool {
        let bound = matches!(
            self.live,
            Live::Following {
                open: true,
                bound: true,
                ..
            }
        );
        bound
            && self.node.identity == crate::sighting::Pinning::Pinned
            && self.facts.is_some()
            && self.facts == self.facts_checked
            && self.suspicion.is_none()
            && self.dark.is_none()
            && !self.failed_once
            && !self.reset_unanswered
            && self.contender.is_none()
            && self.farewell.due_at().is_none()
            && self.pulsing(now, self.silence())
    }

    /// Whether it is at rest: followed by an open stream (or by
    /// handshakes alone, its agent predating the stream), with no
    /// suspicion, darkness, dial or claim about it. The engine's tick has
    /// nothing to do for a member at rest until [`Member::next_due`].
    pub(super) fn at_rest(&self) -> bool {
        matches!(
            self.live,
            Live::Following { open: true, .. } | Live::Unsupported
        ) && self.suspicion.is_none()
            && self.dark.is_none()
            && !self.held
            && !self.probing
            && self.contender.is_none()
    }

    /// For a member at rest, the first time the engine has work for it:
    /// its health check, its goodbye check, or the end of the silence
    /// after which it is dialled (counted as [`super::suspicion`] counts
    /// it, from `quiet_since` its last pulse). Pulses only move the last
    /// of these later, so none comes sooner without news to the engine.
    pub(super) fn next_due(&self, quiet_since: impl Fn(Instant) -> Instant) -> Option<Instant> {
        let silent = self.heard().map(|h| quiet_since(h) + self.silence());
        [self.next_check, self.farewell.due_at(), silent]
            .into_iter()
            .flatten()
            .min()
    }

    /// How long it may send nothing before it is dialled: by the pace its
    /// agent's pulses say it keeps ([`super::liveness::silence_after`]).
    pub(super) fn silence(&self) -> std::time::Duration {
        match &self.live {
            Live::Following { beat, .. } => super::liveness::silence_after(beat.pace()),
            _ => super::liveness::SILENT_AFTER,
        }
    }

    /// Whether its stream pulsed within `within` of `now`.
    pub(super) fn pulsing(&self, now: Instant, within: std::time::Duration) -> bool {
        self.heard()
            .is_some_and(|h| now.saturating_duration_since(h) < within)
    }

    /// Whether `s` is this member where it is: the same node id at the same
    /// address. Anything else under its name (a forged SRV/A/TXT pointing
    /// at another agent, a machine that took its name, or its own move to
    /// a new lease) is a claim the member's check must settle, never an
    /// update of the member on its own.
    pub(super) fn is_here(&self, s: &Sighting) -> bool {
        self.sighting.addr == s.addr && self.answers_as(s)
    }

    /// Whether `s`, what a check of this member returned, is an answer of
    /// its agent. Admission without a key passes a port that accepts TCP
    /// but never answers the handshake on what it announced (a bare
    /// listener keeps its TXT caps), and that is exactly what a stalled
    /// agent looks like: for a member whose agent once answered its
    /// handshake, only another handshake is an answer.
    pub(super) fn answered_by(&self, s: &Sighting) -> bool {
        s.evidence.answered() || !self.sighting.evidence.answered()
    }

    /// Whether the machine that answered `s` is this member's machine (the
    /// same node id): a check of its address that another machine answers
    /// (a reinstall, or a new box on its old lease) finds the member gone.
    pub(super) fn answers_as(&self, s: &Sighting) -> bool {
        self.sighting.id() == s.id()
    }
}

/// Why a contender under member `label`'s name is not taken, while the
/// member still answers where it is.
pub(super) fn contender_refused(label: &str, m: &Member, c: &Sighting) -> String {
    let id = |s: &Sighting| s.id().unwrap_or("none").to_string();
    format!(
        "announced as {label} at {} (id {}), while {label} (id {}) still answers at {}: \
         a forged record, or two agents claiming one name; not taken",
        c.addr,
        id(c),
        id(&m.sighting),
        m.sighting.addr
    )
}

/// Reports what changed in member `m` now that its machine answered with
/// `node` and incarnation `inc`: `restarted` when the incarnation changed
/// (whatever else did: a restart is what the runtime must act on), else
/// `updated` when something material did; and `worker` when its worker
/// started or stopped listening. Records the incarnation.
pub(super) fn news(
    out: &mut Out<impl FnMut(Event)>,
    label: &str,
    m: &mut Member,
    node: &AddedNode,
    inc: Option<String>,
) {
    if inc != m.incarnation {
        let say = |i: &Option<String>| i.clone().unwrap_or_else(|| "none".into());
        let why = format!("incarnation {} -> {}", say(&m.incarnation), say(&inc));
        out.emit(
            Kind::Restarted,
            label,
            Some(node),
            inc.as_deref(),
            Some(why),
        );
        m.incarnation = inc;
    } else if let Some(why) = material(&m.node, node) {
        out.emit(Kind::Updated, label, Some(node), inc.as_deref(), Some(why));
    }
    let held_changed =
        node.worker_held_by.is_some() && node.worker_held_by != m.node.worker_held_by;
    if let Some(up) = node
        .worker_listening
        .filter(|&up| Some(up) != m.node.worker_listening || held_changed)
    {
        let why = if let Some(held) = &node.worker_held_by {
            format!(
                "its worker port is held by {}, not an RLX worker ({})",
                crate::escape::escape_line(held),
                node.addr
            )
        } else if up {
            format!("its worker listens on {}", node.addr)
        } else {
            format!(
                "nothing listens on its worker port any more ({})",
                node.addr
            )
        };
        out.emit(
            Kind::Worker,
            label,
            Some(node),
            m.incarnation.as_deref(),
            Some(why),
        );
    }
}

/// The reason a member is not where it was when its address answers as
/// another machine `other`.
pub(super) fn another_machine(other: &Sighting) -> String {
    format!(
        "{} answers as another machine (id {})",
        other.addr,
        other.id().unwrap_or("none")
    )
}

/// When each instance last left, and as which incarnation (at most
/// [`MAX_REMEMBERED`](super::admission::MAX_REMEMBERED)): a stopping agent still
/// answers for a moment, so an admission whose handshake started before
/// its instance left, answered by the incarnation that left, is that
/// process's last word, not a join (seen in the lab: `left`, `joined` 20 ms
/// later from a check started before the SIGTERM, then `left` again).
#[derive(Debug, Default)]
pub(super) struct Departures(std::collections::BTreeMap<String, (Instant, Option<String>)>);

impl Departures {
    /// `label` left now, as incarnation `inc`.
    pub(super) fn record(&mut self, label: &str, inc: Option<String>) {
        if self.0.len() >= super::admission::MAX_REMEMBERED {
            self.0.pop_first();
        }
        self.0.insert(label.to_string(), (Instant::now(), inc));
    }

    /// Whether `s`, from a handshake with `label` started at `started`, is
    /// the last word of the incarnation that has left since.
    pub(super) fn last_word(&self, label: &str, started: Instant, s: &Sighting) -> bool {
        self.0
            .get(label)
            .is_some_and(|(at, inc)| *at >= started && *inc == super::node::incarnation_of(s))
    }
}

/// A departed instance to dial again: when, where, and when it left (kept
/// by [`super::goodbyes::Goodbyes`], carried by its job).
#[derive(Debug, Clone)]
pub(crate) struct Revisit {
    pub(super) due: Instant,
    pub(super) sighting: Sighting,
    pub(super) left_at: Instant,
    /// The revisits made so far.
    pub(super) round: u32,
}
