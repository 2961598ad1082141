//! **Why a TXT record could not be read or written**, and how a caps
//! validation error is renamed to the TXT key it came from; used by both
//! [`encode`](super::encode) and [`decode`](super::decode).

use super::schema::{device_key, DEVICE_KEYS, KEYS, TXTVERS_KEY, TXT_VERSION};
use crate::caps::CapsError;

/// Why a TXT record could not be read or written. Every variant names the TXT
/// key at fault (see [`TxtError::key`]) so that a report can say
/// "`gpu-a.local`: TXT key `cores`: ...".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TxtError {
    /// No `txtvers`: not an rlx TXT record (or a very old one).
    #[error(
        "no `{k}` key: not a TXT schema v1 record (expected `{k}={v}` first)",
        k = TXTVERS_KEY,
        v = TXT_VERSION
    )]
    MissingVersion,
    /// A `txtvers` this build does not read.
    #[error(
        "TXT key `{k}` = {0}: this build reads only `{k}={v}`; upgrade rlx-discover",
        k = TXTVERS_KEY,
        v = TXT_VERSION
    )]
    UnsupportedVersion(String),
    /// A key the caps cannot do without.
    #[error("TXT key `{key}` is missing: {why}")]
    Missing {
        /// The TXT key.
        key: String,
        /// Why it is needed.
        why: String,
    },
    /// A value that does not parse (`cores=abc`, `ram=-5`, a short `devN`).
    #[error("TXT key `{key}` = {value}: {why}")]
    Invalid {
        /// The TXT key (`cores`, `dev3`).
        key: String,
        /// The value as received, quoted and cut to 40 characters.
        value: String,
        /// What was expected.
        why: String,
    },
    /// A value that parses but cannot be true (10^18 bytes of RAM, NaN).
    #[error("TXT key `{key}` = {value} is not plausible: {why}")]
    Absurd {
        /// The TXT key.
        key: String,
        /// The value as received.
        value: String,
        /// What the limit is.
        why: String,
    },
    /// The record is larger than [`MAX_DECODE_BYTES`](super::MAX_DECODE_BYTES), or its wire form is cut.
    #[error("TXT record: {0}")]
    Record(String),
    /// [`encode`](super::encode): a value that no shortening can fit in 255 bytes.
    #[error("TXT key `{key}` cannot be announced: {why}")]
    DoesNotFit {
        /// The TXT key.
        key: String,
        /// What to change.
        why: String,
    },
}

impl TxtError {
    /// The TXT key this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            TxtError::MissingVersion | TxtError::UnsupportedVersion(_) => Some(TXTVERS_KEY),
            TxtError::Missing { key, .. }
            | TxtError::Invalid { key, .. }
            | TxtError::Absurd { key, .. }
            | TxtError::DoesNotFit { key, .. } => Some(key),
            TxtError::Record(_) => None,
        }
    }
}

/// Renames a caps field in a validation error to the TXT key it came from.
/// `dev_keys[i]` is the N of the `devN` that became `devices[i]`.
pub(super) fn caps_error(e: CapsError, dev_keys: &[usize]) -> TxtError {
    match e {
        CapsError::Syntax(s) => TxtError::Record(s),
        CapsError::Absurd { field, value, why } => {
            let key = match field.as_str() {
                "devices" => DEVICE_KEYS.to_string(),
                f => match f.strip_prefix("devices[").and_then(|r| r.split_once(']')) {
                    Some((i, _)) => i
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| dev_keys.get(i))
                        .map_or_else(|| DEVICE_KEYS.to_string(), |&n| device_key(n)),
                    None => KEYS
                        .iter()
                        .find(|k| k.field == Some(f))
                        .map_or(f, |k| k.name)
                        .to_string(),
                },
            };
            TxtError::Absurd { key, value, why }
        }
    }
}

/// A value for an error message: quoted, escaped, cut to 40 characters, so a
/// hostile record cannot flood a log or a terminal.
pub(super) fn quote(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    let short: String = s.chars().take(40).collect();
    if short.len() < s.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}
