//! The flags `browse` and `watch` share: where to look and whom to admit.

use anyhow::Result;
use clap::Args;
use rlx_discover::{ClusterConfig, DiscoverSection, Overrides};
use std::path::PathBuf;

/// Where to look for agents and whom to admit.
#[derive(Debug, Args)]
pub struct LanArgs {
    /// Take [discover] settings (interfaces, cluster, key_file, browse_ms,
    /// dns_sd) from this cluster file; its ssh_hosts and subnet are not used.
    #[arg(long, value_name = "CLUSTER.TOML")]
    pub config: Option<PathBuf>,
    /// Browse only on these network interfaces (repeatable).
    #[arg(long = "interface", value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// Admit only agents announcing this cluster name.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Admit only agents that prove this cluster key.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Also look at _rlx._tcp.DOMAIN on a unicast DNS server, where agents
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
    /// With a cluster key, also dial announced addresses that are off the
    /// browsed interfaces' subnets and did not send the announcement
    /// themselves (a routed network between coordinator and agents; by
    /// default those are refused: see docs/security.md). The same as
    /// [discover] dial_off_link = true.
    #[arg(long)]
    pub dial_off_link: bool,
}

impl LanArgs {
    /// The `[discover]` these flags ask for: mDNS unless `--no-mdns`, and
    /// DNS-SD when a domain is given; never ssh_hosts or a subnet scan.
    /// `what` names the command in errors.
    pub fn section(&self, browse_ms: Option<u64>, what: &str) -> Result<DiscoverSection> {
        self.section_of(self.load()?.as_ref(), browse_ms, what)
    }

    /// The cluster file `--config` names, loaded (once: its comments are
    /// read with it), if any.
    pub fn load(&self) -> Result<Option<ClusterConfig>> {
        Ok(self
            .config
            .as_deref()
            .map(ClusterConfig::load)
            .transpose()?)
    }

    /// [`LanArgs::section`] of a file already loaded ([`LanArgs::load`]).
    pub fn section_of(
        &self,
        cfg: Option<&ClusterConfig>,
        browse_ms: Option<u64>,
        what: &str,
    ) -> Result<DiscoverSection> {
        let mut d = cfg.and_then(|c| c.discover.clone()).unwrap_or_default();
        let mut o = Overrides::default();
        o.interfaces = self.interfaces.clone();
        o.key_file = self.key_file.clone();
        o.browse_ms = browse_ms;
        o.dial_off_link = self.dial_off_link;
        o.apply(&mut d);
        if self.cluster.is_some() {
            d.cluster = self.cluster.clone();
        }
        apply_dns_flags(&mut d, &self.domain, &self.dns_server)?;
        d.mdns = !self.no_mdns;
        if !d.mdns && d.dns_sd.is_none() {
            anyhow::bail!("--no-mdns leaves nothing to {what}: add --domain DOMAIN");
        }
        d.ssh_hosts.clear();
        d.subnet = None;
        Ok(d)
    }
}

/// Applies `--domain` and `--dns-server` to `d.dns_sd`, checked like the
/// config keys.
pub fn apply_dns_flags(
    d: &mut DiscoverSection,
    domain: &Option<String>,
    server: &Option<String>,
) -> Result<()> {
    use rlx_discover::config::DnsSdSection;
    use rlx_proto::dnssd::check_server;
    use rlx_proto::service::parse_domain;
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
