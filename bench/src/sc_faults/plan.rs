//! **The fault schedule**, planned whole before the run from a seed: what
//! is injected, on which agent, when and for how long. Planned up front so
//! that it can be checked (no two faults on one agent at once, few agents
//! dark together, no latency measured under a fault of the whole cluster)
//! and so that the same seed gives the same run.
//!
//! Agent faults come every 4-6 s on a random idle agent, their kinds in a
//! fixed rotation (pauses are half of it: their length varies, 1-15 s).
//! The faults of the whole cluster (the coordinator's own link lossy, a
//! CPU hog on both cores, the coordinator stopped) come at fixed points of
//! the run, one at a time; while one lasts (and a few seconds after), no
//! agent fault is crashed, cut, paused or resumed, so the latencies are
//! measured on a cluster with one thing wrong at a time. Agents with a
//! lossy link may overlap anything: nothing at all is expected of them.

use std::ops::Range;

/// The kinds of fault, as the injection log and the metrics name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The agent SIGKILLed, started again (a new process) [`RESTART_S`] later.
    Crash,
    /// The agent SIGSTOPped for 1-15 s, then SIGCONT.
    Pause,
    /// The agent's host cut off: `ip link set eth0 down` for [`LINK_S`].
    LinkDown,
    /// 10% loss each way on the agent's link.
    Loss,
    /// 10% loss each way on the coordinator's own link.
    CoordLoss,
    /// Two busy loops, one per core.
    CpuHog,
    /// The coordinator's observers SIGSTOPped for [`COORD_PAUSE_S`].
    CoordPause,
}

impl Kind {
    /// Every kind, in the report's order.
    pub(crate) const ALL: [Kind; 7] = [
        Kind::Crash,
        Kind::Pause,
        Kind::LinkDown,
        Kind::Loss,
        Kind::CoordLoss,
        Kind::CpuHog,
        Kind::CoordPause,
    ];

    /// Its name in metrics (`injected_<name>`) and notes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Crash => "crash",
            Kind::Pause => "pause",
            Kind::LinkDown => "link_down",
            Kind::Loss => "loss",
            Kind::CoordLoss => "coordinator_loss",
            Kind::CpuHog => "cpu_hog",
            Kind::CoordPause => "coordinator_pause",
        }
    }

    /// A fault of the whole cluster (no agent of its own).
    pub(crate) fn global(self) -> bool {
        matches!(self, Kind::CoordLoss | Kind::CpuHog | Kind::CoordPause)
    }

    /// How long the agent stays out of the next fault's reach after this
    /// one is lifted, s: time to rejoin after a restart or a link back,
    /// and the 5 s after a pause in which a `left` still counts as caused
    /// by it (a false one).
    pub(crate) fn settle_s(self) -> f64 {
        match self {
            Kind::Crash => 10.0,
            Kind::Pause => 5.0,
            Kind::LinkDown => 15.0,
            Kind::Loss => 5.0,
            Kind::CoordLoss | Kind::CpuHog | Kind::CoordPause => GLOBAL_SETTLE_S,
        }
    }

    /// The stretches, s after the fault's start (its length `dur`), in
    /// which its latencies are measured: its news, and its rejoin or `up`.
    /// No fault of the whole cluster may fall into them.
    fn critical(self, dur: f64) -> Vec<Range<f64>> {
        match self {
            Kind::Crash => vec![0.0..3.0, dur..dur + 8.0],
            Kind::Pause => vec![0.0..3.0, dur..dur + 2.0],
            Kind::LinkDown => vec![0.0..4.0, dur..dur + Kind::LinkDown.settle_s()],
            _ => Vec::new(),
        }
    }

    /// Whether the agent is dark (its agent or host not answering) while
    /// the fault lasts: these are what a partition is counted from.
    fn dark(self) -> bool {
        matches!(self, Kind::Crash | Kind::Pause | Kind::LinkDown)
    }
}

