//! Which systemd credential stands for a configured key file, and the
//! checks the configured file gets when the agent reads a copy of it.

use super::*;
use rlx_proto::keys::KeyRing;
use std::os::unix::fs::PermissionsExt;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";

/// A private key file `cluster.key` in a private directory, and a
/// credentials directory holding systemd's copy of it under the name that
/// stands for its path.
struct Setup {
    _etc: tempfile::TempDir,
    key: PathBuf,
    creds: tempfile::TempDir,
}

fn setup() -> Setup {
    let etc = tempfile::tempdir().unwrap();
    let key = etc.path().join("cluster.key");
    std::fs::write(&key, KEY).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let creds = tempfile::tempdir().unwrap();
    let copy = creds.path().join(credential_name(&key).unwrap());
    std::fs::write(&copy, KEY).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o400)).unwrap();
    Setup {
        _etc: etc,
        key,
        creds,
    }
}

#[test]
fn a_credential_is_named_by_its_path_as_systemd_escape_spells_it() {
    let name = |p: &str| credential_name(Path::new(p));
    assert_eq!(
        name("/etc/rlx/cluster.key").as_deref(),
        Some("etc-rlx-cluster.key")
    );
    assert_eq!(
        name("/srv/my-keys//update.key").as_deref(),
        Some("srv-my\\x2dkeys-update.key")
    );
    assert_eq!(name("/.keys/k").as_deref(), Some("\\x2ekeys-k"));
    assert_eq!(name("keys/cluster.key"), None, "a relative path");
}

#[test]
fn the_copy_is_read_when_the_configured_file_is_private() {
    let s = setup();
    let src = key_source(&s.key, Some(s.creds.path())).unwrap();
    assert_eq!(src, s.creds.path().join(credential_name(&s.key).unwrap()));
    assert!(KeyRing::load(&src).is_ok());
    assert_eq!(
        key_source(&s.key, None).unwrap(),
        s.key,
        "not under systemd"
    );
}

/// Guards the match by path: a credential named `cluster.key` (loaded from
/// /etc/rlx/cluster.key by the older unit) is not the key of a `key_file`
/// that names another `cluster.key`.
#[test]
fn a_copy_is_matched_by_path_not_by_file_name() {
    let s = setup();
    std::fs::remove_file(s.creds.path().join(credential_name(&s.key).unwrap())).unwrap();
    std::fs::write(s.creds.path().join("cluster.key"), KEY).unwrap();
    assert_eq!(key_source(&s.key, Some(s.creds.path())).unwrap(), s.key);
    // The older unit's name counts for the path it loaded it from.
    let legacy = Path::new("/etc/rlx/cluster.key");
    let names: Vec<&str> = LEGACY
        .iter()
        .filter(|(_, p)| Path::new(p) == legacy)
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(names, ["cluster.key"]);
}

#[test]
fn the_units_fallback_for_a_missing_file_is_no_key() {
    let s = setup();
    let copy = s.creds.path().join(credential_name(&s.key).unwrap());
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&copy, "\n").unwrap();
    assert_eq!(key_source(&s.key, Some(s.creds.path())).unwrap(), s.key);
}

/// Guards the packaged agent's blind spot (issue 37, item 5): under
/// systemd it read only the private copy, so a world-readable key file
/// was used without a word. Now the configured file is refused, naming it
/// and the fix.
#[test]
fn a_world_readable_key_file_is_refused_even_when_systemd_hands_over_a_private_copy() {
    let s = setup();
    std::fs::set_permissions(&s.key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = format!(
        "{:#}",
        key_source(&s.key, Some(s.creds.path())).unwrap_err()
    );
    let p = s.key.display().to_string();
    assert!(
        e.contains(&p) && e.contains(&format!("chmod 600 {p}")) && e.contains("credential"),
        "{e}"
    );
}

/// Guards the same blind spot for a symbolic link: whoever can re-point it
/// chooses the key systemd copies.
#[test]
fn a_symlinked_key_file_is_refused_even_when_systemd_hands_over_a_private_copy() {
    let s = setup();
    let real = s.key.with_file_name("real.key");
    std::fs::rename(&s.key, &real).unwrap();
    std::os::unix::fs::symlink(&real, &s.key).unwrap();
    let e = format!(
        "{:#}",
        key_source(&s.key, Some(s.creds.path())).unwrap_err()
    );
    let p = s.key.display().to_string();
    assert!(
        e.contains(&format!("key file {p} is a symbolic link"))
            && e.contains(&format!("readlink -f {p}")),
        "{e}"
    );
}

#[test]
fn a_key_file_in_a_directory_others_can_write_is_refused_with_its_copy() {
    let s = setup();
    let dir = s.key.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = format!(
        "{:#}",
        key_source(&s.key, Some(s.creds.path())).unwrap_err()
    );
    assert!(e.contains("chmod go-w"), "{e}");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_credential_with_no_file_behind_it_is_read() {
    let s = setup();
    std::fs::remove_file(&s.key).unwrap();
    let src = key_source(&s.key, Some(s.creds.path())).unwrap();
    assert_eq!(src, s.creds.path().join(credential_name(&s.key).unwrap()));
}

/// `systemctl --version`'s first line, as the distros the README names
/// print it.
#[test]
fn the_systemd_version_is_read_from_systemctls_first_line() {
    for (text, v) in [
        ("systemd 245 (245.4-4ubuntu3.24)\n+PAM +AUDIT", Some(245)),
        ("systemd 239 (239-82.el8)\n", Some(239)),
        ("systemd 252 (252.33-1~deb12u1)\n", Some(252)),
        ("", None),
        ("something else 1\n", None),
    ] {
        assert_eq!(super::parse_systemd_version(text), v, "{text:?}");
    }
}

/// Issue 38, item 2: `sudo rlx-agent check` read the key as root and
/// passed, while on systemd before 247 (no LoadCredential=) the packaged
/// agent, a throwaway user, could not read it and restarted every 2 s.
/// As root, check asks whether the service's user could read it.
#[test]
fn before_systemd_247_the_key_must_be_readable_through_the_agents_group() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.path().join("cluster.key");
    std::fs::write(&key, "k\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let gid = std::fs::metadata(&key).unwrap().gid();
    // The tempdir's ancestors (/tmp) are searchable by anyone.
    assert_eq!(
        super::service_read_problem(&key, 252, Some(gid)),
        None,
        "systemd reads it as root (a credential)"
    );
    let problem = super::service_read_problem(&key, 245, Some(gid)).expect("0600: unreadable");
    assert!(
        problem.contains("systemd 245 has no LoadCredential=")
            && problem.contains("chgrp rlx-agent")
            && problem.contains("chmod 640"),
        "{problem}"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(
        super::service_read_problem(&key, 239, Some(gid)),
        None,
        "0640 in its group"
    );
    assert!(
        super::service_read_problem(&key, 239, Some(gid + 1)).is_some(),
        "0640 in another group"
    );
    assert!(
        super::service_read_problem(&key, 241, None)
            .is_some_and(|p| p.contains("groupadd --system rlx-agent")),
        "no group: say how to make it"
    );
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
    assert!(
        super::service_read_problem(&key, 245, Some(gid + 1))
            .is_some_and(|p| p.contains("cannot enter")),
        "a directory it cannot enter"
    );
}
