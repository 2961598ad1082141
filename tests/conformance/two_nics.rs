//! **A box with two network interfaces on one LAN** (a docked laptop on
//! Wi-Fi and Ethernet, a server with two ports on one switch), dual-stack:
//! each interface announces only its own IPv6 addresses (RFC 6762 §6.2,
//! PATCHES.md §23), so each NIC's probes and announcements, heard on the
//! other, differ from what the other holds. Taken for another host's, they
//! made the agent tie-break against itself and rename within 2 s
//! (`dock (2)`, `dock-host-<id6>-2`), and every browser on the LAN saw two
//! services for one machine. RFC 6762 §14: a host's own packets heard on
//! another of its interfaces are never conflicts (PATCHES.md §31).

use super::wire::{start_agent, UP};
use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{discover, eventually, require_lab_with, script, Proc, PYTHON};
use rlx_lab::{Lab, LabOptions};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::process::Command;
use std::time::Duration;

/// How long the box is watched for a rename: the "over a minute".
const WATCH_FOR: Duration = Duration::from_secs(65);

/// Runs `ip ARGS` (which names its namespace with `-n`), panicking with its
/// error.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Gives host `i` a second NIC, `eth1`, on the lab's switch (the same link
/// as its `eth0`), with a second IPv4 address in the subnet and a second
/// IPv6 ULA: the agent then has two interfaces on one dual-stack LAN.
fn second_nic(lab: &Lab, i: usize) -> (String, Ipv6Addr) {
    let sw = lab.switch_ns().expect("a switched lab").to_string();
    let host = lab.host(i);
    let port = format!("{}b", host.switch_port.as_deref().unwrap_or("p"));
    ip(&[
        "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth1", "netns", &host.ns,
    ]);
    ip(&["-n", &sw, "link", "set", &port, "master", "br0"]);
    ip(&["-n", &sw, "link", "set", &port, "up"]);
    let v4 = lab.subnet().hosts().nth(200).unwrap().to_string();
    let mut seg = host.ipv6.expect("an IPv6 lab").segments();
    seg[7] = 0xc8;
    let v6 = Ipv6Addr::from(seg);
    ip(&[
        "-n",
        &host.ns,
        "addr",
        "add",
        &format!("{v4}/{}", host.prefix_len),
        "dev",
        "eth1",
    ]);
    ip(&[
        "-n",
        &host.ns,
        "addr",
        "add",
        &format!("{v6}/64"),
        "dev",
        "eth1",
        "nodad",
    ]);
    ip(&["-n", &host.ns, "link", "set", "eth1", "up"]);
    (v4, v6)
}

/// Every record of the listener's packets from the agent's addresses.
fn records_from(listener: &Proc, from: &BTreeSet<String>) -> Vec<Value> {
    listener
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["src"].as_str().is_some_and(|s| from.contains(s)))
        .flat_map(|l| {
            ["an", "ns", "ar"]
                .iter()
                .flat_map(|k| l["msg"][k].as_array().cloned().unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The listener on the other host's `eth0` for `family`, for the whole watch.
fn listener(lab: &Lab, family: &str) -> Proc {
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script("mdns_wire.py")).args([
        "listen",
        "--family",
        family,
        "--iface",
        "eth0",
        "--seconds",
        &(WATCH_FOR.as_secs() + 60).to_string(),
    ]);
    let p = Proc::spawn(lab, 1, cmd);
    p.expect_output("\"listening\"", UP);
    p
}

/// Guards against a box with two NICs on one dual-stack LAN conflicting with
/// itself (RFC 6762 §14; PATCHES.md §31): over a minute the agent announces
/// one instance and one host name on both, never renames, and a browse from
/// another host finds one node.
#[test]
fn a_box_with_two_nics_on_one_dual_stack_lan_keeps_one_name_and_one_host_for_a_minute() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: true,
    });
    let (v4b, v6b) = second_nic(&lab, 0);
    // The second NIC's link-local address, which the agent announces on it.
    eventually(UP, "host 0's eth1 has a link-local address", || {
        let out = lab
            .exec(0, "ip", &["-6", "-o", "addr", "show", "dev", "eth1"])
            .map_err(|e| e.to_string())?;
        out.contains("fe80:").then_some(()).ok_or(out)
    });
    let on4 = listener(&lab, "4");
    let on6 = listener(&lab, "6");
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "dock", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(WATCH_FOR);

    let log = agent.stderr();
    let announcing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("mDNS: announcing on"))
        .collect();
    assert!(
        announcing.iter().any(|l| l.contains("eth0"))
            && announcing.iter().any(|l| l.contains("eth1")),
        "the agent announces on both NICs: {announcing:?}\n{log}"
    );
    assert!(
        !log.contains("name conflict") && !log.contains("announcing as"),
        "the agent renamed itself:\n{log}"
    );

    // What the LAN heard, from every address of the box (IPv6 sources are
    // its link-local addresses).
    let mut from: BTreeSet<String> = [lab.host(0).ip.to_string(), v4b].into();
    for dev in ["eth0", "eth1"] {
        let out = lab
            .exec(0, "ip", &["-6", "-o", "addr", "show", "dev", dev])
            .unwrap();
        from.extend(
            out.lines()
                .filter_map(|l| l.split_whitespace().nth(3))
                .filter_map(|c| c.split('/').next())
                .map(str::to_string),
        );
    }
    let mut instances = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    let mut aaaa = BTreeSet::new();
    for (family, l) in [("IPv4", &on4), ("IPv6", &on6)] {
        let records = records_from(l, &from);
        assert!(
            records.iter().any(|r| r["type"] == "SRV"),
            "no SRV heard over {family} from {from:?}: {}",
            l.stdout()
        );
        for r in records {
            match r["type"].as_str() {
                Some("SRV")
                    if r["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("._rlx._tcp.local.")) =>
                {
                    instances.insert(r["name"].as_str().unwrap().to_string());
                    hosts.insert(r["target"].as_str().unwrap().to_string());
                }
                Some("AAAA") if r["ttl"].as_u64() != Some(0) => {
                    aaaa.insert(r["addr"].as_str().unwrap_or("").to_string());
                }
                _ => {}
            }
        }
    }
    println!("MEASURED: two NICs: instances {instances:?}, hosts {hosts:?}, AAAA {aaaa:?}");
    assert_eq!(
        instances,
        BTreeSet::from(["dock._rlx._tcp.local.".to_string()]),
        "one instance on the LAN"
    );
    assert_eq!(hosts.len(), 1, "one host name on the LAN: {hosts:?}");
    assert!(
        aaaa.contains(&v6b.to_string()),
        "the second NIC's address is announced: {aaaa:?}"
    );

    let v = discover::browse_once(&lab, 1, &["--browse-ms", "1500"]);
    let sightings = v["sightings"].as_array().expect("sightings");
    assert_eq!(sightings.len(), 1, "one node for one box: {v:#}");
}
