//! **The handshake's proof**: the [`Nonce`] a coordinator sends and the
//! HMAC-SHA256 an agent with a cluster key returns over it, its id and its
//! caps bytes (the formula is in the module docs of [`super`]).

use super::wire::{NONCE_BYTES, PROOF_TAG};
use crate::keys::{Key, KeyRing};
use hmac::Mac;
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
