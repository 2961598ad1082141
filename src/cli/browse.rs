//! `rlx-discover browse`: a one-shot table of the agents on the LAN.

use crate::config::{ClusterConfig, DiscoverSection};
use crate::discover::{run_sources, Overrides};
use crate::pipeline::{expand, NodeDefaults};
use crate::report::gib;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `browse`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rlx-discover browse                          # every agent on the LAN\n  \
    rlx-discover browse --json                   # the same, for scripts (per-node found_ms)\n  \
    rlx-discover browse --interface eth1 --cluster lab --key-file /etc/rlx/cluster.key\n  \
    rlx-discover browse --domain rlx.example.org --dns-server 10.0.0.53   # LAN and wide-area nodes\n")]
pub struct BrowseArgs {
    /// Take [discover] settings (interfaces, cluster, key_file, browse_ms)
    /// from this cluster file; its ssh_hosts and subnet are not used.
    #[arg(long, value_name = "CLUSTER.TOML")]
    pub config: Option<PathBuf>,
    /// Browse only on these network interfaces (repeatable).
    #[arg(long = "interface", value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// The most to listen, ms [default: 3000, or browse_ms].
    #[arg(long, value_name = "MS")]
    pub browse_ms: Option<u64>,
    /// Admit only agents announcing this cluster name.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Admit only agents that prove this cluster key.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Also browse _rlx._tcp.DOMAIN on a unicast DNS server, where agents
    /// beyond the LAN register (rlx-agent --register); replaces dns_sd.domain.
    #[arg(long, value_name = "DOMAIN")]
    pub domain: Option<String>,
    /// The DNS server for --domain: HOST, HOST:PORT or [IPv6]:PORT
    /// [default: dns_sd.server, else the first nameserver of /etc/resolv.conf].
    #[arg(long, value_name = "HOST:PORT")]
    pub dns_server: Option<String>,
    /// Do not browse mDNS (only --domain / dns_sd).
    #[arg(long)]
    pub no_mdns: bool,
    /// Print JSON: {"nodes": [...], "report": {...}}.
    #[arg(long)]
    pub json: bool,
}

/// Applies `--domain` and `--dns-server` to `d.dns_sd`, checked like the
/// config keys. Shared with `watch`.
pub fn apply_dns_flags(
    d: &mut DiscoverSection,
    domain: &Option<String>,
    server: &Option<String>,
) -> Result<()> {
    use crate::config::DnsSdSection;
    use crate::sources::dns::{check_server, parse_domain};
    if let Some(dom) = domain {
        parse_domain(dom).map_err(|e| anyhow::anyhow!("--domain: {e}"))?;
        let old = d.dns_sd.take();
        d.dns_sd = Some(DnsSdSection {
            domain: dom.clone(),
            server: old.as_ref().and_then(|o| o.server.clone()),
            zone_transfer: old.is_some_and(|o| o.zone_transfer),
        });
    }
    if let Some(srv) = server {
        check_server(srv).map_err(|e| anyhow::anyhow!("--dns-server: {e}"))?;
        match &mut d.dns_sd {
            Some(s) => s.server = Some(srv.clone()),
            None => anyhow::bail!(
                "--dns-server needs a domain to browse: add --domain DOMAIN (or dns_sd in the config)"
            ),
        }
    }
    Ok(())
}

/// The `[discover]` a browse runs with: mDNS, and DNS-SD when a domain is
/// given.
fn section(a: &BrowseArgs) -> Result<DiscoverSection> {
    let mut d = match &a.config {
        Some(p) => ClusterConfig::load(p)?.discover.unwrap_or_default(),
        None => DiscoverSection::default(),
    };
    Overrides {
        interfaces: a.interfaces.clone(),
        key_file: a.key_file.clone(),
        browse_ms: a.browse_ms,
        no_mdns: false,
    }
    .apply(&mut d);
    if a.cluster.is_some() {
        d.cluster = a.cluster.clone();
    }
    apply_dns_flags(&mut d, &a.domain, &a.dns_server)?;
    d.mdns = !a.no_mdns;
    if !d.mdns && d.dns_sd.is_none() {
        anyhow::bail!("--no-mdns leaves nothing to browse: add --domain DOMAIN");
    }
    d.ssh_hosts.clear();
    d.subnet = None;
    Ok(d)
}

/// Browses, admits, selects devices through the one pipeline, and prints.
pub fn run(a: BrowseArgs, quiet: bool) -> Result<ExitCode> {
    let d = section(&a)?;
    let started = Instant::now();
    let found = super::runtime()?.block_on(run_sources(&d, started))?;
    let exp = expand(&[], &NodeDefaults::from(&d), found);
    if a.json {
        let v = serde_json::json!({ "nodes": exp.added, "report": exp.report });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if !exp.added.is_empty() {
        println!(
            "{:<20} {:<26} {:<8} {:>10} {:>5}  {:<10} {:<16} {:>6}",
            "HOST", "ADDRESS", "DEVICE", "MEMORY", "CORES", "CLUSTER", "FOUND BY", "MS"
        );
        for n in &exp.added {
            let host = if n.hostname.is_empty() {
                &n.host
            } else {
                &n.hostname
            };
            let by: Vec<String> = n.sources.iter().map(|s| s.to_string()).collect();
            println!(
                "{:<20} {:<26} {:<8} {:>10} {:>5}  {:<10} {:<16} {:>6}",
                host,
                n.addr,
                n.device,
                gib(n.mem_bytes),
                n.cores,
                n.cluster.as_deref().unwrap_or("-"),
                format!("{} ({})", by.join("+"), n.evidence),
                n.found_ms
            );
        }
    }
    if !quiet {
        let r = &exp.report;
        for f in &r.failed {
            eprintln!("  ! {f}");
        }
        for d in &r.skipped_devices {
            eprintln!("  - {}: skipped device {}", d.addr, d.why);
        }
        for w in &r.warnings {
            eprintln!("  ? {w}");
        }
        for t in r.tried.iter().filter(|_| !exp.added.is_empty()) {
            eprintln!(
                "tried {}: {} ({} answered, {} ms)",
                t.source, t.what, t.answered, t.elapsed_ms
            );
        }
        if exp.added.is_empty() {
            eprint!("{}", r.empty_hint());
        }
    }
    Ok(if exp.added.is_empty() || exp.report.has_failures() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
