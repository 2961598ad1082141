//! **The handshake's messages**: the hello line, the agent's reply, and its
//! error line, each built and parsed here so both ends agree byte for byte.

use super::clock::unix_ms_now;
use super::proof::{node_sign, prove, BoundTo, Nonce};
use super::wire::VERSION;
use crate::caps::NodeCaps;
use crate::identity::NodeKey;
use crate::keys::Key;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::net::SocketAddr;

#[derive(Serialize, Deserialize)]
struct HelloWire {
    rlx: String,
    v: u64,
    nonce: String,
    /// The coordinator's cluster name. Optional, so hellos from coordinators
    /// that predate it (and from scripts) are still answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
    /// Asks the agent to keep the connection as a liveness stream after
    /// its reply ([`super::follow`]). Left out when false, so a plain
    /// hello is byte for byte what it always was; older agents ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    follow: bool,
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
    /// The coordinator asks for a liveness stream after the reply.
    pub follow: bool,
}

/// The coordinator's hello line, newline included.
pub fn hello_line(nonce: &Nonce) -> String {
    hello_line_for(nonce, None)
}

/// The hello line of a coordinator looking for `cluster` (none: any).
pub fn hello_line_for(nonce: &Nonce, cluster: Option<&str>) -> String {
    hello_wire(nonce, cluster, false)
}

/// The hello of a coordinator that asks to follow the agent: the same
/// hello with `"follow":true` ([`super::follow`]).
pub fn follow_hello_line(nonce: &Nonce, cluster: Option<&str>) -> String {
    hello_wire(nonce, cluster, true)
}

