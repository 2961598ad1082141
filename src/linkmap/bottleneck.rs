//! **Shared bottlenecks** — pairs measured at once that cross one slower
//! link (two switches joined by a trunk) share it, and each reads a share
//! instead of its own rate. This finds them from the rounds themselves, and
//! measures again what they held down:
//!
//! 1. **What a box can do.** A box's own rate out and in is the fastest it
//!    showed in any pair (most of its pairs share nothing with the others of
//!    their round: pairs on its own switch).
//! 2. **Held down.** A direction that read less than [`HELD`] of what both
//!    its ends can do (the sender's out, the receiver's in) was held down
//!    by something: a bottleneck shared with the pairs of its round, or a
//!    slower path of its own.
//! 3. **Measured again,** in batches that keep apart what may have shared:
//!    two pairs held down in the same batch are never put in one batch
//!    again. A direction that reads faster now was held by its batch-mates
//!    (it is *contended*); one still held down when nothing else in its
//!    batch was, twice, is the path's own rate. Every figure is the fastest
//!    seen.
//! 4. **Groups.** Boxes joined by contended pairs fall into two sides of one
//!    bottleneck (a bipartite graph: every contended pair crosses from one
//!    side to the other). The group is every pair across the two sides, and
//!    its capacity each way is what the flows held down across it carried
//!    at once, in the batches where two or more were (the median of those
//!    sums).
//!
//! Pairs that share nothing are never contended, so they are in no group.
//! A chain of three switches (two trunks) makes an odd cycle of contended
//! pairs: reported as one group without sides (`sides_known: false`).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A pair of boxes, `a < b`.
pub type Pair = (usize, usize);

/// A direction held down: below this share of what both its ends can do.
/// 85% leaves room for measurement noise (a few percent) and for a slower
/// receive side than send side.
pub(crate) const HELD: f64 = 0.85;

/// A re-measured direction this much faster than before was held down by
/// its batch-mates.
const FASTER: f64 = 1.15;

/// Most rounds of re-measurement: each keeps apart more of what shared.
pub(crate) const MAX_PASSES: usize = 6;

/// At most this share of a group's contended pairs may lie within one of
/// its sides for the sides to stand. A flow that competes with a bulk flow
/// of its own (a box behind a busy queue) reads faster or slower by
/// chance, and looks contended with boxes on its own side; a chain of
/// three switches leaves a third of its pairs within a side at best.
const NOISE: f64 = 0.25;

/// One pair's rates in one batch, `a -> b` and `b -> a`, Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// `a -> b`.
    pub ab: f64,
    /// `b -> a`.
    pub ba: f64,
}

/// A shared bottleneck: the pairs across two sides, and what the link
/// between them carried each way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// One side's boxes (indices into the map's boxes).
    pub side_a: Vec<usize>,
    /// The other side's.
    pub side_b: Vec<usize>,
    /// Whether the boxes split into two sides (false: an odd cycle, such
    /// as a chain of switches; `side_a` then holds them all).
    pub sides_known: bool,
    /// How many pairs cross it.
    pub pairs: usize,
    /// What it carried from `side_a` to `side_b`, Mbit/s (see
    /// `Refiner::capacity`); none when it was never saturated that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab_mbps: Option<f64>,
    /// The same, `side_b` to `side_a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ba_mbps: Option<f64>,
}

