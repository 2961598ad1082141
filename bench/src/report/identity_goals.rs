//! **The goals of node identity and the membership feed**, judged on the
//! trust scenario's node-key and forged-goodbye cases: forged goodbyes
//! move no member, a real goodbye under them is still seen within 2 s, and
//! what a node key costs a handshake.

use super::cells::{find, fmt_ms};
use super::goals::{goal, Goal, Status};
use crate::results::Summary;
use crate::sc_trust::goodbyes::{CASE_KEYED, CASE_OPEN, TOOL as WATCH};
use crate::sc_trust::identity::{AGENTS, TOOL as HANDSHAKE};

/// A figure in microseconds, as ms when it is over one.
fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

pub(super) fn identity_goals(s: &[Summary]) -> Vec<Goal> {
    let mut out = Vec::new();
    let get = |case: &str, tool: &str, metric: &str| find(s, "trust", case, tool, metric);

    let mut g = goal(
        "trust",
        "1,000 forged goodbyes a second: no member moved, with or without a key",
    );
    let judged: Vec<(&str, &Summary)> = [("no key", CASE_OPEN), ("key", CASE_KEYED)]
        .into_iter()
        .filter_map(|(k, c)| get(c, WATCH, "member_events").map(|x| (k, x)))
        .collect();
    if !judged.is_empty() {
        let moved = judged.iter().any(|(_, x)| x.max.unwrap_or(f64::MAX) > 0.0);
        let runs: usize = judged.iter().map(|(_, x)| x.runs).sum();
        g.measured = format!(
            "{} member events in {runs} runs",
            if moved { "some" } else { "no" }
        );
        g.versus = judged
            .iter()
            .map(|(k, _)| {
                let c = if *k == "key" { CASE_KEYED } else { CASE_OPEN };
                let cpu = |m| get(c, WATCH, m).and_then(|x| x.median);
                format!(
                    "{k}: watch's CPU {} at rest, {} under the flood (of one core)",
                    cpu("cpu_rest_pct").map_or("-".into(), |v| format!("{v:.1}%")),
                    cpu("cpu_flood_pct").map_or("-".into(), |v| format!("{v:.1}%"))
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        g.status = if moved { Status::NotMet } else { Status::Met };
        g.comment = "each goodbye only schedules a check of the member, at most two handshakes \
                     a second; the CPU is the wake-ups of two readers per packet"
            .into();
    }
    out.push(g);

    let mut g = goal("trust", "a real goodbye under that flood: left within 2 s");
    let lefts: Vec<&Summary> = [CASE_OPEN, CASE_KEYED]
        .into_iter()
        .filter_map(|c| get(c, WATCH, "real_left_ms"))
        .collect();
    if !lefts.is_empty() {
        let all = lefts
            .iter()
            .all(|x| x.complete_runs == x.runs && x.runs > 0);
        let worst = lefts.iter().filter_map(|x| x.max).fold(0.0, f64::max);
        g.measured = format!("slowest {}", fmt_ms(worst));
        g.status = if all && worst <= 2000.0 {
            Status::Met
        } else {
            Status::NotMet
        };
    }
    out.push(g);

    let mut g = goal(
        "trust",
        "node keys: every handshake answered and its signature verified (cost beside)",
    );
    let median = |case: &str| get(case, HANDSHAKE, "median_us").and_then(|x| x.median);
    let failed: f64 = AGENTS
        .iter()
        .filter_map(|(c, _, _)| get(c, HANDSHAKE, "failed").and_then(|x| x.max))
        .sum();
    let pairs: Vec<String> = AGENTS
        .chunks(2)
        .filter_map(|pair| {
            let (without, with) = (median(pair[0].0)?, median(pair[1].0)?);
            Some(format!(
                "{}: {} with, {} without ({:.1}x)",
                if pair[0].1 {
                    "cluster key"
                } else {
                    "no cluster key"
                },
                us(with),
                us(without),
                with / without
            ))
        })
        .collect();
    if !pairs.is_empty() {
        g.measured = format!("{failed:.0} failed");
        g.versus = pairs.join("; ");
        g.status = if failed == 0.0 {
            Status::Met
        } else {
            Status::NotMet
        };
        g.comment = "one handshake at a time, median over the runs' medians: an Ed25519 \
                     signature by the agent and its check by the coordinator"
            .into();
    }
    out.push(g);
    out
}
