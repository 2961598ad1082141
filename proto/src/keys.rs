//! **Cluster keys** — the shared secret an agent proves in the handshake, and
//! the key files that hold it.
//!
//! ```text
//! # /etc/rlx/cluster.key  (mode 0600)
//! 3f1c...64 hex chars...9a   # the current key: agents prove with this one
//! 77be...64 hex chars...02   # the previous key: still accepted while agents roll over
//! ```
//!
//! A key is 32 random bytes written as 64 hex characters. A file may list
//! several keys, one per line, so a cluster can rotate without downtime: an
//! agent proves with the **first** key, a coordinator accepts a proof under
//! **any** of them (see `docs/protocol.md`, "Key rotation"). Blank lines and
//! `#` comments are allowed.
//!
//! The key is a secret, so it never leaves this module in readable form: no
//! `Display`, a hand-written `Debug` that prints only a fingerprint, and error
//! messages that name the file and line but never echo the line (a mistyped
//! key is still mostly a key).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Bytes of key material. 32 bytes = 256 bits, the HMAC-SHA256 block-size
/// sweet spot (RFC 2104 §3: keys shorter than the hash output weaken it,
/// longer ones add nothing).
pub const KEY_BYTES: usize = 32;

/// Largest key file we read. A key line is 65 bytes; 64 KiB leaves room for
/// hundreds of keys and comments, and stops a mistaken `key_file = /dev/zero`
/// or a multi-gigabyte file from being read into memory.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A cluster key: 32 secret bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_BYTES]);

impl Key {
    /// A fresh random key from the operating system's CSPRNG.
    pub fn generate() -> Result<Key, KeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(Key(bytes))
    }

    /// Wraps raw key bytes (tests, and callers that hold the key elsewhere).
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Key {
        Key(bytes)
    }

    /// Parses 64 hex characters (either case). The error says what was wrong
    /// in terms that do not reveal the input.
    pub fn from_hex(text: &str) -> Result<Key, String> {
        let text = text.trim();
        if text.len() != 2 * KEY_BYTES {
            return Err(format!(
                "expected {} hex characters ({KEY_BYTES} bytes), found {} characters",
                2 * KEY_BYTES,
                text.chars().count()
            ));
        }
        let mut bytes = [0u8; KEY_BYTES];
        hex::decode_to_slice(text, &mut bytes)
            .map_err(|_| "expected only hex characters 0-9, a-f".to_string())?;
        Ok(Key(bytes))
    }

    /// The key as 64 lowercase hex characters: what a key file holds. Only
    /// [`generate`] and tests need this; never log it.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// A short public name for the key: the first 8 hex characters of
    /// SHA-256("rlx-key-fingerprint-v1" || key). Lets a user check that two
    /// machines hold the same key (or which one of a rotation is in use)
    /// without revealing it.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"rlx-key-fingerprint-v1");
        h.update(self.0);
        hex::encode(&h.finalize()[..4])
    }

    /// An HMAC-SHA256 instance keyed with this key.
    pub fn mac(&self) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; 32 bytes cannot fail.
        <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }
}

impl fmt::Debug for Key {
    /// Prints the fingerprint only: keys end up in `{:?}` of structs that are
    /// logged, and the secret must not.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(fingerprint {})", self.fingerprint())
    }
}

/// The keys a coordinator accepts, in file order; the first is the one an
/// agent proves with. Never empty.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRing {
    keys: Vec<Key>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.keys.iter()).finish()
    }
}

impl KeyRing {
    /// A ring of the given keys; `None` when the list is empty.
    pub fn new(keys: Vec<Key>) -> Option<KeyRing> {
        (!keys.is_empty()).then_some(KeyRing { keys })
    }

    /// A ring of one key.
    pub fn single(key: Key) -> KeyRing {
        KeyRing { keys: vec![key] }
    }

    /// The key an agent proves with.
    pub fn first(&self) -> &Key {
        &self.keys[0]
    }

    /// Every accepted key, first (current) to last (oldest).
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Loads a key file.
    ///
    /// The file must be private to this user ([`read_private`]: no symbolic
    /// link, owned by this user or root, mode 0600 or stricter, in a
    /// directory only they can change). Names the line of a malformed key,
    /// and refuses a file with no key.
    pub fn load(path: &Path) -> Result<KeyRing, KeyError> {
        let text = read_private(path, MAX_KEY_FILE_BYTES)?;
        Self::parse(&text).map_err(|e| match e {
            ParseError::Line { line, reason } => KeyError::Malformed {
                path: path.to_path_buf(),
                line,
                reason,
            },
            ParseError::Empty => KeyError::Empty {
                path: path.to_path_buf(),
            },
        })
    }

