//! **What a source saw** — the one record every discovery source produces,
//! so nothing downstream needs to know where a node came from except to
//! report it.

use crate::escape::{escape_line, untrusted};
use rlx_proto::caps::NodeCaps;
use serde::Serialize;
use std::fmt;
use std::net::IpAddr;

/// Which discovery source saw a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `rlx-agent --probe` run over SSH.
    Ssh,
    /// A TCP scan of `[discover] subnet`.
    Subnet,
    /// An mDNS browse of `_rlx._tcp`.
    Mdns,
    /// A unicast DNS-SD browse of `_rlx._tcp.<domain>` (`[discover] dns_sd`).
    Dns,
}

impl Source {
    /// Whose address is written for a machine several sources saw, lowest
    /// first, when the address rule has nothing better to go on: the ssh
    /// alias (the runtime starts workers through it), then what mDNS heard
    /// (it picks by interface), then what the agent registered in DNS
    /// (right for a wide-area coordinator, but on the LAN mDNS knows
    /// better), then the IP a scan dialled.
    pub(crate) fn address_rank(self) -> u8 {
        match self {
            Source::Ssh => 0,
            Source::Mdns => 1,
            Source::Dns => 2,
            Source::Subnet => 3,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Ssh => "ssh",
            Source::Subnet => "subnet",
            Source::Mdns => "mdns",
            Source::Dns => "dns",
        })
    }
}

/// How much the caps of a sighting can be believed, weakest first. The order
/// matters: when one machine is seen several ways, the caps with the strongest
/// evidence win, and among equals the latest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// Something accepted TCP on the port but did not speak the handshake:
    /// no caps at all.
    TcpOnly,
    /// Caps from a TXT record (mDNS or unicast DNS): unauthenticated and
    /// possibly cached.
    Txt,
    /// Caps from a handshake reply: fresh, but anyone could have sent them.
    Handshake,
    /// Caps from `rlx-agent --probe` over SSH: trusted by SSH itself.
    Ssh,
    /// Caps from a handshake reply that proved the cluster key.
    Authenticated,
}

impl Evidence {
    /// Whether the caps came from the machine's own answer to a handshake
    /// (authenticated or not).
    pub fn answered(self) -> bool {
        matches!(self, Evidence::Handshake | Evidence::Authenticated)
    }
}

impl Evidence {
    /// True when the caps were read from the machine just now (not a cache).
    pub fn is_fresh(self) -> bool {
        self >= Evidence::Handshake
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Evidence::TcpOnly => "tcp only",
            Evidence::Txt => "txt",
            Evidence::Handshake => "handshake",
            Evidence::Ssh => "ssh probe",
            Evidence::Authenticated => "authenticated",
        })
    }
}

/// Called with each sighting as soon as a source has it, while the source
/// is still running: admission starts that node's handshake then, instead
/// of after the whole browse window (on a lossy network a handshake may
/// need a few retries, and they overlap the listening). The sighting still
/// reaches the pipeline as usual when the source is done.
#[derive(Clone)]
pub(crate) struct OnSighting(pub std::sync::Arc<dyn Fn(&Sighting) + Send + Sync>);

impl fmt::Debug for OnSighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnSighting(..)")
    }
}

