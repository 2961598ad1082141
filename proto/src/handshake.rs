//! **The handshake on the agent's port** — one definition of the two messages,
//! the proof, and the client, shared by `rlx-agent` and every coordinator
//! source.
//!
//! ```text
//! coordinator -> agent   {"rlx":"hello","v":1,"nonce":"<64 hex: 32 random bytes>"}\n
//! agent -> coordinator   {"rlx":"caps","v":1,"nonce":"<echo>","caps":{...},"proof":"<64 hex>"}\n
//! ```
//!
//! One line each way, then the agent closes. The hello may also carry the
//! coordinator's `"cluster"` name: an agent started with another `--cluster`
//! then answers with an error line naming its own cluster instead of its caps
//! (a filter against mix-ups between neighbouring clusters, not security:
//! anyone can claim any name). `proof` is present only when the agent has a
//! cluster key:
//!
//! ```text
//! proof = HMAC-SHA256(key, "rlx-handshake-v1" || nonce (32 raw bytes)
//!                          || u32be(len id)   || id
//!                          || u32be(len caps) || caps JSON bytes exactly as sent)
//! ```
//!
//! The verifier MACs the caps bytes it received (a [`RawValue`]), never a
//! re-serialization, so the two ends cannot disagree about formatting. The
//! agent echoes the nonce it proved: a reply replayed from an earlier
//! handshake carries the old nonce, verifies under it, and is reported as
//! [`HandshakeError::Replay`] rather than as a wrong key. `docs/protocol.md`
//! shows the exchange with a shell and a Python script.
//!
//! The client ([`query`]) holds one deadline for the whole exchange: a peer
//! that is slow, silent or endless cannot keep it past `timeout`, and the
//! reply is read only up to [`MAX_REPLY_BYTES`].

use crate::caps::{limits, CapsError, NodeCaps};
use crate::keys::{Key, KeyRing};
use hmac::Mac;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// The handshake version this build speaks (`"v"` in both messages).
pub const VERSION: u64 = 1;

/// Domain-separation tag at the start of every MAC input, so a proof can
/// never be mistaken for a MAC computed by another protocol under the same
/// key, and a future version can change the input without ambiguity.
pub const PROOF_TAG: &[u8] = b"rlx-handshake-v1";

/// Bytes of randomness in a nonce. 32 bytes (256 bits) make a repeat, and so
/// a successful replay, practically impossible across every coordinator
/// that will ever run.
pub const NONCE_BYTES: usize = 32;

/// Longest hello line an agent reads, newline included. A hello is about 100
/// bytes; 1 KiB leaves room for fields a later version may add while keeping
/// a garbage sender from costing the agent more than that.
pub const MAX_HELLO_BYTES: usize = 1024;

/// Longest reply line a client reads, newline included: the largest caps
/// JSON ([`limits::MAX_JSON_BYTES`]) plus room for the envelope.
pub const MAX_REPLY_BYTES: usize = limits::MAX_JSON_BYTES + 1024;

// ---------------------------------------------------------------- nonce

/// A handshake nonce: 32 random bytes, 64 lowercase hex characters on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Nonce([u8; NONCE_BYTES]);

impl Nonce {
    /// A fresh nonce from the operating system's CSPRNG.
    pub fn random() -> Result<Nonce, String> {
        let mut b = [0u8; NONCE_BYTES];
        getrandom::fill(&mut b).map_err(|e| format!("no random bytes for a nonce: {e}"))?;
        Ok(Nonce(b))
    }

    /// Wraps raw bytes (tests, replay experiments).
    pub fn from_bytes(b: [u8; NONCE_BYTES]) -> Nonce {
        Nonce(b)
    }

    /// Parses the wire form: exactly 64 hex characters.
    pub fn from_hex(s: &str) -> Option<Nonce> {
        let mut b = [0u8; NONCE_BYTES];
        (s.len() == 2 * NONCE_BYTES)
            .then(|| hex::decode_to_slice(s, &mut b).ok())
            .flatten()
            .map(|()| Nonce(b))
    }

    /// The wire form.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The raw bytes (what the MAC covers).
    pub fn as_bytes(&self) -> &[u8; NONCE_BYTES] {
        &self.0
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce({})", self.to_hex())
    }
}

// ---------------------------------------------------------------- proof

