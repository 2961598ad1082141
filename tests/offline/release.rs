//! **`.ci/release` builds where cargo builds**: with `CARGO_TARGET_DIR` set
//! (a build box's shared cache, a CI cache), cargo put the binaries there
//! while the script looked under `./target` and failed with "No such file
//! or directory" (issue 38, item 9). The script now resolves the target
//! directory once (`.ci/target-dir`) and hands it to every cargo build.
//! These tests read the script and run the resolver, not the release (which
//! downloads zig and takes minutes).

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target_dir_of DIR VALUE` from `.ci/target-dir`, run by bash.
fn resolve(dir: &str, value: Option<&str>) -> String {
    let script = format!(
        ". {}/.ci/target-dir && target_dir_of \"$1\" \"${{2:-}}\"",
        repo().display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script, "resolve", dir]);
    if let Some(v) = value {
        cmd.arg(v);
    }
    let out = cmd.output().expect("bash runs");
    assert!(
        out.status.success(),
        "target_dir_of failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

#[test]
fn the_release_builds_into_cargo_target_dir_when_it_is_set_and_into_target_otherwise() {
    assert_eq!(resolve("/src/rlx", None), "/src/rlx/target", "unset");
    assert_eq!(
        resolve("/src/rlx", Some("")),
        "/src/rlx/target",
        "set but empty"
    );
    assert_eq!(
        resolve("/src/rlx", Some("/cache/cargo/")),
        "/cache/cargo",
        "an absolute CARGO_TARGET_DIR is used as it is"
    );
    assert_eq!(
        resolve("/src/rlx", Some("../shared-target")),
        "/src/rlx/../shared-target",
        "a relative one is taken from the directory cargo runs in, as cargo takes it"
    );
}

/// Every cargo build the release makes is told the directory, and every
/// path into a build starts from it: a literal `./target` anywhere in the
/// commands is the bug coming back.
#[test]
fn every_build_of_the_release_names_the_resolved_target_dir_and_no_path_assumes_target() {
    let script = std::fs::read_to_string(repo().join(".ci/release")).unwrap();
    let code: Vec<&str> = script
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    for (i, line) in code.iter().enumerate() {
        assert!(
            !line.contains("$PWD/target") && !line.contains(" target/"),
            ".ci/release assumes ./target: {line:?} (use $target_dir)"
        );
        let builds = line.contains(" zigbuild --") || line.contains("cargo run");
        if builds {
            // A command continued over lines: the line and those after it up
            // to the first without a trailing backslash.
            let command: String = code[i..]
                .iter()
                .take_while({
                    let mut done = false;
                    move |l| !std::mem::replace(&mut done, !l.trim_end().ends_with('\\'))
                })
                .copied()
                .collect();
            assert!(
                command.contains("--target-dir \"$target_dir"),
                ".ci/release builds without --target-dir \"$target_dir\": {command}"
            );
        }
    }
    assert!(
        script.contains("target_dir=$(target_dir_of \"$PWD\" \"${CARGO_TARGET_DIR:-}\")"),
        ".ci/release no longer resolves its target directory from CARGO_TARGET_DIR"
    );
}
