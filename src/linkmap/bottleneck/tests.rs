//! The search for shared bottlenecks against a model network: boxes on
//! switches with their own rates out and in, switches joined by trunks,
//! and flows that cross a trunk at once sharing it max-min fairly.

use super::*;
use crate::linkmap::tournament;

/// The tightest constraint: its rate, the trunk (none: a flow's own
/// demand), the flow.
type Tight = (f64, Option<(usize, usize)>, usize);

/// A model network: each box's switch and rates, each ordered pair of
/// switches' trunk capacity (none: the same switch, or no limit).
struct Net {
    switch: Vec<usize>,
    out: Vec<f64>,
    inn: Vec<f64>,
    trunk: f64,
    /// Boxes whose flows in read a share of their rate that changes from
    /// one measurement to the next (behind a queue a bulk flow of their
    /// own keeps full), and the draws so far.
    noisy: BTreeSet<usize>,
    draws: std::cell::Cell<u64>,
    /// Boxes that read their own downloads at half the rate when they lead
    /// a measurement (a measuring side's artifact, not a link's).
    half_when_leading: BTreeSet<usize>,
}

impl Net {
    /// `per` boxes on each of `switches` switches in a chain, every box at
    /// `rate` both ways, trunks of `trunk`.
    fn new(switches: usize, per: usize, rate: f64, trunk: f64) -> Net {
        Net {
            switch: (0..switches * per).map(|i| i / per).collect(),
            out: vec![rate; switches * per],
            inn: vec![rate; switches * per],
            trunk,
            noisy: BTreeSet::new(),
            draws: std::cell::Cell::new(0),
            half_when_leading: BTreeSet::new(),
        }
    }

    fn alone(&self, x: usize, y: usize) -> f64 {
        let d = self.out[x].min(self.inn[y]);
        if self.switch[x] == self.switch[y] {
            d
        } else {
            d.min(self.trunk)
        }
    }

    /// The trunks a flow `x -> y` crosses (a chain: each hop between
    /// neighbouring switches, in its direction).
    fn trunks(&self, x: usize, y: usize) -> Vec<(usize, usize)> {
        let (sx, sy) = (self.switch[x], self.switch[y]);
        if sx < sy {
            (sx..sy).map(|s| (s, s + 1)).collect()
        } else {
            (sy..sx).rev().map(|s| (s + 1, s)).collect()
        }
    }

    /// Max-min fair rates of `flows` running at once.
    fn share(&self, flows: &[(usize, usize)]) -> Vec<f64> {
        let mut rate: Vec<Option<f64>> = vec![None; flows.len()];
        let mut left: BTreeMap<(usize, usize), f64> = BTreeMap::new();
        for &(x, y) in flows {
            for t in self.trunks(x, y) {
                left.insert(t, self.trunk);
            }
        }
        loop {
            // The tightest constraint among unfixed flows: a trunk's fair
            // share, or a flow's own demand.
            let mut tight: Option<Tight> = None;
            for (&t, &cap) in &left {
                let on: Vec<usize> = (0..flows.len())
                    .filter(|&i| {
                        rate[i].is_none() && self.trunks(flows[i].0, flows[i].1).contains(&t)
                    })
                    .collect();
                if !on.is_empty() {
                    let s = cap / on.len() as f64;
                    if tight.is_none_or(|(v, _, _)| s < v) {
                        tight = Some((s, Some(t), 0));
                    }
                }
            }
            for i in 0..flows.len() {
                if rate[i].is_none() {
                    let d = self.out[flows[i].0].min(self.inn[flows[i].1]);
                    if tight.is_none_or(|(v, _, _)| d <= v) {
                        tight = Some((d, None, i));
                    }
                }
            }
            let Some((v, t, i)) = tight else { break };
            let fixed: Vec<usize> = match t {
                None => vec![i],
                Some(t) => (0..flows.len())
                    .filter(|&j| {
                        rate[j].is_none() && self.trunks(flows[j].0, flows[j].1).contains(&t)
                    })
                    .collect(),
            };
            for j in fixed {
                rate[j] = Some(v);
                for u in self.trunks(flows[j].0, flows[j].1) {
                    *left.get_mut(&u).unwrap() -= v;
                }
            }
        }
        rate.into_iter().map(|r| r.unwrap()).collect()
    }

