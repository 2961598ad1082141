//! **The coordinator's side of the handshake**: [`query`] dials an agent,
//! sends a hello and reads one bounded reply line under one deadline;
//! [`check_reply`] judges that line.

use super::messages::{cut_chars, hello_line_for, IdOnly, ReplyIn};
use super::proof::{verify_any, Nonce};
use super::wire::{MAX_REPLY_BYTES, VERSION};
use crate::caps::{CapsError, NodeCaps};
use crate::keys::KeyRing;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// A verified handshake reply.
#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeReply {
    /// The caps the agent returned, validated.
    pub caps: NodeCaps,
    /// The caps JSON exactly as received (what the proof covers).
    pub caps_json: String,
    /// With a key ring: the index of the key the proof verified under (0 is
    /// the current key; higher means the agent still proves an older one).
    /// `None` when no keys were given.
    pub key_index: Option<usize>,
}

/// Why a connect failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectFailure {
    /// Connection refused (RST): the host is up, nothing listens there.
    Refused,
    /// No answer within the deadline: host down, or a firewall drops packets.
    TimedOut(Duration),
    /// Another OS error (no route to host, network unreachable...).
    Other(String),
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectFailure::Refused => f.write_str(
                "connection refused (nothing listens on that port: is rlx-agent running?)",
            ),
            ConnectFailure::TimedOut(t) => write!(
                f,
                "no answer within {} ms (host down, or a firewall drops the port)",
                t.as_millis()
            ),
            ConnectFailure::Other(e) => f.write_str(e),
        }
    }
}

/// Why a handshake did not admit a node. Each variant is a distinct reason a
/// report shows; none carries key material.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandshakeError {
    /// TCP connect failed.
    #[error("{addr}: cannot connect: {why}")]
    Unreachable {
        /// The address dialled.
        addr: SocketAddr,
        /// Refused, timed out, or another OS error.
        why: ConnectFailure,
    },
    /// Accepted TCP, but did not speak the handshake: closed, sent garbage,
    /// sent too much, or did not reply in time.
    #[error("{addr}: accepted the connection but did not speak the rlx handshake: {why}")]
    NotRlx {
        /// The address dialled.
        addr: SocketAddr,
        /// What happened instead.
        why: String,
    },
    /// Speaks the handshake, in a version or dialect we cannot use (or
    /// refused our hello, saying why).
    #[error("{addr}: incompatible rlx handshake: {why}")]
    Incompatible {
        /// The address dialled.
        addr: SocketAddr,
        /// The version it speaks, or the reason it gave.
        why: String,
    },
    /// The caps in the reply do not parse or are absurd.
    #[error("{addr}: refused its caps: {why}")]
    BadCaps {
        /// The address dialled.
        addr: SocketAddr,
        /// The parse or validation error, naming the field.
        why: CapsError,
    },
    /// We hold a key and the reply carries no proof.
    #[error(
        "{addr}: no proof of the cluster key in the reply (agent running without --key-file?)"
    )]
    NoProof {
        /// The address dialled.
        addr: SocketAddr,
    },
    /// The proof does not verify under any of our keys.
    #[error(
        "{addr}: proof does not verify under any of our {keys} key(s) (agent holds another key)"
    )]
    WrongKey {
        /// The address dialled.
        addr: SocketAddr,
        /// How many keys were tried.
        keys: usize,
    },
    /// The proof verifies, but for a nonce other than the one we sent: the
    /// reply was captured from an earlier handshake and replayed.
    #[error("{addr}: proof is valid for another nonce than the one we sent: a replayed reply")]
    Replay {
        /// The address dialled.
        addr: SocketAddr,
    },
    /// The (proved) caps name another node than the one expected (the id
    /// announced in TXT).
    #[error("{addr}: replied with id {got:?} but announced id {expected:?} (another machine answers on that address)")]
    IdMismatch {
        /// The address dialled.
        addr: SocketAddr,
        /// The id the caller expected.
        expected: String,
        /// The id in the reply.
        got: String,
    },
    /// The agent is in another cluster and refused our hello, which named
    /// ours. A filter against mix-ups, not a security check.
    #[error("{addr}: the agent is in cluster {theirs:?} and refused our hello for another cluster (start it with the coordinator's --cluster, or fix [discover] cluster)")]
    OtherCluster {
        /// The address dialled.
        addr: SocketAddr,
        /// The cluster the agent says it is in (cut to 64 characters).
        theirs: String,
    },
    /// This machine could not run the handshake (no randomness).
    #[error("cannot start a handshake with {addr}: {why}")]
    Local {
        /// The address that was to be dialled.
        addr: SocketAddr,
        /// What failed.
        why: String,
    },
}

