//! **Measuring again what a shared bottleneck held down** — the runner of
//! [`super::bottleneck::Refiner`]: after the tournament, the pairs whose
//! rates read below what both their boxes can do are measured again over
//! their path to the other box's agent address, in the batches the search
//! asks for, and each direction keeps its fastest figures (with the loss
//! and MTU of the measurement that gave them, and the shortest round trip:
//! a shared queue lengthens it).

use super::ask::measured;
use super::bottleneck::{Bottleneck, Pair, Rates, Refiner};
use super::map::PairLinks;
use rlx_proto::handshake::measure::Request;
use rlx_proto::handshake::measure_peer::{PeerRequest, PeerResult};
use rlx_proto::keys::Key;
use std::net::SocketAddr;
use std::time::Duration;

/// The rates of the path from box `a` to box `b`'s agent address.
fn lan_rates(pair: &PairLinks, agent_b: SocketAddr) -> Option<Rates> {
    let ip = agent_b.ip().to_canonical();
    pair.paths.iter().find(|p| p.b_addr == ip).map(|p| Rates {
        ab: p.ab_mbps,
        ba: p.ba_mbps,
    })
}

/// Runs the search over `pairs` (the first `carried` kept from an earlier
/// map, the rest measured in `rounds`, in order) and returns the shared
/// bottlenecks found; `pairs` get the fastest figures seen.
pub(super) async fn refine(
    pairs: &mut [PairLinks],
    carried: usize,
    rounds: &[Vec<Pair>],
    agents: &[SocketAddr],
    (key, request, timeout): (&Key, Request, Duration),
) -> Vec<Bottleneck> {
    let mut r = Refiner::new(agents.len());
    let at = |pairs: &[PairLinks], p: Pair| pairs.iter().position(|x| (x.a, x.b) == p);
    for pair in &pairs[..carried] {
        if let Some(rates) = lan_rates(pair, agents[pair.b]) {
            r.know((pair.a, pair.b), rates);
        }
    }
    for round in rounds {
        let batch: Vec<(Pair, Option<Rates>)> = round
            .iter()
            .map(|&p| {
                (
                    p,
                    at(pairs, p).and_then(|i| lan_rates(&pairs[i], agents[p.1])),
                )
            })
            .collect();
        tracing::debug!("link map round: {batch:?}");
        r.record(&batch);
    }
    let mut again = 0;
    while let Some(batches) = r.next_batches() {
        for batch in batches {
            again += batch.len();
            let runs = batch.iter().map(|&(a, b)| {
                let req = PeerRequest {
                    peer: agents[b],
                    request,
                };
                async move { measured(agents[a], key, &req, timeout).await.ok() }
            });
            let results = futures::future::join_all(runs).await;
            let mut rec = Vec::new();
            for (&p, res) in batch.iter().zip(results) {
                let rates = res.as_ref().map(|m| Rates {
                    ab: m.measurement.up_mbps,
                    ba: m.measurement.down_mbps,
                });
                if let (Some(res), Some(i)) = (res, at(pairs, p)) {
                    merge(&mut pairs[i], agents[p.1], res);
                }
                rec.push((p, rates));
            }
            tracing::debug!("link map, measured again at once: {rec:?}");
            r.record(&rec);
        }
    }
    let found = r.bottlenecks();
    if again > 0 {
        tracing::info!(
            "link map: {again} path measurement(s) again to get past shared bottlenecks; {} \
             bottleneck group(s)",
            found.len()
        );
    }
    found
}

/// Keeps, per direction, the faster of the path's figures and `res`.
fn merge(pair: &mut PairLinks, agent_b: SocketAddr, res: PeerResult) {
    let (from, m) = (res.from.to_canonical(), res.measurement);
    let ip = agent_b.ip().to_canonical();
    let Some(p) = pair
        .paths
        .iter_mut()
        .find(|p| p.b_addr == ip && p.a_addr == from)
    else {
        return;
    };
    let udp = m.udp.unwrap_or_default();
    if m.up_mbps > p.ab_mbps {
        p.ab_mbps = m.up_mbps;
        p.ab_udp = udp.up.or(p.ab_udp.take());
    }
    if m.down_mbps > p.ba_mbps {
        p.ba_mbps = m.down_mbps;
        p.ba_udp = udp.down.or(p.ba_udp.take());
    }
    p.rtt_ms = p.rtt_ms.min(m.rtt_ms);
    pair.paths
        .sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
}
