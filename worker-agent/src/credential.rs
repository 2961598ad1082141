//! **Key files handed over by systemd** — which credential stands for a
//! configured key file, and the checks that file still gets.
//!
//! ```text
//! # rlx-agent.service                              # agent.toml
//! LoadCredential=etc-rlx-cluster.key:/etc/rlx/cluster.key   key_file = "/etc/rlx/cluster.key"
//! ```
//!
//! The packaged unit runs the agent as a throwaway user (`DynamicUser=`),
//! who cannot read a root-only key file; systemd reads it as root and hands
//! the agent a private copy in `$CREDENTIALS_DIRECTORY`. The copy is
//! private by construction, so on its own it says nothing about the file it
//! came from: a world-readable or symlinked `/etc/rlx/cluster.key` would be
//! used without a word. So the agent also checks the configured path, by
//! `lstat`, with the key file's rules ([`rlx_proto::keys::check_private_path`]).
//!
//! A copy is matched to the configured path **by path**: its credential
//! name is the path as `systemd-escape --path` spells it
//! (`/etc/rlx/cluster.key` → `etc-rlx-cluster.key`, [`credential_name`]).
//! Matching by file name, as before, read the `cluster.key` loaded from
//! `/etc/rlx` for a `key_file` naming any other `cluster.key`. The names
//! the unit used before (`cluster.key`, `update.key`) still count, for the
//! paths that unit loaded them from only ([`LEGACY`]), so an agent upgraded
//! under a hand-installed older unit keeps its key.
//!
//! Without `$CREDENTIALS_DIRECTORY` (not under systemd, or a systemd
//! without `LoadCredential=`), the configured path is read itself, with
//! the same rules ([`rlx_proto::keys::read_private`]).
//!
//! **systemd before 247** (Ubuntu 20.04 and DGX OS 5: 245, Debian 10:
//! 241, RHEL and Rocky 8: 239) ignores `LoadCredential=`, so there the
//! agent reads the file itself, as its throwaway user: the packages create
//! the group `rlx-agent` ([`rlx_proto::keys::SERVICE_GROUP`]), the unit
//! adds it to the agent's groups, and the key is `root:rlx-agent 0640`
//! (the postinst sets that on keys already there). `rlx-agent check`, run
//! as root, asks whether the service user could read the key, not whether
//! root can ([`service_read_problem`]).

use std::path::{Path, PathBuf};

/// The credential names the unit used before credentials were matched by
/// path, with the one path each was loaded from.
pub const LEGACY: [(&str, &str); 2] = [
    ("cluster.key", "/etc/rlx/cluster.key"),
    ("update.key", "/etc/rlx/update.key"),
];

