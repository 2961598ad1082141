//! **Measuring the map** — each box's agent asked for its links (one
//! authenticated handshake), then the tournament's rounds one after the
//! other, the pairs of a round at once: agent A of each pair measures the
//! path to every address of agent B that identifies B alone. The rounds
//! run twice: a quiet phase (round trips and the UDP probe, no transfer
//! anywhere: what a ping alone would see), then the rates.

use super::ask::measured;
use super::map::{BoxLinks, LinkMap, PairLinks, PathLink};
use super::refine::refine;
use super::schedule::{rounds, tournament};
use super::update::carry;
use rlx_proto::caps::LinkInfo;
use rlx_proto::handshake::measure::Request;
use rlx_proto::handshake::measure_peer::{PeerRequest, PeerResult};
use rlx_proto::handshake::measure_udp::UdpFigures;
use rlx_proto::handshake::mtu_hint;
use rlx_proto::handshake::query;
use rlx_proto::handshake::MeasureError;
use rlx_proto::keys::{Key, KeyRing};
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

/// One measurement of a path: the address of box `b` it measured, and the
/// figures (with the address of box `a` it left from) or why it failed.
type Measured = (IpAddr, Result<PeerResult, MeasureError>);

/// The two requests a map makes of each path: the quiet phase's (the
/// configured round trips and UDP probe, no transfers) and the rates
/// phase's (the transfers and one round trip, the least a measurement
/// makes).
fn phases(request: Request) -> (Request, Request) {
    let quiet = Request {
        transfers: false,
        ..request
    };
    let rates = Request {
        pings: 1,
        udp: None,
        ..request
    };
    (quiet, rates)
}

/// Box `a` measures each address of box `b` that is `b`'s alone.
async fn measure_pair(
    (a, b): (usize, usize),
    (boxes, held, agents): (&[BoxLinks], &BTreeMap<IpAddr, usize>, &[SocketAddr]),
    (key, request, timeout): (&Key, Request, Duration),
) -> Vec<Measured> {
    let mut out = Vec::new();
    for ip in candidates(boxes, held, b, agents[b]) {
        let req = PeerRequest {
            peer: SocketAddr::new(ip, agents[b].port()),
            request,
        };
        out.push((ip, measured(agents[a], key, &req, timeout).await));
    }
    out
}

/// A pair's paths from its two phases: the rates from the rates phase,
/// the round trip (the median) and loss from the quiet phase; a path
/// whose quiet phase failed keeps its rates, with the round trip of its
/// rates measurement and a note. A path whose rates failed is in
/// `failed`.
fn pair_links(
    (a, b): (usize, usize),
    boxes: &[BoxLinks],
    quiet: Vec<Measured>,
    rates: Vec<Measured>,
) -> PairLinks {
    let mut pair = PairLinks {
        a,
        b,
        paths: Vec::new(),
        failed: Vec::new(),
    };
    for (ip, r) in rates {
        let calm = quiet.iter().find(|(q, _)| *q == ip).map(|(_, q)| q);
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                // The quiet phase's probe may have found why: an MTU black
                // hole stalls TCP.
                let hint = match calm {
                    Some(Ok(q)) => q.measurement.udp.as_ref().and_then(mtu_hint),
                    _ => None,
                };
                let why = match hint {
                    Some(h) => format!("{e} ({h})"),
                    None => e.to_string(),
                };
                pair.failed
                    .push(format!("{} -> {ip}: {why}", boxes[a].addr));
                continue;
            }
        };
        let from = r.from.to_canonical();
        if pair
            .paths
            .iter()
            .any(|p| p.a_addr == from && p.b_addr == ip)
        {
            continue;
        }
        let m = r.measurement;
        let (rtt_ms, udp, mut notes) = match calm {
            Some(Ok(q)) => (
                q.measurement.rtt_ms,
                q.measurement.udp.clone().unwrap_or_default(),
                Vec::new(),
            ),
            Some(Err(e)) => (
                shortest(&m.rtt_samples_ms).unwrap_or(m.rtt_ms),
                UdpFigures::default(),
                vec![format!(
                    "the quiet phase (round trips, loss, MTU) failed: {e}; the round trip is \
                     the one taken beside the transfers"
                )],
            ),
            None => (m.rtt_ms, UdpFigures::default(), Vec::new()),
        };
        notes.extend(udp.notes.iter().map(|n| path_note(n)));
        pair.paths.push(PathLink {
            a_addr: from,
            b_addr: ip,
            kind: path_kind(boxes[a].link_of(from), boxes[b].link_of(ip)),
            ab_mbps: m.up_mbps,
            ba_mbps: m.down_mbps,
            rtt_ms,
            ab_udp: udp.up,
            ba_udp: udp.down,
            udp_notes: notes,
        });
    }
    pair.paths
        .sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
    pair
}

/// The shortest of a measurement's round trips: the pairs of a round
/// share links, and a round trip taken while another pair's transfer
/// fills a queue reads that queue; the shortest is the least disturbed.
fn shortest(samples: &[f64]) -> Option<f64> {
    samples.iter().copied().min_by(f64::total_cmp)
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
    // The quiet phase first, every round of it, while none of the map's
    // transfers runs anywhere: round trips and loss read then are the
    // links', not the queues the map's own transfers fill.
    let (quiet_req, rates_req) = phases(opts.request);
    let mut quiet = BTreeMap::new();
    let phase = Instant::now();
    for round in &schedule {
        let runs = round
            .iter()
            .map(|&p| measure_pair(p, (&boxes, &held, &agents), (&key, quiet_req, opts.timeout)));
        for (p, got) in round.iter().zip(futures::future::join_all(runs).await) {
            quiet.insert(*p, got);
        }
    }
    tracing::info!(
        "link map: quiet phase, {} round(s) of round trips and the UDP probe, in {:.1} s",
        schedule.len(),
        phase.elapsed().as_secs_f64()
    );
    let phase = Instant::now();
    for round in &schedule {
        let runs = round
            .iter()
            .map(|&p| measure_pair(p, (&boxes, &held, &agents), (&key, rates_req, opts.timeout)));
        let got = futures::future::join_all(runs).await;
        for (&(a, b), rates) in round.iter().zip(got) {
            let calm = quiet.remove(&(a, b)).unwrap_or_default();
            pairs.push(pair_links((a, b), &boxes, calm, rates));
        }
    }
    tracing::info!(
        "link map: rates, {} round(s), in {:.1} s",
        schedule.len(),
        phase.elapsed().as_secs_f64()
    );
    let ask = (&key, rates_req, opts.timeout);
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
