//! **Writing the user's file back** — atomically, with its mode kept, and
//! never over somebody else's edit.
//!
//! ```text
//! read ─► Snapshot{sha256, len} ─► (discovery runs, seconds) ─► write_atomic:
//!   may you write CONFIG? ─► temp file beside it (same filesystem)
//!   ─► owner, mode, ACL as CONFIG's ─► write ─► fsync
//!   ─► re-read CONFIG: still the snapshot? ─► rename over CONFIG ─► fsync dir
//! ```
//!
//! A rename needs only the directory's write permission, so it could
//! replace a file its user may not write (a 0444 file, another user's file
//! in a shared directory), and the new file would be theirs. So the write
//! is refused unless this user may write the file itself (`access(2)` with
//! the effective ids, ACLs included), and unless the new file can get the
//! old one's owner and group back; its mode and (on Linux) its ACL are
//! copied, and [`Written`] says what was kept, for the caller to print.
//!
//! `rename(2)` within one directory is atomic: at every instant the path
//! names either the old file or the complete new one, so a crash or `kill -9`
//! at any point leaves one of the two, never a truncated file. The worst a
//! kill leaves behind is a stray `.CONFIG.*.rlx-tmp` beside it, which is safe
//! to delete. The fsync before the rename makes the new bytes durable before
//! the name points at them (otherwise a power cut could leave the name on an
//! empty file); the fsync of the directory makes the rename itself durable.
//!
//! Discovery takes seconds, and a user may save the file in an editor in the
//! meantime. Just before the rename the file is read again and compared with
//! the snapshot taken when it was parsed; if it changed, nothing is written.
//! The window left between that check and the rename is a few microseconds.

use rlx_proto::configfile::{read_bounded, ReadError, MAX_CONFIG_FILE_BYTES};
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Suffix of the temporary file written beside the config.
pub(super) const TEMP_SUFFIX: &str = ".rlx-tmp";

/// What was read: enough to notice that the file changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The path as given (for messages).
    pub path: PathBuf,
    /// The file itself: symlinks resolved, so the link survives a write.
    pub target: PathBuf,
    /// SHA-256 of the bytes read.
    pub sha256: [u8; 32],
    /// Their length.
    pub len: u64,
}

/// Why a write-back did not happen. Only [`WriteError::Changed`] is worth
/// retrying as is; the others need the user to fix something first.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The file could not be read: missing, a directory, over the cap on
    /// a config file, not UTF-8. The message names the file and says the
    /// cause once.
    #[error("{0}")]
    Read(rlx_proto::configfile::ReadError),
    /// Someone changed (or removed) the file after it was read.
    #[error(
        "{path} changed on disk while discovery ran (someone saved or replaced it), so it \
         was not overwritten and nothing was written; run the command again to expand the \
         new version"
    )]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// This user may not write the file: replacing it by a rename (which
    /// needs only the directory) would overrule its mode or owner.
    #[error(
        "{path} is not writable by you (mode {mode:04o}, owner uid {owner}; you are uid {me}), \
         so it was not replaced and nothing was written: {fix}",
        path = path.display()
    )]
    NotWritable {
        /// The file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
        /// What to do about it.
        fix: String,
    },
    /// The file belongs to another user or group, and the new version
    /// could not be given back to them.
    #[error(
        "{path} belongs to uid {owner} gid {group}; replacing it would make it yours (uid {me}), \
         and you may not give it back ({error}), so nothing was written: run the command as \
         its owner, or as root",
        path = path.display()
    )]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its group.
        group: u32,
        /// This process's effective uid.
        me: u32,
        /// Why the owner could not be kept (in the message, not a
        /// `source()`, so that `{:#}` says it once).
        error: std::io::Error,
    },
    /// Writing the new version failed; the old file is untouched.
    #[error("cannot write {path}: {what}: {error}; the file was not changed{hint}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The step that failed.
        what: &'static str,
        /// Why.
        error: std::io::Error,
        /// What to do about it.
        hint: String,
    },
}

fn hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Reads the cluster file (at most [`MAX_CONFIG_FILE_BYTES`]) and takes
/// its snapshot.
pub fn read(path: &Path) -> Result<(String, Snapshot), WriteError> {
    let target = fs::canonicalize(path).map_err(|error| {
        WriteError::Read(ReadError::Io {
            path: path.to_path_buf(),
            error,
        })
    })?;
    let text = read_bounded(&target, MAX_CONFIG_FILE_BYTES).map_err(|e| {
        // Named as the user named it, not by its canonical path.
        WriteError::Read(match e {
            ReadError::Io { error, .. } => ReadError::Io {
                path: path.to_path_buf(),
                error,
            },
            ReadError::Directory { .. } => ReadError::Directory {
                path: path.to_path_buf(),
            },
            ReadError::TooLarge { bytes, limit, .. } => ReadError::TooLarge {
                path: path.to_path_buf(),
                bytes,
                limit,
            },
            ReadError::NotText { at, .. } => ReadError::NotText {
                path: path.to_path_buf(),
                at,
            },
        })
    })?;
    let snap = Snapshot {
        path: path.to_path_buf(),
        target,
        sha256: hash(text.as_bytes()),
        len: text.len() as u64,
    };
    Ok((text, snap))
}

