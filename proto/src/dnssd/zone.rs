//! **A browse of one zone** — the `PTR` set of `_rlx._tcp.<domain>`, then
//! whatever the server did not volunteer, then each instance's records read
//! out of the pool: live registrations with their raw records, broken ones
//! with a reason, and those whose lease ran out.

use super::conn::{Conn, DnsError, Pool};
use super::rules::{add_addr, MAX_INSTANCES, MAX_REGISTERED_TXT_BYTES};
use super::server::resolve_server;
use crate::service::{expires_of, lease_over, service_name, unix_now};
use hickory_proto::rr::{Name, RData, RecordType};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What to browse and where.
#[derive(Debug, Clone)]
pub struct ZoneOptions {
    /// The domain holding `_rlx._tcp` (`rlx.example.org`).
    pub domain: Name,
    /// The server: `None` = the first `nameserver` of `/etc/resolv.conf`.
    pub server: Option<String>,
    /// Try a zone transfer of `domain` first.
    pub zone_transfer: bool,
    /// Deadline for the whole browse.
    pub deadline: Duration,
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
    /// Records the server sent beyond the browse's budget
    /// ([`crate::dnssd::MAX_POOL_RECORDS`], [`crate::dnssd::MAX_POOL_BYTES`]),
    /// not kept: a server answering with junk by the thousand.
    pub over_budget: usize,
    /// Milliseconds the browse took.
    pub elapsed_ms: u64,
}

/// A registration whose lease ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The instance name (`box._rlx._tcp.<domain>.`).
    pub instance: Name,
    /// Its SRV targets (host names holding its addresses).
    pub targets: Vec<Name>,
    /// Its TXT strings as the server holds them, `expires=` included: a
    /// sweep deletes the instance only on the condition that its TXT RRset
    /// is still exactly this (RFC 2136 §2.4.2), so that an agent that
    /// re-registered meanwhile keeps its fresh records.
    pub txt: Vec<Vec<u8>>,
    /// Its `expires=` value (unix seconds).
    pub expires: u64,
}

/// A live registration's records, as the zone holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The SRV target (the host name holding the addresses).
    pub target: Name,
    /// The SRV port (never 0).
    pub port: u16,
    /// The TXT strings, within [`MAX_REGISTERED_TXT_BYTES`].
    pub txt: Vec<Vec<u8>>,
    /// The target's addresses, `A` then `AAAA`, at most
    /// [`MAX_ADDRS_PER_HOST`](super::MAX_ADDRS_PER_HOST), without duplicates.
    pub addrs: Vec<IpAddr>,
}

/// One instance of the PTR set whose lease is not over.
#[derive(Debug, Clone)]
pub struct ZoneInstance {
    /// The instance name, lowercased.
    pub name: Name,
    /// Its records, or why they are incomplete or unusable.
    pub registration: Result<Registration, String>,
    /// Why a query for this name failed, if one did: the better reason for
    /// anything found wrong with it (a timeout, not "no SRV record").
    pub query_error: Option<String>,
}

/// A PTR target that is not an instance of the service.
#[derive(Debug, Clone)]
pub struct Stray {
    /// The PTR target as written.
    pub target: Name,
    /// Why it was ignored.
    pub reason: String,
}

/// A browse of one zone.
#[derive(Debug, Clone)]
pub struct ZoneBrowse {
    /// When the browse started, after the server was resolved.
    pub began: Instant,
    /// The service browsed (`_rlx._tcp.<domain>.`).
    pub service: Name,
    /// The server asked.
    pub server: SocketAddr,
    /// Instances in PTR order, within [`MAX_INSTANCES`], without the expired.
    pub instances: Vec<ZoneInstance>,
    /// PTR targets ignored.
    pub strays: Vec<Stray>,
    /// Registrations whose lease ran out (crashed agents), for agents that
    /// clean the zone up (`rlx-agent --register`).
    pub expired: Vec<Expired>,
    /// Details.
    pub stats: BrowseStats,
}

