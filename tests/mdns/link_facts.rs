//! Link facts (docs/json.md, "Capabilities") end to end on a private LAN:
//! a probing agent (no caps file) reports the interface it announces on,
//! and the coordinator attaches that link to the node whose address is on
//! it.

use rlx_lab::kit::discover::expand;
use rlx_lab::kit::{self};
use rlx_lab::kit::{agent_bin, require_lab, Proc};
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
    let agent = Proc::spawn(&lab, 1, cmd);
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

/// Guards against a two-GPU box being shown as "cuda 24.0 GiB", as if it
/// had one, and checks that the link facts an agent sends reach the table.
#[test]
fn browse_shows_a_two_gpu_box_as_2x_cuda_with_the_link_of_its_address() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let ip = lab.host(1).ip.to_string();
    let caps = dir.path().join("caps.json");
    let gpu = r#"{"device":"cuda","name":"NVIDIA GeForce RTX 4090","mem_bytes":25769803776,
                  "mem_free":25000000000,"pcie":{"gen":4,"width":16},"compute":"8.9"}"#;
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"00000000000000c2","hostname":"twin","os":"linux","cores":16,
                "ram_total":68719476736,"ram_avail":60000000000,
                "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}},{gpu},{gpu}],
                "links":[{{"name":"eth0","kind":"ethernet","speed_mbps":10000,"mtu":9000,
                           "addrs":["{ip}"],"rdma":false}}]}}"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "twin"])
        .env("RUST_LOG", "info");
    let agent = Proc::spawn(&lab, 1, cmd);
    agent.expect_output("mDNS: announced on", Duration::from_secs(20));

    let out = lab
        .command(0, kit::discover_bin())
        .args(["browse"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("twin "))
        .unwrap_or_else(|| panic!("no row for twin:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(
        row.contains("2x cuda") && cells.contains(&"24.0") && row.trim_end().ends_with("10 GbE"),
        "{table}"
    );
    let json = lab
        .command(0, kit::discover_bin())
        .args(["browse", "--json"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let node = &v["nodes"][0];
    assert_eq!(
        node["device_mems"],
        serde_json::json!([25769803776u64, 25769803776u64])
    );
    assert_eq!(node["accelerators"][1]["compute"], "8.9", "{node:#}");
    assert_eq!(node["link"]["speed_mbps"], 10000, "{node:#}");
}

/// A browse's link problem for the node at `addr`, or none.
fn link_problem(v: &serde_json::Value, addr: &str) -> Option<String> {
    v["report"]["link_problems"]
        .as_array()?
        .iter()
        .find(|p| p["addr"] == addr)
        .and_then(|p| p["why"].as_str().map(String::from))
}

/// Guards the keyless default of link measurement on a LAN (docs/security.md,
/// "Link measurement"): a keyless agent with default settings no longer moves
/// 64 MiB each way for a stranger's `browse --links` (one made it move 128
/// MiB); it refuses, and the browse reports why for that link. `--measure any`
/// measures for anyone, a few times a minute per address (the second browse
/// from the same machine is refused as over its rate); `--measure off` refuses
/// everyone. Every refusal reaches the report: nothing is refused silently.
#[test]
fn a_keyless_agent_measures_only_when_told_to_and_each_refusal_is_reported() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let mut agents = Vec::new();
    for (i, name, extra) in [
        (1, "strict", &[][..]),
        (
            2,
            "open",
            &["--measure", "any", "--measure-per-minute", "1"][..],
        ),
        (3, "off", &["--measure", "off"][..]),
    ] {
        let caps = dir.path().join(format!("{name}.json"));
        std::fs::write(
            &caps,
            format!(
                r#"{{"id":"00000000000000d{i}","hostname":"{name}","os":"linux","cores":4,
                    "ram_total":68719476736,"ram_avail":60000000000,
                    "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
            ),
        )
        .unwrap();
        let mut cmd = Command::new(agent_bin());
        cmd.arg("--caps-file")
            .arg(&caps)
            .args(["--name", name])
            .args(extra)
            .env("RUST_LOG", "debug");
        let agent = Proc::spawn(&lab, i, cmd);
        agent.expect_output("mDNS: announced on", Duration::from_secs(20));
        agents.push(agent);
    }
    let addr = |i: usize| format!("{}:9100", lab.host(i).ip);
    let browse = || {
        let out = kit::run_ok(
            lab.command(0, kit::discover_bin())
                .args(["browse", "--links", "--json", "--browse-ms", "1500"])
                .env("RUST_LOG", "warn"),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("browse --json");
        v
    };
    let measured = |v: &serde_json::Value, name: &str| {
        let node = v["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["hostname"] == name))
            .unwrap_or_else(|| panic!("{name} not found: {v:#}"))
            .clone();
        node["measured_link"].clone()
    };

    let v = browse();
    let strict = link_problem(&v, &addr(1)).unwrap_or_default();
    assert!(
        strict.contains("no cluster key") && strict.contains("--measure any"),
        "the default agent refuses, and the report says why: {:#}",
        v["report"]
    );
    assert!(measured(&v, "strict").is_null(), "{v:#}");
    let open = measured(&v, "open");
    assert!(
        open["up_mbps"].as_f64().unwrap_or(0.0) > 0.0
            && open["down_mbps"].as_f64().unwrap_or(0.0) > 0.0,
        "--measure any measures: {open:#} {:#}",
        v["report"]
    );
    let off = link_problem(&v, &addr(3)).unwrap_or_default();
    assert!(off.contains("--measure off"), "{:#}", v["report"]);

    let again = browse();
    let limited = link_problem(&again, &addr(2)).unwrap_or_default();
    assert!(
        limited.contains("rate limit") && limited.contains(&lab.host(0).ip.to_string()),
        "the second measurement within the minute from the same address is refused: {:#}",
        again["report"]
    );
    assert!(measured(&again, "open").is_null(), "{again:#}");
    drop(agents);
}
