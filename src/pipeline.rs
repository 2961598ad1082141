//! **The one pipeline** — sightings from every source become `[[node]]`
//! entries here, and only here: coalesce sightings of the same machine,
//! choose its device ([`crate::select::best_device`]), build its node config,
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
//! gets the one [`crate::prefer`]'s rule picks.

use crate::addr::NodeAddr;
use crate::config::{DevicePolicy, DiscoverSection, NodeConfig};
use crate::prefer::{link_speed, preferred, AddrCandidate};
use crate::report::{AddedNode, Clash, Duplicate, Moved, Report, SkippedDevice, Unheard};
use crate::select::best_device;
use crate::sighting::{Concern, Discovery, Evidence, Problem, Sighting, Source};
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The settings of `[discover]` that shape discovered nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeDefaults {
    /// Checkpoint dir for discovered nodes (falls back to what the agent says).
    pub ckpt_dir: Option<String>,
    /// Device override.
    pub device: Option<crate::config::DeviceList>,
    /// Precision for discovered nodes.
    pub precision: Option<crate::config::Precision>,
    /// One device or every accelerator of the chosen kind.
    pub device_policy: crate::config::DevicePolicy,
}

impl From<&DiscoverSection> for NodeDefaults {
    fn from(d: &DiscoverSection) -> Self {
        NodeDefaults {
            ckpt_dir: d.ckpt_dir.clone(),
            device: d.device.clone(),
            precision: d.precision,
            device_policy: d.device_policy,
        }
    }
}

/// The finished node list and its report.
#[derive(Debug, Clone)]
pub struct Expansion {
    /// Hand-written nodes first, unchanged, then the added ones.
    pub nodes: Vec<NodeConfig>,
    /// Provenance of each added node, in the same order as the tail of `nodes`.
    pub added: Vec<AddedNode>,
    /// What happened.
    pub report: Report,
}

/// One machine, possibly seen by several sources.
#[derive(Debug, Clone)]
struct Machine {
    sightings: Vec<Sighting>,
    /// Why it is left out, when it is one side of an id clash under the
    /// cluster key ([`settle_clashes`]).
    refused: Option<String>,
    /// The sighting whose address is written, when the address rule chose
    /// one ([`Machine::choose_addr`]).
    chosen: Option<usize>,
}

impl Machine {
    /// The sighting whose caps are believed: strongest evidence, then latest.
    fn best(&self) -> &Sighting {
        self.sightings
            .iter()
            .max_by_key(|s| (s.caps.is_some(), s.evidence, s.found_ms))
            .expect("a machine has at least one sighting")
    }

    fn ssh(&self) -> Option<&Sighting> {
        self.sightings.iter().find(|s| s.ssh.is_some())
    }

    /// The address to write: `alias:port` when SSH saw it (the runtime starts
    /// workers through that alias), else the address chosen by the preferred
    /// source (mDNS picks by interface; the scan knows only the IP it dialled).
    ///
    /// A machine seen at several IPs (one agent on two networks, or mDNS
    /// and the scan at two addresses) gets the one [`crate::prefer`]'s rule
    /// picks, which never depends on which answered first
    /// ([`Machine::choose_addr`]).
    fn addr_sighting(&self) -> &Sighting {
        self.ssh().unwrap_or_else(|| {
            if let Some(i) = self.chosen {
                return &self.sightings[i];
            }
            self.sightings
                .iter()
                .min_by_key(|s| (source_rank(s.source), s.found_ms))
                .expect("non-empty")
        })
    }

