//! **Unicast DNS-SD source** — browses `_rlx._tcp.<domain>` on an ordinary
//! DNS server (RFC 6763 over unicast DNS), so that agents on other subnets,
//! buildings or sites (where mDNS never reaches) are found and fed into the
//! same admission and pipeline as LAN nodes.
//!
//! ```toml
//! [discover]
//! dns_sd = { domain = "rlx.example.org", server = "10.0.0.53:53" }  # server: default /etc/resolv.conf
//! ```
//!
//! Agents put their records there themselves with `rlx-agent --register
//! dns://SERVER/ZONE --tsig-key FILE` (DNS UPDATE signed with TSIG; see
//! `docs/protocol.md`, section 5). The records are the mDNS ones under another
//! domain: `PTR _rlx._tcp.<domain>` names each instance, the instance has `SRV`
//! (port, host) and `TXT` (schema v1, [`rlx_proto::txt`]), and the host `A`/`AAAA`.
//!
//! # Queries
//!
//! Everything goes over one TCP connection ([`hickory_client`]), with
//! queries pipelined (RFC 7766 §6.2.1.1) at most [`MAX_IN_FLIGHT`] at once:
//! a `PTR` answer for a thousand nodes is ~30 KB, past any UDP size, and one
//! connection costs one round trip more than UDP, once.
//!
//! 1. `PTR _rlx._tcp.<domain>`: the instance names. Every record of the
//!    answer *and of the additional section* goes into one record pool: a
//!    server that does RFC 6763 §12.1 additional-record processing returns
//!    the instances' `SRV`, `TXT` and addresses right there, and then no
//!    further query is needed for them.
//! 2. For each instance still missing its `SRV` or its `TXT`: one query for
//!    each. Servers add the target's `A`/`AAAA` to a `SRV` answer (RFC 2782;
//!    BIND does), so
//! 3. an address query is sent only for a `SRV` target still without one
//!    (`A`, then `AAAA` if there is no `A`).
//!
//! BIND 9.18 answers a `PTR` query with the `PTR`s only (its additional
//! processing covers `SRV` targets, not DNS-SD instances), so a browse costs
//! 1 + 2 x N queries there: measured with 1,000 registered nodes, see
//! `BENCHMARKS.md`. With `zone_transfer = true` the browse asks for the whole
//! zone first (`AXFR` of `<domain>`, one query, when the server allows it to
//! this host; `allow-transfer` in BIND) and falls back to the queries above
//! when it is refused.
//!
//! # Leases
//!
//! A registered TXT record carries `expires=<unix seconds>` (see
//! [`EXPIRES_KEY`](rlx_proto::service::EXPIRES_KEY)), renewed by the agent every third of its lease. An
//! instance whose lease ran out more than [`CLOCK_SKEW`](rlx_proto::service::CLOCK_SKEW) ago belongs to an
//! agent that crashed without deleting its records; it is skipped (and
//! counted in the attempt) rather than dialled. A live but stale record, or
//! one without `expires`, still passes the handshake check of
//! [`crate::admit`] like any mDNS announcement.
//!
//! # Bounds
//!
//! At most [`MAX_INSTANCES`] instances are resolved (the rest are counted and
//! reported), a TXT record over [`MAX_TXT_BYTES`] is refused, a host keeps at
//! most [`MAX_ADDRS_PER_HOST`] addresses, each query has the per-query
//! timeout and the whole browse one deadline.

use crate::config::DnsSdSection;
use crate::pipeline::format_addr;
use crate::sighting::{Attempt, Discovery, Evidence, Problem, Sighting, Source};
use futures::stream::{self, StreamExt};
use hickory_client::client::{Client, ClientHandle};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::runtime::iocompat::AsyncIoTokioAsStd;
use hickory_proto::serialize::binary::BinEncodable;
use hickory_proto::tcp::{TcpClientStream, TcpStream as HickoryTcpStream};
use hickory_proto::xfer::BufDnsStreamHandle;
use rlx_proto::service::{expires_of, lease_over, parse_domain, service_name, unix_now, DNS_PORT};
use rlx_proto::txt;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Most instances one browse resolves. As [`super::mdns::MAX_INSTANCES`]:
/// far above any real cluster, and it bounds the work a zone full of junk
/// can cause.
pub const MAX_INSTANCES: usize = 4096;