impl HandshakeError {
    /// The address the error is about.
    pub fn addr(&self) -> SocketAddr {
        match self {
            HandshakeError::Unreachable { addr, .. }
            | HandshakeError::NotRlx { addr, .. }
            | HandshakeError::Incompatible { addr, .. }
            | HandshakeError::BadCaps { addr, .. }
            | HandshakeError::NoProof { addr }
            | HandshakeError::WrongKey { addr, .. }
            | HandshakeError::Replay { addr }
            | HandshakeError::IdMismatch { addr, .. }
            | HandshakeError::OtherCluster { addr, .. }
            | HandshakeError::Local { addr, .. } => *addr,
        }
    }
}

/// Runs the handshake with the agent at `addr`.
///
/// Connects, sends a hello with a fresh nonce, reads one reply line of at most
/// [`MAX_REPLY_BYTES`], and checks it with [`check_reply`]. The whole exchange
/// shares one deadline of `timeout` from the call: a peer cannot hold the
/// caller longer, however slowly it trickles bytes.
///
/// With `keys`, the reply must prove one of them over our nonce. With
/// `expect_id` (the id announced in TXT), the caps must carry that id.
pub async fn query(
    addr: SocketAddr,
    timeout: Duration,
    keys: Option<&KeyRing>,
    expect_id: Option<&str>,
) -> Result<HandshakeReply, HandshakeError> {
    query_in_cluster(addr, timeout, keys, expect_id, None).await
}

/// [`query`] for a coordinator looking for `cluster`: the hello names it, and
/// an agent in another cluster refuses with [`HandshakeError::OtherCluster`].
pub async fn query_in_cluster(
    addr: SocketAddr,
    timeout: Duration,
    keys: Option<&KeyRing>,
    expect_id: Option<&str>,
    cluster: Option<&str>,
) -> Result<HandshakeReply, HandshakeError> {
    let deadline = Instant::now() + timeout;
    let nonce = Nonce::random().map_err(|why| HandshakeError::Local { addr, why })?;
    let not_rlx = |why: String| HandshakeError::NotRlx { addr, why };

    let stream = match timeout_at(deadline, TcpStream::connect(addr)).await {
        Err(_) => {
            return Err(HandshakeError::Unreachable {
                addr,
                why: ConnectFailure::TimedOut(timeout),
            })
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(HandshakeError::Unreachable {
                addr,
                why: ConnectFailure::Refused,
            })
        }
        Ok(Err(e)) => {
            return Err(HandshakeError::Unreachable {
                addr,
                why: ConnectFailure::Other(e.to_string()),
            })
        }
        Ok(Ok(s)) => s,
    };
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();

    let hello = hello_line_for(&nonce, cluster);
    match timeout_at(deadline, wr.write_all(hello.as_bytes())).await {
        Err(_) => {
            return Err(not_rlx(format!(
                "did not take our hello within {} ms",
                timeout.as_millis()
            )))
        }
        Ok(Err(e)) => {
            return Err(not_rlx(format!(
                "connection failed while sending our hello: {e}"
            )))
        }
        Ok(Ok(())) => {}
    }

    let mut line = Vec::new();
    let mut reader = BufReader::new(rd).take(MAX_REPLY_BYTES as u64 + 1);
    match timeout_at(deadline, reader.read_until(b'\n', &mut line)).await {
        Err(_) if line.is_empty() => {
            return Err(not_rlx(format!(
                "no reply within {} ms",
                timeout.as_millis()
            )))
        }
        Err(_) => {
            return Err(not_rlx(format!(
                "sent {} bytes but no complete reply within {} ms (starts {})",
                line.len(),
                timeout.as_millis(),
                preview(&line)
            )))
        }
        Ok(Err(e)) => {
            return Err(not_rlx(format!(
                "connection failed while reading the reply: {e}"
            )))
        }
        Ok(Ok(0)) => return Err(not_rlx("closed the connection without replying".into())),
        Ok(Ok(_)) if line.len() > MAX_REPLY_BYTES => {
            return Err(not_rlx(format!(
                "reply is longer than {MAX_REPLY_BYTES} bytes (starts {})",
                preview(&line)
            )))
        }
        Ok(Ok(_)) => {}
    }
    check_reply(addr, &line, &nonce, keys, expect_id)
}

