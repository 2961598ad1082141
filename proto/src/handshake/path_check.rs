//! **The pre-launch path check's messages** — before the runtime starts,
//! can every rank reach the address it will dial, on the port it will
//! dial, with full-size packets? Nothing listens on the process group's
//! port yet, so the coordinator asks the box that will listen to stand in
//! for a moment, and the box that will dial to try it:
//!
//! ```text
//! coordinator -> B  {"rlx":"path_listen","v":1,"at":"10.0.0.2:9000","token":"<32 hex>","for_ms":4000}\n
//!                   (the challenge and the proof, as for a measurement; the proof is required)
//! B -> coordinator  {"rlx":"listening","v":1}\n   or the error line (port taken, not B's address)
//! coordinator -> A  {"rlx":"path_probe","v":1,"to":"10.0.0.2:9000","token":"<32 hex>","bytes":65536}\n
//!                   (the challenge and the proof)
//! A -> B            connect; "<token> <bytes>\n" and <bytes> zeros; B answers "ok <bytes>\n"
//!                   (no answer: A tries once more with 1200-byte segments, to tell an MTU black hole)
//! A -> coordinator  {"rlx":"probed","v":1,"from":"10.0.0.1","outcome":{"ok":{...}}}\n
//! coordinator       closes B's connection: B stops listening (or at for_ms)
//! ```
//!
//! `bytes` 0 is a bare connect (any listener will do, no token), and
//! `from` names the prober's own address to leave from: together, the
//! check's test of the way back, from the address the runtime will listen
//! on to the dialling box's agent port.
//!
//! **Only under the cluster key**, as the peer measurement: a listener on
//! any port and a connection with a payload to any address are what a
//! stranger must not get from an agent. The listener takes a port from
//! 1024 up, on an address of its own box, for at most [`MAX_LISTEN_MS`];
//! a connection without the token is closed unread. A probe carries at
//! most [`MAX_PROBE_BYTES`].

use super::measure::MEASURE_VERSION;
use super::measure_client::{dial, open, parse_reply, read_line, MeasureError};
use crate::keys::Key;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;

/// The longest a listener stands in.
pub const MAX_LISTEN_MS: u64 = 10_000;
/// The most a probe sends.
pub const MAX_PROBE_BYTES: u64 = 1 << 20;
/// What a probe sends by default: enough full-size segments to meet a
/// path whose small packets pass and large ones vanish (64 KiB, about 45
/// segments of 1448 bytes), little enough to cross a 1 Mbit/s link well
/// within [`PROBE_STEP`].
pub const PROBE_BYTES: u64 = 64 * 1024;
/// The segment size of a probe's second try, after the first got no
/// answer: 1200-byte segments (about 1250-byte packets) cross paths whose
/// MTU is lowered by a tunnel or a VPN, so a pass names a black hole.
pub const SMALL_MSS: u32 = 1200;

/// A path check request's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rlx", rename_all = "snake_case")]
pub enum PathRequest {
    /// Stand in for the runtime: listen at `at` for up to `for_ms`.
    PathListen {
        /// The protocol version.
        v: u64,
        /// The address and port to listen on (one of this box's).
        at: SocketAddr,
        /// What a connection must say first (32 hex).
        token: String,
        /// How long, ms (at most [`MAX_LISTEN_MS`]).
        for_ms: u64,
    },
    /// Connect to `to` and send `bytes`, as a rank dialling it.
    PathProbe {
        /// The protocol version.
        v: u64,
        /// Where to connect.
        to: SocketAddr,
        /// The listener's token (ignored for `bytes` 0).
        token: String,
        /// What to send (at most [`MAX_PROBE_BYTES`]); 0: connect only.
        bytes: u64,
        /// The prober's own address to leave from (one of its box's);
        /// none: the route's choice. The way back is tried from the
        /// address the runtime will listen on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<IpAddr>,
    },
}

impl PathRequest {
    /// The request line, newline included.
    pub fn line(&self) -> String {
        format!(
            "{}\n",
            serde_json::to_string(self).expect("request serializes")
        )
    }
}

/// Whether a first line asks for a path check (either kind).
pub fn is_path_request(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Tag {
        rlx: String,
    }
    serde_json::from_slice::<Tag>(line.trim_ascii_end())
        .is_ok_and(|t| t.rlx == "path_listen" || t.rlx == "path_probe")
}

/// Whether `ip` could be a box's address: not unspecified, multicast or
/// broadcast.
fn addressable(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    !(ip.is_unspecified() || ip.is_multicast() || broadcast)
}

