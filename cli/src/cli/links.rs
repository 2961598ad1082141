//! `rlx-discover links`: the all-pairs link map of the cluster in CONFIG,
//! measured by the agents themselves ([`rlx_discover::linkmap`]), as a
//! table or JSON.

use crate::cli::table::{self, Align::Left, Align::Right, Column};
use anyhow::{bail, Result};
use clap::Args;
use rlx_discover::linkmap::{
    hosts_json, measure_map, targets, HostsOptions, LinkMap, MapOptions, RingOrder,
};
use rlx_discover::{escape_line, expand_config, ClusterConfig, Overrides, Silent};
use rlx_proto::handshake::rate_text;
use std::path::PathBuf;
use std::process::ExitCode;

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover links cluster.toml           # every pair of boxes, measured both ways
  rlx-discover links cluster.toml --json    # the map, for scripts
  rlx-discover links cluster.toml --hosts-json hosts.json --ring fastest
  rlx-discover links cluster.toml --link-window 100ms --key-file /etc/rlx/cluster.key

{}",
        crate::cli::runtime::exit_status(
            "a box's agent did not answer, or a pair of boxes has no path measured"
        )
    )
}

/// Arguments of `links`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct LinksArgs {
    /// The cluster file: its nodes, and its [discover] (the key is required).
    pub config: PathBuf,
    /// Print the map as JSON ({"v":1,"boxes":[...],"pairs":[...]}).
    #[arg(long)]
    pub json: bool,
    /// The cluster key file [default: [discover] key_file].
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// The most each transfer runs, each way (10ms-1s; a bare number is ms;
    /// default 250ms, or link_window_ms).
    #[arg(long = "link-window", visible_alias = "link-window-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub link_window_ms: Option<u64>,
    /// Write the runtime's hosts.json for its process group here, from the
    /// map (docs/guide.md, "hosts.json for the process group").
    #[arg(long, value_name = "PATH")]
    pub hosts_json: Option<PathBuf>,
    /// With --hosts-json: the ranks in the cluster file's order (`file`) or
    /// in the ring order whose slowest hop is fastest (`fastest`).
    #[arg(long, value_enum, default_value_t = Ring::File, value_name = "ORDER")]
    pub ring: Ring,
}

/// The rank order of a written hosts.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Ring {
    /// The cluster file's node order.
    File,
    /// The order whose slowest ring hop is fastest.
    Fastest,
}

/// Measures and prints the map.
pub fn run(a: LinksArgs) -> Result<ExitCode> {
    let cfg = ClusterConfig::load(&a.config)?;
    if cfg.discover.is_none() {
        bail!(
            "{}: the link map needs a [discover] stanza (its key_file at least); add one",
            a.config.display()
        );
    }
    let mut overrides = Overrides::default();
    overrides.key_file = a.key_file.clone();
    overrides.link_window_ms = a.link_window_ms;
    let mut d = cfg.discover.clone().unwrap_or_default();
    overrides.apply(&mut d);
    let opts = MapOptions::from_section(&d)?;
    let rt = crate::cli::runtime::runtime()?;
    rt.block_on(async {
        let exp = expand_config(&cfg, &overrides, &Silent).await?;
        let (found, unresolved) = targets(&exp).await;
        let mut map = measure_map(&found, &opts).await;
        map.skipped.extend(unresolved);
        let incomplete = !map.skipped.is_empty() || map.pairs.iter().any(|p| p.paths.is_empty());
        if let Some(path) = &a.hosts_json {
            let opts = HostsOptions {
                port: d.hosts_port,
                ring: match a.ring {
                    Ring::File => RingOrder::FileOrder,
                    Ring::Fastest => RingOrder::Fastest,
                },
            };
            let hosts = hosts_json(&map, &opts)?;
            std::fs::write(path, hosts.to_json())
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            eprintln!(
                "wrote {} ({} rank(s), backend {})",
                path.display(),
                hosts.hosts.len(),
                hosts.backend
            );
            for n in &hosts.notes {
                eprintln!("  {}", escape_line(n));
            }
        }
        if a.json {
            println!("{}", serde_json::to_string_pretty(&map)?);
        } else {
            print!("{}", render(&map));
        }
        Ok(if incomplete {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// The map as a table: one row per pair's fastest path, then what failed.
fn render(map: &LinkMap) -> String {
    let cols = [
        Column {
            head: "A",
            align: Left,
            min: 1,
            gap: 0,
        },
        Column {
            head: "B",
            align: Left,
            min: 1,
            gap: 2,
        },
        Column {
            head: "PATH",
            align: Left,
            min: 4,
            gap: 2,
        },
        Column {
            head: "KIND",
            align: Left,
            min: 4,
            gap: 2,
        },
        Column {
            head: "A->B",
            align: Right,
            min: 4,
            gap: 2,
        },
        Column {
            head: "B->A",
            align: Right,
            min: 4,
            gap: 2,
        },
        Column {
            head: "RTT",
            align: Right,
            min: 3,
            gap: 2,
        },
        Column {
            head: "PATHS",
            align: Right,
            min: 5,
            gap: 2,
        },
    ];
    let name = |i: usize| map.boxes[i].addr.clone();
    let rows: Vec<Vec<String>> = map
        .pairs
        .iter()
        .map(|p| match p.best() {
            Some(best) => vec![
                name(p.a),
                name(p.b),
                format!("{} -> {}", best.a_addr, best.b_addr),
                best.kind.clone(),
                rate_text(best.ab_mbps),
                rate_text(best.ba_mbps),
                format!("{:.2} ms", best.rtt_ms),
                p.paths.len().to_string(),
            ],
            None => vec![name(p.a), name(p.b), "(none measured)".into()],
        })
        .collect();
    let mut out = table::render(&cols, &rows);
    for p in &map.pairs {
        for f in &p.failed {
            out.push_str(&format!("! {}\n", escape_line(f)));
        }
    }
    for s in &map.skipped {
        out.push_str(&format!("! left out: {}\n", escape_line(s)));
    }
    out.push_str(&format!(
        "{} box(es), {} pair(s) in {:.1} s\n",
        map.boxes.len(),
        map.pairs.len(),
        map.took_ms as f64 / 1000.0
    ));
    out
}