fn mac_input(mac: &mut impl Mac, nonce: &Nonce, id: &str, caps_json: &[u8]) {
    mac.update(PROOF_TAG);
    mac.update(&nonce.0);
    // Length prefixes keep (id, caps) boundaries unambiguous. Both are far
    // below 4 GiB (id is 16 bytes, caps at most MAX_JSON_BYTES).
    mac.update(&(id.len() as u32).to_be_bytes());
    mac.update(id.as_bytes());
    mac.update(&(caps_json.len() as u32).to_be_bytes());
    mac.update(caps_json);
}

/// The proof an agent with `key` sends for `nonce`, its node `id` and the
/// exact `caps_json` bytes it sends: 64 lowercase hex characters.
pub fn prove(key: &Key, nonce: &Nonce, id: &str, caps_json: &[u8]) -> String {
    let mut mac = key.mac();
    mac_input(&mut mac, nonce, id, caps_json);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `proof` (hex, either case) is the proof under `key` for these
/// inputs. Compares in constant time.
pub fn verify(key: &Key, nonce: &Nonce, id: &str, caps_json: &[u8], proof: &str) -> bool {
    let mut tag = [0u8; 32];
    if proof.len() != 64 || hex::decode_to_slice(proof, &mut tag).is_err() {
        return false;
    }
    let mut mac = key.mac();
    mac_input(&mut mac, nonce, id, caps_json);
    mac.verify_slice(&tag).is_ok()
}

/// Index in `ring` of the first key under which `proof` verifies.
pub fn verify_any(
    ring: &KeyRing,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    proof: &str,
) -> Option<usize> {
    ring.keys()
        .iter()
        .position(|k| verify(k, nonce, id, caps_json, proof))
}

// ---------------------------------------------------------------- messages

#[derive(Serialize, Deserialize)]
struct HelloWire {
    rlx: String,
    v: u64,
    nonce: String,
    /// The coordinator's cluster name. Optional, so hellos from coordinators
    /// that predate it (and from scripts) are still answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
}

/// A parsed hello (agent side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The version the coordinator speaks (>= 1).
    pub v: u64,
    /// The nonce to prove.
    pub nonce: Nonce,
    /// The cluster the coordinator looks for, if it said.
    pub cluster: Option<String>,
}

/// The coordinator's hello line, newline included.
pub fn hello_line(nonce: &Nonce) -> String {
    hello_line_for(nonce, None)
}

/// The hello line of a coordinator looking for `cluster` (none: any).
pub fn hello_line_for(nonce: &Nonce, cluster: Option<&str>) -> String {
    let msg = HelloWire {
        rlx: "hello".into(),
        v: VERSION,
        nonce: nonce.to_hex(),
        cluster: cluster.map(str::to_string),
    };
    // Strings and an integer always serialize.
    format!(
        "{}\n",
        serde_json::to_string(&msg).expect("hello serializes")
    )
}

/// Parses a hello line (agent side). Unknown fields are ignored so a later
/// client can add some; a `v` above ours is answered in our version, and the
/// client decides whether that will do.
pub fn parse_hello(line: &[u8]) -> Result<Hello, HelloError> {
    let text = std::str::from_utf8(line).map_err(|_| HelloError::new("hello is not UTF-8 text"))?;
    let msg: HelloWire = serde_json::from_str(text.trim_end()).map_err(|e| {
        HelloError::new(format!(
            "hello is not {{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"<64 hex>\"}}: {e}"
        ))
    })?;
    if msg.rlx != "hello" {
        return Err(HelloError::new(format!(
            "expected \"rlx\":\"hello\", got {:?}",
            msg.rlx.chars().take(20).collect::<String>()
        )));
    }
    if msg.v == 0 {
        return Err(HelloError::new(
            "handshake version 0 does not exist; this agent speaks 1",
        ));
    }
    let nonce = Nonce::from_hex(&msg.nonce)
        .ok_or_else(|| HelloError::new("nonce must be 64 hex characters (32 random bytes)"))?;
    Ok(Hello {
        v: msg.v,
        nonce,
        cluster: msg.cluster,
    })
}

/// Why an agent refused a hello. Sent back as an error line so that a person
/// typing at the port with `nc` learns what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct HelloError {
    why: String,
    /// Set when the hello named another cluster: the agent's own cluster,
    /// sent back as `"cluster"` so the coordinator can report a cluster
    /// mismatch rather than an incompatible peer.
    cluster: Option<String>,
}

