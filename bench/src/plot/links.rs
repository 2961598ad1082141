//! Link accuracy against iperf3 (`links-accuracy.png`): on each
//! shaped rate and direction, the rate `browse --links` measured as % of
//! iperf3's in the same repetition, at the default window and at 50 ms.

use super::gp::{cell, gnuplot, header, quoted, title};
use crate::results::{median, Results, Sample};
use crate::sc_links::{IPERF, OURS, SHAPES, SHORT};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Ours at each window, with its legend.
const WINDOWS: [(&str, &str); 2] = [
    (OURS, "browse --links (default 250 ms window)"),
    (SHORT, "browse --links --link-window-ms 50"),
];

/// One shaped rate in one direction.
#[derive(Debug, PartialEq)]
pub(super) struct Accuracy {
    /// The case, e.g. `100 Mbit/s`.
    pub case: String,
    /// `up` (coordinator to agent) or `down`.
    pub dir: &'static str,
    /// iperf3's median rate, Mbit/s.
    pub iperf: Option<f64>,
    /// Per window of [`WINDOWS`]: ours as % of iperf3, repetition by
    /// repetition: median, min, max.
    pub ratio: [Option<(f64, f64, f64)>; 2],
}

fn value(samples: &[Sample], case: &str, tool: &str, metric: &str, rep: u32) -> Option<f64> {
    samples
        .iter()
        .find(|x| {
            x.scenario == "links"
                && x.case == case
                && x.tool == tool
                && x.metric == metric
                && x.rep == rep
        })
        .and_then(|x| x.value)
}

/// The accuracy of each shaped rate and direction measured: ours over
/// iperf3 taken pair by pair (the same repetition, run back to back on the
/// same link), so a slower moment of the machine weighs on both.
pub(super) fn accuracy(samples: &[Sample]) -> Vec<Accuracy> {
    let mut out = Vec::new();
    for (case, ..) in SHAPES {
        for dir in ["up", "down"] {
            let metric = format!("{dir}_mbps");
            let reps: Vec<u32> = samples
                .iter()
                .filter(|x| {
                    x.scenario == "links" && x.case == case && x.tool == IPERF && x.metric == metric
                })
                .map(|x| x.rep)
                .collect();
            let iperf: Vec<f64> = reps
                .iter()
                .filter_map(|r| value(samples, case, IPERF, &metric, *r))
                .collect();
            let ratio = WINDOWS.map(|(tool, _)| {
                let v: Vec<f64> = reps
                    .iter()
                    .filter_map(|r| {
                        let theirs = value(samples, case, IPERF, &metric, *r)?;
                        let ours = value(samples, case, tool, &metric, *r)?;
                        (theirs > 0.0).then(|| ours / theirs * 100.0)
                    })
                    .collect();
                Some((
                    median(&v)?,
                    v.iter().copied().fold(f64::INFINITY, f64::min),
                    v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ))
            });
            if ratio.iter().any(Option::is_some) {
                out.push(Accuracy {
                    case: case.to_string(),
                    dir,
                    iperf: median(&iperf),
                    ratio,
                });
            }
        }
    }
    out
}

