//! `rlx-discover`: the coordinator CLI. Parses flags, starts logging and
//! calls the library; all behaviour lives in `rlx_discover`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use rlx_discover::config::{ClusterConfig, Subnet};
use rlx_discover::discover::{expand_config, Overrides};
use rlx_discover::render::render_expanded;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const EXIT_CODES: &str = "\
Exit codes:
  0  success: every configured source answered and the output is complete
  1  output printed, but something needs a look: a host failed or was refused,
     or discovery found no node at all (see the report on stderr)
  2  error: bad config or flags, a refused operation, or an I/O failure";

/// Find the machines of an RLX cluster and write their [[node]] list.
#[derive(Debug, Parser)]
#[command(version, about, after_help = EXIT_CODES)]
struct Cli {
    /// Print less: errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print more (repeat for debug output); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Toml,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Expand CONFIG's [discover] stanza into [[node]] entries and print the
    /// result (the report goes to stderr).
    #[command(after_help = concat!(
        "Examples:\n",
        "  rlx-discover expand cluster.toml                 # print the expanded config\n",
        "  rlx-discover expand cluster.toml --format json   # nodes and report as JSON\n",
        "\n",
    ))]
    Expand {
        /// The cluster file (cluster.toml).
        config: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "toml")]
        format: Format,
        /// Use only these network interfaces for mDNS (repeatable).
        #[arg(long = "interface", value_name = "NAME")]
        interfaces: Vec<String>,
        /// Cluster key file (overrides [discover] key_file).
        #[arg(long, value_name = "PATH")]
        key_file: Option<PathBuf>,
        /// How long to listen for mDNS answers, ms (overrides browse_ms).
        #[arg(long, value_name = "MS")]
        browse_ms: Option<u64>,
        /// Do not browse mDNS even when [discover] would.
        #[arg(long)]
        no_mdns: bool,
    },
    /// TCP-scan a CIDR block for listeners on the worker port.
    #[command(
        after_help = "Examples:\n  rlx-discover scan 10.0.0.0/24\n  rlx-discover scan 10.1.0.0/16 --port 9100 --timeout-ms 200 --json\n"
    )]
    Scan {
        /// The block to scan, at most a /16.
        cidr: String,
        /// Worker port.
        #[arg(long, default_value_t = rlx_discover::config::DEFAULT_PORT)]
        port: u16,
        /// Per-connect timeout, ms.
        #[arg(long, default_value_t = rlx_discover::config::DEFAULT_TIMEOUT_MS)]
        timeout_ms: u64,
        /// Most connects in flight.
        #[arg(long, default_value_t = rlx_discover::sources::subnet::DEFAULT_SCAN_CONCURRENCY)]
        concurrency: usize,
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Write a new cluster key (32 random bytes, hex, mode 0600).
    #[command(after_help = "Examples:\n  rlx-discover keygen /etc/rlx/cluster.key\n")]
    Keygen {
        /// Where to write it; an existing file is never overwritten.
        #[arg(default_value = "rlx-cluster.key")]
        path: PathBuf,
    },
}

fn init_logging(quiet: bool, verbose: u8) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.quiet, cli.verbose);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rlx-discover: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Expand {
            config,
            format,
            interfaces,
            key_file,
            browse_ms,
            no_mdns,
        } => {
            let cfg = ClusterConfig::load(&config)?;
            let overrides = Overrides {
                interfaces,
                key_file,
                browse_ms,
                no_mdns,
            };
            let exp = runtime()?.block_on(expand_config(&cfg, &overrides))?;
            match format {
                Format::Toml => {
                    let hand = cfg.nodes.len();
                    let pairs: Vec<_> = exp.nodes[hand..]
                        .iter()
                        .cloned()
                        .zip(exp.added.iter().cloned())
                        .collect();
                    let when = humantime_now();
                    let out = render_expanded(&cfg.text, &pairs, &when)
                        .with_context(|| format!("re-reading {}", config.display()))?;
                    print!("{out}");
                }
                Format::Json => {
                    let v = serde_json::json!({ "nodes": exp.nodes, "report": exp.report });
                    println!("{}", serde_json::to_string_pretty(&v)?);
                }
            }
            if !cli.quiet {
                eprint!("{}", exp.report.render_text());
            }
            let discovering = cfg.discover.is_some();
            if exp.report.has_failures()
                || (discovering && exp.added.is_empty() && exp.report.duplicates.is_empty())
            {
                Ok(ExitCode::from(1))
            } else {
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::Scan {
            cidr,
            port,
            timeout_ms,
            concurrency,
            json,
        } => {
            let net: Subnet = cidr.parse().map_err(|e: String| anyhow::anyhow!(e))?;
            rlx_discover::netguard::ensure_private_netns("a subnet scan")?;
            let r = runtime()?.block_on(rlx_discover::sources::subnet::scan(
                &net,
                port,
                Duration::from_millis(timeout_ms),
                concurrency,
            ));
            if json {
                let v = serde_json::json!({
                    "open": r.open.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                    "refused": r.refused,
                    "silent": r.silent,
                    "concurrency": r.concurrency,
                    "elapsed_ms": r.elapsed.as_millis() as u64,
                });
                println!("{v}");
            } else {
                for a in &r.open {
                    println!("{a}");
                }
                eprintln!(
                    "{net}: {} open, {} refused, {} silent in {} ms ({} in flight)",
                    r.open.len(),
                    r.refused,
                    r.silent,
                    r.elapsed.as_millis(),
                    r.concurrency
                );
            }
            Ok(if r.open.is_empty() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Keygen { path } => {
            let key = rlx_discover::keys::generate(&path)?;
            eprintln!(
                "wrote a new cluster key to {} (mode 0600, fingerprint {}); give it to every agent \
                 with --key-file and to the coordinator with [discover] key_file",
                path.display(),
                key.fingerprint()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The current UTC time, to the minute, for provenance comments.
fn humantime_now() -> String {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-30T06:58:12Z -> 2026-11-30 06:58 UTC
    format!("{} {} UTC", &t[..10], &t[11..16])
}
