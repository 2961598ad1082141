//! **The engine's loop** — every input of [`Watch`] polled in one
//! `select!`: the announcements, the zone, the checks and dials that end,
//! what the members' streams tell, the engine's tick, and the shutdown;
//! and the routing of each between the engine's parts (the module doc of
//! [`super::engine`]): a part's conclusion for another goes through here.

use super::admission::Key;
use super::checks;
use super::engine::{Watch, WatchError};
use super::event::{Event, Out};
use super::farewell;
use super::goodbyes::AfterGoodbye;
use super::inputs::{member_name, named, poll_zone, Announcements, Check, Zone};
use super::job::{run_job, Job};
use super::liveness::{pace_for, Liveness, ProbeFor, Reach, Tagged, Told, REACH_WINDOW};
use super::local::{REST_TICK, TICK};
use super::member::Revisit;
use super::members::Leave;
use crate::sighting::{Discovery, Sighting, Source};
use crate::sources::mdns::Change;
use std::collections::BTreeSet;
use std::future::Future;
use tokio::time::Instant;

/// The longest a tick skips its look while every member is at rest: a
/// bound on any deadline [`Watch::at_rest_until`] does not know of.
const REST_AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);

/// When the tick after one at `now` is due: [`TICK`] on, or while every
/// member is at rest until `rest`, [`REST_TICK`] on or at `rest`, whichever
/// is sooner.
fn next_tick(now: Instant, rest: Option<Instant>) -> Instant {
    match rest.filter(|&until| until > now) {
        Some(until) => (now + REST_TICK).min(until),
        None => now + TICK,
    }
}

/// The checks under way, each in its own task.
type JobSet = tokio::task::JoinSet<(Job, Discovery)>;

