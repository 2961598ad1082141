//! The soak (`watch` under churn) in two pictures:
//! `soak-latency.png`, each kind of action's latencies as a CDF per tool
//! beside its bound, and `soak-memory.png`, the memory figures over the
//! run, as kB and relative to a quarter of the run.

use super::gp::{cell, find, gnuplot, header, heading, quoted};
use crate::results::{Results, Sample, Summary};
use crate::sc_soak::{bound_ms, case_minutes, WATCH, WATCH_HEAP, WINDOW, ZC};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The kinds of action, as the soak names their metric, with what is timed.
const KINDS: [(&str, &str, &str); 4] = [
    ("join_ms", "join", "agent started to joined"),
    (
        "restart_ms",
        "restart",
        "kill -9 and start again to restarted",
    ),
    ("goodbye_leave_ms", "goodbye", "SIGTERM to left"),
    ("crash_leave_ms", "crash", "SIGKILL to left"),
];

/// How each bound is judged (see the report's `watch` goals).
fn bound_rule(metric: &str) -> &'static str {
    if matches!(metric, "join_ms" | "restart_ms") {
        "p95"
    } else {
        "every action"
    }
}

/// The soak's case: the one watch was measured in.
fn soak_case(s: &[Summary]) -> Option<String> {
    s.iter()
        .find(|x| x.scenario == "soak" && x.tool == WATCH)
        .map(|x| x.case.clone())
}

/// Latencies with the share reported by then, and the actions judged.
type Cdf = (Vec<(f64, f64)>, usize);

/// One tool's latencies of one kind of action as a CDF: each latency it
/// reported (ms, ascending) with the share of all the judged actions
/// reported by then, so actions it never reported keep the curve below 1;
/// and how many actions were judged.
pub(super) fn cdf(samples: &[Sample], case: &str, tool: &str, metric: &str) -> Cdf {
    let judged: Vec<&Sample> = samples
        .iter()
        .filter(|x| x.scenario == "soak" && x.case == case && x.tool == tool && x.metric == metric)
        .collect();
    let mut v: Vec<f64> = judged.iter().filter_map(|x| x.value).collect();
    v.sort_by(f64::total_cmp);
    let n = judged.len();
    let points = v
        .iter()
        .enumerate()
        .map(|(k, x)| (*x, (k + 1) as f64 / n as f64))
        .collect();
    (points, n)
}

/// Both PNGs the soak's data allow.
pub(super) fn plot(r: &Results, s: &[Summary], dir: &Path) -> Result<Vec<PathBuf>> {
    let Some(case) = soak_case(s) else {
        return Ok(Vec::new());
    };
    let mut pngs = Vec::new();
    if let Some(p) = latency(r, s, &case, dir)? {
        pngs.push(p);
    }
    if let Some(p) = memory(r, s, &case, dir)? {
        pngs.push(p);
    }
    Ok(pngs)
}

