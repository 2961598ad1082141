//! **The membership engine** — its state in owned parts, and the knobs a
//! runtime sets. Each part keeps its fields private and is handed only
//! what it needs:
//!
//! - [`Members`] (`members`): the member table, the names a member's
//!   machine was also seen under, the departures, the dials asked for; a
//!   sighting joined, a member departed. The ground floor: it calls no
//!   other part.
//! - [`Joins`] (`joins`): the admission queue, its rate, the refusals'
//!   back-off and those reported, who is in admission.
//! - `checks`: the health checks (no state of its own).
//! - [`Goodbyes`] (`goodbyes`): the goodbye counts, the departed instances
//!   to revisit, the browse's re-learn.
//! - [`Suspicions`] (`suspicion`): the members' streams, dials, suspects
//!   and partitions.
//!
//! Every part but `members` is handed the table (`&Members` or
//! `&mut Members`) and none calls another: what a part concludes for
//! another (a member gone, a contender refused, an instance back) it
//! returns, and the engine routes it ([`Watch::gone`] and the handlers in
//! `run`). So the calls go one way, engine -> parts -> members, which
//! `.ci/modgraph.py` checks method by method (`--graph` prints who calls
//! what). When every concern was a method of `Watch` itself, the calls
//! went both ways (a goodbye's check dialled through `suspicion`, whose
//! verdicts left members through `goodbyes`), a cycle no import showed.

use super::event::{Event, Out};
use super::goodbyes::Goodbyes;
use super::inputs::Check;
use super::joins::Joins;
use super::liveness::Liveness;
use super::local::LocalHealth;
use super::members::{Departed, Leave, Members};
use super::suspicion::{Probe, Suspicions};
use crate::pipeline::NodeDefaults;
use std::time::Duration;
use tokio::time::Instant;

/// The default suspicion timeout: how long a member may stay suspect
/// (its host answering, its agent silent) before it is declared `left`.
/// Two minutes: a box loading a large checkpoint, swapping, or SIGSTOPped
/// for a debugger is silent for seconds to a minute (exo #2223: a 100 GB
/// shard), and a false `left` makes the runtime re-plan the whole model,
/// while a real death is confirmed long before by a refusal or silence of
/// the host. A runtime that prefers to re-plan sooner sets its own
/// ([`crate::follow::WatchOptions::suspect_timeout`]).
pub(crate) const SUSPECT_TIMEOUT: Duration = Duration::from_secs(120);

/// The runtime's knobs of the membership engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WatchTuning {
    /// How long a member may be suspect before it is `left`
    /// ([`SUSPECT_TIMEOUT`] by default).
    pub(crate) suspect_timeout: Duration,
    /// How many nodes the cluster has (its file's `[[node]]` count): with
    /// the members seen, what "more than half went dark" is a half of.
    pub(crate) cluster_size: usize,
}

impl Default for WatchTuning {
    fn default() -> Self {
        WatchTuning {
            suspect_timeout: SUSPECT_TIMEOUT,
            cluster_size: 0,
        }
    }
}

/// Why a watch cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The announcements stopped for good (the mDNS daemon died): joins and
    /// goodbyes can no longer be seen, so no membership can be claimed.
    #[error("the mDNS daemon stopped; watch cannot go on")]
    BrowseStopped,
}

/// The membership engine: its inputs' checks and dials, and its state in
/// owned parts (see the module's doc).
pub(crate) struct Watch<C, L> {
    pub(super) check: C,
    pub(super) liveness: L,
    /// The origin of the events' `at_ms`.
    pub(super) started: Instant,
    pub(super) members: Members,
    pub(super) joins: Joins,
    pub(super) goodbyes: Goodbyes,
    pub(super) suspicions: Suspicions,
    /// The engine's own scheduling.
    pub(super) health: LocalHealth,
}

impl<C: Check + Clone + Send + Sync + 'static, L: Liveness> Watch<C, L> {
    /// A watch with no members yet, checking them with `check` and
    /// following them with `liveness`. `started` is the origin of the
    /// events' `at_ms` (a tokio instant, so paused time in tests moves it
    /// too).
    pub(crate) fn new(
        (check, liveness): (C, L),
        defaults: NodeDefaults,
        tuning: WatchTuning,
        started: Instant,
    ) -> Self {
        Watch {
            check,
            liveness,
            started,
            members: Members::new(defaults),
            joins: Joins::new(started),
            goodbyes: Goodbyes::default(),
            suspicions: Suspicions::new(tuning.suspect_timeout, tuning.cluster_size),
            health: LocalHealth::new(started),
        }
    }

    /// Sets the cluster's size for partitions (usually its file's node
    /// count) unless the caller gave one.
    pub(crate) fn size_unless_set(&mut self, nodes: usize) {
        self.suspicions.size_unless_set(nodes);
    }

    /// A goodbye (or an expiry) for `label`: a claim, checked
    /// ([`Goodbyes::said`]).
    pub(super) fn goodbye(&mut self, label: &str) {
        self.goodbyes.said(&mut self.members, label);
    }

    /// The dials to start now ([`Suspicions::due_probes`]).
    pub(super) fn due_probes(&mut self, now: Instant) -> Vec<Probe> {
        self.suspicions
            .due_probes(&mut self.members, &self.health, now)
    }

    /// Member `label` found gone by a part (`leave`): departed from the
    /// table (or kept, moved, when its contender is itself), its instance
    /// revisited if the leave says so, and a contender with another node
    /// id joined under the name.
    pub(super) fn gone(&mut self, out: &mut Out<impl FnMut(Event)>, label: &str, leave: Leave) {
        let Some(Departed {
            sighting,
            contender,
        }) = self.members.depart(out, label, leave.why)
        else {
            return;
        };
        if leave.revisit {
            self.goodbyes.revisit_later(label, sighting);
        }
        if let Some((c, announced)) = contender {
            self.members.join_or_update(out, c, announced);
        }
    }
}