/// The state of the search: every batch measured (the tournament's rounds
/// first), the fastest rates seen, what must be kept apart.
#[derive(Debug, Default)]
pub struct Refiner {
    n: usize,
    history: Vec<Vec<(Pair, Rates)>>,
    best: BTreeMap<Pair, Rates>,
    first: BTreeMap<Pair, Rates>,
    apart: BTreeSet<(Pair, Pair)>,
    settled: BTreeSet<Pair>,
    contended: BTreeSet<Pair>,
    passes: usize,
    /// Where each pass's batches begin in `history`.
    pass_starts: Vec<usize>,
    /// How often each pair was the only one held down in its batch.
    alone: BTreeMap<Pair, usize>,
    /// Pairs known without a batch ([`Refiner::know`]).
    known: BTreeSet<Pair>,
    /// The fastest rates of each pair led by its box `a` (the tournament's
    /// lead): what a faster reading is compared with for contention.
    led_by_a: BTreeMap<Pair, Rates>,
    /// The synchronized batches across each group
    /// ([`Refiner::capacity_batches`]): every flow `x -> y` with its rate.
    synced: Vec<Vec<(usize, usize, f64)>>,
}

impl Refiner {
    /// A search over `n` boxes.
    pub fn new(n: usize) -> Refiner {
        Refiner {
            n,
            ..Refiner::default()
        }
    }

    /// Knows `p`'s rates without a batch (a pair kept from an earlier
    /// map): what its boxes can do, nothing about what it shared.
    pub fn know(&mut self, p: Pair, r: Rates) {
        self.known.insert(p);
        self.best.entry(p).or_insert(r);
    }

    /// Records a batch measured at once (a round of the tournament, or a
    /// batch [`Refiner::next_batches`] asked for), each pair led by its
    /// box `a` as in the tournament: each pair with its rates, `None` for
    /// a pair that could not be measured.
    pub fn record(&mut self, batch: &[(Pair, Option<Rates>)]) {
        self.record_led(batch, false);
    }

    /// [`Refiner::record`] for a batch led by each pair's box `b`. Its
    /// figures count as the pair's rates, not as evidence of sharing: a
    /// direction that reads faster measured from its other end may have
    /// been read low by the side that measured it, not held by anyone.
    pub fn record_swapped(&mut self, batch: &[(Pair, Option<Rates>)]) {
        self.record_led(batch, true);
    }

    fn record_led(&mut self, batch: &[(Pair, Option<Rates>)], swapped: bool) {
        let measured: Vec<(Pair, Rates)> = batch
            .iter()
            .filter_map(|&(p, r)| r.map(|r| (p, r)))
            .collect();
        for &(p, r) in &measured {
            self.first.entry(p).or_insert(r);
            let b = self.best.entry(p).or_insert(r);
            b.ab = b.ab.max(r.ab);
            b.ba = b.ba.max(r.ba);
            if swapped {
                continue;
            }
            // Faster now, after being held down together with another pair:
            // it shared something with them. A pair only ever held down
            // alone that reads faster once is a wobble of its own (a lossy
            // box, a slow box's queue), and would join boxes of one side.
            let coheld = self.apart.iter().any(|&(x, y)| x == p || y == p);
            match self.led_by_a.get_mut(&p) {
                Some(old) => {
                    if coheld && (r.ab > old.ab * FASTER || r.ba > old.ba * FASTER) {
                        self.contended.insert(p);
                    }
                    old.ab = old.ab.max(r.ab);
                    old.ba = old.ba.max(r.ba);
                }
                None => {
                    self.led_by_a.insert(p, r);
                }
            }
        }
        self.history.push(measured);
    }

    /// Each box's fastest rate out and in, over every pair.
    fn capacities(&self) -> (Vec<f64>, Vec<f64>) {
        let (mut out, mut inn) = (vec![0.0f64; self.n], vec![0.0f64; self.n]);
        for (&(a, b), r) in &self.best {
            out[a] = out[a].max(r.ab);
            inn[b] = inn[b].max(r.ab);
            out[b] = out[b].max(r.ba);
            inn[a] = inn[a].max(r.ba);
        }
        (out, inn)
    }

    /// Whether `r` (of pair `p`) is held down in either direction, given
    /// what the boxes can do.
    fn held(p: Pair, r: Rates, (out, inn): &(Vec<f64>, Vec<f64>)) -> bool {
        let (a, b) = p;
        r.ab < HELD * out[a].min(inn[b]) || r.ba < HELD * out[b].min(inn[a])
    }

