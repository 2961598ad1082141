//! Discovery time against N, one plot per loss level (`mdns-loss{L}.png`),
//! ours and each peer: median with min-max bars, log scales.

use super::gp::{cell, find, gnuplot, header, title};
use crate::results::{Results, Summary};
use anyhow::Result;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Parses `N=50 loss=20%` into (50, 20).
pub fn parse_mdns_case(case: &str) -> Option<(usize, u8)> {
    // IPv6-only cases are not plotted with the IPv4 ones.
    match crate::sc_mdns::parse_case(case)? {
        (n, loss, false) => Some((n, loss)),
        (_, _, true) => None,
    }
}

/// One PNG per loss level with a finished median.
pub(super) fn plot(r: &Results, s: &[Summary], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut pngs = Vec::new();
    let cases: Vec<(usize, u8)> = s
        .iter()
        .filter(|x| x.scenario == "mdns")
        .filter_map(|x| parse_mdns_case(&x.case))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let losses: BTreeSet<u8> = cases.iter().map(|c| c.1).collect();
    let tools = crate::sc_mdns::TOOLS;
    for loss in losses {
        let ns: Vec<usize> = cases.iter().filter(|c| c.1 == loss).map(|c| c.0).collect();
        let mut data = String::from("# N");
        for t in tools {
            data.push_str(&format!(" \"{t} median\" min max"));
        }
        data.push('\n');
        let mut any = false;
        for n in &ns {
            let case = crate::sc_mdns::case_name(*n, loss);
            data.push_str(&n.to_string());
            for t in tools {
                let m = find(s, "mdns", &case, t, "complete_ms");
                let (med, lo, hi) = m.map_or((None, None, None), |m| (m.median, m.min, m.max));
                any |= med.is_some();
                // Bars only around a median that exists.
                let (lo, hi) = if med.is_some() {
                    (lo, hi)
                } else {
                    (None, None)
                };
                data.push_str(&format!(" {} {} {}", cell(med), cell(lo), cell(hi)));
            }
            data.push('\n');
        }
        if !any {
            continue;
        }
        let dat = dir.join(format!("mdns-loss{loss}.dat"));
        std::fs::write(&dat, &data)?;
        let png = dir.join(format!("mdns-loss{loss}.png"));
        let plots: Vec<String> = tools
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let c = 2 + 3 * k;
                format!(
                    "'{}' using ($1*{:.3}):{c}:{}:{} with yerrorlines lw 2 pt {} title '{t}'",
                    dat.display(),
                    1.0 + 0.04 * k as f64,
                    c + 1,
                    c + 2,
                    5 + 2 * k
                )
            })
            .collect();
        let result = gnuplot(&format!(
            "{}{}\
             set xlabel 'N agents'\nset ylabel 'time until all N resolved (ms, median, min-max)'\n\
             set logscale xy\nset xrange [0.7:{}]\nset xtics ({})\nset grid\nset key top left\n\
             set label 1 'no point: not all N found before the deadline in most runs' at graph 0.99, graph 0.03 right font ',8'\n\
             set datafile missing '?'\nplot {}\n",
            header(&png, 800, 520),
            title(
                &format!("mDNS: all N agents resolved, {loss}% loss on the browser link"),
                r
            ),
            ns.iter().max().copied().unwrap_or(100) as f64 * 1.5,
            ns.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            plots.join(", ")
        ));
        let _ = std::fs::remove_file(&dat);
        result?;
        pngs.push(png);
    }
    Ok(pngs)
}