/// Parses and bounds a path check request (agent side).
pub fn parse_path_request(line: &[u8]) -> Result<PathRequest, String> {
    let r: PathRequest = serde_json::from_slice(line.trim_ascii_end()).map_err(|e| {
        format!(
            "a path check request is {{\"rlx\":\"path_listen\",\"v\":1,\"at\":\"IP:PORT\",\
             \"token\":\"<32 hex>\",\"for_ms\":N}} or {{\"rlx\":\"path_probe\",\"v\":1,\
             \"to\":\"IP:PORT\",\"token\":\"<32 hex>\",\"bytes\":N}}: {e}"
        )
    })?;
    let (v, token) = match &r {
        PathRequest::PathListen { v, token, .. } | PathRequest::PathProbe { v, token, .. } => {
            (*v, token)
        }
    };
    if v != MEASURE_VERSION {
        return Err(format!(
            "path check version {v} is not spoken here; this agent speaks {MEASURE_VERSION}"
        ));
    }
    let hex32 = token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit());
    match &r {
        PathRequest::PathListen { at, for_ms, .. } => {
            if !hex32 {
                return Err("the token is 32 hex digits".into());
            }
            if at.port() < 1024 || !addressable(at.ip()) {
                return Err(format!(
                    "{at}: a path check listens on an address of this box, on a port from 1024 up"
                ));
            }
            if *for_ms == 0 || *for_ms > MAX_LISTEN_MS {
                return Err(format!("for_ms is 1-{MAX_LISTEN_MS}, not {for_ms}"));
            }
        }
        PathRequest::PathProbe {
            to, bytes, from, ..
        } => {
            if from.is_some_and(|f| !addressable(f)) {
                return Err("from is an address of the prober's box, or absent".into());
            }
            if *bytes > 0 && !hex32 {
                return Err("the token is 32 hex digits".into());
            }
            if to.port() == 0 || !addressable(to.ip()) {
                return Err(format!("{to} is no box's address: name IP:PORT of a box"));
            }
            if *bytes > MAX_PROBE_BYTES {
                return Err(format!("bytes is at most {MAX_PROBE_BYTES}, not {bytes}"));
            }
        }
    }
    Ok(r)
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Connected, and (with bytes) the listener acknowledged every byte.
    Ok {
        /// The connect, ms.
        connect_ms: f64,
        /// Sending the bytes until the acknowledgement, ms.
        transfer_ms: f64,
    },
    /// Connection refused: nothing listens, or a firewall rejects.
    Refused,
    /// No answer to the connect: the packets are dropped on the way.
    NoAnswer,
    /// No route from the prober to the address.
    Unreachable {
        /// The system's words.
        why: String,
    },
    /// Connected, but the bytes were never acknowledged with full-size
    /// segments; `small` says whether [`SMALL_MSS`] segments crossed.
    Stalled {
        /// The segment size of the first try (the path's, as the kernel
        /// chose it), if known.
        mss: Option<u32>,
        /// Whether the second try, with [`SMALL_MSS`] segments, crossed.
        small: bool,
    },
    /// Something answered that is not the listener (wrong token reply,
    /// closed early).
    Other {
        /// What was seen.
        why: String,
    },
}

/// A probe's result line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probed {
    /// The prober's address the connection left from, when it connected
    /// (or the route's choice).
    pub from: Option<IpAddr>,
    /// What happened.
    pub outcome: Outcome,
}

impl Probed {
    /// The result line, newline included.
    pub fn line(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            rlx: &'static str,
            v: u64,
            #[serde(flatten)]
            p: &'a Probed,
        }
        let out = Out {
            rlx: "probed",
            v: MEASURE_VERSION,
            p: self,
        };
        format!("{}\n", serde_json::to_string(&out).expect("serializes"))
    }
}

/// The listener's go-ahead line.
pub fn listening_line() -> String {
    format!("{{\"rlx\":\"listening\",\"v\":{MEASURE_VERSION}}}\n")
}

/// A listener standing in at an address: it listens until dropped (the
/// connection's close tells the agent to stop) or its time is up.
pub struct Listening {
    _rd: BufReader<OwnedReadHalf>,
    _wr: OwnedWriteHalf,
}

/// Connects to `agent`, proves `key`, sends `req` and reads the first
/// answer line: the opening both requests share.
async fn ask(
    agent: SocketAddr,
    key: &Key,
    req: &PathRequest,
    timeout: Duration,
    deadline: Instant,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, Vec<u8>), MeasureError> {
    let failed = |why: String| MeasureError::Failed { addr: agent, why };
    let (mut rd, mut wr, from) = dial(agent, Instant::now() + timeout).await?;
    open(
        (&mut rd, &mut wr),
        (agent, from),
        &req.line(),
        Some(key),
        (timeout, deadline),
        "unknown",
    )
    .await?;
    let line = read_line(&mut rd, deadline)
        .await
        .map_err(|e| failed(format!("waiting for the answer: {e}")))?;
    Ok((rd, wr, line))
}

