//! **The handshake's proof**: the [`Nonce`] a coordinator sends and the
//! HMAC-SHA256 an agent with a cluster key returns over it, its id, its
//! caps bytes and the connection it answers on (the formula is in the
//! module docs of [`super`]).

use super::wire::{NODE_SIG_TAG, NODE_SIG_TAG_V1, NONCE_BYTES, PROOF_TAG, PROOF_TAG_V1};
use crate::identity::{NodeKey, NodePublicKey};
use crate::keys::{Key, KeyRing};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

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

/// The connection a version 2 proof is bound to, as the agent wrote it in
/// its reply: the address and port it accepted the connection on, the peer
/// address it saw, and the endpoints it declares with `--advertise`.
///
/// These are the strings exactly as sent, like the caps bytes: the verifier
/// MACs what it received and compares the parsed addresses separately, so
/// the two ends never have to agree on how to write an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundTo<'a> {
    /// `"local"`: where the agent accepted the connection.
    pub local: &'a str,
    /// `"peer"`: where the agent saw the connection come from.
    pub peer: &'a str,
    /// `"advertised"`: the endpoints the agent declares (port-forwards).
    pub advertised: &'a [String],
}

/// Feeds one length-prefixed field of a MAC input: the prefix keeps the
/// field boundaries unambiguous. Every field is far below 4 GiB (the id is
/// 16 bytes, caps at most MAX_JSON_BYTES, an endpoint under 50 bytes, a
/// measurement request a few hundred).
pub(super) fn field(mac: &mut impl Mac, b: &[u8]) {
    mac.update(&(b.len() as u32).to_be_bytes());
    mac.update(b);
}

/// The HMAC under `key` of what `input` feeds it, as 64 lowercase hex: the
/// one way every proof of the handshake (the agent's reply, the
/// coordinator's measurement request) is made.
pub(super) fn sign(key: &Key, input: impl FnOnce(&mut Hmac<Sha256>)) -> String {
    let mut mac = key.mac();
    input(&mut mac);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `proof` (64 hex, either case) is the HMAC under `key` of what
/// `input` feeds it. Compares in constant time.
pub(super) fn check(key: &Key, proof: &str, input: impl FnOnce(&mut Hmac<Sha256>)) -> bool {
    let mut tag = [0u8; 32];
    if proof.len() != 64 || hex::decode_to_slice(proof, &mut tag).is_err() {
        return false;
    }
    let mut mac = key.mac();
    input(&mut mac);
    mac.verify_slice(&tag).is_ok()
}

/// Feeds `sink` the fields a reply's proof and its node signature cover,
/// after their tag: the nonce, the id, the caps bytes and, in version 2,
/// the connection. One definition, so the HMAC of the cluster key and the
/// Ed25519 signature of the node key bind the same bytes.
fn reply_fields(
    sink: &mut dyn FnMut(&[u8]),
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
) {
    // Length prefixes keep the field boundaries unambiguous.
    let field = |sink: &mut dyn FnMut(&[u8]), b: &[u8]| {
        sink(&(b.len() as u32).to_be_bytes());
        sink(b);
    };
    sink(&nonce.0);
    field(sink, id.as_bytes());
    field(sink, caps_json);
    if let Some(b) = bound {
        field(sink, b.local.as_bytes());
        field(sink, b.peer.as_bytes());
        // A count, then each declared endpoint: no list can be read as
        // another by moving a boundary.
        sink(&(b.advertised.len() as u32).to_be_bytes());
        for a in b.advertised {
            field(sink, a.as_bytes());
        }
    }
}

fn mac_input(
    mac: &mut impl Mac,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
) {
    // The tag says which layout follows, so a version 1 input can never be
    // read as a version 2 one or the other way round.
    mac.update(if bound.is_some() {
        PROOF_TAG
    } else {
        PROOF_TAG_V1
    });
    reply_fields(&mut |b| mac.update(b), nonce, id, caps_json, bound);
}

/// What an agent's node key signs in a reply: [`NODE_SIG_TAG`] (or
/// [`NODE_SIG_TAG_V1`] for a version 1 reply, which binds no connection),
/// then the same fields as the cluster-key proof. Its own tag keeps a
/// signature from ever passing for anything else signed with that key.
pub fn node_message(
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
) -> Vec<u8> {
    let mut m = Vec::with_capacity(128 + caps_json.len());
    m.extend_from_slice(if bound.is_some() {
        NODE_SIG_TAG
    } else {
        NODE_SIG_TAG_V1
    });
    reply_fields(&mut |b| m.extend_from_slice(b), nonce, id, caps_json, bound);
    m
}

/// The agent's node-key signature of a reply ([`node_message`]), base64.
pub fn node_sign(
    node: &NodeKey,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
) -> String {
    node.sign(&node_message(nonce, id, caps_json, bound))
}

/// Whether `sig` is `key`'s signature of that reply ([`node_message`]).
pub fn node_verify(
    key: &NodePublicKey,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
    sig: &str,
) -> bool {
    key.verify(&node_message(nonce, id, caps_json, bound), sig)
}

/// The proof an agent with `key` sends for `nonce`, its node `id`, the
/// exact `caps_json` bytes it sends and, in version 2, the connection it
/// answers on (`bound`; `None` makes the version 1 proof): 64 lowercase
/// hex characters.
pub fn prove(
    key: &Key,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
) -> String {
    sign(key, |mac| mac_input(mac, nonce, id, caps_json, bound))
}

/// Whether `proof` (hex, either case) is the proof under `key` for these
/// inputs. Compares in constant time.
pub fn verify(
    key: &Key,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
    proof: &str,
) -> bool {
    check(key, proof, |mac| {
        mac_input(mac, nonce, id, caps_json, bound)
    })
}

/// Index in `ring` of the first key under which `proof` verifies.
pub fn verify_any(
    ring: &KeyRing,
    nonce: &Nonce,
    id: &str,
    caps_json: &[u8],
    bound: Option<&BoundTo<'_>>,
    proof: &str,
) -> Option<usize> {
    ring.keys()
        .iter()
        .position(|k| verify(k, nonce, id, caps_json, bound, proof))
}
