//! `rlx-discover links`: the all-pairs link map of the cluster in CONFIG,
//! measured by the agents themselves ([`rlx_discover::linkmap`]), as a
//! table or JSON.

use crate::cli::table::{self, Align::Left, Align::Right, Column};
use anyhow::{bail, Result};
use clap::Args;
use rlx_discover::linkmap::{
    hosts_json, measure_map_since, mlx_hostfile, mpi_hostfile, targets, HostsOptions, LinkMap,
    MapOptions, MapTarget, RingOrder,
};
use rlx_discover::linkmap::{Bottleneck, PathLink};
use rlx_discover::{escape_line, expand_config, ClusterConfig, Overrides, Silent};
use rlx_proto::handshake::measure_udp::UdpDirection;
use rlx_proto::handshake::rate_text;
use std::path::PathBuf;
use std::process::ExitCode;

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover links cluster.toml           # every pair of boxes, measured both ways
  rlx-discover links cluster.toml --json    # the map, for scripts
  rlx-discover links cluster.toml --hosts-json hosts.json --ring fastest
  rlx-discover links cluster.toml --svg links.svg     # the map as a heat map
  rlx-discover links cluster.toml --map links.json    # measure only what changed since the last run
  rlx-discover links cluster.toml --mlx-hostfile mlx.json --mpi-hostfile mpi.hosts
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
    /// Keep the map up to date in this file: the pairs it already has are
    /// kept (same boxes, same addresses), only the others are measured
    /// (a box that joined, moved, or a pair that had no path), and the
    /// whole map is written back.
    #[arg(long, value_name = "PATH")]
    pub map: Option<PathBuf>,
    /// Draw the map as a heat map (SVG) here: each direction's fastest
    /// path, row to column.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Write the MLX hostfile (`mlx.launch --hostfile`) here, ranked as
    /// hosts.json is (docs/guide.md, "Other runtimes' launch files").
    #[arg(long, value_name = "PATH")]
    pub mlx_hostfile: Option<PathBuf>,
    /// Write an Open MPI hostfile (`mpirun --hostfile`) here, ranked as
    /// hosts.json is.
    #[arg(long, value_name = "PATH")]
    pub mpi_hostfile: Option<PathBuf>,
    /// With --hosts-json, --mlx-hostfile, --mpi-hostfile: the ranks in the cluster file's order (`file`) or
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

impl From<Ring> for RingOrder {
    fn from(r: Ring) -> RingOrder {
        match r {
            Ring::File => RingOrder::FileOrder,
            Ring::Fastest => RingOrder::Fastest,
        }
    }
}

/// What `links` and `check` both start from: the cluster file, its
/// [discover] with the command line's overrides, and how to reach and
/// prove the key to the agents.
pub(crate) struct Setup {
    pub cfg: ClusterConfig,
    pub discover: rlx_discover::config::DiscoverSection,
    pub overrides: Overrides,
    pub opts: MapOptions,
}

impl Setup {
    /// Loads `config` (which needs a [discover] with a key) for `what`.
    pub(crate) fn load(
        config: &std::path::Path,
        key_file: Option<PathBuf>,
        link_window_ms: Option<u64>,
        what: &str,
    ) -> Result<Setup> {
        let cfg = ClusterConfig::load(config)?;
        if cfg.discover.is_none() {
            bail!(
                "{}: {what} needs a [discover] stanza (its key_file at least); add one",
                config.display()
            );
        }
        let mut overrides = Overrides::default();
        overrides.key_file = key_file;
        overrides.link_window_ms = link_window_ms;
        let mut discover = cfg.discover.clone().unwrap_or_default();
        overrides.apply(&mut discover);
        let opts = MapOptions::from_section(&discover)?;
        Ok(Setup {
            cfg,
            discover,
            overrides,
            opts,
        })
    }

    /// The cluster's boxes (the expanded file's nodes) and their agents;
    /// nodes whose agent's name does not resolve, with the reason.
    pub(crate) async fn targets(&self) -> Result<(Vec<MapTarget>, Vec<String>)> {
        let exp = expand_config(&self.cfg, &self.overrides, &Silent).await?;
        Ok(targets(&exp).await)
    }
}