/// Largest TXT record accepted (each string plus its length byte): the
/// schema's 1300 bytes plus room for [`EXPIRES_KEY`](rlx_proto::service::EXPIRES_KEY).
pub const MAX_TXT_BYTES: usize = txt::MAX_RECORD_BYTES + 64;

/// Most addresses kept per host: a dual-stack host with a few interfaces has
/// well under this.
pub const MAX_ADDRS_PER_HOST: usize = 16;

/// Most queries in flight on the connection. BIND serves pipelined TCP
/// queries concurrently; 64 keeps a thousand-node browse to a few dozen
/// round trips without flooding a small server.
pub const MAX_IN_FLIGHT: usize = 64;

/// Deadline for one query. A server that takes longer is overloaded or
/// gone; the browse's own deadline bounds the whole run.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// What to browse and where.
#[derive(Debug, Clone)]
pub struct DnsSdOptions {
    /// The domain holding `_rlx._tcp` (`rlx.example.org`).
    pub domain: Name,
    /// The server: `None` = the first `nameserver` of `/etc/resolv.conf`.
    pub server: Option<String>,
    /// Try a zone transfer of `domain` first.
    pub zone_transfer: bool,
    /// Deadline for the whole browse.
    pub deadline: Duration,
}

impl DnsSdOptions {
    /// The options `[discover] dns_sd` asks for; `deadline` is `browse_ms`.
    pub fn from_section(s: &DnsSdSection, browse_ms: u64) -> Result<DnsSdOptions, String> {
        Ok(DnsSdOptions {
            domain: parse_domain(&s.domain)?,
            server: s.server.clone(),
            zone_transfer: s.zone_transfer,
            deadline: Duration::from_millis(browse_ms.max(1000)),
        })
    }
}

/// A server given as `HOST`, `HOST:PORT`, `IP`, `IP:PORT` or `[IPv6]:PORT`
/// (port 53 when left out), checked for syntax only.
pub fn check_server(s: &str) -> Result<(), String> {
    split_server(s).map(|_| ())
}

fn split_server(s: &str) -> Result<(String, u16), String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(
            "the DNS server is empty; write it like 10.0.0.53 or ns1.example.org:53".into(),
        );
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok((ip.to_string(), DNS_PORT));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok((sa.ip().to_string(), sa.port()));
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => {
            let port =
                p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    format!("DNS server {s:?} has an invalid port `{p}` (1-65535)")
                })?;
            (h, port)
        }
        None => (s, DNS_PORT),
    };
    if host.contains(':') || host.contains('[') {
        return Err(format!(
            "DNS server {s:?}: write an IPv6 server as [addr]:port"
        ));
    }
    parse_domain(host).map_err(|e| format!("DNS server {s:?}: {e}"))?;
    Ok((host.to_string(), port))
}

/// Where to send queries: the given server (a host name is looked up with
/// the system resolver), else the first `nameserver` of `/etc/resolv.conf`.
pub async fn resolve_server(server: Option<&str>) -> Result<SocketAddr, String> {
    match server {
        Some(s) => {
            let (host, port) = split_server(s)?;
            if let Ok(ip) = host.parse::<IpAddr>() {
                return Ok(SocketAddr::new(ip, port));
            }
            let found = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|e| format!("cannot look up DNS server {host}: {e}"))?
                .next();
            found.ok_or_else(|| format!("DNS server {host} has no address"))
        }
        None => system_server(std::path::Path::new("/etc/resolv.conf")),
    }
}

/// The first `nameserver` of a resolv.conf.
pub fn system_server(path: &std::path::Path) -> Result<SocketAddr, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "no DNS server given and {} cannot be read ({e}): set dns_sd.server or --dns-server",
            path.display()
        )
    })?;
    let conf = resolv_conf::Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    conf.nameservers
        .first()
        .map(|ns| SocketAddr::new(IpAddr::from(ns.clone()), DNS_PORT))
        .ok_or_else(|| {
            format!(
                "no DNS server given and {} lists no nameserver: set dns_sd.server or --dns-server",
                path.display()
            )
        })
}

/// Why a browse could not run at all (per-instance trouble is a
/// [`Problem`], not this).
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// No server to ask.
    #[error("{0}")]
    Server(String),
    /// The connection or the PTR query failed.
    #[error("DNS server {server}: {what}")]
    Query {
        /// The server.
        server: SocketAddr,
        /// What failed.
        what: String,
    },
}