impl HelloError {
    fn new(s: impl Into<String>) -> HelloError {
        HelloError {
            why: s.into(),
            cluster: None,
        }
    }

    /// The agent is in cluster `mine`; the hello asked for `wanted`.
    fn other_cluster(mine: &str, wanted: &str) -> HelloError {
        HelloError {
            why: format!(
                "this agent is in cluster {:?}, not {:?}",
                cut_chars(mine, 64),
                cut_chars(wanted, 64)
            ),
            cluster: Some(mine.to_string()),
        }
    }

    /// `{"rlx":"error","v":1,"error":"..."}\n`, plus `"cluster":"<the
    /// agent's>"` when the refusal is a cluster mismatch.
    pub fn to_line(&self) -> String {
        #[derive(Serialize)]
        struct ErrorOut<'a> {
            rlx: &'static str,
            v: u64,
            error: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            cluster: Option<&'a str>,
        }
        let line = ErrorOut {
            rlx: "error",
            v: VERSION,
            error: &self.why,
            cluster: self.cluster.as_deref(),
        };
        format!(
            "{}\n",
            serde_json::to_string(&line).expect("error line serializes")
        )
    }
}

#[derive(Serialize)]
struct ReplyOut<'a> {
    rlx: &'static str,
    v: u64,
    nonce: String,
    caps: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    proof: Option<String>,
}

/// The agent's reply line for `nonce`, newline included: the caps JSON,
/// and the proof when the agent has a key.
pub fn reply_line(nonce: &Nonce, caps: &NodeCaps, key: Option<&Key>) -> String {
    let caps_json = caps.to_json();
    let proof = key.map(|k| prove(k, nonce, &caps.id, caps_json.as_bytes()));
    // to_json output is valid JSON, so it is a valid RawValue.
    let raw: &RawValue = serde_json::from_str(&caps_json).expect("caps JSON is JSON");
    let msg = ReplyOut {
        rlx: "caps",
        v: VERSION,
        nonce: nonce.to_hex(),
        caps: raw,
        proof,
    };
    format!(
        "{}\n",
        serde_json::to_string(&msg).expect("reply serializes")
    )
}

/// Everything an agent does with one hello line: the reply line to send, or
/// the reason to refuse (send [`HelloError::to_line`] and close).
///
/// An agent in a cluster (`caps.cluster`) refuses a hello that names another
/// one, so a coordinator of the neighbouring cluster does not get its caps.
/// A hello that names no cluster is answered (older coordinators, scripts),
/// and an agent without a cluster answers every hello: the coordinator
/// applies its own filter to the caps it gets. This is a filter against
/// mix-ups, not security: anyone can put any name in a hello.
pub fn answer(hello: &[u8], caps: &NodeCaps, key: Option<&Key>) -> Result<String, HelloError> {
    let hello = parse_hello(hello)?;
    if let (Some(wanted), Some(mine)) = (&hello.cluster, &caps.cluster) {
        if wanted != mine {
            return Err(HelloError::other_cluster(mine, wanted));
        }
    }
    Ok(reply_line(&hello.nonce, caps, key))
}

/// At most `max` characters of `s`, for messages that quote a stranger.
fn cut_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[derive(Deserialize)]
struct ReplyIn<'a> {
    rlx: String,
    v: u64,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default, borrow)]
    caps: Option<&'a RawValue>,
    #[serde(default)]
    proof: Option<String>,
    #[serde(default)]
    error: Option<String>,
    /// In an error line: the agent's cluster, when it refused ours.
    #[serde(default)]
    cluster: Option<String>,
}

/// Just the id out of a caps object, read before the proof is checked so a
/// stranger's caps are judged by their proof first.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: String,
}

