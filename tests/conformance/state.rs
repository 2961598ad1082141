//! **The agent's responder state machine against RFC 6762** (docs/protocol.md,
//! "Probing, announcing, conflicts"): what happens after probing. Another host
//! claiming the agent's host name later (§9: probe again, rename if it defends
//! it); direct SRV questions after such a rename, from python-zeroconf, with
//! avahi on the link as the cache that must not be misled (§9); and a link flap
//! (§8, §8.3: probe, then announce twice).
//!
//! Packets are sent and seen by `lab/py/mdns_raw.py` (python-zeroconf's
//! wire codec); everything runs inside namespaces built by [`rlx_lab`].

use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, agent_bin, eventually, require_lab, script, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent or a helper may take to come up on a loaded 2-core box.
const UP: Duration = Duration::from_secs(30);

/// The agent's node id; its mDNS host label is `gpu-<first 6 hex digits>`.
const ID: &str = "a1b2c3d4e5f60718";

/// The agent's mDNS host name, as `rlx_agent::announce` builds it.
fn agent_host() -> String {
    format!(
        "{}.local.",
        rlx_proto::service::unique_host_label("gpu", ID)
    )
}

/// `rlx-agent` on `host`, announcing instance `box` from a caps file.
fn agent(lab: &Lab, host: usize, dir: &Path) -> Proc {
    let caps = dir.join("caps.json");
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{ID}","hostname":"gpu","os":"linux","arch":"x86_64",
               "cores":8,"ram_total":68719476736,"ram_avail":60000000000,
               "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box"])
        .env("RUST_LOG", "info");
    Proc::spawn(lab, host, cmd)
}

/// `mdns_raw.py VERB ARGS...`, to run in a lab host.
fn raw(args: &[&str]) -> Command {
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script("mdns_raw.py")).args(args);
    cmd
}

/// Another host (`host`) that owns the agent's host name and defends it.
fn claimer(lab: &Lab, host: usize) -> Proc {
    let ip = lab.host(host).ip.to_string();
    let p = Proc::spawn(lab, host, raw(&["claim", &ip, &agent_host(), &ip]));
    p.expect_output("claimed", UP);
    p
}