/// How a browse went, for the attempt line and the benchmark.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrowseStats {
    /// The server asked.
    pub server: String,
    /// Queries sent (a zone transfer counts as one).
    pub queries: usize,
    /// Whether the records came from a zone transfer.
    pub zone_transfer: bool,
    /// Instances named by the PTR set.
    pub instances: usize,
    /// Instances fully resolved from records the server volunteered
    /// (additional sections, or the zone transfer) without a query of their own.
    pub from_additionals: usize,
    /// Instances skipped because their lease ran out.
    pub expired: usize,
    /// Instances beyond [`MAX_INSTANCES`], not resolved.
    pub over_limit: usize,
    /// Milliseconds the browse took.
    pub elapsed_ms: u64,
}

/// A browse: sightings for the pipeline, and how it went.
#[derive(Debug, Clone, Default)]
pub struct Browse {
    /// Sightings, problems and the attempt.
    pub discovery: Discovery,
    /// Details.
    pub stats: BrowseStats,
    /// Registrations whose lease ran out (crashed agents), for agents that
    /// clean the zone up (`rlx-agent --register`).
    pub expired: Vec<Expired>,
}

/// A registration whose lease ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The instance name (`box._rlx._tcp.<domain>.`).
    pub instance: Name,
    /// Its SRV targets (host names holding its addresses).
    pub targets: Vec<Name>,
}

/// The DNS-SD source for the pipeline: [`browse`], with a failure to browse
/// at all reported as a [`Problem`] (other sources go on).
pub async fn discover(opts: &DnsSdOptions, started: Instant) -> Discovery {
    match browse(opts, started).await {
        Ok(b) => b.discovery,
        Err(e) => {
            let what = format!("DNS-SD browse of {}", service_name(&opts.domain));
            Discovery {
                sightings: Vec::new(),
                problems: vec![Problem {
                    source: Source::Dns,
                    host: what.clone(),
                    reason: e.to_string(),
                }],
                attempts: vec![Attempt {
                    source: Source::Dns,
                    what: format!("{what}: failed ({e})"),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    answered: 0,
                    stopped_early: None,
                    late: None,
                }],
            }
        }
    }
}

/// Every record seen so far, by lowercased owner name and type, each
/// RRset in arrival order without duplicates (a hash set: a PTR set of
/// thousands must not cost a quadratic scan).
#[derive(Default)]
struct Pool {
    records: HashMap<(Name, RecordType), RrSet>,
}

/// One RRset: its records in arrival order, and their wire forms (RData is
/// not `Hash`; the wire form is a faithful key).
type RrSet = (Vec<RData>, HashSet<Vec<u8>>);

impl Pool {
    fn add(&mut self, r: &Record) {
        if r.dns_class() != DNSClass::IN {
            return;
        }
        let key = (r.name().to_lowercase(), r.record_type());
        let (list, seen) = self.records.entry(key).or_default();
        // Bounded: no RRset we read is legitimately larger (a PTR set is
        // capped separately, by instances).
        let Ok(wire) = r.data().to_bytes() else {
            return;
        };
        if list.len() <= MAX_INSTANCES && seen.insert(wire) {
            list.push(r.data().clone());
        }
    }

    fn add_all(&mut self, rs: &[Record]) {
        for r in rs {
            self.add(r);
        }
    }

    fn get(&self, name: &Name, t: RecordType) -> Option<&[RData]> {
        self.records
            .get(&(name.to_lowercase(), t))
            .map(|(list, _)| list.as_slice())
    }

    fn has(&self, name: &Name, t: RecordType) -> bool {
        self.get(name, t).is_some_and(|v| !v.is_empty())
    }

    fn has_address(&self, name: &Name) -> bool {
        self.has(name, RecordType::A) || self.has(name, RecordType::AAAA)
    }
}

/// One connection and a query counter.
struct Conn {
    client: Client,
    queries: usize,
}