    /// Applies the address rule of [`crate::prefer::preferred`] to the
    /// sightings that have an IP: "shared link" is a link the mDNS browse
    /// listened on (`links`, this host's subnets), "in subnet" is a scan
    /// hit (the scan dials only the configured `subnet`), and the speed
    /// comes from [`crate::prefer::link_speed`].
    fn choose_addr(&mut self, links: &[ipnet::IpNet]) {
        let with_ip: Vec<(usize, IpAddr)> = self
            .sightings
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.ip.map(|ip| (i, ip)))
            .collect();
        let caps = self.best().caps.clone().unwrap_or_default();
        let cands: Vec<AddrCandidate> = with_ip
            .iter()
            .map(|&(i, ip)| AddrCandidate {
                ip,
                shared_link: links.iter().any(|n| n.contains(&ip)),
                in_subnet: self.sightings[i].source == Source::Subnet,
                speed_mbps: link_speed(&caps, ip),
            })
            .collect();
        self.chosen = preferred(&cands).map(|j| with_ip[j].0);
    }

    fn sources(&self) -> Vec<Source> {
        let set: BTreeSet<Source> = self.sightings.iter().map(|s| s.source).collect();
        set.into_iter().collect()
    }

    /// The addresses of its other sightings, besides `addr`.
    fn also_at(&self, addr: &str) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .sightings
            .iter()
            .map(|s| s.addr.as_str())
            .filter(|a| *a != addr)
            .collect();
        set.into_iter().map(str::to_string).collect()
    }

    fn first_found_ms(&self) -> u64 {
        self.sightings.iter().map(|s| s.found_ms).min().unwrap_or(0)
    }
}

fn source_rank(s: Source) -> u8 {
    match s {
        Source::Ssh => 0,
        Source::Mdns => 1,
        // What the agent registered in DNS: right for a wide-area
        // coordinator, but on the LAN mDNS picks by interface.
        Source::Dns => 2,
        Source::Subnet => 3,
    }
}

/// Whether two sightings are the same machine, or two machines claiming one
/// id (a clash), or unrelated.
#[derive(Debug, PartialEq)]
enum Kinship {
    Same,
    Clash,
    Unrelated,
}

/// The rule, for two sightings with one node id and port at different
/// endpoints (see docs/security.md, "Same id at two endpoints"):
///
/// - an SSH sighting and another that report the same host name are the
///   same box reached two ways (an ssh alias and an IP): SSH vouches for it;
/// - two *announced* sightings (mDNS or DNS-SD) under different instance
///   names are two agents: a real agent announces one instance, under one
///   name, on every network it is on (its addresses there are addresses of
///   that one instance, and the source picks one), and registers the same
///   name in DNS;
/// - otherwise (an mDNS sighting and a scan hit at another IP, or two scan
///   hits) they are one agent on two networks when they report the same
///   host name and, if both caps came fresh from a handshake, the same
///   caps, apart from what changes from one probe to the next (free RAM,
///   free disk, read speed) and the address. Two separately started agents
///   that copy each other's caps exactly look the same here: with a shared
///   key, nothing but a per-node key could tell them apart.
fn kinship(a: &Sighting, b: &Sighting) -> Kinship {
    let same_endpoint = a.addr == b.addr
        || matches!((a.ip, b.ip), (Some(x), Some(y)) if x == y && a.port == b.port);
    if same_endpoint {
        return Kinship::Same;
    }
    match (a.id(), b.id()) {
        (Some(x), Some(y)) if x == y && a.port == b.port => {
            let host = |s: &Sighting| {
                s.caps
                    .as_ref()
                    .map(|c| c.hostname.clone())
                    .unwrap_or_default()
            };
            let (ha, hb) = (host(a), host(b));
            let ssh_involved = a.source == Source::Ssh || b.source == Source::Ssh;
            if ssh_involved {
                return if ha == hb {
                    Kinship::Same
                } else {
                    Kinship::Clash
                };
            }
            let announced = |s: &Sighting| matches!(s.source, Source::Mdns | Source::Dns);
            if announced(a) && announced(b) && !a.host.eq_ignore_ascii_case(&b.host) {
                return Kinship::Clash;
            }
            if ha.is_empty() || ha != hb {
                return Kinship::Clash;
            }
            let fresh = a.evidence.is_fresh() && b.evidence.is_fresh();
            match (&a.caps, &b.caps) {
                (Some(ca), Some(cb)) if fresh && stable(ca) != stable(cb) => Kinship::Clash,
                _ => Kinship::Same,
            }
        }
        _ => Kinship::Unrelated,
    }
}

/// Caps without what differs between two handshakes of one agent a few
/// seconds apart (a re-probe in between) or at two of its addresses.
fn stable(c: &NodeCaps) -> NodeCaps {
    NodeCaps {
        addr: String::new(),
        ram_avail: 0,
        disk_free: 0,
        io_mbps: 0.0,
        ..c.clone()
    }
}

/// Whether two sightings are the same machine, by the rule `expand` merges
/// with (same endpoint, or same node id and port from one host name); two
/// boxes claiming one id are not. `watch` uses it to keep one member per
/// machine.
pub fn same_machine(a: &Sighting, b: &Sighting) -> bool {
    kinship(a, b) == Kinship::Same
}

