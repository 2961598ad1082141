//! The binary of this package is what the end-to-end tests in the
//! workspace's `tests/` run (`target/<profile>/rlx-discover`); this test
//! makes `cargo test --workspace` build it, and checks that it starts.

#[test]
fn the_binary_starts_and_names_its_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlx-discover"))
        .arg("--version")
        .output()
        .expect("run rlx-discover --version");
    assert!(out.status.success(), "{out:?}");
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.starts_with("rlx-discover "), "{v}");
}