    /// Parses key-file text: one key per line, blank lines and `#` comments
    /// (whole-line or after the key) ignored.
    fn parse(text: &str) -> Result<KeyRing, ParseError> {
        let mut keys = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split_once('#').map_or(raw, |(k, _)| k).trim();
            if line.is_empty() {
                continue;
            }
            let key = Key::from_hex(line).map_err(|reason| ParseError::Line {
                line: i + 1,
                reason,
            })?;
            keys.push(key);
        }
        KeyRing::new(keys).ok_or(ParseError::Empty)
    }
}

/// Reads a secret file that must be private to this user, at most `limit`
/// bytes: the cluster key file, and `rlx-agent`'s TSIG key file.
///
/// A key file is trusted for what it says, so whoever can write it (or
/// swap it) chooses the key. Refused, each with the fix in the error:
///
/// - a **symbolic link** as the last component (opened with `O_NOFOLLOW`):
///   a link in a directory others can write could be re-pointed at a file
///   of theirs between two runs;
/// - a file **owned by another user** than this one or root: a root
///   coordinator would otherwise accept a 0600 file that user placed;
/// - a file **group or others can read or write** (a key others can read is
///   no secret; one they can write lets them choose it);
/// - a **parent directory** group or others can write, or owned by another
///   user: they could replace the file. A sticky directory owned by this
///   user or root (`/tmp`) is accepted: there only a file's owner may
///   rename or remove it, and a file others put there fails the owner
///   check;
/// - anything but a regular file, and a file over `limit` bytes.
///
/// Owner, mode, type and size are checked on the opened descriptor, not
/// the path, so a swap between the check and the read cannot slip past.
/// The directory is checked by path (its replacement would need write
/// access to the grandparent, which is not checked: one level is the
/// common mistake, `/etc/rlx` made group-writable).
pub fn read_private(path: &Path, limit: u64) -> Result<String, KeyError> {
    let io = |e: std::io::Error| KeyError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use nix::fcntl::OFlag;
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO must not hang; the type check below
        // refuses it.
        opts.custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits());
    }
    let file = opts.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
            return KeyError::Symlink {
                path: path.to_path_buf(),
            };
        }
        io(e)
    })?;
    let meta = file.metadata().map_err(io)?;
    check_private(path, &meta)?;
    if meta.len() > limit {
        return Err(KeyError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
            limit,
        });
    }
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > limit {
        // Grew between the check and the read.
        return Err(KeyError::TooLarge {
            path: path.to_path_buf(),
            bytes: text.len() as u64,
            limit,
        });
    }
    Ok(text)
}

/// Checks a key file by path without opening it (`lstat`), with the rules
/// of [`read_private`]: for a file this process cannot read but trusts all
/// the same, such as the key a service manager read as root and handed
/// over as a copy (systemd's `LoadCredential=`). The copy is private by
/// construction; the file it came from must be too, or a world-readable or
/// symlinked key would be used without a word.
///
/// Unlike [`read_private`] the check is on the path, not an opened file: a
/// swap after it goes unseen here, but the reader (the service manager)
/// already took its copy, and the next start checks again.
pub fn check_private_path(path: &Path) -> Result<(), KeyError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| KeyError::Io {
        path: path.to_path_buf(),
        reason: format!(
            "cannot check its owner and mode: {e} (this user must be able to look it up: \
             `chmod o+x` its directory)"
        ),
    })?;
    if meta.file_type().is_symlink() {
        return Err(KeyError::Symlink {
            path: path.to_path_buf(),
        });
    }
    check_private(path, &meta)
}

/// The group a packaged agent's key file may be readable by, owned by root
/// (`root:rlx-agent`, mode 0640). systemd before 247 (Ubuntu 20.04 and DGX
/// OS 5, Debian 10, RHEL and Rocky 8) has no `LoadCredential=`, so the
/// agent, a throwaway user of the unit, must read the file itself; the
/// packages create this system group and the unit adds it to the agent's
/// groups (docs/security.md, "Keys on older systemd"). A group that exists
/// for no other purpose, so group-read gives the key to the agent alone.
pub const SERVICE_GROUP: &str = "rlx-agent";

