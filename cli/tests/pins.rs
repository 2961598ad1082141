//! `rlx-discover pins` against the real binary: `forget` drops one pin
//! from the cluster file's pins file (atomically, keeping the others) and
//! `list` shows what is left.

use rlx_proto::identity::NodeKey;
use std::process::Command;

const X: &str = "0123456789abcdef";
const Y: &str = "fedcba9876543210";

fn run(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx-discover"))
        .args(args)
        .output()
        .expect("run rlx-discover");
    eprintln!(
        "rlx-discover {args:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn pins_forget_drops_one_pin_of_the_cluster_files_pins_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, "[discover]\n").unwrap();
    let (kx, ky) = (
        NodeKey::from_seed([1; 32]).public(),
        NodeKey::from_seed([2; 32]).public(),
    );
    let pins = dir.path().join("cluster.pins");
    std::fs::write(
        &pins,
        format!("{X} ed25519 {kx} # x-host first seen 2026-12-01\n{Y} ed25519 {ky} # y-host\n"),
    )
    .unwrap();
    let c = config.to_str().unwrap();

    let listed = run(&["pins", "list", "--config", c]);
    assert!(listed.status.success());
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains(&format!("{X}  {}  x-host first seen", kx.fingerprint())),
        "{text}"
    );

    let forgot = run(&["pins", "forget", X, "--config", c]);
    assert!(forgot.status.success());
    assert!(String::from_utf8_lossy(&forgot.stderr).contains(&kx.fingerprint()));
    let left = std::fs::read_to_string(&pins).unwrap();
    assert!(!left.contains(X), "x is forgotten: {left}");
    assert!(
        left.contains(&format!("{Y} ed25519 {ky} # y-host")),
        "y is kept: {left}"
    );

    let again = run(&["pins", "forget", X, "--pins-file", pins.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "nothing left to forget");
    let bad = run(&["pins", "forget", "not-an-id", "--config", c]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
}