/// systemd's directory of this service's credentials
/// (`$CREDENTIALS_DIRECTORY`), when it set one.
pub fn credentials_dir() -> Option<PathBuf> {
    std::env::var_os("CREDENTIALS_DIRECTORY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The credential name that stands for `path`: the path as `systemd-escape
/// --path` spells it (slashes to `-`, every byte but `[A-Za-z0-9:_.]` and
/// a leading `.` as `\xNN`), one name per path. `None` for a relative
/// path, which no unit can name.
pub fn credential_name(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    if !path.is_absolute() {
        return None;
    }
    let parts: Vec<&[u8]> = path
        .as_os_str()
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    if parts.is_empty() {
        return Some("-".into());
    }
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('-');
        }
        for (j, &b) in part.iter().enumerate() {
            let plain = b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.';
            if plain && !(i == 0 && j == 0 && b == b'.') {
                out.push(b as char);
            } else {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    Some(out)
}

/// The file a key setting `path` is read from: the copy in `creds` (the
/// service's `$CREDENTIALS_DIRECTORY`) whose name stands for `path`, when it
/// holds a key, else `path` itself.
///
/// A copy is taken only once `path` itself passed the key file's rules by
/// `lstat` (no symbolic link, owned by this user or root, private, in a
/// directory only they can change); otherwise the error names `path` and
/// the fix. A credential of nothing but white space is the unit's fallback
/// when the file does not exist (`SetCredential=NAME:\n`), never a key.
pub fn key_source(path: &Path, creds: Option<&Path>) -> anyhow::Result<PathBuf> {
    let Some(dir) = creds else {
        return Ok(path.to_path_buf());
    };
    let mut names: Vec<String> = credential_name(path).into_iter().collect();
    names.extend(
        LEGACY
            .iter()
            .filter(|(_, from)| Path::new(from) == path)
            .map(|(name, _)| name.to_string()),
    );
    let found = names
        .into_iter()
        .map(|n| {
            let c = dir.join(&n);
            (n, c)
        })
        .find(|(_, c)| holds_a_key(c));
    let Some((name, copy)) = found else {
        return Ok(path.to_path_buf());
    };
    match rlx_proto::keys::check_private_path(path) {
        Ok(()) => Ok(copy),
        // A credential set in the unit itself (`SetCredentialEncrypted=`)
        // comes from no file: nothing on disk to check.
        Err(rlx_proto::keys::KeyError::Io { reason, .. })
            if std::fs::symlink_metadata(path)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
        {
            tracing::info!(
                credential = %name,
                "no file at {} ({reason}): reading the key systemd set as credential {name}",
                path.display()
            );
            Ok(copy)
        }
        Err(e) => Err(anyhow::anyhow!(
            "{e} (systemd hands this agent a private copy of it, credential {name}, but the \
             file itself must be private too: whoever can read it has the key, and whoever can \
             re-point or rewrite it chooses it; fix it, then `systemctl restart rlx-agent`)"
        )),
    }
}

/// The first systemd with `LoadCredential=` and `SetCredential=`.
pub const CREDENTIALS_SINCE: u32 = 247;

/// This box's systemd version, from `systemctl --version`; `None` where
/// there is no systemd (a Mac, a container without it).
pub fn systemd_version() -> Option<u32> {
    let out = std::process::Command::new("systemctl")
        .arg("--version")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_systemd_version(&String::from_utf8_lossy(&out.stdout))
}

/// The version in `systemctl --version`'s first line: `systemd 245
/// (245.4-4ubuntu3)` is 245.
pub fn parse_systemd_version(text: &str) -> Option<u32> {
    let mut words = text.lines().next()?.split_whitespace();
    (words.next()? == "systemd").then_some(())?;
    words.next()?.parse().ok()
}

/// Why the packaged service could not read key file `path` under
/// systemd `systemd`, or `None` when it can. From 247 on, systemd reads
/// it as root (a credential): nothing more to ask. Before, the agent reads
/// it as a throwaway user whose one useful group is `service_gid`
/// ([`rlx_proto::keys::SERVICE_GROUP`]): the file needs group read in that
/// group (or others' read, which the key rules refuse), and each directory
/// above it search permission for that user. Permission math on the
/// metadata, since the dynamic user does not exist while the service is
/// stopped.
pub fn service_read_problem(path: &Path, systemd: u32, service_gid: Option<u32>) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if systemd >= CREDENTIALS_SINCE {
        return None;
    }
    let in_group = |gid: u32| Some(gid) == service_gid;
    let group = rlx_proto::keys::SERVICE_GROUP;
    let p = path.display();
    let why = format!(
        "systemd {systemd} has no LoadCredential= (new in {CREDENTIALS_SINCE}), so the agent's \
         throwaway user reads {p} itself"
    );
    if service_gid.is_none() {
        return Some(format!(
            "{why}, through the group {group}, which does not exist here: `groupadd --system \
             {group}` (the packages do), then `chgrp {group} {p} && chmod 640 {p}`"
        ));
    }
    for dir in path
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
    {
        let Ok(m) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = m.mode();
        if mode & 0o001 == 0 && !(in_group(m.gid()) && mode & 0o010 != 0) {
            return Some(format!(
                "{why}, and cannot enter {} (mode {:04o}): `chmod o+x {}`",
                dir.display(),
                mode & 0o7777,
                dir.display()
            ));
        }
    }
    let m = std::fs::metadata(path).ok()?;
    let mode = m.mode();
    if mode & 0o004 != 0 || (in_group(m.gid()) && mode & 0o040 != 0) {
        return None;
    }
    Some(format!(
        "{why}, and cannot: it is mode {:04o}, group {}; run `chgrp {group} {p} && chmod 640 {p}` \
         (then `systemctl restart rlx-agent`)",
        mode & 0o7777,
        m.gid()
    ))
}

/// Whether the credential `c` holds something other than white space (at
/// most a key file's size).
fn holds_a_key(c: &Path) -> bool {
    std::fs::read(c).is_ok_and(|b| {
        b.len() as u64 <= rlx_proto::keys::MAX_KEY_FILE_BYTES
            && b.iter().any(|x| !x.is_ascii_whitespace())
    })
}

#[cfg(test)]
mod tests;
