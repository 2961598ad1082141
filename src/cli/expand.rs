//! `rlx-discover expand`: the cluster file with its discovered nodes.

use crate::config::ClusterConfig;
use crate::discover::{expand_config, Overrides};
use crate::render::render_expanded;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// The cluster file with the discovered nodes appended.
    Toml,
    /// `{"nodes": [...], "report": {...}}`.
    Json,
}

/// Arguments of `expand`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rlx-discover expand cluster.toml                 # print the expanded config\n  \
    rlx-discover expand cluster.toml --format json   # nodes and report as JSON\n")]
pub struct ExpandArgs {
    /// The cluster file (cluster.toml).
    pub config: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "toml")]
    pub format: Format,
    /// Use only these network interfaces for mDNS (repeatable).
    #[arg(long = "interface", value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// Cluster key file (overrides [discover] key_file).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// How long to listen for mDNS answers, ms (overrides browse_ms).
    #[arg(long, value_name = "MS")]
    pub browse_ms: Option<u64>,
    /// Do not browse mDNS even when [discover] would.
    #[arg(long)]
    pub no_mdns: bool,
}

/// Runs discovery for the file and prints the result and the report.
pub fn run(a: ExpandArgs, quiet: bool) -> Result<ExitCode> {
    let cfg = ClusterConfig::load(&a.config)?;
    let overrides = Overrides {
        interfaces: a.interfaces,
        key_file: a.key_file,
        browse_ms: a.browse_ms,
        no_mdns: a.no_mdns,
    };
    let exp = super::runtime()?.block_on(expand_config(&cfg, &overrides))?;
    match a.format {
        Format::Toml => {
            let hand = cfg.nodes.len();
            let pairs: Vec<_> = exp.nodes[hand..]
                .iter()
                .cloned()
                .zip(exp.added.iter().cloned())
                .collect();
            let out = render_expanded(&cfg.text, &pairs, &now_utc())
                .with_context(|| format!("re-reading {}", a.config.display()))?;
            print!("{out}");
        }
        Format::Json => {
            let v = serde_json::json!({ "nodes": exp.nodes, "report": exp.report });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    if !quiet {
        eprint!("{}", exp.report.render_text());
    }
    let discovering = cfg.discover.is_some();
    let found_nothing = exp.added.is_empty() && exp.report.duplicates.is_empty();
    Ok(
        if exp.report.has_failures() || (discovering && found_nothing) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// The current UTC time, to the minute, for provenance comments.
pub fn now_utc() -> String {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-30T06:58:12Z -> 2026-11-30 06:58 UTC
    format!("{} {} UTC", &t[..10], &t[11..16])
}
