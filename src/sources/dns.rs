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
//! The zone client is [`rlx_proto::dnssd`] (shared with the agent's
//! registration sweep): one TCP connection, queries pipelined at most
//! [`MAX_IN_FLIGHT`] at once, the `PTR` set first, then `SRV` and `TXT` for
//! each instance the server did not volunteer in additional sections, then
//! addresses for `SRV` targets still without one.
//!
//! BIND 9.18 answers a `PTR` query with the `PTR`s only (its additional
//! processing covers `SRV` targets, not DNS-SD instances), so a browse costs
//! 1 + 2 x N queries there (BENCHMARKS.md has what that costs). With `zone_transfer = true` the browse asks for the whole
//! zone first (`AXFR` of `<domain>`, one query, when the server allows it to
//! this host; `allow-transfer` in BIND) and falls back to the queries above
//! when it is refused.
//!
//! This source turns each instance the client returns into a [`Sighting`]
//! through the resolver both DNS-SD sources share ([`super::dnssd`]),
//! dialling a routable address ([`super::dnssd::pick_routable`]).
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

use super::dnssd::{pick_routable, Path, Records};
use crate::config::DnsSdSection;
use crate::sighting::{Attempt, Discovery, Problem, Sighting, Source};
use hickory_proto::rr::Name;
use rlx_proto::dnssd::{self as zone, label_of, Registration, ZoneBrowse, ZoneOptions};
use rlx_proto::service::{parse_domain, service_name};
use std::time::{Duration, Instant};

pub(crate) use rlx_proto::dnssd::{BrowseStats, DnsError, MAX_INSTANCES};

/// What to browse and where.
#[derive(Debug, Clone)]
pub(crate) struct DnsSdOptions {
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
    pub(crate) fn from_section(s: &DnsSdSection, browse_ms: u64) -> Result<DnsSdOptions, String> {
        Ok(DnsSdOptions {
            domain: parse_domain(&s.domain)?,
            server: s.server.clone(),
            zone_transfer: s.zone_transfer,
            deadline: Duration::from_millis(browse_ms.max(1000)),
        })
    }

    /// The zone client's options.
    fn zone(&self) -> ZoneOptions {
        ZoneOptions {
            domain: self.domain.clone(),
            server: self.server.clone(),
            zone_transfer: self.zone_transfer,
            deadline: self.deadline,
        }
    }
}

/// A browse: sightings for the pipeline, and how it went.
#[derive(Debug, Clone, Default)]
pub(crate) struct Browse {
    /// Sightings, problems and the attempt.
    pub discovery: Discovery,
    /// Details.
    pub stats: BrowseStats,
}

/// The DNS-SD source for the pipeline: [`browse`], with a failure to browse
/// at all reported as a [`Problem`] (other sources go on).
pub(crate) async fn discover(opts: &DnsSdOptions, started: Instant) -> Discovery {
    match browse(opts, started).await {
        Ok(b) => b.discovery,
        Err(e) => {
            let what = format!("DNS-SD browse of {}", service_name(&opts.domain));
            Discovery {
                sightings: Vec::new(),
                problems: vec![Problem::new(Source::Dns, what.clone(), e.to_string())],
                attempts: vec![Attempt {
                    source: Source::Dns,
                    what: format!("{what}: failed ({e})"),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    answered: 0,
                    stopped_early: None,
                    late: None,
                }],
                mdns_links: Vec::new(),
            }
        }
    }
}

/// Browses `_rlx._tcp.<domain>` once (see the module docs).
pub(crate) async fn browse(opts: &DnsSdOptions, started: Instant) -> Result<Browse, DnsError> {
    let t0 = Instant::now();
    let z = zone::browse(&opts.zone()).await?;
    let mut b = browse_of(z, started);
    b.stats.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(b)
}

/// The sightings, problems and attempt of a zone browse.
fn browse_of(z: ZoneBrowse, started: Instant) -> Browse {
    let ZoneBrowse {
        began,
        service: svc,
        server,
        instances,
        strays,
        expired: _,
        stats,
    } = z;
    let mut problems: Vec<Problem> = strays
        .into_iter()
        .map(|s| Problem::stranger(Source::Dns, s.target.to_string(), s.reason))
        .collect();
    let mut sightings = Vec::new();
    for i in &instances {
        let found = i
            .registration
            .clone()
            .and_then(|r| sighting_from(&i.name, &r, started))
            .map_err(|reason| i.query_error.clone().unwrap_or(reason));
        match found {
            Ok(s) => sightings.push(s),
            Err(reason) => problems.push(Problem::stranger(Source::Dns, label_of(&i.name), reason)),
        }
    }
    let mut what = format!(
        "DNS-SD {svc} at {server}: {} instance(s), {} quer{}",
        stats.instances,
        stats.queries,
        if stats.queries == 1 { "y" } else { "ies" }
    );
    if stats.zone_transfer {
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
    if stats.over_budget > 0 {
        what.push_str(&format!(
            ", {} record(s) beyond the browse's budget not kept",
            stats.over_budget
        ));
    }
    let attempt = Attempt {
        source: Source::Dns,
        what,
        elapsed_ms: began.elapsed().as_millis() as u64,
        answered: sightings.len(),
        stopped_early: None,
        late: None,
    };
    Browse {
        discovery: Discovery {
            sightings,
            problems,
            attempts: vec![attempt],
            mdns_links: Vec::new(),
        },
        stats,
    }
}

/// The sighting of one live registration: its caps decoded and a routable
/// address chosen by the shared DNS-SD resolver.
fn sighting_from(instance: &Name, r: &Registration, started: Instant) -> Result<Sighting, String> {
    let label = label_of(instance);
    let records = Records {
        label: &label,
        port: r.port,
        txt: &r.txt,
        path: Path::Zone { instance },
    };
    let caps = records.caps()?;
    let target = &r.target;
    // Prefer a routable IPv4 address, then a routable IPv6 one: a wide-area
    // coordinator cannot use a link-local or loopback address.
    let ip = pick_routable(&r.addrs).ok_or_else(|| {
        if r.addrs.is_empty() {
            format!("SRV target {target} of {instance} has no A or AAAA record")
        } else {
            format!("SRV target {target} of {instance} has only loopback or link-local addresses")
        }
    })?;
    Ok(records.sighting(caps, ip, started.elapsed().as_millis() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, PTR, SRV, TXT};
    use hickory_proto::rr::{RData, Record};
    use rlx_proto::dnssd::Pool;
    use rlx_proto::service::unix_now;

    /// The sighting for one instance of `pool`; `Ok(None)` when its lease is over.
    fn sighting_of(
        pool: &Pool,
        instance: &Name,
        now: u64,
        started: Instant,
    ) -> Result<Option<Sighting>, String> {
        match zone::registration(pool, instance, now)? {
            Some(r) => sighting_from(instance, &r, started).map(Some),
            None => Ok(None),
        }
    }

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
