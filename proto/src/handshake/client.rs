//! **The coordinator's side of the handshake**: [`query`] dials an agent,
//! sends a hello and reads one bounded reply line under one deadline;
//! [`check_reply`] judges that line.

use super::clock::{unix_ms_now, ClockOffset};
use super::messages::{cut_chars, hello_line_for, IdOnly, ReplyIn};
use super::proof::{node_verify, verify_any, BoundTo, Nonce};
use super::wire::{MAX_REPLY_BYTES, VERSION};
use crate::caps::{CapsError, NodeCaps};
use crate::identity::NodePublicKey;
use crate::keys::KeyRing;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
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
    /// With a key ring: the address we dialled is one the agent declares
    /// with `--advertise` (a port-forward), not the one it accepted on.
    pub via_advertised: bool,
    /// The agent's own public key (caps `node_key`), whose signature of
    /// this reply (`node_sig`) verified: who this machine is, for the
    /// coordinator's pins. `None` from an agent without one (an older
    /// agent), which nothing here tells from any other such agent.
    pub node_key: Option<NodePublicKey>,
    /// The agent's wall clock when it wrote the reply (Unix ms), if it sent
    /// one (agents before 0.1 did not). Not covered by the proof.
    pub agent_time_ms: Option<u64>,
    /// How far the agent's clock is from ours ([`ClockOffset`]): set by
    /// [`query`], which saw the exchange's timing; `None` from
    /// [`check_reply`] alone, or when the agent sent no time.
    pub clock: Option<ClockOffset>,
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
    /// The proof verifies but binds another connection than ours: the agent
    /// accepted on an endpoint other than the one we dialled (and declares
    /// none that matches), or saw the connection come from another address
    /// than the one we sent it from. Something in between (a relay, a
    /// proxy, a NAT) carried the handshake on.
    #[error("{}", relayed_reason(.addr, .path))]
    Relayed {
        /// The address dialled.
        addr: SocketAddr,
        /// Both connections' ends (boxed: they would quadruple the error).
        path: Box<RelayedPath>,
    },
    /// We hold a key and the reply is version 1: its proof (valid for our
    /// nonce) binds no endpoint, so a relay could have passed it on.
    #[error("{addr}: the agent answered in handshake version 1, whose proof is not bound to the connection (a relay could pass it on): upgrade rlx-agent on that machine (or something in between rewrote our hello)")]
    Unbound {
        /// The address dialled.
        addr: SocketAddr,
    },
    /// The caps carry a `node_key` but the reply does not prove it: no
    /// `node_sig`, or one that does not verify over our nonce and the
    /// connection. Something rewrote the caps, or replays a reply.
    #[error("{addr}: its caps name node key {fingerprint} but {why}")]
    NodeSignature {
        /// The address dialled.
        addr: SocketAddr,
        /// The fingerprint of the key the caps name.
        fingerprint: String,
        /// What is wrong with the signature.
        why: String,
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
            | HandshakeError::Relayed { addr, .. }
            | HandshakeError::Unbound { addr }
            | HandshakeError::IdMismatch { addr, .. }
            | HandshakeError::NodeSignature { addr, .. }
            | HandshakeError::OtherCluster { addr, .. }
            | HandshakeError::Local { addr, .. } => *addr,
        }
    }
}

/// The two connections a [`HandshakeError::Relayed`] found: ours, and the
/// one the agent's proof binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedPath {
    /// Our end of the connection (the socket's local address).
    pub from: SocketAddr,
    /// Where the agent says it accepted the connection.
    pub local: SocketAddr,
    /// Where the agent says the connection came from.
    pub peer: SocketAddr,
    /// The endpoints the agent declares with `--advertise`.
    pub advertised: Vec<SocketAddr>,
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
    let hello = |n: &Nonce| hello_line_for(n, cluster);
    exchange(addr, (deadline, timeout), hello, keys, expect_id)
        .await
        .map(|(reply, _, _)| reply)
}

/// The connection a handshake was made on, after its reply: what was
/// read past the reply line stays in the reader.
pub(super) type Connection = (BufReader<OwnedReadHalf>, OwnedWriteHalf);

