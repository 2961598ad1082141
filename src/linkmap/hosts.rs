//! **`hosts.json` from the map** — the RLX runtime's process-group file
//! (`rlx_distributed::config::Hostfile`): `{"backend": .., "hosts":
//! ["ip:port", ..]}`, one listen address per rank, in rank order.
//!
//! What the runtime does with it decides the rules here. Its transport
//! (rlx-driver's `NetTransport`, under both `tcp` and `thunderbolt`) is a
//! *full mesh*: rank `r` binds `hosts[r]` and dials `hosts[p]` of every
//! higher rank `p`. So
//!
//! - `hosts[r]` must be an address of rank `r`'s box that **every lower
//!   rank** can reach, not only its ring neighbours: one lower rank that
//!   cannot connect stalls the whole group at start-up. Only measured
//!   paths count as reachable.
//! - the connection between ranks `q < r`, and with it every byte of a
//!   ring hop between them, goes to `hosts[r]`. Rank `r`'s address thus
//!   carries its hop to its lower ring neighbour `r - 1`, and for the last
//!   rank also the wrap-around hop to rank 0; among the addresses every
//!   lower rank reaches, it is the one whose slowest carried hop is
//!   fastest. Rank 0 is dialled by nobody: its address is the one fastest
//!   to both its ring neighbours among those both reach.
//! - a direct cable (a Thunderbolt link that only its two boxes reach)
//!   can carry only a hop whose higher rank has no other lower rank: the
//!   hop between ranks 0 and 1, or the only hop of a two-box world. Any
//!   other hop's address must be reached by a third box, which the cable's
//!   is not. A Thunderbolt network every box reaches (a bridge) has no
//!   such limit.
//!
//! The backend is `thunderbolt` only when every ring hop runs over a
//! path whose two ends are Thunderbolt interfaces; else `tcp`, the
//! portable transport (over a Thunderbolt Bridge too), with a note why.
//!
//! Ranks follow the cluster file's node order unless the ring order is
//! asked for ([`RingOrder::Fastest`], see [`ring`]), which maximises the
//! slowest hop and says by how much it improved.

mod ring;

use super::map::{LinkMap, PathLink};
use crate::config::DEFAULT_HOSTS_PORT;
use std::net::{IpAddr, SocketAddr};

/// How the ranks are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingOrder {
    /// Rank `r` is the cluster file's node `r`, as a hand-written
    /// `hosts.json` would have it.
    #[default]
    FileOrder,
    /// The ring order whose slowest hop is fastest (rank 0 stays the
    /// file's first node).
    Fastest,
}

/// What [`hosts_json`] is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostsOptions {
    /// The port every rank listens on (`[discover] hosts_port`).
    pub port: u16,
    /// The rank order.
    pub ring: RingOrder,
}

impl Default for HostsOptions {
    fn default() -> Self {
        HostsOptions {
            port: DEFAULT_HOSTS_PORT,
            ring: RingOrder::FileOrder,
        }
    }
}

/// One ring hop: the connection between two ring neighbours.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// The two ranks, in ring order (the last hop is `(n - 1, 0)`).
    pub ranks: (usize, usize),
    /// The address each of the two uses for it, in the order of `ranks`:
    /// the listening rank's is its `hosts` entry, the dialling rank's the
    /// one its measured path to that entry left from.
    pub addrs: (IpAddr, IpAddr),
    /// The path's link kind (`thunderbolt`, `ethernet`, ...).
    pub kind: String,
    /// What the path carries both ways, Mbit/s.
    pub both_ways_mbps: f64,
}

/// The process-group file, with how it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct HostsFile {
    /// `thunderbolt` or `tcp`.
    pub backend: String,
    /// `ip:port` per rank (IPv6 as `[v6]:port`).
    pub hosts: Vec<String>,
    /// The box (index into the map's boxes) of each rank.
    pub ranks: Vec<usize>,
    /// The ring hops, rank 0 to 1 first; none for one rank, one for two
    /// (both directions are one connection).
    pub hops: Vec<Hop>,
    /// Why: the order chosen, the slowest hop before and after, why the
    /// backend is what it is.
    pub notes: Vec<String>,
}

