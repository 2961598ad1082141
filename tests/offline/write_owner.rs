//! `expand --write` run by a user who may not change everything (issue 37,
//! item 8, tried as a new user would, as `nobody`): a rename needs only
//! the directory, so the write replaced a 0444 file, and a root-owned file
//! in a writable directory, which then belonged to nobody; exit 0 and one
//! WARN line. Now a file the user may not write, or could not give back to
//! its owner, is refused with the reason and left as it was, and a file it
//! may write keeps its owner, mode and ACL, and stderr says so.
//!
//! The binary runs as uid 65534 through `setpriv`, so the tests need root
//! (CI is root); elsewhere they say SKIP (under `CI=true` they fail).

use crate::fakessh::{caps, mode, Cluster};
use rlx_lab::kit::peer::{in_ci, on_path, require, skip, Peer};
use rlx_lab::kit::Run;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;
const CONFIG: &str = "[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n";

/// A cluster in a directory anyone may write (the setting of the report:
/// a shared directory), or `None` after a SKIP line when this process
/// cannot run the binary as another user.
fn shared_cluster(test: &str) -> Option<Cluster> {
    let why = if !nix::unistd::geteuid().is_root() {
        Some("needs root, to run rlx-discover as uid 65534 (sudo, or CI)")
    } else if !on_path("setpriv") {
        Some("needs setpriv (sudo apt-get install util-linux)")
    } else {
        None
    };
    if let Some(why) = why {
        assert!(!in_ci(), "{test}: {why}; CI runs as root with util-linux");
        skip(&format!("{test}: {why}"));
        return None;
    }
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    for d in [c.dir.path().to_path_buf(), c.path("hosts")] {
        chmod(&d, 0o777);
    }
    Some(c)
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
}

/// `rlx-discover expand cluster.toml --write` as uid and gid 65534, no
/// supplementary groups.
fn write_as_nobody(c: &Cluster) -> Run {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(rlx_lab::kit::discover_bin())
        .args(["expand", "cluster.toml", "--write", "--no-mdns"]);
    c.configure(&mut cmd);
    Run::of(cmd)
}

/// The file as it was: bytes, owner, group, mode.
fn state(p: &Path) -> (Vec<u8>, u32, u32, u32) {
    let m = std::fs::metadata(p).unwrap();
    (std::fs::read(p).unwrap(), m.uid(), m.gid(), mode(p))
}

#[test]
fn expand_write_refuses_a_file_the_user_may_not_write_and_leaves_it_as_it_was() {
    let Some(c) = shared_cluster("expand_write_refuses_a_file_the_user_may_not_write") else {
        return;
    };
    let p = c.write("cluster.toml", CONFIG);
    // Its own read-only file, then root's 0644 file in the shared directory.
    for (uid, gid, m) in [(NOBODY, NOBODY, 0o444), (0, 0, 0o644)] {
        chown(&p, uid, gid);
        chmod(&p, m);
        let before = state(&p);
        let r = write_as_nobody(&c);
        r.expect_code(2);
        assert!(
            r.stderr().contains(&format!(
                "cluster.toml is not writable by you (mode {m:04o}, owner uid {uid}; you are uid \
                 65534), so it was not replaced and nothing was written"
            )),
            "{}",
            r.dump()
        );
        assert_eq!(state(&p), before, "left as it was: {}", r.dump());
    }
}

#[test]
fn expand_write_refuses_a_file_it_could_not_give_back_to_its_owner_or_group() {
    let Some(c) = shared_cluster("expand_write_refuses_a_file_it_could_not_give_back") else {
        return;
    };
    let p = c.write("cluster.toml", CONFIG);
    // Root's file anyone may write; nobody's own file in root's group.
    for (uid, gid, m) in [(0, 0, 0o666), (NOBODY, 0, 0o664)] {
        chown(&p, uid, gid);
        chmod(&p, m);
        let before = state(&p);
        let r = write_as_nobody(&c);
        r.expect_code(2);
        assert!(
            r.stderr().contains(&format!(
                "cluster.toml belongs to uid {uid} gid {gid}; replacing it would make it yours \
                 (uid 65534), and you may not give it back"
            )),
            "{}",
            r.dump()
        );
        assert_eq!(state(&p), before, "left as it was: {}", r.dump());
    }
}

#[test]
fn expand_write_keeps_the_owner_mode_and_acl_of_a_file_it_may_write_and_says_so() {
    let test = "expand_write_keeps_the_owner_mode_and_acl_of_a_file_it_may_write";
    let Some(c) = shared_cluster(test) else {
        return;
    };
    let acl = require(test, &[Peer::Acl]);
    let p = c.write("cluster.toml", CONFIG);
    chown(&p, NOBODY, NOBODY);
    chmod(&p, 0o640);
    let getfacl = || {
        let out = Command::new("getfacl")
            .args(["-cp"])
            .arg(&p)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    if acl {
        let set = Command::new("setfacl")
            .args(["-m", "u:daemon:r"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(set.success(), "setfacl on {}", p.display());
    }
    // Without acl installed (the SKIP above) getfacl is not run at all: the
    // owner and mode are still checked.
    let acl_before = if acl { getfacl() } else { String::new() };
    let r = write_as_nobody(&c);
    r.expect_code(0);
    let (text, uid, gid, m) = state(&p);
    assert!(
        String::from_utf8_lossy(&text).contains("addr = \"gpu-a:9100\""),
        "written: {}",
        r.dump()
    );
    assert_eq!((uid, gid, m), (NOBODY, NOBODY, 0o640), "{}", r.dump());
    let said = format!(
        "wrote cluster.toml: 1 node(s) appended, 0 removed (replaced atomically; kept mode 0640, \
         owner uid 65534 gid 65534{})",
        if acl { " and its ACL" } else { "" }
    );
    assert!(r.stderr().contains(&said), "{said}\n{}", r.dump());
    if acl {
        assert!(acl_before.contains("user:daemon:r--"), "{acl_before}");
        assert_eq!(getfacl(), acl_before, "the ACL is kept");
    }
}