fn hello_wire(nonce: &Nonce, cluster: Option<&str>, follow: bool) -> String {
    let msg = HelloWire {
        rlx: "hello".into(),
        v: VERSION,
        nonce: nonce.to_hex(),
        cluster: cluster.map(str::to_string),
        follow,
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
        return Err(HelloError::new(format!(
            "handshake version 0 does not exist; this agent speaks 1 to {VERSION}"
        )));
    }
    let nonce = Nonce::from_hex(&msg.nonce)
        .ok_or_else(|| HelloError::new("nonce must be 64 hex characters (32 random bytes)"))?;
    Ok(Hello {
        v: msg.v,
        nonce,
        cluster: msg.cluster,
        follow: msg.follow,
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
    pub(super) fn new(s: impl Into<String>) -> HelloError {
        HelloError {
            why: s.into(),
            cluster: None,
        }
    }

    /// The agent is in cluster `mine`; the hello asked for `wanted`.
    pub(super) fn other_cluster(mine: &str, wanted: &str) -> HelloError {
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

/// The connection an agent answers on, which its version 2 proof binds:
/// where it accepted the connection, who connected, and the endpoints it
/// declares for port-forwards and NATs in front of it (`--advertise`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The address and port the connection was accepted on
    /// (`TcpStream::local_addr`).
    pub local: SocketAddr,
    /// The address the connection came from (`TcpStream::peer_addr`).
    pub peer: SocketAddr,
    /// Endpoints that reach this agent through a port-forward, declared by
    /// its operator; a coordinator that dialled one of them admits the
    /// agent there.
    pub advertised: Vec<SocketAddr>,
}

/// How an endpoint is written in a reply: `IP:PORT`, `[IPv6]:PORT`, an
/// IPv4-mapped IPv6 address as plain IPv4 (what a dual-stack listener
/// reports for an IPv4 client), and no IPv6 scope (interface numbers mean
/// nothing on the other machine).
pub fn endpoint_text(a: SocketAddr) -> String {
    SocketAddr::new(a.ip().to_canonical(), a.port()).to_string()
}

#[derive(Serialize)]
struct ReplyOut<'a> {
    rlx: &'static str,
    v: u64,
    nonce: String,
    caps: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    local: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<&'a str>,
    #[serde(skip_serializing_if = "declares_none")]
    advertised: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    proof: Option<String>,
    /// The node key's signature of what the proof covers (under its own
    /// tag): present when the caps carry a `node_key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    node_sig: Option<String>,
    /// The agent's wall clock as it writes the reply (Unix ms), for
    /// [`super::clock`]. Outside the proof: a diagnosis, not a claim.
    time_ms: u64,
}

fn declares_none(a: &&[String]) -> bool {
    a.is_empty()
}

/// The agent's version 2 reply line for `nonce`, newline included: the caps
/// JSON, the connection it answers on, and the proof over all of it when
/// the agent has a key.
pub fn reply_line(nonce: &Nonce, caps: &NodeCaps, key: Option<&Key>, on: &Binding) -> String {
    reply_line_signed(nonce, caps, key, None, on)
}

/// [`reply_line`] of an agent with a node key: its public half goes into
/// the caps (`node_key`, replacing whatever they said), and the reply
/// carries `node_sig`, the key's signature of the nonce, the id, the caps
/// and the connection ([`super::node_message`]).
pub fn reply_line_signed(
    nonce: &Nonce,
    caps: &NodeCaps,
    key: Option<&Key>,
    node: Option<&NodeKey>,
    on: &Binding,
) -> String {
    let local = endpoint_text(on.local);
    let peer = endpoint_text(on.peer);
    let advertised: Vec<String> = on.advertised.iter().map(|a| endpoint_text(*a)).collect();
    let bound = BoundTo {
        local: &local,
        peer: &peer,
        advertised: &advertised,
    };
    reply_of(VERSION, nonce, caps, key, node, Some(&bound))
}

/// The version 1 reply line, for a coordinator that said `"v":1`: no
/// endpoint, and a proof that binds none. A coordinator holding a key of
/// this version accepts it; ours refuses it as unbound.
pub fn reply_line_v1(nonce: &Nonce, caps: &NodeCaps, key: Option<&Key>) -> String {
    reply_line_v1_signed(nonce, caps, key, None)
}

/// [`reply_line_v1`] with the node key's signature (tag
/// [`super::NODE_SIG_TAG_V1`], no connection).
pub fn reply_line_v1_signed(
    nonce: &Nonce,
    caps: &NodeCaps,
    key: Option<&Key>,
    node: Option<&NodeKey>,
) -> String {
    reply_of(1, nonce, caps, key, node, None)
}

fn reply_of(
    v: u64,
    nonce: &Nonce,
    caps: &NodeCaps,
    key: Option<&Key>,
    node: Option<&NodeKey>,
    bound: Option<&BoundTo<'_>>,
) -> String {
    let signed;
    let caps = match node {
        Some(n) => {
            signed = NodeCaps {
                node_key: Some(n.public().to_base64()),
                ..caps.clone()
            };
            &signed
        }
        None => caps,
    };
    let caps_json = caps.to_json();
    let proof = key.map(|k| prove(k, nonce, &caps.id, caps_json.as_bytes(), bound));
    let node_sig = node.map(|n| node_sign(n, nonce, &caps.id, caps_json.as_bytes(), bound));
    // to_json output is valid JSON, so it is a valid RawValue.
    let raw: &RawValue = serde_json::from_str(&caps_json).expect("caps JSON is JSON");
    let msg = ReplyOut {
        rlx: "caps",
        v,
        nonce: nonce.to_hex(),
        caps: raw,
        local: bound.map(|b| b.local),
        peer: bound.map(|b| b.peer),
        advertised: bound.map_or(&[], |b| b.advertised),
        proof,
        node_sig,
        time_ms: unix_ms_now(),
    };
    format!(
        "{}\n",
        serde_json::to_string(&msg).expect("reply serializes")
    )
}

/// At most `max` characters of `s`, for messages that quote a stranger.
pub(super) fn cut_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[derive(Deserialize)]
pub(super) struct ReplyIn<'a> {
    pub(super) rlx: String,
    pub(super) v: u64,
    #[serde(default)]
    pub(super) nonce: Option<String>,
    #[serde(default, borrow)]
    pub(super) caps: Option<&'a RawValue>,
    /// Version 2: where the agent accepted the connection.
    #[serde(default)]
    pub(super) local: Option<String>,
    /// Version 2: where the agent saw it come from.
    #[serde(default)]
    pub(super) peer: Option<String>,
    /// Version 2: the endpoints the agent declares (absent: none).
    #[serde(default)]
    pub(super) advertised: Vec<String>,
    #[serde(default)]
    pub(super) proof: Option<String>,
    /// The node key's signature (absent from agents that predate it).
    #[serde(default)]
    pub(super) node_sig: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
    /// In an error line: the agent's cluster, when it refused ours.
    #[serde(default)]
    pub(super) cluster: Option<String>,
    /// The agent's wall clock (Unix ms); absent from agents that predate it.
    #[serde(default)]
    pub(super) time_ms: Option<u64>,
}

/// Just the id out of a caps object, read before the proof is checked so a
/// stranger's caps are judged by their proof first.
#[derive(Deserialize)]
pub(super) struct IdOnly {
    #[serde(default)]
    pub(super) id: String,
}
