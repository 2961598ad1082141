//! **Per-node identity**: each agent's own Ed25519 key pair, made on its
//! first start and kept in its state directory beside its node id, and the
//! public half as it travels in the caps (`node_key`) and as a coordinator
//! pins it.
//!
//! ```text
//! <state dir>/node-key     mode 0600, one line:   ed25519 <base64 of the 32-byte secret seed>
//! caps "node_key"          base64 of the 32-byte public key (44 characters)
//! fingerprint              SHA256:<base64 of SHA-256(public key), unpadded>
//! ```
//!
//! The cluster key says *who may join* (every member holds the same one, so
//! it cannot tell members apart); the node key says *who is who*: the
//! handshake reply carries a signature under it over the challenge and the
//! connection (`handshake::node_sign`), so a coordinator that pinned a node
//! id's key on first sight refuses another machine that claims that id,
//! even one holding the cluster key. The secret never leaves the agent's
//! state directory; it is not derived from the hardware, so a reinstalled
//! machine (or a wiped state directory) has a new key, and a coordinator
//! refuses it until its pin is forgotten (`rlx-discover pins forget <id>`).

use crate::keys::{read_private, KeyError};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Name of the file in the agent's state directory that keeps its node key.
pub const NODE_KEY_FILE: &str = "node-key";

/// The word before the secret in the node key file, and before the public
/// key in a coordinator's pins file: the algorithm, so a later one can be
/// told apart.
pub const ALGORITHM: &str = "ed25519";

/// Longest node key file read: one line of about 52 bytes; anything much
/// bigger is not a node key file.
const MAX_NODE_KEY_FILE_BYTES: u64 = 1024;

/// An agent's own key pair. The secret is never printed (`Debug` shows the
/// public key's fingerprint only) and is wiped from memory when dropped.
#[derive(Clone)]
pub struct NodeKey(SigningKey);

impl fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeKey({})", self.public().fingerprint())
    }
}

impl NodeKey {
    /// A fresh key pair from the operating system's CSPRNG.
    pub fn generate() -> Result<NodeKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(NodeKey(SigningKey::from_bytes(&seed)))
    }

    /// The key pair of a 32-byte secret seed (tests, fixtures).
    pub fn from_seed(seed: [u8; 32]) -> NodeKey {
        NodeKey(SigningKey::from_bytes(&seed))
    }

    /// The public half, which travels in the caps.
    pub fn public(&self) -> NodePublicKey {
        NodePublicKey(self.0.verifying_key().to_bytes())
    }

    /// The Ed25519 signature of `message`, base64 (88 characters).
    pub fn sign(&self, message: &[u8]) -> String {
        STANDARD.encode(self.0.sign(message).to_bytes())
    }

    /// The node key kept in `dir` (`node-key`), made there on first use.
    ///
    /// A file that exists is checked like a cluster key file (a regular
    /// file, not a symbolic link, owned by this user or root, mode 0600, in
    /// a directory others cannot write) and must hold one key: anything else
    /// is an error naming the file and the fix, never a silent new key,
    /// since a new key makes every coordinator that pinned the old one
    /// refuse this node.
    pub fn load_or_create(dir: &Path) -> Result<NodeKey, NodeKeyError> {
        let path = dir.join(NODE_KEY_FILE);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(&path),
            _ => load(&path),
        }
    }
}

/// Reads and checks the node key file at `path`.
pub fn load(path: &Path) -> Result<NodeKey, NodeKeyError> {
    let text = read_private(path, MAX_NODE_KEY_FILE_BYTES).map_err(NodeKeyError::File)?;
    parse_secret(&text).ok_or_else(|| NodeKeyError::Corrupt {
        path: path.to_path_buf(),
    })
}

fn parse_secret(text: &str) -> Option<NodeKey> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let (alg, b64) = lines.next()?.split_once(' ')?;
    if alg != ALGORITHM || lines.next().is_some() {
        return None;
    }
    let seed: [u8; 32] = STANDARD.decode(b64.trim()).ok()?.try_into().ok()?;
    Some(NodeKey::from_seed(seed))
}

/// Makes a new key at `path`: written to a private temporary file beside
/// it, then linked into place, which fails if another agent made one
/// meanwhile (that one is loaded instead), so no reader ever sees half a key.
fn create(path: &Path) -> Result<NodeKey, NodeKeyError> {
    let key = NodeKey::generate().map_err(NodeKeyError::File)?;
    let io = |e: std::io::Error| NodeKeyError::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".node-key.")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(io)?;
    let line = format!("{ALGORITHM} {}\n", STANDARD.encode(key.0.to_bytes()));
    tmp.write_all(line.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    match std::fs::hard_link(tmp.path(), path) {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
        Err(e) => Err(io(e)),
    }
}

