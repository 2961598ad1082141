//! **Which `[[node]]` is this machine?** — the one rule, used by `expand`'s
//! merge (duplicate or move), by the write-back's account of what was seen
//! (through the report's node indices) and by the watch's roster
//! ([`crate::LiveWatch::with_file`]), so a comment or an address never
//! names one node for one command and another (or none) for the next.
//!
//! In order:
//! 1. **The node id its comments name** (`# found by ..., id X`, or a
//!    user's own `# my box, id X`), when the machine *proves* that id (an
//!    authenticated handshake under a cluster key, a fresh handshake or SSH
//!    without one: [`proves_id`]). Then it is that node wherever it
//!    answers: at the node's own address, or moved. Two exceptions keep the
//!    file sound: an id that two machines prove names neither (a cloned
//!    disk), and a move onto an address another node of the file already
//!    has is not made (the file would list one machine twice; a warning
//!    says so, and the address decides).
//! 2. Else **its address**: the node's `addr` (host case-insensitive, same
//!    port), then its `ssh` alias, then the same IP and port, then the host
//!    name the machine reports with the same port; the first criterion any
//!    node meets decides, over all nodes, before the next criterion is
//!    tried. A node another machine holds by its id is not matched by
//!    address: a box that took over a moved machine's old address is not
//!    that machine.
//!
//! A node reached through an `ssh` alias of the user's choosing is matched
//! by that alias, never moved, and so is a machine that was reached over
//! SSH: an alias names a host, wherever it lives.

use crate::addr::NodeAddr;
use crate::clusterfile::FileNode;
use crate::config::NodeConfig;
use crate::sighting::Evidence;
use std::net::IpAddr;

/// Which criterion of the rule recognised a machine as a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MatchedBy {
    /// Its proven node id, which the node's comments name, and no address:
    /// the machine moved.
    NodeId,
    /// The node's `addr`.
    Addr,
    /// The node's `ssh` alias.
    SshAlias,
    /// The same IP address and port.
    IpAndPort,
    /// The host name the machine reports, and the same port.
    HostName,
}

impl MatchedBy {
    /// The report's word for it (`matched_by`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MatchedBy::NodeId => "node id",
            MatchedBy::Addr => "addr",
            MatchedBy::SshAlias => "ssh alias",
            MatchedBy::IpAndPort => "IP and port",
            MatchedBy::HostName => "host name",
        }
    }
}

/// The address criteria, strongest first.
const BY_ADDRESS: [MatchedBy; 4] = [
    MatchedBy::Addr,
    MatchedBy::SshAlias,
    MatchedBy::IpAndPort,
    MatchedBy::HostName,
];

/// Whether a machine's node id, with this evidence, proves who it is: a
/// handshake under the cluster key when the run or watch is keyed (any
/// member holding a shared key could claim another's id otherwise, and a
/// signature by the pinned key is checked before this), a fresh
/// handshake or SSH probe when it is not. An id read from a TXT record or
/// a cache proves nothing.
pub(crate) fn proves_id(evidence: Evidence, keyed: bool) -> bool {
    if keyed {
        evidence == Evidence::Authenticated
    } else {
        evidence.is_fresh()
    }
}

/// A node of the file as the rule sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known<'a> {
    /// The node as configured.
    pub node: &'a NodeConfig,
    /// The node id its comments name.
    pub id: Option<&'a str>,
    /// True when rlx-discover appended it (the `# found by` comment): a
    /// move rewrites its `addr`.
    pub discovered: bool,
}