/// Measures and prints the map.
pub fn run(a: LinksArgs) -> Result<ExitCode> {
    let setup = Setup::load(
        &a.config,
        a.key_file.clone(),
        a.link_window_ms,
        "the link map",
    )?;
    let d = &setup.discover;
    let rt = crate::cli::runtime::runtime()?;
    rt.block_on(async {
        let (found, unresolved) = setup.targets().await?;
        let previous = match &a.map {
            Some(p) if p.exists() => previous_map(p),
            _ => None,
        };
        let (mut map, carried) = measure_map_since(&found, &setup.opts, previous.as_ref()).await;
        map.skipped.extend(unresolved);
        if let Some(path) = &a.map {
            let text = serde_json::to_string_pretty(&map)? + "\n";
            write_replacing(path, &text)?;
            eprintln!(
                "wrote {}: {} pair(s) kept from before, {} measured now",
                path.display(),
                carried,
                map.pairs.len() - carried
            );
        }
        let incomplete = !map.skipped.is_empty() || map.pairs.iter().any(|p| p.paths.is_empty());
        if let Some(path) = &a.svg {
            write(path, &crate::cli::heatmap::render(&map))?;
            eprintln!("wrote {} (the heat map)", path.display());
        }
        let wanted = a.hosts_json.is_some() || a.mlx_hostfile.is_some() || a.mpi_hostfile.is_some();
        if wanted {
            let opts = HostsOptions {
                port: d.hosts_port,
                ring: a.ring.into(),
            };
            let hosts = hosts_json(&map, &opts)?;
            if let Some(path) = &a.hosts_json {
                write(path, &hosts.to_json())?;
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
            if let Some(path) = &a.mlx_hostfile {
                let mlx = mlx_hostfile(&map, &hosts)?;
                write(path, &mlx.to_json())?;
                eprintln!(
                    "wrote {} ({} rank(s), MLX)",
                    path.display(),
                    mlx.hosts.len()
                );
                for n in &mlx.notes {
                    eprintln!("  {}", escape_line(n));
                }
            }
            if let Some(path) = &a.mpi_hostfile {
                write(path, &mpi_hostfile(&map, &hosts))?;
                eprintln!(
                    "wrote {} ({} rank(s), Open MPI)",
                    path.display(),
                    hosts.ranks.len()
                );
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

/// The map in `path`, or `None` (said why) when it cannot be read: then
/// every pair is measured.
fn previous_map(path: &std::path::Path) -> Option<LinkMap> {
    let read = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<LinkMap>(&t).map_err(|e| e.to_string()));
    match read {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!(
                "{}: not a link map this version reads ({}); measuring every pair",
                path.display(),
                escape_line(&e)
            );
            None
        }
    }
}

/// Replaces `path` with `text` at once (a temporary file beside it,
/// renamed), so a reader never sees half a map.
fn write_replacing(path: &std::path::Path, text: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("writing {}: {}", path.display(), e.error))?;
    Ok(())
}

/// Writes a launch file, naming it when that fails.
fn write(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// `A->B/B->A` of one figure of the UDP probe, `-` for a direction
/// without one.
fn both_ways(p: &PathLink, f: impl Fn(&UdpDirection) -> String) -> String {
    let one = |d: &Option<UdpDirection>| d.as_ref().map_or_else(|| "-".to_string(), &f);
    format!("{}/{}", one(&p.ab_udp), one(&p.ba_udp))
}

/// What a path's UDP probe found that a person must hear of: a smaller MTU
/// on the way (packets the sender's interface sent that vanished) and a
/// direction without figures, with why.
fn path_warnings(a: &str, b: &str, p: &PathLink) -> Vec<String> {
    let mut out = Vec::new();
    let ends = format!("{} -> {}", p.a_addr, p.b_addr);
    for (from, to, d) in [(a, b, &p.ab_udp), (b, a, &p.ba_udp)] {
        if let Some(UdpDirection {
            mtu: Some(m),
            mtu_limited: true,
            ..
        }) = d
        {
            out.push(format!(
                "{from} -> {to} ({ends}): packets above {m} bytes vanish on the way though the \
                 sender's interface sends them: a hop with a smaller MTU (a tunnel, or an MTU \
                 black hole if it sends no ICMP 'too big'); set the interfaces' MTU to {m} or \
                 fix the hop"
            ));
        }
    }
    for n in &p.udp_notes {
        out.push(format!("{a} <-> {b} ({ends}), loss and MTU: {n}"));
    }
    out
}

/// A shared bottleneck in words: its sides, how many pairs cross it, and
/// what it carried each way.
fn bottleneck_line(map: &LinkMap, g: &Bottleneck) -> String {
    let names = |side: &[usize]| {
        side.iter()
            .filter_map(|&i| map.boxes.get(i))
            .map(|b| escape_line(&b.addr))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rate = |r: Option<f64>| r.map_or_else(|| "not saturated".into(), rate_text);
    if g.sides_known {
        format!(
            "shared bottleneck between {{{}}} and {{{}}}: {} pairs cross it; it carried {} one \
             way and {} the other when they crossed at once (pairs measured again apart)\n",
            names(&g.side_a),
            names(&g.side_b),
            g.pairs,
            rate(g.ab_mbps),
            rate(g.ba_mbps)
        )
    } else {
        format!(
            "shared bottleneck(s) among {{{}}}: {} pairs held one another down (more than one \
             link between switches; pairs measured again apart)\n",
            names(&g.side_a),
            g.pairs
        )
    }
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
            head: "LOSS",
            align: Right,
            min: 4,
            gap: 2,
        },
        Column {
            head: "MTU",
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
                both_ways(best, |d| format!("{:.1}%", d.loss_pct)),
                both_ways(best, |d| match (d.mtu, d.mtu_limited) {
                    (Some(m), true) => format!("{m}!"),
                    (Some(m), false) => m.to_string(),
                    (None, _) => "-".into(),
                }),
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
        for path in &p.paths {
            for line in path_warnings(&name(p.a), &name(p.b), path) {
                out.push_str(&format!("! {}\n", escape_line(&line)));
            }
        }
    }
    for g in &map.bottlenecks {
        out.push_str(&bottleneck_line(map, g));
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
