//! **`rlx-bench compare OLD NEW`** — the rows of two runs whose figures
//! moved more than their spread: what a new BENCHMARKS.md has to explain
//! (CONTRIBUTING.md, "Benchmarks").
//!
//! A row (scenario, case, tool, metric) moved when each run's median lies
//! outside the other run's range (smallest to largest finished value):
//! noise within either run's own spread is not a move. A row that finished
//! in one run and not in the other (half or more of its runs unfinished)
//! moved too, and so did one measured in only one of the runs. Computed
//! rows (the seed's serial loop: hosts x timeout) never move.

use crate::results::{summarise, Results, Summary};
use std::collections::BTreeMap;

/// How a row differs between the two runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Both finished, and each median is outside the other's range.
    Moved {
        /// The old median.
        old: f64,
        /// The new median.
        new: f64,
    },
    /// It finished in the old run and not in the new (or the reverse).
    Finished {
        /// Whether the new run finished it.
        now: bool,
    },
    /// Only one run has it.
    Only {
        /// Whether it is the new run's.
        new: bool,
    },
}

/// One row that changed, with both runs' summaries where they exist.
#[derive(Debug, Clone)]
pub struct Row {
    /// (scenario, case, tool, metric).
    pub key: (String, String, String, String),
    /// What changed.
    pub change: Change,
    /// The old run's summary of the row.
    pub old: Option<Summary>,
    /// The new run's.
    pub new: Option<Summary>,
}

fn by_key(r: &Results) -> BTreeMap<(String, String, String, String), Summary> {
    summarise(&r.samples)
        .into_iter()
        .filter(|s| !s.computed)
        .map(|s| {
            (
                (
                    s.scenario.clone(),
                    s.case.clone(),
                    s.tool.clone(),
                    s.metric.clone(),
                ),
                s,
            )
        })
        .collect()
}

fn outside(v: f64, s: &Summary) -> bool {
    match (s.min, s.max) {
        (Some(lo), Some(hi)) => v < lo || v > hi,
        _ => true,
    }
}

/// The rows of `new` that changed from `old`, in key order.
pub fn changes(old: &Results, new: &Results) -> Vec<Row> {
    let (a, b) = (by_key(old), by_key(new));
    let mut keys: Vec<_> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (o, n) = (a.get(&key), b.get(&key));
            let change = match (o, n) {
                (Some(o), Some(n)) => match (o.median, n.median) {
                    (Some(om), Some(nm)) if outside(nm, o) && outside(om, n) => {
                        Change::Moved { old: om, new: nm }
                    }
                    (Some(_), None) => Change::Finished { now: false },
                    (None, Some(_)) => Change::Finished { now: true },
                    _ => return None,
                },
                (None, Some(_)) => Change::Only { new: true },
                (Some(_), None) => Change::Only { new: false },
                (None, None) => return None,
            };
            Some(Row {
                key,
                change,
                old: o.cloned(),
                new: n.cloned(),
            })
        })
        .collect()
}

fn range(s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "{} [{} - {}], {} run(s)",
            num(s.median),
            num(s.min),
            num(s.max),
            s.runs
        ),
        None => "-".into(),
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("unfinished".into(), |v| format!("{v:.4}"))
}

/// The changed rows as a Markdown table, with a line saying how many rows
/// the two runs share.
pub fn markdown(old: &Results, new: &Results) -> String {
    let rows = changes(old, new);
    let shared = by_key(old)
        .keys()
        .filter(|k| by_key(new).contains_key(*k))
        .count();
    let mut s = format!(
        "{} of {shared} shared rows moved more than their spread, or finished in one run only \
         (old: {}, new: {}).\n\n| scenario | case | tool | metric | change | old median [range] | new median [range] |\n|---|---|---|---|---|---|---|\n",
        rows.len(),
        old.started,
        new.started
    );
    for r in &rows {
        let change = match &r.change {
            Change::Moved { old, new } => format!("x{:.2}", new / old),
            Change::Finished { now: true } => "finishes now".into(),
            Change::Finished { now: false } => "no longer finishes".into(),
            Change::Only { new: true } => "new row".into(),
            Change::Only { new: false } => "gone".into(),
        };
        let (sc, case, tool, metric) = &r.key;
        s.push_str(&format!(
            "| {sc} | {case} | {tool} | {metric} | {change} | {} | {} |\n",
            range(&r.old),
            range(&r.new)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Sample;

    fn sample(tool: &str, rep: u32, value: Option<f64>) -> Sample {
        Sample::measured(("mdns", "N=50", tool, "complete_ms"), rep, value)
    }

    fn run(samples: Vec<Sample>) -> Results {
        Results {
            mode: "full".into(),
            started: "t".into(),
            duration_s: 1.0,
            reps: None,
            machine: Default::default(),
            commands: Default::default(),
            notes: vec![],
            not_measured: vec![],
            samples,
        }
    }

    #[test]
    fn a_row_moves_only_when_each_median_is_outside_the_other_runs_range() {
        let old = run(vec![
            sample("steady", 0, Some(10.0)),
            sample("steady", 1, Some(12.0)),
            sample("steady", 2, Some(11.0)),
            sample("noisy", 0, Some(10.0)),
            sample("noisy", 1, Some(30.0)),
            sample("noisy", 2, Some(20.0)),
        ]);
        let new = run(vec![
            sample("steady", 0, Some(30.0)),
            sample("steady", 1, Some(31.0)),
            sample("steady", 2, Some(29.0)),
            sample("noisy", 0, Some(25.0)),
            sample("noisy", 1, Some(26.0)),
            sample("noisy", 2, Some(27.0)),
        ]);
        let rows = changes(&old, &new);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].key.2, "steady");
        assert_eq!(
            rows[0].change,
            Change::Moved {
                old: 11.0,
                new: 30.0
            }
        );
        assert!(markdown(&old, &new).contains("| x2.73 |"));
    }

    #[test]
    fn a_row_that_stops_finishing_or_appears_is_listed() {
        let old = run(vec![
            sample("a", 0, Some(1.0)),
            sample("gone", 0, Some(1.0)),
        ]);
        let new = run(vec![sample("a", 0, None), sample("b", 0, Some(1.0))]);
        let rows = changes(&old, &new);
        let got: Vec<(&str, &Change)> =
            rows.iter().map(|r| (r.key.2.as_str(), &r.change)).collect();
        assert_eq!(
            got,
            [
                ("a", &Change::Finished { now: false }),
                ("b", &Change::Only { new: true }),
                ("gone", &Change::Only { new: false }),
            ]
        );
    }
}
