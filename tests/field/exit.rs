//! **Strangers do not fail the run** (docs/guide.md, "Exit codes"): on a
//! shared LAN a neighbour's agent of another cluster is seen on every run.
//! It is reported, on stderr and in the JSON (`concern: "stranger"`), but
//! `expand` exits 0; `--strict` makes it exit 1. An announcement that claims
//! the address of a node in the file is the user's concern and exits 1.
//!
//! Everything runs inside namespaces built by [`rlx_lab`].

use rlx_lab::kit::discover;
use rlx_lab::kit::{agent_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(30);

/// An agent on `host` announcing cluster `cluster` as `name`.
fn agent(lab: &Lab, host: usize, name: &str, cluster: &str, id: u32, dir: &Path) -> Proc {
    let caps = dir.join(format!("{name}.json"));
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{id:016x}","hostname":"{name}","os":"linux","arch":"x86_64","cores":8,
               "ram_total":68719476736,"ram_avail":60000000000,
               "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", name, "--cluster", cluster])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// [`kit::expand`], as (exit code, JSON, stderr).
fn expand(lab: &Lab, cfg: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let e = discover::expand(lab, cfg, extra);
    (e.code, e.json, e.stderr)
}

fn failed(v: &Value) -> Vec<Value> {
    v["report"]["failed"].as_array().unwrap().clone()
}

#[test]
fn an_agent_of_another_cluster_is_reported_but_does_not_fail_the_run_unless_strict() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let _ours = agent(&lab, 1, "ours", "lab", 1, dir.path());
    let _theirs = agent(&lab, 2, "theirs", "other", 2, dir.path());
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\ncluster = \"lab\"\n").unwrap();

    let (code, v, err) = expand(&lab, &cfg, &[]);
    let added: Vec<&str> = v["report"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["host"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["ours"], "{v:#}");
    let f = failed(&v);
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["host"], "theirs");
    assert_eq!(f[0]["concern"], "stranger", "{v:#}");
    assert!(
        err.contains("~ theirs") && err.contains("1 stranger(s) refused"),
        "the stranger is reported on a line of its own: {err}"
    );
    assert_eq!(code, Some(0), "a stranger does not fail the run:\n{err}");

    let (code, _, err) = expand(&lab, &cfg, &["--strict"]);
    assert_eq!(code, Some(1), "--strict counts every refusal:\n{err}");
}

#[test]
fn an_announcement_claiming_the_address_of_a_node_in_the_file_fails_the_run() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let _ours = agent(&lab, 1, "ours", "lab", 1, dir.path());
    // The file holds host 2's address as a hand-written node; what answers
    // there now belongs to another cluster.
    let _other = agent(&lab, 2, "theirs", "other", 2, dir.path());
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "[discover]\ncluster = \"lab\"\n\n[[node]]\naddr = \"{}:9100\"\nckpt_dir = \"/m\"\n",
            lab.host(2).ip
        ),
    )
    .unwrap();
    let (code, v, err) = expand(&lab, &cfg, &[]);
    let f = failed(&v);
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["concern"], "yours", "{v:#}");
    assert!(
        f[0]["reason"]
            .as_str()
            .unwrap()
            .contains("claims the address of [[node]]"),
        "{v:#}"
    );
    assert!(err.contains("! theirs"), "{err}");
    assert_eq!(code, Some(1), "{err}");
}

/// Guards against blocked multicast going unreported: an agent whose
/// multicast is blocked, found by the subnet scan, used to be listed with
/// no word that mDNS never heard it, and the browse still claimed every
/// agent answered.
#[test]
fn an_agent_found_by_the_scan_but_not_heard_over_mdns_is_named_on_a_line_of_its_own() {
    if !rlx_lab::kit::peer::require(
        "an_agent_found_by_the_scan_but_not_heard_over_mdns_is_named_on_a_line_of_its_own",
        &[rlx_lab::kit::peer::Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let _heard = agent(&lab, 1, "heard", "lab", 1, dir.path());
    let _muted = agent(&lab, 2, "muted", "lab", 2, dir.path());
    // Host 2's own firewall drops mDNS both ways; its handshake port is open.
    lab.nft(
        2,
        "add table inet fw\n\
         add chain inet fw input { type filter hook input priority 0; policy accept; }\n\
         add chain inet fw output { type filter hook output priority 0; policy accept; }\n\
         add rule inet fw input udp dport 5353 drop\n\
         add rule inet fw input udp sport 5353 drop\n\
         add rule inet fw output udp dport 5353 drop\n\
         add rule inet fw output udp sport 5353 drop\n",
    )
    .unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "[discover]\ncluster = \"lab\"\nsubnet = \"{}/32\"\n",
            lab.host(2).ip
        ),
    )
    .unwrap();
    let (code, v, err) = expand(&lab, &cfg, &[]);
    let muted = format!("{}:9100", lab.host(2).ip);
    let unheard = v["report"]["unheard_by_mdns"].as_array().unwrap();
    assert_eq!(unheard.len(), 1, "{v:#}");
    assert_eq!(unheard[0]["addr"], muted.as_str(), "{v:#}");
    assert_eq!(
        unheard[0]["found_by"],
        serde_json::json!(["subnet"]),
        "{v:#}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("  ? ")
            && l.contains(&muted)
            && l.contains("not heard over mDNS")),
        "a line of its own: {err}"
    );
    assert!(
        !err.contains("every agent answered every early query"),
        "no claim that every agent answered: {err}"
    );
    assert_eq!(code, Some(0), "both agents were found: {err}");
}
