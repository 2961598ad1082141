//! **Issue 41's goals: a fleet** — `watch` at rest at 200 and 1,000
//! members, 1,000 joined within 10 s of its start, `expand` finding 1,000
//! within 2 s, crashes seen within 200 ms at 1,000 members with no false
//! `left`, the agents' own idle cost on a 1,000-agent segment, and a join
//! storm of 1,000 that loses and refuses no one; and the scaling table
//! (50, 200, 1,000 members: the coordinator's CPU, memory and join time,
//! python-zeroconf's resolve time beside ours).
//!
//! Judged on `sc_scale` (scenario `scale`) and, for `expand` and the peers'
//! resolve times, on `sc_mdns` at the same sizes, lossless.

use super::cells::{fmt_ms, median_cell};
use super::goals::{goal, Goal, Status};
use crate::results::{find, Summary};
use std::fmt::Write as _;

const WATCH: &str = "rlx-discover watch --json";
const AGENT: &str = "rlx-agent";
const EXPAND: &str = "rlx-discover expand (empty [discover])";
const BROWSE: &str = "rlx-discover browse";
const PYZC: &str = "python-zeroconf";

/// The `scale` row of `n` members' case for `tool` and `metric` (the
/// case's window, whatever its length).
fn at<'a>(s: &'a [Summary], n: usize, tool: &str, metric: &str) -> Option<&'a Summary> {
    let prefix = format!("{n} agents, steady");
    s.iter().find(|x| {
        x.scenario == "scale" && x.case.starts_with(&prefix) && x.tool == tool && x.metric == metric
    })
}

fn median(x: Option<&Summary>) -> Option<f64> {
    x.and_then(|x| x.median)
}

/// The lossless `mdns` row of `n` agents.
fn mdns<'a>(s: &'a [Summary], n: usize, tool: &str) -> Option<&'a Summary> {
    find(
        s,
        "mdns",
        &crate::sc_mdns::case_name(n, 0),
        tool,
        "complete_ms",
    )
}

/// The join storm's row.
fn storm<'a>(s: &'a [Summary], tool: &str, metric: &str) -> Option<&'a Summary> {
    s.iter().find(|x| {
        x.scenario == "scale"
            && x.case.starts_with("join storm")
            && x.tool == tool
            && x.metric == metric
    })
}

fn judged(g: &mut Goal, ok: bool) {
    g.status = if ok { Status::Met } else { Status::NotMet };
}

fn cpu_goal(s: &[Summary], n: usize, max: f64, what: &'static str) -> Goal {
    let mut g = goal("watch", what);
    let row = at(s, n, WATCH, "cpu_steady_pct");
    if let Some(pct) = median(row) {
        judged(&mut g, pct <= max);
        g.measured = format!("{pct:.2}% of one core");
        g.basis = row.cloned();
        g.comment = "utime + stime of watch over the steady window (nothing changing); \
                     docs/scale.md has the profile"
            .into();
    }
    g
}