/// Why an agent cannot use its node key file. Each names the file and says
/// what to do; none carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeKeyError {
    /// The file is unsafe or unreadable (owner, mode, symlink, directory).
    #[error("node key: {0}")]
    File(KeyError),
    /// The file does not hold one node key.
    #[error(
        "node key file {path} does not hold one `{ALGORITHM} <base64 32 bytes>` line: if this \
         machine's identity may change, remove the file and restart rlx-agent to make a new \
         key, then run `rlx-discover pins forget <this node's id>` on every coordinator \
         (they refuse the new key until then)",
        path = path.display()
    )]
    Corrupt {
        /// The node key file.
        path: PathBuf,
    },
    /// A new key could not be written.
    #[error("cannot write a new node key to {path}: {reason}; make the state directory writable by this user (or pass --state-dir)", path = path.display())]
    Write {
        /// The node key file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
}

/// A node's public key: 32 bytes, base64 in the caps and the pins file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodePublicKey([u8; 32]);

impl fmt::Debug for NodePublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodePublicKey({})", self.fingerprint())
    }
}

impl fmt::Display for NodePublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl NodePublicKey {
    /// Parses the base64 of 32 bytes that is also a valid Ed25519 point.
    pub fn parse(b64: &str) -> Option<NodePublicKey> {
        let b: [u8; 32] = STANDARD.decode(b64).ok()?.try_into().ok()?;
        VerifyingKey::from_bytes(&b).ok()?;
        Some(NodePublicKey(b))
    }

    /// The base64 form (44 characters, padded).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// `SHA256:<base64 of the key's SHA-256, unpadded>`, the form `ssh-keygen
    /// -l` prints, for reports and refusals.
    pub fn fingerprint(&self) -> String {
        format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(self.0)))
    }

    /// Whether `sig` (base64) is this key's signature of `message`.
    pub fn verify(&self, message: &[u8], sig: &str) -> bool {
        let Ok(vk) = VerifyingKey::from_bytes(&self.0) else {
            return false;
        };
        let Some(bytes) = STANDARD
            .decode(sig)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
        else {
            return false;
        };
        vk.verify_strict(message, &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_node_key_is_made_once_private_and_loaded_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let first = NodeKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(NODE_KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the secret is readable by its owner only");
        let again = NodeKey::load_or_create(dir.path()).unwrap();
        assert_eq!(
            first.public(),
            again.public(),
            "the next start keeps the key"
        );
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            NodeKey::load_or_create(other.path()).unwrap().public(),
            first.public(),
            "another state directory is another machine"
        );
    }

    #[test]
    fn a_corrupt_node_key_file_is_an_error_naming_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(NODE_KEY_FILE);
        std::fs::write(&path, "ed25519 not-base64\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = NodeKey::load_or_create(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("pins forget"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "ed25519 not-base64\n",
            "a corrupt key is never replaced silently"
        );
    }

    #[test]
    fn a_node_key_file_readable_by_others_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        NodeKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(NODE_KEY_FILE);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = NodeKey::load_or_create(dir.path()).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn a_node_key_file_owned_by_another_user_is_refused_naming_the_file_and_the_fix() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "SKIP a_node_key_file_owned_by_another_user_is_refused_naming_the_file_and_the_fix: \
                 needs root to chown a file to another user"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let first = NodeKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(NODE_KEY_FILE);
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let e = NodeKey::load_or_create(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("uid 65534") && e.contains("chown"), "{e}");
        nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
        assert_eq!(
            NodeKey::load_or_create(dir.path()).unwrap().public(),
            first.public(),
            "never replaced by a new key"
        );
    }

    #[test]
    fn a_signature_verifies_under_its_key_only_and_not_for_other_bytes() {
        let a = NodeKey::from_seed([1; 32]);
        let b = NodeKey::from_seed([2; 32]);
        let sig = a.sign(b"message");
        assert!(a.public().verify(b"message", &sig));
        assert!(!a.public().verify(b"messagf", &sig), "other bytes");
        assert!(!b.public().verify(b"message", &sig), "another key");
        assert!(!a.public().verify(b"message", "AAAA"), "garbage");
    }

    #[test]
    fn a_public_key_round_trips_through_base64_and_has_an_ssh_style_fingerprint() {
        let k = NodeKey::from_seed([7; 32]).public();
        assert_eq!(NodePublicKey::parse(&k.to_base64()), Some(k));
        assert_eq!(k.to_base64().len(), 44);
        assert!(k.fingerprint().starts_with("SHA256:"));
        assert_eq!(k.fingerprint().len(), "SHA256:".len() + 43);
        assert_eq!(NodePublicKey::parse("AAAA"), None, "not 32 bytes");
        let shown = format!("{:?}", NodeKey::from_seed([7; 32]));
        assert!(
            !shown.contains(&STANDARD.encode([7u8; 32])),
            "Debug never shows the secret: {shown}"
        );
    }
}