    /// The batches to measure next, one after the other, each batch's
    /// pairs at once; none when nothing held down is left to try (or after
    /// `MAX_PASSES`, 6). Call after recording the previous batches.
    pub fn next_batches(&mut self) -> Option<Vec<Vec<Pair>>> {
        let caps = self.capacities();
        // What the last pass kept apart: pairs held down together in a
        // batch, with a pair held down alone (or twice) settled.
        let mut lone = Vec::new();
        let mut apart = Vec::new();
        for batch in self.last_pass().unwrap_or_default() {
            // Held down in this batch (by its own rates there).
            let held: Vec<Pair> = batch
                .iter()
                .filter(|(p, r)| Self::held(*p, *r, &caps))
                .map(|(p, _)| *p)
                .collect();
            for &p in &held {
                // Held down with nothing else held in its batch, twice:
                // nothing shared held it, so that is the path's own rate
                // (once could be a hiccup of a busy box).
                if held.len() == 1 {
                    lone.push(p);
                }
                apart.extend(held.iter().filter(|&&q| p < q).map(|&q| (p, q)));
            }
        }
        for p in lone {
            let times = self.alone.entry(p).or_default();
            *times += 1;
            if *times >= 2 {
                self.settled.insert(p);
            }
        }
        self.apart.extend(apart);
        if self.passes >= MAX_PASSES {
            return None;
        }
        // The tournament's rounds: pairs held down together there are kept
        // apart too.
        if self.passes == 0 {
            for round in &self.history {
                let held: Vec<Pair> = round
                    .iter()
                    .filter(|(p, _)| Self::held(*p, self.best[p], &caps))
                    .map(|(p, _)| *p)
                    .collect();
                for &p in &held {
                    for &q in &held {
                        if p < q {
                            self.apart.insert((p, q));
                        }
                    }
                }
            }
        }
        // Only what this search measured: a pair kept from an earlier map
        // tells what its boxes can do, and is not measured again.
        let todo: Vec<Pair> = self
            .best
            .iter()
            .filter(|(p, _)| self.first.contains_key(p) && !self.known.contains(p))
            .filter(|(p, r)| !self.settled.contains(p) && Self::held(**p, **r, &caps))
            .map(|(p, _)| *p)
            .collect();
        if todo.is_empty() {
            return None;
        }
        self.passes += 1;
        self.pass_starts.push(self.history.len());
        Some(self.batch(&todo))
    }

    /// The batches of the pass just measured, if a pass ran.
    fn last_pass(&self) -> Option<&[Vec<(Pair, Rates)>]> {
        let &start = self.pass_starts.last()?;
        Some(&self.history[start..])
    }