/// One handshake on a new connection to `addr`, all of it before
/// `deadline` (`timeout` is that deadline as the caller gave it, for the
/// messages): the hello `hello` makes for a fresh nonce out, one bounded
/// reply line in, checked with [`check_reply`]. Returns the connection
/// too, for a caller that keeps it (the liveness stream, [`super::follow`]),
/// with the nonce sent and the reply line as received, which the stream's
/// proof covers.
pub(super) async fn exchange(
    addr: SocketAddr,
    (deadline, timeout): (Instant, Duration),
    hello: impl FnOnce(&Nonce) -> String,
    keys: Option<&KeyRing>,
    expect_id: Option<&str>,
) -> Result<(HandshakeReply, Connection, Exchanged), HandshakeError> {
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
    // Our end of the connection: a version 2 proof must name it as the
    // peer the agent saw.
    let from = stream.local_addr().map_err(|e| HandshakeError::Local {
        addr,
        why: format!("no local address for the connection: {e}"),
    })?;
    let (rd, mut wr) = stream.into_split();

    let hello = hello(&nonce);
    let sent_ms = unix_ms_now();
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
    let got_ms = unix_ms_now();
    let mut reply = check_reply(addr, from, &line, &nonce, keys, expect_id)?;
    reply.clock = reply
        .agent_time_ms
        .and_then(|t| ClockOffset::from_exchange(sent_ms, t, got_ms));
    Ok((reply, (reader.into_inner(), wr), Exchanged { nonce, line }))
}

/// What a handshake exchanged, for the liveness stream's proof.
#[derive(Debug)]
pub(super) struct Exchanged {
    /// The hello's nonce.
    pub(super) nonce: Nonce,
    /// The reply line exactly as received.
    pub(super) line: Vec<u8>,
}

