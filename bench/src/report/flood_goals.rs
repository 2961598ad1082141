//! **The goal of the responder under a stranger's floods**: the agent's
//! RSS at its peak under each flood (`sc_floods`) within a few MB of its
//! idle RSS, with avahi-daemon and python-zeroconf under the same flood
//! beside it.

use super::goals::{goal, Goal, Status};
use crate::results::Summary;
use crate::sc_floods::KINDS;
use crate::sc_footprint::{AGENT, AVAHI, PYZC};

/// How far above idle the agent's peak may go, MB ("a few MB").
const GROWTH_MB: f64 = 6.0;

/// One goal per flood kind.
pub(super) fn flood_goals(s: &[Summary]) -> Vec<Goal> {
    KINDS
        .iter()
        .map(|kind| {
            let what: &'static str = match *kind {
                "tc" => {
                    "the agent's RSS under a flood of truncated queries stays within 6 MB of idle"
                }
                _ => {
                    "the agent's RSS under a flood of unsolicited records stays within 6 MB of idle"
                }
            };
            let prefix = format!("under a {kind} flood");
            let row = |tool: &str, metric: &str| {
                s.iter().find(|x| {
                    x.scenario == "footprint"
                        && x.case.starts_with(&prefix)
                        && x.tool == tool
                        && x.metric == metric
                })
            };
            let get = |tool: &str, metric: &str| row(tool, metric).and_then(|x| x.median);
            let mb = |kb: f64| kb / 1024.0;
            let mut g = goal("footprint", what);
            g.basis = row(AGENT, "rss_growth_kb").cloned();
            if let (Some(idle), Some(peak)) = (get(AGENT, "rss_idle_kb"), get(AGENT, "rss_peak_kb"))
            {
                let growth = mb(peak - idle);
                g.status = if growth <= GROWTH_MB {
                    Status::Met
                } else {
                    Status::NotMet
                };
                g.measured = format!(
                    "idle {:.1} MB, peak {:.1} MB (+{growth:.1} MB), 5 s after {:.1} MB",
                    mb(idle),
                    mb(peak),
                    get(AGENT, "rss_after_kb").map_or(f64::NAN, mb)
                );
            }
            g.versus = [AVAHI, PYZC]
                .iter()
                .filter_map(|t| {
                    let (i, p) = (get(t, "rss_idle_kb")?, get(t, "rss_peak_kb")?);
                    Some(format!("{t}: idle {:.1} MB, peak {:.1} MB", mb(i), mb(p)))
                })
                .collect::<Vec<_>>()
                .join("; ");
            g.comment = "400 packets/s from one stranger with no key (PATCHES.md §28); before the \
                         fix the same floods took an agent past 60 MB, and it stayed there"
                .into();
            g
        })
        .collect()
}