    /// Greedy batches: each pair in the first batch where neither of its
    /// boxes is busy, no pair is one it must be kept apart from, and no
    /// bottleneck found so far gets more crossing pairs than it carries at
    /// their full rate (its capacity over the pairs' rate, rounded; one
    /// while its capacity or sides are unknown).
    fn batch(&self, todo: &[Pair]) -> Vec<Vec<Pair>> {
        let caps = self.capacities();
        // Where a bottleneck may be: the pairs found contended, and the
        // pairs still held down (what the tournament's rounds suggest
        // before anything was measured again).
        let mut suspects = self.contended.clone();
        suspects.extend(todo.iter().copied());
        let groups = self.groups(&suspects);
        let room: Vec<usize> = groups
            .iter()
            .map(|g| {
                // The slower way: the crossing pairs of a batch may all
                // send the same way at once.
                let there = self.capacity(|x, y| g.crossing(x, y) == Some(true));
                let back = self.capacity(|x, y| g.crossing(x, y) == Some(false));
                let cap = match (there, back) {
                    (Some(t), Some(b)) => Some(t.min(b)),
                    (t, b) => t.or(b),
                };
                let want = todo
                    .iter()
                    .filter(|&&(a, b)| g.crossing(a, b).is_some())
                    .map(|&(a, b)| caps.0[a].min(caps.1[b]).max(caps.0[b].min(caps.1[a])))
                    .fold(0.0f64, f64::max);
                // Without two sides (a chain of switches, one trunk behind
                // another) the sum is over several links: one at a time.
                // Rounded down: the capacity read from flows that did not
                // run at quite the same moments is high, and one pair too
                // many holds them all down again, which teaches nothing.
                match cap {
                    Some(c) if want > 0.0 && g.bipartite => ((c / want).floor() as usize).max(1),
                    _ => 1,
                }
            })
            .collect();
        let mut batches: Vec<Vec<Pair>> = Vec::new();
        for &p in todo {
            let fits = |b: &Vec<Pair>| {
                let clear = b.iter().all(|&q| {
                    let shares_box = p.0 == q.0 || p.0 == q.1 || p.1 == q.0 || p.1 == q.1;
                    !shares_box && !self.apart.contains(&(p.min(q), p.max(q)))
                });
                clear
                    && groups.iter().zip(&room).all(|(g, &k)| {
                        g.crossing(p.0, p.1).is_none()
                            || b.iter().filter(|q| g.crossing(q.0, q.1).is_some()).count() < k
                    })
            };
            match batches.iter_mut().find(|b| fits(b)) {
                Some(b) => b.push(p),
                None => batches.push(vec![p]),
            }
        }
        batches
    }

    /// The fastest rates seen for `p`.
    pub fn best(&self, p: Pair) -> Option<Rates> {
        self.best.get(&p).copied()
    }

    /// The groups `edges` make: boxes joined by them, split into two sides
    /// where they can be.
    fn groups(&self, edges: &BTreeSet<Pair>) -> Vec<Group> {
        let mut adj: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &(a, b) in edges {
            adj.entry(a).or_default().push(b);
            adj.entry(b).or_default().push(a);
        }
        let mut side: BTreeMap<usize, bool> = BTreeMap::new();
        let mut out = Vec::new();
        for &start in adj.keys() {
            if side.contains_key(&start) {
                continue;
            }
            let members = two_colour(&adj, start, &mut side);
            let within = max_cut(&adj, &members, &mut side);
            let edges = edges.iter().filter(|(a, _)| members.contains(a)).count();
            let bipartite = within as f64 <= NOISE * edges as f64;
            if within > 0 {
                tracing::debug!(
                    "link map: {within} of {edges} contended pair(s) of boxes {members:?} lie \
                     within a side (bipartite: {bipartite})"
                );
            }
            let far = members.iter().copied().filter(|m| side[m]).collect();
            out.push(Group {
                members,
                far,
                bipartite,
                edges: if bipartite { edges - within } else { edges },
            });
        }
        out
    }

    /// The shared bottlenecks the contended pairs show: groups of at least
    /// two contended pairs that were seen carrying two held-down flows at
    /// once one way or the other (a box whose own flows read faster or
    /// slower by chance makes a star of contended pairs around it, and a
    /// star never carries two of its flows at once).
    pub fn bottlenecks(&self) -> Vec<Bottleneck> {
        self.groups(&self.contended)
            .into_iter()
            .filter(|g| g.edges >= 2)
            .filter_map(|g| {
                let pairs = self
                    .best
                    .keys()
                    .filter(|&&(x, y)| g.crossing(x, y).is_some())
                    .count();
                let (sa, sb) = if g.bipartite {
                    let a = g.members.difference(&g.far).copied().collect();
                    (a, g.far.iter().copied().collect())
                } else {
                    (g.members.iter().copied().collect(), Vec::new())
                };
                let ab_mbps = self.capacity(|x, y| g.crossing(x, y) == Some(true));
                let ba_mbps = g
                    .bipartite
                    .then(|| self.capacity(|x, y| g.crossing(x, y) == Some(false)))
                    .flatten();
                if ab_mbps.is_none() && ba_mbps.is_none() {
                    tracing::debug!(
                        "link map: contended boxes {:?} never carried two held flows at once: \
                         no bottleneck",
                        g.members
                    );
                    return None;
                }
                Some(Bottleneck {
                    pairs,
                    ab_mbps,
                    ba_mbps,
                    side_a: sa,
                    side_b: sb,
                    sides_known: g.bipartite,
                })
            })
            .collect()
    }