/// Checks one reply line against the nonce we sent, on the connection we
/// made from `from` to `addr`: the pure half of [`query`], separate so it
/// can be tested and fuzzed without sockets.
///
/// Order matters for what a report says: with keys, the proof is checked
/// before the caps are validated, so a stranger is refused as a stranger
/// (no proof, wrong key, replay) whatever its caps say; then the endpoints
/// the proof binds (a relay is refused as one); then the caps.
///
/// Without keys nothing is proved, so the endpoints a reply names are not
/// checked either: a relay or NAT could rewrite them at will.
pub fn check_reply(
    addr: SocketAddr,
    from: SocketAddr,
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
    if !(1..=VERSION).contains(&msg.v) {
        return Err(HandshakeError::Incompatible {
            addr,
            why: format!(
                "it speaks handshake version {}, this build speaks 1 to {VERSION}",
                msg.v
            ),
        });
    }
    let raw = msg
        .caps
        .ok_or_else(|| not_rlx("a caps message without \"caps\"".into()))?;
    let caps_json = raw.get();

    let mut via_advertised = false;
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
            let missing = |field: &str| HandshakeError::Incompatible {
                addr,
                why: format!("a version {} reply without {field:?}", msg.v),
            };
            let bound = match msg.v {
                1 => None,
                _ => Some(BoundTo {
                    local: msg.local.as_deref().ok_or_else(|| missing("local"))?,
                    peer: msg.peer.as_deref().ok_or_else(|| missing("peer"))?,
                    advertised: &msg.advertised,
                }),
            };
            let caps_bytes = caps_json.as_bytes();
            match verify_any(ring, sent, &id, caps_bytes, bound.as_ref(), proof) {
                Some(_) if bound.is_none() => return Err(HandshakeError::Unbound { addr }),
                Some(i) => {
                    let b = bound.as_ref().expect("version 2 has a binding");
                    via_advertised = check_binding(addr, from, b)?;
                    Some(i)
                }
                None => {
                    let echoed = msg.nonce.as_deref().and_then(Nonce::from_hex);
                    let replayed = echoed.is_some_and(|old| {
                        old != *sent
                            && verify_any(ring, &old, &id, caps_bytes, bound.as_ref(), proof)
                                .is_some()
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
    let node_key = check_node_sig(addr, &msg, &caps, caps_json, sent)?;
    Ok(HandshakeReply {
        caps,
        caps_json: caps_json.to_string(),
        key_index,
        via_advertised,
        node_key,
        agent_time_ms: msg.time_ms,
        clock: None,
    })
}

/// The node key a reply proves it holds: `None` when its caps name none
/// (an older agent); else its `node_sig` must verify under that key over
/// our nonce, the id, the caps bytes and the connection fields as received
/// ([`super::node_message`]). Those fields are checked against our
/// connection only under a cluster key ([`check_binding`]): without one a
/// relay is a working path, as before, and the signature still proves that
/// the machine behind it holds the key pinned for its id.
fn check_node_sig(
    addr: SocketAddr,
    msg: &ReplyIn<'_>,
    caps: &NodeCaps,
    caps_json: &str,
    sent: &Nonce,
) -> Result<Option<NodePublicKey>, HandshakeError> {
    let Some(text) = &caps.node_key else {
        return Ok(None);
    };
    // Validated with the caps: a well-formed key.
    let Some(key) = NodePublicKey::parse(text) else {
        return Ok(None);
    };
    let refuse = |why: &str| HandshakeError::NodeSignature {
        addr,
        fingerprint: key.fingerprint(),
        why: why.to_string(),
    };
    let sig = msg
        .node_sig
        .as_deref()
        .ok_or_else(|| refuse("the reply carries no node_sig (rewritten caps?)"))?;
    let bound = match (msg.v, &msg.local, &msg.peer) {
        (1, _, _) => None,
        (_, Some(local), Some(peer)) => Some(BoundTo {
            local,
            peer,
            advertised: &msg.advertised,
        }),
        _ => {
            return Err(refuse(
                "a version 2 reply without \"local\" and \"peer\" cannot be signed",
            ))
        }
    };
    let signed =
        |n: &Nonce| node_verify(&key, n, &caps.id, caps_json.as_bytes(), bound.as_ref(), sig);
    if signed(sent) {
        return Ok(Some(key));
    }
    let echoed = msg.nonce.as_deref().and_then(Nonce::from_hex);
    if echoed.is_some_and(|old| old != *sent && signed(&old)) {
        return Err(HandshakeError::Replay { addr });
    }
    Err(refuse(
        "its node_sig does not verify under that key over our nonce and the connection",
    ))
}

/// Whether two endpoints are the same address and port. An IPv4-mapped IPv6
/// address is its IPv4 address, and the IPv6 scope is ignored (interface
/// numbers differ between the two machines).
fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip().to_canonical() == b.ip().to_canonical() && a.port() == b.port()
}

/// Checks the endpoints a verified version 2 proof binds against the
/// connection we made from `from` to `addr`. `Ok(true)`: we dialled an
/// endpoint the agent declares (`--advertise`).
///
/// - We dialled the address the agent accepted on: it must also have seen
///   our connection come from our own address and port. Otherwise
///   something between us terminated the connection and opened another
///   (a proxy on the path, or a source NAT in front of us).
/// - We dialled an endpoint the agent declares: its operator says a
///   port-forward leads there. The peer it saw is then not checked: behind
///   a DNAT it is our address, behind a relay or a masquerading router it
///   is the forwarder's, and the agent cannot know which. This still
///   defeats a stranger's relay: the declared list is under the MAC, so a
///   relay at an address the operator did not declare is refused.
/// - Anything else is a relay (or an undeclared port-forward): refused.
fn check_binding(
    addr: SocketAddr,
    from: SocketAddr,
    b: &BoundTo<'_>,
) -> Result<bool, HandshakeError> {
    let parse = |what: &str, s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|_| HandshakeError::Incompatible {
                addr,
                why: format!(
                    "its {what} endpoint {} is not IP:PORT",
                    preview(s.as_bytes())
                ),
            })
    };
    let local = parse("local", b.local)?;
    let peer = parse("peer", b.peer)?;
    let advertised = b
        .advertised
        .iter()
        .map(|a| parse("advertised", a))
        .collect::<Result<Vec<_>, _>>()?;
    if same_endpoint(local, addr) && same_endpoint(peer, from) {
        return Ok(false);
    }
    if !same_endpoint(local, addr) && advertised.iter().any(|a| same_endpoint(*a, addr)) {
        return Ok(true);
    }
    Err(HandshakeError::Relayed {
        addr,
        path: Box::new(RelayedPath {
            from,
            local,
            peer,
            advertised,
        }),
    })
}

/// The reason of [`HandshakeError::Relayed`]: both ends of both
/// connections, and what to do about it.
fn relayed_reason(addr: &SocketAddr, path: &RelayedPath) -> String {
    let RelayedPath {
        from,
        local,
        peer,
        advertised,
    } = path;
    let declared = match advertised.as_slice() {
        [] => String::new(),
        a => format!(
            " (it declares {})",
            a.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let what = if same_endpoint(*local, *addr) {
        "a proxy or a source NAT is in between: the agent saw another peer than our address \
         (a coordinator behind NAT, e.g. in a container without host networking, cannot \
         check keyed agents: run it on the agents' network)"
            .to_string()
    } else {
        format!(
            "a relay or NAT is in between (if it is a port-forward you set up, \
             declare it with rlx-agent --advertise {addr})"
        )
    };
    format!(
        "{addr}: the proof is bound to another connection: we dialled {addr} from {from}, \
         the agent accepted {local} from {peer}{declared}; {what}"
    )
}

/// The start of what a peer sent, quoted and cut, so a report can say what
/// answered instead ("SSH-2.0-OpenSSH_9.2", "HTTP/1.1 400").
pub(super) fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(60)]);
    let s = s.trim_end_matches(['\r', '\n']);
    if b.len() > 60 {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}
