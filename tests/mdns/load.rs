//! The coordinator's load on the LAN, end to end in the namespace lab: on a
//! dual-stack LAN a one-shot browse stops querying the address family that adds
//! nothing, without losing an IPv6-only agent; a browse of a clean LAN puts
//! only its early legacy queries on the segment, and one under loss still
//! begins its multicast path. The figures beside the peers are measured by
//! the benchmark suite (`bench/run.sh --only mdns`, "Load on the segment").

use rlx_lab::kit::discover;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, eventually, require_lab, script, Proc, PYTHON};
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

/// The packets a bystander (host `i`, listening with `mdns_wire.py`) has
/// received so far: (source, is a response).
fn heard(listener: &Proc) -> Vec<(String, bool)> {
    listener
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| {
            Some((
                l["src"].as_str()?.to_string(),
                l["msg"]["response"].as_bool()?,
            ))
        })
        .collect()
}

/// Guards against a browse that loads every bystander: one that began with
/// a standard query drew a multicast answer from every agent (at 50 agents
/// about 50 packets, 19 KB, received by every Wi-Fi client and printer of
/// the segment). On a clean LAN a browse sends only its three early legacy
/// queries, answered by unicast, and never begins its multicast path;
/// under loss it still does.
#[test]
fn a_browse_of_a_clean_lan_puts_only_its_early_queries_on_the_segment_and_one_under_loss_multicasts(
) {
    // Loss is an nftables rule and the wire is read by a python3 script:
    // without them, a loud SKIP (a failure under CI), never a panic.
    if !peer::require("a_browse_of_a_clean_lan_puts_only_its_early_queries_on_the_segment_and_one_under_loss_multicasts", &[Peer::Nftables, Peer::Python]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(6);
    let agents: Vec<Proc> = (1..5).map(|i| agent(&lab, i)).collect();
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script("mdns_wire.py")).args([
        "listen",
        "--family",
        "4",
        "--iface",
        "eth0",
        "--seconds",
        "240",
    ]);
    let bystander = Proc::spawn(&lab, 5, cmd);
    bystander.expect_output("\"listening\"", READY);
    eventually(READY, "four agents found by a clean browse", || {
        let v = browse(&lab, 0);
        if discover::sightings_by_host(&v).len() == 4 && v["stats"]["stop_rule"] == "clean" {
            Ok(())
        } else {
            Err(format!("{v:#}"))
        }
    });
    // Agents answer nothing on their own once their announcements are out.
    std::thread::sleep(Duration::from_secs(2));
    let coordinator = lab.host(0).ip.to_string();
    let mut clean_runs = 0;
    for _ in 0..3 {
        let before = heard(&bystander).len();
        let v = browse(&lab, 0);
        std::thread::sleep(Duration::from_millis(500));
        let st = &v["stats"];
        assert_eq!(discover::sightings_by_host(&v).len(), 4, "{v:#}");
        if st["stop_rule"] != "clean" {
            continue;
        }
        clean_runs += 1;
        let got = heard(&bystander)[before..].to_vec();
        let queries = got
            .iter()
            .filter(|(src, r)| *src == coordinator && !r)
            .count();
        let responses = got.iter().filter(|(_, r)| *r).count();
        println!("MEASURED: clean browse of 4: the bystander heard {queries} queries, {responses} responses");
        assert!(st["multicast_begun_ms"].is_null(), "{st:#}");
        assert_eq!(st["standard_queries"], 0, "{st:#}");
        assert!(queries <= 3, "{got:?}");
        assert_eq!(responses, 0, "multicast answers to a clean browse: {got:?}");
    }
    assert!(
        clean_runs >= 2,
        "a lossless lab browsed clean in {clean_runs} runs of 3"
    );

    lab.set_loss(0, 30).unwrap();
    let v = browse(&lab, 0);
    let st = &v["stats"];
    println!(
        "MEASURED: at 30% loss the multicast path began at {} ms",
        st["multicast_begun_ms"]
    );
    assert!(
        st["stop_rule"] == "clean" || st["multicast_begun_ms"].as_u64().is_some(),
        "a browse that was not clean never began its multicast path: {st:#}"
    );
    drop(agents);
}
