//! The RLX runtime's own files through `expand`: its example cluster file
//! and the files of its config tests (copied from the crate into
//! `compat/fixtures/runtime/`, where `compat/` checks they are the
//! crate's), and the probe JSON its `probe_local` prints. The runtime
//! itself (`rlx-runtime-check`, built from the published crate) judges
//! every file that comes out.

use super::fakessh::{caps, Cluster};
use rlx_lab::kit::runtime;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/fixtures/runtime")
}

fn fixtures() -> Vec<(String, String)> {
    let mut v: Vec<_> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The runtime's example names two ssh hosts: both answer, both are
/// appended after every byte of the example, and the runtime reads the
/// result with the hand-written nodes first and the found ones after,
/// each with its `ssh`.
#[test]
fn the_runtimes_example_file_is_expanded_after_every_one_of_its_bytes_and_loads_in_the_runtime() {
    let example = std::fs::read_to_string(fixture_dir().join("cluster.example.toml")).unwrap();
    let c = Cluster::new();
    c.host("node-b", &caps("node-b", "00000000000000b1", "cuda", 24));
    c.host("node-c", &caps("node-c", "00000000000000c1", "rocm", 16));
    let path = c.write("cluster.toml", &example);
    let run = c.expand(&["cluster.toml", "--write"]);
    run.expect_code(0);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.starts_with(&example),
        "the example's bytes were changed:\n{after}"
    );
    let Some(read) = runtime::load(&path) else {
        return;
    };
    assert_eq!(read["ok"], true, "{read}");
    assert!(
        read.get("model_assumed").is_none(),
        "the example names its model"
    );
    let nodes: Vec<(String, String, String)> = read["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["addr"].as_str().unwrap().into(),
                n["ssh"].as_str().unwrap_or("").into(),
                n["device"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("10.0.0.5:9100".into(), "workstation".into(), "cuda".into()),
            ("10.0.0.9:9100".into(), "spare-1".into(), "cuda".into()),
            ("node-b:9100".into(), "node-b".into(), "cuda".into()),
            ("node-c:9100".into(), "node-c".into(), "rocm".into()),
        ]
    );
    // A second run finds the same machines and changes nothing.
    c.expand(&["cluster.toml", "--write"]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), after);
}

/// Each fixture of the runtime's config tests: one the runtime accepts is
/// printed back byte for byte and left as it is by `--write` (its ssh
/// host does not answer here); one it refuses is refused with the line
/// and the runtime's words, and nothing is written.
#[test]
fn every_fixture_of_the_runtimes_config_tests_is_kept_byte_for_byte_or_refused_in_its_words() {
    let c = Cluster::new();
    for (name, text) in fixtures() {
        if name == "cluster.example.toml" {
            continue;
        }
        let path = c.write("cluster.toml", &text);
        let Some(read) = runtime::load(&path) else {
            return;
        };
        let run = c.expand(&["cluster.toml", "--write"]);
        if read["ok"] == true {
            assert_ne!(
                run.code(),
                2,
                "{name}: the runtime accepts it\n{}",
                run.dump()
            );
            let print = c.expand(&["cluster.toml"]);
            assert_eq!(
                print.stdout(),
                text,
                "{name}: printed back changed\n{}",
                print.dump()
            );
        } else {
            assert_eq!(
                run.code(),
                2,
                "{name}: the runtime refuses it\n{}",
                run.dump()
            );
            let err = run.stderr();
            assert!(err.contains("cluster.toml:5"), "{name}: the line\n{err}");
            assert!(
                err.contains("unknown device 'quantum'")
                    || err.contains("unknown precision `f7ish`"),
                "{name}: the runtime's words\n{err}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "{name} was changed"
        );
    }
}

/// `ssh_hosts` reads what the runtime's own probe prints (a host whose
/// `remote_bin` is the RLX worker, which self-reports with it).
#[test]
fn the_probe_json_the_runtime_prints_is_accepted_by_ssh_hosts() {
    let Some(bin) = runtime::check_bin() else {
        return;
    };
    let out = Command::new(bin)
        .args(["probe-local", "box:9100", "/"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let json = String::from_utf8(out.stdout).unwrap();
    let c = Cluster::new();
    c.host("box", &json);
    c.write(
        "cluster.toml",
        "model = \"m\"\n[discover]\nmdns = false\nssh_hosts = [\"box\"]\nckpt_dir = \"/m\"\n",
    );
    let run = c.expand(&["cluster.toml", "--format", "json"]);
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let n = &v["nodes"][0];
    assert_eq!(
        (n["addr"].as_str(), n["ssh"].as_str(), n["device"].as_str()),
        (Some("box:9100"), Some("box"), Some("cpu")),
        "{v}"
    );
    runtime::assert_reads_as_meant(v["file"]["text"].as_str().unwrap(), &v["nodes"]);
}

/// `--check-ssh` tries every node's `ssh` as the runtime will, and names
/// the one that fails and why, with exit 1.
#[test]
fn check_ssh_names_the_node_the_runtime_cannot_reach_and_why() {
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    c.write(
        "cluster.toml",
        "model = \"m\"\n[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n\n\
         [[node]]\naddr = \"10.9.9.9:9100\"\nssh = \"nope\"\nckpt_dir = \"/m\"\n",
    );
    let run = c.expand(&["cluster.toml", "--check-ssh"]);
    run.expect_code(1);
    let err = run.stderr();
    assert!(err.contains("ssh check: 1 of 2 node(s) answer"), "{err}");
    assert!(err.contains("ok   gpu-a:9100 (ssh gpu-a)"), "{err}");
    assert!(
        err.contains("FAIL 10.9.9.9:9100 (ssh nope): the name does not resolve"),
        "{err}"
    );
    c.write(
        "cluster.toml",
        "model = \"m\"\n[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n",
    );
    c.expand(&["cluster.toml", "--check-ssh"]).expect_code(0);
}
