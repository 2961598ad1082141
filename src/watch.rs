//! **Live membership of the cluster** — who joined, restarted, changed or
//! left, as a stream of typed [`Event`]s: the feed `rlx-discover watch`
//! prints, and that a runtime embeds to know which workers are up.
//!
//! A runtime starts one with [`crate::follow::LiveWatch::start`] from its
//! `[discover]` section (the browse, the zone, the rules and the secure
//! dial policy), and reads the events it hands to a closure:
//!
//! ```no_run
//! use rlx_discover::{Kind, LiveWatch, WatchOptions};
//! # async fn demo(d: rlx_discover::DiscoverSection) -> anyhow::Result<()> {
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! LiveWatch::start(&d, WatchOptions::default())?
//!     .run(stop, |e| match e.event {
//!         // A worker that restarted lost its state: reschedule its stage.
//!         Kind::Joined | Kind::Restarted => println!("up: {}", e.instance),
//!         Kind::Left => println!("down: {}", e.instance),
//!         // Its agent is there; its RLX worker started or stopped.
//!         Kind::Worker => println!("worker of {}: {:?}", e.instance,
//!             e.node.as_ref().and_then(|n| n.worker_listening)),
//!         _ => {} // updated, refused, and kinds a later version adds
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! `emit` is called in order, as each event happens; a runtime that wants a
//! `Stream` forwards it into a channel (`tokio::sync::mpsc::unbounded_channel`
//! and `UnboundedReceiverStream`), which keeps the order.
//!
//! # The stream
//!
//! Per instance the events follow one grammar ([`event`]): `joined`, then
//! (`updated` | `restarted` | `worker`)*, then `left`, and so on.
//! `refused` stands outside it.
//!
//! Joins come from the mDNS browse ([`Announcements`], in production
//! [`ContinuousBrowse`]) and, with a DNS-SD zone ([`Zone`], in production
//! [`DnsZone`]: `--domain` or `[discover] dns_sd`), from the zone, browsed
//! every [`DNS_POLL_INTERVAL`]. Each candidate passes the same admission
//! ([`crate::admit`], behind [`Check`]) and device selection (the one
//! pipeline) as in `expand`: a live agent is confirmed by its handshake
//! before it is reported, and a cached record of a dead one is refused
//! there. An agent's incarnation (64 random bits chosen at each start, in
//! its TXT `inc` and handshake caps) makes a restarted agent's
//! announcement differ from its predecessor's cached one.
//!
//! - **restarted**: a member's handshake (an admission of its new
//!   announcement, or a health check) tells another incarnation, even when
//!   it was never seen gone.
//! - **goodbye**: a goodbye, or mdns-sd's expiry of a record, is a claim
//!   anyone can make: the member is checked ([`farewell`]), and `left`
//!   follows only when the check fails (at once for a stopped agent, whose
//!   port is closed: within 2 s of its SIGTERM). An instance that left is
//!   dialled once more [`CONFIRM_AFTER_GOODBYE`] later.
//! - **identity**: a confirmed sighting under a member's name at another
//!   address or with another node id is a claim too ([`Member::is_here`]):
//!   the member is checked where it is, and the sighting is taken only if
//!   the member is gone (a move with the same id is `updated` in place); a
//!   member's address that answers as another machine is the member gone.
//!   The same machine under several names (mDNS and DNS, or a stranger's
//!   phantom instance at a member's address) is one member, by
//!   [`crate::pipeline::same_machine`], and a goodbye for any of its names
//!   checks it.
//! - **health check**: a crashed agent sends nothing; each member is
//!   checked over the handshake on its own jittered schedule ([`health`]):
//!   a crashed process is reported left within about 3.8 s, a vanished
//!   host within about 7.8 s.
//! - **DNS-SD**: a registration gone from the zone is reported left.
//!   Members are keyed by source and instance ([`member_name`]): no
//!   announcement of one source speaks for a member of another.
//!
//! Under a flood, admission is rate-limited, queued and backed off per
//! refusal ([`admission`]); the browse's bounds are in [`ContinuousBrowse`].
//!
//! A member whose caps change materially (the device chosen, its memory, the
//! core count, or its address) is reported `updated`.
//!
//! Every input is an argument of [`Watch::run`] (the announcements, the
//! zone, the check, the clock's origin and the shutdown), so the engine runs
//! in tests on synthetic sightings, a fake check and paused time.