/// The PNG, when ours and iperf3 were both measured on a shaped link.
pub(super) fn plot(r: &Results, dir: &Path) -> Result<Option<PathBuf>> {
    let rows = accuracy(&r.samples);
    if rows.is_empty() {
        return Ok(None);
    }
    let dat = dir.join("links-accuracy.dat");
    let mut data = String::from("# x  then per window: median min max (% of iperf3)\n");
    for (k, a) in rows.iter().enumerate() {
        let _ = write!(data, "{k}");
        for x in &a.ratio {
            let (m, lo, hi) = x.map_or((None, None, None), |(m, lo, hi)| {
                (Some(m), Some(lo), Some(hi))
            });
            let _ = write!(data, " {} {} {}", cell(m), cell(lo), cell(hi));
        }
        data.push('\n');
    }
    std::fs::write(&dat, &data)?;
    let tics: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let iperf = a
                .iperf
                .map(|v| format!("\\n(iperf3 {v:.1} Mbit/s)"))
                .unwrap_or_default();
            format!("\"{} {}{iperf}\" {k}", a.case, a.dir)
        })
        .collect();
    let lows = rows
        .iter()
        .flat_map(|a| a.ratio.iter().flatten().map(|x| x.1))
        .fold(100.0, f64::min);
    let highs = rows
        .iter()
        .flat_map(|a| a.ratio.iter().flatten().map(|x| x.2))
        .fold(100.0, f64::max);
    let f = quoted(&dat.display().to_string());
    let plots: Vec<String> = WINDOWS
        .iter()
        .enumerate()
        .map(|(k, (_, legend))| {
            let (x, c) = (format!("($1{:+.2})", 0.12 * (2.0 * k as f64 - 1.0)), 2 + 3 * k);
            format!(
                "{f} using {x}:{c}:{}:{} with yerrorbars lw 2 pt {} ps 1.6 lc {} title {}, \
                 {f} using {x}:{}:(sprintf('%.1f%%', ${c})) with labels offset 0,0.9 font ',8' notitle",
                c + 1,
                c + 2,
                5 + 2 * k,
                k + 1,
                quoted(legend),
                c + 2,
            )
        })
        .collect();
    let png = dir.join("links-accuracy.png");
    let result = gnuplot(&format!(
        "{}{}set datafile missing '?'\nset grid ytics\nset key bottom left\n\
         set ylabel 'measured rate, % of iperf3 -t 2 (median, min-max of the runs)'\n\
         set xlabel 'shaped rate and direction (up: coordinator to agent, down: agent to coordinator)' offset 0,-1\n\
         set bmargin 6\nset lmargin 10\n\
         set xrange [-0.6:{}]\nset yrange [{:.1}:{:.1}]\nset xtics ({})\n\
         set arrow from graph 0, first 100 to graph 1, first 100 nohead dt 2 lw 2 lc rgb '#2ca02c'\n\
         set label 1 'iperf3 = 100%' at graph 0.99, first 100 right offset 0,0.6 font ',8' tc rgb '#2ca02c'\n\
         plot {}\n",
        header(&png, 1000, 560),
        title(
            "Link rate measured by rlx-discover browse --links against iperf3, tbf-shaped links, \
             each run paired with iperf3's next to it",
            r
        ),
        rows.len() as f64 - 0.4,
        (lows - 1.0).floor(),
        (highs + 1.0).ceil(),
        tics.join(", "),
        plots.join(", ")
    ));
    let _ = std::fs::remove_file(&dat);
    result?;
    Ok(Some(png))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tool: &str, metric: &str, rep: u32, value: Option<f64>) -> Sample {
        Sample::measured(("links", SHAPES[0].0, tool, metric), rep, value)
    }

    #[test]
    fn ours_is_taken_over_iperf3_of_the_same_repetition() {
        let v = [
            sample(IPERF, "up_mbps", 0, Some(100.0)),
            sample(IPERF, "up_mbps", 1, Some(50.0)),
            sample(IPERF, "up_mbps", 2, Some(80.0)),
            sample(OURS, "up_mbps", 0, Some(95.0)),
            sample(OURS, "up_mbps", 1, Some(50.0)),
            sample(OURS, "up_mbps", 2, Some(76.0)),
            sample(SHORT, "up_mbps", 0, Some(90.0)),
        ];
        let a = accuracy(&v);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!((a[0].case.as_str(), a[0].dir), (SHAPES[0].0, "up"));
        assert_eq!(a[0].iperf, Some(80.0));
        assert_eq!(a[0].ratio[0], Some((95.0, 95.0, 100.0)));
        assert_eq!(a[0].ratio[1], Some((90.0, 90.0, 90.0)));
    }

    #[test]
    fn a_repetition_missing_either_rate_is_left_out_and_no_pair_means_no_row() {
        let v = [
            sample(IPERF, "down_mbps", 0, Some(100.0)),
            sample(OURS, "down_mbps", 0, None),
            sample(IPERF, "down_mbps", 1, None),
            sample(OURS, "down_mbps", 1, Some(90.0)),
        ];
        assert!(accuracy(&v).is_empty());
    }
}
