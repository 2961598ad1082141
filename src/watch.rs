//! **Live membership of the cluster** — who joined, who left and whose caps
//! changed, as a stream of [`Event`]s, for `rlx-discover watch`.
//!
//! Joins come from the mDNS browse ([`Announcements`], in production
//! [`ContinuousBrowse`]); each candidate passes the same admission
//! ([`crate::admit`], behind [`Check`]) and device selection (the one
//! pipeline) as in `expand`, then becomes a member. Leaves come two ways:
//!
//! - **goodbye**: an agent that stops cleanly sends mDNS goodbyes; mdns-sd
//!   drops the service about a second later, and the member is reported left
//!   at once (within 2 s of the agent's SIGTERM).
//! - **health check**: a crashed agent (SIGKILL, power loss) sends nothing,
//!   and its mDNS records live for minutes. Every [`HEALTH_INTERVAL`] each
//!   member is asked for its caps over the handshake (staggered attempts, so
//!   one lost packet is not a death); a member that does not answer is
//!   reported left. Bound: [`HEALTH_INTERVAL`] plus one handshake round. A
//!   crashed process whose host is up answers with a reset, which settles it
//!   at once: about 2 s. A host that vanished (power, network) takes the
//!   whole round ([`crate::admit::ATTEMPTS`] attempts
//!   [`crate::admit::STAGGER`] apart, each up to
//!   [`crate::admit::MIN_ATTEMPT`]): about 4.3 s with the defaults.
//!
//! With a DNS-SD zone ([`Zone`], in production [`DnsZone`]: `--domain` or
//! `[discover] dns_sd`), the zone is browsed too, every
//! [`DNS_POLL_INTERVAL`]: registrations join through the same admission, and
//! one that disappears from the zone (deleted on the agent's clean stop, or
//! its lease ran out) is reported left. DNS members are named `<instance>
//! (dns)`; a LAN node listed both ways is one member (by
//! [`crate::pipeline::same_machine`]).
//!
//! # Under a flood
//!
//! Candidates wait in a queue and are admitted at most [`ADMIT_BURST`] at
//! once and one per [`ADMIT_EVERY`] after that, at most [`MAX_IN_FLIGHT`]
//! new or retried ones at a time (members' changes and candidates whose
//! address sent the announcement itself go first, with
//! [`RESERVED_IN_FLIGHT`] more slots). Checks run in their own tasks, never
//! inline: a slow admission does not delay other members' events. A refusal
//! is remembered per (address, id, TXT) and that candidate is not dialled
//! again for [`RETRY_FIRST`], doubling up to [`RETRY_CAP`]; at most
//! [`MAX_REMEMBERED`] refusals and queued candidates are kept. The
//! browse's own bounds (shares by real source, pruning, the on-link rule
//! with a key) are in [`ContinuousBrowse`]; docs/security.md has the
//! figures.
//!
//! A member whose caps change materially (the device chosen, its memory, the
//! core count, or its address) is reported `updated`.
//!
//! Every input is an argument of [`Watch::run`] (the announcements, the
//! zone, the check, the clock's origin and the shutdown), so the engine runs
//! in tests on synthetic sightings, a fake check and paused time.

use crate::admit::{admit, Rules};
use crate::pipeline::{expand, same_machine, NodeDefaults};
use crate::report::{gib, AddedNode};
use crate::sighting::{Discovery, Problem, Sighting};
use crate::sources::dns::{self, DnsSdOptions};
use crate::sources::mdns::{Change, ContinuousBrowse};
use admission::{Bucket, Priority, Queue, Refusals};
pub use admission::{
    ADMIT_BURST, ADMIT_EVERY, MAX_IN_FLIGHT, MAX_REMEMBERED, RESERVED_IN_FLIGHT, RETRY_CAP,
    RETRY_FIRST,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};

mod admission;
#[cfg(test)]
mod tests;

/// How often every member's handshake is checked. Two seconds keeps crash
/// detection within a few seconds while costing each agent one short TCP
/// exchange every two seconds per watching coordinator.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(2);

/// How often the DNS-SD zone is browsed again. Each browse costs 1 + 2N
/// queries on BIND (see [`crate::sources::dns`]); every 5 s keeps joins and
/// clean leaves within seconds, well inside the records' 60 s TTL.
pub const DNS_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The suffix of DNS members' names in events: the same agent is also an
/// mDNS instance of the same name, and the two must not be one key.
pub const DNS_SUFFIX: &str = " (dns)";

