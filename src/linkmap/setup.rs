//! **What a map run needs, from `[discover]` and an expansion** — the
//! cluster key (without it no agent measures another), the windows, and
//! each node's agent.

use super::run::{MapOptions, MapTarget};
use crate::addr::NodeAddr;
use crate::config::DiscoverSection;
use crate::pipeline::Expansion;
use rlx_proto::handshake::measure::{Request, MAX_MS};
use rlx_proto::handshake::measure_udp::UdpAsk;
use rlx_proto::service::DEFAULT_AGENT_PORT;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a link map cannot be measured: said before anything is dialled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MapSetupError {
    /// `[discover]` names no key file.
    #[error(
        "the link map needs the cluster key: agents measure each other only for holders of \
         it, and only when both hold it; set [discover] key_file (or --key-file) to the key \
         the agents were given with --key-file"
    )]
    NoKey,
    /// The key file cannot be used.
    #[error(transparent)]
    Key(#[from] crate::admit::RulesError),
    /// The transfer window is out of range.
    #[error("link_window_ms {ms} is out of range: use 10..={MAX_MS} (an agent sends at most {MAX_MS} ms each way)")]
    Window {
        /// What was asked for.
        ms: u64,
    },
}

impl MapOptions {
    /// The options `d` asks for: its key ring (required), its
    /// `link_window_ms` each way, its handshake timeout (at least
    /// the handshake's minimum attempt).
    pub fn from_section(d: &DiscoverSection) -> Result<MapOptions, MapSetupError> {
        if !(10..=MAX_MS).contains(&d.link_window_ms) {
            return Err(MapSetupError::Window {
                ms: d.link_window_ms,
            });
        }
        let keys = crate::admit::Rules::from_section(d)?
            .keys
            .ok_or(MapSetupError::NoKey)?;
        Ok(MapOptions {
            request: Request {
                pings: MAP_PINGS,
                up_ms: d.link_window_ms,
                down_ms: d.link_window_ms,
                udp: (d.link_probe_packets > 0).then(|| UdpAsk {
                    packets: d.link_probe_packets,
                    ..UdpAsk::default()
                }),
                ..Request::default()
            },
            timeout: Duration::from_millis(d.timeout_ms).max(crate::admit::MIN_ATTEMPT),
            keys,
        })
    }
}

/// Round trips per path in the map. Each is a full round trip the pair's
/// slot waits for, and a slot lasts as long as its slowest pair: behind a
/// 200 ms standing queue, 7 round trips held every round 1.4 s. The map
/// keeps the shortest round trip its measurements of a path saw.
pub(crate) const MAP_PINGS: u32 = 3;

/// Every node of `exp` with its agent's endpoint: a found node's agent as
/// its handshake named it, a hand-written node's host at the agent's
/// default port. A name that does not resolve is returned with the reason.
pub async fn targets(exp: &Expansion) -> (Vec<MapTarget>, Vec<String>) {
    let mut out = Vec::new();
    let mut unresolved = Vec::new();
    for n in &exp.nodes {
        let agent = exp
            .added()
            .iter()
            .find(|a| a.addr == n.addr)
            .and_then(|a| a.agent.clone())
            .unwrap_or_else(|| {
                let host = NodeAddr::split(&n.addr).0;
                if host.contains(':') {
                    format!("[{host}]:{DEFAULT_AGENT_PORT}")
                } else {
                    format!("{host}:{DEFAULT_AGENT_PORT}")
                }
            });
        let resolved = tokio::net::lookup_host(agent.as_str())
            .await
            .map(|mut a| a.next());
        match resolved {
            Ok(first) => match first {
                Some(agent) => out.push(MapTarget {
                    addr: n.addr.clone(),
                    agent: SocketAddr::new(agent.ip().to_canonical(), agent.port()),
                    ssh: n.ssh.clone(),
                }),
                None => unresolved.push(format!("{}: {agent} has no address", n.addr)),
            },
            Err(e) => unresolved.push(format!("{}: cannot resolve {agent}: {e}", n.addr)),
        }
    }
    (out, unresolved)
}
