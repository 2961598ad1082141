//! **Each tool's news judged against the injection log**: the latency of
//! what a fault should have caused (a crash `left`, a pause `suspect`
//! then `up`, a cut link `left` then back), and every accusation no fault
//! explains (a false `left`, an unexplained `suspect`).
//!
//! A `left` is explained only by a crash or a cut link of that agent,
//! between the fault and 2 s after it was lifted. Any other `left` is
//! false, whatever else went on: under a pause of its agent (or within
//! 5 s after), on a lossy link, during the CPU hog, while the coordinator
//! was stopped or lossy, or under no fault at all; each is kept with what
//! was going on then. A `suspect` is explained by a crash, a cut link or a
//! pause of its agent (until the fault's settle time after it); any other
//! is unexplained.

use super::plan::Kind;
use std::collections::BTreeMap;

/// One injected fault as it happened, wall-clock ms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fault {
    pub kind: Kind,
    /// Host index of its agent; `None` for the whole cluster.
    pub agent: Option<usize>,
    /// When it was injected.
    pub start: f64,
    /// When it was lifted (SIGCONT, link up, loss off, the agent started
    /// again).
    pub end: f64,
}

/// What a tool said, in the words the judge uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum News {
    /// `left` (watch), `removed` (python-zeroconf), failed or left (serf).
    Left,
    /// `joined` or `restarted`; `added` or `updated`; a member join.
    Joined,
    /// `suspect` (watch only).
    Suspect,
    /// `up` (watch only).
    Up,
    /// `partitioned` (watch only).
    Partitioned,
}

/// One piece of news: wall ms, the agent it is about (`None`: no agent of
/// the lab, or the cluster), what.
pub(crate) type Item = (f64, Option<usize>, News);

/// How much earlier than the fault a tool's clock may place its news and
/// still count for it (clocks read a few ms apart).
pub(crate) const CLOCK_SLACK_MS: f64 = 100.0;
/// A pause shorter than this may end before its suspicion is due (the
/// goal's bound for `suspect`): no `suspect` for it is not a miss.
pub(crate) const SHORT_PAUSE_MS: f64 = 1500.0;
/// A `left` this long after a crash's restart or a link's return still
/// counts for it.
const LATE_LEFT_MS: f64 = 2000.0;
/// A `left` of an agent within this long after its pause is blamed on it.
const AFTER_PAUSE_MS: f64 = 5000.0;
/// An `up` counts within this long of the SIGCONT.
const UP_WITHIN_MS: f64 = 5000.0;
/// A `suspect` this long after a SIGCONT still counts for the pause (a
/// dial accepted just after the agent ran again).
const SUSPECT_AFTER_CONT_MS: f64 = 500.0;

/// One latency sample: metric, value (`None`: never reported), why not.
pub(crate) type Latency = (&'static str, Option<f64>, &'static str);

/// Set to 1 (as .ci/run does), a false `left` of `watch` fails the
/// scenario, and so the suite's exit status, instead of being a figure:
/// the promise is 0.
pub(crate) const FAIL_ON_FALSE_LEFT: &str = "RLX_BENCH_FAIL_ON_FALSE_LEFT";

/// The first `take` of `x` (when, whose, what was going on) in words, with
/// times from `from` (wall ms).
pub(crate) fn listed(x: &[(f64, usize, String)], from: f64, take: usize) -> String {
    x.iter()
        .take(take)
        .map(|(t, i, why)| format!("node-{i} at {:.1} s ({why})", (t - from) / 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The verdict on one tool's news.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// One per fault and metric, in the log's order.
    pub latencies: Vec<Latency>,
    /// Each false `left`: when, whose, what was going on.
    pub false_left: Vec<(f64, usize, String)>,
    /// Each unexplained `suspect`: when, whose, what was going on.
    pub unexplained_suspect: Vec<(f64, usize, String)>,
    /// Pauses shorter than [`SHORT_PAUSE_MS`] that showed no `suspect`.
    pub pauses_without_suspect: u32,
    /// `partitioned` events.
    pub partitioned: u32,
}

impl Verdict {
    /// An error naming every false `left` when [`FAIL_ON_FALSE_LEFT`] is
    /// set to 1 and there is one.
    pub(crate) fn fail_on_false_left(&self, from: f64) -> anyhow::Result<()> {
        let strict = std::env::var_os(FAIL_ON_FALSE_LEFT).is_some_and(|v| v == "1");
        if strict && !self.false_left.is_empty() {
            anyhow::bail!(
                "rlx-discover watch reported {} false `left` ({FAIL_ON_FALSE_LEFT}=1): {}",
                self.false_left.len(),
                listed(&self.false_left, from, usize::MAX)
            );
        }
        Ok(())
    }

    /// The false `left`s counted by what was going on.
    pub(crate) fn false_left_by_context(&self) -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        for (_, _, why) in &self.false_left {
            *m.entry(why.as_str()).or_default() += 1;
        }
        m
    }
}

/// Which of the tool's words it has: python-zeroconf and serf have no
/// `suspect` and `up`, so their pauses have no latency to measure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Speaks {
    pub suspect: bool,
}

