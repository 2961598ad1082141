//! **Which sightings are one machine** — sightings of every source grouped
//! into machines (same endpoint, or the same node id and port under the
//! rules of docs/security.md, "Same id at two endpoints"), the id clashes
//! between machines, and each machine's address to write.

use super::prefer::{link_speed, preferred, AddrCandidate};
use super::report::{Duplicate, Unheard};
use crate::addr::NodeAddr;
use crate::sighting::{Evidence, Pinning, Sighting, Source};
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// One machine, possibly seen by several sources.
#[derive(Debug, Clone)]
pub(super) struct Machine {
    pub(super) sightings: Vec<Sighting>,
    /// Why it is left out, when it is one side of an id clash under the
    /// cluster key ([`settle_clashes`]).
    pub(super) refused: Option<String>,
    /// The sighting whose address is written, when the address rule chose
    /// one ([`Machine::choose_addr`]).
    chosen: Option<usize>,
}

impl Machine {
    /// A machine seen once.
    pub(super) fn of(s: Sighting) -> Machine {
        Machine {
            sightings: vec![s],
            refused: None,
            chosen: None,
        }
    }

    /// The sighting whose caps are believed: strongest evidence, then latest.
    pub(super) fn best(&self) -> &Sighting {
        self.sightings
            .iter()
            .max_by_key(|s| (s.caps.is_some(), s.evidence, s.found_ms))
            .expect("a machine has at least one sighting")
    }

    pub(super) fn ssh(&self) -> Option<&Sighting> {
        self.sightings.iter().find(|s| s.ssh.is_some())
    }

    /// The address to write: `alias:port` when SSH saw it (the runtime starts
    /// workers through that alias), else the address chosen by the preferred
    /// source (mDNS picks by interface; the scan knows only the IP it dialled).
    ///
    /// A machine seen at several IPs (one agent on two networks, or mDNS
    /// and the scan at two addresses) gets the one [`crate::pipeline::prefer`]'s rule
    /// picks, which never depends on which answered first
    /// ([`Machine::choose_addr`]).
    pub(super) fn addr_sighting(&self) -> &Sighting {
        self.ssh().unwrap_or_else(|| {
            if let Some(i) = self.chosen {
                return &self.sightings[i];
            }
            self.sightings
                .iter()
                .min_by_key(|s| (s.source.address_rank(), s.found_ms))
                .expect("non-empty")
        })
    }

    /// Applies the address rule of [`crate::pipeline::prefer::preferred`] to the
    /// sightings that have an IP: "shared link" is a link the mDNS browse
    /// listened on (`links`, this host's subnets), "in subnet" is a scan
    /// hit (the scan dials only the configured `subnet`), and the speed
    /// comes from [`crate::pipeline::prefer::link_speed`].
    pub(super) fn choose_addr(&mut self, links: &[ipnet::IpNet]) {
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

    pub(super) fn sources(&self) -> Vec<Source> {
        let set: BTreeSet<Source> = self.sightings.iter().map(|s| s.source).collect();
        set.into_iter().collect()
    }

    /// The addresses of its other sightings, besides `addr`.
    pub(super) fn also_at(&self, addr: &str) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .sightings
            .iter()
            .map(|s| s.addr.as_str())
            .filter(|a| *a != addr)
            .collect();
        set.into_iter().map(str::to_string).collect()
    }

    /// Its sightings by other sources than the one whose address is
    /// written, as duplicates folded into it, so the user sees that SSH
    /// and mDNS agreed.
    pub(super) fn folded(&self) -> Vec<Duplicate> {
        let addr_s = self.addr_sighting();
        let addr = &addr_s.addr;
        self.sightings
            .iter()
            .filter(|s| s.source != addr_s.source)
            .map(|s| Duplicate {
                source: s.source,
                host: s.host.clone(),
                addr: s.addr.clone(),
                same_as: addr.clone(),
                node: None,
                matched_by: if s.id().is_some() && s.addr != *addr {
                    "id"
                } else {
                    "addr"
                }
                .into(),
            })
            .collect()
    }

    pub(super) fn first_found_ms(&self) -> u64 {
        self.sightings.iter().map(|s| s.found_ms).min().unwrap_or(0)
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
/// - two sightings whose handshakes proved one node key with one
///   incarnation are one running agent, under any instance names
///   ([`one_running_agent`]);
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
        || matches!((a.ip, b.ip), (Some(x), Some(y))
            if x == y && a.port == b.port && scope(a) == scope(b));
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
            if one_running_agent(a, b) {
                return Kinship::Same;
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

/// Whether both sightings are one running agent: each endpoint's handshake
/// proved the same node key (a signature over this coordinator's fresh
/// challenge, which only the holder of the key's private half can make)
/// and reported the same incarnation (random at each start). That is one
/// process answering at two of its addresses, whatever instance names
/// point there: the agent's own IPv6 and IPv4 address (every answer
/// carries both, RFC 6762 §6.2), one of which a stranger's phantom
/// instance names. A clone of the agent's disk has the key but not the
/// incarnation, and stays a clash; a stranger replaying a member's caps
/// proves no key.
fn one_running_agent(a: &Sighting, b: &Sighting) -> bool {
    let proved = |s: &Sighting| {
        s.evidence.is_fresh() && matches!(s.identity, Pinning::New | Pinning::Pinned)
    };
    let (Some(ca), Some(cb)) = (&a.caps, &b.caps) else {
        return false;
    };
    proved(a)
        && proved(b)
        && ca.node_key.is_some()
        && ca.node_key == cb.node_key
        && ca.incarnation.is_some()
        && ca.incarnation == cb.incarnation
}

/// The link a link-local address is on (`fe80::1%eth0`: `eth0`), from the
/// address as written or the interface it was heard on: the same
/// link-local address on two links is two machines. Routable addresses
/// need none (`None` for both).
fn scope(s: &Sighting) -> Option<&str> {
    let link_local = match s.ip? {
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
        IpAddr::V4(v4) => v4.is_link_local(),
    };
    if !link_local {
        return None;
    }
    NodeAddr::split(&s.addr)
        .0
        .split_once('%')
        .map(|(_, scope)| scope)
        .or(s.heard_on.as_deref())
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
pub(crate) fn same_machine(a: &Sighting, b: &Sighting) -> bool {
    kinship(a, b) == Kinship::Same
}

/// Groups sightings into machines (union-find over "same machine"), and
/// collects id clashes: each id with the machines (indices into the first
/// list) claiming it.
pub(super) fn coalesce(sightings: Vec<Sighting>) -> (Vec<Machine>, Vec<(String, Vec<usize>)>) {
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
            None => groups.push((r, Machine::of(s))),
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

/// A running agent on a link the mDNS browse listened on that another
/// source found but mDNS did not hear: multicast from it does not reach
/// this host, which the user should know even though the node was found.
pub(super) fn unheard_by_mdns(m: &Machine, links: &[ipnet::IpNet]) -> Option<Unheard> {
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
