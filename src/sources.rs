//! **Where nodes come from** — each source turns its own kind of evidence
//! into [`crate::sighting::Sighting`]s for the one pipeline; none of them
//! chooses devices or merges (that is [`crate::pipeline`]'s job alone).
//!
//! - [`ssh`]: hosts of `~/.ssh/config`, probed over ssh;
//! - [`subnet`]: a scan of a block for agents and workers, with
//!   [`identify`] naming the other daemons found on the worker port;
//! - [`mdns`]: the one-shot mDNS browse of `_rlx._tcp.local.` (and the
//!   continuous one of `watch`);
//! - [`dns`]: unicast DNS-SD, `_rlx._tcp.<domain>` on a DNS server, for
//!   nodes beyond the LAN (the zone client is [`rlx_proto::dnssd`]);
//! - [`dnssd`]: the DNS-SD resolver `mdns` and `dns` share: an instance's
//!   records to a sighting, with the limits defined once.

//!
//! Every source has one shape: an options struct built from the
//! `[discover]` section (`None` when the section does not ask for the
//! source), and a `discover` that turns the options into a
//! [`Discovery`]. [`configured`] is the one list of them, and
//! [`Configured::discover`] the one place they are run from, so adding a
//! source is its file, a variant of [`Configured`] (and of
//! [`crate::sighting::Source`]), its `[discover]` key, and a line in
//! [`configured`].

pub(crate) mod dns;
pub(crate) mod dnssd;
pub(crate) mod identify;
pub(crate) mod mdns;
pub(crate) mod ssh;
pub(crate) mod subnet;

use crate::config::DiscoverSection;
use crate::progress::Progress;
use crate::sighting::{Discovery, OnSighting, Problem, Source};
use std::time::Instant;

/// What the sources tell each other while they run: `dns_sd` answering
/// lets an mDNS browse that hears nothing at all stop at its early point
/// instead of listening its whole window (a cluster on a routed subnet,
/// found only through DNS, no longer waits for mDNS).
pub(crate) struct Crosstalk {
    dns: tokio::sync::watch::Sender<Option<(Instant, usize)>>,
}

impl Crosstalk {
    pub(crate) fn new() -> Self {
        Crosstalk {
            dns: tokio::sync::watch::Sender::new(None),
        }
    }
}

/// A source `[discover]` asks for, with its options.
#[derive(Debug, Clone)]
pub(crate) enum Configured {
    /// `ssh_hosts`.
    Ssh(ssh::SshOptions),
    /// `subnet`.
    Subnet(subnet::ScanOptions),
    /// `mdns` (on unless `mdns = false`).
    Mdns(mdns::BrowseOptions),
    /// `dns_sd`.
    Dns(dns::DnsSdOptions),
}

/// Every source `d` asks for, in one list, and a problem for each that it
/// asks for in a way that cannot run (a `dns_sd` domain that is not one).
pub(crate) fn configured(d: &DiscoverSection) -> (Vec<Configured>, Vec<Problem>) {
    let mut problems = Vec::new();
    let dns = match &d.dns_sd {
        None => None,
        Some(s) => dns::DnsSdOptions::from_section(s, d.browse_ms)
            .map_err(|why| problems.push(Problem::new(Source::Dns, s.domain.clone(), why)))
            .ok(),
    };
    let list = [
        ssh::SshOptions::configured(d).map(Configured::Ssh),
        subnet::ScanOptions::from_section(d).map(Configured::Subnet),
        d.mdns
            .then(|| Configured::Mdns(mdns::BrowseOptions::from_section(d))),
        dns.map(Configured::Dns),
    ];
    (list.into_iter().flatten().collect(), problems)
}

impl Configured {
    /// What the source does that the network-namespace guard must allow
    /// first ([`rlx_net::netguard`]): multicast or a scan; `None` for a
    /// source that only dials hosts the user named.
    pub(crate) fn guarded(&self) -> Option<&'static str> {
        match self {
            Configured::Subnet(_) => Some("a subnet scan"),
            Configured::Mdns(_) => Some("an mDNS browse"),
            Configured::Ssh(_) | Configured::Dns(_) => None,
        }
    }

    /// Runs the source. `on_resolved` is told of each sighting as soon as
    /// a source that finds them one by one has it (the mDNS browse), so its
    /// handshake overlaps the rest of the browse.
    pub(crate) async fn discover(
        &self,
        started: Instant,
        progress: &dyn Progress,
        on_resolved: &OnSighting,
        talk: &Crosstalk,
    ) -> Discovery {
        match self {
            Configured::Ssh(o) => ssh::discover(o, started, progress).await,
            Configured::Subnet(o) => subnet::discover(o, started, progress).await,
            Configured::Mdns(o) => {
                let o = mdns::BrowseOptions {
                    on_resolved: Some(on_resolved.clone()),
                    elsewhere: Some(talk.dns.subscribe()),
                    ..o.clone()
                };
                mdns::discover(&o, started).await
            }
            Configured::Dns(o) => {
                let d = dns::discover(o, started).await;
                if !d.sightings.is_empty() {
                    talk.dns
                        .send_replace(Some((Instant::now(), d.sightings.len())));
                }
                d
            }
        }
    }
}
