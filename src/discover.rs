//! **Running the sources** — reads `[discover]`, runs every configured source
//! at once, and hands their sightings to the pipeline.
//!
//! The sources are independent (SSH needs sshd, the scan needs a port, mDNS
//! needs multicast), so they run concurrently and a failure in one is a
//! reported problem, never the end of the others. Anything that sends
//! multicast or scans passes the network-namespace guard first
//! ([`rlx_net::netguard`]).

use crate::admit::{Admission, Rules, RulesError};
use crate::clusterfile::FileNode;
use crate::config::{ClusterConfig, ConfigError, DiscoverSection, NodeConfig};
use crate::links::{self, LinkSetupError};
use crate::pipeline::{expand, expand_file, Expansion, NodeDefaults};
use crate::progress::Progress;
use crate::sighting::Discovery;
use crate::sources::{self, Configured};
use futures::future::join_all;
use rlx_net::netguard::GuardError;
use std::time::Instant;

/// Command-line overrides of `[discover]` keys.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Overrides {
    /// `--interface`, replacing `interfaces`.
    pub interfaces: Vec<String>,
    /// `--key-file`, replacing `key_file`.
    pub key_file: Option<std::path::PathBuf>,
    /// `--browse-ms`, replacing `browse_ms`.
    pub browse_ms: Option<u64>,
    /// `--no-mdns`.
    pub no_mdns: bool,
    /// `--dial-off-link`, setting `dial_off_link`.
    pub dial_off_link: bool,
    /// `--links`, setting `measure_links`.
    pub measure_links: bool,
    /// `--link-window-ms`, replacing `link_window_ms`.
    pub link_window_ms: Option<u64>,
    /// `--dry-run`: the pins file is read (a known id with another node
    /// key is still refused) but never written; new pins last for the run.
    pub pins_read_only: bool,
    /// `--prune`: the mDNS browse listens its whole window (no early stop),
    /// so a node is not taken for gone because its agent answered late.
    pub full_window: bool,
}

impl Overrides {
    /// Applies the overrides to a section.
    pub fn apply(&self, d: &mut DiscoverSection) {
        if !self.interfaces.is_empty() {
            d.interfaces = self.interfaces.clone();
        }
        if let Some(k) = &self.key_file {
            d.key_file = Some(k.clone());
            d.key_file_from_flag = true;
        }
        if let Some(b) = self.browse_ms {
            d.browse_ms = b;
        }
        if self.pins_read_only {
            d.pins_read_only = true;
        }
        if self.no_mdns {
            d.mdns = false;
        }
        if self.full_window {
            d.early_stop = false;
        }
        if self.dial_off_link {
            d.dial_off_link = true;
        }
        if self.measure_links {
            d.measure_links = true;
        }
        if let Some(w) = self.link_window_ms {
            d.link_window_ms = w;
        }
    }
}

/// Why discovery could not run at all: said before any source starts, so a
/// bad key file or a scan from the host's own namespace is an error, never
/// a partial node list. (A host that fails, or a stranger refused, is a
/// [`crate::sighting::Problem`] in the report instead.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// `[discover] key_file` cannot be used: discovering without the key
    /// would admit strangers.
    #[error(transparent)]
    Key(#[from] RulesError),
    /// `RLX_NETNS_GUARD=1` and this process is in the machine's own network
    /// namespace: it may not send multicast or scan from there.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// Link measurement was asked for and cannot be set up.
    #[error(transparent)]
    Links(#[from] LinkSetupError),
}

/// Runs every source configured in `d`, concurrently, then admits what
/// they saw ([`crate::admit`]); mDNS-found agents' handshakes start while
/// the browse still listens.
pub(crate) async fn run_sources(
    d: &DiscoverSection,
    started: Instant,
    progress: &dyn Progress,
) -> Result<Discovery, ExpandError> {
    // Refuse before any source starts: a bad key file or a scan from the
    // host's own namespace is an error, not a partial result.
    let admission = Admission::new(Rules::from_section(d)?);
    let (sources, problems) = sources::configured(d);
    for what in sources.iter().filter_map(Configured::guarded) {
        rlx_net::netguard::ensure_private_netns(what)?;
    }
    let early = admission.early();
    let talk = sources::Crosstalk::new();
    let found = join_all(
        sources
            .iter()
            .map(|s| s.discover(started, progress, &early, &talk)),
    )
    .await;
    let mut all = Discovery {
        problems,
        ..Default::default()
    };
    for d in found {
        all.extend(d);
    }
    Ok(admission.admit(all).await)
}

/// Runs the sources of `cfg` and the pipeline: the whole of `rlx-discover
/// expand` except printing. Without a `[discover]` section nothing is
/// looked for, and the file's nodes stand alone.
pub async fn expand_config(
    cfg: &ClusterConfig,
    overrides: &Overrides,
    progress: &dyn Progress,
) -> Result<Expansion, ExpandError> {
    let mut exp = match cfg.discover.clone() {
        None => expand(&cfg.nodes, &NodeDefaults::default(), Discovery::default()),
        Some(mut d) => {
            overrides.apply(&mut d);
            run(
                &d,
                &cfg.nodes,
                cfg.file_nodes.as_deref().unwrap_or_default(),
                progress,
            )
            .await?
        }
    };
    // The file's own warnings come first: they are about what the user
    // wrote, the rest about what was found.
    let file = cfg.warnings.iter().map(ConfigError::headline);
    exp.report.warnings.splice(0..0, file);
    Ok(exp)
}

/// What `d` finds, with no file to merge with: `rlx-discover browse`, or a
/// runtime that keeps its own node list. Every found node is in
/// [`Expansion::added`].
pub async fn expand_section(
    d: &DiscoverSection,
    progress: &dyn Progress,
) -> Result<Expansion, ExpandError> {
    run(d, &[], &[], progress).await
}

/// The sources, the pipeline and (when asked for) the link measurement.
async fn run(
    d: &DiscoverSection,
    hand: &[NodeConfig],
    file: &[FileNode],
    progress: &dyn Progress,
) -> Result<Expansion, ExpandError> {
    let started = Instant::now();
    let started_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_micros()).ok());
    // Set up before discovery, so a bad window fails before any source runs.
    let links = d.measure_links.then(|| links::options(d)).transpose()?;
    // The ssh aliases are read while the sources run: `ssh -G` needs no
    // network, and the pipeline needs them only at the end.
    let (found, ssh) = tokio::join!(
        run_sources(d, started, progress),
        crate::sshtarget::SshTargets::gather(d)
    );
    let found = found?;
    let versions = links::versions(&found);
    let mut defaults = NodeDefaults::from(d);
    defaults.ssh = ssh;
    let mut exp = expand_file(hand, file, &defaults, found);
    exp.report.started_unix_us = started_unix_us;
    if let Some(opts) = links {
        links::measure_expansion(&mut exp, &versions, &opts).await;
    }
    Ok(exp)
}
