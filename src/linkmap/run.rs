//! **Measuring the map** — each box's agent asked for its links (one
//! authenticated handshake), then the tournament's rounds one after the
//! other, the pairs of a round at once: agent A of each pair measures the
//! path to every address of agent B that identifies B alone.

use super::ask::measured;
use super::map::{BoxLinks, LinkMap, PairLinks, PathLink};
use super::refine::refine;
use super::schedule::{rounds, tournament};
use super::update::carry;
use rlx_proto::caps::LinkInfo;
use rlx_proto::handshake::measure::Request;
use rlx_proto::handshake::measure_peer::PeerRequest;
use rlx_proto::handshake::query;
use rlx_proto::keys::KeyRing;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How the map is measured.
#[derive(Debug, Clone)]
pub struct MapOptions {
    /// What each path is asked for (round trips, windows each way).
    pub request: Request,
    /// The wait for each line of a handshake or measurement.
    pub timeout: Duration,
    /// The cluster's keys: the handshakes must prove one, and the first is
    /// proved to the agents (peer measurement needs the key at both ends).
    pub keys: KeyRing,
}

/// One box to map: the node's `addr` in the cluster file and its agent's
/// endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapTarget {
    /// The node's `addr`.
    pub addr: String,
    /// Its agent (`ip:6184`).
    pub agent: SocketAddr,
    /// The node's `ssh` (none: this machine).
    pub ssh: Option<String>,
}

/// Whether `ip` can name one box's interface to another box: not
/// loopback, unspecified, multicast, nor IPv6 link-local (which needs the
/// sender's interface to mean anything).
fn routable(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let link_local_v6 = matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    !(ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || link_local_v6)
}

