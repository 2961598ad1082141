//! **What a benchmark run records** — one [`Sample`] per measurement, grouped
//! into [`Summary`] rows (median, min-max, completeness) for the report.
//!
//! A sample is one tool measured once in one case of one scenario, e.g.
//! `mdns / N=50 loss=20% / python-zeroconf / complete_ms / rep 2`. A run that
//! did not finish what it was asked (found 44 of 50 before its deadline) is
//! kept with `value = None` and its `found` count: medians treat it as slower
//! than every finished run, so a partial result is never reported as a time.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// `mdns`, `scan`, `ssh`, `footprint`, `trust`.
    pub scenario: String,
    /// The case within the scenario, e.g. `N=50 loss=20%` or `/24`.
    pub case: String,
    /// Who was measured, e.g. `rlx-discover browse`, `nmap -sT tuned`.
    pub tool: String,
    /// What was measured, e.g. `complete_ms`, `wall_ms`, `rss_kb`.
    pub metric: String,
    /// Repetition index (0-based) within this case.
    pub rep: u32,
    /// The value; `None` when the run did not finish (see `found`).
    pub value: Option<f64>,
    /// Items found (services resolved, live hosts seen), when counted.
    pub found: Option<u64>,
    /// Items there were to find.
    pub expected: Option<u64>,
    /// `true` when the value is computed, not measured (the seed's serial
    /// scan cost: hosts x timeout).
    #[serde(default)]
    pub computed: bool,
    /// 1-minute load average when the sample was taken: above the core
    /// count means other work competed for the CPU.
    pub load1: f64,
    /// Share of one core (percent) that processes other than the bench's
    /// used while the sample was taken (`crate::others`); absent in results
    /// written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_pct: Option<f64>,
    /// Free-form detail (exit status, listened window, why incomplete).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Sample {
    /// Whether the run found everything it was asked to find.
    pub fn complete(&self) -> bool {
        self.value.is_some()
            && match (self.found, self.expected) {
                (Some(f), Some(e)) => f >= e,
                _ => true,
            }
    }
}

/// The samples of one (scenario, case, tool, metric), summarised.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// See [`Sample::scenario`].
    pub scenario: String,
    /// See [`Sample::case`].
    pub case: String,
    /// See [`Sample::tool`].
    pub tool: String,
    /// See [`Sample::metric`].
    pub metric: String,
    /// Number of samples.
    pub runs: usize,
    /// Samples that finished (found everything).
    pub complete_runs: usize,
    /// Median value, unfinished runs counted as slower than any finished
    /// one; `None` when at least half did not finish (or no sample).
    pub median: Option<f64>,
    /// Smallest finished value.
    pub min: Option<f64>,
    /// Largest finished value.
    pub max: Option<f64>,
    /// Median of `found` over all runs, when counted.
    pub found_median: Option<f64>,
    /// Smallest `found` over all runs.
    pub found_min: Option<u64>,
    /// `expected`, when counted.
    pub expected: Option<u64>,
    /// Whether the values are computed rather than measured.
    pub computed: bool,
    /// Highest 1-minute load average seen during these samples.
    pub load1_max: f64,
    /// Most CPU other processes used beside one of these samples, percent
    /// of one core (`None`: not measured).
    #[serde(default)]
    pub others_cpu_max: Option<f64>,
    /// Distinct notes of the samples.
    pub notes: Vec<String>,
}

/// The summary of one (scenario, case, tool, metric): what the report's
/// tables and the plots look up.
pub(crate) fn find<'a>(
    s: &'a [Summary],
    scenario: &str,
    case: &str,
    tool: &str,
    metric: &str,
) -> Option<&'a Summary> {
    s.iter()
        .find(|x| x.scenario == scenario && x.case == case && x.tool == tool && x.metric == metric)
}

#[cfg(test)]
impl Summary {
    /// `runs` samples of (`scenario`, `case`, `tool`, `metric`), `complete`
    /// of them finished, all at `value`: what the goals' tests judge.
    pub(crate) fn of(
        (scenario, case, tool, metric): (&str, &str, &str, &str),
        runs: usize,
        complete: usize,
        value: f64,
    ) -> Summary {
        Summary {
            scenario: scenario.into(),
            case: case.into(),
            tool: tool.into(),
            metric: metric.into(),
            runs,
            complete_runs: complete,
            median: Some(value),
            min: Some(value),
            max: Some(value),
            found_median: None,
            found_min: None,
            expected: None,
            computed: false,
            load1_max: 0.0,
            others_cpu_max: None,
            notes: Vec::new(),
        }
    }
}

impl Sample {
    /// A measured sample with nothing else set: what `Ctx::record` fills
    /// in, and what tests of the readers of samples start from.
    pub(crate) fn measured(
        (scenario, case, tool, metric): (&str, &str, &str, &str),
        rep: u32,
        value: Option<f64>,
    ) -> Sample {
        Sample {
            scenario: scenario.into(),
            case: case.into(),
            tool: tool.into(),
            metric: metric.into(),
            rep,
            value,
            found: None,
            expected: None,
            computed: false,
            load1: 0.0,
            others_cpu_pct: None,
            note: String::new(),
        }
    }
}

/// Median of `values`, where `None` sorts after every `Some` (an unfinished
/// run is slower than all finished ones). `None` when the median itself is
/// an unfinished run, or there are no values. For an even count the two
/// middle values are averaged.
pub fn median_with_failures(values: &[Option<f64>]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = values.iter().map(|x| x.unwrap_or(f64::INFINITY)).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let m = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    m.is_finite().then_some(m)
}

