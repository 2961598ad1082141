//! `rlx-discover browse`: a one-shot table of the agents on the LAN.

use crate::cli::progress::Bars;
use crate::cli::table::{self, Align, Align::Left, Align::Right, Column};
use anyhow::Result;
use clap::Args;
use rlx_discover::{escape_line, expand_section, untrusted};

use std::process::ExitCode;

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover browse                          # every agent on the LAN
  rlx-discover browse --json                   # the same, for scripts (per-node found_ms)
  rlx-discover browse --browse 800ms --links   # a short listen, and each link measured
  rlx-discover browse --interface eth1 --cluster lab --key-file /etc/rlx/cluster.key
  rlx-discover browse --domain rlx.example.org --dns-server 10.0.0.53   # LAN and wide-area nodes

{}",
        crate::cli::runtime::exit_status(
            "no agent was found, or a problem of yours was reported (with --strict, any \
             refused announcement)"
        )
    )
}

/// Arguments of `browse`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct BrowseArgs {
    /// Where to look and whom to admit.
    #[command(flatten)]
    pub lan: crate::cli::lan::LanArgs,
    /// The most to listen (3s, 800ms; a bare number is ms) [default: 3s,
    /// or browse_ms].
    #[arg(long = "browse", visible_alias = "browse-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub browse_ms: Option<u64>,
    /// Print JSON: {"nodes": [...], "report": {...}}.
    #[arg(long)]
    pub json: bool,
    /// Measure the RTT and throughput to every agent found (a LINK column;
    /// `link` in the JSON): 0.1-0.6 s per node, one at a time per interface.
    #[arg(long)]
    pub links: bool,
    /// With --links: the most each transfer runs, each way (10ms-1s; a bare
    /// number is ms; default 250ms, or link_window_ms); a steady one ends
    /// after 40-60 ms.
    #[arg(long = "link-window", visible_alias = "link-window-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub link_window_ms: Option<u64>,
    /// Exit 1 for every refused announcement, strangers' included.
    #[arg(long)]
    pub strict: bool,
}

/// The table's columns: each as wide as its widest cell (a long Mac host
/// name widens HOST, the rows stay aligned), never narrower than it always
/// was. MEASURED, last, only with --links.
const COLUMNS: &[Column] = &[
    col("HOST", Left, 20, 0),
    col("ADDRESS", Left, 26, 1),
    col("WORKER", Left, 6, 1),
    col("DEVICE", Left, 8, 1),
    col("MEMORY", Right, 10, 1),
    col("CORES", Right, 5, 1),
    col("CLUSTER", Left, 10, 2),
    col("FOUND BY", Left, 16, 1),
    col("MS", Right, 6, 1),
    col("LINK", Left, 8, 2),
    col("MEASURED", Left, 0, 2),
];

const fn col(head: &'static str, align: Align, min: usize, gap: usize) -> Column {
    Column {
        head,
        align,
        min,
        gap,
    }
}

/// A found node's cells, in [`COLUMNS`] order.
fn row(n: &rlx_discover::AddedNode, links: bool) -> Vec<String> {
    let host = if n.hostname.is_empty() {
        &n.host
    } else {
        &n.hostname
    };
    let by: Vec<String> = n.sources.iter().map(|s| s.to_string()).collect();
    // Host and cluster name are whatever the agent (or a stranger) said:
    // one cell each, never a fake row or an escape sequence.
    let mut cells = vec![
        untrusted(host).to_string(),
        escape_line(&n.addr).to_string(),
        // Whether something listens on the worker port in ADDRESS, as its
        // agent saw just now: up, down, or - (no agent said).
        match n.worker_listening {
            // Another program (node_exporter) holds the port.
            Some(false) if n.worker_held_by.is_some() => "held",
            Some(true) => "up",
            Some(false) => "down",
            None => "-",
        }
        .to_string(),
        n.device_cell(),
        n.memory_cell(),
        n.cores.to_string(),
        n.cluster
            .as_deref()
            .map_or_else(|| "-".to_string(), |c| untrusted(c).to_string()),
        format!("{} ({})", by.join("+"), n.evidence),
        n.found_ms.to_string(),
        // Built from the agent's numbers only (no text of its own reaches
        // it), so it needs no quoting.
        n.link_text().unwrap_or_else(|| "-".to_string()),
    ];
    // "-" for a node not measured (the reason is on stderr).
    if links {
        cells.push(
            n.measured_link
                .as_ref()
                .map_or_else(|| "-".to_string(), |l| l.summary()),
        );
    }
    cells
}

/// Browses, admits, selects devices through the one pipeline, and prints.
pub fn run(a: BrowseArgs, quiet: bool, bars: &Bars) -> Result<ExitCode> {
    let mut d = a.lan.section(a.browse_ms, "browse")?;
    if let Some(w) = a.link_window_ms {
        d.link_window_ms = w;
    }
    d.measure_links |= a.links;
    let links = d.measure_links;
    let exp = crate::cli::runtime::runtime()?.block_on(expand_section(&d, bars))?;
    if a.json {
        let v = serde_json::json!({
            "v": crate::cli::runtime::JSON_VERSION,
            "nodes": exp.added(),
            "report": exp.report,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if !exp.added().is_empty() {
        let rows: Vec<Vec<String>> = exp.added().iter().map(|n| row(n, links)).collect();
        let cols = if links {
            COLUMNS
        } else {
            &COLUMNS[..COLUMNS.len() - 1]
        };
        print!("{}", table::render(cols, &rows));
    }
    if !quiet {
        let r = &exp.report;
        for f in &r.failed {
            eprintln!("  {} {}", f.mark(), f.line());
        }
        for u in &r.unheard_by_mdns {
            eprintln!("  ? {}", escape_line(&u.render_text()));
        }
        for d in &r.skipped_devices {
            eprintln!(
                "  - {}",
                escape_line(&format!("{}: skipped device {}", d.addr, d.why))
            );
        }
        for c in &r.clashes {
            eprintln!("  ! {}", escape_line(&c.render_text()));
        }
        for w in &r.warnings {
            eprintln!("  ? {}", escape_line(w));
        }
        for l in &r.link_problems {
            eprintln!(
                "  ? {}",
                escape_line(&format!("link to {} not measured: {}", l.addr, l.why))
            );
        }
        for t in r.tried.iter().filter(|_| !exp.added().is_empty()) {
            eprintln!(
                "tried {}: {} ({} answered, {} ms)",
                t.source, t.what, t.answered, t.elapsed_ms
            );
        }
        if exp.added().is_empty() {
            eprint!("{}", r.empty_hint());
        }
    }
    Ok(
        if exp.added().is_empty() || exp.report.fails_run(a.strict) {
            ExitCode::from(rlx_proto::exit::NEEDS_A_LOOK)
        } else {
            ExitCode::SUCCESS
        },
    )
}
