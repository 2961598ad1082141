//! The pins file's protections (issue 37, item 7): it is a trust store, so
//! a planted link, a file others can write or own, and a directory others
//! can change are refused on load and on write, each naming the file and
//! the fix.

use super::*;
use rlx_proto::identity::NodeKey;
use std::os::unix::fs::PermissionsExt;

const ID: &str = "0123456789abcdef";

fn k(b: u8) -> NodePublicKey {
    NodeKey::from_seed([b; 32]).public()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn unsafe_error(e: PinsError) -> String {
    assert!(
        matches!(e, PinsError::Checked(FileError::Unsafe { .. })),
        "{e}"
    );
    e.to_string()
}

/// Guards against writing through a link planted where the pins file
/// goes (a root `expand` in a directory a user can write wrote wherever
/// the link pointed): refused on load, and on write with the target
/// untouched.
#[test]
fn a_symlink_planted_as_the_pins_file_is_refused_on_load_and_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.pins");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();

    let mut pins = Pins::load(&path).unwrap();
    pins.pin(ID, k(1), "gpu-a");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let e = unsafe_error(pins.save(&[]).unwrap_err());
    let p = path.display().to_string();
    assert!(
        e.contains(&format!("pins file {p} is a symbolic link"))
            && e.contains(&format!("readlink -f {p}")),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_symlink());

    let e = unsafe_error(Pins::load(&path).unwrap_err());
    assert!(e.contains("is a symbolic link"), "{e}");
}

/// Guards against a pins file others can write: they would choose which
/// key each machine is.
#[test]
fn a_pins_file_writable_by_group_or_others_is_refused_naming_it_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.pins");
    let mut pins = Pins::load(&path).unwrap();
    pins.pin(ID, k(1), "gpu-a");
    pins.save(&[]).unwrap();
    for mode in [0o664, 0o646] {
        chmod(&path, mode);
        let e = unsafe_error(Pins::load(&path).unwrap_err());
        assert!(
            e.contains(&format!("mode {mode:04o}"))
                && e.contains(&format!("chmod go-w {}", path.display())),
            "{e}"
        );
        assert!(pins.save(&[]).is_err(), "refused on write too");
    }
    chmod(&path, 0o644);
    assert!(Pins::load(&path).is_ok(), "others may read public keys");
}

/// Guards against a pins file in a directory others can change: they
/// could replace it between two runs (a sticky one, such as /tmp, is
/// fine: there only the file's owner may replace it).
#[test]
fn a_pins_file_in_a_directory_others_can_write_is_refused_unless_it_is_sticky() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.pins");
    let mut pins = Pins::load(&path).unwrap();
    pins.pin(ID, k(1), "gpu-a");
    chmod(dir.path(), 0o777);
    let e = unsafe_error(pins.save(&[]).unwrap_err());
    assert!(
        e.contains("which group or others can write (mode 0777)")
            && e.contains(&format!("chmod go-w {}", dir.path().display())),
        "{e}"
    );
    assert!(!path.exists(), "nothing created there");
    chmod(dir.path(), 0o1777);
    pins.save(&[]).unwrap();
    assert!(Pins::load(&path).unwrap().get(ID).is_some());
    chmod(dir.path(), 0o700);
}

/// Guards against a pins file another user placed: a root coordinator
/// would take their pins. Needs root to make a file another user owns.
#[test]
fn a_pins_file_owned_by_another_user_is_refused_naming_it_and_the_fix() {
    if !nix::unistd::geteuid().is_root() {
        let why = "a_pins_file_owned_by_another_user_is_refused: needs root to chown a file";
        assert!(!rlx_lab::kit::peer::in_ci(), "{why}; CI runs as root");
        rlx_lab::kit::peer::skip(why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.pins");
    let mut pins = Pins::load(&path).unwrap();
    pins.pin(ID, k(1), "gpu-a");
    pins.save(&[]).unwrap();
    std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
    let e = unsafe_error(Pins::load(&path).unwrap_err());
    assert!(
        e.contains("belongs to uid 65534") && e.contains(&format!("chown 0 {}", path.display())),
        "{e}"
    );
    std::os::unix::fs::chown(&path, Some(0), None).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(65534), None).unwrap();
    let e = unsafe_error(Pins::load(&path).unwrap_err());
    assert!(
        e.contains(&format!(
            "is in {}, which belongs to uid 65534",
            dir.path().display()
        )) && e.contains("pins_file"),
        "{e}"
    );
}