fn latency(r: &Results, s: &[Summary], case: &str, dir: &Path) -> Result<Option<PathBuf>> {
    let tools = [(WATCH, "#1f77b4"), (ZC, "#d62728")];
    let curves: Vec<Vec<Cdf>> = KINDS
        .iter()
        .map(|(m, ..)| {
            tools
                .iter()
                .map(|(t, _)| cdf(&r.samples, case, t, m))
                .collect()
        })
        .collect();
    let values = || {
        curves
            .iter()
            .flatten()
            .flat_map(|c| c.0.iter().map(|p| p.0))
    };
    if values().next().is_none() {
        return Ok(None);
    }
    let lo = values().fold(0.5f64, f64::min).max(0.01) / 1.5;
    let hi = values()
        .chain(KINDS.iter().filter_map(|k| bound_ms(k.0)))
        .fold(0.0, f64::max)
        * 2.0;

    let dat = dir.join("soak-latency.dat");
    let mut data = String::new();
    // One block per (kind, tool), in order, each ended by two blank lines.
    for kind in &curves {
        for (points, _) in kind {
            data.push_str("# latency_ms share_reported\n");
            for (x, y) in points {
                let _ = writeln!(data, "{x:.3} {y:.5}");
            }
            data.push_str("\n\n");
        }
    }
    std::fs::write(&dat, &data)?;
    let png = dir.join("soak-latency.png");
    let mut script = header(&png, 1300, 860);
    script.push_str(&format!(
        "set multiplot layout 2,2 title {}\n",
        heading(
            &format!("watch under churn: latency of each action, from the action to the tool's report ({case})"),
            r
        )
    ));
    for (k, ((metric, name, what), kind)) in KINDS.iter().zip(&curves).enumerate() {
        script.push_str(&format!(
            "set title {}\nset logscale x\nset xrange [{lo}:{hi}]\nset yrange [0:1.45]\nset ytics 0,0.2,1\n\
             set xlabel 'latency (ms, log scale)'\nset ylabel 'share of the actions reported by then'\n\
             set grid\nset key top left Left reverse samplen 2 font ',9'\nunset arrow\n",
            quoted(&format!("{name}: {what}"))
        ));
        let mut plots: Vec<String> = tools
            .iter()
            .zip(kind)
            .enumerate()
            .map(|(j, ((tool, color), (points, judged)))| {
                let p95 = find(s, "soak", case, tool, &format!("{metric} p95"))
                    .and_then(|x| x.median)
                    .map(|p| format!(", p95 {p:.0} ms"))
                    .unwrap_or_default();
                let tool = tool.replace(" AsyncServiceBrowser", "");
                if points.is_empty() {
                    let label = format!(
                        "{tool}: none of {judged} reported within {} s",
                        WINDOW.as_secs()
                    );
                    format!("NaN title {} lw 2 lc rgb '{color}'", quoted(&label))
                } else {
                    let label = format!("{tool}: {}/{judged} reported{p95}", points.len());
                    format!(
                        "{} index {} using 1:2 with steps lw 2 lc rgb '{color}' title {}",
                        quoted(&dat.display().to_string()),
                        2 * k + j,
                        quoted(&label)
                    )
                }
            })
            .collect();
        if let Some(b) = bound_ms(metric) {
            script.push_str(&format!(
                "set arrow from {b}, graph 0 to {b}, first 1.05 nohead dt 2 lw 2 lc rgb '#2ca02c'\n"
            ));
            plots.push(format!(
                "NaN with lines dt 2 lw 2 lc rgb '#2ca02c' title {}",
                quoted(&format!(
                    "bound: {} within {} s",
                    bound_rule(metric),
                    b / 1000.0
                ))
            ));
        }
        script.push_str(&format!("plot {}\n", plots.join(", ")));
    }
    script.push_str("unset multiplot\n");
    let result = gnuplot(&script);
    let _ = std::fs::remove_file(&dat);
    result?;
    Ok(Some(png))
}

/// The memory figures the soak records, tool, metric (without the moment)
/// and legend.
const MEMORY: [(&str, &str, &str); 5] = [
    (WATCH, "rss_kb", "watch: RSS"),
    (
        WATCH,
        "rss_anon_kb",
        "watch: RssAnon (heap, stacks, allocator caches)",
    ),
    (
        WATCH_HEAP,
        "heap_kb",
        "watch: heap in use (heaptrack, a second watch)",
    ),
    (ZC, "rss_kb", "python-zeroconf browser: RSS"),
    (ZC, "rss_anon_kb", "python-zeroconf browser: RssAnon"),
];

