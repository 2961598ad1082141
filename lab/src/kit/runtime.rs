//! **The RLX runtime reads what a test's `expand` wrote**: the published
//! runtime crate's own loader (`rlx-runtime-check`, a binary of the
//! workspace's `compat/` package) loads each file and says what it read,
//! and that is compared with what rlx-discover meant, node by node.
//!
//! Every `expand` run through [`super::discover::expand`] is checked this
//! way. A lab file names no `model` (the lab has none to name); the check
//! then assumes one, since rlx-discover warns about a missing model on its
//! own, and judges everything else as written.
//!
//! [`over_ssh`] goes further: the runtime probes (and plans) the nodes of a
//! written file over each node's `ssh`, from a lab host, as it would from
//! the coordinator.

use super::bins::profile_dir;
use super::Proc;
use crate::topology::Lab;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one [`over_ssh`] may take: the runtime probes the nodes one
/// after another, each an ssh login and an agent's `--probe` (well under a
/// second each on a lab link, a few on a loaded 2-core box). A hung ssh
/// must fail the test, not hang it.
pub const OVER_SSH_TIMEOUT: Duration = Duration::from_secs(120);

/// The checker binary of this build, when it was built (`cargo test
/// --workspace` builds it). Without it a check is skipped loudly, and
/// fails under CI.
pub fn check_bin() -> Option<PathBuf> {
    let p = profile_dir().join("rlx-runtime-check");
    if p.is_file() {
        return Some(p);
    }
    let why = format!(
        "{} not built: the RLX runtime cannot check this test's file (`cargo build -p rlx-compat`)",
        p.display()
    );
    assert!(!super::peer::in_ci(), "{why}");
    eprintln!("SKIP runtime check in {}: {why}", super::gate::test_name());
    None
}

/// The runtime's reading of the cluster file at `path` (see the module
/// docs for the model), as `rlx-runtime-check load` prints it.
pub fn load(path: &Path) -> Option<Value> {
    let bin = check_bin()?;
    let out = Command::new(&bin)
        .arg("load")
        .arg(path)
        .arg("--assume-model")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{} printed no JSON ({e}): {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    }))
}

/// Asserts that the runtime loads `text` and reads from it, node by node,
/// the addr, ssh, ckpt_dir, device and precision of `meant` (the `nodes`
/// of rlx-discover's JSON).
pub fn assert_reads_as_meant(text: &str, meant: &Value) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, text).expect("writing the file for the runtime");
    let Some(read) = load(&path) else { return };
    assert_eq!(
        read["ok"], true,
        "the RLX runtime refuses the file rlx-discover wrote: {}\n{text}",
        read["error"]
    );
    let theirs = read["nodes"].as_array().expect("nodes");
    let ours = meant.as_array().expect("rlx-discover's nodes");
    assert_eq!(
        theirs.len(),
        ours.len(),
        "the runtime reads another number of nodes than rlx-discover wrote:\n{text}"
    );
    for (t, o) in theirs.iter().zip(ours) {
        for key in ["addr", "ssh", "ckpt_dir", "device", "precision"] {
            let o_val = if o[key].is_null() && key == "precision" {
                Value::from("bf16")
            } else {
                o[key].clone()
            };
            assert_eq!(
                t[key], o_val,
                "the runtime reads {key} of node {} as {}, rlx-discover meant {}:\n{text}",
                o["addr"], t[key], o_val
            );
        }
    }
}

/// What `rlx-runtime-check SUBCOMMAND FILE REMOTE_BIN` prints (`probe` or
/// `plan`: the runtime's `Cluster::probe`, which runs `ssh HOST
/// "REMOTE_BIN --probe --addr ADDR --ckpt DIR"` for each node with an
/// `ssh`), run in lab host `i` with `ssh_dir` first on its `PATH`: a
/// directory whose `ssh` reaches the lab's servers
/// ([`client_wrapper`](super::sshd::client_wrapper)), since the runtime
/// runs plain `ssh`. `None` when the checker was not built (said loudly;
/// a failure under CI). Panics with its output when it prints no JSON or
/// outlives [`OVER_SSH_TIMEOUT`].
pub fn over_ssh(
    lab: &Lab,
    i: usize,
    subcommand: &str,
    file: &Path,
    remote_bin: &Path,
    ssh_dir: &Path,
) -> Option<Value> {
    let bin = check_bin()?;
    let path = std::env::join_paths(
        std::iter::once(ssh_dir.to_path_buf()).chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        ),
    )
    .expect("PATH entries without colons");
    let mut cmd = Command::new(&bin);
    cmd.arg(subcommand)
        .arg(file)
        .arg(remote_bin)
        .env("PATH", path);
    let p = Proc::spawn(lab, i, cmd);
    p.expect_exit(OVER_SSH_TIMEOUT);
    Some(
        serde_json::from_str(&p.stdout())
            .unwrap_or_else(|e| panic!("{} printed no JSON ({e})", p.label())),
    )
}
