//! **How `watch` knows a member is alive between its checks** — one
//! long-lived connection to each member's agent (the liveness stream of
//! docs/protocol.md: a follow hello, then a pulse every
//! [`rlx_proto::handshake::PULSE_INTERVAL`]), and a dial that tells a stalled agent from a
//! vanished host.
//!
//! Why a stream and not faster health checks: a crashed agent's kernel
//! closes its end of the stream at once (a FIN, or a reset), so the engine
//! hears of the crash in about a round trip, where a check every 3 s would
//! wait for its next turn; and silence on a stream that pulses every 300
//! ms is noticed within [`SILENT_AFTER`], for one small packet per pulse
//! instead of a whole handshake.
//!
//! Silence alone is not a death. A box loading a 100 GB checkpoint, or
//! SIGSTOPped, or swapping, sends no pulse either, but its kernel still
//! completes a TCP connection to its agent's port (the connection waits in
//! the listen backlog). So a silent member is dialled ([`Liveness::reach`]):
//!
//! - **accepted**: its host is up and its agent silent: `suspect`, never
//!   `left` until its suspicion times out (the runtime's choice,
//!   [`crate::follow::WatchOptions::suspect_timeout`]);
//! - **refused**: its host is up and nothing listens: the agent is gone,
//!   `left` (a confirmed death);
//! - **silent**: nothing answers within [`REACH_WINDOW`] (power off, link
//!   down, or a partition): the host vanished, `left` unless more than half
//!   of the cluster went dark with it ([`super::suspicion`]).
//!
//! A stream's end (EOF or a reset) is dialled at once the same way: a
//! refusal then is the crash, seen within milliseconds.

use super::poller::{Poller, Sink};
use crate::admit::Rules;
use crate::sighting::Sighting;
use rlx_proto::handshake::HandshakeError;
use rlx_proto::handshake::{follow_in_cluster, Heard};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long a followed member may send nothing before it is dialled:
/// three pulses and a bit. A pulse lost on a lossy link is retransmitted by
/// TCP within its 200 ms minimum RTO, so one loss delays a pulse, and three
/// in a row are needed to look silent; the dial then settles it, so a false
/// alarm costs one connection, never a `left`.
pub(crate) const SILENT_AFTER: Duration = Duration::from_millis(1000);

/// How long a member that pulses every `every` may send nothing before it
/// is dialled: [`SILENT_AFTER`] at the usual pace (300 ms), and three of
/// its pulses and a bit at a slower one (asked of a large cluster,
/// [`pace_for`]). An agent that claims a pace slower than any it is ever
/// asked for ([`rlx_proto::handshake::MAX_PULSE_INTERVAL`]) is judged at
/// that one: a claim of its own cannot hide its stall for longer.
pub(crate) fn silence_after(every: Duration) -> Duration {
    let every = every.min(rlx_proto::handshake::MAX_PULSE_INTERVAL);
    SILENT_AFTER.max(every * 3 + Duration::from_millis(100))
}

/// Pulses a second that a coordinator asks of its whole cluster at most,
/// once it is past a few hundred members: each is a `read` for its
/// stream thread and a wake-up for an agent. 1,000 a second is 300 ms a
/// member up to 300 members (the pace agents keep of their own, so
/// nothing changes there), then slower: 1 s at 1,000 members, where
/// 3,333 pulses a second saturated this project's 2-core lab.
pub(crate) const PULSES_PER_SECOND: u32 = 1_000;

/// The pace a coordinator of `members` asks of each member's agent:
/// `members` / [`PULSES_PER_SECOND`], in steps of 100 ms (so that a
/// growing cluster re-asks every stream once per 100 members, not at
/// every join), within what an agent takes ([`rlx_proto::handshake::pace_of`]).
pub(crate) fn pace_for(members: usize) -> Duration {
    let ms = (members as u64 * 1_000).div_ceil(u64::from(PULSES_PER_SECOND));
    rlx_proto::handshake::pace_of(Duration::from_millis(ms.div_ceil(100) * 100))
}

/// How long a dial of a silent member's port waits for any answer. Its
/// attempts start [`REACH_STAGGER`] apart (six SYNs: at 10% loss each way
/// all six fail about once in 20,000 dials), and a vanished host is
/// declared one window after its silence: [`SILENT_AFTER`] + this +
/// [`super::suspicion::PARTITION_HOLD`] + the pulse phase stays under the
/// 2.5 s the runtime is promised.
pub(crate) const REACH_WINDOW: Duration = Duration::from_millis(900);