impl Conn {
    async fn open(server: SocketAddr) -> Result<Conn, DnsError> {
        let fail = |what: String| DnsError::Query { server, what };
        let tcp = tokio::time::timeout(QUERY_TIMEOUT, tokio::net::TcpStream::connect(server))
            .await
            .map_err(|_| {
                fail(format!(
                    "no TCP connection within {} ms",
                    QUERY_TIMEOUT.as_millis()
                ))
            })?
            .map_err(|e| fail(format!("cannot connect over TCP: {e}")))?;
        // Pipelined queries are small writes: without TCP_NODELAY, Nagle
        // holds one back until the previous one is acknowledged, and the
        // server's delayed ACK turns that into 40 ms stalls (measured).
        let _ = tcp.set_nodelay(true);
        let (sender, outbound) = BufDnsStreamHandle::new(server);
        let stream = TcpClientStream::from_stream(HickoryTcpStream::from_stream_with_receiver(
            AsyncIoTokioAsStd(tcp),
            server,
            outbound,
        ));
        let (client, bg) = Client::with_timeout(
            futures::future::ready(Ok(stream)),
            sender,
            QUERY_TIMEOUT,
            None,
        )
        .await
        .map_err(|e| fail(format!("cannot start the DNS client: {e}")))?;
        tokio::spawn(bg);
        Ok(Conn { client, queries: 0 })
    }

    /// Sends `queries` pipelined; returns each answer's records (answer and
    /// additional sections) or why it failed, in any order.
    async fn many(
        &mut self,
        queries: Vec<(Name, RecordType)>,
    ) -> Vec<(Name, Result<Vec<Record>, String>)> {
        self.queries += queries.len();
        let client = self.client.clone();
        stream::iter(queries)
            .map(|(name, t)| {
                let mut c = client.clone();
                async move {
                    let r = match c.query(name.clone(), DNSClass::IN, t).await {
                        Ok(resp) => match resp.response_code() {
                            ResponseCode::NoError | ResponseCode::NXDomain => {
                                let mut v = resp.answers().to_vec();
                                v.extend_from_slice(resp.additionals());
                                Ok(v)
                            }
                            rc => Err(format!("{t} query for {name}: {rc}")),
                        },
                        Err(e) => Err(format!("{t} query for {name}: {e}")),
                    };
                    (name, r)
                }
            })
            .buffer_unordered(MAX_IN_FLIGHT)
            .collect()
            .await
    }

    /// A zone transfer of `zone`: every record, or why not.
    async fn transfer(&mut self, zone: &Name) -> Result<Vec<Record>, String> {
        self.queries += 1;
        let mut s = self.client.zone_transfer(zone.clone(), None);
        let mut out = Vec::new();
        while let Some(part) = s.next().await {
            let resp = part.map_err(|e| e.to_string())?;
            if resp.response_code() != ResponseCode::NoError {
                return Err(resp.response_code().to_string());
            }
            out.extend_from_slice(resp.answers());
            if out.len() > 16 * MAX_INSTANCES {
                return Err("the zone is larger than any rlx registration zone".into());
            }
        }
        Ok(out)
    }
}

/// Browses `_rlx._tcp.<domain>` once (see the module docs).
pub async fn browse(opts: &DnsSdOptions, started: Instant) -> Result<Browse, DnsError> {
    let t0 = Instant::now();
    let server = resolve_server(opts.server.as_deref())
        .await
        .map_err(DnsError::Server)?;
    match tokio::time::timeout(opts.deadline, browse_at(opts, server, started)).await {
        Ok(r) => r.map(|mut b| {
            b.stats.elapsed_ms = t0.elapsed().as_millis() as u64;
            b
        }),
        Err(_) => Err(DnsError::Query {
            server,
            what: format!(
                "the browse did not finish within {} ms",
                opts.deadline.as_millis()
            ),
        }),
    }
}