/// Groups sightings into machines (union-find over "same machine"), and
/// collects id clashes: each id with the machines (indices into the first
/// list) claiming it.
fn coalesce(sightings: Vec<Sighting>) -> (Vec<Machine>, Vec<(String, Vec<usize>)>) {
    let n = sightings.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut clash_pairs = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            match kinship(&sightings[i], &sightings[j]) {
                Kinship::Same => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                Kinship::Clash => clash_pairs.push((i, j)),
                Kinship::Unrelated => {}
            }
        }
    }
    let mut groups: Vec<(usize, Machine)> = Vec::new();
    let mut root_of = vec![0; n];
    for (i, s) in sightings.into_iter().enumerate() {
        let r = find(&mut parent, i);
        root_of[i] = r;
        match groups.iter_mut().find(|(root, _)| *root == r) {
            Some((_, m)) => m.sightings.push(s),
            None => groups.push((
                r,
                Machine {
                    sightings: vec![s],
                    refused: None,
                    chosen: None,
                },
            )),
        }
    }
    // Clashes by id, each with the machines (indices into `groups`) that
    // claim it.
    let mut clashes: Vec<(String, Vec<usize>)> = Vec::new();
    let index_of = |r: usize| groups.iter().position(|(g, _)| *g == r);
    for (i, j) in clash_pairs {
        if root_of[i] == root_of[j] {
            continue;
        }
        let (Some(gi), Some(gj)) = (index_of(root_of[i]), index_of(root_of[j])) else {
            continue;
        };
        let id = groups[gi].1.best().id().unwrap_or_default().to_string();
        match clashes.iter_mut().find(|(c, _)| *c == id) {
            Some((_, ms)) => {
                for g in [gi, gj] {
                    if !ms.contains(&g) {
                        ms.push(g);
                    }
                }
            }
            None => clashes.push((id, vec![gi, gj])),
        }
    }
    (groups.into_iter().map(|(_, m)| m).collect(), clashes)
}

/// Turns the id clashes into report entries. Under the cluster key
/// neither side of a clash is silently preferred: a claimant already in the
/// file (matched by its address, ssh alias or IP and port, not merely by a
/// host name any member could report) keeps its place, and every other
/// claimant is marked refused, with the reason naming the other endpoints.
/// Without a key an id proves nothing, and each claimant stays its own node.
fn settle_clashes(
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

/// How a hand-written node matches a discovered machine, if it does.
/// A running agent on a link the mDNS browse listened on that another
/// source found but mDNS did not hear: multicast from it does not reach
/// this host, which the user should know even though the node was found.
fn unheard_by_mdns(m: &Machine, links: &[ipnet::IpNet]) -> Option<Unheard> {
    if links.is_empty() || m.sightings.iter().any(|s| s.source == Source::Mdns) {
        return None;
    }
    // Only a handshake proves an agent is running there (an SSH probe runs
    // `rlx-agent --probe` whether or not one runs).
    let s = m.sightings.iter().find(|s| {
        matches!(s.evidence, Evidence::Handshake | Evidence::Authenticated)
            && s.ip.is_some_and(|ip| links.iter().any(|n| n.contains(&ip)))
    })?;
    let mut found_by: Vec<Source> = m.sightings.iter().map(|s| s.source).collect();
    found_by.dedup();
    Some(Unheard {
        addr: s.addr.clone(),
        host: s.host.clone(),
        found_by,
    })
}

/// The `addr` of the file's node whose endpoint a stranger's refused
/// announcement names, if any: then it is not a stranger's problem but an
/// agent of the file that failed (or an impostor of one).
fn claimed_node<'a>(hand: &'a [NodeConfig], p: &Problem) -> Option<&'a str> {
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

fn hand_match(hand: &NodeConfig, m: &Machine) -> Option<&'static str> {
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
fn disagreement(hand: &NodeConfig, caps: &NodeCaps) -> Option<String> {
    let usable: BTreeSet<_> = caps
        .devices
        .iter()
        .filter(|d| d.available)
        .filter_map(|d| d.parsed())
        .collect();
    let missing: Vec<String> = hand
        .device
        .kinds()
        .filter(|k| k.is_accelerator() && !usable.contains(k))
        .map(|k| k.to_string())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let found = best_device(caps).device.as_str();
    Some(format!(
        "hand-written [[node]] {} says device = \"{}\", but the machine reports no usable {} \
         (discovery would choose \"{found}\"); the node was kept as written",
        hand.addr,
        hand.device,
        missing.join(", ")
    ))
}