impl HostsFile {
    /// The file itself: exactly the runtime's two fields, pretty-printed.
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({ "backend": self.backend, "hosts": self.hosts });
        let mut s = serde_json::to_string_pretty(&v).expect("strings serialize");
        s.push('\n');
        s
    }

    /// The slowest ring hop, Mbit/s; `None` for one rank.
    pub fn slowest_hop_mbps(&self) -> Option<f64> {
        self.hops
            .iter()
            .map(|h| h.both_ways_mbps)
            .min_by(f64::total_cmp)
    }
}

/// Why no `hosts.json` can be written; each says what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostsError {
    /// The map has no boxes.
    #[error("the link map has no boxes: measure a cluster file with nodes in it")]
    NoBoxes,
    /// Port 0 cannot be dialled.
    #[error("hosts port 0 cannot be dialled: set [discover] hosts_port to 1-65535")]
    PortZero,
    /// Two boxes with no measured path: every pair of ranks connects.
    #[error(
        "no measured path between {a} and {b}{why}: the runtime's process group connects \
         every pair of ranks, so no hosts.json can include both. Measure the map again, \
         and if it fails again check the link between them (cable, address, firewall on \
         the agent port), or leave one of them out of the cluster file"
    )]
    NoPath {
        /// One box, `hostname (addr)`.
        a: String,
        /// The other.
        b: String,
        /// `" (reason; reason)"` from the map's failed attempts, or empty.
        why: String,
    },
    /// No address of a box that every lower rank reached.
    #[error(
        "rank {rank}, {name}, has no address that every lower rank reached ({dialers}): \
         each of them dials it at start-up. Put the boxes on one network they all share, \
         or measure again if a path failed by chance"
    )]
    NoCommonAddress {
        /// The rank.
        rank: usize,
        /// Its box, `hostname (addr)`.
        name: String,
        /// The lower ranks' boxes.
        dialers: String,
    },
}

/// `hostname (addr)`, how a box is named in notes and errors.
fn name(map: &LinkMap, b: usize) -> String {
    let x = &map.boxes[b];
    format!("{} ({})", x.hostname, x.addr)
}

/// The fastest measured path between boxes `i` and `j` on which `j` uses
/// `at` (any address of `j` when `at` is `None`), with `i`'s address.
fn fastest_path(
    map: &LinkMap,
    i: usize,
    j: usize,
    at: Option<IpAddr>,
) -> Option<(IpAddr, &PathLink)> {
    let pair = map.pair(i, j)?;
    pair.paths
        .iter()
        .filter(|p| at.is_none_or(|a| map.path_from(j, i, p).0 == a))
        .max_by(|x, y| x.both_ways_mbps().total_cmp(&y.both_ways_mbps()))
        .map(|p| (map.path_from(i, j, p).0, p))
}

/// An address the runtime can be told: not an IPv6 link-local one, which
/// means nothing without its interface (`%en0`), which `ip:port` cannot
/// carry.
fn dialable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => true,
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) != 0xfe80,
    }
}

