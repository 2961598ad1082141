//! **A map kept up to date** — when a box joins, only its pairs are new:
//! a map measured before (`links --map links.json`) answers every pair of
//! boxes it already had, and only the others are measured. A box counts
//! as the same when its agent reports the same id, at the same `addr`,
//! with the same addresses on its links (a box that moved or gained a
//! cable is measured again); a pair the previous map has no path for is
//! measured again too (it may have been a moment's failure).

use super::map::{BoxLinks, LinkMap, PairLinks};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// What the previous map answers for the boxes of a new one.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// For each pair `(a, b)` of the new boxes (`a < b`) that the previous
    /// map answers: its pair, re-indexed to the new boxes.
    pub pairs: Vec<PairLinks>,
    /// The pairs still to measure, `(a, b)` with `a < b`.
    pub todo: Vec<(usize, usize)>,
}

/// A box's addresses, as a set (their order in the caps does not matter).
fn addrs(b: &BoxLinks) -> BTreeSet<IpAddr> {
    b.links
        .iter()
        .flat_map(|l| l.addrs.iter().map(|a| a.to_canonical()))
        .collect()
}

/// The previous map's box that is the same as `b`, if any.
fn same(previous: &LinkMap, b: &BoxLinks) -> Option<usize> {
    previous
        .boxes
        .iter()
        .position(|p| !p.id.is_empty() && p.id == b.id && p.addr == b.addr && addrs(p) == addrs(b))
}

/// Splits the pairs of `boxes` into those `previous` answers (re-indexed)
/// and those to measure. A previous map of another schema version answers
/// nothing.
pub fn carry(previous: &LinkMap, boxes: &[BoxLinks]) -> Carried {
    let was: Vec<Option<usize>> = if previous.v == 1 {
        boxes.iter().map(|b| same(previous, b)).collect()
    } else {
        vec![None; boxes.len()]
    };
    let mut pairs = Vec::new();
    let mut todo = Vec::new();
    for a in 0..boxes.len() {
        for b in a + 1..boxes.len() {
            let old = match (was[a], was[b]) {
                (Some(pa), Some(pb)) => previous.pair(pa, pb).filter(|p| !p.paths.is_empty()),
                _ => None,
            };
            match old {
                Some(p) => {
                    // Stored from the lower old index's side: swap when
                    // the new order turned the pair round.
                    let flipped = was[a] > was[b];
                    let mut paths = p.paths.clone();
                    if flipped {
                        for x in &mut paths {
                            std::mem::swap(&mut x.a_addr, &mut x.b_addr);
                            std::mem::swap(&mut x.ab_mbps, &mut x.ba_mbps);
                            std::mem::swap(&mut x.ab_udp, &mut x.ba_udp);
                            for n in &mut x.udp_notes {
                                *n = turned(n);
                            }
                        }
                    }
                    pairs.push(PairLinks {
                        a,
                        b,
                        paths,
                        failed: p.failed.clone(),
                    });
                }
                None => todo.push((a, b)),
            }
        }
    }
    Carried { pairs, todo }
}

/// A path note of the map (`a -> b: ...`, `b -> a: ...`) for the pair
/// turned round.
fn turned(note: &str) -> String {
    if let Some(rest) = note.strip_prefix("a -> b: ") {
        format!("b -> a: {rest}")
    } else if let Some(rest) = note.strip_prefix("b -> a: ") {
        format!("a -> b: {rest}")
    } else {
        note.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::map::PathLink;
    use super::*;
    use rlx_proto::caps::LinkInfo;

    fn boxed(i: u8) -> BoxLinks {
        BoxLinks {
            addr: format!("10.0.0.{i}:9100"),
            id: format!("id{i}"),
            hostname: format!("b{i}"),
            agent: format!("10.0.0.{i}:6184"),
            ssh: None,
            links: vec![LinkInfo {
                name: "eth0".into(),
                kind: "ethernet".into(),
                speed_mbps: None,
                mtu: 1500,
                addrs: vec![format!("10.0.0.{i}").parse().unwrap()],
                rdma: false,
            }],
        }
    }

    fn pair(a: usize, b: usize, ab: f64, ba: f64) -> PairLinks {
        PairLinks {
            a,
            b,
            paths: vec![PathLink {
                a_addr: format!("10.0.0.{}", a + 1).parse().unwrap(),
                b_addr: format!("10.0.0.{}", b + 1).parse().unwrap(),
                kind: "ethernet".into(),
                ab_mbps: ab,
                ba_mbps: ba,
                rtt_ms: 0.2,
                ab_udp: None,
                ba_udp: None,
                udp_notes: vec![],
            }],
            failed: Vec::new(),
        }
    }

    fn map(boxes: Vec<BoxLinks>, pairs: Vec<PairLinks>) -> LinkMap {
        LinkMap {
            v: 1,
            boxes,
            pairs,
            skipped: Vec::new(),
            bottlenecks: vec![],
            took_ms: 1,
        }
    }

    #[test]
    fn a_box_that_joins_has_only_its_pairs_measured() {
        let before = map(
            vec![boxed(1), boxed(2), boxed(3)],
            vec![
                pair(0, 1, 100.0, 90.0),
                pair(0, 2, 50.0, 40.0),
                pair(1, 2, 10.0, 9.0),
            ],
        );
        let now = vec![boxed(1), boxed(2), boxed(3), boxed(4)];
        let c = carry(&before, &now);
        assert_eq!(c.todo, vec![(0, 3), (1, 3), (2, 3)]);
        assert_eq!(c.pairs.len(), 3);
        assert_eq!(c.pairs[2], pair(1, 2, 10.0, 9.0));
    }

    #[test]
    fn a_reordered_pair_keeps_each_direction_its_own_figure() {
        let before = map(vec![boxed(1), boxed(2)], vec![pair(0, 1, 100.0, 20.0)]);
        // The file now lists box 2 first.
        let c = carry(&before, &[boxed(2), boxed(1)]);
        assert!(c.todo.is_empty());
        let p = &c.pairs[0].paths[0];
        assert_eq!((p.a_addr.to_string(), p.ab_mbps), ("10.0.0.2".into(), 20.0));
        assert_eq!(
            (p.b_addr.to_string(), p.ba_mbps),
            ("10.0.0.1".into(), 100.0)
        );
    }

    #[test]
    fn a_box_with_new_addresses_or_a_pair_with_no_path_is_measured_again() {
        let mut failed = pair(0, 2, 0.0, 0.0);
        failed.paths.clear();
        let before = map(
            vec![boxed(1), boxed(2), boxed(3)],
            vec![pair(0, 1, 100.0, 90.0), failed, pair(1, 2, 10.0, 9.0)],
        );
        let mut moved = boxed(2);
        moved.links[0].addrs.push("169.254.0.2".parse().unwrap());
        let c = carry(&before, &[boxed(1), moved, boxed(3)]);
        assert_eq!(c.todo, vec![(0, 1), (0, 2), (1, 2)]);
        let mut other = before.clone();
        other.v = 2;
        assert_eq!(carry(&other, &[boxed(1), boxed(2)]).todo, vec![(0, 1)]);
    }
}