/// Asks the agent at `agent` to listen at `at` for up to `for_ms`, with
/// `token`; the listener stands until the returned value is dropped.
pub async fn path_listen(
    agent: SocketAddr,
    key: &Key,
    at: SocketAddr,
    token: &str,
    for_ms: u64,
    timeout: Duration,
) -> Result<Listening, MeasureError> {
    let req = PathRequest::PathListen {
        v: MEASURE_VERSION,
        at,
        token: token.into(),
        for_ms,
    };
    let deadline = Instant::now() + timeout * 3;
    let (rd, wr, line) = ask(agent, key, &req, timeout, deadline).await?;
    #[derive(Deserialize)]
    struct Listen {}
    parse_reply::<Listen>(&line, "listening").into_result(agent)?;
    Ok(Listening { _rd: rd, _wr: wr })
}

/// Asks the agent at `agent` to connect to `to` (from its address `from`,
/// or the route's choice) and send `bytes` with `token`, and returns what
/// it found. `timeout` bounds each step; the
/// probe's own tries take up to three more.
pub async fn path_probe(
    agent: SocketAddr,
    key: &Key,
    (to, from): (SocketAddr, Option<IpAddr>),
    token: &str,
    bytes: u64,
    timeout: Duration,
) -> Result<Probed, MeasureError> {
    let req = PathRequest::PathProbe {
        v: MEASURE_VERSION,
        to,
        token: token.into(),
        bytes,
        from,
    };
    let deadline = Instant::now() + timeout * 3 + PROBE_STEP * 4;
    let (_rd, _wr, line) = ask(agent, key, &req, timeout, deadline).await?;
    parse_reply::<Probed>(&line, "probed").into_result(agent)
}

/// How long a prober waits for a connect, and for the listener's answer
/// after its last byte: a LAN answers in milliseconds, a loaded box in
/// hundreds.
pub const PROBE_STEP: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::measure_client::Reply;

    const TOKEN: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn both_requests_round_trip_and_are_told_from_a_measurement() {
        for r in [
            PathRequest::PathListen {
                v: 1,
                at: "10.0.0.2:9000".parse().unwrap(),
                token: TOKEN.into(),
                for_ms: 4000,
            },
            PathRequest::PathProbe {
                v: 1,
                to: "[fd00::2]:9000".parse().unwrap(),
                token: TOKEN.into(),
                bytes: PROBE_BYTES,
                from: Some("fd00::1".parse().unwrap()),
            },
        ] {
            let line = r.line();
            assert!(is_path_request(line.as_bytes()), "{line}");
            assert!(!super::super::measure::is_request(line.as_bytes()));
            assert_eq!(parse_path_request(line.as_bytes()).unwrap(), r);
        }
        assert!(PathRequest::PathListen {
            v: 1,
            at: "10.0.0.2:9000".parse().unwrap(),
            token: TOKEN.into(),
            for_ms: 1
        }
        .line()
        .starts_with("{\"rlx\":\"path_listen\",\"v\":1,\"at\":\"10.0.0.2:9000\""));
    }

    #[test]
    fn a_listener_on_a_low_port_or_for_long_and_a_probe_too_big_are_refused() {
        let listen = |at: &str, for_ms: u64| {
            PathRequest::PathListen {
                v: 1,
                at: at.parse().unwrap(),
                token: TOKEN.into(),
                for_ms,
            }
            .line()
        };
        for (line, why) in [
            (listen("10.0.0.2:22", 1000), "from 1024 up"),
            (listen("0.0.0.0:9000", 1000), "from 1024 up"),
            (listen("10.0.0.2:9000", MAX_LISTEN_MS + 1), "for_ms"),
            (
                PathRequest::PathProbe {
                    v: 1,
                    to: "224.0.0.251:9000".parse().unwrap(),
                    token: TOKEN.into(),
                    bytes: 1,
                    from: None,
                }
                .line(),
                "no box's address",
            ),
            (
                PathRequest::PathProbe {
                    v: 1,
                    to: "10.0.0.2:9000".parse().unwrap(),
                    token: TOKEN.into(),
                    bytes: MAX_PROBE_BYTES + 1,
                    from: None,
                }
                .line(),
                "at most",
            ),
            (
                PathRequest::PathProbe {
                    v: 1,
                    to: "10.0.0.2:9000".parse().unwrap(),
                    token: "x".into(),
                    bytes: 1,
                    from: None,
                }
                .line(),
                "32 hex",
            ),
        ] {
            let e = parse_path_request(line.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
    }

    #[test]
    fn a_probe_result_line_parses_back() {
        for outcome in [
            Outcome::Ok {
                connect_ms: 0.3,
                transfer_ms: 21.0,
            },
            Outcome::Stalled {
                mss: Some(1448),
                small: true,
            },
            Outcome::NoAnswer,
        ] {
            let p = Probed {
                from: Some("10.0.0.1".parse().unwrap()),
                outcome,
            };
            let line = p.line();
            match parse_reply::<Probed>(line.as_bytes(), "probed") {
                Reply::Ok(back) => assert_eq!(back, p),
                _ => panic!("{line}"),
            }
        }
    }
}