impl<'a> Known<'a> {
    /// The nodes `hand` with what `file` (the same file's [`FileNode`]s,
    /// by index) says of them; a node the file does not list (one built
    /// through the API) has no id and is hand-written.
    pub(crate) fn all(hand: &'a [NodeConfig], file: &'a [FileNode]) -> Vec<Known<'a>> {
        hand.iter()
            .enumerate()
            .map(|(i, node)| {
                let f = file.iter().find(|f| f.index == i);
                Known {
                    node,
                    id: f.and_then(|f| f.id.as_deref()),
                    discovered: f.is_some_and(FileNode::is_discovered),
                }
            })
            .collect()
    }

    /// Whether a move may carry this node to a new address: not when it is
    /// reached through an alias the user chose.
    fn movable(&self) -> bool {
        self.node
            .ssh
            .as_deref()
            .is_none_or(|s| crate::sshtarget::follows_addr(s, &self.node.addr))
    }

    /// Whether `seen` meets this node by the address criterion `by`.
    fn meets(&self, seen: &Seen<'_>, by: MatchedBy) -> bool {
        // Leniently: a node built through the library API need not have
        // passed the config check.
        let (host, port) = NodeAddr::split(&self.node.addr);
        match by {
            MatchedBy::NodeId => false,
            MatchedBy::Addr => {
                let (sh, sp) = NodeAddr::split(seen.addr);
                port.is_some() && port == sp && host.eq_ignore_ascii_case(sh)
            }
            MatchedBy::SshAlias => {
                matches!((&self.node.ssh, seen.ssh), (Some(a), Some(b)) if a == b)
            }
            MatchedBy::IpAndPort => {
                let ip = host.parse::<IpAddr>().ok();
                ip.is_some() && ip == seen.ip && port == Some(seen.port)
            }
            MatchedBy::HostName => {
                let h = host.strip_suffix(".local").unwrap_or(host);
                !seen.hostname.is_empty()
                    && h.eq_ignore_ascii_case(seen.hostname)
                    && port == Some(seen.port)
            }
        }
    }
}

/// One address at which a machine was seen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The `addr` it would be given there.
    pub addr: &'a str,
    /// The ssh alias it was reached by, if any.
    pub ssh: Option<&'a str>,
    /// Its IP there, if known.
    pub ip: Option<IpAddr>,
    /// The worker port.
    pub port: u16,
    /// The host name it reports (empty when none).
    pub hostname: &'a str,
}

impl<'a> Seen<'a> {
    /// An address alone (`host:port`), as a refused announcement or a
    /// member's other address names it.
    pub(crate) fn addr(addr: &'a str) -> Seen<'a> {
        let (host, port) = NodeAddr::split(addr);
        Seen {
            addr,
            ssh: None,
            ip: host.parse().ok(),
            port: port.unwrap_or(0),
            hostname: "",
        }
    }
}

/// What a machine offers to be recognised by.
#[derive(Debug, Clone, Default)]
pub(crate) struct Claim<'a> {
    /// Its node id, only when it proves it ([`proves_id`]).
    pub id: Option<&'a str>,
    /// True when it was reached over SSH (matched by alias, never moved).
    pub over_ssh: bool,
    /// Where it was seen.
    pub seen: Vec<Seen<'a>>,
}

/// A machine recognised as a node of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The node's index in the file's node list.
    pub node: usize,
    /// By what.
    pub by: MatchedBy,
}

/// Why a machine's proven id did not decide which node it is, for the
/// caller's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unmoved {
    /// The id names node `named`, but the machine answers at the address
    /// of node `at`, which keeps it: moving `named` there would list one
    /// address twice.
    AddressTaken { named: usize, at: usize },
    /// The id names node `named`, and the machines `claims` (indices into
    /// the claims given) all prove it: a cloned disk, most likely.
    Contested { named: usize, claims: Vec<usize> },
}

/// The first node `claim` meets by address, criterion by criterion, over
/// the nodes `open` allows.
fn by_address(known: &[Known], claim: &Claim, open: impl Fn(usize) -> bool) -> Option<Hit> {
    BY_ADDRESS.into_iter().find_map(|by| {
        known
            .iter()
            .enumerate()
            .filter(|(i, _)| open(*i))
            .find(|(_, k)| claim.seen.iter().any(|s| k.meets(s, by)))
            .map(|(node, _)| Hit { node, by })
    })
}

/// The node `id` names in the file (the first, should two name it).
fn named(known: &[Known], id: &str) -> Option<usize> {
    known.iter().position(|k| k.id == Some(id))
}

/// The rule for one machine. `held(i)`: node `i` is another machine's by
/// its proven id, so it is not this one's by address.
pub(crate) fn recognise(
    known: &[Known],
    claim: &Claim,
    held: impl Fn(usize) -> bool,
) -> (Option<Hit>, Option<Unmoved>) {
    let open = |i: usize| !held(i);
    let by_id = claim
        .id
        .and_then(|id| named(known, id))
        .filter(|&i| open(i));
    let Some(i) = by_id else {
        return (by_address(known, claim, open), None);
    };
    // At the node's own address (or alias, or name): that node, by it.
    if let Some(hit) = by_address(known, claim, |j| j == i) {
        return (Some(hit), None);
    }
    match by_address(known, claim, open) {
        Some(other) => (
            Some(other),
            Some(Unmoved::AddressTaken {
                named: i,
                at: other.node,
            }),
        ),
        None if known[i].movable() && !claim.over_ssh => (
            Some(Hit {
                node: i,
                by: MatchedBy::NodeId,
            }),
            None,
        ),
        None => (None, None),
    }
}

