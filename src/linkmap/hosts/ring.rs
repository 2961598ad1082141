//! **Which ring** — an order of the boxes whose slowest ring hop is as fast
//! as can be, judged on each pair's fastest measured path.
//!
//! A ring collective (all-reduce: reduce-scatter then all-gather) moves
//! the same bytes over every hop in lock step, so the ring runs at the
//! pace of its slowest hop: the goal is the *bottleneck*, not the sum.
//! Ties on the bottleneck go to the larger sum of hops (the next slowest
//! hops matter for the other collectives), then to the earlier order, so
//! the cluster file's own order is kept whenever nothing beats it.
//!
//! - n <= [`EXACT_UP_TO`]: exact, every order with box 0 as rank 0
//!   ((n-1)! orders: 40 320 for 9 boxes, a few milliseconds).
//! - larger: a greedy widest-next-hop tour from box 0, then 2-opt moves
//!   (reverse a stretch of the ring) while one improves the bottleneck or,
//!   at the same bottleneck, the sum. Good, not proven best.

/// Largest number of boxes searched exhaustively.
pub(super) const EXACT_UP_TO: usize = 9;

/// How good a ring is: its slowest hop, then the sum of its hops.
fn score(order: &[usize], w: &dyn Fn(usize, usize) -> f64) -> (f64, f64) {
    let n = order.len();
    let mut slowest = f64::INFINITY;
    let mut sum = 0.0;
    for k in 0..n {
        let h = w(order[k], order[(k + 1) % n]);
        slowest = slowest.min(h);
        sum += h;
    }
    (slowest, sum)
}

fn better(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}

/// The ring order (box indices, box 0 first) and whether it is proven the
/// best: `w(i, j)` is what a hop between boxes `i` and `j` can carry.
pub(super) fn fastest(n: usize, w: &dyn Fn(usize, usize) -> f64) -> (Vec<usize>, bool) {
    let file: Vec<usize> = (0..n).collect();
    if n <= 3 {
        // Every ring of three or fewer boxes has the same hops.
        return (file, true);
    }
    if n <= EXACT_UP_TO {
        return (exact(n, w), true);
    }
    (two_opt(greedy(n, w), w), false)
}

/// Every order of boxes 1..n after box 0, in lexicographic order.
fn exact(n: usize, w: &dyn Fn(usize, usize) -> f64) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..n).collect();
    let mut best = perm.clone();
    let mut best_score = score(&perm, w);
    while next_permutation(&mut perm[1..]) {
        let s = score(&perm, w);
        if better(s, best_score) {
            best_score = s;
            best.clone_from(&perm);
        }
    }
    best
}

/// The next lexicographic permutation in place; false after the last.
fn next_permutation(v: &mut [usize]) -> bool {
    if v.len() < 2 {
        return false;
    }
    let mut i = v.len() - 1;
    while i > 0 && v[i - 1] >= v[i] {
        i -= 1;
    }
    if i == 0 {
        return false;
    }
    let mut j = v.len() - 1;
    while v[j] <= v[i - 1] {
        j -= 1;
    }
    v.swap(i - 1, j);
    v[i..].reverse();
    true
}

/// From box 0, always on to the unvisited box with the widest hop (the
/// lower index on a tie).
fn greedy(n: usize, w: &dyn Fn(usize, usize) -> f64) -> Vec<usize> {
    let mut order = vec![0];
    let mut left: Vec<usize> = (1..n).collect();
    while !left.is_empty() {
        let cur = *order.last().expect("starts with box 0");
        let mut pick = 0;
        for (k, &b) in left.iter().enumerate() {
            if w(cur, b) > w(cur, left[pick]) {
                pick = k;
            }
        }
        order.push(left.remove(pick));
    }
    order
}

/// 2-opt: reverse `order[i..=j]` (box 0 stays first) while that improves
/// the ring; bounded, so a plateau cannot loop.
fn two_opt(mut order: Vec<usize>, w: &dyn Fn(usize, usize) -> f64) -> Vec<usize> {
    let n = order.len();
    let mut cur = score(&order, w);
    for _round in 0..n * n {
        let mut improved = false;
        for i in 1..n - 1 {
            for j in i + 1..n {
                order[i..=j].reverse();
                let s = score(&order, w);
                if better(s, cur) {
                    cur = s;
                    improved = true;
                } else {
                    order[i..=j].reverse();
                }
            }
        }
        if !improved {
            break;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring 0-2-4-...-1 of fast links, everything else slow.
    fn weights(n: usize) -> impl Fn(usize, usize) -> f64 {
        let mut fast: Vec<usize> = (0..n).step_by(2).collect();
        fast.extend((1..n).step_by(2).rev());
        move |a, b| {
            let pa = fast.iter().position(|&x| x == a).unwrap();
            let pb = fast.iter().position(|&x| x == b).unwrap();
            let d = pa.abs_diff(pb);
            if d == 1 || d == n - 1 {
                1000.0
            } else {
                10.0
            }
        }
    }

    #[test]
    fn the_exact_search_and_the_heuristic_both_find_a_hidden_fast_ring() {
        for n in [4, 6, 9, 12, 16] {
            let w = weights(n);
            let (order, exact) = fastest(n, &w);
            assert_eq!(exact, n <= EXACT_UP_TO, "n={n}");
            assert_eq!(order[0], 0);
            assert_eq!(score(&order, &w).0, 1000.0, "n={n}: {order:?}");
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn equal_links_keep_the_file_order() {
        let (order, _) = fastest(7, &|_, _| 100.0);
        assert_eq!(order, (0..7).collect::<Vec<_>>());
    }
}