/// A crashed agent is started again this long after its SIGKILL.
pub(crate) const RESTART_S: f64 = 10.0;
/// A cut link stays down this long.
pub(crate) const LINK_S: f64 = 20.0;
/// Pauses last 1 s to this long (uniformly).
pub(crate) const PAUSE_MAX_S: f64 = 15.0;
/// The CPU hog runs this long.
pub(crate) const HOG_S: f64 = 20.0;
/// The coordinator is stopped this long.
pub(crate) const COORD_PAUSE_S: f64 = 3.0;
/// Loss on a link, percent (agents' and the coordinator's).
pub(crate) const LOSS_PCT: u8 = 10;
/// After a fault of the whole cluster, this long before latencies are
/// measured again (and the window in which news of an agent without a
/// fault of its own is blamed on it).
pub(crate) const GLOBAL_SETTLE_S: f64 = 5.0;
/// After a dark fault is lifted, its agent still counts as dark this long
/// (watch has a restarted agent or a link back within 1.5 s, a resumed
/// one at once).
const DARK_AFTER_S: f64 = 3.0;
/// The agent faults' kinds, in turn.
const ROTATION: [Kind; 8] = [
    Kind::Pause,
    Kind::LinkDown,
    Kind::Pause,
    Kind::Crash,
    Kind::Pause,
    Kind::Loss,
    Kind::Pause,
    Kind::Crash,
];

/// One planned fault: `at` and `dur` in s from the run's start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub kind: Kind,
    /// Its agent (host index, 1-based); `None` for the whole cluster.
    pub agent: Option<usize>,
    pub at: f64,
    pub dur: f64,
}

impl Planned {
    /// While its agent counts as dark for a partition: the fault, and
    /// [`DARK_AFTER_S`] after it until watch has it back.
    fn dark_span(&self) -> Range<f64> {
        self.at..self.at + self.dur + DARK_AFTER_S
    }

    /// When its agent is free again, s.
    fn busy_until(&self) -> f64 {
        self.at + self.dur + self.kind.settle_s()
    }
}

/// How the run is shaped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Agents, on hosts 1..=agents.
    pub agents: usize,
    /// Length of the injection, s.
    pub length_s: f64,
    /// How long an agent's (and the coordinator's) lossy link lasts, s.
    pub loss_s: f64,
    pub seed: u64,
}

impl Shape {
    /// At most this many agents dark at once: a fifth of the cluster (at
    /// least 2), well under the half that makes a partition.
    pub(crate) fn max_dark(&self) -> usize {
        (self.agents / 5)
            .max(2)
            .min(self.agents.saturating_sub(1) / 2)
    }

    /// The faults of the whole cluster, at fixed points of the run: in a
    /// run of 10 minutes or more the coordinator's link lossy twice, the
    /// hog three times, the coordinator stopped four times; in a shorter
    /// one (CI's two minutes) each once, all in the second half, so that
    /// the first half has room for a crash and a cut link (each needs
    /// 20-35 s clear of the cluster's faults to be measured).
    fn globals(&self) -> Vec<Planned> {
        let points: &[(f64, Kind)] = if self.length_s >= 600.0 {
            &[
                (0.10, Kind::CoordPause),
                (0.20, Kind::CpuHog),
                (0.30, Kind::CoordLoss),
                (0.40, Kind::CoordPause),
                (0.50, Kind::CpuHog),
                (0.60, Kind::CoordLoss),
                (0.70, Kind::CoordPause),
                (0.80, Kind::CpuHog),
                (0.93, Kind::CoordPause),
            ]
        } else {
            &[
                (0.45, Kind::CoordPause),
                (0.55, Kind::CpuHog),
                (0.78, Kind::CoordLoss),
            ]
        };
        points
            .iter()
            .map(|&(f, kind)| Planned {
                kind,
                agent: None,
                at: (self.length_s * f).round(),
                dur: match kind {
                    Kind::CoordLoss => self.loss_s,
                    Kind::CpuHog => HOG_S,
                    _ => COORD_PAUSE_S,
                },
            })
            .filter(|g| g.busy_until() <= self.length_s)
            .collect()
    }
}