use crate::pipeline::node::node_of;
use crate::pipeline::{same_machine, NodeDefaults};
use crate::sighting::{Discovery, Problem, Sighting, Source};
use crate::sources::mdns::Change;
use admission::{Bucket, Priority, Queue, Refusals};
pub(crate) use admission::{MAX_IN_FLIGHT, MAX_REMEMBERED, RESERVED_IN_FLIGHT};
use event::Out;
pub use event::{Event, Kind};
use farewell::GoodbyeCounts;
use inputs::named;
use inputs::poll_zone;
pub(crate) use inputs::{member_name, Announcements, Check, DnsZone, Zone, DNS_POLL_INTERVAL};
use job::{run_job, Job};
use member::{another_machine, contender_refused, news, Departures, Member};
use node::{incarnation_of, one};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

mod admission;
mod event;
mod farewell;
pub(crate) mod health;
mod inputs;
mod job;
mod member;
mod node;
#[cfg(test)]
mod tests;

/// How long after a member left on a goodbye its instance is dialled once
/// more, quietly: an agent answering then (another incarnation, or one
/// whose goodbye check only lost its packets) joins again, where nothing
/// else might bring it back (its records can equal the cached ones).
pub(crate) const CONFIRM_AFTER_GOODBYE: Duration = Duration::from_millis(1500);

/// Why a watch cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The announcements stopped for good (the mDNS daemon died): joins and
    /// goodbyes can no longer be seen, so no membership can be claimed.
    #[error("the mDNS daemon stopped; watch cannot go on")]
    BrowseStopped,
}

/// Most refusals remembered as already reported (then the oldest is
/// forgotten, and may be reported again).
const MAX_REPORTED: usize = admission::MAX_REMEMBERED;

/// The membership engine: members, the refusals already reported, the
/// candidates waiting for admission and how they are checked and turned
/// into nodes.
pub(crate) struct Watch<C> {
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
    /// Instances that left on a goodbye, to be dialled once more (when):
    /// at most [`MAX_REMEMBERED`].
    confirming: BTreeMap<String, (Instant, Sighting)>,
    generation: u64,
    rng: fastrand::Rng,
    goodbyes: GoodbyeCounts,
    /// A goodbye was refuted since the browse was last asked to re-learn.
    relearn: bool,
    /// Instances found to be a member's machine under another name, to
    /// that member's name: at most [`MAX_REMEMBERED`].
    aliases: BTreeMap<String, String>,
    /// When each instance last left, and as which incarnation.
    left: Departures,
}