/// True when the file still holds exactly the snapshot's bytes.
pub(super) fn unchanged(snap: &Snapshot) -> bool {
    // Bounded like the first read: the file may have grown since.
    let mut b = Vec::new();
    match fs::File::open(&snap.target).and_then(|f| f.take(snap.len + 1).read_to_end(&mut b)) {
        Ok(_) => b.len() as u64 == snap.len && hash(&b) == snap.sha256,
        Err(_) => false,
    }
}

/// What [`write_atomic`] kept of the file it replaced, for the caller to
/// say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The mode bits.
    pub mode: u32,
    /// The owner.
    pub uid: u32,
    /// The group.
    pub gid: u32,
    /// Whether it had an access ACL (copied).
    pub acl: bool,
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "replaced atomically; kept mode {:04o}, owner uid {} gid {}{}",
            self.mode,
            self.uid,
            self.gid,
            if self.acl { " and its ACL" } else { "" }
        )
    }
}

/// Replaces the snapshot's file with `text`, atomically, keeping its
/// owner, group, mode and ACL; returns what it kept. Refuses with
/// [`WriteError::Changed`] if the file no longer holds the snapshot's
/// bytes (or became a symbolic link), [`WriteError::NotWritable`] if this
/// user may not write it, and [`WriteError::Owner`] if its owner or group
/// cannot be kept.
pub fn write_atomic(snap: &Snapshot, text: &str) -> Result<Written, WriteError> {
    let path = &snap.path;
    let dir = snap
        .target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = snap
        .target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cluster.toml".into());
    let fail = |what: &'static str, error: std::io::Error| {
        let hint = match error.kind() {
            std::io::ErrorKind::PermissionDenied => format!(
                "; the directory {} must be writable by you (the new version is written \
                 beside the file and renamed over it)",
                dir.display()
            ),
            std::io::ErrorKind::StorageFull => "; free some disk space".to_string(),
            _ => String::new(),
        };
        WriteError::Write {
            path: path.clone(),
            what,
            error,
            hint,
        }
    };
    let meta = fs::symlink_metadata(&snap.target)
        .ok()
        .filter(|m| !m.file_type().is_symlink())
        .ok_or_else(|| WriteError::Changed { path: path.clone() })?;
    let me = nix::unistd::geteuid().as_raw();
    may_write(&snap.target).map_err(|e| WriteError::NotWritable {
        path: path.clone(),
        mode: meta.mode() & 0o7777,
        owner: meta.uid(),
        me,
        fix: match e {
            nix::errno::Errno::EROFS => "it is on a read-only filesystem".into(),
            _ if meta.uid() == me => format!(
                "it is yours: `chmod u+w {}` if you mean it to change",
                path.display()
            ),
            _ => "run the command as its owner, or ask them to let you write it".into(),
        },
    })?;
    let acl = acl::read(&snap.target).map_err(|e| fail("reading its ACL", e))?;

    // A dot-file beside the config: same filesystem (rename is atomic only
    // within one), hidden from `ls`, and recognisable if a kill leaves it.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| fail("creating a temporary file beside it", e))?;
    let tmeta = tmp
        .as_file()
        .metadata()
        .map_err(|e| fail("reading the temporary file", e))?;
    if (tmeta.uid(), tmeta.gid()) != (meta.uid(), meta.gid()) {
        // Root editing a user's file must not hand it to root; a user who
        // may write another's file must not take it over.
        std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid())).map_err(
            |error| WriteError::Owner {
                path: path.clone(),
                owner: meta.uid(),
                group: meta.gid(),
                me,
                error,
            },
        )?;
    }
    // After the owner: a chown clears the set-id bits.
    tmp.as_file()
        .set_permissions(meta.permissions())
        .map_err(|e| fail("setting the temporary file's mode", e))?;
    // The old file's ACL, or none: a default ACL of the directory gave the
    // temporary file one the old file may not have had.
    acl::write(tmp.as_file(), acl.as_deref()).map_err(|e| fail("copying its ACL", e))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| fail("writing the new version", e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| fail("flushing the new version to disk", e))?;

    if !unchanged(snap) {
        // Dropping `tmp` removes the temporary file.
        return Err(WriteError::Changed { path: path.clone() });
    }
    tmp.persist(&snap.target)
        .map_err(|e| fail("renaming the new version over it", e.error))?;
    // The rename is done; a failed directory fsync only weakens durability
    // across a power cut, so it is reported, not fatal.
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(
            "wrote {} but could not fsync {}: {e}",
            path.display(),
            dir.display()
        );
    }
    Ok(Written {
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        acl: acl.is_some(),
    })
}