/// The JSON lines a helper printed so far.
fn lines(p: &Proc) -> Vec<Value> {
    p.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Guards against conflicts found after probing being ignored (RFC 6762 §9;
/// mdns-sd 0.21.7 only looked for them while probing): another host that
/// announces the agent's host name with its own address, and defends it,
/// makes the agent probe again, lose, and rename; the agent logs the rename.
#[test]
fn a_host_that_claims_the_agents_host_name_later_makes_it_probe_again_and_rename() {
    let test = "a_host_that_claims_the_agents_host_name_later_makes_it_probe_again_and_rename";
    if !peer::require(test, &[Peer::PythonZeroconf]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&lab, 1, dir.path());
    agent.expect_output("mDNS: announced on", UP);
    assert!(!agent.stderr().contains("name conflict"));

    let _claimer = claimer(&lab, 0);
    let renamed = agent_host().replace(".local.", "-2.local.");
    agent.expect_output(&format!("announcing as {renamed}"), UP);
    for line in agent
        .stderr()
        .lines()
        .filter(|l| l.contains("name conflict"))
    {
        println!("LOGGED: {line}");
    }
}

/// Guards against direct SRV/ANY answers after a host rename naming the old
/// host, with that host's A record pointing at this box and the cache-flush
/// bit: python-zeroconf's resolver (direct SRV, TXT and A
/// questions) must get the renamed host and the agent's address, and avahi,
/// a cache on the same link, must keep the old name on its real owner.
#[test]
fn direct_srv_questions_after_a_rename_get_the_renamed_host_at_python_zeroconf_and_avahi() {
    let test =
        "direct_srv_questions_after_a_rename_get_the_renamed_host_at_python_zeroconf_and_avahi";
    if !peer::require(test, &[Peer::PythonZeroconf, Peer::Avahi]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let avahi = Avahi::start(&lab, 2, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let _claimer = claimer(&lab, 0);
    let agent = agent(&lab, 1, dir.path());
    let renamed = agent_host().replace(".local.", "-2.local.");
    agent.expect_output(&format!("announcing as {renamed}"), UP);
    agent.expect_output("mDNS: announced on", UP);

    let agent_ip = lab.host(1).ip.to_string();
    let owner_ip = lab.host(0).ip.to_string();
    let ip2 = lab.host(2).ip.to_string();
    let fullname = "box._rlx._tcp.local.";
    for round in 0..3 {
        let v = eventually(UP, "python-zeroconf resolving the agent", || {
            let out = lab
                .command(2, PYTHON)
                .arg(script("mdns_raw.py"))
                .args(["resolve", &ip2, "_rlx._tcp.local.", fullname])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let v: Value = serde_json::from_str(text.trim()).map_err(|e| format!("{e}: {text}"))?;
            if v["found"] == true {
                Ok(v)
            } else {
                Err(text)
            }
        });
        assert_eq!(v["server"], renamed.as_str(), "round {round}: {v}");
        assert_eq!(
            v["addrs"],
            serde_json::json!([agent_ip]),
            "round {round}: {v}"
        );
    }

    // avahi heard every answer above: the old name is still its owner's.
    let resolve = |name: &str| {
        let out = avahi
            .client(&lab, "avahi-resolve")
            .args(["-4", "-n", name.trim_end_matches('.')])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let old = resolve(&agent_host());
    assert!(
        old.contains(&owner_ip) && !old.contains(&agent_ip),
        "{} at avahi: {old:?} (owner {owner_ip}, agent {agent_ip})",
        agent_host()
    );
    let new = resolve(&renamed);
    assert!(new.contains(&agent_ip), "{renamed} at avahi: {new:?}");
}

/// Guards against a link flap getting one announcement of the old records,
/// without probing and without the second announcement (RFC 6762 §8, §8.3;
/// mdns-sd 0.21.7 kept them verified across the flap): after the agent's
/// link goes down and up, the link sees probes for its names, then two
/// announcements about a second apart.
#[test]
fn after_a_link_flap_the_agent_probes_then_announces_twice() {
    let test = "after_a_link_flap_the_agent_probes_then_announces_twice";
    if !peer::require(test, &[Peer::PythonZeroconf]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let ip0 = lab.host(0).ip.to_string();
    let listener = Proc::spawn(&lab, 0, raw(&["listen", &ip0]));
    listener.expect_output("ready", UP);
    let agent = agent(&lab, 1, dir.path());
    agent.expect_output("mDNS: announced on", UP);
    let agent_ip = lab.host(1).ip.to_string();
    let fullname = "box._rlx._tcp.local.";
    let srv_announcements = |from: usize| -> Vec<f64> {
        lines(&listener)[from..]
            .iter()
            .filter(|l| l["src"] == agent_ip.as_str() && l["kind"] == "response")
            .filter(|l| {
                l["answers"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|r| r[0] == fullname && r[1] == "SRV"))
            })
            .map(|l| l["t"].as_f64().unwrap())
            .collect()
    };
    // The start-up announcements, and then quiet.
    kit::wait_until(UP, "the two start-up announcements", || {
        srv_announcements(0).len() >= 2
    });

    let iface = lab.host(1).iface.clone();
    lab.exec(1, "ip", &["link", "set", &iface, "down"]).unwrap();
    agent.expect_output("address gone", UP);
    let from = lines(&listener).len();
    lab.exec(1, "ip", &["link", "set", &iface, "up"]).unwrap();
    agent.expect_output("announcing on a new address", UP);
    let times = eventually(UP, "two announcements after the flap", || {
        let t = srv_announcements(from);
        if t.len() >= 2 {
            Ok(t)
        } else {
            Err(format!("{t:?}\n{}", listener.stdout()))
        }
    });
    let after = &lines(&listener)[from..];
    let probes: Vec<f64> = after
        .iter()
        .filter(|l| l["src"] == agent_ip.as_str() && l["kind"] == "probe")
        .map(|l| l["t"].as_f64().unwrap())
        .collect();
    assert!(
        probes.iter().any(|p| *p < times[0]),
        "probes before the first announcement: probes {probes:?}, announcements {times:?}"
    );
    let gap = times[1] - times[0];
    println!(
        "MEASURED: after the flap: {} probes, announcements {gap:.3} s apart",
        probes.len()
    );
    assert!(
        (0.9..3.0).contains(&gap),
        "the second announcement about 1 s after the first (RFC 6762 §8.3): {times:?}"
    );
}
