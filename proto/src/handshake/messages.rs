//! **The handshake's messages**: the hello line, the agent's reply, and its
//! error line, each built and parsed here so both ends agree byte for byte.

use super::proof::{prove, Nonce};
use super::wire::VERSION;
use crate::caps::NodeCaps;
use crate::keys::Key;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

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
    #[serde(default)]
    pub(super) proof: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
    /// In an error line: the agent's cluster, when it refused ours.
    #[serde(default)]
    pub(super) cluster: Option<String>,
}

/// Just the id out of a caps object, read before the proof is checked so a
/// stranger's caps are judged by their proof first.
#[derive(Deserialize)]
pub(super) struct IdOnly {
    #[serde(default)]
    pub(super) id: String,
}
