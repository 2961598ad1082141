//! **The one pipeline** — sightings from every source become `[[node]]`
//! entries here, and only here: coalesce sightings of the same machine,
//! choose its device ([`crate::pipeline::select::best_device`]), build its node config,
//! merge with the hand-written nodes, and report everything dropped.
//!
//! ```text
//! sightings ─► coalesce (same id+port, same addr) ─► select device ─► NodeConfig ─► merge ─► Report
//! ```
//!
//! Merge is additive: hand-written nodes are kept untouched and come first,
//! and a discovered machine that is already in the list (same `addr`, same
//! ssh alias, same IP and port, or the host name it reports) is dropped rather
//! than added twice. So you can pin one machine and let the rest be found.
//! A machine at a new address whose node id a node's comments name is that
//! node moved ([`expand_file`]), and a machine seen at several addresses
//! gets the one [`crate::pipeline::prefer`]'s rule picks.

use crate::clusterfile::FileNode;
use crate::config::NodeConfig;
use crate::sighting::{Concern, Discovery, Problem};
use coalesce::coalesce;
use coalesce::unheard_by_mdns;
use identity::{Known, MatchedBy};
use merge::{claimed_node, duplicate, moved, recognise_all, settle_clashes};
use report::{AddedNode, Report};

pub(crate) use coalesce::same_machine;
pub(crate) use node::NodeDefaults;

pub(crate) mod coalesce;
pub(crate) mod identity;
pub(crate) mod merge;
pub(crate) mod node;
pub(crate) mod prefer;
pub(crate) mod report;
pub(crate) mod select;
mod worker;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod device_tests;

/// The finished node list and its report.
#[derive(Debug, Clone)]
pub struct Expansion {
    /// Hand-written nodes first (a moved discovered node with its new
    /// `addr`), then the added ones.
    pub nodes: Vec<NodeConfig>,
    /// What happened, the added nodes' provenance included
    /// ([`Report::added`], in the same order as the tail of `nodes`).
    pub report: Report,
}

impl Expansion {
    /// The provenance of each added node, in the same order as the tail of
    /// [`Expansion::nodes`] (kept once, in the report).
    pub fn added(&self) -> &[AddedNode] {
        &self.report.added
    }
}

/// Runs the pipeline: hand-written nodes plus what the sources found.
pub(crate) fn expand(hand: &[NodeConfig], defaults: &NodeDefaults, found: Discovery) -> Expansion {
    expand_file(hand, &[], defaults, found)
}

/// [`expand`] for the nodes of a file, with what their comments say
/// (`file`, the file's [`FileNode`]s, by index; a node without one is
/// hand-written and names no id): which node each machine is, by the one
/// identity rule ([`identity`]). A machine found at a new address whose
/// node id a node names is that node, moved
/// ([`crate::pipeline::report::Moved`]), not a new one. A discovered node
/// gets the new `addr`; a hand-written one is left as it is and the move
/// is reported.
pub(crate) fn expand_file(
    hand: &[NodeConfig],
    file: &[FileNode],
    defaults: &NodeDefaults,
    found: Discovery,
) -> Expansion {
    let known = Known::all(hand, file);
    let mut failed = found.problems;
    for p in &mut failed {
        if let Some(h) = claimed_node(&known, p) {
            p.concern = Concern::Yours;
            p.reason.push_str(&format!(
                " (it claims the address of [[node]] {h} in the file)"
            ));
        }
    }
    let mut report = Report {
        tried: found.attempts,
        kept: hand.len(),
        failed,
        ..Default::default()
    };
    let mdns_links = found.mdns_links;
    let (mut machines, clashes) = coalesce(found.sightings);
    for m in &mut machines {
        m.choose_addr(&mdns_links);
    }
    report.clashes = settle_clashes(&known, &mut machines, clashes);
    machines.sort_by_key(|m| (m.first_found_ms(), m.addr_sighting().addr.clone()));
    let hits = recognise_all(&known, &machines, &mut report.warnings);

    let mut nodes: Vec<NodeConfig> = hand.to_vec();
    for (k, m) in machines.into_iter().enumerate() {
        let addr_s = m.addr_sighting();
        if let Some(why) = &m.refused {
            report.failed.push(
                Problem::new(addr_s.source, addr_s.host.clone(), why.clone())
                    .claiming(Some(addr_s.addr.clone()), addr_s.id().map(str::to_string)),
            );
            continue;
        }
        report
            .unheard_by_mdns
            .extend(unheard_by_mdns(&m, &mdns_links));
        match hits[k] {
            Some(hit) if hit.by == MatchedBy::NodeId => {
                let moved = moved(hit.node, &known[hit.node], &m);
                if moved.rewritten {
                    nodes[hit.node].addr = moved.to.clone();
                }
                report.moved.push(moved);
            }
            Some(hit) => {
                let (dup, warning) = duplicate(hit, &known[hit.node], &m);
                report.duplicates.push(dup);
                report.warnings.extend(warning);
            }
            None => {
                report.duplicates.extend(m.folded());
                let (node, added) = node::build(&m, defaults, &mut report);
                report.added.push(added);
                nodes.push(node);
            }
        }
    }
    Expansion { nodes, report }
}
