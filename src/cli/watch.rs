//! `rlx-discover watch`: live membership of the cluster.
//!
//! Joins come from the mDNS browse ([`ContinuousBrowse`]); each candidate
//! passes the same admission ([`rlx_discover::admit`]) and device selection (the
//! one pipeline) as in `expand`, then becomes a member. Leaves come two ways:
//!
//! - **goodbye**: an agent that stops cleanly sends mDNS goodbyes; mdns-sd
//!   drops the service about a second later, and the member is reported left
//!   at once (within 2 s of the agent's SIGTERM).
//! - **health check**: a crashed agent (SIGKILL, power loss) sends nothing,
//!   and its mDNS records live for minutes. Every [`HEALTH_INTERVAL`] each
//!   member is asked for its caps over the handshake (staggered attempts, so
//!   one lost packet is not a death); a member that does not answer is
//!   reported left. Bound: [`HEALTH_INTERVAL`] plus one handshake round. A
//!   crashed process whose host is up answers with a reset, which settles it
//!   at once: about 2 s. A host that vanished (power, network) takes the
//!   whole round ([`rlx_discover::admit::ATTEMPTS`] attempts
//!   [`rlx_discover::admit::STAGGER`] apart, each up to
//!   [`rlx_discover::admit::MIN_ATTEMPT`]): about 4.3 s with the defaults.
//!
//! With `--domain` (or `[discover] dns_sd`), the zone is browsed too, every
//! [`DNS_POLL_INTERVAL`]: registrations join through the same admission, and
//! one that disappears from the zone (deleted on the agent's clean stop, or
//! its lease ran out) is reported left. DNS members are named `<instance>
//! (dns)`; a LAN node listed both ways is one member (by node id and port).
//!
//! A member whose caps change materially (the device chosen, its memory, the
//! core count, or the devices list) is reported `updated`.

use anyhow::Result;
use clap::Args;
use rlx_discover::admit::{admit, Rules};
use rlx_discover::config::DiscoverSection;
use rlx_discover::discover::{browse_options, rules};
use rlx_discover::pipeline::{expand, same_machine, NodeDefaults};
use rlx_discover::report::{gib, AddedNode};
use rlx_discover::sighting::{Discovery, Problem, Sighting};
use rlx_discover::sources::dns::{self, DnsSdOptions};
use rlx_discover::sources::mdns::{Change, ContinuousBrowse};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often every member's handshake is checked. Two seconds keeps crash
/// detection within a few seconds while costing each agent one short TCP
/// exchange every two seconds per watching coordinator.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(2);

/// How often the DNS-SD zone is browsed again. Each browse costs 1 + 2N
/// queries on BIND (see [`rlx_discover::sources::dns`]); every 5 s keeps joins and
/// clean leaves within seconds, well inside the records' 60 s TTL.
pub const DNS_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The suffix of DNS members' names in watch events.
const DNS_SUFFIX: &str = " (dns)";

/// Arguments of `watch`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rlx-discover watch                       # joined / updated / left, as lines\n  \
    rlx-discover watch --json                # one JSON object per event\n  \
    rlx-discover watch --config cluster.toml --interface eth1\n  \
    rlx-discover watch --domain rlx.example.org --dns-server 10.0.0.53\n")]
pub struct WatchArgs {
    /// Where to look and whom to admit.
    #[command(flatten)]
    pub lan: crate::cli::lan::LanArgs,
    /// Print one JSON object per event.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many milliseconds (default: until interrupted).
    #[arg(long, value_name = "MS")]
    pub for_ms: Option<u64>,
}

/// One membership event, as printed.
#[derive(Debug, Clone, Serialize)]
struct Event<'a> {
    /// `joined`, `updated`, `left` or `refused`.
    event: &'a str,
    /// Milliseconds since the watch started.
    at_ms: u64,
    /// The instance name announced over mDNS.
    instance: &'a str,
    /// The node as the pipeline made it (absent for `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a AddedNode>,
    /// Why (for `left`, `updated` and `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

struct Printer {
    json: bool,
    started: Instant,
}

impl Printer {
    fn emit(&self, event: &str, instance: &str, node: Option<&AddedNode>, reason: Option<String>) {
        let at_ms = self.started.elapsed().as_millis() as u64;
        if self.json {
            let e = Event {
                event,
                at_ms,
                instance,
                node,
                reason,
            };
            println!("{}", serde_json::to_string(&e).unwrap_or_default());
        } else {
            let what = node.map_or_else(String::new, |n| {
                format!(
                    " {} {} {} {} cores",
                    n.addr,
                    n.device,
                    gib(n.mem_bytes),
                    n.cores
                )
            });
            let why = reason.map_or_else(String::new, |r| format!(" ({r})"));
            println!(
                "{:>8.3}s {event:<8} {instance}{what}{why}",
                at_ms as f64 / 1000.0
            );
        }
    }
}

