//! **Running the sources** — reads `[discover]`, runs every configured source
//! at once, and hands their sightings to the pipeline.
//!
//! The sources are independent (SSH needs sshd, the scan needs a port, mDNS
//! needs multicast), so they run concurrently and a failure in one is a
//! reported problem, never the end of the others. Anything that sends
//! multicast or scans passes the network-namespace guard first
//! ([`rlx_net::netguard`]).

use crate::admit::{Admission, Rules};
use crate::config::{ClusterConfig, DiscoverSection};
use crate::pipeline::{expand, expand_file, Expansion, FileMark, NodeDefaults};
use crate::progress::Progress;
use crate::sighting::Discovery;
use crate::sources::{dns, mdns, ssh, subnet};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// Command-line overrides of `[discover]` keys.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--interface`, replacing `interfaces`.
    pub interfaces: Vec<String>,
    /// `--key-file`, replacing `key_file`.
    pub key_file: Option<std::path::PathBuf>,
    /// `--browse-ms`, replacing `browse_ms`.
    pub browse_ms: Option<u64>,
    /// `--no-mdns`.
    pub no_mdns: bool,
    /// `--links`, setting `measure_links`.
    pub measure_links: bool,
    /// `--link-window-ms`, replacing `link_window_ms`.
    pub link_window_ms: Option<u64>,
}

impl Overrides {
    /// Applies the overrides to a section.
    pub fn apply(&self, d: &mut DiscoverSection) {
        if !self.interfaces.is_empty() {
            d.interfaces = self.interfaces.clone();
        }
        if let Some(k) = &self.key_file {
            d.key_file = Some(k.clone());
        }
        if let Some(b) = self.browse_ms {
            d.browse_ms = b;
        }
        if self.no_mdns {
            d.mdns = false;
        }
        if self.measure_links {
            d.measure_links = true;
        }
        if let Some(w) = self.link_window_ms {
            d.link_window_ms = w;
        }
    }
}

/// Runs every source configured in `d`, concurrently, then admits what
/// they saw ([`crate::admit`]); mDNS-found agents' handshakes start while
/// the browse still listens.
pub async fn run_sources(
    d: &DiscoverSection,
    started: Instant,
    progress: &dyn Progress,
) -> Result<Discovery> {
    // Refuse before any source starts: a bad key file or a scan from the
    // host's own namespace is an error, not a partial result.
    let admission = Admission::new(rules(d)?);
    if d.subnet.is_some() {
        rlx_net::netguard::ensure_private_netns("a subnet scan")?;
    }
    if d.mdns {
        rlx_net::netguard::ensure_private_netns("an mDNS browse")?;
    }
    let ssh_part = async {
        if d.ssh_hosts.is_empty() {
            Discovery::default()
        } else {
            ssh::discover(&ssh::SshOptions::from_section(d), started, progress).await
        }
    };
    let subnet_part = async {
        match &d.subnet {
            None => Discovery::default(),
            Some(net) => {
                subnet::discover(
                    net,
                    subnet::Ports {
                        worker: d.port,
                        agent: d.agent_port,
                    },
                    Duration::from_millis(d.timeout_ms),
                    d.scan_concurrency,
                    started,
                    progress,
                )
                .await
            }
        }
    };
    let mdns_part = async {
        if d.mdns {
            // Each agent's handshake starts as soon as it is resolved, so it
            // overlaps the rest of the browse.
            let opts = mdns::BrowseOptions {
                on_resolved: Some(admission.early()),
                ..browse_options(d)
            };
            mdns::discover(&opts, started).await
        } else {
            Discovery::default()
        }
    };
    let dns_part = async {
        match &d.dns_sd {
            Some(s) => match dns::DnsSdOptions::from_section(s, d.browse_ms) {
                Ok(opts) => dns::discover(&opts, started).await,
                Err(why) => Discovery {
                    problems: vec![crate::sighting::Problem::new(
                        crate::sighting::Source::Dns,
                        s.domain.clone(),
                        why,
                    )],
                    ..Default::default()
                },
            },
            None => Discovery::default(),
        }
    };
    let (a, b, c, e) = tokio::join!(ssh_part, subnet_part, mdns_part, dns_part);
    let mut all = Discovery::default();
    all.extend(a);
    all.extend(b);
    all.extend(c);
    all.extend(e);
    Ok(admission.admit(all).await)
}

/// The browse `[discover]` asks for. (The cluster filter is
/// [`crate::admit`]'s, the one place that applies it to every source.)
pub fn browse_options(d: &DiscoverSection) -> mdns::BrowseOptions {
    mdns::BrowseOptions::from_section(d)
}

/// The admission rules `[discover]` asks for; a key file that cannot be
/// used is an error (discovering without the key would admit strangers).
pub fn rules(d: &DiscoverSection) -> Result<Rules> {
    Ok(Rules::from_section(d)?)
}

/// Loads nothing, runs the sources of `cfg` and the pipeline: the whole of
/// `rlx-discover expand` except printing.
pub async fn expand_config(
    cfg: &ClusterConfig,
    overrides: &Overrides,
    progress: &dyn Progress,
) -> Result<Expansion> {
    let started = Instant::now();
    let Some(mut d) = cfg.discover.clone() else {
        // No [discover]: nothing to find; the hand-written nodes stand alone.
        return Ok(expand(
            &cfg.nodes,
            &NodeDefaults::default(),
            Discovery::default(),
        ));
    };
    overrides.apply(&mut d);
    // Loaded before discovery, so a bad key file fails before any source runs.
    let links = d
        .measure_links
        .then(|| crate::links::options(&d))
        .transpose()?;
    let found = run_sources(&d, started, progress)
        .await
        .with_context(|| format!("discovery for {}", cfg.path.display()))?;
    let versions = crate::links::versions(&found);
    let mut exp = expand_file(&cfg.nodes, &file_marks(cfg), &NodeDefaults::from(&d), found);
    if let Some(opts) = links {
        crate::links::measure_expansion(&mut exp, &versions, &opts).await;
    }
    Ok(exp)
}

/// What the comments of `cfg`'s nodes say (their provenance and node ids),
/// in node order. A file whose `node` is not `[[node]]` tables gives none:
/// its write-back is refused later, with the reason.
pub fn file_marks(cfg: &ClusterConfig) -> Vec<FileMark> {
    let mut marks = vec![FileMark::default(); cfg.nodes.len()];
    for n in crate::render::file_nodes(&cfg.text).unwrap_or_default() {
        if let Some(m) = marks.get_mut(n.index) {
            *m = FileMark {
                discovered: n.is_discovered(),
                id: n.id,
            };
        }
    }
    marks
}
