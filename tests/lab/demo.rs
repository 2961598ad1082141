//! `rlx-discover demo`, the README's main command, runs end to end and says
//! what it should: four simulated machines found from an empty
//! `[discover]`, each with the right device, the hand-written node kept, the
//! untargetable GPU reported, and the lab torn down.

use rlx_lab::kit::{self};
use std::process::Command;

#[test]
fn the_demo_finds_every_simulated_machine_with_the_right_device() {
    if kit::require_lab().is_none() {
        return;
    }
    let out = Command::new(kit::discover_bin())
        .arg("demo")
        .arg("--agent")
        .arg(kit::agent_bin())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let expanded = stdout
        .split("== rlx-discover expand")
        .nth(1)
        .and_then(|s| s.split("== report").next())
        .unwrap_or_else(|| panic!("no expanded config in:\n{stdout}"));
    let cfg = rlx_discover::config::ClusterConfig::parse(
        std::path::Path::new("demo-output.toml"),
        expanded.split_once('\n').map_or("", |(_, rest)| rest),
    )
    .unwrap_or_else(|e| panic!("the printed config does not parse: {e}\n{expanded}"));
    assert_eq!(cfg.nodes.len(), 5, "1 hand-written + 4 found:\n{expanded}");
    // The RLX runtime's own loader reads the printed file, model and all,
    // with `ssh` on every node: each box is another machine, none is the
    // coordinator's own.
    let printed = expanded.split_once('\n').map_or("", |(_, rest)| rest);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, printed).unwrap();
    if let Some(read) = kit::runtime::load(&path) {
        assert_eq!(
            read["ok"], true,
            "the runtime refuses the demo's file: {read}\n{printed}"
        );
        assert!(
            read.get("model_assumed").is_none(),
            "the demo's file names its model"
        );
        for n in read["nodes"].as_array().unwrap() {
            assert!(
                n["ssh"].as_str().is_some_and(|s| !s.is_empty()),
                "the runtime would take {} for the coordinator's own box:\n{printed}",
                n["addr"]
            );
        }
    }
    assert!(
        cfg.nodes.iter().all(|n| n.precision.as_str() == "bf16"),
        "the runtime's default"
    );
    assert_eq!(
        cfg.nodes[0].addr, "192.0.2.10:9100",
        "the hand-written node comes first, unchanged"
    );
    let device_of = |host: &str| {
        let line = expanded
            .lines()
            .position(|l| l.starts_with("# found by") && l.contains(&format!(": {host},")))
            .unwrap_or_else(|| panic!("{host} not found:\n{expanded}"));
        let block: Vec<&str> = expanded.lines().skip(line).take(6).collect();
        block
            .iter()
            .find_map(|l| l.strip_prefix("device = "))
            .unwrap_or_else(|| panic!("no device for {host}: {block:?}"))
            .trim_matches('"')
            .to_string()
    };
    assert_eq!(device_of("gpu-box"), "cuda");
    assert_eq!(
        device_of("mac-studio"),
        "metal",
        "unified Metal beats the CPU; never the ANE"
    );
    assert_eq!(device_of("cpu-box"), "cpu");
    assert_eq!(
        device_of("old-build"),
        "cpu",
        "a GPU its build cannot target is not chosen"
    );
    assert!(
        stdout.contains("skipped device rocm") && stdout.contains("cannot target"),
        "the skipped GPU is reported:\n{stdout}"
    );
    assert!(stdout.contains("cleaned up"), "{stdout}");
    assert!(
        !stdout.contains("did not come up"),
        "every agent came up:\n{stdout}"
    );
    // Nothing of the demo's lab is left behind.
    let lab = stdout
        .split("namespaces named ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("the demo names its lab:\n{stdout}"))
        .trim_end_matches(['*', ')', ','])
        .to_string();
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains(&lab), "namespaces of {lab} left behind:\n{ns}");
}
