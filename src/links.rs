//! **Link measurement by the coordinator** (`browse --links`, `expand
//! --links`, `[discover] measure_links = true`): the RTT and both
//! directions' throughput to every added node, through the measurement
//! message of the handshake ([`rlx_proto::handshake::measure_link`]).
//!
//! **Concurrency.** A throughput test fills the path it measures, and every
//! agent behind one interface of the coordinator shares that interface: two
//! tests through it at once would each see about half of it, and report
//! the coordinator's link instead of the agent's. So the nodes are grouped
//! by the local address the kernel would send from (the coordinator's
//! interface towards them, found with an unsent UDP `connect`), the groups
//! run at the same time, and within a group one node is measured at a
//! time. (Two interfaces that share an uplink further on can still meet a
//! common bottleneck; nothing at the coordinator can see that.)
//!
//! **Cost.** Each node costs its round trips plus the two transfers
//! ([`Request::default`]: its round trips, and at most its window each
//! way). The receivers end a transfer once its rate is steady, so a steady
//! link costs much less than the window and only a link whose rate never
//! settles runs to it; nodes behind one interface add up. BENCHMARKS.md
//! ("links") has the figures.

use crate::pipeline::report::LinkProblem;
use crate::pipeline::Expansion;
use rlx_proto::handshake::measure::Request;
use rlx_proto::handshake::{measure_link, LinkMeasurement, MeasureError};
use rlx_proto::keys::Key;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How the links are measured.
#[derive(Debug, Clone)]
pub(crate) struct LinkOptions {
    /// What each node is asked for.
    pub request: Request,
    /// The wait for each of the agent's lines (the transfers get their
    /// windows on top).
    pub timeout: Duration,
    /// The cluster key to prove (the current one, the first of the file):
    /// an agent holding a key measures only for key holders.
    pub key: Option<Key>,
}

/// One node to measure: its address as written, and the agent's version
/// from its caps (named when the agent is too old to measure).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Its agent's endpoint (`host:port` as in the node's `addr`, with the
    /// agent's port): the measurement runs over the agent's port.
    pub addr: String,
    /// The agent's version, or empty when unknown.
    pub version: String,
}

/// The coordinator's address towards `to`: the interface its packets would
/// leave by. A UDP `connect` only consults the routing table; nothing is
/// sent.
fn source_for(to: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        SocketAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(to).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// Measures every target, one at a time per coordinator interface, the
/// interfaces in parallel; results in the targets' order.
pub(crate) async fn measure_all(
    targets: &[Target],
    opts: &LinkOptions,
) -> Vec<Result<LinkMeasurement, String>> {
    let mut out: Vec<Option<Result<LinkMeasurement, String>>> = vec![None; targets.len()];
    let mut groups: BTreeMap<Option<IpAddr>, Vec<(usize, SocketAddr)>> = BTreeMap::new();
    for (i, t) in targets.iter().enumerate() {
        match tokio::net::lookup_host(t.addr.as_str())
            .await
            .map(|mut a| a.next())
        {
            Ok(Some(a)) => groups.entry(source_for(a)).or_default().push((i, a)),
            Ok(None) => out[i] = Some(Err(format!("{}: the name has no address", t.addr))),
            Err(e) => out[i] = Some(Err(format!("{}: cannot resolve it: {e}", t.addr))),
        }
    }
    let runs = groups.into_values().map(|group| async move {
        let mut done = Vec::with_capacity(group.len());
        for (i, a) in group {
            let version = &targets[i].version;
            let version = if version.is_empty() {
                "unknown"
            } else {
                version
            };
            let r = measure_link(a, opts.key.as_ref(), &opts.request, opts.timeout, version)
                .await
                .map_err(|e: MeasureError| e.to_string());
            done.push((i, r));
        }
        done
    });
    for (i, r) in futures::future::join_all(runs).await.into_iter().flatten() {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every target measured or refused"))
        .collect()
}

/// Measures the link of every node the expansion added and records it on
/// the node (`link`), in the report too, and each failure as a
/// [`LinkProblem`]: a node that cannot be measured is still added.
/// `versions` maps node ids to agent versions.
pub(crate) async fn measure_expansion(
    exp: &mut Expansion,
    versions: &HashMap<String, String>,
    opts: &LinkOptions,
) {
    // The measurement is the agent's, on its own port; a node no agent
    // vouched for has nothing to measure with.
    let (with_agent, without): (Vec<usize>, Vec<usize>) =
        (0..exp.report.added.len()).partition(|&i| exp.report.added[i].agent.is_some());
    for i in without {
        exp.report.link_problems.push(LinkProblem {
            addr: exp.report.added[i].addr.clone(),
            why: "no rlx-agent answered there, and the measurement is the agent's".into(),
        });
    }
    let targets: Vec<Target> = with_agent
        .iter()
        .map(|&i| {
            let a = &exp.report.added[i];
            Target {
                addr: a.agent.clone().unwrap_or_default(),
                version: versions.get(&a.id).cloned().unwrap_or_default(),
            }
        })
        .collect();
    let results = measure_all(&targets, opts).await;
    for (&i, r) in with_agent.iter().zip(results) {
        let a = &mut exp.report.added[i];
        match r {
            Ok(m) => a.measured_link = Some(m),
            Err(why) => exp.report.link_problems.push(LinkProblem {
                addr: a.addr.clone(),
                why,
            }),
        }
    }
}

/// Agent versions by node id, from the caps the sources brought.
pub(crate) fn versions(found: &crate::sighting::Discovery) -> HashMap<String, String> {
    found
        .sightings
        .iter()
        .filter_map(|s| s.caps.as_ref())
        .map(|c| (c.id.clone(), c.version.clone()))
        .collect()
}

/// Why link measurement cannot be set up: said before any source runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkSetupError {
    /// The transfer window asked for (`--link-window-ms`) is out of range.
    #[error(
        "--link-window-ms {ms} is out of range: use 10..={max} (an agent sends at most {max} ms \
         each way)"
    )]
    Window {
        /// What was asked for.
        ms: u64,
        /// The most an agent sends.
        max: u64,
    },
    /// The key file cannot be used (the measurement is authenticated with it).
    #[error(transparent)]
    Key(#[from] crate::admit::RulesError),
}

/// The options `[discover]` asks for: the default request with its
/// `link_window_ms`, the handshake's timeout (at least
/// [`crate::admit::MIN_ATTEMPT`]), and the current key.
pub(crate) fn options(d: &crate::config::DiscoverSection) -> Result<LinkOptions, LinkSetupError> {
    let max = rlx_proto::handshake::measure::MAX_MS;
    if !(10..=max).contains(&d.link_window_ms) {
        return Err(LinkSetupError::Window {
            ms: d.link_window_ms,
            max,
        });
    }
    let key = crate::admit::Rules::from_section(d)?
        .keys
        .map(|ring| ring.keys()[0].clone());
    Ok(LinkOptions {
        request: Request {
            up_ms: d.link_window_ms,
            down_ms: d.link_window_ms,
            ..Request::default()
        },
        timeout: Duration::from_millis(d.timeout_ms).max(crate::admit::MIN_ATTEMPT),
        key,
    })
}