async fn browse_at(
    opts: &DnsSdOptions,
    server: SocketAddr,
    started: Instant,
) -> Result<Browse, DnsError> {
    let t0 = Instant::now();
    let svc = service_name(&opts.domain);
    let mut conn = Conn::open(server).await?;
    let mut pool = Pool::default();
    let mut stats = BrowseStats {
        server: server.to_string(),
        ..Default::default()
    };
    let mut problems = Vec::new();

    let mut transferred = false;
    if opts.zone_transfer {
        match conn.transfer(&opts.domain).await {
            Ok(records) => {
                pool.add_all(&records);
                transferred = true;
            }
            Err(e) => tracing::info!(
                %server,
                "zone transfer of {} refused or failed ({e}); browsing by queries",
                opts.domain
            ),
        }
    }
    stats.zone_transfer = transferred;
    if !transferred {
        let mut r = conn.many(vec![(svc.clone(), RecordType::PTR)]).await;
        match r.pop().map(|(_, r)| r) {
            Some(Ok(records)) => pool.add_all(&records),
            Some(Err(what)) => return Err(DnsError::Query { server, what }),
            None => unreachable!("one query, one result"),
        }
    }

    // The instances, bounded.
    let mut instances: Vec<Name> = Vec::new();
    let mut seen = HashSet::new();
    for rd in pool.get(&svc, RecordType::PTR).unwrap_or_default() {
        let RData::PTR(p) = rd else { continue };
        let name = p.0.to_lowercase();
        if name.num_labels() != svc.num_labels() + 1 || name.base_name() != svc {
            problems.push(Problem {
                source: Source::Dns,
                host: p.0.to_string(),
                reason: format!("PTR target is not an instance of {svc}; ignored"),
            });
            continue;
        }
        if !seen.insert(name.clone()) {
            continue;
        }
        if instances.len() >= MAX_INSTANCES {
            stats.over_limit += 1;
            continue;
        }
        instances.push(name);
    }
    stats.instances = instances.len() + stats.over_limit;

    // What the server did not volunteer: SRV and TXT per instance, then
    // addresses for SRV targets still without one.
    let volunteered: HashSet<Name> = instances
        .iter()
        .filter(|i| {
            pool.has(i, RecordType::TXT)
                && pool.get(i, RecordType::SRV).is_some_and(|srvs| {
                    srvs.iter()
                        .any(|s| matches!(s, RData::SRV(s) if pool.has_address(s.target())))
                })
        })
        .cloned()
        .collect();
    stats.from_additionals = volunteered.len();
    let mut wanted = Vec::new();
    for i in &instances {
        if !pool.has(i, RecordType::SRV) {
            wanted.push((i.clone(), RecordType::SRV));
        }
        if !pool.has(i, RecordType::TXT) {
            wanted.push((i.clone(), RecordType::TXT));
        }
    }
    let mut failed: HashMap<Name, String> = HashMap::new();
    for (name, r) in conn.many(wanted).await {
        match r {
            Ok(records) => pool.add_all(&records),
            Err(e) => {
                failed.insert(name.to_lowercase(), e);
            }
        }
    }
    for family in [RecordType::A, RecordType::AAAA] {
        let mut targets: Vec<(Name, RecordType)> = instances
            .iter()
            .flat_map(|i| srv_targets(&pool, i))
            .filter(|t| !pool.has_address(t))
            .collect::<HashSet<_>>()
            .into_iter()
            .map(|t| (t, family))
            .collect();
        targets.sort();
        for (name, r) in conn.many(targets).await {
            match r {
                Ok(records) => pool.add_all(&records),
                Err(e) => {
                    failed.entry(name.to_lowercase()).or_insert(e);
                }
            }
        }
    }
    stats.queries = conn.queries;

    // Sightings.
    let now = unix_now();
    let mut sightings = Vec::new();
    let mut expired = Vec::new();
    for i in &instances {
        match sighting_of(&pool, i, now, started) {
            Ok(Some(s)) => sightings.push(s),
            Ok(None) => {
                stats.expired += 1;
                expired.push(Expired {
                    instance: i.clone(),
                    targets: srv_targets(&pool, i),
                });
            }
            Err(reason) => {
                let reason = failed.get(i).cloned().unwrap_or(reason);
                problems.push(Problem {
                    source: Source::Dns,
                    host: instance_label(i),
                    reason,
                });
            }
        }
    }
    let mut what = format!(
        "DNS-SD {svc} at {server}: {} instance(s), {} quer{}",
        stats.instances,
        stats.queries,
        if stats.queries == 1 { "y" } else { "ies" }
    );
    if transferred {
        what.push_str(" (zone transfer)");
    }
    if stats.expired > 0 {
        what.push_str(&format!(", {} expired lease(s) skipped", stats.expired));
    }
    if stats.over_limit > 0 {
        what.push_str(&format!(
            ", {} over the limit of {MAX_INSTANCES} not resolved",
            stats.over_limit
        ));
    }
    let attempt = Attempt {
        source: Source::Dns,
        what,
        elapsed_ms: t0.elapsed().as_millis() as u64,
        answered: sightings.len(),
        stopped_early: None,
        late: None,
    };
    Ok(Browse {
        discovery: Discovery {
            sightings,
            problems,
            attempts: vec![attempt],
        },
        stats,
        expired,
    })
}

