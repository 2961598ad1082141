//! **Table cells of the report**: finding a summary, and formatting times,
//! values, ranges, completeness and ratios the same way in every table.

use crate::results::Summary;

pub(super) use crate::results::find;

pub(super) fn fmt_ms(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn fmt_value(metric: &str, v: f64) -> String {
    match metric {
        m if m.ends_with("_ms") => fmt_ms(v),
        m if m.ends_with("_kb") => format!("{:.1} MB", v / 1024.0),
        m if m.ends_with("_pct") => format!("{v:.3}%"),
        _ => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
    }
}

pub(super) fn median_cell(x: &Summary) -> String {
    match x.median {
        Some(m) => fmt_value(&x.metric, m),
        None if x.runs == 0 => "-".into(),
        None => format!(
            "unfinished ({} of {} runs)",
            x.runs - x.complete_runs,
            x.runs
        ),
    }
}

pub(super) fn range_cell(x: &Summary) -> String {
    match (x.min, x.max) {
        (Some(a), Some(b)) if x.runs > 1 => {
            format!("{} - {}", fmt_value(&x.metric, a), fmt_value(&x.metric, b))
        }
        _ => "".into(),
    }
}

pub(super) fn found_cell(x: &Summary) -> String {
    match (x.expected, x.found_median, x.found_min) {
        (Some(e), Some(m), Some(lo)) if x.runs > 1 => format!("{m:.0}/{e} (min {lo})"),
        (Some(e), Some(m), _) => format!("{m:.0}/{e}"),
        _ => String::new(),
    }
}

/// The N column of the mDNS tables.
pub(super) fn n_cell(n: usize, v6: bool) -> String {
    if v6 {
        format!("{n} ({})", crate::sc_mdns::IPV6_ONLY)
    } else {
        n.to_string()
    }
}

/// `peer / ours` (`3.2x`, `0.47x`), when both medians exist.
pub(super) fn ratio(ours: Option<f64>, peer: Option<f64>) -> String {
    match (ours, peer) {
        (Some(o), Some(p)) if o > 0.0 => {
            let r = p / o;
            if r >= 100.0 {
                format!("{r:.0}x")
            } else if r >= 10.0 {
                format!("{r:.1}x")
            } else {
                format!("{r:.2}x")
            }
        }
        _ => String::new(),
    }
}

/// The load cell of a row: the highest 1-minute load average, and the most
/// CPU other processes (not the bench's) used beside one of its samples,
/// marked **busy** above [`crate::others::BUSY_PCT`] of a core.
pub(super) fn load_cell<'a>(rows: impl IntoIterator<Item = &'a Summary>) -> String {
    let mut load = 0.0f64;
    let mut others: Option<f64> = None;
    for x in rows {
        load = load.max(x.load1_max);
        if let Some(p) = x.others_cpu_max {
            others = Some(others.map_or(p, |o: f64| o.max(p)));
        }
    }
    match others {
        Some(p) if p > crate::others::BUSY_PCT => {
            format!("{load:.1}; **busy: others {p:.0}%**")
        }
        Some(p) => format!("{load:.1}; others {p:.0}%"),
        None => format!("{load:.1}; others not measured"),
    }
}

/// Whether a row was taken beside other work (see [`load_cell`]).
pub(super) fn busy(x: &Summary) -> bool {
    x.others_cpu_max
        .is_some_and(|p| p > crate::others::BUSY_PCT)
}

/// Repetitions and spread of a row: `n=5, 12 ms - 19 ms`, or `n=1` (no
/// spread to show).
pub(super) fn spread_cell(x: &Summary) -> String {
    match range_cell(x).as_str() {
        "" => format!("n={}", x.runs),
        r => format!("n={}, {r}", x.runs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_beside_other_work_is_marked_busy_and_every_row_says_n_and_spread() {
        let mut x = Summary::of(("mdns", "N=50 loss=0%", "t", "complete_ms"), 5, 5, 20.0);
        x.min = Some(12.0);
        x.max = Some(31.0);
        x.load1_max = 1.5;
        assert_eq!(load_cell([&x]), "1.5; others not measured");
        x.others_cpu_max = Some(3.0);
        assert_eq!(load_cell([&x]), "1.5; others 3%");
        assert!(!busy(&x));
        x.others_cpu_max = Some(45.0);
        assert_eq!(load_cell([&x]), "1.5; **busy: others 45%**");
        assert!(busy(&x));
        assert_eq!(spread_cell(&x), "n=5, 12 ms - 31 ms");
        x.runs = 1;
        assert_eq!(spread_cell(&x), "n=1");
    }
}
