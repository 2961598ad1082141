//! **The programs a test runs, as it finds them** — `rlx-discover` and
//! `rlx-agent` are binaries of other packages than most tests that run
//! them, so Cargo's `CARGO_BIN_EXE_*` does not name them; they are beside
//! the test's own `deps/` directory, in `target/<profile>/`, once
//! `cargo test --workspace` (or `cargo build --workspace`) built them. The
//! python peers' scripts are in this crate's `py/`; a test's own helper
//! process is its own executable, re-run for one test ([`rerun`]).

use std::path::PathBuf;
use std::process::Command;

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

/// The `rlx-discover` binary (of the `rlx-discover-cli` package).
pub fn discover_bin() -> PathBuf {
    workspace_bin("rlx-discover")
}

/// The `rlx-agent` binary.
pub fn agent_bin() -> PathBuf {
    workspace_bin("rlx-agent")
}

/// The example program `name` (`browse_once`, `runtime`) of the root
/// package, built beside this test's `deps/`; panics with what to run when
/// it has not been.
pub fn example_bin(name: &str) -> PathBuf {
    let bin = profile_dir().join("examples").join(name);
    assert!(
        bin.is_file(),
        "{} not found: build it first (`cargo build --examples`, or `cargo test`)",
        bin.display()
    );
    bin
}

/// The peer script `name` (`mdns_raw.py`, `mdns_wire.py`, `flood.py`,
/// `zc_browse.py`), run with [`PYTHON`](super::peer::PYTHON) inside a lab
/// host: one copy for every crate's tests.
pub fn script(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("py")
        .join(name);
    assert!(p.is_file(), "no peer script {}", p.display());
    p
}

/// This test executable, set to run only the test `test` of the module
/// `module` (pass `module_path!()`), with its output shown: a test's helper
/// process (an announcer, a responder) that must run inside a lab host
/// while the test itself stays in the root namespace. The harness names a
/// test by its path below the crate, so the crate's own name is dropped.
pub fn rerun(module: &str, test: &str) -> Command {
    let name = match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    };
    let mut cmd = Command::new(std::env::current_exe().expect("current test executable"));
    cmd.args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"]);
    cmd
}