/// The goals, in the order.
pub(super) fn scale_goals(s: &[Summary]) -> Vec<Goal> {
    let mut out = vec![
        cpu_goal(
            s,
            200,
            1.0,
            "watch at rest with 200 members: <= 1% of one core",
        ),
        cpu_goal(
            s,
            1000,
            5.0,
            "watch at rest with 1,000 members: <= 5% of one core",
        ),
    ];

    let mut g = goal(
        "watch",
        "1,000 agents: all joined within 10 s of watch's start",
    );
    if let Some(row) = at(s, 1000, WATCH, "join_ms") {
        let all = row.complete_runs == row.runs && row.runs > 0;
        judged(&mut g, all && row.median.is_some_and(|m| m <= 10_000.0));
        g.measured = median_cell(row);
        g.basis = Some(row.clone());
    }
    out.push(g);

    let mut g = goal("mdns", "expand finds all 1,000 agents within 2 s");
    if let Some(row) = mdns(s, 1000, EXPAND) {
        let all = row.complete_runs == row.runs && row.runs > 0;
        judged(&mut g, all && row.median.is_some_and(|m| m <= 2000.0));
        g.measured = median_cell(row);
        g.basis = Some(row.clone());
        g.versus = mdns(s, 1000, PYZC)
            .map(|p| format!("python-zeroconf: {}", median_cell(p)))
            .unwrap_or_default();
    }
    out.push(g);

    let mut g = goal(
        "watch",
        "a crash seen within 200 ms (the slowest of 20), and no false `left`, at 1,000 members",
    );
    let slowest = at(s, 1000, WATCH, "crash_left_ms_max");
    let p50 = median(at(s, 1000, WATCH, "crash_left_ms_p50"));
    let false_left = median(at(s, 1000, WATCH, "false_left"));
    let at_rest = median(at(s, 1000, WATCH, "left_at_rest"));
    if let (Some(row), Some(f), Some(r)) = (slowest, false_left, at_rest) {
        let seen_all = row.found_min.is_some() && row.found_min == row.expected;
        let max = row.median;
        judged(
            &mut g,
            seen_all && max.is_some_and(|m| m <= 200.0) && f == 0.0 && r == 0.0,
        );
        g.measured = format!(
            "slowest {}, median {}; {} of {} seen; false `left` {f:.0} (after the kills) + {r:.0} (at rest)",
            max.map_or("-".into(), fmt_ms),
            p50.map_or("-".into(), fmt_ms),
            row.found_min.unwrap_or(0),
            row.expected.unwrap_or(0),
        );
        g.basis = Some(row.clone());
    }
    out.push(g);

    let mut g = goal(
        "footprint",
        "an agent at rest on a 1,000-agent segment: <= 0.1% of a core, RSS within 1 MB of a 10-agent segment",
    );
    let cpu = at(s, 1000, AGENT, "cpu_idle_pct");
    let (rss_big, rss_small) = (
        median(at(s, 1000, AGENT, "rss_idle_kb")),
        median(at(s, 10, AGENT, "rss_idle_kb")),
    );
    if let (Some(c), Some(big), Some(small)) = (median(cpu), rss_big, rss_small) {
        judged(&mut g, c <= 0.1 && big - small <= 1024.0);
        g.measured = format!(
            "{c:.3}% of a core; RSS {:.1} MB vs {:.1} MB with 10 agents ({:+.2} MB)",
            big / 1024.0,
            small / 1024.0,
            (big - small) / 1024.0
        );
        g.basis = cpu.cloned();
    }
    out.push(g);

    let mut g = goal(
        "watch",
        "a join storm of 1,000 agents: every one admitted, none refused, none duplicated",
    );
    let joined = storm(s, WATCH, "all_joined_ms");
    let refused = median(storm(s, WATCH, "refused"));
    let dups = median(storm(s, WATCH, "duplicates"));
    if let (Some(row), Some(r), Some(d)) = (joined, refused, dups) {
        let all = row.found_min.is_some() && row.found_min == row.expected;
        judged(&mut g, all && r == 0.0 && d == 0.0);
        g.measured = format!(
            "{} of {} joined, the last {} after the first spawn; refused {r:.0}, duplicated {d:.0}",
            row.found_min.unwrap_or(0),
            row.expected.unwrap_or(0),
            median_cell(row)
        );
        g.basis = Some(row.clone());
        g.comment = [
            median(storm(s, AGENT, "spawn_spread_ms"))
                .map(|v| format!("spawned over {}", fmt_ms(v))),
            median(storm(s, WATCH, "vmhwm_kb"))
                .map(|v| format!("watch's peak RSS {:.1} MB", v / 1024.0)),
            median(storm(s, WATCH, "cpu_storm_pct"))
                .map(|v| format!("its CPU over the storm {v:.1}% of one core")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ");
    }
    out.push(g);
    out
}

/// The scaling table: one row per size that ran.
pub(super) fn scaling_table(o: &mut String, s: &[Summary]) {
    let sizes: Vec<usize> = [50, 200, 1000]
        .into_iter()
        .filter(|&n| at(s, n, WATCH, "cpu_steady_pct").is_some())
        .collect();
    if sizes.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "**Scaling** (members on one segment; `watch` started once all had announced; the \
         resolve times are the `mdns` scenario's, lossless, from each tool's spawn):\n"
    );
    let _ = writeln!(
        o,
        "| members | watch CPU at rest | watch RSS | all joined after watch's start | our browse resolves all | python-zeroconf resolves all |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    let cell = |x: Option<&Summary>| x.map_or("-".to_string(), median_cell);
    for n in sizes {
        let _ = writeln!(
            o,
            "| {n} | {} | {} | {} | {} | {} |",
            median(at(s, n, WATCH, "cpu_steady_pct"))
                .map_or("-".into(), |v| format!("{v:.2}% of one core")),
            median(at(s, n, WATCH, "rss_kb"))
                .map_or("-".into(), |v| format!("{:.1} MB", v / 1024.0)),
            cell(at(s, n, WATCH, "join_ms")),
            cell(mdns(s, n, BROWSE)),
            cell(mdns(s, n, PYZC)),
        );
    }
    let _ = writeln!(o);
}
