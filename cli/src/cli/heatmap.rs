//! `links --svg`: the link map as a heat map. One row per box sending,
//! one column per box receiving; each cell is the fastest path's
//! throughput in that direction, coloured on a log scale from the
//! slowest direction measured to the fastest, with the figure written in
//! it and the path's details as its tooltip. A pair with no measured
//! path is a crossed white cell whose tooltip says why.
//!
//! The document is composed with the `svg` crate. Host names and failure
//! reasons come from the network: they are made printable first
//! ([`escape_line`]) and only ever placed as text content, which the
//! crate escapes, never in an attribute (whose `"` it does not escape).

use rlx_discover::escape_line;
use rlx_discover::linkmap::{LinkMap, PathLink};
use rlx_proto::handshake::rate_text;
use svg::node::element::{Group, Line, Rectangle, Text, Title};
use svg::Document;

/// A cell's size, px.
const CELL_W: usize = 76;
const CELL_H: usize = 30;
/// Room for the row labels (left) and the column labels (top).
const LEFT: usize = 150;
const TOP: usize = 130;
/// The title, the five swatches of the scale and the note need this much.
const MIN_WIDTH: usize = 660;

/// The fastest path from box `i` to box `j`: its throughput in that
/// direction, and the path.
fn fastest(map: &LinkMap, i: usize, j: usize) -> Option<(f64, &PathLink)> {
    let pair = map.pair(i, j)?;
    pair.paths
        .iter()
        .map(|p| (if i < j { p.ab_mbps } else { p.ba_mbps }, p))
        .max_by(|x, y| x.0.total_cmp(&y.0))
}

