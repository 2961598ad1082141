//! **Measuring another agent for the coordinator** — the all-pairs link
//! map's request ([`rlx_proto::handshake::measure_peer`]): this agent runs
//! the link measurement against another agent's port, as its client, and
//! sends back the figures and the address it left from.
//!
//! It needs the cluster key, whatever `--measure` says for plain
//! measurements: the request names where up to 64 MiB go, so only a
//! coordinator proving the key may ask, and the other agent measures only
//! for this one because it proves the key in turn. It holds this agent's
//! one-at-a-time lock like a measurement of its own (a box takes part in
//! one measurement at a time, so two do not share its link), is charged
//! to the asker's budget of peer measurements ([`crate::measure::PEER_PER_MINUTE`])
//! and bounded by the same hold limit.

use crate::measure::{authenticate, refuse, send, Gate, Policy, OFF};
use rlx_proto::handshake::measure_link;
use rlx_proto::handshake::measure_peer::{parse_peer_request, PeerResult};
use rlx_proto::handshake::Binding;
use rlx_proto::keys::Key;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::TcpStream;

/// The refusal of a peer measurement by an agent without a key.
pub const NO_KEY: &str = "this agent has no cluster key, and measures its link to another agent \
                          only for holders of one (the request names where up to 64 MiB go): \
                          give the agents and the coordinator the same key_file";

/// Serves one peer measurement whose request `line` was read from `conn`;
/// `key` is this agent's cluster key (the current one), proved to the
/// coordinator's challenge and to the peer alike.
pub async fn serve_peer(
    mut conn: BufReader<TcpStream>,
    line: &[u8],
    key: Option<&Key>,
    gate: &Gate,
    on: &Binding,
    step: Duration,
    held: &AtomicBool,
) -> Result<String, String> {
    let Some(key) = key else {
        return refuse(&mut conn, NO_KEY.into()).await;
    };
    if gate.rules.policy == Policy::Off {
        return refuse(&mut conn, OFF.into()).await;
    }
    let req = match parse_peer_request(line) {
        Ok(r) => r,
        Err(why) => return refuse(&mut conn, why).await,
    };
    if let Err(refused) = authenticate(&mut conn, line, Some(key), on, step).await {
        return refused;
    }
    let holding = match gate.hold(&gate.peers, on, held) {
        Ok(h) => h,
        Err(why) => return refuse(&mut conn, why).await,
    };
    let hold = gate.rules.max_hold;
    let run = measure_link(req.peer, Some(key), &req.request, step, "unknown");
    let outcome = tokio::time::timeout(hold, run).await;
    drop(holding);
    let measurement = match outcome {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            return refuse(&mut conn, format!("measuring {}: {e}", req.peer)).await;
        }
        Err(_) => {
            let why = format!(
                "measuring {}: aborted after this agent's {} ms hold limit; nothing is counted",
                req.peer,
                hold.as_millis()
            );
            return refuse(&mut conn, why).await;
        }
    };
    let result = PeerResult {
        from: source_for(req.peer).unwrap_or(on.local.ip()),
        measurement,
    };
    send(&mut conn, result.line().as_bytes(), step).await?;
    Ok(format!(
        "measured the link to {} for {}: {}",
        req.peer,
        on.peer,
        result.measurement.summary()
    ))
}

/// This box's address towards `to`: the interface the kernel sends from.
/// A UDP `connect` only consults the routing table; nothing is sent.
fn source_for(to: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        SocketAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(to).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}
