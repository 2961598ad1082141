//! **The handshake's proof**: the [`Nonce`] a coordinator sends and the
//! HMAC-SHA256 an agent with a cluster key returns over it, its id, its
//! caps bytes and the connection it answers on (the formula is in the
//! module docs of [`super`]).

use super::wire::{NONCE_BYTES, PROOF_TAG, PROOF_TAG_V1};
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
    mac.update(&nonce.0);
    // Length prefixes keep the field boundaries unambiguous.
    field(mac, id.as_bytes());
    field(mac, caps_json);
    if let Some(b) = bound {
        field(mac, b.local.as_bytes());
        field(mac, b.peer.as_bytes());
        // A count, then each declared endpoint: no list can be read as
        // another by moving a boundary.
        mac.update(&(b.advertised.len() as u32).to_be_bytes());
        for a in b.advertised {
            field(mac, a.as_bytes());
        }
    }
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