/// The rule for every machine of one run at once (`None` for a machine
/// that is not a candidate, a refused one): each machine's node, and why
/// an id did not decide where that is worth a warning.
pub(crate) fn assign(
    known: &[Known],
    claims: &[Option<Claim>],
) -> (Vec<Option<Hit>>, Vec<Unmoved>) {
    let mut notes = Vec::new();
    // Who proves each id the file names.
    let mut provers: Vec<Vec<usize>> = vec![Vec::new(); known.len()];
    for (c, claim) in claims.iter().enumerate() {
        if let Some(i) = claim
            .as_ref()
            .and_then(|cl| cl.id)
            .and_then(|id| named(known, id))
        {
            provers[i].push(c);
        }
    }
    // An id two machines prove decides nothing: each is judged by its
    // address alone.
    let stripped: Vec<Option<Claim>> = claims
        .iter()
        .map(|cl| {
            cl.as_ref().map(|cl| {
                let contested = cl
                    .id
                    .and_then(|id| named(known, id))
                    .is_some_and(|i| provers[i].len() > 1);
                Claim {
                    id: cl.id.filter(|_| !contested),
                    ..cl.clone()
                }
            })
        })
        .collect();
    // First pass: the nodes machines hold by their ids.
    let mut holder: Vec<Option<usize>> = vec![None; known.len()];
    for (c, claim) in stripped.iter().enumerate() {
        let Some(cl) = claim else { continue };
        if let (Some(hit), _) = recognise(known, cl, |_| false) {
            if cl.id.and_then(|id| named(known, id)) == Some(hit.node) {
                holder[hit.node] = Some(c);
            }
        }
    }
    let hits = stripped
        .iter()
        .enumerate()
        .map(|(c, claim)| {
            let cl = claim.as_ref()?;
            let (hit, note) = recognise(known, cl, |i| holder[i].is_some_and(|h| h != c));
            notes.extend(note);
            hit
        })
        .collect::<Vec<_>>();
    for (i, p) in provers.into_iter().enumerate() {
        if p.len() > 1 && !hits.iter().any(|h| h.is_some_and(|h| h.node == i)) {
            notes.push(Unmoved::Contested {
                named: i,
                claims: p,
            });
        }
    }
    (hits, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(addr: &str) -> NodeConfig {
        NodeConfig::new(addr)
    }

    fn at(addr: &str) -> Claim<'_> {
        Claim {
            seen: vec![Seen::addr(addr)],
            ..Claim::default()
        }
    }

    fn known<'a>(hand: &'a [NodeConfig], ids: &[Option<&'a str>]) -> Vec<Known<'a>> {
        hand.iter()
            .zip(ids)
            .map(|(node, id)| Known {
                node,
                id: *id,
                discovered: true,
            })
            .collect()
    }

    const X: &str = "0123456789abcdef";
    const Y: &str = "fedcba9876543210";

    #[test]
    fn a_machine_proving_a_nodes_id_at_a_new_address_is_that_node_moved() {
        let hand = [node("10.0.0.5:9100"), node("10.0.0.6:9100")];
        let k = known(&hand, &[Some(X), None]);
        let mut c = at("10.0.0.50:9100");
        c.id = Some(X);
        let (hit, note) = recognise(&k, &c, |_| false);
        assert_eq!(
            hit,
            Some(Hit {
                node: 0,
                by: MatchedBy::NodeId
            })
        );
        assert_eq!(note, None);
    }

    #[test]
    fn the_address_criteria_are_tried_in_order_over_every_node() {
        let mut by_alias = node("gpu-a:9100");
        by_alias.ssh = Some("gpu".into());
        let hand = [by_alias, node("10.0.0.9:9100")];
        let k = known(&hand, &[None, None]);
        let c = Claim {
            seen: vec![Seen {
                addr: "10.0.0.9:9100",
                ssh: Some("gpu"),
                ip: "10.0.0.9".parse().ok(),
                port: 9100,
                hostname: "",
            }],
            ..Claim::default()
        };
        // The alias matches the first node, the address the second: the
        // address is the stronger criterion, wherever the node is listed.
        assert_eq!(
            recognise(&k, &c, |_| false).0,
            Some(Hit {
                node: 1,
                by: MatchedBy::Addr
            })
        );
    }

    #[test]
    fn addresses_match_whatever_the_case_of_the_host_name() {
        let hand = [node("GPU-A.local:9100")];
        let k = known(&hand, &[None]);
        assert_eq!(
            recognise(&k, &at("gpu-a.local:9100"), |_| false).0,
            Some(Hit {
                node: 0,
                by: MatchedBy::Addr
            })
        );
        assert_eq!(recognise(&k, &at("gpu-a.local:9101"), |_| false).0, None);
    }

    #[test]
    fn a_move_onto_another_nodes_address_is_not_made_and_is_reported() {
        let hand = [node("10.0.0.5:9100"), node("10.0.0.6:9100")];
        let k = known(&hand, &[Some(X), None]);
        let mut c = at("10.0.0.6:9100");
        c.id = Some(X);
        let (hit, note) = recognise(&k, &c, |_| false);
        assert_eq!(hit.map(|h| h.node), Some(1));
        assert_eq!(note, Some(Unmoved::AddressTaken { named: 0, at: 1 }));
    }

    #[test]
    fn a_box_at_a_moved_machines_old_address_is_not_that_machine() {
        let hand = [node("10.0.0.5:9100")];
        let k = known(&hand, &[Some(X)]);
        let mut moved = at("10.0.0.50:9100");
        moved.id = Some(X);
        let mut newcomer = at("10.0.0.5:9100");
        newcomer.id = Some(Y);
        let (hits, notes) = assign(&k, &[Some(newcomer), Some(moved)]);
        assert_eq!(hits[0], None, "the box that took the old address is new");
        assert_eq!(
            hits[1].map(|h| (h.node, h.by)),
            Some((0, MatchedBy::NodeId))
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn an_id_two_machines_prove_moves_nothing_and_is_reported() {
        let hand = [node("10.0.0.5:9100")];
        let k = known(&hand, &[Some(X)]);
        let mut a = at("10.0.0.50:9100");
        a.id = Some(X);
        let mut b = at("10.0.0.51:9100");
        b.id = Some(X);
        let (hits, notes) = assign(&k, &[Some(a), Some(b)]);
        assert_eq!(hits, vec![None, None]);
        assert_eq!(
            notes,
            vec![Unmoved::Contested {
                named: 0,
                claims: vec![0, 1]
            }]
        );
    }

    #[test]
    fn a_cloned_id_at_the_nodes_own_address_keeps_that_machine_the_node() {
        let hand = [node("10.0.0.5:9100")];
        let k = known(&hand, &[Some(X)]);
        let mut home = at("10.0.0.5:9100");
        home.id = Some(X);
        let mut clone = at("10.0.0.51:9100");
        clone.id = Some(X);
        let (hits, notes) = assign(&k, &[Some(home), Some(clone)]);
        assert_eq!(hits[0].map(|h| (h.node, h.by)), Some((0, MatchedBy::Addr)));
        assert_eq!(hits[1], None);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_node_reached_by_a_chosen_alias_or_a_machine_reached_over_ssh_is_never_moved() {
        let mut aliased = node("10.0.0.5:9100");
        aliased.ssh = Some("gpu-a".into());
        let hand = [aliased];
        let k = known(&hand, &[Some(X)]);
        let mut c = at("10.0.0.50:9100");
        c.id = Some(X);
        assert_eq!(recognise(&k, &c, |_| false).0, None);
        let plain = [node("10.0.0.5:9100")];
        let k = known(&plain, &[Some(X)]);
        c.over_ssh = true;
        assert_eq!(recognise(&k, &c, |_| false).0, None);
    }

    #[test]
    fn an_unproven_id_is_never_read_and_a_keyed_run_wants_a_signature() {
        assert!(!proves_id(Evidence::Txt, false));
        assert!(proves_id(Evidence::Handshake, false));
        assert!(!proves_id(Evidence::Handshake, true));
        assert!(proves_id(Evidence::Authenticated, true));
    }
}