/// One node, as one source saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sighting {
    /// Which source saw it.
    pub source: Source,
    /// How that source names it: the ssh alias, the IP, the mDNS instance.
    pub host: String,
    /// What the runtime would dial (`IP:port`, `[v6]:port`, `alias:port`).
    pub addr: String,
    /// The IP the source reached it at, when it knows one.
    pub ip: Option<IpAddr>,
    /// The worker port: the one in `addr`, which the runtime dials.
    pub port: u16,
    /// The agent's port on the same host: its handshake, link measurement
    /// and `watch`'s health checks. Equal to `port` for an agent that
    /// predates the split of the two (its one port served both); `None`
    /// when no agent answered there (a bare listener a scan found on the
    /// worker port).
    pub agent_port: Option<u16>,
    /// Whether the worker port accepted a connection from this coordinator,
    /// when the source tried it (a scan): with an agent that says its worker
    /// listens, a `false` here is a firewall in between.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_reachable: Option<bool>,
    /// SSH alias, for SSH-found nodes.
    pub ssh: Option<String>,
    /// What the node reported, if it said anything.
    pub caps: Option<NodeCaps>,
    /// How far the caps can be believed.
    pub evidence: Evidence,
    /// Network interface it was heard on (mDNS).
    pub heard_on: Option<String>,
    /// Milliseconds since discovery started when this sighting completed.
    pub found_ms: u64,
    /// What admission knows of who it is: its node key against the pins
    /// ([`crate::pins`]).
    pub identity: Pinning,
}

/// Who a node is, as far as its node key tells (docs/security.md, "Who is
/// who: node keys and pins"): the agent's own key pair, pinned for its node
/// id on first sight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pinning {
    /// No node key proved: an older agent (its caps carry no `node_key`),
    /// or caps that came from no handshake (TXT, SSH, a bare listener).
    /// Admitted as before; nothing tells it from another machine claiming
    /// its id but the rules of docs/security.md.
    #[default]
    Unpinned,
    /// It proved a node key for an id seen for the first time: the key is
    /// pinned now.
    New,
    /// It proved the node key pinned for its id.
    Pinned,
}

impl Pinning {
    /// The word used in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Pinning::Unpinned => "unpinned",
            Pinning::New => "new",
            Pinning::Pinned => "pinned",
        }
    }
}

impl Sighting {
    /// Where its agent answers the handshake, when the source knows an IP.
    pub fn agent_endpoint(&self) -> Option<std::net::SocketAddr> {
        Some(std::net::SocketAddr::new(self.ip?, self.agent_port?))
    }

    /// Its agent's endpoint written as `addr` is (`IP:port`, `[v6%scope]:port`,
    /// `alias:port`), with the agent's port.
    pub fn agent_addr(&self) -> Option<String> {
        let port = self.agent_port?;
        let (host, _) = self.addr.rsplit_once(':')?;
        Some(format!("{host}:{port}"))
    }

    /// Takes the worker port its agent reported in a handshake (proved
    /// with the cluster key when there is one), which wins over the one
    /// the announcement's SRV record named: `addr` keeps its host (and an
    /// IPv6 scope) and gets that port.
    pub fn use_worker_port(&mut self, port: u16) {
        if port == self.port {
            return;
        }
        if let Some((host, _)) = self.addr.rsplit_once(':') {
            self.addr = format!("{host}:{port}");
        }
        self.port = port;
    }

    /// Whether its worker was listening when its agent last looked
    /// (`None`: not told).
    pub fn worker_listening(&self) -> Option<bool> {
        self.caps.as_ref().and_then(|c| c.worker_listening)
    }

    /// The node id the caps carry, if any.
    pub fn id(&self) -> Option<&str> {
        self.caps
            .as_ref()
            .map(|c| c.id.as_str())
            .filter(|s| !s.is_empty())
    }
}

/// A host a source tried and could not use, or refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Which source.
    pub source: Source,
    /// The host as that source names it.
    pub host: String,
    /// What went wrong, in words a user can act on.
    pub reason: String,
    /// Whose concern it is, which decides whether it fails the run.
    pub concern: Concern,
    /// The endpoint a refused announcement named, when it named one: how
    /// an announcement claiming a node of the file is recognised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// The node id a refused announcement claimed, when it claimed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Set when the refusal is a known node id showing another node key
    /// than the one pinned for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin_clash: Option<PinClash>,
}

