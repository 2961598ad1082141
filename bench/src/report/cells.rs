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