/// Median of plain numbers (`None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    median_with_failures(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>())
}

/// Groups samples by (scenario, case, tool, metric), in first-seen order.
pub fn summarise(samples: &[Sample]) -> Vec<Summary> {
    let mut order: Vec<(String, String, String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String, String, String), Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        let key = (
            s.scenario.clone(),
            s.case.clone(),
            s.tool.clone(),
            s.metric.clone(),
        );
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(s);
    }
    order
        .into_iter()
        .map(|key| {
            let g = &groups[&key];
            let values: Vec<Option<f64>> = g
                .iter()
                .map(|s| if s.complete() { s.value } else { None })
                .collect();
            let finished: Vec<f64> = values.iter().flatten().copied().collect();
            let founds: Vec<f64> = g.iter().filter_map(|s| s.found.map(|f| f as f64)).collect();
            let mut notes: Vec<String> = Vec::new();
            for s in g {
                if !s.note.is_empty() && !notes.contains(&s.note) {
                    notes.push(s.note.clone());
                }
            }
            Summary {
                scenario: key.0.clone(),
                case: key.1.clone(),
                tool: key.2.clone(),
                metric: key.3.clone(),
                runs: g.len(),
                complete_runs: finished.len(),
                median: median_with_failures(&values),
                min: finished.iter().copied().reduce(f64::min),
                max: finished.iter().copied().reduce(f64::max),
                found_median: median(&founds),
                found_min: g.iter().filter_map(|s| s.found).min(),
                expected: g.iter().find_map(|s| s.expected),
                computed: g.iter().any(|s| s.computed),
                load1_max: g.iter().map(|s| s.load1).fold(0.0, f64::max),
                others_cpu_max: g.iter().filter_map(|s| s.others_cpu_pct).reduce(f64::max),
                notes,
            }
        })
        .collect()
}

/// Everything a run produced: written as JSON, read back by `report`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// `quick` or `full`.
    pub mode: String,
    /// When the run started (UTC, RFC 3339).
    pub started: String,
    /// How long the whole run took, seconds.
    pub duration_s: f64,
    /// Repetitions per case asked for (`--reps` or the mode's default);
    /// absent in results written before it was recorded. Each row of the
    /// report states its own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reps: Option<u32>,
    /// The machine it ran on.
    pub machine: crate::machine::Machine,
    /// The exact commands each tool ran, by tool name (placeholders in
    /// capitals: `CIDR`, `N`, ...).
    pub commands: BTreeMap<String, String>,
    /// What each scenario used and anything that changed its shape (peers
    /// missing, features not yet available).
    pub notes: Vec<String>,
    /// Scenarios or figures not measured, with the reason.
    pub not_measured: Vec<(String, String)>,
    /// Every sample.
    pub samples: Vec<Sample>,
}

impl Results {
    /// The summaries of [`Results::samples`].
    pub fn summaries(&self) -> Vec<Summary> {
        summarise(&self.samples)
    }
}

/// Figures of our own tools (`rlx-...`) that no run of a case produced:
/// `scenario | tool | metric` for each. A peer may fail to finish under
/// loss; ours producing nothing at all in every case and repetition is the
/// bench reading the wrong thing or our tool broken, and must not pass as
/// a run of "unfinished" figures (which is how a renamed JSON field once
/// went unnoticed).
pub fn never_measured(samples: &[Sample]) -> Vec<String> {
    let mut any: BTreeMap<(&str, &str, &str), bool> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.tool.starts_with("rlx-")) {
        *any.entry((&s.scenario, &s.tool, &s.metric)).or_default() |= s.value.is_some();
    }
    any.into_iter()
        .filter(|(_, measured)| !measured)
        .map(|((sc, tool, metric), _)| format!("{sc} | {tool} | {metric}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_run_counts_as_slower_than_every_finished_one() {
        assert_eq!(
            median_with_failures(&[Some(1.0), None, Some(3.0)]),
            Some(3.0)
        );
        assert_eq!(median_with_failures(&[Some(1.0), None, None]), None);
        assert_eq!(median_with_failures(&[]), None);
    }

    #[test]
    fn an_even_count_averages_the_middle_pair() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn a_figure_of_ours_that_no_run_produced_is_named_and_a_peers_is_not() {
        let s = |tool: &str, case: &str, value: Option<f64>| {
            Sample::measured(("links", case, tool, "up_mbps"), 0, value)
        };
        let ours = "rlx-discover browse --links";
        assert_eq!(
            never_measured(&[
                s(ours, "100M", None),
                s(ours, "1G", None),
                s("iperf3", "1G", None)
            ]),
            vec!["links | rlx-discover browse --links | up_mbps".to_string()]
        );
        assert!(never_measured(&[s(ours, "100M", None), s(ours, "1G", Some(9.0))]).is_empty());
    }

    #[test]
    fn a_run_that_found_less_than_expected_is_not_complete() {
        let mut s = Sample {
            scenario: "mdns".into(),
            case: "N=50".into(),
            tool: "t".into(),
            metric: "complete_ms".into(),
            rep: 0,
            value: Some(10.0),
            found: Some(49),
            expected: Some(50),
            computed: false,
            load1: 0.0,
            others_cpu_pct: None,
            note: String::new(),
        };
        assert!(!s.complete());
        s.found = Some(50);
        assert!(s.complete());
        let sum = summarise(&[
            s.clone(),
            Sample {
                found: Some(3),
                ..s
            },
        ]);
        assert_eq!(sum.len(), 1);
        assert_eq!(sum[0].complete_runs, 1);
        assert_eq!(sum[0].found_min, Some(3));
    }
}
