//! **Whether and how this process can build a lab**: as root, or as root of
//! a user namespace under [`unshare_command`] (see the crate docs,
//! "Privileges").

use crate::cmd::run;
use crate::error::{LabError, Result};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// How this process can build a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabMode {
    /// Directly: root, or root of a user namespace with its own mount
    /// namespace (inside [`unshare_command`]).
    Root,
    /// Not root, but unprivileged user namespaces work: re-run under
    /// [`unshare_command`] and build the lab there.
    Unshare,
}

/// Whether and how this machine can build a lab, or a message saying why not
/// and what to do. Probes once per process (the root path creates and
/// deletes a namespace).
pub fn lab_support() -> Result<LabMode, String> {
    static SUPPORT: OnceLock<Result<LabMode, String>> = OnceLock::new();
    SUPPORT.get_or_init(probe_support).clone()
}

fn probe_support() -> Result<LabMode, String> {
    if cfg!(not(target_os = "linux")) {
        return Err(format!(
            "a lab is made of Linux network namespaces, which {} does not have \
             (the demo and the network tests run on Linux only)",
            std::env::consts::OS
        ));
    }
    if !crate::cmd::on_path("ip") {
        return Err("the `ip` command is missing (sudo apt-get install iproute2)".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { nix::libc::geteuid() } == 0 {
        prepare_netns_dir().map_err(|e| e.to_string())?;
        let probe = format!("rlx-{}-probe", std::process::id());
        run(Command::new("ip").args(["netns", "add", &probe]), None).map_err(|e| {
            format!("cannot create network namespaces as root here: {e}. Containers need CAP_SYS_ADMIN (e.g. docker run --privileged)")
        })?;
        run(Command::new("ip").args(["netns", "del", &probe]), None).map_err(|e| e.to_string())?;
        return Ok(LabMode::Root);
    }
    let mut cmd = unshare_command();
    cmd.arg("true");
    match run(&mut cmd, None) {
        Ok(_) => Ok(LabMode::Unshare),
        Err(e) => Err(format!(
            "not root, and unprivileged user namespaces do not work here ({e}). \
             Run as root, or allow them: `sysctl kernel.unprivileged_userns_clone=1` \
             (Debian before 11), `sysctl user.max_user_namespaces=15000`, or \
             `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+)"
        )),
    }
}

/// `unshare --user --map-root-user --net --mount --`: append a program and
/// its arguments to run it as root of a fresh user namespace, in an empty
/// network namespace and a private mount namespace, where [`Lab::new`](crate::Lab::new) works
/// without real root. Used by `rlx-discover demo` to re-run itself.
pub fn unshare_command() -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--net", "--mount", "--"]);
    cmd
}

/// Whether this process is in a user namespace other than the initial one
/// (whose `uid_map` maps the whole range: `0 0 4294967295`).
pub fn in_user_namespace() -> bool {
    fs::read_to_string("/proc/self/uid_map")
        .map(|m| {
            let fields: Vec<&str> = m.split_whitespace().collect();
            fields != ["0", "0", "4294967295"]
        })
        .unwrap_or(false)
}

/// Inside a user namespace, `/run/netns` belongs to the real root and is not
/// writable: mount a private tmpfs on it (or on `/run` if it does not exist)
/// so that `ip netns add` can create its files. Needs the private mount
/// namespace that [`unshare_command`] gives. Runs once per process.
pub(crate) fn prepare_netns_dir() -> Result<()> {
    static PREPARED: OnceLock<Result<(), String>> = OnceLock::new();
    PREPARED
        .get_or_init(|| {
            if !in_user_namespace() {
                return Ok(());
            }
            let tmpfs = |dir: &str| run(Command::new("mount").args(["-t", "tmpfs", "rlx-lab", dir]), None);
            let done = if Path::new("/run/netns").is_dir() {
                tmpfs("/run/netns")
            } else {
                tmpfs("/run").and_then(|_| {
                    fs::create_dir("/run/netns").map(|_| String::new()).map_err(|source| LabError::Io {
                        what: "cannot create",
                        path: "/run/netns".into(),
                        source,
                    })
                })
            };
            done.map(|_| ()).map_err(|e| {
                format!("inside a user namespace /run/netns must be a private tmpfs, and mounting one failed: {e}. Run under `unshare --user --map-root-user --net --mount`")
            })
        })
        .clone()
        .map_err(LabError::Unsupported)
}