/// A current member.
struct Member {
    sighting: Sighting,
    node: AddedNode,
    /// Caps as first seen by mDNS (TXT), to tell a real update from the
    /// handshake's fresher copy of the same announcement.
    announced: Option<String>,
}

/// The node the pipeline makes of one admitted sighting: the same device
/// selection as `expand`.
fn node_of(s: &Sighting, defaults: &NodeDefaults) -> Option<AddedNode> {
    let d = Discovery {
        sightings: vec![s.clone()],
        ..Default::default()
    };
    expand(&[], defaults, d).added.into_iter().next()
}

/// What makes an update worth reporting.
fn material(a: &AddedNode, b: &AddedNode) -> Option<String> {
    let mut why = Vec::new();
    if a.device != b.device {
        why.push(format!("device {} -> {}", a.device, b.device));
    }
    if a.mem_bytes != b.mem_bytes {
        why.push(format!(
            "memory {} -> {}",
            gib(a.mem_bytes),
            gib(b.mem_bytes)
        ));
    }
    if a.cores != b.cores {
        why.push(format!("cores {} -> {}", a.cores, b.cores));
    }
    if a.addr != b.addr {
        why.push(format!("address {} -> {}", a.addr, b.addr));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// Runs the watch until interrupted (or `--for-ms`).
pub fn run(a: WatchArgs) -> Result<ExitCode> {
    let d = a.lan.section(None, "watch")?;
    let rules = rules(&d)?;
    let defaults = NodeDefaults::from(&d);
    let rt = crate::cli::runtime::runtime()?;
    rt.block_on(watch(&a, &d, &rules, &defaults))?;
    Ok(ExitCode::SUCCESS)
}

async fn watch(
    a: &WatchArgs,
    d: &DiscoverSection,
    rules: &Rules,
    defaults: &NodeDefaults,
) -> Result<()> {
    let started = Instant::now();
    let mut browse = if d.mdns || d.dns_sd.is_none() {
        Some(ContinuousBrowse::start(&browse_options(d), started)?)
    } else {
        None
    };
    let dns = match &d.dns_sd {
        Some(s) => Some(
            DnsSdOptions::from_section(s, d.browse_ms)
                .map_err(|e| anyhow::anyhow!("dns_sd: {e}"))?,
        ),
        None => None,
    };
    let p = Printer {
        json: a.json,
        started,
    };
    if !a.json {
        let mut on = Vec::new();
        if let Some(b) = &browse {
            on.push(format!("mDNS on {}", b.interfaces().join(", ")));
        }
        if let Some(o) = &dns {
            on.push(format!(
                "DNS-SD in {} every {} s",
                o.domain,
                DNS_POLL_INTERVAL.as_secs()
            ));
        }
        eprintln!(
            "watching _rlx._tcp: {} (health check every {} s; Ctrl-C to stop)",
            on.join("; "),
            HEALTH_INTERVAL.as_secs()
        );
    }
    let mut dns_tick = tokio::time::interval(DNS_POLL_INTERVAL);
    dns_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut members: BTreeMap<String, Member> = BTreeMap::new();
    let mut refused: BTreeSet<(String, String)> = BTreeSet::new();
    let mut health = tokio::time::interval(HEALTH_INTERVAL);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    health.tick().await;
    let stop_at = a.for_ms.map(|ms| started + Duration::from_millis(ms));
    let stop = async {
        match stop_at {
            Some(t) => tokio::time::sleep_until(t.into()).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            change = async {
                match &mut browse {
                    Some(b) => b.next().await,
                    None => std::future::pending().await,
                }
            } => match change {
                None => anyhow::bail!("the mDNS daemon stopped; watch cannot go on"),
                Some(Change::Removed(label)) => {
                    if let Some(m) = members.remove(&label) {
                        p.emit("left", &label, Some(&m.node), Some("goodbye".into()));
                    }
                }
                Some(Change::Snapshot { sightings, problems }) => {
                    report_refusals(&p, &mut refused, &problems);
                    consider(&p, &mut members, &mut refused, sightings, rules, defaults).await;
                }
            },
            _ = dns_tick.tick(), if dns.is_some() => {
                let opts = dns.as_ref().expect("guarded");
                poll_dns(&p, &mut members, &mut refused, opts, started, rules, defaults).await;
            }
            _ = health.tick() => check_health(&p, &mut members, rules, defaults).await,
        }
    }
    if let Some(b) = browse {
        b.shutdown();
    }
    Ok(())
}

/// One DNS-SD browse: new registrations join through admission; DNS members
/// whose registration is gone have left.
async fn poll_dns(
    p: &Printer,
    members: &mut BTreeMap<String, Member>,
    refused: &mut BTreeSet<(String, String)>,
    opts: &DnsSdOptions,
    started: Instant,
    rules: &Rules,
    defaults: &NodeDefaults,
) {
    let found = match dns::browse(opts, started).await {
        Ok(b) => b.discovery,
        Err(e) => {
            tracing::warn!("DNS-SD browse failed; keeping the DNS members as they are: {e}");
            return;
        }
    };
    let rename = |h: &str| format!("{h}{DNS_SUFFIX}");
    let sightings: Vec<Sighting> = found
        .sightings
        .into_iter()
        .map(|mut s| {
            s.host = rename(&s.host);
            s
        })
        .collect();
    let problems: Vec<Problem> = found
        .problems
        .into_iter()
        .map(|mut pr| {
            pr.host = rename(&pr.host);
            pr
        })
        .collect();
    let present: BTreeSet<String> = sightings.iter().map(|s| s.host.clone()).collect();
    let gone: Vec<String> = members
        .keys()
        .filter(|k| k.ends_with(DNS_SUFFIX) && !present.contains(*k))
        .cloned()
        .collect();
    for k in gone {
        if let Some(m) = members.remove(&k) {
            p.emit(
                "left",
                &k,
                Some(&m.node),
                Some("DNS registration deleted or expired".into()),
            );
        }
    }
    report_refusals(p, refused, &problems);
    consider(p, members, refused, sightings, rules, defaults).await;
}

fn report_refusals(p: &Printer, seen: &mut BTreeSet<(String, String)>, problems: &[Problem]) {
    for pr in problems {
        if seen.insert((pr.host.clone(), pr.reason.clone())) {
            p.emit("refused", &pr.host, None, Some(pr.reason.clone()));
        }
    }
}

/// Admits the sightings that are new or whose announcement changed.
async fn consider(
    p: &Printer,
    members: &mut BTreeMap<String, Member>,
    refused: &mut BTreeSet<(String, String)>,
    sightings: Vec<Sighting>,
    rules: &Rules,
    defaults: &NodeDefaults,
) {
    let fresh: Vec<Sighting> = sightings
        .into_iter()
        .filter(|s| {
            let announced = s.caps.as_ref().map(|c| c.to_json());
            members
                .get(&s.host)
                .is_none_or(|m| m.announced != announced || m.sighting.addr != s.addr)
        })
        .collect();
    if fresh.is_empty() {
        return;
    }
    let announced: BTreeMap<String, Option<String>> = fresh
        .iter()
        .map(|s| (s.host.clone(), s.caps.as_ref().map(|c| c.to_json())))
        .collect();
    let out = admit(
        Discovery {
            sightings: fresh,
            ..Default::default()
        },
        rules,
    )
    .await;
    report_refusals(p, refused, &out.problems);
    for s in out.sightings {
        let Some(node) = node_of(&s, defaults) else {
            continue;
        };
        let label = s.host.clone();
        let ann = announced.get(&label).cloned().flatten();
        // The same machine already a member through the other source (mDNS
        // and DNS both list a LAN agent): one node, by the rule `expand`
        // merges with. If that source loses it first, the next browse of
        // this one brings it back.
        let twin = members.iter().find(|(k, m)| {
            **k != label && m.sighting.source != s.source && same_machine(&m.sighting, &s)
        });
        if let Some((k, _)) = twin {
            tracing::debug!("{label} is {k}, already a member through another source");
            continue;
        }
        match members.get_mut(&label) {
            None => {
                p.emit("joined", &label, Some(&node), None);
                members.insert(
                    label,
                    Member {
                        sighting: s,
                        node,
                        announced: ann,
                    },
                );
            }
            Some(m) => {
                if let Some(why) = material(&m.node, &node) {
                    p.emit("updated", &label, Some(&node), Some(why));
                }
                *m = Member {
                    sighting: s,
                    node,
                    announced: ann,
                };
            }
        }
    }
}

/// Asks every member for its caps; the silent ones have left.
async fn check_health(
    p: &Printer,
    members: &mut BTreeMap<String, Member>,
    rules: &Rules,
    defaults: &NodeDefaults,
) {
    if members.is_empty() {
        return;
    }
    let sightings: Vec<Sighting> = members.values().map(|m| m.sighting.clone()).collect();
    let out = admit(
        Discovery {
            sightings,
            ..Default::default()
        },
        rules,
    )
    .await;
    let alive: BTreeSet<String> = out.sightings.iter().map(|s| s.host.clone()).collect();
    for pr in &out.problems {
        if let Some(m) = members.remove(&pr.host) {
            p.emit(
                "left",
                &pr.host,
                Some(&m.node),
                Some(format!("health check failed: {}", pr.reason)),
            );
        }
    }
    for s in out.sightings {
        if let (Some(m), Some(node)) = (members.get_mut(&s.host), node_of(&s, defaults)) {
            if let Some(why) = material(&m.node, &node) {
                p.emit("updated", &s.host, Some(&node), Some(why));
            }
            m.node = node;
            m.sighting = s;
        }
    }
    members.retain(|k, _| alive.contains(k));
}
