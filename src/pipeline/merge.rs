//! **The found machines against the file** — each machine's claim to the
//! one identity rule ([`super::identity`]: its proven node id, then its
//! addresses), which claimant of a clashing id keeps its place, and where
//! a hand-written device is wrong.

use super::coalesce::Machine;
use super::identity::{self, Claim, Hit, Known, MatchedBy, Seen, Unmoved};
use super::report::{Clash, Duplicate, Moved};
use super::select::best_device;
use crate::sighting::{Concern, Evidence, Problem};
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;

/// What machine `m` offers the identity rule; `keyed` when a cluster key
/// is in play this run (some machine proved it).
pub(super) fn claim(m: &Machine, keyed: bool) -> Claim<'_> {
    let best = m.best();
    Claim {
        id: best
            .id()
            .filter(|_| identity::proves_id(best.evidence, keyed)),
        over_ssh: m.ssh().is_some(),
        seen: m
            .sightings
            .iter()
            .map(|s| Seen {
                addr: &s.addr,
                ssh: s.ssh.as_deref(),
                ip: s.ip,
                port: s.port,
                hostname: s.caps.as_ref().map_or("", |c| c.hostname.as_str()),
            })
            .collect(),
    }
}

/// Turns the id clashes into report entries. Under the cluster key
/// neither side of a clash is silently preferred: a claimant already in the
/// file (matched by its address, ssh alias or IP and port, not merely by a
/// host name any member could report) keeps its place, and every other
/// claimant is marked refused, with the reason naming the other endpoints.
/// Without a key an id proves nothing, and each claimant stays its own node.
pub(super) fn settle_clashes(
    known: &[Known],
    machines: &mut [Machine],
    clashes: Vec<(String, Vec<usize>)>,
) -> Vec<Clash> {
    let mut out = Vec::new();
    for (id, claimants) in clashes {
        let addr_of = |i: usize| machines[i].addr_sighting().addr.clone();
        let addrs: Vec<String> = claimants.iter().map(|&i| addr_of(i)).collect();
        let authenticated = claimants
            .iter()
            .any(|&i| machines[i].best().evidence == Evidence::Authenticated);
        if !authenticated {
            out.push(Clash {
                id,
                kept: addrs.clone(),
                addrs,
                authenticated,
                refused: Vec::new(),
            });
            continue;
        }
        // In the file by an address of its own, not merely by a host name
        // any member could report.
        let in_file = |m: &Machine| {
            let at = Claim {
                id: None,
                ..claim(m, false)
            };
            identity::recognise(known, &at, |_| false)
                .0
                .is_some_and(|h| h.by != MatchedBy::HostName)
        };
        let (kept, refused): (Vec<usize>, Vec<usize>) =
            claimants.iter().partition(|&&i| in_file(&machines[i]));
        let kept_addrs: Vec<String> = kept.iter().map(|&i| addr_of(i)).collect();
        let refused_addrs: Vec<String> = refused.iter().map(|&i| addr_of(i)).collect();
        let reasons: Vec<(usize, String)> = refused
            .iter()
            .map(|&i| {
                let me = addr_of(i);
                let reason = if kept.is_empty() {
                    let others: Vec<&str> = addrs
                        .iter()
                        .filter(|a| **a != me)
                        .map(String::as_str)
                        .collect();
                    format!(
                        "refused: {me} proves the cluster key and claims node id {id}, and so \
                         does {}: neither is preferred, so neither is added (a member holding \
                         the shared key may be posing as another, or a cloned disk carried the \
                         id along)",
                        others.join(" and ")
                    )
                } else {
                    format!(
                        "refused: {me} proves the cluster key but claims node id {id}, which \
                         {} in the file has; that node keeps its address (a member holding the \
                         shared key may be posing as it, or a cloned disk carried the id along)",
                        kept_addrs.join(" and ")
                    )
                };
                (i, reason)
            })
            .collect();
        for (i, reason) in reasons {
            machines[i].refused = Some(reason);
        }
        out.push(Clash {
            id,
            addrs,
            authenticated,
            kept: kept_addrs,
            refused: refused_addrs,
        });
    }
    out
}