// ---------------------------------------------------------------- client

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::DeviceInfo;
    use proptest::prelude::*;
    use tokio::net::TcpListener;

    fn caps() -> NodeCaps {
        NodeCaps {
            id: "0123456789abcdef".into(),
            hostname: "gpu-a".into(),
            os: "linux".into(),
            cores: 8,
            ram_total: 16 << 30,
            ram_avail: 8 << 30,
            devices: vec![DeviceInfo {
                device: "cuda".into(),
                name: "RTX".into(),
                mem_bytes: 24 << 30,
                unified: false,
                gflops: 0.0,
                available: true,
            }],
            ..Default::default()
        }
    }

    fn key(b: u8) -> Key {
        Key::from_bytes([b; 32])
    }

    fn addr() -> SocketAddr {
        "127.0.0.1:9100".parse().unwrap()
    }

    /// A fixed vector, also computed independently with Python's hmac module
    /// (see docs/protocol.md), so the MAC input layout cannot drift.
    #[test]
    fn the_proof_matches_the_documented_test_vector() {
        let nonce = Nonce::from_bytes([0x11; 32]);
        let proof = prove(&key(0x42), &nonce, "0123456789abcdef", br#"{"cores":1}"#);
        assert_eq!(
            proof,
            "02457afea2a9eaa4ea2edf1995a4c039f10afccb85334d859c67972ab1c2750f"
        );
    }

    #[test]
    fn a_proof_verifies_only_for_its_own_inputs() {
        let n = Nonce::from_bytes([1; 32]);
        let p = prove(&key(1), &n, "0123456789abcdef", b"{}");
        assert!(verify(&key(1), &n, "0123456789abcdef", b"{}", &p));
        assert!(verify(
            &key(1),
            &n,
            "0123456789abcdef",
            b"{}",
            &p.to_uppercase()
        ));
        assert!(
            !verify(&key(2), &n, "0123456789abcdef", b"{}", &p),
            "other key"
        );
        assert!(
            !verify(
                &key(1),
                &Nonce::from_bytes([2; 32]),
                "0123456789abcdef",
                b"{}",
                &p
            ),
            "other nonce"
        );
        assert!(
            !verify(&key(1), &n, "0123456789abcdee", b"{}", &p),
            "other id"
        );
        assert!(
            !verify(&key(1), &n, "0123456789abcdef", b"{ }", &p),
            "other caps bytes"
        );
        assert!(
            !verify(&key(1), &n, "", b"0123456789abcdef{}", &p),
            "length prefixes separate id and caps"
        );
        assert!(
            !verify(&key(1), &n, "0123456789abcdef", b"{}", "zz"),
            "malformed proof"
        );
    }

    #[test]
    fn the_agent_answer_round_trips_through_the_client_check() {
        let n = Nonce::random().unwrap();
        let reply = answer(hello_line(&n).as_bytes(), &caps(), None).unwrap();
        assert!(
            reply.ends_with('\n') && !reply.trim_end().contains('\n'),
            "one line"
        );
        let r = check_reply(addr(), reply.as_bytes(), &n, None, Some("0123456789abcdef")).unwrap();
        assert_eq!(r.caps, caps());
        assert_eq!(r.key_index, None);
        assert!(!reply.contains("proof"), "no key, no proof");
    }

    #[test]
    fn a_keyed_answer_proves_and_rotation_accepts_an_older_key() {
        let n = Nonce::random().unwrap();
        let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(7))).unwrap();
        let ring = KeyRing::new(vec![key(8), key(7)]).unwrap();
        let r = check_reply(addr(), reply.as_bytes(), &n, Some(&ring), None).unwrap();
        assert_eq!(r.key_index, Some(1), "proved with the second (older) key");
    }

    #[test]
    fn each_refusal_has_its_own_reason() {
        let n = Nonce::random().unwrap();
        let ring = KeyRing::single(key(1));
        let plain = answer(hello_line(&n).as_bytes(), &caps(), None).unwrap();
        let err = check_reply(addr(), plain.as_bytes(), &n, Some(&ring), None).unwrap_err();
        assert!(matches!(err, HandshakeError::NoProof { .. }), "{err}");

        let other = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(2))).unwrap();
        let err = check_reply(addr(), other.as_bytes(), &n, Some(&ring), None).unwrap_err();
        assert!(
            matches!(err, HandshakeError::WrongKey { keys: 1, .. }),
            "{err}"
        );

        let old = Nonce::random().unwrap();
        let captured = answer(hello_line(&old).as_bytes(), &caps(), Some(&key(1))).unwrap();
        let err = check_reply(addr(), captured.as_bytes(), &n, Some(&ring), None).unwrap_err();
        assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");

        let mine = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1))).unwrap();
        let err = check_reply(
            addr(),
            mine.as_bytes(),
            &n,
            Some(&ring),
            Some("ffffffffffffffff"),
        )
        .unwrap_err();
        assert!(matches!(err, HandshakeError::IdMismatch { .. }), "{err}");

        // A replayer that rewrites the echo to our nonce only gets "wrong key".
        let forged = captured.replace(&old.to_hex(), &n.to_hex());
        let err = check_reply(addr(), forged.as_bytes(), &n, Some(&ring), None).unwrap_err();
        assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err}");
    }

    #[test]
    fn tampered_caps_do_not_verify() {
        let n = Nonce::random().unwrap();
        let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1))).unwrap();
        let tampered = reply.replace("\"cores\":8", "\"cores\":80");
        let err = check_reply(
            addr(),
            tampered.as_bytes(),
            &n,
            Some(&KeyRing::single(key(1))),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err}");
    }

    #[test]
    fn absurd_caps_are_bad_caps_naming_the_field() {
        let n = Nonce::random().unwrap();
        let line = r#"{"rlx":"caps","v":1,"caps":{"os":"linux","cores":1000000,"ram_total":1}}"#;
        let err = check_reply(addr(), line.as_bytes(), &n, None, None).unwrap_err();
        assert!(
            matches!(err, HandshakeError::BadCaps { .. }) && err.to_string().contains("cores"),
            "{err}"
        );
    }

    #[test]
    fn garbage_and_foreign_protocols_are_not_rlx() {
        let n = Nonce::random().unwrap();
        for line in [
            &b"SSH-2.0-OpenSSH_9.2p1\r\n"[..],
            b"\xff\xfe",
            b"{}",
            b"{\"rlx\":\"caps\",\"v\":1}",
        ] {
            let err = check_reply(addr(), line, &n, None, None).unwrap_err();
            assert!(matches!(err, HandshakeError::NotRlx { .. }), "{err}");
        }
        let err = check_reply(addr(), b"SSH-2.0-OpenSSH_9.2p1\r\n", &n, None, None).unwrap_err();
        assert!(
            err.to_string().contains("SSH-2.0"),
            "the report shows what answered: {err}"
        );
    }

    #[test]
    fn another_version_or_an_error_line_is_incompatible() {
        let n = Nonce::random().unwrap();
        let v2 = format!("{{\"rlx\":\"caps\",\"v\":2,\"caps\":{}}}", caps().to_json());
        let err = check_reply(addr(), v2.as_bytes(), &n, None, None).unwrap_err();
        assert!(matches!(err, HandshakeError::Incompatible { .. }), "{err}");
        let refused = HelloError::new("nonce must be 64 hex characters").to_line();
        let err = check_reply(addr(), refused.as_bytes(), &n, None, None).unwrap_err();
        assert!(err.to_string().contains("nonce must be"), "{err}");
    }

    #[test]
    fn malformed_hellos_are_refused_with_a_reason() {
        for (hello, why) in [
            (&b"hello\n"[..], "not"),
            (b"{\"rlx\":\"caps\",\"v\":1,\"nonce\":\"00\"}", "hello"),
            (b"{\"rlx\":\"hello\",\"v\":0,\"nonce\":\"00\"}", "version 0"),
            (b"{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"00\"}", "64 hex"),
            (b"\xff", "UTF-8"),
        ] {
            let err = answer(hello, &caps(), None).unwrap_err();
            assert!(err.to_string().contains(why), "{err}");
            assert!(
                err.to_line().starts_with("{\"rlx\":\"error\""),
                "{}",
                err.to_line()
            );
        }
        // A later client's extra fields and higher version are answered.
        let n = Nonce::random().unwrap();
        let future = format!(
            "{{\"rlx\":\"hello\",\"v\":3,\"nonce\":\"{}\",\"want\":\"more\"}}\r\n",
            n.to_hex()
        );
        assert!(answer(future.as_bytes(), &caps(), None).is_ok());
    }

    fn in_cluster(name: &str) -> NodeCaps {
        NodeCaps {
            cluster: Some(name.into()),
            ..caps()
        }
    }

    #[test]
    fn a_hello_without_a_cluster_is_the_version_1_line_byte_for_byte() {
        let n = Nonce::from_bytes([0xab; 32]);
        assert_eq!(
            hello_line(&n),
            format!(
                "{{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"{}\"}}\n",
                n.to_hex()
            ),
            "coordinators without a cluster send exactly what older agents expect"
        );
        assert_eq!(
            hello_line_for(&n, Some("lab")),
            format!(
                "{{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"{}\",\"cluster\":\"lab\"}}\n",
                n.to_hex()
            )
        );
        let h = parse_hello(hello_line_for(&n, Some("lab")).as_bytes()).unwrap();
        assert_eq!((h.v, h.nonce, h.cluster.as_deref()), (1, n, Some("lab")));
    }

    #[test]
    fn an_agent_in_a_cluster_refuses_a_hello_for_another_and_the_client_says_so() {
        let n = Nonce::random().unwrap();
        let err = answer(
            hello_line_for(&n, Some("prod")).as_bytes(),
            &in_cluster("lab"),
            Some(&key(1)),
        )
        .unwrap_err();
        let line = err.to_line();
        assert!(
            line.starts_with("{\"rlx\":\"error\"") && line.contains("\"cluster\":\"lab\""),
            "{line}"
        );
        assert!(
            !line.contains("caps"),
            "no caps for another cluster: {line}"
        );
        let err = check_reply(addr(), line.as_bytes(), &n, None, None).unwrap_err();
        assert_eq!(
            err,
            HandshakeError::OtherCluster {
                addr: addr(),
                theirs: "lab".into()
            }
        );
        assert!(err.to_string().contains("cluster \"lab\""), "{err}");
    }

    #[test]
    fn hellos_without_a_cluster_or_for_the_same_one_are_answered_and_agents_without_one_answer_all()
    {
        let n = Nonce::random().unwrap();
        for (hello, agent) in [
            (hello_line(&n), in_cluster("lab")),
            (hello_line_for(&n, Some("lab")), in_cluster("lab")),
            (hello_line_for(&n, Some("prod")), caps()),
        ] {
            let reply = answer(hello.as_bytes(), &agent, None)
                .unwrap_or_else(|e| panic!("{hello} to {:?}: {e}", agent.cluster));
            assert!(check_reply(addr(), reply.as_bytes(), &n, None, None).is_ok());
        }
        // An ordinary error line (no "cluster") is still "incompatible".
        let err = check_reply(
            addr(),
            HelloError::new("x").to_line().as_bytes(),
            &n,
            None,
            None,
        )
        .unwrap_err();
        assert!(matches!(err, HandshakeError::Incompatible { .. }), "{err}");
    }

    #[tokio::test]
    async fn query_in_cluster_names_the_cluster_and_reports_the_agents() {
        let a = fake_agent(|hello| {
            Some(match answer(&hello, &in_cluster("lab"), None) {
                Ok(r) => r.into_bytes(),
                Err(e) => e.to_line().into_bytes(),
            })
        })
        .await;
        let err = query_in_cluster(a, Duration::from_secs(2), None, None, Some("prod"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, HandshakeError::OtherCluster { theirs, .. } if theirs == "lab"),
            "{err}"
        );
        let ok = query_in_cluster(a, Duration::from_secs(2), None, None, Some("lab")).await;
        assert_eq!(ok.unwrap().caps.cluster.as_deref(), Some("lab"));
    }

    #[test]
    fn errors_and_debug_output_never_show_the_key() {
        let k = key(0xab);
        let secret = hex::encode([0xabu8; 32]);
        let n = Nonce::random().unwrap();
        let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&k)).unwrap();
        assert!(!reply.contains(&secret));
        let err = check_reply(
            addr(),
            reply.as_bytes(),
            &Nonce::random().unwrap(),
            Some(&KeyRing::single(k)),
            None,
        )
        .unwrap_err();
        assert!(!format!("{err} {err:?}").contains(&secret[..16]));
    }

    /// Serves `reply(hello)` to every connection on a loopback port.
    async fn fake_agent(
        reply: impl Fn(Vec<u8>) -> Option<Vec<u8>> + Send + Sync + 'static,
    ) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        let reply = std::sync::Arc::new(reply);
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let reply = reply.clone();
                tokio::spawn(async move {
                    let (rd, mut wr) = s.into_split();
                    let mut line = Vec::new();
                    let _ = BufReader::new(rd).read_until(b'\n', &mut line).await;
                    match reply(line) {
                        Some(out) => {
                            let _ = wr.write_all(&out).await;
                        }
                        None => tokio::time::sleep(Duration::from_secs(30)).await,
                    }
                });
            }
        });
        a
    }

    #[tokio::test]
    async fn query_gets_verified_caps_from_an_agent() {
        let a = fake_agent(|hello| {
            answer(&hello, &caps(), Some(&key(3)))
                .ok()
                .map(String::into_bytes)
        })
        .await;
        let ring = KeyRing::single(key(3));
        let r = query(
            a,
            Duration::from_secs(2),
            Some(&ring),
            Some("0123456789abcdef"),
        )
        .await
        .unwrap();
        assert_eq!(r.caps, caps());
        assert_eq!(r.key_index, Some(0));
    }

    #[tokio::test]
    async fn query_detects_a_replayed_reply() {
        let old = Nonce::random().unwrap();
        let captured = reply_line(&old, &caps(), Some(&key(3)));
        let a = fake_agent(move |_| Some(captured.clone().into_bytes())).await;
        let err = query(
            a,
            Duration::from_secs(2),
            Some(&KeyRing::single(key(3))),
            None,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_refused() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        let err = query(a, Duration::from_secs(2), None, None)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            HandshakeError::Unreachable {
                addr: a,
                why: ConnectFailure::Refused
            },
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_silent_peer_is_not_rlx_and_cannot_hold_us_past_the_timeout() {
        let a = fake_agent(|_| None).await;
        let t = std::time::Instant::now();
        let err = query(a, Duration::from_millis(300), None, None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, HandshakeError::NotRlx { .. }) && err.to_string().contains("no reply"),
            "{err}"
        );
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "took {:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn a_trickling_peer_cannot_hold_us_past_the_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            for _ in 0..100 {
                if s.write_all(b"{").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let t = std::time::Instant::now();
        let err = query(a, Duration::from_millis(300), None, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no complete reply"), "{err}");
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "took {:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn an_endless_reply_is_cut_at_the_size_bound() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let chunk = vec![b'x'; 64 * 1024];
            while s.write_all(&chunk).await.is_ok() {}
        });
        let err = query(a, Duration::from_secs(5), None, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("longer than"), "{err}");
    }

    #[tokio::test]
    async fn a_peer_that_closes_at_once_is_not_rlx() {
        let a = fake_agent(|_| Some(Vec::new())).await;
        let err = query(a, Duration::from_secs(2), None, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("without replying"), "{err}");
    }

    #[tokio::test]
    async fn a_full_accept_queue_times_out_as_unreachable() {
        // A listener that never accepts, with its queue filled, drops further
        // SYNs: the connect hangs like one to a firewalled host.
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let l = sock.listen(0).unwrap();
        let a = l.local_addr().unwrap();
        let mut held = Vec::new();
        for _ in 0..4 {
            if let Ok(Ok(s)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(a)).await
            {
                held.push(s);
            }
        }
        let err = query(a, Duration::from_millis(200), None, None)
            .await
            .unwrap_err();
        let timed_out = matches!(
            err,
            HandshakeError::Unreachable {
                why: ConnectFailure::TimedOut(_),
                ..
            }
        );
        assert!(
            timed_out,
            "a connect to a full queue should time out: {err}"
        );
        assert!(err.to_string().contains("no answer within 200 ms"), "{err}");
    }

    proptest! {
        #[test]
        fn arbitrary_hello_bytes_never_panic_the_agent(line in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let _ = answer(&line, &caps(), Some(&key(1)));
        }

        #[test]
        fn arbitrary_reply_bytes_never_panic_the_client(line in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let n = Nonce::from_bytes([5; 32]);
            let _ = check_reply(addr(), &line, &n, Some(&KeyRing::single(key(1))), Some("0123456789abcdef"));
            let _ = check_reply(addr(), &line, &n, None, None);
        }

        #[test]
        fn json_shaped_replies_never_panic_the_client(
            v in 0u64..4, rlx in "caps|error|x", nonce in "[0-9a-f]{0,70}", proof in "[0-9a-fA-F]{0,70}",
            caps in "\\{(\"[a-z_]{1,10}\":(-?[0-9]{1,20}|\"[^\"]{0,10}\"|\\[\\]),?){0,6}\\}",
        ) {
            let line = format!("{{\"rlx\":\"{rlx}\",\"v\":{v},\"nonce\":\"{nonce}\",\"caps\":{caps},\"proof\":\"{proof}\"}}");
            let n = Nonce::from_bytes([5; 32]);
            let _ = check_reply(addr(), line.as_bytes(), &n, Some(&KeyRing::single(key(1))), None);
            let _ = check_reply(addr(), line.as_bytes(), &n, None, Some("x"));
        }
    }
}
