//! The coordinator's load on the LAN, end to end in the namespace lab: on a
//! dual-stack LAN a one-shot browse stops querying the address family that adds
//! nothing, without losing an IPv6-only agent. The packet counts themselves are
//! measured by the benchmark suite (`bench/run.sh --only mdns`), not asserted
//! here.

use rlx_lab::kit::discover;
use rlx_lab::kit::{agent_bin, eventually, require_lab, Proc};
use rlx_lab::Lab;
use rlx_proto::caps::NodeCaps;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to come up and announce.
const READY: Duration = Duration::from_secs(20);

/// One browse in host `i`, as JSON.
fn browse(lab: &Lab, i: usize) -> Value {
    discover::browse_once(lab, i, &["--interface", "eth0", "--browse-ms", "2000"])
}

/// An rlx-agent in host `i` announcing simulated caps as `agent<i>`.
fn agent(lab: &Lab, i: usize) -> Proc {
    let file = lab.log_dir().join(format!("caps{i}.json"));
    let caps = NodeCaps {
        id: format!("{i:016x}"),
        os: "linux".into(),
        arch: "x86_64".into(),
        cores: 4,
        ram_total: 16 << 30,
        ram_avail: 8 << 30,
        ..NodeCaps::default()
    };
    std::fs::write(&file, serde_json::to_string(&caps).unwrap()).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&file)
        .args(["--name", &format!("agent{i}"), "--interface", "eth0"])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, i, cmd);
    p.expect_output("announcing _rlx._tcp", READY);
    p
}

#[test]
fn on_a_dual_stack_lan_one_family_is_queried_once_the_other_reaches_every_agent() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(rlx_lab::LabOptions {
        hosts: 5,
        ipv6: true,
    });
    let mut agents: Vec<Proc> = (1..4).map(|i| agent(&lab, i)).collect();
    let v = eventually(READY, "three dual-stack agents found by one browse", || {
        let v = browse(&lab, 0);
        if discover::sightings_by_host(&v).len() == 3 && v["stats"]["stop_rule"] == "clean" {
            Ok(v)
        } else {
            Err(format!("{v:#}"))
        }
    });
    let st = &v["stats"];
    assert!(
        st["legacy_family_skipped"].as_u64().unwrap_or(0) > 0,
        "every agent answered on both families, yet both were queried to the end: {st:#}"
    );

    // An IPv6-only agent joins: IPv6 is what reaches everyone now, and the
    // agent must be found at its IPv6 address.
    lab.exec(4, "ip", &["-4", "addr", "flush", "dev", "eth0"])
        .unwrap();
    agents.push(agent(&lab, 4));
    let v6 = lab.host(4).ipv6.expect("IPv6 lab host").to_string();
    let v = eventually(READY, "the IPv6-only agent found beside the others", || {
        let v = browse(&lab, 0);
        if discover::sightings_by_host(&v).len() == 4 {
            Ok(v)
        } else {
            Err(format!("{v:#}"))
        }
    });
    let s = &discover::sightings_by_host(&v)["agent4"];
    assert_eq!(s["ip"], v6, "{s:#}");
    assert_eq!(s["addr"], format!("[{v6}]:9100"), "{s:#}");
    drop(agents);
}