    /// Two batches per bottleneck group with two sides, to measure what
    /// its link carries each way: as many pairs across it as there are
    /// boxes on its smaller side, measured at once, each oriented from the
    /// first side to the second in the first batch and back in the second.
    /// Only the uploads count ([`Refiner::record_capacity`]): they start
    /// together, while each download starts when its own upload has ended.
    /// Boxes with a pair on their own side held down (behind a queue of
    /// their own, or lossy) come last: their flows do not keep pace.
    pub fn capacity_batches(&self) -> Vec<Vec<(usize, usize)>> {
        let caps = self.capacities();
        let groups = self.groups(&self.contended);
        // A box with a held pair that crosses no group: slow on its own.
        let unsteady: BTreeSet<usize> = self
            .best
            .iter()
            .filter(|(&(a, b), r)| {
                Self::held((a, b), **r, &caps) && groups.iter().all(|g| g.crossing(a, b).is_none())
            })
            .flat_map(|(&(a, b), _)| [a, b])
            .collect();
        let mut out = Vec::new();
        for g in groups.iter().filter(|g| g.bipartite && g.edges >= 2) {
            let steady_first = |side: Vec<usize>| -> Vec<usize> {
                let (mut ok, rest): (Vec<usize>, Vec<usize>) =
                    side.into_iter().partition(|b| !unsteady.contains(b));
                ok.extend(rest);
                ok
            };
            let near = steady_first(g.members.difference(&g.far).copied().collect());
            let far = steady_first(g.far.iter().copied().collect());
            let there: Vec<(usize, usize)> =
                near.iter().copied().zip(far.iter().copied()).collect();
            if there.len() >= 2 {
                out.push(there);
                out.push(far.into_iter().zip(near).collect());
            }
        }
        out
    }

    /// Records a batch of [`Refiner::capacity_batches`]: each oriented pair
    /// `(x, y)` with its rates, `None` where it failed. Only `x -> y` (the
    /// upload, `ab`) counts.
    pub fn record_capacity(&mut self, batch: &[((usize, usize), Option<Rates>)]) {
        let flows = batch
            .iter()
            .filter_map(|&((x, y), r)| r.map(|r| (x, y, r.ab)))
            .collect();
        self.synced.push(flows);
    }

    /// What the flows `x -> y` with `across(x, y)` carried at once, in
    /// the batches where two or more of them were held down: the sum of
    /// the held flows, the median over those batches. Flows not held down
    /// are left out: a pair's flows do not start and end together (each
    /// measurement ends when its own rate is steady), and a flow at its
    /// full rate mostly ran while the others did not, so counting it would
    /// add a link's worth that was never carried at once; a held flow was
    /// held by the others for most of its window. (A flow that was not held
    /// but did share makes the figure low, never high.)
    ///
    /// A synchronized batch ([`Refiner::capacity_batches`]) is better: its
    /// flows start together and all cross; where one saturated the link
    /// (two or more of its flows held down), the link carried the sum of
    /// them all (a flow below its share, a slow box's, left the rest to the
    /// others).
    fn capacity(&self, across: impl Fn(usize, usize) -> bool) -> Option<f64> {
        let caps = self.capacities();
        let mut synced: Vec<f64> = self
            .synced
            .iter()
            .filter_map(|flows| {
                let on: Vec<&(usize, usize, f64)> =
                    flows.iter().filter(|f| across(f.0, f.1)).collect();
                let held = on
                    .iter()
                    .filter(|f| f.2 < HELD * caps.0[f.0].min(caps.1[f.1]))
                    .count();
                (held >= 2).then(|| on.iter().map(|f| f.2).sum())
            })
            .collect();
        if !synced.is_empty() {
            synced.sort_by(f64::total_cmp);
            return Some(synced[synced.len() / 2]);
        }
        let mut sums = Vec::new();
        for batch in &self.history {
            let (mut sum, mut held) = (0.0, 0);
            for &((a, b), r) in batch {
                for (x, y, rate) in [(a, b, r.ab), (b, a, r.ba)] {
                    if across(x, y) && rate < HELD * caps.0[x].min(caps.1[y]) {
                        sum += rate;
                        held += 1;
                    }
                }
            }
            if held >= 2 {
                sums.push(sum);
            }
        }
        sums.sort_by(f64::total_cmp);
        (!sums.is_empty()).then(|| sums[sums.len() / 2])
    }
}

