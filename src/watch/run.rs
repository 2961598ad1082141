//! **The engine's loop** — every input of [`Watch`] polled in one
//! `select!`: the announcements, the zone, the checks and dials that end,
//! what the members' streams tell, the engine's tick, and the shutdown.

use super::engine::{Watch, WatchError};
use super::event::{Event, Out};
use super::farewell;
use super::inputs::{member_name, named, poll_zone, Announcements, Check, Zone};
use super::job::{run_job, Job};
use super::liveness::{Liveness, REACH_WINDOW};
use super::local::TICK;
use crate::sighting::Source;
use crate::sources::mdns::Change;
use std::future::Future;
use tokio::time::Instant;

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
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
        // Dials of members' ports, each in its own task too.
        let mut probes = tokio::task::JoinSet::new();
        // What the members' streams tell, from their own tasks.
        let (pulses_tx, mut pulses) = tokio::sync::mpsc::unbounded_channel();
        self.pulses = Some(pulses_tx);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            let now = Instant::now();
            self.look_at_self(now);
            self.due_follows(now);
            for p in self.due_probes(now) {
                let live = self.liveness.clone();
                probes.spawn(async move {
                    let reach = live.reach(p.sighting, REACH_WINDOW).await;
                    ((p.label, p.generation, p.why, now), reach)
                });
            }
            for (job, d) in self.take_admissions(now) {
                jobs.spawn(run_job(self.check.clone(), job, d));
            }
            for (job, d) in self.due_checks(now) {
                jobs.spawn(run_job(self.check.clone(), job, d));
            }
            for (job, s, was) in self.due_goodbyes(now) {
                let with = (self.check.clone(), self.liveness.clone());
                jobs.spawn(async move { (job, farewell::check_after_goodbye(with, s, was).await) });
            }
            if std::mem::take(&mut self.relearn) {
                if let Some(b) = mdns.as_mut() {
                    b.relearn();
                }
            }
            let wake = [
                self.next_admission(),
                self.next_check(),
                self.confirming.values().map(|r| r.due).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            // Biased: the streams' news first, so that a pulse waiting in the
            // channel is heard before a dial's verdict on its silence (after
            // the engine itself was stalled, both are ready at once).
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(t) = pulses.recv() => self.pulsed(&mut out, t),
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
                _ = tick.tick() => {
                    let now = Instant::now();
                    self.look_at_self(now);
                    self.health.ticked(now);
                    self.due_suspicions(&mut out, now);
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
        self.pulses = None;
        Ok(())
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
}
