//! **What a bystander receives per discovery run**: the mDNS section's
//! table of everything that reached the idle lab host's interface while one
//! tool ran (`sc_mdns::bystander`), by kind, with repetitions and spread.

use super::cells::{find, n_cell};
use crate::results::Summary;
use std::fmt::Write as _;

/// The tools of the table.
const TOOLS: [&str; 4] = [
    "rlx-discover browse",
    "rlx-discover expand (empty [discover])",
    "python-zeroconf",
    "avahi-browse -rp",
];

/// `packets (KB)` median of one metric pair, with the packets' min-max and n.
pub(super) fn cell(s: &[Summary], case: &str, tool: &str, kind: &str) -> Option<String> {
    let p = find(s, "mdns", case, tool, &format!("{kind}_pkts"))?;
    let b = find(s, "mdns", case, tool, &format!("{kind}_bytes"))?;
    let spread = match (p.min, p.max) {
        (Some(a), Some(z)) if p.runs > 1 && a != z => format!(", {a:.0}-{z:.0}"),
        _ => String::new(),
    };
    Some(format!(
        "{:.0} ({:.1} KB; n={}{spread})",
        p.median?,
        b.median? / 1000.0,
        p.runs
    ))
}

/// The breakdown cell: mDNS / ARP from the browser's host / ARP from the
/// others / IPv6 ND / other frames, median packets.
fn kinds(s: &[Summary], case: &str, tool: &str) -> Option<String> {
    let m = |k: &str| find(s, "mdns", case, tool, &format!("{k}_pkts")).and_then(|x| x.median);
    let other = m("by_other_group")? + m("by_other_unicast")? + m("by_rest").unwrap_or(0.0);
    Some(format!(
        "{:.0} / {:.0} / {:.0} / {:.0} / {other:.0}",
        m("by_mdns")?,
        m("by_arp_browser")?,
        m("by_arp_other")?,
        m("by_nd")?,
    ))
}

/// The table, when the bystander was counted.
pub(super) fn table(o: &mut String, s: &[Summary], cases: &[(usize, u8, bool)]) {
    let named: Vec<(String, String)> = cases
        .iter()
        .map(|(n, l, v6)| {
            (
                n_cell(*n, *v6) + &format!(" | {l}%"),
                crate::sc_mdns::case_name_on(*n, *l, *v6),
            )
        })
        .filter(|(_, case)| cell(s, case, TOOLS[0], "by_all").is_some())
        .collect();
    if named.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "What a bystander receives per run: everything that reached the interface of one more \
         lab host that runs nothing (a printer, a phone), from the tool's start until 200 ms \
         after it exited: median packets (KB, Ethernet headers included; n runs, min-max \
         packets), then by kind (median packets): mDNS / ARP from the browser's host / ARP from \
         the other hosts / IPv6 neighbour discovery / anything else. Every host's ARP cache is \
         flushed before each run (a cold coordinator), so each agent that answers by unicast \
         first asks, by broadcast, for the browser's address: those requests reach every \
         device.\n"
    );
    let _ = writeln!(o, "| N | loss | {} |", TOOLS.join(" | "));
    let _ = writeln!(o, "|---|---|{}", "---|".repeat(TOOLS.len()));
    for (label, case) in &named {
        let cells: Vec<String> = TOOLS
            .iter()
            .map(|t| match (cell(s, case, t, "by_all"), kinds(s, case, t)) {
                (Some(a), Some(k)) => format!("{a}: {k}"),
                _ => "-".into(),
            })
            .collect();
        let _ = writeln!(o, "| {label} | {} |", cells.join(" | "));
    }
    let _ = writeln!(o);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{summarise, Sample};

    #[test]
    fn the_bystander_row_gives_the_total_with_n_and_spread_then_each_kind() {
        let case = crate::sc_mdns::case_name(50, 0);
        let mut v = Vec::new();
        for (rep, all) in [(0, 59.0), (1, 58.0), (2, 58.0)] {
            for (m, x) in [
                ("by_all_pkts", all),
                ("by_all_bytes", 2535.0),
                ("by_mdns_pkts", 3.0),
                ("by_arp_browser_pkts", 5.0),
                ("by_arp_other_pkts", 50.0),
                ("by_nd_pkts", 0.0),
                ("by_other_group_pkts", 0.0),
                ("by_other_unicast_pkts", 0.0),
            ] {
                v.push(Sample::measured(("mdns", &case, TOOLS[0], m), rep, Some(x)));
            }
        }
        let s = summarise(&v);
        let mut o = String::new();
        table(&mut o, &s, &[(50, 0, false)]);
        assert!(
            o.contains("| 50 | 0% | 58 (2.5 KB; n=3, 58-59): 3 / 5 / 50 / 0 / 0 | - |"),
            "{o}"
        );
    }
}
