//! **PNG plots with gnuplot** — discovery time against N, one plot per loss
//! level, ours and each peer (median with min-max bars, log scales), and the
//! scan times per block size.

use crate::results::{Results, Summary};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn find<'a>(
    s: &'a [Summary],
    scenario: &str,
    case: &str,
    tool: &str,
    metric: &str,
) -> Option<&'a Summary> {
    s.iter()
        .find(|x| x.scenario == scenario && x.case == case && x.tool == tool && x.metric == metric)
}

/// Parses `N=50 loss=20%` into (50, 20).
pub fn parse_mdns_case(case: &str) -> Option<(usize, u8)> {
    // IPv6-only cases are not plotted with the IPv4 ones.
    match crate::sc_mdns::parse_case(case)? {
        (n, loss, false) => Some((n, loss)),
        (_, _, true) => None,
    }
}

fn gnuplot(script: &str) -> Result<()> {
    let mut child = Command::new("gnuplot")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run gnuplot (apt-get install gnuplot-nox)")?;
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "gnuplot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn cell(x: Option<f64>) -> String {
    x.map_or("?".into(), |v| format!("{v:.3}"))
}

/// Writes every plot into `dir`; returns the PNG paths.
pub fn plot_all(r: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let s = r.summaries();
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
                let m = find(&s, "mdns", &case, t, "complete_ms");
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
        gnuplot(&format!(
            "set terminal pngcairo size 800,520 font 'sans,10'\nset output '{}'\n\
             set title 'mDNS: all N agents resolved, {loss}% loss on the browser link ({} mode)'\n\
             set xlabel 'N agents'\nset ylabel 'time until all N resolved (ms, median, min-max)'\n\
             set logscale xy\nset xrange [0.7:{}]\nset xtics ({})\nset grid\nset key top left\n\
             set label 1 'no point: not all N found before the deadline in most runs' at graph 0.99, graph 0.03 right font ',8'\n\
             set datafile missing '?'\nplot {}\n",
            png.display(),
            r.mode,
            ns.iter().max().copied().unwrap_or(100) as f64 * 1.5,
            ns.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            plots.join(", ")
        ))?;
        let _ = std::fs::remove_file(&dat);
        pngs.push(png);
    }

    // Scan: median wall time per block size and tool.
    let scan: Vec<&Summary> = s
        .iter()
        .filter(|x| x.scenario == "scan" && x.metric == "wall_ms")
        .collect();
    if !scan.is_empty() {
        let blocks = ["/24", "/20", "/16"];
        let tools: Vec<String> = scan
            .iter()
            .map(|x| x.tool.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut tools = tools;
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
                let m = find(&s, "scan", b, t, "wall_ms").and_then(|m| m.median);
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
        gnuplot(&format!(
            "set terminal pngcairo size 800,480 font 'sans,10'\nset output '{}'\n\
             set title 'TCP scan, 3 live hosts, all others silent, 300 ms timeout ({} mode)'\n\
             set ylabel 'wall time (s, median; log scale)'\nset logscale y\nset grid ytics\n\
             set style data histogram\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n\
             set boxwidth 0.9\nset key top left\nset datafile missing '?'\nset yrange [0.01:*]\nplot {}\n",
            png.display(),
            r.mode,
            plots.join(", ")
        ))?;
        let _ = std::fs::remove_file(&dat);
        pngs.push(png);
    }
    Ok(pngs)
}