/// Box `b`'s addresses that measured paths used, in the order met.
fn addresses(map: &LinkMap, b: usize) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for j in (0..map.boxes.len()).filter(|&j| j != b) {
        for p in map.pair(b, j).map(|p| p.paths.as_slice()).unwrap_or(&[]) {
            let ip = map.path_from(b, j, p).0;
            if dialable(ip) && !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// A ring order's addresses and hops.
struct Plan {
    addrs: Vec<IpAddr>,
    hops: Vec<Hop>,
}

impl Plan {
    fn slowest(&self) -> f64 {
        self.hops
            .iter()
            .map(|h| h.both_ways_mbps)
            .fold(f64::INFINITY, f64::min)
    }
}

/// Addresses and hops for the ring `order` (box per rank, n >= 2).
fn plan(map: &LinkMap, order: &[usize]) -> Result<Plan, HostsError> {
    let n = order.len();
    let mut addrs = Vec::with_capacity(n);
    for r in 0..n {
        let b = order[r];
        // Who must reach this address, and which hops it carries.
        let (must_reach, carries): (Vec<usize>, Vec<usize>) = if r == 0 {
            let both = vec![order[1], order[n - 1]];
            (both.clone(), both)
        } else if r == n - 1 && n > 2 {
            (order[..r].to_vec(), vec![order[r - 1], order[0]])
        } else {
            (order[..r].to_vec(), vec![order[r - 1]])
        };
        let best = addresses(map, b)
            .into_iter()
            .filter(|&ip| {
                must_reach
                    .iter()
                    .all(|&q| fastest_path(map, q, b, Some(ip)).is_some())
            })
            .map(|ip| {
                let slowest = carries
                    .iter()
                    .filter_map(|&q| fastest_path(map, q, b, Some(ip)))
                    .map(|(_, p)| p.both_ways_mbps())
                    .fold(f64::INFINITY, f64::min);
                (ip, slowest)
            })
            // The first met wins a tie: max_by keeps the last, so reverse.
            .rev()
            .max_by(|x, y| x.1.total_cmp(&y.1));
        match best {
            Some((ip, _)) => addrs.push(ip),
            None => {
                return Err(HostsError::NoCommonAddress {
                    rank: r,
                    name: name(map, b),
                    dialers: must_reach
                        .iter()
                        .map(|&q| name(map, q))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }
    }
    // Hop (r, r+1) runs to hosts[r+1]; the wrap hop (n-1, 0) to hosts[n-1].
    let hop_count = if n == 2 { 1 } else { n };
    let mut hops = Vec::with_capacity(hop_count);
    for r in 0..hop_count {
        let s = (r + 1) % n;
        let (low, high) = if s == 0 { (s, r) } else { (r, s) };
        let (low_ip, p) = fastest_path(map, order[low], order[high], Some(addrs[high]))
            .expect("the address was chosen among those every lower rank reaches");
        let addrs_of = |k: usize| if k == high { addrs[high] } else { low_ip };
        hops.push(Hop {
            ranks: (r, s),
            addrs: (addrs_of(r), addrs_of(s)),
            kind: p.kind.clone(),
            both_ways_mbps: p.both_ways_mbps(),
        });
    }
    Ok(Plan { addrs, hops })
}

/// The host part of a cluster-file `addr` (`host:port`, `[v6]:port`).
fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((h, _)) if !h.contains(':') => h,
        _ => addr,
    }
}

/// `host:port`, bracketing an IPv6 host as `to_socket_addrs` needs.
fn join(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port).to_string(),
        Err(_) => format!("{host}:{port}"),
    }
}

fn mbps(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} Mbit/s")
    } else {
        format!("{x:.1} Mbit/s")
    }
}

/// The slowest hop of a plan, in words.
fn slowest_words(map: &LinkMap, order: &[usize], plan: &Plan) -> String {
    let h = plan
        .hops
        .iter()
        .min_by(|x, y| x.both_ways_mbps.total_cmp(&y.both_ways_mbps))
        .expect("n >= 2 has a hop");
    format!(
        "{} ({}, between {} and {})",
        mbps(h.both_ways_mbps),
        h.kind,
        name(map, order[h.ranks.0]),
        name(map, order[h.ranks.1]),
    )
}

