//! **The workspace's programs, as a test finds them** — `rlx-discover`
//! and `rlx-agent` are binaries of other packages than most tests that run
//! them, so Cargo's `CARGO_BIN_EXE_*` does not name them; they are beside
//! the test's own `deps/` directory, in `target/<profile>/`, once
//! `cargo test --workspace` (or `cargo build --workspace`) built them.

use std::path::PathBuf;

/// `target/<profile>/`, where the running test executable (in its `deps/`)
/// and the workspace's binaries and examples are.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The workspace binary `name` (`rlx-discover`, `rlx-agent`) of this
/// build; panics with what to run when it has not been built.
pub fn workspace_bin(name: &str) -> PathBuf {
    let p = profile_dir().join(name);
    assert!(
        p.is_file(),
        "{} not found: build it first (`cargo build --workspace`, or `cargo test --workspace`)",
        p.display()
    );
    p
}
