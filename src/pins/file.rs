//! **The pins file on disk, with a key file's protections.** The pins
//! decide which machine is which, so whoever can write the file, or
//! re-point it, chooses them; and a root `expand` that followed a link a
//! user planted beside the cluster file would write wherever it points.
//!
//! The rules of the cluster key file (`rlx_proto::keys::read_private`),
//! but for a file that is public (public keys: others may read it):
//!
//! - no **symbolic link** as the last component: opened with `O_NOFOLLOW`,
//!   created with `O_EXCL` (which never follows one), replaced by a rename
//!   of the file itself, never through a link;
//! - **owned by this user or root**: a root coordinator would otherwise
//!   take pins a user placed;
//! - **not writable by group or others**;
//! - in a **directory** owned by this user or root that group and others
//!   cannot write (sticky directories such as `/tmp` excepted: there only a
//!   file's owner may rename or remove it).
//!
//! Owner, mode and type are checked on the opened file, the directory by
//! path, as for the key file. Each refusal names the file and the fix.

use crate::clusterfile::Snapshot;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the pins file is not used: it cannot be read or created, or it
/// breaks a rule above. Each names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read, checked or created.
    #[error("cannot use pins file {path}: {what} it: {error}{hint}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The step that failed.
        what: &'static str,
        /// Why (in the message, not a `source()`: `{:#}` says it once).
        error: std::io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The file or its directory lets someone else choose the pins.
    #[error(
        "pins file {path} {why}; the pins decide which machine is which, so whoever can \
         write or re-point the file chooses them: {fix}",
        path = path.display()
    )]
    Unsafe {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
        /// The command or setting that fixes it.
        fix: String,
    },
}

/// A pins file is a line of about 90 bytes per node; 4 MiB is some 45,000
/// nodes, beyond any cluster, and keeps a wrong `pins_file` (a log, a
/// checkpoint) from being read into memory whole.
const MAX_PINS_BYTES: u64 = 4 << 20;

/// Reads the pins file after its checks, with the snapshot that
/// `write_atomic` compares and replaces (the path itself, never a link's
/// target); `None` when there is no file.
pub(super) fn read_checked(path: &Path) -> Result<Option<(String, Snapshot)>, FileError> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: opening a FIFO must not hang; the type check refuses it.
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(unsafe_file(
                path,
                "is a symbolic link".into(),
                format!(
                    "name the file itself (`readlink -f {p}` prints it) in [discover] \
                     pins_file, or remove the link",
                    p = path.display()
                ),
            ))
        }
        Err(e) => return Err(io(path, "reading", e)),
    };
    let meta = file.metadata().map_err(|e| io(path, "reading", e))?;
    check_file(path, &meta)?;
    check_dir(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_PINS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io(path, "reading", e))?;
    if bytes.len() as u64 > MAX_PINS_BYTES {
        return Err(unsafe_file(
            path,
            format!(
                "is {} bytes, over the {MAX_PINS_BYTES}-byte cap on a pins file",
                meta.len().max(bytes.len() as u64)
            ),
            "is this the right file? set [discover] pins_file to the pins file".into(),
        ));
    }
    let snap = Snapshot {
        path: path.to_path_buf(),
        target: path.to_path_buf(),
        sha256: Sha256::digest(&bytes).into(),
        len: bytes.len() as u64,
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        unsafe_file(
            path,
            format!("is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
            "is this the right file? set [discover] pins_file to the pins file".into(),
        )
    })?;
    Ok(Some((text, snap)))
}

/// Creates an empty pins file (mode 0644: pins are public keys) after the
/// directory's check, never through a link; an existing file is left as
/// it is, for [`read_checked`] to judge.
pub(super) fn create_empty(path: &Path) -> Result<(), FileError> {
    check_dir(path)?;
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path);
    match made {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(path, "creating", e)),
    }
}

/// The file's own rules: a regular file, this user's or root's, that group
/// and others cannot write.
fn check_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), FileError> {
    let p = path.display();
    if !meta.is_file() {
        return Err(unsafe_file(
            path,
            "is not a regular file".into(),
            "set [discover] pins_file to a regular file".into(),
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(unsafe_file(
            path,
            format!(
                "belongs to uid {}, not to this user (uid {me}) or root",
                meta.uid()
            ),
            format!(
                "check its pins (`rlx-discover pins list --pins-file {p}`), then `chown {me} {p}`"
            ),
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(unsafe_file(
            path,
            format!("is writable by group or others (mode {mode:04o})"),
            format!(
                "check its pins (`rlx-discover pins list --pins-file {p}`), then `chmod go-w {p}`"
            ),
        ));
    }
    Ok(())
}

/// The directory's rules: this user's or root's, and only they can change
/// it (or sticky).
fn check_dir(path: &Path) -> Result<(), FileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let meta = std::fs::metadata(&dir).map_err(|e| io(path, "checking the directory of", e))?;
    let me = nix::unistd::geteuid().as_raw();
    let mode = meta.permissions().mode() & 0o7777;
    let d = dir.display();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(unsafe_file(
            path,
            format!(
                "is in {d}, which belongs to uid {}, not to this user (uid {me}) or root, so \
                 they can replace it",
                meta.uid()
            ),
            format!(
                "run as uid {}, or set [discover] pins_file (--pins-file) to a file in a \
                 directory of yours",
                meta.uid()
            ),
        ));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(unsafe_file(
            path,
            format!("is in {d}, which group or others can write (mode {mode:04o}), so they can replace it"),
            format!(
                "`chmod go-w {d}`, or set [discover] pins_file (--pins-file) to a file in a \
                 private directory"
            ),
        ));
    }
    Ok(())
}

fn unsafe_file(path: &Path, why: String, fix: String) -> FileError {
    FileError::Unsafe {
        path: path.to_path_buf(),
        why,
        fix,
    }
}

fn io(path: &Path, what: &'static str, error: std::io::Error) -> FileError {
    let hint = if error.kind() == std::io::ErrorKind::PermissionDenied {
        format!(
            "; the directory of {} must be writable by you, or set [discover] pins_file",
            path.display()
        )
    } else {
        String::new()
    };
    FileError::Io {
        path: path.to_path_buf(),
        what,
        error,
        hint,
    }
}
