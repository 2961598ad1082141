//! The runtime versions agree on every file of the corpus: the seed's
//! (0.2.16, built by `compat/v0216/`) and the pinned newest (0.2.19) load,
//! refuse and read the same cluster files and probe lines. `.ci/run`
//! builds the 0.2.16 checker and names it in `RLX_RUNTIME_CHECK_0216`;
//! elsewhere this test says SKIP.

use std::path::{Path, PathBuf};
use std::process::Command;

fn checker_0216() -> Option<PathBuf> {
    match std::env::var_os("RLX_RUNTIME_CHECK_0216") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must build compat/v0216 and set RLX_RUNTIME_CHECK_0216"
            );
            eprintln!(
                "SKIP the_seeds_runtime_and_the_newest_read_every_file_alike: set \
                 RLX_RUNTIME_CHECK_0216 to a build of compat/v0216 (see .ci/run)"
            );
            None
        }
    }
}

/// The corpus: the runtime's own fixtures and this repository's golden
/// files and the docs' examples.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in ["compat/fixtures/runtime", "tests/golden"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

fn run(bin: &Path, args: &[&str], file: &Path) -> String {
    let out = Command::new(bin).args(args).arg(file).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_seeds_runtime_and_the_newest_read_every_file_alike() {
    let Some(old) = checker_0216() else { return };
    let new = rlx_lab::kit::bins::profile_dir().join("rlx-runtime-check");
    let v = Command::new(&old).arg("version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("0.2.16"),
        "{old:?} is not the 0.2.16 build"
    );
    for f in corpus() {
        assert_eq!(
            run(&old, &["load"], &f),
            run(&new, &["load"], &f),
            "{}",
            f.display()
        );
    }
}
