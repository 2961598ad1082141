//! **The goal of a discovery's load on the segment**: what one lossless
//! browse puts on the wire that every device of the LAN receives (its
//! multicast queries, and the multicast responses it draws; unicast
//! replies reach the browser only), counted on the lab's switch by
//! `sc_mdns::segment`.
//!
//! The bound is python-zeroconf's browse as issue 24 measured it in the lab
//! (5 packets, 0.6 KB at 50 agents): a Wi-Fi client in power save or a
//! printer on the segment must not pay more for our discovery than for the
//! usual Python one. Before the light browse ours cost them about 56
//! packets, 19 KB at 50 agents.

use super::goals::{goal, Goal, Status};
use crate::results::{find, Summary};
use crate::sc_mdns::case_name;

/// The most packets one discovery may put on every bystander.
const PACKETS: f64 = 5.0;
/// The most bytes one discovery may put on every bystander.
const BYTES: f64 = 1000.0;

/// The browser of the goal, and python-zeroconf beside it.
const OURS: &str = "rlx-discover browse";
const PYZC: &str = "python-zeroconf";

/// One goal per lossless size that ran.
pub(super) fn load_goals(s: &[Summary]) -> Vec<Goal> {
    [
        (
            50,
            "one lossless browse of 50 agents puts at most 5 packets, 1 KB of multicast on every \
             device of the segment",
        ),
        (
            200,
            "one lossless browse of 200 agents puts at most 5 packets, 1 KB of multicast on every \
             device of the segment",
        ),
    ]
    .into_iter()
    .map(|(n, what)| {
        let case = case_name(n, 0);
        let load = |tool: &str| -> Option<(f64, f64)> {
            let get = |m: &str| find(s, "mdns", &case, tool, m).and_then(|x| x.median);
            Some((
                get("seg_queries_pkts")? + get("seg_multicast_pkts")?,
                get("seg_queries_bytes")? + get("seg_multicast_bytes")?,
            ))
        };
        let mut g = goal("mdns", what);
        if let Some((pkts, bytes)) = load(OURS) {
            g.status = if pkts <= PACKETS && bytes <= BYTES {
                Status::Met
            } else {
                Status::NotMet
            };
            g.measured = format!("{pkts:.0} packets, {:.1} KB", bytes / 1000.0);
        }
        if let Some((pkts, bytes)) = load(PYZC) {
            g.versus = format!("{PYZC}: {pkts:.0} packets, {:.1} KB", bytes / 1000.0);
        }
        g.comment = "queries plus multicast responses (medians over the runs); the unicast \
                     replies to the browser's legacy queries reach it alone"
            .into();
        g
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(tool: &str, metric: &str, v: f64) -> Summary {
        Summary::of(("mdns", &case_name(50, 0), tool, metric), 1, 1, v)
    }

    fn with(queries: f64, multicast: f64, bytes: f64) -> Vec<Summary> {
        vec![
            summary(OURS, "seg_queries_pkts", queries),
            summary(OURS, "seg_multicast_pkts", multicast),
            summary(OURS, "seg_queries_bytes", bytes / 2.0),
            summary(OURS, "seg_multicast_bytes", bytes / 2.0),
        ]
    }

    #[test]
    fn a_browse_within_five_packets_and_a_kilobyte_meets_the_goal_and_one_answer_per_agent_does_not(
    ) {
        assert!(matches!(
            load_goals(&with(3.0, 0.0, 200.0))[0].status,
            Status::Met
        ));
        assert!(matches!(
            load_goals(&with(3.0, 50.0, 19_000.0))[0].status,
            Status::NotMet
        ));
        assert!(matches!(
            load_goals(&with(3.0, 0.0, 200.0))[1].status,
            Status::NotMeasured
        ));
    }
}