/// Each memory figure recorded, by legend, as (minutes into a run of
/// `minutes`, kB) at the moments the soak records: the first minute's
/// mean at 0.5 min, the minute around each quarter at that quarter, the
/// last minute at its middle. A figure with no value at all is left out.
pub(super) fn memory_series(
    s: &[Summary],
    case: &str,
    minutes: f64,
) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let moments = [
        ("first minute", 0.5f64.min(minutes / 2.0)),
        ("at 25%", minutes * 0.25),
        ("at 50%", minutes * 0.5),
        ("at 75%", minutes * 0.75),
        ("last minute", (minutes - 35.0 / 60.0).max(minutes / 2.0)),
    ];
    MEMORY
        .iter()
        .map(|(tool, metric, legend)| {
            let points = moments
                .iter()
                .filter_map(|(when, at)| {
                    find(s, "soak", case, tool, &format!("{metric} {when}"))
                        .and_then(|x| x.median)
                        .map(|v| (*at, v))
                })
                .collect::<Vec<_>>();
            (*legend, points)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

fn memory(r: &Results, s: &[Summary], case: &str, dir: &Path) -> Result<Option<PathBuf>> {
    let Some(minutes) = case_minutes(case) else {
        return Ok(None);
    };
    let series = memory_series(s, case, minutes);
    if series.is_empty() {
        return Ok(None);
    }
    let dat = dir.join("soak-memory.dat");
    let mut data = String::new();
    for (legend, points) in &series {
        // Relative to the quarter's value (after start-up), as the goal is.
        let base = points
            .iter()
            .find(|p| (p.0 - minutes * 0.25).abs() < 1e-9)
            .map(|p| p.1);
        let _ = writeln!(data, "# {legend}: minutes kB percent_of_25%");
        for (at, kb) in points {
            let pct = base.filter(|b| *b > 0.0).map(|b| kb / b * 100.0);
            let _ = writeln!(data, "{at:.3} {kb:.1} {}", cell(pct));
        }
        data.push_str("\n\n");
    }
    std::fs::write(&dat, &data)?;
    let (pct_lo, pct_hi) = series
        .iter()
        .filter_map(|(_, p)| {
            let base = p.iter().find(|x| (x.0 - minutes * 0.25).abs() < 1e-9)?.1;
            Some(p.iter().map(move |x| x.1 / base * 100.0))
        })
        .flatten()
        .fold((100.0f64, 112.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let png = dir.join("soak-memory.png");
    let curve = |col: &str| -> String {
        series
            .iter()
            .enumerate()
            .map(|(k, (legend, _))| {
                format!(
                    "{} index {k} using 1:{col} with linespoints lw 2 pt {} title {}",
                    quoted(&dat.display().to_string()),
                    5 + 2 * k,
                    quoted(legend)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let script = format!(
        "{}set multiplot layout 1,2 title {}\nset datafile missing '?'\nset grid\n\
         set xlabel 'time into the run (min)'\nset xrange [0:{minutes}]\n\
         set title 'memory in use (kB, log scale)'\nset logscale y\nset ylabel 'kB'\n\
         set key top left font ',8' opaque\nset yrange [100:300000]\nplot {}\n\
         unset logscale y\nset yrange [{:.0}:{:.0}]\nset title 'the same, as % of its value at 25% of the run'\n\
         set ylabel '% of the value at 25% of the run'\nset key bottom right font ',8' opaque\n\
         set arrow from {}, 110 to {minutes}, 110 nohead dt 2 lw 2 lc rgb '#2ca02c'\n\
         set label 1 'goal: heap in the last minute at most 110% of the heap at 25%' at {}, 111.5 right font ',8' tc rgb '#2ca02c'\n\
         plot {}\nunset multiplot\n",
        header(&png, 1200, 520),
        heading(
            &format!("watch under churn: memory over the run, sampled every 10 s ({case})"),
            r
        ),
        curve("2"),
        (pct_lo - 3.0).floor(),
        (pct_hi + 3.0).ceil(),
        minutes * 0.25,
        minutes,
        curve("3"),
    );
    let result = gnuplot(&script);
    let _ = std::fs::remove_file(&dat);
    result?;
    Ok(Some(png))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summarise;

    fn sample(tool: &str, metric: &str, rep: u32, value: Option<f64>) -> Sample {
        Sample::measured(("soak", "c", tool, metric), rep, value)
    }

    #[test]
    fn an_unreported_action_counts_as_judged_and_keeps_the_cdf_below_one() {
        let v = [
            sample(WATCH, "join_ms", 0, Some(900.0)),
            sample(WATCH, "join_ms", 1, None),
            sample(WATCH, "join_ms", 2, Some(300.0)),
            sample(WATCH, "join_ms", 3, Some(600.0)),
            sample(ZC, "join_ms", 0, Some(1.0)),
            sample(WATCH, "join_ms p95", 0, Some(890.0)),
        ];
        let (points, judged) = cdf(&v, "c", WATCH, "join_ms");
        assert_eq!(judged, 4);
        assert_eq!(points, vec![(300.0, 0.25), (600.0, 0.5), (900.0, 0.75)]);
    }

    #[test]
    fn a_tool_that_reported_no_action_has_an_empty_cdf_of_all_judged() {
        let v = [
            sample(ZC, "crash_leave_ms", 0, None),
            sample(ZC, "crash_leave_ms", 1, None),
        ];
        assert_eq!(cdf(&v, "c", ZC, "crash_leave_ms"), (Vec::new(), 2));
    }

    #[test]
    fn memory_figures_are_placed_at_their_moment_in_the_run_and_absent_ones_left_out() {
        let v: Vec<Sample> = [
            ("first minute", 100.0),
            ("at 25%", 110.0),
            ("at 50%", 111.0),
            ("at 75%", 112.0),
            ("last minute", 113.0),
            ("max", 200.0),
        ]
        .iter()
        .map(|(when, kb)| sample(WATCH_HEAP, &format!("heap_kb {when}"), 0, Some(*kb)))
        .collect();
        let series = memory_series(&summarise(&v), "c", 40.0);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].0, MEMORY[2].2);
        let xs: Vec<f64> = series[0].1.iter().map(|p| p.0).collect();
        assert_eq!(xs[..4], [0.5, 10.0, 20.0, 30.0]);
        assert!((xs[4] - (40.0 - 35.0 / 60.0)).abs() < 1e-9);
        assert_eq!(series[0].1[4].1, 113.0);
    }
}
