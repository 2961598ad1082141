//! The link facts of issue 14 end to end on a private LAN: a probing agent
//! (no caps file) reports the interface it announces on, and the
//! coordinator attaches that link to the node whose address is on it.

mod common;

use common::{agent_bin, expand, require_lab, spawn};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_probing_agent_reports_its_announced_link_and_the_coordinator_attaches_it() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.args(["--no-bench", "--name", "probed"])
        .arg("--state-dir")
        .arg(dir.path())
        .env("RUST_LOG", "info");
    let agent = spawn(&lab, 1, cmd);
    agent.expect_output("mDNS: announced on", Duration::from_secs(20));

    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\n").unwrap();
    let ip = lab.host(1).ip.to_string();
    let out = expand(&lab, &cfg, &[]);
    let node = out.json["report"]["added"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["addr"] == format!("{ip}:9100")))
        .unwrap_or_else(|| panic!("agent at {ip} not found:\n{}", out.stdout));
    let link = &node["link"];
    assert_eq!(link["name"], "eth0", "{node:#}");
    // The lab's eth0 is one end of a veth pair: no hardware behind it.
    assert_eq!(link["kind"], "virtual", "{node:#}");
    assert!(link["mtu"].as_u64().unwrap() >= 1280, "{node:#}");
    assert_eq!(link["rdma"], false);
    assert!(
        link["addrs"].as_array().unwrap().iter().any(|a| a == &ip),
        "the link lists the address the node was written with: {node:#}"
    );
}