/// The first `what` of `agent` in `[from, to)`.
fn first(news: &[Item], agent: usize, what: News, from: f64, to: f64) -> Option<f64> {
    news.iter()
        .find(|(t, a, n)| *a == Some(agent) && *n == what && *t >= from && *t < to)
        .map(|x| x.0)
}

/// The agent's next fault after `k` (its start), or the end of time.
fn next_start(log: &[Fault], k: usize) -> f64 {
    log[k + 1..]
        .iter()
        .find(|f| f.agent == log[k].agent)
        .map_or(f64::MAX, |f| f.start)
}

/// What was going on at `t` for `agent`: its own fault, else a fault of the
/// whole cluster then (or in the 2 s after), else nothing.
fn context(log: &[Fault], agent: usize, t: f64) -> String {
    let own = log.iter().find(|f| {
        f.agent == Some(agent)
            && t >= f.start - CLOCK_SLACK_MS
            && t < f.end + f.kind.settle_s() * 1000.0
    });
    let global = log
        .iter()
        .find(|f| f.kind.global() && t >= f.start - CLOCK_SLACK_MS && t < f.end + 2000.0);
    match (own, global) {
        (Some(o), Some(g)) => format!("{} (during {})", o.kind.name(), g.kind.name()),
        (Some(o), None) => o.kind.name().to_string(),
        (None, Some(g)) => g.kind.name().to_string(),
        (None, None) => "no fault".to_string(),
    }
}