/// A colour from slow (dark purple) to fast (yellow), `t` in 0..=1: the
/// viridis palette's end points and three stops between, interpolated.
fn colour(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let k = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - k as f64;
    let (a, b) = (STOPS[k], STOPS[k + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Dark text on the light end of the palette, white on the dark end.
fn ink(t: f64) -> &'static str {
    if t > 0.55 {
        "#111111"
    } else {
        "#ffffff"
    }
}

/// A box's label: its host name, or its address when it has none.
fn label(map: &LinkMap, b: usize) -> String {
    let x = &map.boxes[b];
    let name = if x.hostname.is_empty() {
        &x.addr
    } else {
        &x.hostname
    };
    escape_line(name)
}

fn text(x: usize, y: usize, s: String) -> Text {
    Text::new(s)
        .set("x", x)
        .set("y", y)
        .set("font-family", "sans-serif")
        .set("font-size", 12)
}

/// The heat map of `map` as an SVG document.
pub fn render(map: &LinkMap) -> String {
    let n = map.boxes.len();
    let rates: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .filter_map(|(i, j)| fastest(map, i, j).map(|(r, _)| r))
        .filter(|r| *r > 0.0)
        .collect();
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().copied().fold(0.0, f64::max);
    // Position on the log scale; one rate (or none) sits in the middle.
    let scale = |r: f64| {
        if hi > lo {
            (r.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln())
        } else {
            0.5
        }
    };
    // Wide enough for the grid, and for the title, the scale and the note
    // below it when the grid is narrow (two or three boxes).
    let width = (LEFT + n * CELL_W + 20).max(MIN_WIDTH);
    let height = TOP + n * CELL_H + 70;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, width, height))
        .set("width", width)
        .set("height", height)
        .add(
            Rectangle::new()
                .set("width", width)
                .set("height", height)
                .set("fill", "#ffffff"),
        )
        .add(
            text(
                10,
                20,
                format!(
                    "Link map: {} box(es), {} pair(s), measured in {:.1} s",
                    n,
                    map.pairs.len(),
                    map.took_ms as f64 / 1000.0
                ),
            )
            .set("font-size", 14)
            .set("font-weight", "bold"),
        )
        .add(text(
            10,
            38,
            "row sends to column: the fastest path's throughput (log colour scale)".into(),
        ));
    for b in 0..n {
        let y = TOP + b * CELL_H + CELL_H / 2 + 4;
        doc = doc.add(
            text(LEFT - 8, y, label(map, b))
                .set("text-anchor", "end")
                .add(Title::new(escape_line(&map.boxes[b].addr))),
        );
        let x = LEFT + b * CELL_W + CELL_W / 2;
        doc = doc.add(
            text(x, TOP - 8, label(map, b))
                .set("transform", format!("rotate(-40 {x} {})", TOP - 8)),
        );
    }
    for i in 0..n {
        for j in 0..n {
            let (x, y) = (LEFT + j * CELL_W, TOP + i * CELL_H);
            let cell = Rectangle::new()
                .set("x", x)
                .set("y", y)
                .set("width", CELL_W)
                .set("height", CELL_H)
                .set("stroke", "#ffffff");
            let mut g = Group::new();
            if i == j {
                g = g.add(cell.set("fill", "#e8e8e8"));
            } else if let Some((rate, p)) = fastest(map, i, j) {
                let t = scale(rate);
                let (from, to) = map.path_from(i, j, p);
                let paths = map.pair(i, j).map_or(0, |x| x.paths.len());
                let tip = format!(
                    "{} -> {}: {} over {from} -> {to} ({}), RTT {:.2} ms; {paths} path(s) measured",
                    label(map, i),
                    label(map, j),
                    rate_text(rate),
                    escape_line(&p.kind),
                    p.rtt_ms
                );
                g = g
                    .add(cell.set("fill", colour(t)))
                    .add(
                        text(x + CELL_W / 2, y + CELL_H / 2 + 4, rate_text(rate))
                            .set("text-anchor", "middle")
                            .set("font-size", 11)
                            .set("fill", ink(t)),
                    )
                    .add(Title::new(tip));
                if p.is_thunderbolt() {
                    g = g.add(
                        Rectangle::new()
                            .set("x", x + 2)
                            .set("y", y + 2)
                            .set("width", CELL_W - 4)
                            .set("height", CELL_H - 4)
                            .set("fill", "none")
                            .set("stroke", "#d62728")
                            .set("stroke-width", 2),
                    );
                }
            } else {
                let why = map
                    .pair(i, j)
                    .map(|p| p.failed.iter().map(|f| escape_line(f)).collect::<Vec<_>>())
                    .unwrap_or_default();
                let tip = if why.is_empty() {
                    format!("{} -> {}: not measured", label(map, i), label(map, j))
                } else {
                    format!(
                        "{} -> {}: no path: {}",
                        label(map, i),
                        label(map, j),
                        why.join("; ")
                    )
                };
                let cross = |x1: usize, y1: usize, x2: usize, y2: usize| {
                    Line::new()
                        .set("x1", x1)
                        .set("y1", y1)
                        .set("x2", x2)
                        .set("y2", y2)
                        .set("stroke", "#d62728")
                };
                g = g
                    .add(cell.set("fill", "#ffffff").set("stroke", "#d62728"))
                    .add(cross(x, y, x + CELL_W, y + CELL_H))
                    .add(cross(x + CELL_W, y, x, y + CELL_H))
                    .add(Title::new(tip));
            }
            doc = doc.add(g);
        }
    }
    // The scale: five swatches from the slowest to the fastest direction.
    let ly = TOP + n * CELL_H + 24;
    if hi > 0.0 {
        for k in 0..5 {
            let t = k as f64 / 4.0;
            let rate = if hi > lo {
                (lo.ln() + t * (hi.ln() - lo.ln())).exp()
            } else {
                hi
            };
            let x = LEFT + k * 90;
            doc = doc
                .add(
                    Rectangle::new()
                        .set("x", x)
                        .set("y", ly)
                        .set("width", 20)
                        .set("height", 14)
                        .set("fill", colour(if hi > lo { t } else { 0.5 })),
                )
                .add(text(x + 24, ly + 12, rate_text(rate)).set("font-size", 11));
        }
    }
    doc = doc.add(text(
        LEFT,
        ly + 36,
        "red frame: a Thunderbolt path; crossed: no path measured (hover for why)".into(),
    ));
    let mut s = doc.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_discover::linkmap::{BoxLinks, PairLinks};

    fn map() -> LinkMap {
        let b = |i: usize, name: &str| BoxLinks {
            addr: format!("10.0.0.{i}:9100"),
            id: format!("id{i}"),
            hostname: name.into(),
            agent: format!("10.0.0.{i}:6184"),
            ssh: None,
            links: Vec::new(),
        };
        let path = |a: &str, b: &str, ab: f64, ba: f64, kind: &str| PathLink {
            a_addr: a.parse().unwrap(),
            b_addr: b.parse().unwrap(),
            kind: kind.into(),
            ab_mbps: ab,
            ba_mbps: ba,
            rtt_ms: 0.3,
            ab_udp: None,
            ba_udp: None,
            udp_notes: vec![],
        };
        LinkMap {
            v: 1,
            boxes: vec![b(1, "gpu-a"), b(2, "<script>x</script>"), b(3, "mac")],
            pairs: vec![
                PairLinks {
                    a: 0,
                    b: 1,
                    paths: vec![path("10.0.0.1", "10.0.0.2", 100.0, 20.0, "ethernet")],
                    failed: Vec::new(),
                },
                PairLinks {
                    a: 0,
                    b: 2,
                    paths: vec![path(
                        "169.254.0.1",
                        "169.254.0.3",
                        9000.0,
                        8000.0,
                        "thunderbolt",
                    )],
                    failed: Vec::new(),
                },
                PairLinks {
                    a: 1,
                    b: 2,
                    paths: Vec::new(),
                    failed: vec!["10.0.0.2:9100 -> 10.0.0.3: \"refused\"".into()],
                },
            ],
            skipped: Vec::new(),
            bottlenecks: vec![],
            took_ms: 1500,
        }
    }

    #[test]
    fn each_direction_shows_its_own_fastest_rate_and_a_missing_pair_says_why() {
        let s = render(&map());
        assert!(s.starts_with("<svg"), "{s}");
        // A cell's label is a text element's content, on its own line.
        let label = |t: &str| s.lines().any(|l| l.trim() == t);
        for rate in ["100 Mbit/s", "20 Mbit/s", "9.0 Gbit/s", "8.0 Gbit/s"] {
            assert!(label(rate), "no cell says {rate}: {s}");
        }
        assert!(s.contains("no path: 10.0.0.2:9100 -&gt; 10.0.0.3"), "{s}");
        assert!(s.contains("#d62728"), "the Thunderbolt pair is framed");
    }

    #[test]
    fn a_host_name_from_the_network_cannot_add_markup_to_the_picture() {
        let s = render(&map());
        assert!(!s.contains("<script"), "{s}");
        assert!(s.contains("&lt;script&gt;"), "{s}");
    }

    #[test]
    fn the_slowest_direction_is_darkest_and_the_fastest_lightest() {
        assert_eq!(colour(0.0), "#440154");
        assert_eq!(colour(1.0), "#fde725");
        assert_eq!(ink(0.0), "#ffffff");
        assert_eq!(ink(1.0), "#111111");
    }
}