/// Delay between the dial's connection attempts (see [`REACH_WINDOW`]).
pub(crate) const REACH_STAGGER: Duration = Duration::from_millis(150);

/// How long after a stream could not be opened (or was dropped as not the
/// member's) it is tried again. Health checks cover the member meanwhile.
pub(crate) const FOLLOW_RETRY: Duration = Duration::from_secs(5);

/// What a dial of a member's agent port found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A TCP connection completed: the host is up.
    Accepted,
    /// The connection was refused: the host is up, its agent is not.
    Refused,
    /// Nothing answered within the window.
    Silent,
}

/// What a member's stream told, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Told {
    /// The stream is open: the machine that answered its follow hello (its
    /// node id, incarnation and, when its signature verified, node key).
    Opened {
        id: Option<String>,
        incarnation: Option<String>,
        node_key: Option<String>,
    },
    /// A pulse.
    Pulse,
    /// The digest of the agent's facts its pulses carry, when it is first
    /// told and whenever it changes (not with every pulse): news the
    /// member's handshake checks at once.
    Facts(String),
    /// The agent said goodbye on the stream: it is stopping.
    Bye,
    /// The stream ended (EOF, a reset, or garbage), with why; `reset`
    /// when the connection failed (a reset, a write that timed out), not
    /// closed: what a host that took over the member's address answers
    /// on a connection it never had.
    Ended { why: String, reset: bool },
    /// The agent answered the follow hello and closed: an agent that
    /// predates the stream, checked by handshakes only.
    Unsupported,
    /// The stream could not be opened, and why; `refused` when the port
    /// refused the connection.
    Failed { why: String, refused: bool },
}

/// One thing a stream told, with whose stream it was.
#[derive(Debug)]
pub(crate) struct Tagged {
    pub(crate) label: String,
    /// The membership the stream was opened for: one of an earlier
    /// membership of the label says nothing of this one.
    pub(crate) generation: u64,
    /// Which stream of the membership (a stream replaced since says
    /// nothing either).
    pub(crate) stream: u64,
    pub(crate) told: Told,
}

/// A stream's last pulse, shared by its task and the engine. Hundreds of
/// members pulse hundreds of times a second, and a pulse of a member in
/// good standing changes nothing but this time: so a pulse is a store
/// here, not a message, unless the engine asked to hear the next one
/// ([`Beat::want`]: a suspect or dark member, whose pulse is news).
#[derive(Debug)]
pub(crate) struct Beat {
    base: Instant,
    /// Microseconds from `base` to the last pulse; 0 before the first.
    at_us: AtomicU64,
    wanted: AtomicBool,
    /// The pace the agent's pulses say it keeps, in ms (`every_ms`).
    every_ms: AtomicU64,
}

impl Beat {
    /// No pulse yet.
    pub(crate) fn new() -> Arc<Beat> {
        Arc::new(Beat {
            base: Instant::now(),
            at_us: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
            every_ms: AtomicU64::new(rlx_proto::handshake::PULSE_INTERVAL.as_millis() as u64),
        })
    }

    /// How often the agent says it pulses.
    pub(crate) fn pace(&self) -> Duration {
        Duration::from_millis(self.every_ms.load(Ordering::Relaxed))
    }

    /// The agent's pulses say it pulses every `every` (its stream's
    /// reading of `every_ms`, within 50 ms to 10 s).
    pub(crate) fn set_pace(&self, every: Duration) {
        self.every_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
    }

    /// When the last pulse came, if one did.
    pub(crate) fn last(&self) -> Option<Instant> {
        let us = self.at_us.load(Ordering::Acquire);
        (us > 0).then(|| self.base + Duration::from_micros(us))
    }

    /// Asks for the next pulse as a message to the engine.
    pub(crate) fn want(&self) {
        self.wanted.store(true, Ordering::Release);
    }

    /// Records a pulse now; true when the engine wants to hear it.
    fn pulse(&self) -> bool {
        let us = Instant::now()
            .saturating_duration_since(self.base)
            .as_micros();
        self.at_us.store(
            u64::try_from(us).unwrap_or(u64::MAX).max(1),
            Ordering::Release,
        );
        self.wanted.swap(false, Ordering::AcqRel)
    }
}