/// A node id that proved another node key than the one pinned for it: who
/// is pinned, who answered, and the command that re-pins it after a real
/// reinstall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinClash {
    /// Fingerprint (`SHA256:...`) of the key pinned for the id.
    pub pinned: String,
    /// Fingerprint of the key the claimant proved; `none` when it proved
    /// none (a pinned id claimed without a node key).
    pub shown: String,
    /// Where the pin is kept: the pins file, or absent for pins kept in
    /// memory for the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pins_file: Option<std::path::PathBuf>,
    /// The command that forgets the pin (`rlx-discover pins forget ...`).
    pub fix: String,
}

/// Whose problem a [`Problem`] is. On a shared LAN, neighbours' broken
/// `_rlx._tcp` records, agents of other clusters and plain announcers are
/// seen on every run; if each failed the run, cron would mail every night
/// and a real failure would hide among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Concern {
    /// Something the user configured or owns: an `ssh_hosts` entry, a
    /// configured source, a node of the file (or an announcement claiming
    /// one's address or id). Fails the run (exit 1).
    Yours,
    /// An announcement from a machine that is not in the file and claims
    /// nothing of it: malformed TXT, no proof, another key or cluster,
    /// nothing listening. Reported, but fails the run only with `--strict`.
    Stranger,
}

impl Problem {
    /// The mark its report line starts with: `!` for the user's own (it
    /// fails the run), `~` for a stranger's (reported only).
    pub fn mark(&self) -> char {
        match self.concern {
            Concern::Yours => '!',
            Concern::Stranger => '~',
        }
    }

    /// The problem as a report line (without the leading `  ! `):
    /// `host (source): reason`, with the host through
    /// [`crate::escape::untrusted`] and the reason through
    /// [`crate::escape::escape_line`], so a stranger's text cannot forge
    /// another line.
    pub fn line(&self) -> String {
        format!(
            "{} ({}): {}",
            untrusted(&self.host),
            self.source,
            escape_line(&self.reason)
        )
    }

    /// A problem of something the user configured or owns.
    pub fn new(source: Source, host: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem {
            source,
            host: host.into(),
            reason: reason.into(),
            concern: Concern::Yours,
            addr: None,
            id: None,
            pin_clash: None,
        }
    }

    /// A refused or malformed announcement from the network: a stranger's,
    /// until the pipeline finds it claims a node of the file.
    pub fn stranger(source: Source, host: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem {
            concern: Concern::Stranger,
            ..Problem::new(source, host, reason)
        }
    }

    /// The endpoint and node id the announcement claimed.
    pub fn claiming(mut self, addr: Option<String>, id: Option<String>) -> Problem {
        self.addr = addr;
        self.id = id;
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.host, self.source, self.reason)
    }
}

/// What one source did: for the report and for the empty-result hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Which source.
    pub source: Source,
    /// What it tried, e.g. `3 ssh hosts` or `10.0.0.0/24 port 9100`.
    pub what: String,
    /// How long it took, milliseconds.
    pub elapsed_ms: u64,
    /// How many hosts answered.
    pub answered: usize,
    /// Listening sources (mDNS): whether the browse stopped before its
    /// window because the network looked clean. A browse that listened its
    /// whole window says `false`; absent for other sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<bool>,
    /// Listening sources: how many answered after the point where a clean
    /// network would have let the browse stop (a sign of loss: a shorter
    /// `browse_ms` would have missed them). Absent for other sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<usize>,
}

/// Everything the sources produced, ready for the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Nodes seen.
    pub sightings: Vec<Sighting>,
    /// Hosts that failed or were refused.
    pub problems: Vec<Problem>,
    /// What each source did.
    pub attempts: Vec<Attempt>,
    /// The subnets the mDNS browse listened on (empty when it did not run):
    /// an agent found there by another source should have been heard.
    pub mdns_links: Vec<ipnet::IpNet>,
}

impl Discovery {
    /// Adds another source's results.
    pub fn extend(&mut self, other: Discovery) {
        self.sightings.extend(other.sightings);
        self.problems.extend(other.problems);
        self.attempts.extend(other.attempts);
        self.mdns_links.extend(other.mdns_links);
    }
}