/// Judges `news` (sorted by time) against `log` (sorted by start). News
/// before `from` (the injection's start) is not judged.
pub(crate) fn judge(log: &[Fault], news: &[Item], from: f64, speaks: Speaks) -> Verdict {
    let mut v = Verdict::default();
    let slack = CLOCK_SLACK_MS;
    for (k, f) in log.iter().enumerate() {
        let Some(i) = f.agent else { continue };
        let next = next_start(log, k);
        let until = |ms: f64| (f.end + ms).min(next);
        match f.kind {
            Kind::Crash | Kind::LinkDown => {
                let (left_m, back_m) = if f.kind == Kind::Crash {
                    ("crash_left_ms", "crash_rejoin_ms")
                } else {
                    ("vanished_left_ms", "rejoin_ms")
                };
                let left = first(news, i, News::Left, f.start - slack, until(LATE_LEFT_MS));
                v.latencies.push((
                    left_m,
                    left.map(|t| (t - f.start).max(0.0)),
                    "no `left` before its agent was back",
                ));
                // Back: joined again; for watch, a member never found gone
                // is back by its `up`.
                let settle = f.kind.settle_s() * 1000.0;
                let back = [News::Joined, News::Up]
                    .iter()
                    .filter_map(|&n| first(news, i, n, f.end - slack, until(settle)))
                    .reduce(f64::min);
                v.latencies.push((
                    back_m,
                    back.map(|t| (t - f.end).max(0.0)),
                    "not back within the settle time",
                ));
            }
            Kind::Pause if speaks.suspect => {
                let dur = f.end - f.start;
                let suspect = first(
                    news,
                    i,
                    News::Suspect,
                    f.start - slack,
                    until(SUSPECT_AFTER_CONT_MS),
                );
                match suspect {
                    None if dur < SHORT_PAUSE_MS => v.pauses_without_suspect += 1,
                    None => v.latencies.push(("suspect_ms", None, "no `suspect`")),
                    Some(s) => {
                        v.latencies
                            .push(("suspect_ms", Some((s - f.start).max(0.0)), ""));
                        let up = first(news, i, News::Up, s, until(UP_WITHIN_MS));
                        v.latencies.push((
                            "up_ms",
                            up.map(|t| (t - f.end).max(0.0)),
                            "no `up` within 5 s of SIGCONT",
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    for &(t, who, what) in news.iter().filter(|x| x.0 >= from) {
        if what == News::Partitioned {
            v.partitioned += 1;
            continue;
        }
        let Some(i) = who else { continue };
        let within = |f: &Fault, after: f64| t >= f.start - slack && t < f.end + after;
        match what {
            News::Left => {
                let explained = log.iter().any(|f| {
                    f.agent == Some(i)
                        && matches!(f.kind, Kind::Crash | Kind::LinkDown)
                        && within(f, LATE_LEFT_MS)
                });
                if !explained {
                    let mut why = context(log, i, t);
                    // Past a pause's settle time but within 5 s: still it.
                    if why == "no fault"
                        && log.iter().any(|f| {
                            f.agent == Some(i) && f.kind == Kind::Pause && within(f, AFTER_PAUSE_MS)
                        })
                    {
                        why = "pause".into();
                    }
                    v.false_left.push((t, i, why));
                }
            }
            News::Suspect => {
                let explained = log.iter().any(|f| {
                    f.agent == Some(i)
                        && matches!(f.kind, Kind::Crash | Kind::LinkDown | Kind::Pause)
                        && within(f, f.kind.settle_s() * 1000.0)
                });
                if !explained {
                    v.unexplained_suspect.push((t, i, context(log, i, t)));
                }
            }
            _ => {}
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: Kind, agent: Option<usize>, start: f64, end: f64) -> Fault {
        Fault {
            kind,
            agent,
            start,
            end,
        }
    }

    const WATCH: Speaks = Speaks { suspect: true };

    fn metric(v: &Verdict, m: &str) -> Vec<Option<f64>> {
        v.latencies
            .iter()
            .filter(|l| l.0 == m)
            .map(|l| l.1)
            .collect()
    }

    #[test]
    fn a_crash_left_at_once_and_back_after_its_restart_is_timed_from_each() {
        let log = [fault(Kind::Crash, Some(3), 10_000.0, 20_000.0)];
        let news = [
            (10_040.0, Some(3), News::Left),
            (21_200.0, Some(3), News::Joined),
        ];
        let v = judge(&log, &news, 0.0, WATCH);
        assert_eq!(metric(&v, "crash_left_ms"), [Some(40.0)]);
        assert_eq!(metric(&v, "crash_rejoin_ms"), [Some(1200.0)]);
        assert!(v.false_left.is_empty());
    }

    #[test]
    fn a_left_under_a_pause_or_just_after_it_is_false_and_says_so() {
        let log = [fault(Kind::Pause, Some(2), 10_000.0, 22_000.0)];
        let news = [
            (11_100.0, Some(2), News::Suspect),
            (15_000.0, Some(2), News::Left),
            (22_100.0, Some(2), News::Up),
            (26_500.0, Some(2), News::Left),
        ];
        let v = judge(&log, &news, 0.0, WATCH);
        assert_eq!(metric(&v, "suspect_ms"), [Some(1100.0)]);
        assert_eq!(metric(&v, "up_ms"), [Some(100.0)]);
        let whys: Vec<&str> = v.false_left.iter().map(|f| f.2.as_str()).collect();
        assert_eq!(whys, ["pause", "pause"], "{:?}", v.false_left);
    }

    #[test]
    fn a_short_pause_without_suspect_is_counted_apart_and_a_long_one_is_a_miss() {
        let log = [
            fault(Kind::Pause, Some(1), 10_000.0, 11_100.0),
            fault(Kind::Pause, Some(2), 10_000.0, 14_000.0),
        ];
        let v = judge(&log, &[], 0.0, WATCH);
        assert_eq!(v.pauses_without_suspect, 1);
        assert_eq!(metric(&v, "suspect_ms"), [None]);
        // A tool without the word is not asked for it.
        let v = judge(&log, &[], 0.0, Speaks { suspect: false });
        assert!(v.latencies.is_empty() && v.pauses_without_suspect == 0);
    }

    #[test]
    fn news_of_an_agent_without_a_fault_is_blamed_on_the_cluster_fault_then() {
        let log = [
            fault(Kind::Loss, Some(4), 0.0, 60_000.0),
            fault(Kind::CoordPause, None, 30_000.0, 33_000.0),
        ];
        let news = [
            (20_000.0, Some(4), News::Left),
            (34_000.0, Some(5), News::Suspect),
            (50_000.0, Some(6), News::Left),
            (51_000.0, None, News::Partitioned),
        ];
        let v = judge(&log, &news, 0.0, WATCH);
        let whys: Vec<&str> = v.false_left.iter().map(|f| f.2.as_str()).collect();
        assert_eq!(whys, ["loss", "no fault"]);
        assert_eq!(v.unexplained_suspect[0].2, "coordinator_pause");
        assert_eq!(v.partitioned, 1);
    }

    #[test]
    fn a_cut_link_never_reported_is_an_unfinished_sample_not_a_missing_one() {
        let log = [fault(Kind::LinkDown, Some(7), 1000.0, 21_000.0)];
        let news = [(22_000.0, Some(7), News::Up)];
        let v = judge(&log, &news, 0.0, WATCH);
        assert_eq!(metric(&v, "vanished_left_ms"), [None]);
        assert_eq!(metric(&v, "rejoin_ms"), [Some(1000.0)]);
    }
}
