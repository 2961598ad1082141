//! **The link map's data** — the boxes, and per pair of boxes every path
//! measured between them (one per address pair the two share), each with
//! its figures in both directions.

use super::bottleneck::Bottleneck;
use rlx_proto::caps::LinkInfo;
use rlx_proto::handshake::measure_udp::UdpDirection;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One box of the map: a node of the cluster file and what its agent said
/// about its links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoxLinks {
    /// The node's `addr` in the cluster file (its RLX worker).
    pub addr: String,
    /// The node id its agent reports.
    pub id: String,
    /// Its host name.
    pub hostname: String,
    /// Its agent's address (`ip:6184`), which the measurement dials.
    pub agent: String,
    /// The node's `ssh` in the cluster file (none: the coordinator's own
    /// box), which launch files for other runtimes log in with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// Its links as its agent reports them (kind, speed, MTU, addresses).
    pub links: Vec<LinkInfo>,
}

impl BoxLinks {
    /// The link of this box that holds address `ip`, if its agent named it.
    pub fn link_of(&self, ip: IpAddr) -> Option<&LinkInfo> {
        self.links.iter().find(|l| l.addrs.contains(&ip))
    }
}

/// One path between two boxes: an address of each, and what was measured
/// over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathLink {
    /// The address of box `a` the measurement left from.
    pub a_addr: IpAddr,
    /// The address of box `b` it went to.
    pub b_addr: IpAddr,
    /// The kind of link at each end (`ethernet`, `thunderbolt`, ...), as
    /// the boxes' agents name the interfaces holding these addresses;
    /// `unknown` when an agent did not say.
    pub kind: String,
    /// Throughput from `a` to `b`, Mbit/s.
    pub ab_mbps: f64,
    /// Throughput from `b` to `a`, Mbit/s.
    pub ba_mbps: f64,
    /// The shortest round trip of the path's measurements, ms.
    pub rtt_ms: f64,
    /// Loss and path MTU from `a` to `b`, from the UDP probe
    /// (`[discover] link_probe_packets`); none when not measured, and
    /// `udp_notes` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab_udp: Option<UdpDirection>,
    /// Loss and path MTU from `b` to `a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ba_udp: Option<UdpDirection>,
    /// Why a direction has no loss or MTU (UDP filtered, an agent that
    /// predates the probe), `a -> b: ...` or `b -> a: ...`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_notes: Vec<String>,
}

impl PathLink {
    /// The slower direction's throughput: what a ring hop over this path
    /// can carry both ways.
    pub fn both_ways_mbps(&self) -> f64 {
        self.ab_mbps.min(self.ba_mbps)
    }

    /// True when both ends are Thunderbolt interfaces.
    pub fn is_thunderbolt(&self) -> bool {
        self.kind == "thunderbolt"
    }
}

/// What was measured between boxes `a` and `b` (indices into
/// [`LinkMap::boxes`], `a < b`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairLinks {
    /// One box of the pair.
    pub a: usize,
    /// The other.
    pub b: usize,
    /// Every path measured, fastest first (by [`PathLink::both_ways_mbps`]).
    pub paths: Vec<PathLink>,
    /// Paths that could not be measured, each with the reason (an address
    /// of `b` that `a` cannot reach, an agent that refused).
    pub failed: Vec<String>,
}

impl PairLinks {
    /// The fastest path, if any was measured.
    pub fn best(&self) -> Option<&PathLink> {
        self.paths.first()
    }
}

/// The all-pairs link map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkMap {
    /// The schema version of the map's JSON: 1 until a field changes
    /// meaning.
    pub v: u32,
    /// The boxes, in the cluster file's node order.
    pub boxes: Vec<BoxLinks>,
    /// Every pair, `a < b`, in schedule order.
    pub pairs: Vec<PairLinks>,
    /// Shared bottlenecks: pairs measured at once that crossed one slower
    /// link (two switches joined by a trunk), found and measured past by
    /// measuring again what they held down (`super::bottleneck`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bottlenecks: Vec<Bottleneck>,
    /// Nodes left out of the map, each with the reason (its agent did not
    /// answer, or did not prove the cluster key).
    #[serde(default)]
    pub skipped: Vec<String>,
    /// How long the whole map took, ms.
    pub took_ms: u64,
}

impl LinkMap {
    /// The measurements between boxes `i` and `j` (either order).
    pub fn pair(&self, i: usize, j: usize) -> Option<&PairLinks> {
        let (a, b) = (i.min(j), i.max(j));
        self.pairs.iter().find(|p| p.a == a && p.b == b)
    }

    /// The path from box `i` to box `j` as seen from `i`: its own address
    /// first (a path is stored from `a`'s side).
    pub fn path_from(&self, i: usize, j: usize, p: &PathLink) -> (IpAddr, IpAddr) {
        if i < j {
            (p.a_addr, p.b_addr)
        } else {
            (p.b_addr, p.a_addr)
        }
    }
}
