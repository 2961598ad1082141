//! Bad cluster files get an error that names the file, the line and the key,
//! and says what to do — never a panic, never a silently ignored key. These
//! run the real `rlx-discover` binary, as a user would.

use std::process::Command;

/// Runs `rlx-discover expand` on `text` and returns (exit code, stderr).
fn expand(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(rlx_lab::kit::discover_bin())
        .args(["expand", path.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !err.contains("panicked"),
        "a bad config must never panic:\n{err}"
    );
    (out.status.code().unwrap_or(-1), err)
}

/// Asserts the error is exit 2 and mentions every one of `needles`.
fn assert_error(text: &str, needles: &[&str]) {
    let (code, err) = expand(text);
    assert_eq!(code, 2, "a config error exits 2; stderr:\n{err}");
    assert!(
        err.contains("cluster.toml:"),
        "the file and line are named:\n{err}"
    );
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in:\n{err}");
    }
}

/// Runs `rlx-discover expand` on `text`, requires exit 0 (the runtime
/// loads such a file) and returns stderr.
fn expand_ok(text: &str) -> String {
    let (code, err) = expand(text);
    assert_eq!(
        code, 0,
        "the runtime loads this file, so expand does too:\n{err}"
    );
    err
}

/// The runtime ignores a key it does not read, so a typo there would pass
/// silently: it is a warning with the line and the nearest key.
#[test]
fn a_typo_in_a_node_key_is_a_warning_naming_the_key_its_line_and_the_nearest_key() {
    let err = expand_ok(
        "model = \"m\"\n[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\ndevcie = \"cuda\"\n",
    );
    for n in ["cluster.toml:5", "devcie", "did you mean `device`?"] {
        assert!(err.contains(n), "expected {n:?} in:\n{err}");
    }
}

#[test]
fn a_typo_in_the_discover_stanza_names_the_key() {
    assert_error(
        "[discover]\nssh_host = [\"a\"]\n",
        &["cluster.toml:2", "ssh_host", "ssh_hosts"],
    );
}

#[test]
fn a_port_written_as_text_names_the_key_and_the_fix() {
    assert_error(
        "[discover]\nport = \"abc\"\n",
        &["cluster.toml:2", "`port`", "whole number"],
    );
}

#[test]
fn a_subnet_larger_than_a_16_is_refused_with_the_limit() {
    assert_error(
        "[discover]\nsubnet = \"10.0.0.0/8\"\n",
        &["cluster.toml:2", "subnet", "/16"],
    );
}

#[test]
fn a_subnet_that_is_not_cidr_says_how_to_write_one() {
    assert_error(
        "[discover]\nsubnet = \"10.0.0.0\"\n",
        &["cluster.toml:2", "10.0.0.0/24"],
    );
}

#[test]
fn ssh_hosts_without_ckpt_dir_says_to_add_it() {
    assert_error(
        "# lab\n[discover]\nssh_hosts = [\"node-a\"]\n",
        &["cluster.toml:3", "ssh_hosts", "ckpt_dir"],
    );
}

#[test]
fn an_unknown_device_lists_the_known_ones() {
    assert_error(
        "[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\ndevice = \"quantum\"\n",
        &["cluster.toml:4", "quantum", "cuda"],
    );
}

#[test]
fn a_node_without_a_checkpoint_dir_is_refused_as_the_runtime_refuses_it() {
    assert_error(
        "model = \"m\"\n[[node]]\naddr = \"a:9100\"\n",
        &["cluster.toml:2", "missing field `ckpt_dir`"],
    );
}

#[test]
fn a_node_address_without_a_port_is_a_warning() {
    let err = expand_ok("model = \"m\"\n[[node]]\naddr = \"gpu-a\"\nckpt_dir = \"/m\"\n");
    assert!(
        err.contains("cluster.toml:3") && err.contains("needs a port"),
        "{err}"
    );
}

#[test]
fn two_nodes_with_one_address_are_a_warning() {
    let err = expand_ok(
        "model = \"m\"\n[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\n\n[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\n",
    );
    assert!(
        err.contains("cluster.toml:7") && err.contains("same addr"),
        "{err}"
    );
}

/// The runtime's standby without `standby_for` backs the largest stage.
#[test]
fn a_standby_without_standby_for_is_accepted_as_the_runtime_accepts_it() {
    let err = expand_ok(
        "model = \"m\"\n[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\nrole = \"standby\"\n",
    );
    assert!(!err.contains("standby"), "{err}");
}

/// A file without `model` is refused by the runtime; expand still runs
/// (the model is often chosen later) and says so.
#[test]
fn a_file_without_model_gets_a_warning_that_the_runtime_refuses_it() {
    let err = expand_ok("[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\n");
    assert!(
        err.contains("no `model`") && err.contains("missing field `model`"),
        "{err}"
    );
}

#[test]
fn broken_toml_syntax_points_at_the_line() {
    assert_error("[discover]\nport = 9100\n[[node\n", &["cluster.toml:3"]);
}

#[test]
fn a_missing_file_is_named() {
    let out = Command::new(rlx_lab::kit::discover_bin())
        .args(["expand", "/nonexistent/cluster.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/cluster.toml") && err.contains("cannot read"),
        "{err}"
    );
}

#[test]
fn hand_written_nodes_without_discover_are_printed_unchanged() {
    let text = "model = \"m\"\n# pinned\n[[node]]\naddr = \"a:9100\"   # mine\nckpt_dir = \"/m\"\ndevice = \"cuda\"\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(rlx_lab::kit::discover_bin())
        .args(["expand", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);
}
