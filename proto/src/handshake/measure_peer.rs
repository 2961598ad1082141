//! **One agent measures its link to another** — the all-pairs link map's
//! message (the coordinator's `rlx-discover links`): the coordinator asks
//! agent A to run the link measurement ([`super::measure`]) against agent
//! B's port, and A answers with the figures and the address it left from.
//!
//! ```text
//! coordinator -> A  {"rlx":"measure_peer","v":1,"peer":"10.0.0.2:6184","pings":7,"up_bytes":N,"up_ms":250,
//!                    "down_bytes":N,"down_ms":250,"end_mark":true}\n
//! A -> coordinator  {"rlx":"challenge",...}\n              (as for a measurement)
//! coordinator -> A  {"rlx":"prove","proof":"<64 hex>"}\n   (required: see below)
//! A -> B            the link measurement, A as its client, proving A's own key
//! A -> coordinator  {"rlx":"peer_result","v":1,"from":"10.0.0.1","measurement":{...}}\n
//!                   or the handshake's error line, naming B's refusal or failure
//! ```
//!
//! **Only under the cluster key, at both ends.** A request makes A send up
//! to 64 MiB to an address the request names: anyone could otherwise aim
//! every agent of a LAN at one victim. So A serves it only when it holds a
//! key and the coordinator proves it (the proof is the measurement's, over
//! A's nonce, the connection's ends and the request line, which includes
//! `peer`), whatever `--measure` says for plain measurements; and B serves
//! A's measurement only when A proves the key in turn. `up` is A -> B,
//! `down` B -> A.

use super::measure::{Request, MEASURE_VERSION};
use super::measure_client::{dial, open, parse_reply, read_line};
use super::measure_client::{LinkMeasurement, MeasureError, DRAIN_GRACE, UDP_EXTRA_MS};
use crate::keys::Key;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::time::Instant;

/// What the coordinator asks agent A for: a measurement of its link to
/// `peer` (B's agent port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRequest {
    /// B's agent endpoint.
    pub peer: SocketAddr,
    /// The measurement A runs against it.
    pub request: Request,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    rlx: String,
    v: u64,
    peer: SocketAddr,
    #[serde(flatten)]
    request: Request,
}

impl PeerRequest {
    /// The request line, newline included.
    pub fn line(&self) -> String {
        let w = Wire {
            rlx: "measure_peer".into(),
            v: MEASURE_VERSION,
            peer: self.peer,
            request: self.request,
        };
        format!(
            "{}\n",
            serde_json::to_string(&w).expect("request serializes")
        )
    }
}

/// Whether a first line asks for a peer measurement.
pub fn is_peer_request(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Tag {
        rlx: String,
    }
    serde_json::from_slice::<Tag>(line.trim_ascii_end()).is_ok_and(|t| t.rlx == "measure_peer")
}

/// Parses a peer request (agent side); every field is required but
/// `end_mark`, as for a measurement. A `peer` that could not be another
/// box's agent (unspecified, multicast, broadcast, port 0) is refused.
pub fn parse_peer_request(line: &[u8]) -> Result<PeerRequest, String> {
    let w: Wire = serde_json::from_slice(line.trim_ascii_end()).map_err(|e| {
        format!(
            "a peer measurement request is {{\"rlx\":\"measure_peer\",\"v\":1,\"peer\":\"IP:PORT\",\
             \"pings\":N,\"up_bytes\":N,\"up_ms\":N,\"down_bytes\":N,\"down_ms\":N}}: {e}"
        )
    })?;
    if w.rlx != "measure_peer" {
        return Err(format!(
            "expected \"rlx\":\"measure_peer\", got {:?}",
            w.rlx
        ));
    }
    if w.v != MEASURE_VERSION {
        return Err(format!(
            "measure version {} is not spoken here; this agent speaks {MEASURE_VERSION}",
            w.v
        ));
    }
    let ip = w.peer.ip().to_canonical();
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    if ip.is_unspecified() || ip.is_multicast() || broadcast || w.peer.port() == 0 {
        return Err(format!(
            "peer {} is no agent's address: name another box's agent as IP:PORT",
            w.peer
        ));
    }
    Ok(PeerRequest {
        peer: w.peer,
        request: w.request,
    })
}

