//! **The membership engine's state** — members, the refusals already
//! reported, the candidates waiting for admission, the departed instances
//! to revisit, the streams and the engine's own health; and the knobs a
//! runtime sets. What it does with them is in the sibling modules, one per
//! concern: `run` (the loop), `joins`, `checks`, `goodbyes`, `suspicion`.

use super::admission::{self, Bucket, Queue, Refusals};
use super::farewell::GoodbyeCounts;
use super::inputs::Check;
use super::liveness::{Liveness, ProbeFor, Tagged};
use super::local::LocalHealth;
use super::member::{Departures, Member};
use crate::pipeline::NodeDefaults;
use crate::sighting::Sighting;
use std::collections::{BTreeMap, BTreeSet};
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

/// How long after a member left its instance is dialled again, quietly:
/// an agent answering then (another incarnation, or one whose goodbye
/// check only lost its packets) joins again, where nothing else might
/// bring it back (its records can equal the cached ones).
pub(crate) const CONFIRM_AFTER_GOODBYE: Duration = Duration::from_millis(1500);

/// After the first, a departed instance is dialled again after this,
/// doubling up to [`REVISIT_CAP`], for [`REVISIT_FOR`] after it left: a
/// box whose link was down for 20 s, or that rebooted, is joined again
/// when it answers, though its mDNS records may equal the cached ones and
/// never be news (the "never reported it back").
pub(crate) const REVISIT_FIRST: Duration = Duration::from_secs(5);

/// The longest wait between two revisits of a departed instance.
pub(crate) const REVISIT_CAP: Duration = Duration::from_secs(15);

/// How long after it left a departed instance is revisited at all.
pub(crate) const REVISIT_FOR: Duration = Duration::from_secs(600);

/// A departed instance to dial again: when, where, and when it left.
#[derive(Debug, Clone)]
pub(crate) struct Revisit {
    pub(super) due: Instant,
    pub(super) sighting: Sighting,
    pub(super) left_at: Instant,
    /// The revisits made so far.
    pub(super) round: u32,
}

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

/// Most refusals remembered as already reported (then the oldest is
/// forgotten, and may be reported again).
pub(super) const MAX_REPORTED: usize = admission::MAX_REMEMBERED;

/// The membership engine: members, the refusals already reported, the
/// candidates waiting for admission and how they are checked and turned
/// into nodes.
pub(crate) struct Watch<C, L> {
    pub(super) check: C,
    pub(super) liveness: L,
    pub(super) tuning: WatchTuning,
    pub(super) defaults: NodeDefaults,
    pub(super) started: Instant,
    pub(super) members: BTreeMap<String, Member>,
    pub(super) refused: BTreeSet<(String, String)>,
    pub(super) queue: Queue,
    pub(super) bucket: Bucket,
    pub(super) refusals: Refusals,
    /// Labels in admission now.
    pub(super) admitting: BTreeSet<String>,
    /// Instances that left, to be dialled again: at most
    /// [`MAX_REMEMBERED`].
    pub(super) confirming: BTreeMap<String, Revisit>,
    pub(super) generation: u64,
    pub(super) rng: fastrand::Rng,
    pub(super) goodbyes: GoodbyeCounts,
    /// A goodbye was refuted since the browse was last asked to re-learn.
    pub(super) relearn: bool,
    /// Instances found to be a member's machine under another name, to
    /// that member's name: at most [`MAX_REMEMBERED`].
    pub(super) aliases: BTreeMap<String, String>,
    /// When each instance last left, and as which incarnation.
    pub(super) left: Departures,
    /// Where streams send what they hear (set while [`Watch::run`] runs).
    pub(super) pulses: Option<tokio::sync::mpsc::UnboundedSender<Tagged>>,
    /// Streams opened so far: each one's id.
    pub(super) streams: u64,
    /// Members to dial at the next turn of the loop, and why.
    pub(super) wanted: Vec<(String, ProbeFor)>,
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
            tuning,
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
            pulses: None,
            streams: 0,
            wanted: Vec::new(),
            health: LocalHealth::new(started),
        }
    }

    /// Sets the cluster's size for partitions (usually its file's node
    /// count) unless the caller gave one.
    pub(crate) fn size_unless_set(&mut self, nodes: usize) {
        if self.tuning.cluster_size == 0 {
            self.tuning.cluster_size = nodes;
        }
    }
}
