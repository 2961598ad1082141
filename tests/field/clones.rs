//! **Machines cloned from one image** (docs/protocol.md, "Names: unique by
//! construction"): many boxes with one host name (`ubuntu`) and agents
//! started without `--name`. The agents' mDNS host names are unique by
//! construction (`<host>-<id digits>.local.`), so no SRV target collides
//! and nothing needs renaming: N machines give N nodes, every run, each
//! with the host name `ubuntu` read back.
//!
//! Everything runs inside namespaces built by [`rlx_lab`].

use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(30);

/// A clone on `host`: host name `ubuntu`, its own node id, no `--name`.
fn clone(lab: &Lab, host: usize, dir: &Path) -> Proc {
    let caps = dir.join(format!("clone{host}.json"));
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{:06x}c10e{host:06x}","hostname":"ubuntu","os":"linux","arch":"x86_64",
               "cores":8,"ram_total":68719476736,"ram_avail":60000000000,
               "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#,
            // Node ids are hashes of machine ids (distinct from the first
            // digit on); these differ in their first six.
            0x5f0c10 + host
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file").arg(&caps).env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

#[test]
fn machines_cloned_from_one_image_give_one_node_each_every_run() {
    let Some(labs) = require_lab() else { return };
    let n = 4;
    let lab = labs.hosts(n + 1);
    let dir = tempfile::tempdir().unwrap();
    let clones: Vec<Proc> = (1..=n).map(|h| clone(&lab, h, dir.path())).collect();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\n").unwrap();
    let mut want: Vec<String> = (1..=n)
        .map(|h| format!("{}:9100", lab.host(h).ip))
        .collect();
    want.sort();
    for run in 0..3 {
        let out = lab
            .command(0, discover_bin())
            .args(["expand", "--format", "json"])
            .arg(&cfg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("run {run}: no JSON ({e}):\n{err}"));
        let added = v["report"]["added"].as_array().unwrap();
        let mut addrs: Vec<String> = added
            .iter()
            .map(|a| a["addr"].as_str().unwrap().to_string())
            .collect();
        addrs.sort();
        assert_eq!(addrs, want, "run {run}: every clone, once:\n{err}");
        for a in added {
            assert_eq!(a["hostname"], "ubuntu", "run {run}: {a:#}");
        }
        assert!(
            v["report"]["failed"].as_array().unwrap().is_empty()
                && v["report"]["clashes"].as_array().unwrap().is_empty(),
            "run {run}: nothing refused or clashing:\n{err}"
        );
        assert_eq!(out.status.code(), Some(0), "run {run}:\n{err}");
    }
    // The root cause guarded against: clones claiming one `<host>.local.`
    // made mdns-sd rename host names, and its renamed SRV answers were not
    // consistent. With unique host names nothing needs renaming.
    for c in &clones {
        assert!(
            !c.stderr().contains("name conflict: host name"),
            "no host name was renamed:\n{}",
            c.stderr()
        );
    }
}
