//! The scan times per block size and tool (`scan.png`).

use super::gp::{cell, find, gnuplot, header, title};
use crate::results::{Results, Summary};
use anyhow::Result;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Median wall time per block size and tool; none without scan samples.
pub(super) fn plot(r: &Results, s: &[Summary], dir: &Path) -> Result<Option<PathBuf>> {
    let scan: Vec<&Summary> = s
        .iter()
        .filter(|x| x.scenario == "scan" && x.metric == "wall_ms")
        .collect();
    if scan.is_empty() {
        return Ok(None);
    }
    let blocks = ["/24", "/20", "/16"];
    let mut tools: Vec<String> = scan
        .iter()
        .map(|x| x.tool.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Ours first, then the peers.
    tools.sort_by_key(|t| (!t.starts_with("rlx"), t.contains("computed"), t.clone()));
    let mut data = String::from("# block");
    for t in &tools {
        data.push_str(&format!(" \"{t}\""));
    }
    data.push('\n');
    for b in blocks {
        data.push_str(&format!("\"{b}\""));
        for t in &tools {
            let m = find(s, "scan", b, t, "wall_ms").and_then(|m| m.median);
            data.push_str(&format!(" {}", cell(m.map(|v| v / 1000.0))));
        }
        data.push('\n');
    }
    let dat = dir.join("scan.dat");
    std::fs::write(&dat, &data)?;
    let png = dir.join("scan.png");
    let plots: Vec<String> = tools
        .iter()
        .enumerate()
        .map(|(k, t)| {
            format!(
                "'{}' using {}:xtic(1) title '{}'",
                dat.display(),
                k + 2,
                t.replace('\'', "")
            )
        })
        .collect();
    let result = gnuplot(&format!(
        "{}{}\
         set xlabel 'block scanned'\nset ylabel 'wall time (s, median; log scale)'\nset logscale y\nset grid ytics\n\
         set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n\
         set boxwidth 0.9\nset key top left\nset datafile missing '?'\nset yrange [0.01:*]\nplot {}\n",
        header(&png, 800, 480),
        title(
            "TCP scan, 3 live hosts, all others silent, 300 ms timeout",
            r
        ),
        plots.join(", ")
    ));
    let _ = std::fs::remove_file(&dat);
    result?;
    Ok(Some(png))
}