    /// A batch led by each pair's box `b` (its rates still `a -> b`
    /// first).
    fn measure_swapped(&self, batch: &[Pair]) -> Vec<(Pair, Option<Rates>)> {
        let turned: Vec<Pair> = batch.iter().map(|&(a, b)| (b, a)).collect();
        self.measure(&turned)
            .into_iter()
            .map(|((b, a), r)| ((a, b), r.map(|r| Rates { ab: r.ba, ba: r.ab })))
            .collect()
    }

    /// A batch measured, each pair led by its first box: every pair's
    /// upload at once, then every download.
    fn measure(&self, batch: &[Pair]) -> Vec<(Pair, Option<Rates>)> {
        let ups: Vec<(usize, usize)> = batch.to_vec();
        let downs: Vec<(usize, usize)> = batch.iter().map(|&(a, b)| (b, a)).collect();
        let (u, d) = (self.share(&ups), self.share(&downs));
        batch
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| {
                let ab = u[i] * self.luck(b);
                let mut ba = d[i] * self.luck(a);
                if self.half_when_leading.contains(&a) {
                    ba /= 2.0;
                }
                ((a, b), Some(Rates { ab, ba }))
            })
            .collect()
    }

    /// The share a flow into `to` gets: all of it, or for a noisy box a
    /// draw between 0.3 and 1.0 (a fixed sequence: the test repeats).
    fn luck(&self, to: usize) -> f64 {
        if !self.noisy.contains(&to) {
            return 1.0;
        }
        let k = self.draws.get();
        self.draws.set(k + 1);
        let x = (k.wrapping_mul(2654435761) % 1000) as f64 / 1000.0;
        0.3 + 0.7 * x
    }
}

/// The whole search on `net`: the tournament, then every batch it asks
/// for. Returns the refiner and how many batches it asked for.
fn search(net: &Net) -> (Refiner, usize) {
    let n = net.switch.len();
    let mut r = Refiner::new(n);
    for round in tournament(n) {
        r.record(&net.measure(&round));
    }
    let (mut asked, mut pass) = (0, 0);
    while let Some(batches) = r.next_batches() {
        eprintln!("pass: {} batches", batches.len());
        // As the runner does: every second pass led by the pairs' box `b`.
        pass += 1;
        for b in batches {
            asked += 1;
            if pass % 2 == 0 {
                r.record_swapped(&net.measure_swapped(&b));
            } else {
                r.record(&net.measure(&b));
            }
        }
    }
    for b in r.capacity_batches() {
        asked += 1;
        r.record_capacity(&net.measure(&b));
    }
    (r, asked)
}

fn every_pair_reads_its_alone_rate(net: &Net, r: &Refiner) {
    let n = net.switch.len();
    for a in 0..n {
        for b in a + 1..n {
            let got = r.best((a, b)).unwrap();
            assert!(
                (got.ab - net.alone(a, b)).abs() < 1e-6 && (got.ba - net.alone(b, a)).abs() < 1e-6,
                "{a}-{b}: {got:?}, alone {} / {}",
                net.alone(a, b),
                net.alone(b, a)
            );
        }
    }
}

#[test]
fn sixteen_boxes_on_two_switches_get_their_own_rates_and_the_trunk_is_one_group() {
    let net = Net::new(2, 8, 100.0, 200.0);
    let (r, asked) = search(&net);
    every_pair_reads_its_alone_rate(&net, &r);
    let g = r.bottlenecks();
    assert_eq!(g.len(), 1, "{g:#?}");
    let g = &g[0];
    assert!(g.sides_known);
    let mut sides = [g.side_a.clone(), g.side_b.clone()];
    sides.sort();
    assert_eq!(sides, [(0..8).collect::<Vec<_>>(), (8..16).collect()]);
    assert_eq!(g.pairs, 64);
    for c in [g.ab_mbps, g.ba_mbps] {
        let c = c.expect("saturated both ways");
        assert!((c - 200.0).abs() <= 1e-6, "capacity {c}");
    }
    // About what the trunk allows: two crossing pairs a batch, for the
    // pairs the tournament's rounds held down (not all 64 one by one),
    // and one batch that fills the trunk.
    assert!(asked <= 33, "{asked} batches");
}

