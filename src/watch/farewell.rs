//! **A goodbye is a claim, and is checked** — what `watch` does when mDNS
//! says a member is gone: a goodbye (a record with TTL 0, RFC 6762 §10.1)
//! or mdns-sd's expiry of its records. Anyone on the LAN can send a goodbye
//! for any instance, by multicast or to the coordinator alone, so none is
//! taken at its word: the member's machine is asked (its handshake, with
//! its proof when keyed, through the engine's [`Check`]), and the member
//! leaves only when that check fails.
//!
//! - **A real goodbye is still fast.** An agent that stops closes its port
//!   as it says goodbye, so the check is refused at once and the member
//!   leaves at once. A host that said goodbye and then went silent (powered
//!   off) counts as gone once [`GOODBYE_DEADLINE`] passes without an
//!   answer: a goodbye plus silence is enough, where a health check waits
//!   out a whole handshake round.
//! - **The race at a clean stop.** The agent sends its goodbye and closes
//!   its port at about the same moment, so a check right after a goodbye
//!   can still reach it. An answer from the incarnation that was said
//!   goodbye for is therefore asked again [`GOODBYE_RECHECK`] later, and
//!   only a second answer refutes the goodbye.
//! - **Another incarnation answering** is a restarted agent whose
//!   predecessor's goodbye came late: `restarted`, never `left`.
//! - **Bounded under a flood.** A member has at most one goodbye check
//!   under way and one more waiting (every goodbye heard meanwhile is
//!   folded into it), and its checks start at least [`GOODBYE_SPACING`]
//!   apart: however many goodbyes a stranger sends, each member costs at
//!   most two handshakes per spacing, and a real goodbye among them is
//!   checked within one spacing.

use super::inputs::Check;
use super::liveness::{Liveness, Reach};
use super::node::{incarnation_of, one};
use crate::sighting::{Discovery, Problem, Sighting};
use std::time::Duration;
use tokio::time::Instant;

/// How long a goodbye check waits for the machine's answer before the
/// member counts as gone. A live agent on the LAN answers in milliseconds,
/// and this leaves room for four of the handshake's staggered attempts
/// ([`crate::admit::STAGGER`] apart), so one lost SYN does not make a
/// forged goodbye true. It is short because it adds to the goodbye bound:
/// mdns-sd reports a goodbye about a second after its packet (the TTL 1 of
/// RFC 6762 §10.1), and a member whose host went silent after its goodbye
/// must still be reported left within 2 s of it.
pub(crate) const GOODBYE_DEADLINE: Duration = Duration::from_millis(750);

/// How long after a goodbye check that the same incarnation answered it is
/// asked once more: well past the moment a stopping agent, which says
/// goodbye and closes its port together, has closed it.
pub(crate) const GOODBYE_RECHECK: Duration = Duration::from_millis(250);

/// The shortest time between the starts of two goodbye checks of one
/// member. A real responder sends a record at most once a second (RFC 6762
/// §6), so a second goodbye within a second is never news from the member
/// itself; and one second keeps a real goodbye that comes during a flood
/// of forged ones within the 2 s bound (it waits at most this long, and
/// the check then fails at once).
pub(crate) const GOODBYE_SPACING: Duration = Duration::from_secs(1);

/// How the reason of a goodbye check that timed out begins: the engine
/// dials such a member instead of taking the silence for a leave.
pub(super) const NO_ANSWER: &str = "no answer within";

/// How the reason of such a check ends when its host accepted connections
/// meanwhile: a stalled agent, which is dialled again and made a suspect,
/// never left on a goodbye that anyone could have sent.
pub(super) const HOST_UP: &str = ", while its host accepts connections";

/// One member's goodbye checks: the one waiting, the one under way, and
/// when the last started.
#[derive(Debug, Default, Clone)]
pub(super) struct Farewell {
    /// A goodbye heard and not yet checked: its check starts then.
    due: Option<Instant>,
    /// A goodbye check is under way.
    checking: bool,
    /// When the last goodbye check started.
    last: Option<Instant>,
    /// What the waiting or running check is for when it is not an mDNS
    /// goodbye (a DNS-SD registration gone from the zone), for the reason
    /// of a `left`.
    cause: Option<&'static str>,
}

impl Farewell {
    /// A goodbye heard at `now`: a check waits for it, at the spacing's
    /// end. Returns false when one was waiting already (this goodbye is
    /// folded into it).
    pub(super) fn claimed(&mut self, now: Instant) -> bool {
        if self.due.is_some() {
            return false;
        }
        let earliest = self.last.map_or(now, |t| (t + GOODBYE_SPACING).max(now));
        self.due = Some(earliest);
        true
    }