impl<C: Check + Clone + Send + Sync + 'static> Watch<C> {
    /// A watch with no members yet. `started` is the origin of the events'
    /// `at_ms` (a tokio instant, so paused time in tests moves it too).
    pub(crate) fn new(check: C, defaults: NodeDefaults, started: Instant) -> Self {
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
            confirming: BTreeMap::new(),
            generation: 0,
            rng: fastrand::Rng::new(),
            goodbyes: GoodbyeCounts::default(),
            relearn: false,
            aliases: BTreeMap::new(),
            left: Departures::default(),
        }
    }

    /// Runs until `shutdown` completes, handing every event to `emit` as it
    /// happens: changes from `mdns` as they come, a browse of `dns` at once
    /// and every [`DNS_POLL_INTERVAL`], a health check of each member on its
    /// own jittered schedule ([`health`]). Every handshake (admissions,
    /// health checks) runs in its own task and the DNS browse beside the
    /// loop, never inline: a slow or dead host costs only its own check,
    /// and nobody else's event waits for it ([`admission`] bounds how many
    /// a second). Checks under way are dropped at shutdown. Fails only when
    /// `mdns` stops for good.
    pub(crate) async fn run<A: Announcements, Z: Zone>(
        &mut self,
        mut mdns: Option<&mut A>,
        dns: Option<&mut Z>,
        shutdown: impl Future<Output = ()>,
        emit: impl FnMut(Event),
    ) -> Result<(), WatchError> {
        let mut out = Out::new(self.started, emit);
        // The zone is browsed beside the loop: a slow DNS server delays
        // only the DNS members' news.
        let (dns_tx, mut dns_rx) = tokio::sync::mpsc::channel(1);
        let poller = poll_zone(dns, dns_tx);
        tokio::pin!(poller);
        // Checks run in their own tasks: however slow a handshake (or a
        // flood of them), this loop goes on reading events. Dropped (and
        // so aborted) at shutdown.
        let mut jobs = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let now = Instant::now();
            for (job, d) in self.take_admissions(now) {
                jobs.spawn(run_job(self.check.clone(), job, d));
            }
            for (job, d) in self.due_checks(now) {
                jobs.spawn(run_job(self.check.clone(), job, d));
            }
            for (job, s, was) in self.due_goodbyes(now) {
                let check = self.check.clone();
                jobs.spawn(
                    async move { (job, farewell::check_after_goodbye(check, s, was).await) },
                );
            }
            if std::mem::take(&mut self.relearn) {
                if let Some(b) = mdns.as_mut() {
                    b.relearn();
                }
            }
            let wake = [
                self.next_admission(),
                self.next_check(),
                self.confirming.values().map(|(t, _)| *t).min(),
            ]
            .into_iter()
            .flatten()
            .min();
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
                        self.goodbye(&member_name(Source::Mdns, &label))
                    }
                    Some(Change::Snapshot { sightings, problems, vouched }) => {
                        let (sightings, problems) = named(sightings, problems);
                        let vouched = vouched
                            .iter()
                            .map(|l| member_name(Source::Mdns, l))
                            .collect();
                        self.report_refusals(&mut out, &problems);
                        self.consider(sightings, &vouched);
                    }
                },
                () = &mut poller => {}
                Some(found) = dns_rx.recv() => self.dns_browsed(&mut out, found),
                Some(done) = jobs.join_next(), if !jobs.is_empty() => match done {
                    Ok((Job::Admit { label, announced, key, started }, checked)) => {
                        self.admitted(&mut out, (label, started), announced, key, checked)
                    }
                    Ok((Job::Health { label, generation, started, addr }, checked)) => {
                        self.checked(&mut out, &label, (generation, &addr), started, checked)
                    }
                    Ok((Job::Goodbye { label, generation, addr }, checked)) => {
                        self.goodbye_checked(&mut out, &label, (generation, &addr), checked)
                    }
                    Ok((Job::Confirm { label }, checked)) => {
                        self.confirmed(&mut out, &label, checked)
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

    /// A goodbye (or an expiry) for `label`: a claim anyone can make, so the
    /// member is checked ([`farewell`]), never dropped on it.
    fn goodbye(&mut self, label: &str) {
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
    fn due_goodbyes(&mut self, now: Instant) -> Vec<(Job, Sighting, Option<String>)> {
        let mut jobs = Vec::new();
        for (label, m) in &mut self.members {
            if m.farewell.start(now) {
                let job = Job::Goodbye {
                    label: label.clone(),
                    generation: m.generation,
                    addr: m.sighting.addr.clone(),
                };
                jobs.push((job, m.sighting.clone(), m.incarnation.clone()));
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
    fn goodbye_checked(
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
        m.farewell.done();
        let answer = checked.sightings.into_iter().find(|s| s.host == label);
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
            "goodbye"
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
    /// id joins under the name. `confirm` dials the instance once more
    /// [`CONFIRM_AFTER_GOODBYE`] later (a leave on a goodbye).
    fn gone(&mut self, out: &mut Out<impl FnMut(Event)>, label: &str, why: String, confirm: bool) {
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
        if confirm {
            if self.confirming.len() >= MAX_REMEMBERED {
                self.confirming.pop_first();
            }
            let due = Instant::now() + CONFIRM_AFTER_GOODBYE;
            self.confirming.insert(label.to_string(), (due, m.sighting));
        }
        if let Some((c, announced)) = contender {
            self.join_or_update(out, c, announced);
        }
    }

    /// The end of a confirmation: an agent answering behind a goodbye
    /// (another incarnation, or the same one, whose goodbye check only lost
    /// its packets) joins again; a silent one was really gone: nothing to
    /// report, it already left.
    fn confirmed(&mut self, out: &mut Out<impl FnMut(Event)>, label: &str, checked: Discovery) {
        // A member again, in admission, or a newer leave waiting for its
        // own confirmation: this answer is not news.
        if self.members.contains_key(label)
            || self.admitting.contains(label)
            || self.confirming.contains_key(label)
        {
            return;
        }
        match checked.sightings.into_iter().find(|s| s.host == label) {
            Some(s) => {
                let announced = s.caps.as_ref().map(|c| c.to_json());
                self.join_or_update(out, s, announced);
            }
            None => tracing::debug!("{label} left on a goodbye and no longer answers: gone"),
        }
    }

    /// One DNS-SD browse's result: new registrations join through
    /// admission; DNS members whose registration is gone have left.
    fn dns_browsed(&mut self, out: &mut Out<impl FnMut(Event)>, found: Result<Discovery, String>) {
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
        for k in gone {
            if let Some(m) = self.members.remove(&k) {
                out.emit(
                    Kind::Left,
                    &k,
                    Some(&m.node),
                    m.incarnation.as_deref(),
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
            out.emit(Kind::Refused, &pr.host, None, None, Some(pr.reason.clone()));
        }
    }

    /// Queues the sightings that are new or whose announcement changed,
    /// unless the same (address, id, TXT) was refused and its back-off has
    /// not run out. An instance announced again is no longer waiting for a
    /// confirmation: the announcement is its news.
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
            self.confirming.remove(&s.host);
            if !self.queue.push(s, prio) {
                tracing::debug!("admission queue full; a candidate waits for the next snapshot");
            }
        }
    }

    /// The candidates the bucket lets through now, each its own admission
    /// (a dead one's whole handshake round delays no other), and the
    /// goodbyes whose confirmation is due.
    fn take_admissions(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let mut jobs = Vec::new();
        let due: Vec<String> = self
            .confirming
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(l, _)| l.clone())
            .collect();
        for label in due {
            if let Some((_, s)) = self.confirming.remove(&label) {
                jobs.push((Job::Confirm { label }, one(s)));
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

    /// The end of one admission: a refusal reported and remembered with
    /// its back-off, else joined (or updated, or restarted).
    fn admitted(
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
    fn join_or_update(
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
        let next_check = Some(Instant::now() + health::next_interval(&mut self.rng));
        let member = Member {
            sighting: s,
            node,
            announced,
            incarnation: inc,
            generation: self.generation,
            next_check,
            failed_once: false,
            farewell: Default::default(),
            contender: None,
        };
        self.members.insert(label, member);
    }

    /// The health checks due now, one job per member, each taken off the
    /// schedule until it ends.
    fn due_checks(&mut self, now: Instant) -> Vec<(Job, Discovery)> {
        let mut jobs = Vec::new();
        for (label, m) in &mut self.members {
            if m.next_check.is_some_and(|t| t <= now) {
                m.next_check = None;
                let job = Job::Health {
                    label: label.clone(),
                    generation: m.generation,
                    started: now,
                    addr: m.sighting.addr.clone(),
                };
                jobs.push((job, one(m.sighting.clone())));
            }
        }
        jobs
    }

    /// When the next health check or goodbye check is due.
    fn next_check(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| [m.next_check, m.farewell.next()])
            .flatten()
            .min()
    }

    /// The end of one member's health check of `(generation, address)`:
    /// alive (perhaps restarted or updated), refused at once (checked
    /// again shortly, once), or gone. A failure at an address the member
    /// has since moved from (a new lease announced while the check ran)
    /// says nothing of it: it is checked at the new one on schedule.
    fn checked(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        (generation, dialled): (u64, &str),
        started: Instant,
        checked: Discovery,
    ) {
        let now = Instant::now();
        let Some(m) = self
            .members
            .get_mut(label)
            .filter(|m| m.generation == generation)
        else {
            return; // it left (and maybe joined again) meanwhile
        };
        let answer = checked.sightings.into_iter().find(|s| s.host == label);
        if let Some(s) = answer.as_ref().filter(|s| !m.answers_as(s)) {
            let why = format!("health check failed: {}", another_machine(s));
            self.gone(out, label, why, false);
            return;
        }
        if let Some(s) = answer {
            m.failed_once = false;
            m.next_check = Some(now + health::next_interval(&mut self.rng));
            let node = node_of(&s, &self.defaults);
            news(out, label, m, &node, incarnation_of(&s));
            m.node = node;
            m.sighting = s;
            return;
        }
        if m.sighting.addr != dialled {
            tracing::debug!(
                "{label}: moved to {} while checked at {dialled}",
                m.sighting.addr
            );
            m.next_check = Some(now + health::next_interval(&mut self.rng));
            return;
        }
        let reason = checked
            .problems
            .iter()
            .find(|p| p.host == label)
            .map_or("the check lost it", |p| p.reason.as_str())
            .to_string();
        if !m.failed_once && now.saturating_duration_since(started) < health::SETTLED_AFTER {
            tracing::debug!("{label}: health check refused ({reason}); checking again");
            m.failed_once = true;
            m.next_check = Some(now + health::RECHECK_AFTER);
            return;
        }
        self.gone(out, label, format!("health check failed: {reason}"), false);
    }
}