/// Where one member's stream sends what it hears.
#[derive(Debug, Clone)]
pub(crate) struct MemberPulses {
    pub(crate) label: String,
    pub(crate) generation: u64,
    pub(crate) stream: u64,
    pub(crate) tx: mpsc::UnboundedSender<Tagged>,
    /// Its last pulse, which the engine reads.
    pub(crate) beat: Arc<Beat>,
}

impl MemberPulses {
    /// Passes `told` on (a pulse only when the engine asked for it, else
    /// only its time, in [`Beat`]); false once the engine stopped
    /// listening.
    pub(crate) fn tell(&self, told: Told) -> bool {
        if matches!(told, Told::Pulse) && !self.beat.pulse() {
            return !self.tx.is_closed();
        }
        let t = Tagged {
            label: self.label.clone(),
            generation: self.generation,
            stream: self.stream,
            told,
        };
        self.tx.send(t).is_ok()
    }
}

/// How members' liveness is followed and dialled: [`Streams`] in
/// production, a fake in tests.
pub(crate) trait Liveness: Clone + Send + Sync + 'static {
    /// Opens member `s`'s stream and passes on what it tells until it ends
    /// (its last word is [`Told::Ended`], [`Told::Bye`],
    /// [`Told::Unsupported`] or [`Told::Failed`]). Dropped (aborted) when
    /// the engine no longer wants it.
    fn follow(&self, s: Sighting, to: MemberPulses) -> impl Future<Output = ()> + Send;

    /// Dials `s`'s agent port for up to `window`.
    fn reach(&self, s: Sighting, window: Duration) -> impl Future<Output = Reach> + Send;

    /// From now on, asks every stream's agent to pulse every `every`
    /// ([`pace_for`] the cluster's size).
    fn ask_pace(&self, every: Duration);
}

/// The production liveness: streams opened and dialled under the watch's
/// admission [`Rules`] (the key the follow hello's reply must prove, the
/// cluster, the handshake timeout).
#[derive(Debug, Clone)]
pub(crate) struct Streams {
    pub(crate) rules: Rules,
    /// The thread that reads the streams once they pulse.
    pub(crate) poller: Poller,
}

impl Liveness for Streams {
    fn ask_pace(&self, every: Duration) {
        self.poller.ask_pace(every);
    }

    async fn follow(&self, s: Sighting, to: MemberPulses) {
        let Some(addr) = s.agent_endpoint() else {
            let why = "no agent endpoint to follow".to_string();
            to.tell(Told::Failed {
                why,
                refused: false,
            });
            return;
        };
        let opened = follow_in_cluster(
            addr,
            self.rules.timeout,
            self.rules.keys.as_ref(),
            s.id(),
            self.rules.cluster.as_deref(),
        )
        .await;
        let (reply, follower) = match opened {
            Ok(x) => x,
            Err(e) => {
                let refused = matches!(
                    &e,
                    HandshakeError::Unreachable {
                        why: rlx_proto::handshake::ConnectFailure::Refused,
                        ..
                    }
                );
                to.tell(Told::Failed {
                    why: e.to_string(),
                    refused,
                });
                return;
            }
        };
        let node_key = reply
            .node_key
            .is_some()
            .then(|| reply.caps.node_key.clone())
            .flatten();
        let opened = Told::Opened {
            id: Some(reply.caps.id.clone()).filter(|i| !i.is_empty()),
            incarnation: reply.caps.incarnation.clone(),
            node_key,
        };
        if !to.tell(opened) {
            return;
        }
        let Some(follower) = follower else {
            to.tell(Told::Unsupported);
            return;
        };
        // Only a change of the digest is passed on, not every pulse's.
        let facts = follower.facts().map(str::to_string);
        if let Some(f) = &facts {
            if !to.tell(Told::Facts(f.clone())) {
                return;
            }
        }
        // From its first pulse on, the stream is read by the poller's
        // thread (why: super::poller), and this task waits for its end.
        let sink = Telling {
            to: to.clone(),
            facts,
        };
        let handed = follower
            .into_polled()
            .and_then(|(sock, state)| self.poller.follow(sock, state, sink));
        let why = match handed {
            Ok(mut followed) => {
                if followed.ended().await {
                    return;
                }
                "the stream reader's thread stopped under it".to_string()
            }
            Err(e) => {
                format!("its liveness connection could not be handed to the stream reader ({e})")
            }
        };
        Telling { to, facts: None }.unreadable(why);
    }

