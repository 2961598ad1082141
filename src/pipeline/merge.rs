//! **The found machines against the file** — which hand-written node a
//! machine already is (by address, ssh alias, IP and port, or host name),
//! which node a machine moved from (the node id its comments name), which
//! claimant of a clashing id keeps its place, and where a hand-written
//! device is wrong.

use super::coalesce::Machine;
use super::report::{Clash, Duplicate, Moved};
use super::select::best_device;
use crate::addr::NodeAddr;
use crate::config::NodeConfig;
use crate::sighting::{Concern, Evidence, Problem};
use crate::write::marks::FileMark;
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Turns the id clashes into report entries. Under the cluster key
/// neither side of a clash is silently preferred: a claimant already in the
/// file (matched by its address, ssh alias or IP and port, not merely by a
/// host name any member could report) keeps its place, and every other
/// claimant is marked refused, with the reason naming the other endpoints.
/// Without a key an id proves nothing, and each claimant stays its own node.
pub(super) fn settle_clashes(
    hand: &[NodeConfig],
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
        let in_file = |m: &Machine| {
            hand.iter()
                .any(|h| matches!(hand_match(h, m), Some(w) if w != "host name"))
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
pub(super) fn claimed_node<'a>(hand: &'a [NodeConfig], p: &Problem) -> Option<&'a str> {
    if p.concern != Concern::Stranger {
        return None;
    }
    let (host, port) = NodeAddr::split(p.addr.as_deref()?);
    hand.iter()
        .find(|h| {
            let (hh, hp) = NodeAddr::split(&h.addr);
            hp == port && hh.eq_ignore_ascii_case(host)
        })
        .map(|h| h.addr.as_str())
}

/// How a hand-written node matches a discovered machine, if it does.
pub(super) fn hand_match(hand: &NodeConfig, m: &Machine) -> Option<&'static str> {
    // Leniently: a node built through the library API need not have passed
    // the config check.
    let (hand_host, hand_port) = NodeAddr::split(&hand.addr);
    let hand_ip = hand_host.parse::<IpAddr>().ok();
    for s in &m.sightings {
        if hand.addr == s.addr {
            return Some("addr");
        }
        if let (Some(a), Some(b)) = (&hand.ssh, &s.ssh) {
            if a == b {
                return Some("ssh alias");
            }
        }
        if hand_ip.is_some() && hand_ip == s.ip && hand_port == Some(s.port) {
            return Some("IP and port");
        }
        if let Some(c) = &s.caps {
            let h = hand_host.strip_suffix(".local").unwrap_or(hand_host);
            if !c.hostname.is_empty()
                && h.eq_ignore_ascii_case(&c.hostname)
                && hand_port == Some(s.port)
            {
                return Some("host name");
            }
        }
    }
    None
}

/// Warns when a hand-written node names a device its machine does not have
/// (or cannot use): the mistake this whole tool exists to catch.
pub(super) fn disagreement(hand: &NodeConfig, caps: &NodeCaps) -> Option<String> {
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

/// For each machine, the file node (index into `hand`) it is a move of:
/// a machine no node of the file matched by address, alias or name, whose
/// fresh caps (a handshake or SSH; with a cluster key in play, an
/// authenticated handshake, since any member could claim an id otherwise)
/// carry the node id that `marks` names for a node no machine matched.
/// An id two machines claim moves nothing (a warning says so), and nodes
/// reached through an ssh alias are matched by the alias, not moved.
pub(super) fn moves(
    hand: &[NodeConfig],
    marks: &[FileMark],
    machines: &[Machine],
    hits: &[Option<(usize, &'static str)>],
    warnings: &mut Vec<String>,
) -> Vec<Option<usize>> {
    let taken: BTreeSet<usize> = hits.iter().flatten().map(|(i, _)| *i).collect();
    let keyed = machines
        .iter()
        .any(|m| m.best().evidence == Evidence::Authenticated);
    let mut out: Vec<Option<usize>> = machines
        .iter()
        .zip(hits)
        .map(|(m, hit)| {
            if hit.is_some() || m.refused.is_some() || m.ssh().is_some() {
                return None;
            }
            let best = m.best();
            let proven = if keyed {
                best.evidence == Evidence::Authenticated
            } else {
                best.evidence.is_fresh()
            };
            let id = best.id().filter(|_| proven)?;
            marks.iter().enumerate().position(|(i, k)| {
                !taken.contains(&i)
                    && hand.get(i).is_some_and(|h| {
                        h.ssh
                            .as_deref()
                            .is_none_or(|s| crate::sshtarget::follows_addr(s, &h.addr))
                    })
                    && k.id.as_deref() == Some(id)
            })
        })
        .collect();
    for i in 0..hand.len() {
        let claimants: Vec<usize> = (0..out.len()).filter(|&m| out[m] == Some(i)).collect();
        if claimants.len() > 1 {
            let at: Vec<String> = claimants
                .iter()
                .map(|&m| machines[m].addr_sighting().addr.clone())
                .collect();
            warnings.push(format!(
                "[[node]] {} names node id {} in its comment, and {} all answer with that id: \
                 the node was not moved to any of them (a cloned disk may have carried the id \
                 along; give each machine its own id with rlx-agent --node-id)",
                hand[i].addr,
                marks[i].id.as_deref().unwrap_or_default(),
                at.join(" and ")
            ));
            for m in claimants {
                out[m] = None;
            }
        }
    }
    out
}

/// For each machine, the hand-written node it already is (index into
/// `hand`) and by what it matched; none for a refused machine.
pub(super) fn hand_matches(
    hand: &[NodeConfig],
    machines: &[Machine],
) -> Vec<Option<(usize, &'static str)>> {
    machines
        .iter()
        .map(|m| match m.refused {
            Some(_) => None,
            None => hand
                .iter()
                .enumerate()
                .find_map(|(i, h)| hand_match(h, m).map(|w| (i, w))),
        })
        .collect()
}

/// The report entry of file node `hand` moved to machine `m`: a
/// discovered node is rewritten to the new address, a hand-written one is
/// only reported.
pub(super) fn moved(hand: &NodeConfig, mark: &FileMark, m: &Machine) -> Moved {
    Moved {
        id: mark.id.clone().unwrap_or_default(),
        from: hand.addr.clone(),
        to: m.addr_sighting().addr.clone(),
        hostname: m
            .best()
            .caps
            .as_ref()
            .map(|c| c.hostname.clone())
            .unwrap_or_default(),
        origin: if mark.discovered {
            "discovered"
        } else {
            "hand-written"
        },
        rewritten: mark.discovered,
    }
}

/// Machine `m` is hand-written node `hand` (matched by `why`): the
/// duplicate entry, and a warning when the node's device is wrong.
pub(super) fn duplicate(
    hand: &NodeConfig,
    why: &'static str,
    m: &Machine,
) -> (Duplicate, Option<String>) {
    let s = m.addr_sighting();
    let dup = Duplicate {
        source: s.source,
        host: s.host.clone(),
        addr: s.addr.clone(),
        same_as: hand.addr.clone(),
        matched_by: why.into(),
    };
    let warning = m.best().caps.as_ref().and_then(|c| disagreement(hand, c));
    (dup, warning)
}