/// The addresses of box `b` that box `a` may measure: routable, of `b`
/// alone (an address two boxes both hold, such as a container bridge's
/// 172.17.0.1 on every Docker host, names neither), the agent's own first.
fn candidates(
    boxes: &[BoxLinks],
    held: &BTreeMap<IpAddr, usize>,
    b: usize,
    agent: SocketAddr,
) -> Vec<IpAddr> {
    let mut out = vec![agent.ip().to_canonical()];
    for l in &boxes[b].links {
        for &ip in &l.addrs {
            let ip = ip.to_canonical();
            if routable(ip) && held.get(&ip) == Some(&b) && !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// The kind of the path between two links: theirs when they agree (two
/// Thunderbolt ends make a Thunderbolt path), else both, `a/b`.
fn path_kind(a: Option<&LinkInfo>, b: Option<&LinkInfo>) -> String {
    let kind = |l: Option<&LinkInfo>| l.map_or("unknown", |l| l.kind.as_str()).to_string();
    let (ka, kb) = (kind(a), kind(b));
    if ka == kb {
        ka
    } else {
        format!("{ka}/{kb}")
    }
}

/// A UDP probe's note in the map's words: its `up`/`down` (as the
/// measuring box `a` saw them) as `a -> b`/`b -> a`.
fn path_note(note: &str) -> String {
    if let Some(rest) = note.strip_prefix("up: ") {
        format!("a -> b: {rest}")
    } else if let Some(rest) = note.strip_prefix("down: ") {
        format!("b -> a: {rest}")
    } else {
        note.to_string()
    }
}

/// Measures every pair of `targets`. A box whose agent does not answer
/// the handshake (or does not prove the key) is left out of the map and
/// said why in [`LinkMap::skipped`]; a path that cannot be measured is in
/// its pair's `failed`.
pub async fn measure_map(targets: &[MapTarget], opts: &MapOptions) -> LinkMap {
    measure_map_since(targets, opts, None).await.0
}

/// [`measure_map`], keeping what `previous` (a map measured before, of
/// the same cluster) already answers: only the pairs of boxes that are
/// new, moved or changed their links, and pairs that had no path, are
/// measured ([`super::carry`] says which). Returns the map and how many pairs were
/// carried over unmeasured.
pub async fn measure_map_since(
    targets: &[MapTarget],
    opts: &MapOptions,
    previous: Option<&LinkMap>,
) -> (LinkMap, usize) {
    let started = Instant::now();
    let mut boxes = Vec::new();
    let mut agents = Vec::new();
    let mut skipped = Vec::new();
    let asked = targets
        .iter()
        .map(|t| query(t.agent, opts.timeout, Some(&opts.keys), None));
    for (t, r) in targets.iter().zip(futures::future::join_all(asked).await) {
        match r {
            Ok(reply) => {
                boxes.push(BoxLinks {
                    addr: t.addr.clone(),
                    id: reply.caps.id.clone(),
                    hostname: reply.caps.hostname.clone(),
                    agent: t.agent.to_string(),
                    ssh: t.ssh.clone(),
                    links: reply.caps.links.clone(),
                });
                agents.push(t.agent);
            }
            Err(e) => skipped.push(format!("{} (agent {}): {e}", t.addr, t.agent)),
        }
    }
    // Which box holds each address; an address two boxes claim is nobody's.
    let mut held: BTreeMap<IpAddr, usize> = BTreeMap::new();
    let mut shared = Vec::new();
    for (i, b) in boxes.iter().enumerate() {
        for ip in b.links.iter().flat_map(|l| l.addrs.iter()) {
            let ip = ip.to_canonical();
            match held.get(&ip) {
                Some(&j) if j != i => shared.push(ip),
                _ => {
                    held.insert(ip, i);
                }
            }
        }
    }
    for ip in shared {
        held.remove(&ip);
    }
    let key = opts.keys.keys()[0].clone();
    let (mut pairs, schedule) = match previous {
        Some(prev) => {
            let c = carry(prev, &boxes);
            (c.pairs, rounds(&c.todo))
        }
        None => (Vec::new(), tournament(boxes.len())),
    };
    let carried = pairs.len();
    for round in schedule.clone() {
        let runs = round.into_iter().map(|(a, b)| {
            let (boxes, held, key) = (&boxes, &held, &key);
            let (agent_a, agent_b) = (agents[a], agents[b]);
            async move {
                let mut pair = PairLinks {
                    a,
                    b,
                    paths: Vec::new(),
                    failed: Vec::new(),
                };
                for ip in candidates(boxes, held, b, agent_b) {
                    let req = PeerRequest {
                        peer: SocketAddr::new(ip, agent_b.port()),
                        request: opts.request,
                    };
                    match measured(agent_a, key, &req, opts.timeout).await {
                        Ok(r) => {
                            let from = r.from.to_canonical();
                            if pair
                                .paths
                                .iter()
                                .any(|p| p.a_addr == from && p.b_addr == ip)
                            {
                                continue;
                            }
                            let m = r.measurement;
                            let udp = m.udp.unwrap_or_default();
                            pair.paths.push(PathLink {
                                a_addr: from,
                                b_addr: ip,
                                kind: path_kind(boxes[a].link_of(from), boxes[b].link_of(ip)),
                                ab_mbps: m.up_mbps,
                                ba_mbps: m.down_mbps,
                                rtt_ms: m.rtt_ms,
                                ab_udp: udp.up,
                                ba_udp: udp.down,
                                udp_notes: udp.notes.iter().map(|n| path_note(n)).collect(),
                            });
                        }
                        Err(e) => pair.failed.push(format!("{} -> {ip}: {e}", boxes[a].addr)),
                    }
                }
                pair.paths
                    .sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
                pair
            }
        });
        pairs.extend(futures::future::join_all(runs).await);
    }
    let ask = (&key, opts.request, opts.timeout);
    let bottlenecks = refine(&mut pairs, carried, &schedule, &agents, ask).await;
    let map = LinkMap {
        v: 1,
        boxes,
        pairs,
        bottlenecks,
        skipped,
        took_ms: started.elapsed().as_millis() as u64,
    };
    (map, carried)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(addrs: &[&str]) -> BoxLinks {
        BoxLinks {
            addr: String::new(),
            id: String::new(),
            hostname: String::new(),
            agent: String::new(),
            ssh: None,
            links: vec![LinkInfo {
                name: "eth0".into(),
                kind: "ethernet".into(),
                speed_mbps: None,
                mtu: 1500,
                addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                rdma: false,
            }],
        }
    }

    #[test]
    fn an_address_two_boxes_hold_and_unroutable_ones_are_never_measured() {
        let boxes = vec![
            boxed(&["10.0.0.1", "172.17.0.1"]),
            boxed(&["10.0.0.2", "172.17.0.1", "127.0.0.1", "fe80::1", "fd00::2"]),
        ];
        let mut held = BTreeMap::new();
        for (i, b) in boxes.iter().enumerate() {
            for ip in &b.links[0].addrs {
                held.entry(*ip).and_modify(|h| *h = usize::MAX).or_insert(i);
            }
        }
        let got = candidates(&boxes, &held, 1, "10.0.0.2:6184".parse().unwrap());
        let want: Vec<IpAddr> = ["10.0.0.2", "fd00::2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn two_thunderbolt_ends_make_a_thunderbolt_path_and_mixed_ends_say_both() {
        let mut tb = boxed(&["169.254.1.1"]).links[0].clone();
        tb.kind = "thunderbolt".into();
        let eth = boxed(&["10.0.0.1"]).links[0].clone();
        assert_eq!(path_kind(Some(&tb), Some(&tb)), "thunderbolt");
        assert_eq!(path_kind(Some(&tb), Some(&eth)), "thunderbolt/ethernet");
        assert_eq!(path_kind(None, Some(&eth)), "unknown/ethernet");
    }
}