    /// [`Farewell::claimed`] for another claim than an mDNS goodbye: a
    /// DNS-SD registration missing from a browse of the zone (deleted,
    /// expired, or only missing from one answer), said in the `left`.
    pub(super) fn claimed_because(&mut self, now: Instant, cause: &'static str) -> bool {
        self.cause = Some(cause);
        self.claimed(now)
    }

    /// What the check is for: `"goodbye"`, or the cause it was heard for.
    pub(super) fn cause(&self) -> &'static str {
        self.cause.unwrap_or("goodbye")
    }

    /// Whether the waiting check may start at `now` (none under way, its
    /// time come); if so it is marked under way.
    pub(super) fn start(&mut self, now: Instant) -> bool {
        if self.checking || self.due.is_none_or(|t| t > now) {
            return false;
        }
        self.due = None;
        self.checking = true;
        self.last = Some(now);
        true
    }

    /// When the waiting check may start: `None` when none waits, or while
    /// one is under way (its end wakes the engine).
    pub(super) fn due_at(&self) -> Option<Instant> {
        self.due.filter(|_| !self.checking)
    }

    /// The check under way has ended.
    pub(super) fn done(&mut self) {
        self.checking = false;
        if self.due.is_none() {
            self.cause = None;
        }
    }
}

/// What the goodbyes for members came to since the start: the count a
/// flood of forged ones shows in (each refutation is logged at debug level
/// with these as fields).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct GoodbyeCounts {
    /// Goodbyes heard for members (each source's copy counts).
    pub(super) heard: u64,
    /// Folded into a goodbye check already waiting.
    pub(super) folded: u64,
    /// Goodbye checks run.
    pub(super) checked: u64,
    /// Checks the same incarnation answered: forged goodbyes, or an old
    /// one of the same process delivered late.
    pub(super) refuted: u64,
}

impl GoodbyeCounts {
    /// Logs, at debug level, that a check refuted the goodbye said for
    /// `label`, with the counts so far as fields.
    pub(super) fn log_refuted(&self, label: &str) {
        let GoodbyeCounts {
            heard,
            folded,
            checked,
            refuted,
        } = *self;
        tracing::debug!(
            instance = %label,
            heard,
            folded,
            checked,
            refuted,
            "goodbye refuted: {label} still answers as the same incarnation (a forged \
             goodbye, or an old one delivered late); kept"
        );
    }
}

/// Checks member `s`, said goodbye for while it ran as incarnation `was`:
/// its machine's answer (the same incarnation answering twice,
/// [`GOODBYE_RECHECK`] apart, or another one answering once), or a problem
/// with the reason it is gone (refused, or no answer within
/// [`GOODBYE_DEADLINE`]).
pub(super) async fn check_after_goodbye<C: Check, L: Liveness>(
    (check, live): (C, L),
    s: Sighting,
    was: Option<String>,
) -> Discovery {
    let label = s.host.clone();
    let mut asked = 0;
    loop {
        asked += 1;
        // Its port dialled beside the handshake, for the same time: if the
        // handshake goes unanswered, whether the host accepted connections
        // tells a stalled agent (suspect) from a vanished host (gone).
        let dial = tokio::spawn({
            let (live, s) = (live.clone(), s.clone());
            async move { live.reach(s, GOODBYE_DEADLINE).await }
        });
        let _dial_guard = super::liveness::Abort(dial.abort_handle());
        let Ok(mut checked) =
            tokio::time::timeout(GOODBYE_DEADLINE, check.check(one(s.clone()))).await
        else {
            let up = matches!(dial.await, Ok(Reach::Accepted));
            let why = format!(
                "{NO_ANSWER} {} ms{}",
                GOODBYE_DEADLINE.as_millis(),
                if up { HOST_UP } else { "" }
            );
            return Discovery {
                problems: vec![Problem::stranger(s.source, label, why)],
                ..Default::default()
            };
        };
        let same = checked
            .sightings
            .iter()
            .any(|a| a.host == label && incarnation_of(a) == was);
        if !same || asked == 2 {
            checked.sightings.retain(|a| a.host == label);
            return checked;
        }
        tracing::debug!(
            "{label} answered after its goodbye; asking again in {} ms",
            GOODBYE_RECHECK.as_millis()
        );
        tokio::time::sleep(GOODBYE_RECHECK).await;
    }
}