/// Whether this process may write `p`, by its effective ids and the file's
/// ACL (`faccessat` with `AT_EACCESS`): what an editor would be allowed.
fn may_write(p: &Path) -> Result<(), nix::errno::Errno> {
    nix::unistd::faccessat(
        nix::fcntl::AT_FDCWD,
        p,
        nix::unistd::AccessFlags::W_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    )
}

/// The POSIX access ACL of a file, copied as its extended attribute
/// (`system.posix_acl_access`): Linux only; elsewhere a file's ACL is not
/// copied (macOS keeps extended ACLs apart from the mode).
mod acl {
    use std::fs::File;
    use std::path::Path;

    #[cfg(target_os = "linux")]
    const NAME: &std::ffi::CStr = c"system.posix_acl_access";

    /// The ACL of `p`, `None` when it has none beyond its mode.
    #[cfg(target_os = "linux")]
    pub(super) fn read(p: &Path) -> std::io::Result<Option<Vec<u8>>> {
        use nix::libc;
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes())?;
        let mut buf = vec![0u8; 4096];
        loop {
            // SAFETY: both strings are NUL-terminated, and the buffer is
            // as long as the size given.
            let n = unsafe {
                libc::getxattr(
                    c.as_ptr(),
                    NAME.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n >= 0 {
                buf.truncate(n as usize);
                return Ok(Some(buf));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENODATA) | Some(libc::ENOTSUP) => return Ok(None),
                Some(libc::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
                _ => return Err(e),
            }
        }
    }

    /// Gives `f` the ACL `acl`, or removes the one it has when `None`.
    #[cfg(target_os = "linux")]
    pub(super) fn write(f: &File, acl: Option<&[u8]>) -> std::io::Result<()> {
        use nix::libc;
        use std::os::fd::AsRawFd;
        // SAFETY: the name is NUL-terminated and the value's length is its own.
        let r = unsafe {
            match acl {
                Some(v) => {
                    libc::fsetxattr(f.as_raw_fd(), NAME.as_ptr(), v.as_ptr().cast(), v.len(), 0)
                }
                None => libc::fremovexattr(f.as_raw_fd(), NAME.as_ptr()),
            }
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match (acl, e.raw_os_error()) {
            (None, Some(libc::ENODATA) | Some(libc::ENOTSUP)) => Ok(()),
            _ => Err(e),
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn read(_: &Path) -> std::io::Result<Option<Vec<u8>>> {
        Ok(None)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn write(_: &File, _: Option<&[u8]>) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_write_replaces_the_content_and_keeps_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.toml");
        fs::write(&p, "old\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        let (text, snap) = read(&p).unwrap();
        assert_eq!(text, "old\n");
        write_atomic(&snap, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640, "the file's mode is kept");
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn a_file_changed_after_reading_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.toml");
        fs::write(&p, "old\n").unwrap();
        let (_, snap) = read(&p).unwrap();
        fs::write(&p, "someone else's edit\n").unwrap();
        let e = write_atomic(&snap, "new\n").unwrap_err();
        assert!(matches!(e, WriteError::Changed { .. }), "{e}");
        assert!(e.to_string().contains("run the command again"), "{e}");
        assert_eq!(fs::read_to_string(&p).unwrap(), "someone else's edit\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_removed_file_counts_as_changed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.toml");
        fs::write(&p, "old\n").unwrap();
        let (_, snap) = read(&p).unwrap();
        fs::remove_file(&p).unwrap();
        assert!(matches!(
            write_atomic(&snap, "new\n"),
            Err(WriteError::Changed { .. })
        ));
        assert!(!p.exists(), "a removed file is not recreated");
    }

    /// Guards against replacing a symlinked config with a regular file.
    #[test]
    fn a_symlinked_config_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        let link = dir.path().join("cluster.toml");
        fs::write(&real, "old\n").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (_, snap) = read(&link).unwrap();
        write_atomic(&snap, "new\n").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new\n");
    }

    #[test]
    fn a_file_that_is_not_utf8_is_refused_with_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.toml");
        fs::write(&p, b"ok\xff").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("byte 2") && e.contains("UTF-8"), "{e}");
    }

    /// "cannot write ...: creating a temporary file beside it: Permission
    /// denied" was followed by "Permission denied" again, as its cause:
    /// each error here says its cause in its message and has no `source()`.
    #[test]
    fn a_failed_read_or_write_says_its_cause_once() {
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let write = WriteError::Write {
            path: "c.toml".into(),
            what: "creating a temporary file beside it",
            error: denied(),
            hint: String::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        let read = read(dir.path()).unwrap_err();
        for e in [write, read] {
            assert!(std::error::Error::source(&e).is_none(), "{e}");
        }
    }
}
