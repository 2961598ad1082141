//! What an idle publisher costs (`footprint.png`): the agent beside
//! avahi-daemon and a python-zeroconf publisher, memory (RSS and PSS), CPU
//! time and wake-ups over the same idle window.

use super::gp::{cell, find, gnuplot, header, heading, quoted};
use crate::results::{Results, Summary};
use crate::sc_footprint::{AGENT, AGENT_PROBING, AVAHI, AVAHI_DBUS, PYZC};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The publishers, ours first.
const TOOLS: [&str; 5] = [AGENT_PROBING, AGENT, AVAHI, AVAHI_DBUS, PYZC];

/// One publisher's idle figures.
#[derive(Debug, PartialEq)]
pub(super) struct Row {
    pub tool: &'static str,
    /// Resident set, kB.
    pub rss_kb: Option<f64>,
    /// Proportional set (shared pages split among their sharers), kB.
    pub pss_kb: Option<f64>,
    /// CPU time per idle minute, ms.
    pub cpu_ms_per_min: Option<f64>,
    /// Times its threads were scheduled per minute.
    pub wakeups_per_min: Option<f64>,
}

/// The idle case and each publisher measured in it, in [`TOOLS`] order;
/// none when the footprint's idle window was not measured.
pub(super) fn rows(s: &[Summary]) -> Option<(String, Vec<Row>)> {
    let case = s
        .iter()
        .find(|x| x.scenario == "footprint" && x.case.starts_with("idle") && x.metric == "rss_kb")?
        .case
        .clone();
    let get =
        |tool: &str, metric: &str| find(s, "footprint", &case, tool, metric).and_then(|x| x.median);
    let rows: Vec<Row> = TOOLS
        .iter()
        .map(|tool| Row {
            tool,
            rss_kb: get(tool, "rss_kb"),
            pss_kb: get(tool, "pss_kb"),
            // A percent of one core is 600 ms of CPU a minute.
            cpu_ms_per_min: get(tool, "cpu_pct").map(|p| p * 600.0),
            wakeups_per_min: get(tool, "wakeups_per_min"),
        })
        .filter(|r| r.rss_kb.is_some() || r.pss_kb.is_some())
        .collect();
    (!rows.is_empty()).then_some((case, rows))
}

/// A tool's name on lines of at most `width` characters (a longer word
/// keeps a line of its own; a bracket starts a line), as a gnuplot
/// string's newlines.
pub(super) fn wrapped(tool: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in tool.split(' ') {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width && !word.starts_with('(') => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\\n")
}

/// The PNG, when the idle window was measured.
pub(super) fn plot(r: &Results, s: &[Summary], dir: &Path) -> Result<Option<PathBuf>> {
    let Some((case, rows)) = rows(s) else {
        return Ok(None);
    };
    let dat = dir.join("footprint.dat");
    let mut data = String::from("# x rss_MB pss_MB cpu_ms_per_min wakeups_per_min\n");
    let mb = |kb: Option<f64>| kb.map(|v| v / 1024.0);
    for (k, row) in rows.iter().enumerate() {
        let _ = writeln!(
            data,
            "{k} {} {} {} {}",
            cell(mb(row.rss_kb)),
            cell(mb(row.pss_kb)),
            cell(row.cpu_ms_per_min),
            cell(row.wakeups_per_min)
        );
    }
    std::fs::write(&dat, &data)?;
    let tics = rows
        .iter()
        .enumerate()
        .map(|(k, row)| format!("\"{}\" {k}", wrapped(row.tool, 13)))
        .collect::<Vec<_>>()
        .join(", ");
    let f = quoted(&dat.display().to_string());
    let png = dir.join("footprint.png");
    let bars = |col: usize, shift: f64, width: f64, color: &str, fmt: &str, what: &str| {
        format!(
            "{f} using ($1{shift:+.2}):{col}:({width}) with boxes lc rgb '{color}' {what}, \
             {f} using ($1{shift:+.2}):{col}:(sprintf('{fmt}', ${col})) with labels offset 0,0.7 font ',8' notitle"
        )
    };
    let script = format!(
        "{}set multiplot layout 1,3 title {}\n\
         set datafile missing '?'\nset style fill solid 0.8 border -1\nset grid ytics\n\
         set xtics ({tics}) font ',8'\nset bmargin 6\nset xrange [-0.6:{}]\nset yrange [0:*]\nset offsets 0,0,graph 0.12,0\n\
         set title 'memory at the end of the window'\nset ylabel 'MB (RSS: resident pages; PSS: shared pages split among sharers)'\n\
         set key top left\nplot {}, {}\n\
         set title 'CPU while idle'\nset ylabel 'CPU time per minute (ms)'\nunset key\nplot {}\n\
         set title 'wake-ups while idle'\nset ylabel 'times scheduled per minute'\nplot {}\n\
         unset multiplot\n",
        header(&png, 1800, 600),
        heading(
            &format!(
                "Idle footprint: each publisher alone on a 2-host segment, one service ({case})"
            ),
            r
        ),
        rows.len() as f64 - 0.4,
        bars(2, -0.19, 0.36, "#1f77b4", "%.1f", "title 'RSS'"),
        bars(3, 0.19, 0.36, "#ff7f0e", "%.1f", "title 'PSS'"),
        bars(4, 0.0, 0.6, "#2ca02c", "%.1f", "notitle"),
        bars(5, 0.0, 0.6, "#9467bd", "%.0f", "notitle"),
    );
    let result = gnuplot(&script);
    let _ = std::fs::remove_file(&dat);
    result?;
    Ok(Some(png))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{summarise, Sample};

    fn sample(case: &str, tool: &str, metric: &str, value: f64) -> Sample {
        Sample::measured(("footprint", case, tool, metric), 0, Some(value))
    }

    #[test]
    fn the_idle_rows_come_ours_first_with_cpu_as_ms_per_minute() {
        let idle = "idle, 60 s window";
        let s = summarise(&[
            sample(idle, PYZC, "rss_kb", 22000.0),
            sample(idle, AGENT_PROBING, "rss_kb", 3300.0),
            sample(idle, AGENT_PROBING, "cpu_pct", 0.01),
            sample("this machine", AGENT_PROBING, "wall_ms", 4.0),
        ]);
        let (case, rows) = rows(&s).expect("an idle window");
        assert_eq!(case, idle);
        assert_eq!(
            rows.iter().map(|r| r.tool).collect::<Vec<_>>(),
            [AGENT_PROBING, PYZC]
        );
        assert!((rows[0].cpu_ms_per_min.unwrap() - 6.0).abs() < 1e-9);
        assert_eq!(rows[1].cpu_ms_per_min, None);
    }

    #[test]
    fn no_idle_window_means_no_plot() {
        let s = summarise(&[sample("this machine", AGENT_PROBING, "wall_ms", 4.0)]);
        assert_eq!(rows(&s), None);
    }

    #[test]
    fn a_long_name_is_wrapped_at_spaces_a_bracket_on_a_new_line_and_a_long_word_keeps_its_line() {
        assert_eq!(wrapped(AVAHI_DBUS, 15), "avahi-daemon +\\nits dbus-daemon");
        assert_eq!(wrapped(AVAHI, 15), "avahi-daemon\\n(1 service)");
        assert_eq!(wrapped(PYZC, 14), "python-zeroconf\\npublisher");
        assert_eq!(wrapped("rlx-agent", 14), "rlx-agent");
    }
}