/// Boxes joined by contended pairs: a bottleneck found so far.
#[derive(Debug)]
struct Group {
    members: BTreeSet<usize>,
    /// The second side (the first is the other members).
    far: BTreeSet<usize>,
    /// Whether the members split into two sides.
    bipartite: bool,
    /// Contended pairs among the members.
    edges: usize,
}

impl Group {
    /// Whether a flow `x -> y` crosses this group's bottleneck: `Some(true)`
    /// from the first side to the second, `Some(false)` back (without two
    /// sides, any flow between two members, as `Some(true)`).
    fn crossing(&self, x: usize, y: usize) -> Option<bool> {
        if !(self.members.contains(&x) && self.members.contains(&y)) {
            return None;
        }
        if !self.bipartite {
            return Some(true);
        }
        match (self.far.contains(&x), self.far.contains(&y)) {
            (false, true) => Some(true),
            (true, false) => Some(false),
            _ => None,
        }
    }
}

/// The connected component of `start` in `adj`, two-coloured into `side`
/// (false, true) breadth first; an odd cycle leaves some edges within a
/// side ([`max_cut`] then moves boxes).
fn two_colour(
    adj: &BTreeMap<usize, Vec<usize>>,
    start: usize,
    side: &mut BTreeMap<usize, bool>,
) -> BTreeSet<usize> {
    let mut members = BTreeSet::from([start]);
    side.insert(start, false);
    let mut queue = VecDeque::from([start]);
    while let Some(x) = queue.pop_front() {
        let sx = side[&x];
        for &y in adj.get(&x).into_iter().flatten() {
            if let std::collections::btree_map::Entry::Vacant(e) = side.entry(y) {
                e.insert(!sx);
                members.insert(y);
                queue.push_back(y);
            }
        }
    }
    members
}

/// Moves boxes of `members` to the other side while that leaves fewer
/// edges within a side (each move strictly fewer, so it ends), the box
/// that gains most first; returns the edges left within a side. A few
/// stray edges (noise) then stay within a side instead of splitting the
/// true sides.
fn max_cut(
    adj: &BTreeMap<usize, Vec<usize>>,
    members: &BTreeSet<usize>,
    side: &mut BTreeMap<usize, bool>,
) -> usize {
    let within = |x: usize, side: &BTreeMap<usize, bool>| {
        let n = adj.get(&x).map_or(0, Vec::len);
        let same = adj
            .get(&x)
            .into_iter()
            .flatten()
            .filter(|y| side[*y] == side[&x])
            .count();
        (same, n - same)
    };
    loop {
        let best = members
            .iter()
            .map(|&x| {
                let (same, other) = within(x, side);
                (same as isize - other as isize, x)
            })
            .filter(|&(gain, _)| gain > 0)
            .max();
        match best {
            Some((_, x)) => {
                let s = side[&x];
                side.insert(x, !s);
            }
            None => break,
        }
    }
    members.iter().map(|&x| within(x, side).0).sum::<usize>() / 2
}

#[cfg(test)]
mod tests;