/// Checks one reply line against the nonce we sent: the pure half of
/// [`query`], separate so it can be tested and fuzzed without sockets.
///
/// Order matters for what a report says: with keys, the proof is checked
/// before the caps are validated, so a stranger is refused as a stranger
/// (no proof, wrong key, replay) whatever its caps say.
pub fn check_reply(
    addr: SocketAddr,
    line: &[u8],
    sent: &Nonce,
    keys: Option<&KeyRing>,
    expect_id: Option<&str>,
) -> Result<HandshakeReply, HandshakeError> {
    let not_rlx = |why: String| HandshakeError::NotRlx { addr, why };
    let text = std::str::from_utf8(line).map_err(|_| {
        not_rlx(format!(
            "reply is not UTF-8 text (starts {})",
            preview(line)
        ))
    })?;
    let msg: ReplyIn<'_> = serde_json::from_str(text.trim_end()).map_err(|e| {
        not_rlx(format!(
            "reply is not a handshake message ({e}); it starts {}",
            preview(line)
        ))
    })?;
    match msg.rlx.as_str() {
        "caps" => {}
        "error" if msg.cluster.is_some() => {
            return Err(HandshakeError::OtherCluster {
                addr,
                theirs: cut_chars(msg.cluster.as_deref().unwrap_or_default(), 64),
            })
        }
        "error" => {
            return Err(HandshakeError::Incompatible {
                addr,
                why: format!(
                    "the agent refused our hello: {}",
                    msg.error
                        .as_deref()
                        .map_or("(no reason)".into(), |e| preview(e.as_bytes()))
                ),
            })
        }
        other => {
            return Err(not_rlx(format!(
                "expected \"rlx\":\"caps\", got {}",
                preview(other.as_bytes())
            )))
        }
    }
    if msg.v != VERSION {
        return Err(HandshakeError::Incompatible {
            addr,
            why: format!(
                "it speaks handshake version {}, this build speaks {VERSION}",
                msg.v
            ),
        });
    }
    let raw = msg
        .caps
        .ok_or_else(|| not_rlx("a caps message without \"caps\"".into()))?;
    let caps_json = raw.get();

    let key_index = match keys {
        None => None,
        Some(ring) => {
            let id = serde_json::from_str::<IdOnly>(caps_json)
                .map_err(|e| HandshakeError::BadCaps {
                    addr,
                    why: CapsError::Syntax(e.to_string()),
                })?
                .id;
            let proof = msg
                .proof
                .as_deref()
                .ok_or(HandshakeError::NoProof { addr })?;
            match verify_any(ring, sent, &id, caps_json.as_bytes(), proof) {
                Some(i) => Some(i),
                None => {
                    let echoed = msg.nonce.as_deref().and_then(Nonce::from_hex);
                    let replayed = echoed.is_some_and(|old| {
                        old != *sent
                            && verify_any(ring, &old, &id, caps_json.as_bytes(), proof).is_some()
                    });
                    return Err(if replayed {
                        HandshakeError::Replay { addr }
                    } else {
                        HandshakeError::WrongKey {
                            addr,
                            keys: ring.keys().len(),
                        }
                    });
                }
            }
        }
    };

    let caps =
        NodeCaps::from_json(caps_json).map_err(|why| HandshakeError::BadCaps { addr, why })?;
    if let Some(expected) = expect_id {
        if caps.id != expected {
            return Err(HandshakeError::IdMismatch {
                addr,
                expected: expected.to_string(),
                got: caps.id.clone(),
            });
        }
    }
    Ok(HandshakeReply {
        caps,
        caps_json: caps_json.to_string(),
        key_index,
    })
}

/// The start of what a peer sent, quoted and cut, so a report can say what
/// answered instead ("SSH-2.0-OpenSSH_9.2", "HTTP/1.1 400").
fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(60)]);
    let s = s.trim_end_matches(['\r', '\n']);
    if b.len() > 60 {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}