/// The dials under way: which member, for what, since when, and the end.
type ProbeSet = tokio::task::JoinSet<((String, u64, ProbeFor, Instant), Reach)>;

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
    /// Runs until `shutdown` completes, handing every event to `emit` as it
    /// happens: changes from `mdns` as they come, a browse of `dns` at once
    /// and every [`super::DNS_POLL_INTERVAL`], a health check of each member on its
    /// own jittered schedule ([`super::health`]). Every handshake (admissions,
    /// health checks) runs in its own task and the DNS browse beside the
    /// loop, never inline: a slow or dead host costs only its own check,
    /// and nobody else's event waits for it ([`super::admission`] bounds how many
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
        let mut jobs = JobSet::new();
        // Dials of members' ports, each in its own task too.
        let mut probes = ProbeSet::new();
        // What the members' streams tell, from their own tasks.
        let (pulses_tx, mut pulses) = tokio::sync::mpsc::unbounded_channel();
        self.suspicions.listen(Some(pulses_tx));
        // The engine's tick, every TICK, or every REST_TICK while every
        // member is at rest (`next_tick`).
        let tick = tokio::time::sleep_until(self.health.next_tick());
        tokio::pin!(tick);
        tokio::pin!(shutdown);
        // Whether this turn looks for due work: every turn but one after
        // plain pulses. With hundreds of members their pulses arrive
        // hundreds of times a second, and each look walks every member;
        // a plain pulse changes no deadline, so the look waits for the
        // next tick (every 50 ms: silences are judged no later), the next
        // deadline, or any other news.
        let mut look = true;
        let mut wake = None;
        // Until when a tick has nothing to do (every member at rest, its
        // deadlines later): each look walks every member several times,
        // and at 200 members at rest 20 looks a second were a quarter of
        // watch's CPU (docs/scale.md). Any news makes the next turn look.
        let mut rest: Option<Instant> = None;
        loop {
            let now = Instant::now();
            self.look_at_self(now);
            if std::mem::replace(&mut look, true) {
                wake = self.due_work(&mut mdns, (&mut jobs, &mut probes), now);
                rest = self.at_rest_until(now);
                // No longer at rest (or a deadline sooner): the tick
                // comes sooner too.
                let next = next_tick(now, rest);
                if next < self.health.next_tick() {
                    self.health.tick_at(next);
                    tick.as_mut().reset(next);
                }
            }
            // Biased: the streams' news first, so that a pulse waiting in the
            // channel is heard before a dial's verdict on its silence (after
            // the engine itself was stalled, both are ready at once).
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(t) = pulses.recv() => {
                    // Every pulse waiting, in one turn.
                    let before = out.emitted;
                    let mut plain = matches!(t.told, Told::Pulse);
                    self.pulsed(&mut out, t);
                    while let Ok(t) = pulses.try_recv() {
                        plain &= matches!(t.told, Told::Pulse);
                        self.pulsed(&mut out, t);
                    }
                    look = !plain || out.emitted != before;
                }
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
                        self.joins.report_refusals(&mut out, &problems);
                        self.consider(sightings, &vouched);
                    }
                },
                () = &mut poller => {}
                () = &mut tick => {
                    let now = Instant::now();
                    self.look_at_self(now);
                    let next = next_tick(now, rest);
                    self.health.tick_at(next);
                    tick.as_mut().reset(next);
                    if rest.is_some_and(|until| now < until) {
                        look = false;
                    } else {
                        self.due_suspicions(&mut out, now);
                    }
                }
                Some(done) = probes.join_next(), if !probes.is_empty() => match done {
                    Ok(((label, generation, why, started), reach)) => {
                        self.reached(&mut out, (&label, generation, why, started), reach)
                    }
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(e) => tracing::warn!("a watch dial was cancelled: {e}"),
                },
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
                    Ok((Job::Confirm { label, revisit }, checked)) => {
                        self.confirmed(&mut out, (&label, *revisit), checked)
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
        self.suspicions.listen(None);
        Ok(())
    }

    /// Starts the work due at `now` (follows, dials, admissions, health
    /// and goodbye checks) and says when the next is due.
    fn due_work<A: Announcements>(
        &mut self,
        mdns: &mut Option<&mut A>,
        (jobs, probes): (&mut JobSet, &mut ProbeSet),
        now: Instant,
    ) -> Option<Instant> {
        // The pace asked of the agents, by the cluster's size (a store the
        // streams' thread reads at its pings).
        self.liveness.ask_pace(pace_for(self.members.size()));
        self.suspicions
            .due_follows(&mut self.members, &self.liveness, now);
        for p in self.due_probes(now) {
            let live = self.liveness.clone();
            probes.spawn(async move {
                let reach = live.reach(p.sighting, REACH_WINDOW).await;
                ((p.label, p.generation, p.why, now), reach)
            });
        }
        // The revisits due, then the candidates the bucket lets through.
        let mut admissions = self.goodbyes.due_revisits(now);
        admissions.extend(self.joins.take_admissions(now));
        for (job, d) in admissions {
            jobs.spawn(run_job(self.check.clone(), job, d));
        }
        for (job, d) in checks::due(&mut self.members, now) {
            jobs.spawn(run_job(self.check.clone(), job, d));
        }
        for (job, s, was) in self.goodbyes.due_checks(&mut self.members, now) {
            let with = (self.check.clone(), self.liveness.clone());
            jobs.spawn(async move { (job, farewell::check_after_goodbye(with, s, was).await) });
        }
        if self.goodbyes.take_relearn() {
            if let Some(b) = mdns.as_mut() {
                b.relearn();
            }
        }
        [
            self.joins.next_admission(),
            checks::next_due(&self.members),
            self.goodbyes.next_revisit(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Until when no tick has work, when every member is at rest
    /// ([`super::member::Member::at_rest`]): the first of their deadlines,
    /// and at most [`REST_AT_MOST`] from `now`. `None` when a member is
    /// not at rest: every tick looks.
    pub(super) fn at_rest_until(&self, now: Instant) -> Option<Instant> {
        let mut until = now + REST_AT_MOST;
        for (_, m) in self.members.each() {
            if !m.at_rest() {
                return None;
            }
            if let Some(t) = m.next_due(|h| self.health.quiet_since(h)) {
                until = until.min(t);
            }
        }
        Some(until)
    }

    /// The engine's own health at `now` (each turn of the loop, and each
    /// tick before it is taken as on time): a stall is logged, and no
    /// silence counts from before it.
    fn look_at_self(&mut self, now: Instant) {
        if let Some(late) = self.health.observe(now) {
            tracing::warn!(
                stalls = self.health.stalls,
                "watch itself did not run for {} ms (paused, or its cores saturated): no \
                 member's silence counts from before now",
                late.as_millis()
            );
        }
    }

    /// Queues what a snapshot or browse announced ([`super::joins::Joins::consider`]):
    /// an instance announced again is no longer revisited.
    fn consider(&mut self, sightings: Vec<Sighting>, vouched: &BTreeSet<String>) {
        for label in self.joins.consider(&self.members, sightings, vouched) {
            self.goodbyes.stop_revisiting(&label);
        }
    }

    /// One DNS-SD browse's result: new registrations join through
    /// admission; a DNS member whose registration is missing is checked
    /// like a member said goodbye for ([`super::farewell`]), and leaves
    /// only if its machine does not answer: a registration missing from
    /// one answer (a server restarting, a lease renewed late, a forged or
    /// truncated reply) is not a departure.
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
        self.members.missing_from_zone(&present, Instant::now());
        self.joins.report_refusals(out, &problems);
        self.consider(sightings, &BTreeSet::new());
    }

    /// What a stream told ([`super::suspicion::Suspicions::pulsed`]).
    fn pulsed(&mut self, out: &mut Out<impl FnMut(Event)>, t: Tagged) {
        let label = t.label.clone();
        if let Some(leave) = self.suspicions.pulsed(out, &mut self.members, t) {
            self.gone(out, &label, leave);
        }
    }

    /// The end of a dial ([`super::suspicion::Suspicions::reached`]).
    fn reached(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        dial: (&str, u64, ProbeFor, Instant),
        reach: Reach,
    ) {
        let parts = (&mut self.members, &self.health);
        if let Some(leave) = self.suspicions.reached(out, parts, dial, reach) {
            self.gone(out, dial.0, leave);
        }
    }

    /// The tick's judgement of suspects and dark members: the expired
    /// suspicions leave first, then the dark ones are counted and judged
    /// ([`super::suspicion::Suspicions::due_dark`]).
    fn due_suspicions(&mut self, out: &mut Out<impl FnMut(Event)>, now: Instant) {
        self.suspicions.beats(out, &mut self.members, now);
        for (label, leave) in self.suspicions.expired(&self.members, now) {
            self.gone(out, &label, leave);
        }
        for (label, leave) in self.suspicions.due_dark(out, &mut self.members, now) {
            self.gone(out, &label, leave);
        }
    }

    /// The end of one admission: joined (or updated, or restarted) unless
    /// refused ([`super::joins::Joins::admitted`]).
    fn admitted(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        (label, started): (String, Instant),
        announced: Option<String>,
        key: Key,
        checked: Discovery,
    ) {
        let admitted = self
            .joins
            .admitted(out, &self.members, (label, started), key, checked);
        if let Some(s) = admitted {
            self.members.join_or_update(out, s, announced);
        }
    }

    /// The end of a member's health check ([`checks::checked`]).
    fn checked(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        (generation, dialled): (u64, &str),
        started: Instant,
        checked: Discovery,
    ) {
        let check = (label, generation, dialled);
        if let Some(leave) = checks::checked(out, &mut self.members, check, started, checked) {
            self.gone(out, label, leave);
        }
    }

    /// The end of a goodbye check ([`super::goodbyes::Goodbyes::checked`]).
    fn goodbye_checked(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        (generation, dialled): (u64, &str),
        checked: Discovery,
    ) {
        let check = (label, generation, dialled);
        match self
            .goodbyes
            .checked(out, &mut self.members, check, checked)
        {
            AfterGoodbye::Kept => {}
            AfterGoodbye::Refuse { contender, problem } => {
                self.joins.refuse_contender(out, &contender, *problem)
            }
            AfterGoodbye::Gone(why) => self.gone(out, label, Leave::revisited(why)),
        }
    }

    /// The end of a revisit of a departed instance
    /// ([`super::goodbyes::Goodbyes::revisited`]): its claims reported, and
    /// the instance back joined again.
    fn confirmed(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        (label, revisit): (&str, Revisit),
        checked: Discovery,
    ) {
        let taken = self.members.has(label) || self.joins.admitting(label);
        let Some(found) = self.goodbyes.revisited((label, revisit), taken, checked) else {
            return;
        };
        self.joins.report_refusals(out, &found.claims);
        if let Some(s) = found.back {
            let announced = s.caps.as_ref().map(|c| c.to_json());
            self.members.join_or_update(out, s, announced);
        }
    }
}
