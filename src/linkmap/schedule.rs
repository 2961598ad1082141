//! **Who measures whom, when** — a round-robin tournament (the circle
//! method): `n - 1` rounds (n even; `n` rounds for odd n, one box resting
//! each round) of disjoint pairs, every pair exactly once. Each box is in
//! at most one pair per round, so the rounds run in parallel without two
//! measurements sharing an agent, and the wall time grows like `n`.

/// The rounds for `n` boxes: each a list of pairs `(a, b)`, `a < b`.
pub fn tournament(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // An odd field gets a phantom box; its partner rests that round.
    let m = n + n % 2;
    let mut ring: Vec<usize> = (0..m).collect();
    let mut rounds = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let round = (0..m / 2)
            .map(|k| (ring[k], ring[m - 1 - k]))
            .filter(|&(a, b)| a < n && b < n)
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        rounds.push(round);
        // Box 0 stays; the others turn one place.
        let last = ring.pop().expect("m >= 2");
        ring.insert(1, last);
    }
    rounds
}

/// Rounds for some of the pairs (those a map kept up to date still
/// needs): greedily, each round takes every remaining pair whose two
/// boxes are still free in it, in the order given. Every pair once, no
/// box twice in a round; a box in `k` pairs takes at least `k` rounds, so
/// a newcomer's pairs with every other box run one after the other.
pub fn rounds(pairs: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut left: Vec<(usize, usize)> = pairs.to_vec();
    let mut out = Vec::new();
    while !left.is_empty() {
        let mut busy = std::collections::BTreeSet::new();
        let mut round = Vec::new();
        left.retain(|&(a, b)| {
            if busy.contains(&a) || busy.contains(&b) {
                return true;
            }
            busy.insert(a);
            busy.insert(b);
            round.push((a, b));
            false
        });
        out.push(round);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn some_pairs_run_once_each_with_no_box_twice_in_a_round() {
        // Box 4 joins a map of 0..4, and the pair 1-2 is measured again.
        let pairs = [(0, 4), (1, 4), (2, 4), (3, 4), (1, 2)];
        let r = rounds(&pairs);
        let mut seen = BTreeSet::new();
        for round in &r {
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert!(busy.insert(a) && busy.insert(b), "{round:?}");
                assert!(seen.insert((a, b)));
            }
        }
        assert_eq!(seen.len(), pairs.len());
        assert_eq!(
            r.len(),
            4,
            "the newcomer's four pairs, 1-2 beside one: {r:?}"
        );
        assert!(rounds(&[]).is_empty());
    }

    #[test]
    fn every_pair_is_measured_once_and_no_box_twice_in_a_round() {
        for n in 0..=17 {
            let rounds = tournament(n);
            let mut seen = BTreeSet::new();
            for round in &rounds {
                let mut busy = BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < n, "n={n}: {a},{b}");
                    assert!(
                        busy.insert(a) && busy.insert(b),
                        "n={n}: a box twice in {round:?}"
                    );
                    assert!(seen.insert((a, b)), "n={n}: ({a},{b}) twice");
                }
            }
            assert_eq!(seen.len(), n * n.saturating_sub(1) / 2, "n={n}: every pair");
            let want_rounds = if n < 2 { 0 } else { n - 1 + n % 2 };
            assert_eq!(rounds.len(), want_rounds, "n={n}: rounds");
        }
    }

    #[test]
    fn sixteen_boxes_take_fifteen_rounds_of_eight_pairs() {
        let r = tournament(16);
        assert_eq!(r.len(), 15);
        assert!(r.iter().all(|round| round.len() == 8));
    }
}