/// What happened to a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Admitted: a new member.
    Joined,
    /// A member whose caps or address changed materially.
    Updated,
    /// A member gone: goodbye, failed health check, or DNS registration gone.
    Left,
    /// A candidate refused (malformed, unreachable, untrusted), once per
    /// host and reason.
    Refused,
}

impl Kind {
    /// The word printed for it: `joined`, `updated`, `left`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Joined => "joined",
            Kind::Updated => "updated",
            Kind::Left => "left",
            Kind::Refused => "refused",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: the human lines align it with `{:<8}`.
        f.pad(self.as_str())
    }
}

/// One membership event; serialized, it is the `--json` line of `watch`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// `joined`, `updated`, `left` or `refused`.
    pub event: Kind,
    /// Milliseconds since the watch started.
    pub at_ms: u64,
    /// The instance name announced over mDNS (`<instance> (dns)` for DNS).
    pub instance: String,
    /// The node as the pipeline made it (absent for `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<AddedNode>,
    /// Why (for `left`, `updated` and `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a watch cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The announcements stopped for good (the mDNS daemon died): joins and
    /// goodbyes can no longer be seen, so no membership can be claimed.
    #[error("the mDNS daemon stopped; watch cannot go on")]
    BrowseStopped,
}

/// Where joins and goodbyes come from: the mDNS browse in production, a
/// channel in tests.
pub trait Announcements {
    /// The next change; `None` once the source has stopped for good. Must be
    /// cancel-safe: the watch drops it whenever another input is ready.
    fn next(&mut self) -> impl Future<Output = Option<Change>>;
}

impl Announcements for ContinuousBrowse {
    fn next(&mut self) -> impl Future<Output = Option<Change>> {
        ContinuousBrowse::next(self)
    }
}

/// A unicast DNS-SD zone, browsed every [`DNS_POLL_INTERVAL`].
pub trait Zone {
    /// Every registration in the zone, or why the browse failed (then the
    /// DNS members are kept as they are: a failed query is no leave).
    fn browse(&mut self) -> impl Future<Output = Result<Discovery, String>>;
}

/// The zone `[discover] dns_sd` names, browsed by [`crate::sources::dns`].
#[derive(Debug, Clone)]
pub struct DnsZone {
    /// The domain, server and deadline.
    pub opts: DnsSdOptions,
    /// Start of the watch, for the sightings' `found_ms`.
    pub started: std::time::Instant,
}

impl Zone for DnsZone {
    async fn browse(&mut self) -> Result<Discovery, String> {
        dns::browse(&self.opts, self.started)
            .await
            .map(|b| b.discovery)
            .map_err(|e| e.to_string())
    }
}

/// How candidates and members are checked against the machines themselves:
/// admission (the handshake under the [`Rules`]) in production. It serves
/// both joins (is this announcement real?) and the health check (is this
/// member still there?): a sighting it returns is alive, a problem it
/// reports is not.
pub trait Check {
    /// The sightings that passed (with their fresh caps) and the problems.
    /// `Send`: checks run in their own tasks, beside the event loop.
    fn check(&self, d: Discovery) -> impl Future<Output = Discovery> + Send;
}

impl Check for Rules {
    fn check(&self, d: Discovery) -> impl Future<Output = Discovery> + Send {
        admit(d, self)
    }
}

/// A zone that is never browsed, for a watch of mDNS alone:
/// `None::<&mut NoZone>`.
#[derive(Debug, Clone, Copy)]
pub enum NoZone {}

impl Zone for NoZone {
    async fn browse(&mut self) -> Result<Discovery, String> {
        match *self {}
    }
}

/// A current member.
struct Member {
    sighting: Sighting,
    node: AddedNode,
    /// Caps as first seen by mDNS (TXT), to tell a real update from the
    /// handshake's fresher copy of the same announcement.
    announced: Option<String>,
}

/// Where events go, stamped with the time since the start.
struct Out<E> {
    started: Instant,
    emit: E,
}

impl<E: FnMut(Event)> Out<E> {
    fn emit(
        &mut self,
        event: Kind,
        instance: &str,
        node: Option<&AddedNode>,
        reason: Option<String>,
    ) {
        let at_ms = self.started.elapsed().as_millis() as u64;
        (self.emit)(Event {
            event,
            at_ms,
            instance: instance.to_string(),
            node: node.cloned(),
            reason,
        });
    }
}

/// A check under way, off the event loop: candidates (with what each
/// announced, and its refusal key) or a health round.
enum Job {
    Admit(BTreeMap<String, (Option<String>, admission::Key)>),
    Health(BTreeSet<String>),
}