/// The `addr` of the file's node whose endpoint a stranger's refused
/// announcement names, if any: then it is not a stranger's problem but an
/// agent of the file that failed (or an impostor of one).
pub(super) fn claimed_node<'a>(known: &[Known<'a>], p: &Problem) -> Option<&'a str> {
    if p.concern != Concern::Stranger {
        return None;
    }
    let at = Claim {
        seen: vec![Seen::addr(p.addr.as_deref()?)],
        ..Claim::default()
    };
    match identity::recognise(known, &at, |_| false).0 {
        Some(Hit {
            node,
            by: MatchedBy::Addr | MatchedBy::IpAndPort,
        }) => Some(known[node].node.addr.as_str()),
        _ => None,
    }
}

/// Warns when a hand-written node names a device its machine does not have
/// (or cannot use): the mistake this whole tool exists to catch.
pub(super) fn disagreement(hand: &crate::config::NodeConfig, caps: &NodeCaps) -> Option<String> {
    let usable: BTreeSet<_> = caps
        .devices
        .iter()
        .filter(|d| d.available)
        .filter_map(|d| d.parsed())
        .collect();
    // Kinds no agent probes (an NPU, a generic GPU API) cannot be judged.
    let missing: Vec<String> = hand
        .device
        .kinds()
        .filter_map(|k| k.agent_kind())
        .filter(|k| k.is_accelerator() && !usable.contains(k))
        .map(|k| k.to_string())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let found = best_device(caps).device;
    Some(format!(
        "hand-written [[node]] {} says device = \"{}\", but the machine reports no usable {} \
         (discovery would choose \"{found}\"); the node was kept as written",
        hand.addr,
        hand.device,
        missing.join(", ")
    ))
}

/// Each machine's node in the file (none for a refused machine), and a
/// warning for each proven id that did not decide.
pub(super) fn recognise_all(
    known: &[Known],
    machines: &[Machine],
    warnings: &mut Vec<String>,
) -> Vec<Option<Hit>> {
    let keyed = machines
        .iter()
        .any(|m| m.best().evidence == Evidence::Authenticated);
    let claims: Vec<Option<Claim>> = machines
        .iter()
        .map(|m| m.refused.is_none().then(|| claim(m, keyed)))
        .collect();
    let (hits, notes) = identity::assign(known, &claims);
    let at = |c: usize| machines[c].addr_sighting().addr.clone();
    for n in notes {
        warnings.push(match n {
            Unmoved::Contested { named, claims } => format!(
                "[[node]] {} names node id {} in its comment, and {} all answer with that id: \
                 the node was not moved to any of them (a cloned disk may have carried the id \
                 along; give each machine its own id with rlx-agent --node-id)",
                known[named].node.addr,
                known[named].id.unwrap_or_default(),
                claims.into_iter().map(at).collect::<Vec<_>>().join(" and ")
            ),
            Unmoved::AddressTaken { named, at } => format!(
                "[[node]] {} names node id {} in its comment, and its machine now answers at \
                 {}, the address of [[node]] {} in the file: the node was not moved there \
                 (the file would list one address twice); remove the stale node, then run again",
                known[named].node.addr,
                known[named].id.unwrap_or_default(),
                known[at].node.addr,
                known[at].node.addr
            ),
        });
    }
    hits
}

/// The report entry of file node `hand` moved to machine `m`: a
/// discovered node is rewritten to the new address, a hand-written one is
/// only reported.
pub(super) fn moved(node: usize, known: &Known, m: &Machine) -> Moved {
    Moved {
        node,
        id: known.id.unwrap_or_default().to_string(),
        from: known.node.addr.clone(),
        to: m.addr_sighting().addr.clone(),
        hostname: m
            .best()
            .caps
            .as_ref()
            .map(|c| c.hostname.clone())
            .unwrap_or_default(),
        origin: if known.discovered {
            "discovered"
        } else {
            "hand-written"
        },
        rewritten: known.discovered,
    }
}

/// Machine `m` is the file's node `hit.node` (`known`): the duplicate
/// entry, and a warning when the node's device is wrong.
pub(super) fn duplicate(hit: Hit, known: &Known, m: &Machine) -> (Duplicate, Option<String>) {
    let s = m.addr_sighting();
    let dup = Duplicate {
        source: s.source,
        host: s.host.clone(),
        addr: s.addr.clone(),
        same_as: known.node.addr.clone(),
        node: Some(hit.node),
        matched_by: hit.by.as_str().into(),
    };
    let warning = m
        .best()
        .caps
        .as_ref()
        .and_then(|c| disagreement(known.node, c));
    (dup, warning)
}