/// The id of [`SERVICE_GROUP`] on this machine, if it exists.
pub fn service_gid() -> Option<u32> {
    #[cfg(unix)]
    {
        nix::unistd::Group::from_name(SERVICE_GROUP)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Whether a key file's `mode` (permission bits), owner `uid` and group
/// `gid` keep it private: no access for group or others, or, for a file
/// owned by root in the agent's own group `service_gid`, group read and
/// nothing more (`root:rlx-agent 0640`, [`SERVICE_GROUP`]).
pub fn mode_is_private(mode: u32, uid: u32, gid: u32, service_gid: Option<u32>) -> bool {
    let extra = mode & 0o077;
    extra == 0 || (extra == 0o040 && uid == 0 && Some(gid) == service_gid)
}

/// The rules of [`read_private`] on `meta`, the file's own metadata (not a
/// link's), and on its directory.
fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyError> {
    if !meta.is_file() {
        return Err(KeyError::Io {
            path: path.to_path_buf(),
            reason: "not a regular file".into(),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return Err(KeyError::Owner {
                path: path.to_path_buf(),
                owner: meta.uid(),
                me,
            });
        }
        let mode = meta.permissions().mode() & 0o777;
        if !mode_is_private(mode, meta.uid(), meta.gid(), service_gid()) {
            return Err(KeyError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dmeta = std::fs::metadata(&dir).map_err(|e| KeyError::Io {
            path: path.to_path_buf(),
            reason: format!("cannot check its directory {}: {e}", dir.display()),
        })?;
        let dmode = dmeta.permissions().mode() & 0o7777;
        let owned = dmeta.uid() == me || dmeta.uid() == 0;
        let sticky = dmode & 0o1000 != 0;
        if !owned || (dmode & 0o022 != 0 && !sticky) {
            return Err(KeyError::Directory {
                path: path.to_path_buf(),
                dir,
                mode: dmode,
                owner: dmeta.uid(),
                me,
            });
        }
    }
    Ok(())
}

enum ParseError {
    Line { line: usize, reason: String },
    Empty,
}

/// Writes a fresh key to `path` with mode 0600 and returns it.
///
/// Refuses to overwrite an existing file (`create_new`): replacing a cluster
/// key by accident locks every agent out, so rotation is a deliberate edit
/// (see `docs/protocol.md`).
pub fn generate(path: &Path) -> Result<Key, KeyError> {
    let key = Key::generate()?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            KeyError::Io {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        }
    })?;
    let written = file
        .write_all(format!("{}\n", key.to_hex()).as_bytes())
        .and_then(|()| file.sync_all());
    written.map_err(|e| {
        // Do not leave a half-written key file behind to be "fixed" by hand.
        let _ = std::fs::remove_file(path);
        KeyError::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
    })?;
    Ok(key)
}

/// Why a key file could not be used. Every variant names the path and says
/// what to do; none carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The file could not be opened or read.
    #[error("key file {}: {reason}", path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// The path is a symbolic link.
    #[error(
        "key file {path} is a symbolic link; refusing to follow it (whoever can re-point the link chooses the key): name the file itself, which `readlink -f {path}` prints",
        path = path.display()
    )]
    Symlink {
        /// The key file.
        path: PathBuf,
    },
    /// Owned by a user other than this one or root.
    #[error(
        "key file {path} belongs to uid {owner}, not to this user (uid {me}) or root; whoever owns it chooses the key: check its content, then run `chown {me} {path}`",
        path = path.display()
    )]
    Owner {
        /// The key file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Its directory lets others replace it.
    #[error(
        "key file {path} is in {dir}, which {}; they could replace the key: run `chmod go-w {dir}`{}, or move the key to a private directory",
        if *owner != *me && *owner != 0 { format!("belongs to uid {owner}, not to this user (uid {me}) or root") } else { format!("group or others can write (mode {mode:04o})") },
        if *owner != *me && *owner != 0 { format!(" and `chown {me} {}`", dir.display()) } else { String::new() },
        path = path.display(),
        dir = dir.display()
    )]
    Directory {
        /// The key file.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// The directory's mode bits (with the sticky bit).
        mode: u32,
        /// The directory's owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Group or others may read or write the key.
    #[error(
        "key file {path} is accessible by group or others (mode {mode:04o}); a shared key must be private: run `chmod 600 {path}` (a packaged agent's key may also be root:rlx-agent 0640)",
        path = path.display()
    )]
    Permissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A non-comment line is not a key.
    #[error("key file {} line {line}: {reason}", path.display())]
    Malformed {
        /// The key file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, without the line's content.
        reason: String,
    },
    /// Only comments and blank lines.
    #[error("key file {path} holds no key; create one with `rlx-discover keygen {path}`", path = path.display())]
    Empty {
        /// The key file.
        path: PathBuf,
    },
    /// Bigger than the limit ([`MAX_KEY_FILE_BYTES`] for a cluster key).
    #[error("key file {} is {bytes} bytes, over the limit of {limit}: a key file is a few lines; is this the right file?", path.display())]
    TooLarge {
        /// The key file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// `generate` found the path taken.
    #[error("{} already exists; refusing to overwrite a key (remove it first, or choose another path)", path.display())]
    Exists {
        /// The path asked for.
        path: PathBuf,
    },
    /// The OS random source failed.
    #[error("cannot get random bytes for a key: {0}")]
    Random(String),
}