/// The agent's facts about the link holding the node's chosen address,
/// when `addr` is an IP (not an ssh alias) the agent listed.
fn chosen_link(caps: &NodeCaps, addr: &str) -> Option<rlx_proto::caps::LinkInfo> {
    let ip = addr
        .parse::<std::net::SocketAddr>()
        .map(|s| s.ip())
        .or_else(|_| addr.parse::<IpAddr>())
        .ok()?;
    caps.link_for(&ip.to_canonical()).cloned()
}

/// What the file's comments say about one of its nodes (read by
/// [`crate::provenance`]; see [`crate::render::file_nodes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMark {
    /// The node id its comments name.
    pub id: Option<String>,
    /// True when it carries the `# found by` comment (rlx-discover
    /// appended it, so a move may rewrite its `addr`).
    pub discovered: bool,
}

/// Runs the pipeline: hand-written nodes plus what the sources found.
pub fn expand(hand: &[NodeConfig], defaults: &NodeDefaults, found: Discovery) -> Expansion {
    expand_file(hand, &[], defaults, found)
}

/// For each machine, the file node (index into `hand`) it is a move of:
/// a machine no node of the file matched by address, alias or name, whose
/// fresh caps (a handshake or SSH; with a cluster key in play, an
/// authenticated handshake, since any member could claim an id otherwise)
/// carry the node id that `marks` names for a node no machine matched.
/// An id two machines claim moves nothing (a warning says so), and nodes
/// reached through an ssh alias are matched by the alias, not moved.
fn moves(
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
                    && hand.get(i).is_some_and(|h| h.ssh.is_none())
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
                "[[node]] {} names node id {} in its comment, and {} all answer with that id:                  the node was not moved to any of them (a cloned disk may have carried the id                  along; give each machine its own id with rlx-agent --node-id)",
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

/// [`expand`] for the nodes of a file, with what their comments say
/// (`marks[i]` for `hand[i]`; missing entries mean nothing known): a
/// machine found at a new address whose node id a node names is that
/// node, moved ([`crate::report::Moved`]), not a new one. A discovered
/// node gets the new `addr`; a hand-written one is left as it is and the
/// move is reported.
pub fn expand_file(
    hand: &[NodeConfig],
    marks: &[FileMark],
    defaults: &NodeDefaults,
    found: Discovery,
) -> Expansion {
    let mut failed = found.problems;
    for p in &mut failed {
        if let Some(h) = claimed_node(hand, p) {
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
    report.clashes = settle_clashes(hand, &mut machines, clashes);
    machines.sort_by_key(|m| (m.first_found_ms(), m.addr_sighting().addr.clone()));

    let hits: Vec<Option<(usize, &'static str)>> = machines
        .iter()
        .map(|m| {
            m.refused.as_ref().map_or_else(
                || {
                    hand.iter()
                        .enumerate()
                        .find_map(|(i, h)| hand_match(h, m).map(|w| (i, w)))
                },
                |_| None,
            )
        })
        .collect();
    let moved_to = moves(hand, marks, &machines, &hits, &mut report.warnings);

    let mut nodes: Vec<NodeConfig> = hand.to_vec();
    let mut added = Vec::new();
    for (k, m) in machines.into_iter().enumerate() {
        let addr_s = m.addr_sighting();
        let addr = addr_s.addr.clone();
        if let Some(why) = &m.refused {
            report.failed.push(
                Problem::new(addr_s.source, addr_s.host.clone(), why.clone())
                    .claiming(Some(addr.clone()), addr_s.id().map(str::to_string)),
            );
            continue;
        }
        if let Some(u) = unheard_by_mdns(&m, &mdns_links) {
            report.unheard_by_mdns.push(u);
        }
        if let Some(i) = moved_to[k] {
            let discovered = marks[i].discovered;
            report.moved.push(Moved {
                id: marks[i].id.clone().unwrap_or_default(),
                from: hand[i].addr.clone(),
                to: addr.clone(),
                hostname: m
                    .best()
                    .caps
                    .as_ref()
                    .map(|c| c.hostname.clone())
                    .unwrap_or_default(),
                origin: if discovered {
                    "discovered"
                } else {
                    "hand-written"
                },
                rewritten: discovered,
            });
            if discovered {
                nodes[i].addr = addr;
            }
            continue;
        }
        if let Some((h, why)) = hits[k].map(|(i, w)| (&hand[i], w)) {
            if let Some(caps) = &m.best().caps {
                report.warnings.extend(disagreement(h, caps));
            }
            report.duplicates.push(Duplicate {
                source: addr_s.source,
                host: addr_s.host.clone(),
                addr: addr.clone(),
                same_as: h.addr.clone(),
                matched_by: why.into(),
            });
            continue;
        }
        // Extra sightings of this machine from other sources are reported as
        // folded in, so the user sees that SSH and mDNS agreed.
        for s in &m.sightings {
            if s.source != addr_s.source {
                report.duplicates.push(Duplicate {
                    source: s.source,
                    host: s.host.clone(),
                    addr: s.addr.clone(),
                    same_as: addr.clone(),
                    matched_by: if s.id().is_some() && s.addr != addr {
                        "id"
                    } else {
                        "addr"
                    }
                    .into(),
                });
            }
        }
        let best = m.best();
        let mut device_mems = Vec::new();
        let (device, mem_bytes) = match (&defaults.device, &best.caps) {
            (Some(forced), caps) => (forced.clone(), caps.as_ref().map_or(0, |c| c.ram_total)),
            (None, Some(caps)) => {
                let sel = best_device(caps);
                for sk in &sel.skipped {
                    report.skipped_devices.push(SkippedDevice {
                        addr: addr.clone(),
                        device: sk.label.clone(),
                        name: sk.name.clone(),
                        reason: sk.reason,
                        why: sk.to_string(),
                    });
                }
                if sel.of_kind.len() > 1 {
                    device_mems = sel.mems();
                }
                let device = match defaults.device_policy {
                    DevicePolicy::Best => sel.device.clone(),
                    DevicePolicy::All => sel.all_of_kind(),
                };
                (device, sel.mem_bytes)
            }
            (None, None) => {
                report.warnings.push(format!(
                    "{addr} ({}) accepted a connection on the worker port but no rlx-agent \
                     answered beside it, so nothing vouched for it (it may not be an RLX worker) \
                     and it was added as a CPU node with default settings; run rlx-agent there \
                     to have it vouched for and its devices found",
                    crate::report::untrusted(&best.host)
                ));
                (Default::default(), 0)
            }
        };
        let ckpt_dir = defaults
            .ckpt_dir
            .clone()
            .or_else(|| best.caps.as_ref().and_then(|c| c.ckpt_dir.clone()))
            .unwrap_or_default();
        let mut node = NodeConfig::new(addr.clone());
        node.ssh = m.ssh().and_then(|s| s.ssh.clone());
        node.ckpt_dir = ckpt_dir;
        node.device = device.clone();
        node.precision = defaults.precision.unwrap_or_default();
        let caps = best.caps.clone().unwrap_or_default();
        added.push(AddedNode {
            addr: addr.clone(),
            host: addr_s.host.clone(),
            hostname: caps.hostname.clone(),
            id: caps.id.clone(),
            sources: m.sources(),
            evidence: best.evidence,
            device: device.as_str(),
            mem_bytes,
            cores: caps.cores,
            cluster: caps.cluster.clone(),
            heard_on: m.sightings.iter().find_map(|s| s.heard_on.clone()),
            found_ms: m.first_found_ms(),
            also_at: m.also_at(&addr),
            device_mems,
            accelerators: caps
                .devices
                .iter()
                .filter(|d| d.parsed() != Some(rlx_proto::caps::Device::Cpu))
                .cloned()
                .collect(),
            link: chosen_link(&caps, &addr),
            measured_link: None,
            agent: addr_s.agent_addr(),
            worker_listening: caps.worker_listening,
        });
        report.warnings.extend(worker::warnings(
            &addr,
            &best.host,
            addr_s.port,
            &caps,
            &m.sightings,
        ));
        nodes.push(node);
    }
    report.added = added.clone();
    Expansion {
        nodes,
        added,
        report,
    }
}

mod worker;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod device_tests;