/// What A measured: the address it left from, and the figures (`up`:
/// A -> B, `down`: B -> A).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerResult {
    /// A's address the measurement left from (the kernel's choice for the
    /// peer's address).
    pub from: IpAddr,
    /// The figures.
    pub measurement: LinkMeasurement,
}

impl PeerResult {
    /// The result line, newline included.
    pub fn line(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            rlx: &'static str,
            v: u64,
            #[serde(flatten)]
            r: &'a PeerResult,
        }
        let out = Out {
            rlx: "peer_result",
            v: MEASURE_VERSION,
            r: self,
        };
        format!(
            "{}\n",
            serde_json::to_string(&out).expect("result serializes")
        )
    }
}

/// Asks the agent at `agent` (A) to measure its link to `req.peer` (B),
/// proving `key`. `timeout` bounds each wait for a line; A's own
/// measurement of B gets the request's windows, its own per-step waits and
/// [`DRAIN_GRACE`] on top.
pub async fn measure_peer(
    agent: SocketAddr,
    key: &Key,
    req: &PeerRequest,
    timeout: Duration,
) -> Result<PeerResult, MeasureError> {
    let g = req.request.granted();
    let udp = g.udp.map_or(0, |u| u.ms + UDP_EXTRA_MS);
    let windows = Duration::from_millis(g.up_ms + g.down_ms + udp);
    // A's whole measurement of B (its own connect, lines and round trips
    // each within `timeout`), then ours around it.
    let deadline = Instant::now() + timeout * 6 + windows * 2 + DRAIN_GRACE * 2;
    let failed = |why: String| MeasureError::Failed { addr: agent, why };
    let (mut rd, mut wr, from) = dial(agent, Instant::now() + timeout).await?;
    let request = req.line();
    open(
        (&mut rd, &mut wr),
        (agent, from),
        &request,
        Some(key),
        (timeout, deadline),
        "unknown",
    )
    .await?;
    let line = read_line(&mut rd, deadline)
        .await
        .map_err(|e| failed(format!("waiting for the figures of {}: {e}", req.peer)))?;
    parse_reply::<PeerResult>(&line, "peer_result").into_result(agent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::measure_client::Reply;

    #[test]
    fn a_peer_request_round_trips_and_names_its_peer() {
        let r = PeerRequest {
            peer: "10.0.0.2:6184".parse().unwrap(),
            request: Request::default(),
        };
        let line = r.line();
        assert!(line.starts_with("{\"rlx\":\"measure_peer\",\"v\":1,\"peer\":\"10.0.0.2:6184\""));
        assert!(is_peer_request(line.as_bytes()));
        assert!(!super::super::measure::is_request(line.as_bytes()));
        assert_eq!(parse_peer_request(line.as_bytes()).unwrap(), r);
    }

    #[test]
    fn a_peer_that_is_no_agent_is_refused_with_what_to_name() {
        for peer in [
            "0.0.0.0:6184",
            "224.0.0.251:5353",
            "255.255.255.255:6184",
            "10.0.0.2:0",
            "[ff02::fb]:6184",
        ] {
            let line = PeerRequest {
                peer: peer.parse().unwrap(),
                request: Request::default(),
            }
            .line();
            let e = parse_peer_request(line.as_bytes()).unwrap_err();
            assert!(e.contains("no agent's address"), "{peer}: {e}");
        }
        let e = parse_peer_request(br#"{"rlx":"measure_peer","v":1,"pings":7}"#).unwrap_err();
        assert!(e.contains("\"peer\":\"IP:PORT\""), "{e}");
    }

    #[test]
    fn a_result_line_parses_back() {
        let r = PeerResult {
            from: "10.0.0.1".parse().unwrap(),
            measurement: LinkMeasurement {
                rtt_ms: 0.2,
                rtt_samples_ms: vec![0.2],
                up_mbps: 100.0,
                down_mbps: 90.0,
                up_bytes: 1,
                down_bytes: 1,
                took_ms: 3,
                udp: None,
            },
        };
        let line = r.line();
        assert!(line.starts_with("{\"rlx\":\"peer_result\",\"v\":1,\"from\":\"10.0.0.1\""));
        match parse_reply::<PeerResult>(line.as_bytes(), "peer_result") {
            Reply::Ok(back) => assert_eq!(back, r),
            _ => panic!("{line}"),
        }
    }
}
