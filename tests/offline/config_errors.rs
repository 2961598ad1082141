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
        err.contains("/nonexistent/cluster.toml") && err.contains("cannot be read"),
        "{err}"
    );
    assert_eq!(
        err.matches("No such file").count(),
        1,
        "the cause is said once, not again as its own cause:\n{err}"
    );
}

/// Runs `rlx-discover ARGS` with the namespace guard on (nothing here
/// may reach the network) and returns (exit code, stderr).
fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(rlx_lab::kit::discover_bin())
        .args(args)
        .env("RLX_NETNS_GUARD", "1")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn a_directory_given_as_the_cluster_file_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run(&["expand", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.matches("directory").count(), 1, "{err}");
}

/// A 200 MB cluster file took 985 MB of memory: a file over the cap is
/// refused before it is parsed, with its size and the cap.
#[test]
fn a_cluster_file_over_the_cap_is_refused_naming_its_size_and_the_cap() {
    let cap = rlx_proto::configfile::MAX_CONFIG_FILE_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, "#".repeat(cap as usize + 1)).unwrap();
    let (code, err) = run(&["expand", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    for needle in [
        "cluster.toml".to_string(),
        format!("is {} bytes", cap + 1),
        format!("{cap}-byte cap"),
    ] {
        assert!(err.contains(&needle), "{needle:?} in:\n{err}");
    }
}

/// `[discovr]`, `[[nodes]]` and `[discover]` keys above the header made
/// `expand` print "0 node(s) added" and exit 0 without a word.
#[test]
fn a_misspelt_table_or_a_stray_discover_key_is_warned_with_its_line_and_the_name_meant() {
    let err = expand_ok(
        "model = \"m\"\nbrowse_ms = 100\n[discovr]\nmdns = false\n[[nodes]]\naddr = \"a:9100\"\n",
    );
    for needle in [
        "cluster.toml:2:1: `browse_ms` is a [discover] key written at the top level",
        "cluster.toml:3:2: [discovr]",
        "did you mean [discover]?",
        "cluster.toml:5:3: [[nodes]]",
        "did you mean [[node]]?",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
    let quiet = expand_ok(
        "model = \"m\"\nseq = 8\nreserve_ram_gb = 4.0\n[placement]\npolicy = \"auto\"\n\
         [[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\n",
    );
    assert!(
        !quiet.contains("did you mean") && !quiet.contains("top level"),
        "the runtime's own keys are no typos:\n{quiet}"
    );
}

/// A bad `--key-file` was reported as "[discover] key_file", sending the
/// user to a file that names no key.
#[test]
fn a_key_file_flag_problem_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, "model = \"m\"\n[discover]\nmdns = false\n").unwrap();
    let key = dir.path().join("missing.key");
    let (code, err) = run(&[
        "expand",
        path.to_str().unwrap(),
        "--key-file",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key-file: "), "{err}");
    assert!(!err.contains("[discover] key_file"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

/// rlx-discover showed no column and no caret where the agent did, and
/// echoed a 200 KB line whole.
#[test]
fn an_error_shows_line_column_and_caret_and_a_long_line_is_cut() {
    let (_, err) = expand("[discover]\nport = 70000\n");
    assert!(err.contains("cluster.toml:2:8:"), "{err}");
    assert!(
        err.contains("1-65535") && !err.contains("without quotes"),
        "{err}"
    );
    assert!(err.contains("|        ^^^^^"), "{err}");
    let long = format!("[discover]\nssh_hosts = [{}7]\n", "\"h\", ".repeat(40_000));
    let (code, err) = expand(&long);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.len() < 2000,
        "the line is cut, not echoed: {} bytes",
        err.len()
    );
    assert!(err.contains('…'), "{err}");
}

/// serde's "invalid type: ..." did not say which brackets to write.
#[test]
fn discover_written_as_a_list_of_tables_says_it_is_a_single_table() {
    assert_error(
        "model = \"m\"\n[[discover]]\nmdns = false\n",
        &["cluster.toml:2", "single [discover] table"],
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
