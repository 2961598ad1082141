//! **The RLX runtime reads what a test's `expand` wrote**: the published
//! runtime crate's own loader (`rlx-runtime-check`, a binary of the
//! workspace's `compat/` package) loads each file and says what it read,
//! and that is compared with what rlx-discover meant, node by node.
//!
//! Every `expand` run through [`super::discover::expand`] is checked this
//! way. A lab file names no `model` (the lab has none to name); the check
//! then assumes one, since rlx-discover warns about a missing model on its
//! own, and judges everything else as written.

use super::bins::profile_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

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