/// A box that reads its own downloads low when it leads (the tournament
/// has it lead most of its pairs) gets its pairs' rates from the passes
/// led by the other end, and its low readings are no evidence of a
/// bottleneck: the trunk's group keeps its true sides, without that box
/// (at 10 Mbit/s it never shares the trunk enough to show).
#[test]
fn a_box_that_reads_low_when_it_leads_gets_its_rates_and_spoils_no_group() {
    let mut net = Net::new(2, 8, 100.0, 200.0);
    net.out[1] = 10.0;
    net.inn[1] = 10.0;
    net.half_when_leading.insert(1);
    let (r, _) = search(&net);
    every_pair_reads_its_alone_rate(&net, &r);
    let g = r.bottlenecks();
    assert_eq!(g.len(), 1, "{g:#?}");
    let mut sides = [g[0].side_a.clone(), g[0].side_b.clone()];
    sides.sort();
    assert_eq!(sides, [vec![0, 2, 3, 4, 5, 6, 7], (8..16).collect()]);
}

#[test]
fn a_box_whose_flows_in_read_by_chance_makes_no_false_group_and_spoils_no_true_one() {
    // One switch: the noisy box's pairs read faster or slower at random,
    // and nothing is shared.
    let mut net = Net::new(1, 8, 100.0, f64::INFINITY);
    net.noisy.insert(5);
    let (r, _) = search(&net);
    assert!(r.bottlenecks().is_empty(), "{:#?}", r.bottlenecks());
    // Two switches and a trunk: still one group, its sides the switches.
    let mut net = Net::new(2, 8, 100.0, 200.0);
    net.noisy.insert(5);
    let (r, _) = search(&net);
    let g = r.bottlenecks();
    assert_eq!(g.len(), 1, "{g:#?}");
    let g = &g[0];
    assert!(g.sides_known, "{g:#?}");
    let mut sides = [g.side_a.clone(), g.side_b.clone()];
    sides.sort();
    assert_eq!(sides, [(0..8).collect::<Vec<_>>(), (8..16).collect()]);
    for c in [g.ab_mbps, g.ba_mbps] {
        let c = c.expect("saturated both ways");
        assert!((c - 200.0).abs() <= 20.0, "capacity {c}");
    }
}

#[test]
fn boxes_on_one_switch_share_nothing_and_nothing_is_measured_again() {
    let mut net = Net::new(1, 9, 100.0, f64::INFINITY);
    net.out[3] = 10.0;
    net.inn[5] = 20.0;
    let (r, asked) = search(&net);
    every_pair_reads_its_alone_rate(&net, &r);
    assert!(r.bottlenecks().is_empty());
    assert_eq!(asked, 0);
}

#[test]
fn a_trunk_as_fast_as_two_boxes_holds_nobody_down_when_few_cross() {
    // 4 boxes, 2 a side: at most 2 flows cross each way, which a trunk of
    // 200 carries at full rate: no group, no batch.
    let net = Net::new(2, 2, 100.0, 200.0);
    let (r, asked) = search(&net);
    every_pair_reads_its_alone_rate(&net, &r);
    assert!(r.bottlenecks().is_empty());
    assert_eq!(asked, 0);
}

#[test]
fn a_chain_of_three_switches_is_one_group_without_sides() {
    let net = Net::new(3, 4, 100.0, 100.0);
    let (r, _) = search(&net);
    every_pair_reads_its_alone_rate(&net, &r);
    let g = r.bottlenecks();
    assert_eq!(g.len(), 1, "{g:#?}");
    assert!(!g[0].sides_known, "{g:#?}");
}

/// A map kept up to date measures only the pairs of a box that joined: a
/// kept pair tells what its boxes can do and is never measured again, even
/// when it reads slower than the new pairs show its boxes can do.
#[test]
fn a_kept_pair_is_never_measured_again() {
    let mut r = Refiner::new(3);
    r.know((0, 1), Rates { ab: 10.0, ba: 10.0 });
    r.record(&[(
        (0, 2),
        Some(Rates {
            ab: 100.0,
            ba: 100.0,
        }),
    )]);
    r.record(&[(
        (1, 2),
        Some(Rates {
            ab: 100.0,
            ba: 100.0,
        }),
    )]);
    assert_eq!(r.next_batches(), None);
}