fn srv_targets(pool: &Pool, instance: &Name) -> Vec<Name> {
    pool.get(instance, RecordType::SRV)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| match r {
            RData::SRV(s) => Some(s.target().to_lowercase()),
            _ => None,
        })
        .collect()
}

/// `box._rlx._tcp.example.org.` -> `box`.
pub fn instance_label(name: &Name) -> String {
    name.iter()
        .next()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .unwrap_or_default()
}

/// The sighting for one instance; `Ok(None)` when its lease is over.
fn sighting_of(
    pool: &Pool,
    instance: &Name,
    now: u64,
    started: Instant,
) -> Result<Option<Sighting>, String> {
    let label = instance_label(instance);
    let srv = pool
        .get(instance, RecordType::SRV)
        .unwrap_or_default()
        .iter()
        .find_map(|r| match r {
            RData::SRV(s) => Some(s.clone()),
            _ => None,
        })
        .ok_or_else(|| {
            format!("no SRV record at {instance}: registration incomplete or deleted")
        })?;
    if srv.port() == 0 {
        return Err(format!("SRV record of {instance} has port 0"));
    }
    let strings: Vec<Vec<u8>> = pool
        .get(instance, RecordType::TXT)
        .unwrap_or_default()
        .iter()
        .find_map(|r| match r {
            RData::TXT(t) => Some(t.txt_data().iter().map(|s| s.to_vec()).collect()),
            _ => None,
        })
        .ok_or_else(|| {
            format!("no TXT record at {instance}: registration incomplete or deleted")
        })?;
    let size: usize = strings.iter().map(|s| 1 + s.len()).sum();
    if size > MAX_TXT_BYTES {
        return Err(format!(
            "TXT record of {instance} is {size} bytes, over the limit of {MAX_TXT_BYTES}; ignored"
        ));
    }
    if let Some(exp) = expires_of(&strings) {
        if lease_over(exp, now) {
            tracing::debug!(%instance, "lease expired {} s ago; skipped", now - exp);
            return Ok(None);
        }
    }
    let caps = txt::decode(&strings)
        .map_err(|e| format!("{e} (DNS-SD instance {instance}); registration ignored"))?;
    let target = srv.target();
    let mut addrs: Vec<IpAddr> = Vec::new();
    for t in [RecordType::A, RecordType::AAAA] {
        for r in pool.get(target, t).unwrap_or_default() {
            let ip = match r {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            if addrs.len() < MAX_ADDRS_PER_HOST && !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
    }
    // Prefer a routable IPv4 address, then a routable IPv6 one: a wide-area
    // coordinator cannot use a link-local or loopback address.
    let ip = addrs
        .iter()
        .copied()
        .filter(routable)
        .min_by_key(|ip| ip.is_ipv6())
        .ok_or_else(|| {
            if addrs.is_empty() {
                format!("SRV target {target} of {instance} has no A or AAAA record")
            } else {
                format!(
                    "SRV target {target} of {instance} has only loopback or link-local addresses"
                )
            }
        })?;
    Ok(Some(Sighting {
        source: Source::Dns,
        host: label,
        addr: format_addr(ip, srv.port()),
        ip: Some(ip),
        port: srv.port(),
        ssh: None,
        caps: Some(caps),
        evidence: Evidence::Txt,
        heard_on: None,
        found_ms: started.elapsed().as_millis() as u64,
    }))
}

fn routable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified(),
        IpAddr::V6(v6) => !v6.is_loopback() && !v6.is_unicast_link_local() && !v6.is_unspecified(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, PTR, SRV, TXT};

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn rec(owner: &str, rdata: RData) -> Record {
        Record::from_rdata(name(owner), 60, rdata)
    }

    fn txt_of(extra: &[&str]) -> RData {
        let mut v: Vec<String> = vec!["txtvers=1".into(), "cores=8".into(), "ram=1000".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        RData::TXT(TXT::new(v))
    }

    #[test]
    fn servers_take_an_optional_port_and_bracketed_ipv6() {
        assert_eq!(split_server("10.0.0.53").unwrap(), ("10.0.0.53".into(), 53));
        assert_eq!(
            split_server("10.0.0.53:5300").unwrap(),
            ("10.0.0.53".into(), 5300)
        );
        assert_eq!(
            split_server("[fd00::1]:53").unwrap(),
            ("fd00::1".into(), 53)
        );
        assert_eq!(split_server("fd00::1").unwrap(), ("fd00::1".into(), 53));
        assert_eq!(
            split_server("ns1.example.org:54").unwrap(),
            ("ns1.example.org".into(), 54)
        );
        assert!(split_server("ns1:0").is_err());
        assert!(split_server("ns1:http").is_err());
        assert!(split_server("").is_err());
    }

    #[test]
    fn the_system_resolver_is_the_first_nameserver_of_resolv_conf() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("resolv.conf");
        std::fs::write(
            &p,
            "# comment\nsearch lab\nnameserver 10.9.8.7\nnameserver 1.1.1.1\n",
        )
        .unwrap();
        assert_eq!(system_server(&p).unwrap(), "10.9.8.7:53".parse().unwrap());
        std::fs::write(&p, "search lab\n").unwrap();
        let e = system_server(&p).unwrap_err();
        assert!(e.contains("--dns-server"), "{e}");
    }

    /// A server doing RFC 6763 §12.1 additional-record processing gives
    /// everything in the PTR answer: the pool must resolve the instance
    /// from those records alone.
    #[test]
    fn records_from_the_additional_section_resolve_an_instance_without_more_queries() {
        let mut pool = Pool::default();
        pool.add_all(&[
            rec(
                "_rlx._tcp.lab.test.",
                RData::PTR(PTR(name("box._rlx._tcp.lab.test."))),
            ),
            rec(
                "box._rlx._tcp.lab.test.",
                RData::SRV(SRV::new(0, 0, 9100, name("box.lab.test."))),
            ),
            rec("box._rlx._tcp.lab.test.", txt_of(&["expires=99999999999"])),
            rec("BOX.lab.test.", RData::A(A::new(10, 1, 2, 3))),
        ]);
        let s = sighting_of(
            &pool,
            &name("box._rlx._tcp.lab.test."),
            unix_now(),
            Instant::now(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.host.as_str(), s.addr.as_str(), s.source),
            ("box", "10.1.2.3:9100", Source::Dns)
        );
        assert_eq!(s.caps.unwrap().cores, 8);
    }

    #[test]
    fn an_instance_whose_lease_ran_out_is_skipped_and_a_broken_one_is_explained() {
        let mut pool = Pool::default();
        pool.add_all(&[
            rec(
                "old._rlx._tcp.lab.test.",
                RData::SRV(SRV::new(0, 0, 9100, name("old.lab.test."))),
            ),
            rec("old._rlx._tcp.lab.test.", txt_of(&["expires=1000"])),
            rec("old.lab.test.", RData::A(A::new(10, 1, 2, 4))),
            rec(
                "bad._rlx._tcp.lab.test.",
                RData::SRV(SRV::new(0, 0, 9100, name("bad.lab.test."))),
            ),
            rec("bad._rlx._tcp.lab.test.", txt_of(&["dev0=cuda"])),
            rec(
                "noaddr._rlx._tcp.lab.test.",
                RData::SRV(SRV::new(0, 0, 9100, name("gone.lab.test."))),
            ),
            rec("noaddr._rlx._tcp.lab.test.", txt_of(&[])),
        ]);
        let now = unix_now();
        assert_eq!(
            sighting_of(&pool, &name("old._rlx._tcp.lab.test."), now, Instant::now()),
            Ok(None)
        );
        let e =
            sighting_of(&pool, &name("bad._rlx._tcp.lab.test."), now, Instant::now()).unwrap_err();
        assert!(e.contains("`dev0`") && e.contains("bad._rlx._tcp"), "{e}");
        let e = sighting_of(
            &pool,
            &name("noaddr._rlx._tcp.lab.test."),
            now,
            Instant::now(),
        )
        .unwrap_err();
        assert!(e.contains("no A or AAAA"), "{e}");
        let e = sighting_of(
            &pool,
            &name("missing._rlx._tcp.lab.test."),
            now,
            Instant::now(),
        )
        .unwrap_err();
        assert!(e.contains("no SRV"), "{e}");
    }
}