#[cfg(test)]
mod tests {
    /// Issue 38, item 2: on systemd before 247 the packaged agent reads its
    /// key itself, through the `rlx-agent` group; that one grant is private
    /// enough, and nothing wider is.
    #[test]
    fn a_key_is_private_at_0600_or_root_owned_0640_in_the_agents_own_group_only() {
        use super::mode_is_private as ok;
        let svc = Some(998);
        assert!(ok(0o600, 1000, 1000, svc), "0600 by anyone");
        assert!(ok(0o640, 0, 998, svc), "root:rlx-agent 0640");
        assert!(!ok(0o640, 0, 0, svc), "another group");
        assert!(!ok(0o640, 0, 998, None), "no rlx-agent group here");
        assert!(!ok(0o640, 1000, 998, svc), "owned by a user, not root");
        assert!(!ok(0o660, 0, 998, svc), "group write");
        assert!(!ok(0o644, 0, 998, svc), "others read");
    }

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    const K1: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const K2: &str = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

    #[test]
    fn a_generated_key_file_is_private_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = generate(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "keygen must write mode 0600");
        let ring = KeyRing::load(&p).unwrap();
        assert_eq!(ring.keys(), &[key]);
    }

    #[test]
    fn generate_refuses_to_overwrite_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "k", "precious\n", 0o600);
        let err = generate(&p).unwrap_err();
        assert!(matches!(err, KeyError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("refusing to overwrite"), "{err}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious\n");
    }

    #[test]
    fn two_generated_keys_differ() {
        assert_ne!(Key::generate().unwrap(), Key::generate().unwrap());
    }

    #[test]
    fn a_key_file_readable_by_group_or_others_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
            let p = write(dir.path(), "k", &format!("{K1}\n"), mode);
            let err = KeyRing::load(&p).unwrap_err().to_string();
            assert!(
                err.contains(&format!("chmod 600 {}", p.display())),
                "mode {mode:o}: {err}"
            );
            assert!(err.contains(&format!("{mode:04o}")), "{err}");
        }
    }

    #[test]
    fn several_keys_with_comments_and_blank_lines_load_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "# rotation: new first\n\n{K2}   # new\n  {}\n#{K1}\n",
            K1.to_uppercase()
        );
        let p = write(dir.path(), "k", &text, 0o600);
        let ring = KeyRing::load(&p).unwrap();
        assert_eq!(ring.keys().len(), 2, "the commented-out key is not a key");
        assert_eq!(
            ring.first().to_hex(),
            K2,
            "the first key is the one agents prove with"
        );
        assert_eq!(
            ring.keys()[1].to_hex(),
            K1,
            "hex is accepted in either case"
        );
    }

    #[test]
    fn a_malformed_key_is_reported_by_line_without_echoing_it() {
        let dir = tempfile::tempdir().unwrap();
        let short = &K1[..60];
        let p = write(dir.path(), "k", &format!("{K1}\n# c\n{short}\n"), 0o600);
        let err = KeyRing::load(&p).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains(&p.display().to_string()), "{err}");
        assert!(
            !err.contains(short),
            "the error must not echo key material: {err}"
        );

        let bad = K1.replace('a', "g");
        let p = write(dir.path(), "k2", &format!("{bad}\n"), 0o600);
        let err = KeyRing::load(&p).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("hex"), "{err}");
        assert!(!err.contains(&bad), "{err}");
    }

    #[test]
    fn a_file_of_only_comments_is_refused_with_a_hint() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "k", "# nothing here\n\n", 0o600);
        let err = KeyRing::load(&p).unwrap_err().to_string();
        assert!(
            err.contains("holds no key") && err.contains("keygen"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_or_huge_file_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("absent");
        let err = KeyRing::load(&p).unwrap_err().to_string();
        assert!(err.contains(&p.display().to_string()), "{err}");

        let huge = "#".repeat(MAX_KEY_FILE_BYTES as usize + 10);
        let p = write(dir.path(), "huge", &huge, 0o600);
        assert!(matches!(KeyRing::load(&p), Err(KeyError::TooLarge { .. })));
    }

    /// Guards against following a link: a key path that is a symbolic link
    /// (re-pointable by whoever can write its directory) was read through.
    #[test]
    fn a_key_file_that_is_a_symbolic_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = write(dir.path(), "real", &format!("{K1}\n"), 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = KeyRing::load(&link).unwrap_err();
        assert!(matches!(err, KeyError::Symlink { .. }), "{err}");
        let err = err.to_string();
        assert!(
            err.contains(&link.display().to_string()) && err.contains("readlink -f"),
            "{err}"
        );
        KeyRing::load(&real).unwrap();
    }

    /// Guards against a key others could replace: a 0600 file in a
    /// directory that group or others can write was accepted.
    #[test]
    fn a_key_file_in_a_directory_others_can_write_is_refused_unless_it_is_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "k", &format!("{K1}\n"), 0o600);
        for mode in [0o770, 0o707, 0o777] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            let err = KeyRing::load(&p).unwrap_err();
            assert!(matches!(err, KeyError::Directory { .. }), "{mode:o}: {err}");
            let err = err.to_string();
            assert!(
                err.contains(&format!("chmod go-w {}", dir.path().display()))
                    && err.contains(&p.display().to_string())
                    && err.contains(&format!("{mode:04o}")),
                "{err}"
            );
        }
        // Sticky, like /tmp: only the file's owner may rename or remove it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        KeyRing::load(&p).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        KeyRing::load(&p).unwrap();
    }

    /// Guards against a root coordinator taking a key another user chose:
    /// a 0600 file owned by another user (or in their directory) was
    /// accepted. Needs root to `chown`; without it the test says SKIP.
    #[test]
    fn a_key_file_or_directory_owned_by_another_user_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "SKIP a_key_file_or_directory_owned_by_another_user_is_refused: needs root to chown a file to another user"
            );
            return;
        }
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "k", &format!("{K1}\n"), 0o600);
        nix::unistd::chown(&p, nobody, None).unwrap();
        let err = KeyRing::load(&p).unwrap_err();
        assert!(matches!(err, KeyError::Owner { owner: 65534, .. }), "{err}");
        let err = err.to_string();
        assert!(
            err.contains(&format!("chown 0 {}", p.display())) && err.contains("uid 65534"),
            "{err}"
        );
        nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
        KeyRing::load(&p).unwrap();
        nix::unistd::chown(dir.path(), nobody, None).unwrap();
        let err = KeyRing::load(&p).unwrap_err();
        assert!(
            matches!(err, KeyError::Directory { owner: 65534, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("chown 0"), "{err}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = KeyRing::load(&p).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn debug_output_never_contains_the_key() {
        let key = Key::from_hex(K1).unwrap();
        let ring = KeyRing::single(key.clone());
        for shown in [
            format!("{key:?}"),
            format!("{ring:?}"),
            format!("{ring:#?}"),
        ] {
            assert!(!shown.contains(K1), "{shown}");
            assert!(!shown.contains(&K1[..16]), "{shown}");
            assert!(shown.contains(&key.fingerprint()), "{shown}");
        }
    }

    #[test]
    fn the_fingerprint_is_stable_and_distinguishes_keys() {
        let a = Key::from_hex(K1).unwrap();
        let b = Key::from_hex(K2).unwrap();
        assert_eq!(a.fingerprint(), Key::from_hex(K1).unwrap().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 8);
    }
}