    async fn reach(&self, s: Sighting, window: Duration) -> Reach {
        match s.agent_endpoint() {
            Some(addr) => dial(addr, window).await,
            None => Reach::Silent,
        }
    }
}

/// What a member's stream tells, as the engine hears it.
struct Telling {
    to: MemberPulses,
    /// The facts digest last passed on: only a change is news.
    facts: Option<String>,
}

impl Sink for Telling {
    fn pass_on(&mut self, h: Heard, facts: Option<&str>) -> bool {
        let told = match h {
            Heard::Pulse { .. } => Told::Pulse,
            Heard::Bye => Told::Bye,
            Heard::Closed => Told::Ended {
                why: "its liveness connection closed".into(),
                reset: false,
            },
            Heard::Reset(why) => Told::Ended {
                why: format!("its liveness connection failed ({why})"),
                reset: true,
            },
            Heard::Garbage(why) => Told::Ended {
                why: format!("its liveness connection sent garbage ({why}); dropped"),
                reset: false,
            },
            // A later question for a proof: the stream goes on.
            _ => return true,
        };
        let pulse = matches!(told, Told::Pulse);
        if !self.to.tell(told) {
            return false;
        }
        match facts {
            Some(f) if pulse && self.facts.as_deref() != Some(f) => {
                self.facts = Some(f.to_string());
                self.to.tell(Told::Facts(f.to_string()))
            }
            _ => true,
        }
    }

    fn paced(&mut self, every: Duration) {
        self.to.beat.set_pace(every);
    }

    fn unreadable(&mut self, why: String) {
        // Not the member's fault: its stream is tried again after
        // FOLLOW_RETRY, and health checks cover it meanwhile.
        tracing::warn!("{}: {why}", self.to.label);
        self.to.tell(Told::Failed {
            why,
            refused: false,
        });
    }
}

/// Dials `addr` with connection attempts [`REACH_STAGGER`] apart until one
/// settles it or `window` runs out. A refusal settles it (a reset is the
/// kernel's own answer: nothing listens); an unreachable network or host
/// does not (a router's ICMP, or a neighbour entry gone stale, can be
/// transient), so the other attempts go on.
async fn dial(addr: SocketAddr, window: Duration) -> Reach {
    use futures::stream::{FuturesUnordered, StreamExt};
    let deadline = Instant::now() + window;
    let attempts = (window.as_millis() / REACH_STAGGER.as_millis().max(1)).max(1) as u32;
    let mut running = FuturesUnordered::new();
    for k in 0..attempts {
        running.push(async move {
            tokio::time::sleep(REACH_STAGGER * k).await;
            tokio::net::TcpStream::connect(addr).await
        });
    }
    let settled = async {
        while let Some(r) = running.next().await {
            match r {
                Ok(_) => return Reach::Accepted,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Reach::Refused
                }
                Err(_) => {}
            }
        }
        // Every attempt failed before the window ended: wait it out, so a
        // silent member is judged on the same clock however it failed.
        tokio::time::sleep_until(deadline).await;
        Reach::Silent
    };
    tokio::time::timeout_at(deadline, settled)
        .await
        .unwrap_or(Reach::Silent)
}

/// Why a member is dialled, for the reason its event gives.
pub(super) fn dial_cause(why: ProbeFor, silent_for: Duration) -> String {
    match why {
        ProbeFor::Silence => format!("no pulse for {} ms", silent_for.as_millis()),
        ProbeFor::Ended => "its liveness connection ended".to_string(),
        ProbeFor::Check => "its handshake went unanswered".to_string(),
        ProbeFor::Suspect => format!("silent for {} ms", silent_for.as_millis()),
    }
}

/// A task aborted when dropped: a member's stream ends with its member.
#[derive(Debug)]
pub(crate) struct Abort(pub(crate) tokio::task::AbortHandle);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a member's port is dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeFor {
    /// Its stream went silent.
    Silence,
    /// Its stream ended (EOF or reset): the crash test.
    Ended,
    /// A health or goodbye check went unanswered.
    Check,
    /// It is suspect or dark: is it back?
    Suspect,
}
