//! **Measuring again what a shared bottleneck held down** — the runner of
//! [`super::bottleneck::Refiner`]: after the tournament, the pairs whose
//! rates read below what both their boxes can do are measured again over
//! their path to the other box's agent address, in the batches the search
//! asks for (with the rates phase's request: transfers and one round
//! trip), and each direction keeps its fastest rate; the round trip and
//! loss stay the quiet phase's. Last, each bottleneck group's link is
//! filled at once by pairs across it, for its capacity.

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
    let (mut again, mut batches_run, mut pass) = (0, 0, 0);
    let started = std::time::Instant::now();
    while let Some(batches) = r.next_batches() {
        // Every second pass, box `b` leads: a direction that read low
        // because of the side that measured it (the tournament's lead
        // measures its download itself) is then measured by the other. The
        // first pass keeps the tournament's lead, so that a faster reading
        // there is evidence of sharing.
        pass += 1;
        let swapped = pass % 2 == 0;
        for batch in batches {
            again += batch.len();
            batches_run += 1;
            let led: Vec<(usize, usize)> = batch
                .iter()
                .map(|&(a, b)| if swapped { (b, a) } else { (a, b) })
                .collect();
            let results = at_once(&led, agents, (key, request, timeout)).await;
            let mut rec = Vec::new();
            for (&p, res) in batch.iter().zip(results) {
                let rates = res.map(|r| {
                    if swapped {
                        Rates { ab: r.ba, ba: r.ab }
                    } else {
                        r
                    }
                });
                if let (Some(rates), Some(i)) = (rates, at(pairs, p)) {
                    merge(&mut pairs[i], (agents[p.0], agents[p.1]), rates);
                }
                rec.push((p, rates));
            }
            tracing::debug!("link map, measured again at once (b leading: {swapped}): {rec:?}");
            if swapped {
                r.record_swapped(&rec);
            } else {
                r.record(&rec);
            }
        }
    }
    // The capacity batches' flows must run at the same moments: none
    // stops early once steady (a flow that did would leave the link to
    // the others, and the sum would count some of it twice).
    let together = Request {
        early_stop: false,
        ..request
    };
    for batch in r.capacity_batches() {
        let results = at_once(&batch, agents, (key, together, timeout)).await;
        let rec: Vec<((usize, usize), Option<Rates>)> = batch.into_iter().zip(results).collect();
        tracing::debug!("link map, across a bottleneck at once: {rec:?}");
        r.record_capacity(&rec);
    }
    let found = r.bottlenecks();
    if again > 0 {
        tracing::info!(
            "link map: {again} path measurement(s) again in {batches_run} batch(es) to get past \
             shared bottlenecks, and the capacity batches, in {:.1} s; {} bottleneck group(s)",
            started.elapsed().as_secs_f64(),
            found.len()
        );
    }
    found
}

/// Measures `batch` at once, each `(lead, other)` led by `lead`: the rates
/// `lead -> other` (`ab`) and back, or none where it failed (logged).
async fn at_once(
    batch: &[(usize, usize)],
    agents: &[SocketAddr],
    (key, request, timeout): (&Key, Request, Duration),
) -> Vec<Option<Rates>> {
    let runs = batch.iter().map(|&(lead, other)| {
        let req = PeerRequest {
            peer: agents[other],
            request,
        };
        async move {
            tried(
                measured(agents[lead], key, &req, timeout).await,
                (agents[lead], agents[other]),
            )
            .map(|m| Rates {
                ab: m.measurement.up_mbps,
                ba: m.measurement.down_mbps,
            })
        }
    });
    futures::future::join_all(runs).await
}

/// A re-measurement's figures, or none with the reason logged: the pair
/// keeps the figures it had, and the search counts it as not measured.
fn tried(
    res: Result<PeerResult, rlx_proto::handshake::MeasureError>,
    (a, b): (SocketAddr, SocketAddr),
) -> Option<PeerResult> {
    res.map_err(|e| {
        tracing::info!(
            "link map: the agent at {a} measuring the one at {b} again failed, the figures \
             measured before stand: {e}"
        )
    })
    .ok()
}

/// Keeps, per direction, the faster of the path's rate and `r`'s, on the
/// path between the two boxes' agent addresses (the round trip and loss
/// are the quiet phase's: a re-measurement has neither the probe nor a
/// quiet link). A path that left from another address of `a` (the kernel
/// chose another source) is not the one measured again, and keeps its
/// figures.
fn merge(pair: &mut PairLinks, (agent_a, agent_b): (SocketAddr, SocketAddr), r: Rates) {
    let (ia, ib) = (agent_a.ip().to_canonical(), agent_b.ip().to_canonical());
    let Some(p) = pair
        .paths
        .iter_mut()
        .find(|p| p.b_addr == ib && p.a_addr == ia)
    else {
        return;
    };
    p.ab_mbps = p.ab_mbps.max(r.ab);
    p.ba_mbps = p.ba_mbps.max(r.ba);
    pair.paths
        .sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
}
