//! **The goal of a discovery's load on the segment**: what one lossless
//! browse puts on the wire that every device of the LAN receives (its
//! multicast queries, and the multicast responses it draws; unicast
//! replies reach the browser only), counted on the lab's switch by
//! `sc_mdns::segment`.
//!
//! Since the bench counts what an idle host's interface really receives
//! (`sc_mdns::bystander`), the goal is judged on that: every frame, ARP
//! included (the agents' broadcast requests for the browser's address, which
//! the switch's mDNS counters never saw). Results without the bystander's
//! counts are judged on the switch's mDNS counts, as before.
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
            "one lossless browse of 50 agents puts at most 5 packets, 1 KB on every device of \
             the segment (all it receives: mDNS, ARP, the rest)",
        ),
        (
            200,
            "one lossless browse of 200 agents puts at most 5 packets, 1 KB on every device of \
             the segment (all it receives: mDNS, ARP, the rest)",
        ),
    ]
    .into_iter()
    .map(|(n, what)| {
        let case = case_name(n, 0);
        let get = |tool: &str, m: &str| find(s, "mdns", &case, tool, m).and_then(|x| x.median);
        let bystander = |tool: &str| -> Option<(f64, f64)> {
            Some((get(tool, "by_all_pkts")?, get(tool, "by_all_bytes")?))
        };
        let switch = |tool: &str| -> Option<(f64, f64)> {
            Some((
                get(tool, "seg_queries_pkts")? + get(tool, "seg_multicast_pkts")?,
                get(tool, "seg_queries_bytes")? + get(tool, "seg_multicast_bytes")?,
            ))
        };
        let counted_all = bystander(OURS).is_some();
        let load = |tool: &str| {
            if counted_all {
                bystander(tool)
            } else {
                switch(tool)
            }
        };
        let mut g = goal("mdns", what);
        if let Some((pkts, bytes)) = load(OURS) {
            g.status = if pkts <= PACKETS && bytes <= BYTES {
                Status::Met
            } else {
                Status::NotMet
            };
            let basis = find(
                s,
                "mdns",
                &case,
                OURS,
                if counted_all {
                    "by_all_pkts"
                } else {
                    "seg_queries_pkts"
                },
            );
            let runs = basis.map_or(0, |x| x.runs);
            g.basis = basis.cloned();
            g.measured = format!("{pkts:.0} packets, {:.1} KB (n={runs})", bytes / 1000.0);
        }
        if let Some((pkts, bytes)) = load(PYZC) {
            g.versus = format!("{PYZC}: {pkts:.0} packets, {:.1} KB", bytes / 1000.0);
        }
        g.comment = if counted_all {
            let k = |tool: &str, kind: &str| {
                get(tool, &format!("{kind}_pkts")).map_or("?".into(), |v| format!("{v:.0}"))
            };
            format!(
                "everything the idle host's interface received (medians, Ethernet headers \
                 included): ours {} mDNS, {} ARP from the browser's host (its announcements), {} \
                 ARP from the agents (each asks for the browser's address before its unicast \
                 reply; caches flushed before every run); {PYZC} {} mDNS, {} ARP from the agents; \
                 the breakdown per case is in the mDNS section",
                k(OURS, "by_mdns"),
                k(OURS, "by_arp_browser"),
                k(OURS, "by_arp_other"),
                k(PYZC, "by_mdns"),
                k(PYZC, "by_arp_other"),
            )
        } else if switch(OURS).is_some() {
            "queries plus multicast responses counted on the switch (medians over the runs); \
             the unicast replies to the browser's legacy queries reach it alone; ARP not counted"
                .into()
        } else {
            String::new()
        };
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

    #[test]
    fn what_a_bystander_receives_is_judged_when_counted_arp_included() {
        let mut s = with(3.0, 0.0, 200.0);
        s.push(summary(OURS, "by_all_pkts", 58.0));
        s.push(summary(OURS, "by_all_bytes", 2535.0));
        s.push(summary(OURS, "by_arp_other_pkts", 50.0));
        let g = &load_goals(&s)[0];
        assert!(matches!(g.status, Status::NotMet));
        assert!(
            g.measured.starts_with("58 packets, 2.5 KB"),
            "{}",
            g.measured
        );
        assert!(
            g.comment.contains("50 ARP from the agents"),
            "{}",
            g.comment
        );
    }
}