/// Runs one check: the future the event loop polls beside its other inputs.
async fn run_job<C: Check>(check: C, job: Job, d: Discovery) -> (Job, Discovery) {
    let checked = check.check(d).await;
    (job, checked)
}

/// Most refusals remembered as already reported (then the oldest is
/// forgotten, and may be reported again).
const MAX_REPORTED: usize = admission::MAX_REMEMBERED;

/// The membership engine: members, the refusals already reported, the
/// candidates waiting for admission and how they are checked and turned
/// into nodes.
pub struct Watch<C> {
    check: C,
    defaults: NodeDefaults,
    started: Instant,
    members: BTreeMap<String, Member>,
    refused: BTreeSet<(String, String)>,
    queue: Queue,
    bucket: Bucket,
    refusals: Refusals,
    /// Labels in admission now.
    admitting: BTreeSet<String>,
    health_running: bool,
}

impl<C: Check + Clone + Send + Sync + 'static> Watch<C> {
    /// A watch with no members yet. `started` is the origin of the events'
    /// `at_ms` (a tokio instant, so paused time in tests moves it too).
    pub fn new(check: C, defaults: NodeDefaults, started: Instant) -> Self {
        Watch {
            check,
            defaults,
            started,
            members: BTreeMap::new(),
            refused: BTreeSet::new(),
            queue: Queue::default(),
            bucket: Bucket::new(started),
            refusals: Refusals::default(),
            admitting: BTreeSet::new(),
            health_running: false,
        }
    }

    /// The current members' names, in order.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// Runs until `shutdown` completes, handing every event to `emit` as it
    /// happens: changes from `mdns` as they come, a browse of `dns` at once
    /// and every [`DNS_POLL_INTERVAL`], a health check of every member every
    /// [`HEALTH_INTERVAL`]. Handshakes (admissions and health checks) run
    /// beside the loop, never inline: a slow or flooded admission does not
    /// delay other members' goodbyes. Candidates are admitted at most
    /// [`ADMIT_BURST`] at once and one per [`ADMIT_EVERY`] after that; a
    /// refused one waits [`RETRY_FIRST`], doubling up to [`RETRY_CAP`],
    /// before it is dialled again. Checks under way are dropped at shutdown.
    /// Fails only when `mdns` stops for good.
    pub async fn run<A: Announcements, Z: Zone>(
        &mut self,
        mut mdns: Option<&mut A>,
        mut dns: Option<&mut Z>,
        shutdown: impl Future<Output = ()>,
        emit: impl FnMut(Event),
    ) -> Result<(), WatchError> {
        let mut out = Out {
            started: self.started,
            emit,
        };
        let mut dns_tick = tokio::time::interval(DNS_POLL_INTERVAL);
        dns_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut health = tokio::time::interval(HEALTH_INTERVAL);
        health.set_missed_tick_behavior(MissedTickBehavior::Delay);
        health.tick().await;
        // Checks run in their own tasks: however slow a handshake (or a
        // flood of them), this loop goes on reading events. Dropped (and
        // so aborted) at shutdown.
        let mut jobs = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            if let Some((job, d)) = self.take_admissions(Instant::now()) {
                jobs.spawn(run_job(self.check.clone(), job, d));
            }
            let wake = self.next_admission();
            tokio::select! {
                _ = &mut shutdown => break,
                change = async {
                    match &mut mdns {
                        Some(b) => b.next().await,
                        None => std::future::pending().await,
                    }
                } => match change {
                    None => return Err(WatchError::BrowseStopped),
                    Some(Change::Removed(label)) => {
                        self.queue.remove(&label);
                        if let Some(m) = self.members.remove(&label) {
                            out.emit(Kind::Left, &label, Some(&m.node), Some("goodbye".into()));
                        }
                    }
                    Some(Change::Snapshot { sightings, problems, vouched }) => {
                        self.report_refusals(&mut out, &problems);
                        self.consider(sightings, &vouched);
                    }
                },
                _ = dns_tick.tick(), if dns.is_some() => {
                    let zone = dns.as_mut().expect("guarded");
                    self.poll_dns(&mut out, &mut **zone).await;
                }
                _ = health.tick() => {
                    if let Some((job, d)) = self.health_round() {
                        jobs.spawn(run_job(self.check.clone(), job, d));
                    }
                }
                Some(done) = jobs.join_next(), if !jobs.is_empty() => match done {
                    Ok((Job::Admit(announced), checked)) => {
                        self.admitted(&mut out, announced, checked)
                    }
                    Ok((Job::Health(asked), checked)) => {
                        self.check_health(&mut out, asked, checked)
                    }
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(e) => tracing::warn!("a watch check was cancelled: {e}"),
                },
                _ = async {
                    match wake {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
        Ok(())
    }

    /// One DNS-SD browse: new registrations join through admission; DNS
    /// members whose registration is gone have left.
    async fn poll_dns(&mut self, out: &mut Out<impl FnMut(Event)>, zone: &mut impl Zone) {
        let found = match zone.browse().await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("DNS-SD browse failed; keeping the DNS members as they are: {e}");
                return;
            }
        };
        let rename = |h: &str| format!("{h}{DNS_SUFFIX}");
        let sightings: Vec<Sighting> = found
            .sightings
            .into_iter()
            .map(|mut s| {
                s.host = rename(&s.host);
                s
            })
            .collect();
        let problems: Vec<Problem> = found
            .problems
            .into_iter()
            .map(|mut pr| {
                pr.host = rename(&pr.host);
                pr
            })
            .collect();
        let present: BTreeSet<String> = sightings.iter().map(|s| s.host.clone()).collect();
        let gone: Vec<String> = self
            .members
            .keys()
            .filter(|k| k.ends_with(DNS_SUFFIX) && !present.contains(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(m) = self.members.remove(&k) {
                out.emit(
                    Kind::Left,
                    &k,
                    Some(&m.node),
                    Some("DNS registration deleted or expired".into()),
                );
            }
        }
        self.report_refusals(out, &problems);
        self.consider(sightings, &BTreeSet::new());
    }

    /// Reports each refusal once per host and reason: a malformed
    /// announcement repeats in every snapshot. At most [`MAX_REPORTED`]
    /// are remembered.
    fn report_refusals(&mut self, out: &mut Out<impl FnMut(Event)>, problems: &[Problem]) {
        for pr in problems {
            let key = (pr.host.clone(), pr.reason.clone());
            if self.refused.contains(&key) {
                continue;
            }
            if self.refused.len() >= MAX_REPORTED {
                self.refused.pop_first();
            }
            self.refused.insert(key);
            out.emit(Kind::Refused, &pr.host, None, Some(pr.reason.clone()));
        }
    }

    /// Queues the sightings that are new or whose announcement changed,
    /// unless the same (address, id, TXT) was refused and its back-off has
    /// not run out.
    fn consider(&mut self, sightings: Vec<Sighting>, vouched: &BTreeSet<String>) {
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
            if !self.queue.push(s, prio) {
                tracing::debug!("admission queue full; a candidate waits for the next snapshot");
            }
        }
    }

    /// The candidates the bucket lets through now, as one admission.
    fn take_admissions(&mut self, now: Instant) -> Option<(Job, Discovery)> {
        let busy = |l: &str| self.admitting.contains(l);
        let (room, low) = self.rooms();
        let want = self.queue.ready(low, busy).min(room);
        if want == 0 {
            return None;
        }
        let n = self.bucket.take(want, now);
        if n == 0 {
            return None;
        }
        let admitting = &self.admitting;
        let fresh = self.queue.take(n, low, |l| admitting.contains(l));
        let announced: BTreeMap<String, (Option<String>, admission::Key)> = fresh
            .iter()
            .map(|s| {
                (
                    s.host.clone(),
                    (s.caps.as_ref().map(|c| c.to_json()), admission::key_of(s)),
                )
            })
            .collect();
        self.admitting.extend(announced.keys().cloned());
        tracing::debug!(
            "admitting {:?}; {} in admission, {} queued",
            announced.keys().collect::<Vec<_>>(),
            self.admitting.len(),
            self.queue.len()
        );
        Some((
            Job::Admit(announced),
            Discovery {
                sightings: fresh,
                ..Default::default()
            },
        ))
    }

    /// When the next candidate may go: `None` when none waits or the most
    /// are already in admission (then a finished check wakes the loop).
    fn next_admission(&self) -> Option<Instant> {
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

    /// The end of an admission: refusals reported and remembered with
    /// their back-off, the others joined (or updated).
    fn admitted(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        announced: BTreeMap<String, (Option<String>, admission::Key)>,
        checked: Discovery,
    ) {
        let now = Instant::now();
        for label in announced.keys() {
            self.admitting.remove(label);
        }
        for pr in &checked.problems {
            if let Some((_, key)) = announced.get(&pr.host) {
                let wait = self.refusals.refused(key.clone(), now);
                // A snapshot that came while it was being checked queued
                // it again: that copy waits out the back-off too.
                self.queue.remove_if(&pr.host, key);
                tracing::debug!(
                    "{} refused ({}); not dialled again for {wait:?}",
                    pr.host,
                    pr.reason
                );
            }
        }
        self.report_refusals(out, &checked.problems);
        for s in checked.sightings {
            let label = s.host.clone();
            let Some((ann, key)) = announced.get(&label).cloned() else {
                continue;
            };
            self.refusals.forget(&key);
            let Some(node) = node_of(&s, &self.defaults) else {
                continue;
            };
            // The same machine already a member through the other source (mDNS
            // and DNS both list a LAN agent): one node, by the rule `expand`
            // merges with. If that source loses it first, the next browse of
            // this one brings it back.
            let twin = self.members.iter().find(|(k, m)| {
                **k != label && m.sighting.source != s.source && same_machine(&m.sighting, &s)
            });
            if let Some((k, _)) = twin {
                tracing::debug!("{label} is {k}, already a member through another source");
                continue;
            }
            match self.members.get_mut(&label) {
                None => {
                    out.emit(Kind::Joined, &label, Some(&node), None);
                    self.members.insert(
                        label,
                        Member {
                            sighting: s,
                            node,
                            announced: ann,
                        },
                    );
                }
                Some(m) => {
                    if let Some(why) = material(&m.node, &node) {
                        out.emit(Kind::Updated, &label, Some(&node), Some(why));
                    }
                    *m = Member {
                        sighting: s,
                        node,
                        announced: ann,
                    };
                }
            }
        }
    }

    /// A health round of every member, unless one is under way.
    fn health_round(&mut self) -> Option<(Job, Discovery)> {
        if self.members.is_empty() || self.health_running {
            return None;
        }
        self.health_running = true;
        let sightings: Vec<Sighting> = self.members.values().map(|m| m.sighting.clone()).collect();
        let asked = self.members.keys().cloned().collect();
        Some((
            Job::Health(asked),
            Discovery {
                sightings,
                ..Default::default()
            },
        ))
    }

    /// The end of a health round: the members asked that did not answer
    /// have left; fresh caps may be an update.
    fn check_health(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        asked: BTreeSet<String>,
        checked: Discovery,
    ) {
        self.health_running = false;
        let alive: BTreeSet<String> = checked.sightings.iter().map(|s| s.host.clone()).collect();
        for pr in &checked.problems {
            if let Some(m) = self.members.remove(&pr.host) {
                out.emit(
                    Kind::Left,
                    &pr.host,
                    Some(&m.node),
                    Some(format!("health check failed: {}", pr.reason)),
                );
            }
        }
        for s in checked.sightings {
            if let (Some(m), Some(node)) =
                (self.members.get_mut(&s.host), node_of(&s, &self.defaults))
            {
                if let Some(why) = material(&m.node, &node) {
                    out.emit(Kind::Updated, &s.host, Some(&node), Some(why));
                }
                m.node = node;
                m.sighting = s;
            }
        }
        // Asked and neither alive nor refused (a check that lost them):
        // gone. Members that joined during the round were not asked.
        self.members
            .retain(|k, _| !asked.contains(k) || alive.contains(k));
    }
}

/// The node the pipeline makes of one admitted sighting: the same device
/// selection as `expand`.
fn node_of(s: &Sighting, defaults: &NodeDefaults) -> Option<AddedNode> {
    let d = Discovery {
        sightings: vec![s.clone()],
        ..Default::default()
    };
    expand(&[], defaults, d).added.into_iter().next()
}

/// What makes an update worth reporting, in words; `None` when nothing a
/// scheduler cares about changed (a fresher copy of the same caps).
fn material(a: &AddedNode, b: &AddedNode) -> Option<String> {
    let mut why = Vec::new();
    if a.device != b.device {
        why.push(format!("device {} -> {}", a.device, b.device));
    }
    if a.mem_bytes != b.mem_bytes {
        why.push(format!(
            "memory {} -> {}",
            gib(a.mem_bytes),
            gib(b.mem_bytes)
        ));
    }
    if a.cores != b.cores {
        why.push(format!("cores {} -> {}", a.cores, b.cores));
    }
    if a.addr != b.addr {
        why.push(format!("address {} -> {}", a.addr, b.addr));
    }
    (!why.is_empty()).then(|| why.join(", "))
}