/// The runtime's `hosts.json` for the boxes of `map`. The rules, and why
/// (the runtime's transport is a full mesh, lower ranks dialling higher):
/// docs/guide.md, "`hosts.json` for the process group". Fails when two
/// boxes have no measured path, or a box has no address all its lower
/// ranks reached.
pub fn hosts_json(map: &LinkMap, opts: &HostsOptions) -> Result<HostsFile, HostsError> {
    let n = map.boxes.len();
    if n == 0 {
        return Err(HostsError::NoBoxes);
    }
    if opts.port == 0 {
        return Err(HostsError::PortZero);
    }
    if n == 1 {
        return Ok(HostsFile {
            backend: "tcp".into(),
            hosts: vec![join(host_of(&map.boxes[0].addr), opts.port)],
            ranks: vec![0],
            hops: Vec::new(),
            notes: vec![
                "one rank: no ring and no links; the box's cluster-file address is its own".into(),
            ],
        });
    }
    for a in 0..n {
        for b in a + 1..n {
            let pair = map.pair(a, b);
            if pair.is_none_or(|p| p.paths.is_empty()) {
                let failed = pair.map(|p| p.failed.join("; ")).unwrap_or_default();
                return Err(HostsError::NoPath {
                    a: name(map, a),
                    b: name(map, b),
                    why: if failed.is_empty() {
                        String::new()
                    } else {
                        format!(" ({failed})")
                    },
                });
            }
        }
    }
    let file: Vec<usize> = (0..n).collect();
    let mut notes = Vec::new();
    let (order, plan) = match opts.ring {
        RingOrder::FileOrder => {
            let p = plan(map, &file)?;
            notes.push(format!(
                "ranks in the cluster file's order; slowest ring hop {}",
                slowest_words(map, &file, &p)
            ));
            (file, p)
        }
        RingOrder::Fastest => fastest(map, file, &mut notes)?,
    };
    let every_tb = plan.hops.iter().all(|h| h.kind == "thunderbolt");
    let backend = if every_tb {
        notes.push("backend thunderbolt: every ring hop runs over a Thunderbolt link".into());
        "thunderbolt"
    } else {
        let not: Vec<String> = plan
            .hops
            .iter()
            .filter(|h| h.kind != "thunderbolt")
            .map(|h| format!("ranks {}-{} ({})", h.ranks.0, h.ranks.1, h.kind))
            .collect();
        notes.push(format!(
            "backend tcp: not every ring hop runs over Thunderbolt ({})",
            not.join(", ")
        ));
        "tcp"
    };
    Ok(HostsFile {
        backend: backend.into(),
        hosts: plan
            .addrs
            .iter()
            .map(|&ip| join(&ip.to_string(), opts.port))
            .collect(),
        ranks: order,
        hops: plan.hops,
        notes,
    })
}

/// [`RingOrder::Fastest`]: the search on each pair's fastest path, then
/// the ring and its reverse planned with the address rules (they differ
/// in who dials whom), against the file order; the best slowest hop wins,
/// the file order on a tie.
fn fastest(
    map: &LinkMap,
    file: Vec<usize>,
    notes: &mut Vec<String>,
) -> Result<(Vec<usize>, Plan), HostsError> {
    let n = file.len();
    // Each pair's fastest path, looked up once: the exact search reads
    // it (n-1)! * n times.
    let table: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| fastest_path(map, i, j, None).map_or(0.0, |(_, p)| p.both_ways_mbps()))
                .collect()
        })
        .collect();
    let w = |i: usize, j: usize| table[i][j];
    let (found, exact) = ring::fastest(n, &w);
    let mut reverse = found.clone();
    reverse[1..].reverse();
    let before = plan(map, &file);
    let mut best: Option<(Vec<usize>, Plan)> = None;
    let mut first_err = None;
    for order in [file.clone(), found, reverse] {
        match plan(map, &order) {
            Ok(p) if best.as_ref().is_none_or(|b| p.slowest() > b.1.slowest()) => {
                best = Some((order, p))
            }
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    let Some((order, p)) = best else {
        return Err(first_err.expect("three orders tried"));
    };
    let how = if exact {
        format!("every ring order with rank 0 fixed searched ({n} boxes)")
    } else {
        format!("greedy widest-hop ring improved by 2-opt ({n} boxes; not proven best)")
    };
    let ranks = order
        .iter()
        .map(|&b| map.boxes[b].hostname.as_str())
        .collect::<Vec<_>>()
        .join(" -> ");
    notes.push(format!(
        "ring order chosen for the fastest slowest hop, {how}: {ranks}"
    ));
    match before {
        Ok(b) if order == file => notes.push(format!(
            "the cluster file's order is already the best; slowest ring hop {}",
            slowest_words(map, &file, &b)
        )),
        Ok(b) => notes.push(format!(
            "slowest ring hop {} in the cluster file's order, now {} ({:.1}x)",
            slowest_words(map, &file, &b),
            slowest_words(map, &order, &p),
            p.slowest() / b.slowest().max(f64::MIN_POSITIVE)
        )),
        Err(e) => notes.push(format!(
            "the cluster file's order cannot be used ({e}); slowest ring hop now {}",
            slowest_words(map, &order, &p)
        )),
    }
    Ok((order, p))
}

#[cfg(test)]
mod tests;