/// Whether two half-open ranges share a moment.
fn overlap(a: &Range<f64>, b: &Range<f64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The whole schedule, by start time.
pub(crate) fn plan(shape: Shape) -> Vec<Planned> {
    let mut rng = fastrand::Rng::with_seed(shape.seed);
    let globals = shape.globals();
    let windows: Vec<Range<f64>> = globals.iter().map(|g| g.at..g.busy_until()).collect();
    let mut out: Vec<Planned> = Vec::new();
    let mut busy = vec![0.0f64; shape.agents + 1];
    let (mut t, mut turn) = (5.0, 0usize);
    while t < shape.length_s {
        // The kind due, or the next in turn that fits here.
        let mut chosen = None;
        for k in 0..ROTATION.len() {
            let kind = ROTATION[(turn + k) % ROTATION.len()];
            let dur = match kind {
                Kind::Crash => RESTART_S,
                Kind::Pause => 1.0 + rng.f64() * (PAUSE_MAX_S - 1.0),
                Kind::LinkDown => LINK_S,
                _ => shape.loss_s,
            };
            let dur = (dur * 10.0).round() / 10.0;
            let end = t + dur + kind.settle_s();
            let clash = kind.critical(dur).iter().any(|c| {
                windows
                    .iter()
                    .any(|w| overlap(&(t + c.start..t + c.end), w))
            });
            let dark = kind.dark()
                && out
                    .iter()
                    .filter(|p| {
                        p.kind.dark() && overlap(&p.dark_span(), &(t..t + dur + DARK_AFTER_S))
                    })
                    .count()
                    >= shape.max_dark();
            let idle: Vec<usize> = (1..=shape.agents).filter(|&i| busy[i] <= t).collect();
            if end <= shape.length_s && !clash && !dark && !idle.is_empty() {
                chosen = Some((k, kind, dur, idle[rng.usize(..idle.len())]));
                break;
            }
        }
        match chosen {
            Some((k, kind, dur, agent)) => {
                let p = Planned {
                    kind,
                    agent: Some(agent),
                    at: t,
                    dur,
                };
                busy[agent] = p.busy_until();
                out.push(p);
                // A kind that did not fit stays due: only the kind due
                // moves the rotation on.
                if k == 0 {
                    turn += 1;
                }
                t += 4.0 + rng.f64() * 2.0;
            }
            None => t += 1.0,
        }
        t = (t * 10.0).round() / 10.0;
    }
    out.extend(globals);
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Shape {
        Shape {
            agents: 10,
            length_s: 120.0,
            loss_s: 20.0,
            seed: 27,
        }
    }

    fn full() -> Shape {
        Shape {
            agents: 50,
            length_s: 1800.0,
            loss_s: 60.0,
            seed: 27,
        }
    }

    #[test]
    fn faults_on_one_agent_never_overlap_and_all_end_before_the_run() {
        for shape in [quick(), full()] {
            let p = plan(shape);
            for (k, a) in p.iter().enumerate() {
                assert!(a.busy_until() <= shape.length_s, "{a:?} ends too late");
                for b in &p[k + 1..] {
                    if a.agent.is_some() && a.agent == b.agent {
                        assert!(b.at >= a.busy_until(), "{a:?} and {b:?} overlap");
                    }
                }
            }
        }
    }

    #[test]
    fn no_latency_is_measured_under_a_fault_of_the_whole_cluster() {
        for shape in [quick(), full()] {
            let p = plan(shape);
            for g in p.iter().filter(|g| g.kind.global()) {
                for a in p.iter().filter(|a| !a.kind.global()) {
                    for c in a.kind.critical(a.dur) {
                        assert!(
                            !overlap(&(a.at + c.start..a.at + c.end), &(g.at..g.busy_until())),
                            "{a:?} measured during {g:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn never_more_agents_dark_at_once_than_a_fifth_of_the_cluster() {
        for shape in [quick(), full()] {
            let p = plan(shape);
            let dark: Vec<&Planned> = p.iter().filter(|a| a.kind.dark()).collect();
            for a in &dark {
                // At the moment each starts, how many are dark.
                let at_once = dark
                    .iter()
                    .filter(|b| b.at <= a.at && a.at < b.dark_span().end)
                    .count();
                assert!(at_once <= shape.max_dark(), "{at_once} dark at {}", a.at);
            }
        }
    }

    #[test]
    fn a_quick_run_injects_every_kind_and_a_full_one_hundreds_of_faults() {
        let p = plan(quick());
        for kind in Kind::ALL {
            assert!(
                p.iter().any(|a| a.kind == kind),
                "no {} in {p:?}",
                kind.name()
            );
        }
        let p = plan(full());
        assert!(p.len() > 250, "{} faults", p.len());
        let pauses = p.iter().filter(|a| a.kind == Kind::Pause).count();
        assert!(pauses > 100, "{pauses} pauses");
        assert_eq!(p.iter().filter(|a| a.kind == Kind::CoordLoss).count(), 2);
    }

    #[test]
    fn the_same_seed_plans_the_same_run() {
        assert_eq!(plan(quick()), plan(quick()));
    }
}