/// Browses `_rlx._tcp.<domain>` once (see the module docs).
pub async fn browse(opts: &ZoneOptions) -> Result<ZoneBrowse, DnsError> {
    let t0 = Instant::now();
    let server = resolve_server(opts.server.as_deref())
        .await
        .map_err(DnsError::Server)?;
    match tokio::time::timeout(opts.deadline, browse_at(opts, server)).await {
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

async fn browse_at(opts: &ZoneOptions, server: SocketAddr) -> Result<ZoneBrowse, DnsError> {
    let began = Instant::now();
    let svc = service_name(&opts.domain);
    let mut conn = Conn::open(server).await?;
    let mut pool = Pool::default();
    let mut stats = BrowseStats {
        server: server.to_string(),
        ..Default::default()
    };

    let transferred = opts.zone_transfer && transfer(&mut conn, &mut pool, opts, server).await;
    stats.zone_transfer = transferred;
    if !transferred {
        let mut r = conn.many(vec![(svc.clone(), RecordType::PTR)]).await;
        match r.pop().map(|(_, r)| r) {
            Some(Ok(records)) => pool.add_all(&records),
            Some(Err(what)) => return Err(DnsError::Query { server, what }),
            None => unreachable!("one query, one result"),
        }
    }
    let (names, strays) = instances_of(&pool, &svc, &mut stats);
    let failed = complete(&mut conn, &mut pool, &names, &mut stats).await;
    stats.queries = conn.queries;
    stats.over_budget = pool.dropped();
    if stats.over_budget > 0 {
        tracing::warn!(
            %server,
            "the DNS server sent {} record(s) beyond the browse's budget ({} records, {} MiB); \
             not kept: is it an rlx registration zone?",
            stats.over_budget,
            super::rules::MAX_POOL_RECORDS,
            super::rules::MAX_POOL_BYTES >> 20
        );
    }

    let now = unix_now();
    let mut instances = Vec::new();
    let mut expired = Vec::new();
    for i in &names {
        let query_error = failed.get(i).cloned();
        match registration(&pool, i, now) {
            Ok(None) => {
                stats.expired += 1;
                let txt = txt_strings(&pool, i).unwrap_or_default();
                expired.push(Expired {
                    instance: i.clone(),
                    targets: srv_targets(&pool, i),
                    expires: expires_of(&txt).unwrap_or_default(),
                    txt,
                });
            }
            Ok(Some(r)) => instances.push(ZoneInstance {
                name: i.clone(),
                registration: Ok(r),
                query_error,
            }),
            Err(reason) => instances.push(ZoneInstance {
                name: i.clone(),
                registration: Err(query_error.clone().unwrap_or(reason)),
                query_error,
            }),
        }
    }
    Ok(ZoneBrowse {
        began,
        service: svc,
        server,
        instances,
        strays,
        expired,
        stats,
    })
}

/// A zone transfer of the domain into the pool; whether it worked.
async fn transfer(
    conn: &mut Conn,
    pool: &mut Pool,
    opts: &ZoneOptions,
    server: SocketAddr,
) -> bool {
    match conn.transfer(&opts.domain).await {
        Ok(records) => {
            pool.add_all(&records);
            true
        }
        Err(e) => {
            tracing::info!(
                %server,
                "zone transfer of {} refused or failed ({e}); browsing by queries",
                opts.domain
            );
            false
        }
    }
}

/// The instances the PTR set names, bounded, and the targets that are not
/// instances of `svc`.
fn instances_of(pool: &Pool, svc: &Name, stats: &mut BrowseStats) -> (Vec<Name>, Vec<Stray>) {
    let mut instances: Vec<Name> = Vec::new();
    let mut strays = Vec::new();
    let mut seen = HashSet::new();
    for rd in pool.get(svc, RecordType::PTR).unwrap_or_default() {
        let RData::PTR(p) = rd else { continue };
        let name = p.0.to_lowercase();
        if name.num_labels() != svc.num_labels() + 1 || name.base_name() != *svc {
            strays.push(Stray {
                target: p.0.clone(),
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
    (instances, strays)
}

/// Asks for what the server did not volunteer: SRV and TXT per instance,
/// then addresses for SRV targets still without one. Returns why queries
/// failed, by lowercased name.
async fn complete(
    conn: &mut Conn,
    pool: &mut Pool,
    instances: &[Name],
    stats: &mut BrowseStats,
) -> HashMap<Name, String> {
    let volunteered = instances
        .iter()
        .filter(|i| {
            pool.has(i, RecordType::TXT)
                && pool.get(i, RecordType::SRV).is_some_and(|srvs| {
                    srvs.iter()
                        .any(|s| matches!(s, RData::SRV(s) if pool.has_address(s.target())))
                })
        })
        .count();
    stats.from_additionals = volunteered;
    let mut wanted = Vec::new();
    for i in instances {
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
            .flat_map(|i| srv_targets(pool, i))
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
    failed
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

/// The strings of the instance's (first) TXT record in the pool.
fn txt_strings(pool: &Pool, instance: &Name) -> Option<Vec<Vec<u8>>> {
    pool.get(instance, RecordType::TXT)
        .unwrap_or_default()
        .iter()
        .find_map(|r| match r {
            RData::TXT(t) => Some(t.txt_data().iter().map(|s| s.to_vec()).collect()),
            _ => None,
        })
}

/// `box._rlx._tcp.example.org.` -> `box`: the first label, as text.
pub fn label_of(instance: &Name) -> String {
    instance
        .iter()
        .next()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .unwrap_or_default()
}

/// The records of one instance out of the pool; `Ok(None)` when its lease
/// is over (more than [`CLOCK_SKEW`](crate::service::CLOCK_SKEW) ago).
pub fn registration(
    pool: &Pool,
    instance: &Name,
    now: u64,
) -> Result<Option<Registration>, String> {
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
    let strings = txt_strings(pool, instance).ok_or_else(|| {
        format!("no TXT record at {instance}: registration incomplete or deleted")
    })?;
    let size: usize = strings.iter().map(|s| 1 + s.len()).sum();
    if size > MAX_REGISTERED_TXT_BYTES {
        return Err(format!(
            "TXT record of {instance} is {size} bytes, over the limit of {MAX_REGISTERED_TXT_BYTES}; ignored"
        ));
    }
    if let Some(exp) = expires_of(&strings) {
        if lease_over(exp, now) {
            tracing::debug!(%instance, "lease expired {} s ago; skipped", now - exp);
            return Ok(None);
        }
    }
    let target = srv.target();
    let mut addrs: Vec<IpAddr> = Vec::new();
    for t in [RecordType::A, RecordType::AAAA] {
        for r in pool.get(target, t).unwrap_or_default() {
            let ip = match r {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            add_addr(&mut addrs, ip);
        }
    }
    Ok(Some(Registration {
        target: target.clone(),
        port: srv.port(),
        txt: strings,
        addrs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, SRV, TXT};
    use hickory_proto::rr::Record;

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn pool_of(records: &[(&str, RData)]) -> Pool {
        let mut pool = Pool::default();
        let rs: Vec<Record> = records
            .iter()
            .map(|(owner, rd)| Record::from_rdata(name(owner), 60, rd.clone()))
            .collect();
        pool.add_all(&rs);
        pool
    }

    /// A hostile server answering with records of names never asked for,
    /// by the hundred thousand: the pool keeps its budget and counts the
    /// rest, and the records that came first are all there.
    #[test]
    fn a_pool_fed_junk_without_end_keeps_its_budget_and_counts_the_rest() {
        use super::super::rules::{MAX_POOL_BYTES, MAX_POOL_RECORDS};
        use hickory_proto::serialize::binary::BinEncodable;
        let mut pool = Pool::default();
        let first = Record::from_rdata(
            name("a._rlx._tcp.z."),
            60,
            RData::SRV(SRV::new(0, 0, 9100, name("a.z."))),
        );
        pool.add_all(std::slice::from_ref(&first));
        let junk = 3 * MAX_POOL_RECORDS;
        for i in 0..junk {
            let txt = RData::TXT(TXT::new(vec!["x".repeat(200)]));
            pool.add(&Record::from_rdata(name(&format!("j{i}.z.")), 60, txt));
        }
        let kept: usize = pool.records.values().map(|(l, _)| l.len()).sum();
        assert!(kept <= MAX_POOL_RECORDS, "{kept} records kept");
        let bytes: usize = pool
            .records
            .iter()
            .flat_map(|((n, _), (l, _))| {
                l.iter().map(move |r| n.len() + r.to_bytes().unwrap().len())
            })
            .sum();
        assert!(bytes <= MAX_POOL_BYTES, "{bytes} bytes kept");
        assert_eq!(
            pool.dropped(),
            junk + 1 - kept,
            "every record not kept is counted"
        );
        assert!(pool.has(&name("a._rlx._tcp.z."), RecordType::SRV));
    }

    /// The agent's sweep deletes what this calls expired: a live
    /// registration must never be.
    #[test]
    fn a_registration_is_live_until_its_lease_is_over_by_more_than_the_clock_skew() {
        let now = 1_000_000;
        let pool = pool_of(&[
            (
                "a._rlx._tcp.z.",
                RData::SRV(SRV::new(0, 0, 9100, name("a.z."))),
            ),
            (
                "a._rlx._tcp.z.",
                RData::TXT(TXT::new(vec![
                    "txtvers=1".into(),
                    format!("expires={}", now - 5),
                ])),
            ),
            ("a.z.", RData::A(A::new(10, 0, 0, 1))),
            ("a.z.", RData::A(A::new(10, 0, 0, 1))),
            (
                "b._rlx._tcp.z.",
                RData::SRV(SRV::new(0, 0, 9100, name("b.z."))),
            ),
            (
                "b._rlx._tcp.z.",
                RData::TXT(TXT::new(vec![
                    "txtvers=1".into(),
                    format!("expires={}", now - 60),
                ])),
            ),
        ]);
        let a = registration(&pool, &name("A._rlx._tcp.z."), now)
            .unwrap()
            .unwrap();
        assert_eq!((a.port, a.addrs.len()), (9100, 1), "{a:?}");
        assert_eq!(registration(&pool, &name("b._rlx._tcp.z."), now), Ok(None));
        let e = registration(&pool, &name("c._rlx._tcp.z."), now).unwrap_err();
        assert!(e.contains("no SRV"), "{e}");
        assert_eq!(label_of(&name("a._rlx._tcp.z.")), "a");
    }
}
