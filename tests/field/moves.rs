//! **An address that changes, and a machine on two networks**
//! (docs/security.md, "A node that moved"; docs/protocol.md, "Which
//! address a machine on several networks gets"), end to end in the
//! namespace lab:
//!
//! - an agent whose address changes between two `expand --write` runs (a
//!   new DHCP lease) keeps its one node, whose `addr` is updated in place;
//! - a hand-written node whose machine moved is reported, not rewritten,
//!   and the machine is not appended a second time;
//! - `watch` reports a running agent whose address changes as one
//!   `updated` event with the new address (not a `left` and a `joined`);
//! - an agent on two links the coordinator shares gets the same address
//!   in every run, the one docs/protocol.md's rule names.
//!
//! Everything runs inside namespaces built by [`rlx_lab`].

use rlx_lab::kit::discover::expand;
use rlx_lab::kit::{agent_bin, discover_bin, eventually, require_lab, run_ok, Proc};
use rlx_lab::Lab;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(30);
const ID: &str = "5f0c1d2e3a4b5c6d";

/// An agent on host `host` with a fixed node id, announced and answering.
fn agent(lab: &Lab, host: usize, dir: &Path) -> Proc {
    let caps = dir.join("caps.json");
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{ID}","hostname":"gpu-a","os":"linux","arch":"x86_64","cores":8,
               "ram_total":68719476736,"ram_avail":60000000000,
               "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file").arg(&caps).env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// Gives host `host` the address `to` instead of its own (a new lease):
/// the old one is deleted first (see NOTES-lab: deleting a primary
/// address also deletes its secondaries).
fn readdress(lab: &Lab, host: usize, to: Ipv4Addr) {
    let h = lab.host(host);
    let old = format!("{}/{}", h.ip, h.prefix_len);
    let new = format!("{to}/{}", h.prefix_len);
    run_ok(Command::new("ip").args(["-n", &h.ns, "addr", "del", &old, "dev", &h.iface]));
    run_ok(Command::new("ip").args(["-n", &h.ns, "addr", "add", &new, "dev", &h.iface]));
}

/// Another address on host `host`'s subnet, free in this lab.
fn new_lease(lab: &Lab, host: usize) -> Ipv4Addr {
    let [a, b, c, _] = lab.host(host).ip.octets();
    Ipv4Addr::new(a, b, c, 200)
}

#[test]
fn a_found_agent_whose_address_changed_keeps_one_node_with_its_new_addr_in_place() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    let hand = "# my cluster\n[discover]\nckpt_dir = \"/data/m\"   # shared\n";
    std::fs::write(&cfg, hand).unwrap();
    let old = format!("{}:9100", lab.host(1).ip);

    let a = agent(&lab, 1, dir.path());
    let first = expand(&lab, &cfg, &["--write"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let before = std::fs::read_to_string(&cfg).unwrap();
    assert!(before.contains(&format!("addr = \"{old}\"")), "{before}");
    assert!(before.contains(&format!("id {ID}")), "{before}");

    // A new lease: the agent comes back at another address.
    a.kill();
    drop(a);
    let to = new_lease(&lab, 1);
    readdress(&lab, 1, to);
    let _a = agent(&lab, 1, dir.path());
    let new = format!("{to}:9100");
    let from = lab.host(1).ip;

    let dry = expand(&lab, &cfg, &["--dry-run"]);
    let diff = dry.json["file"]["diff"].as_str().unwrap();
    assert!(
        diff.contains(&format!(
            "\n-addr = \"{old}\"\n-ssh = \"{from}\"\n+addr = \"{new}\"\n+ssh = \"{to}\"\n"
        )),
        "--dry-run shows the move as a diff, the ssh written from the address following it:\n{diff}"
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), before, "dry run");

    let second = expand(&lab, &cfg, &["--write"]);
    let after = std::fs::read_to_string(&cfg).unwrap();
    assert_eq!(
        after,
        before
            .replace(&format!("\"{old}\""), &format!("\"{new}\""))
            .replace(&format!("ssh = \"{from}\""), &format!("ssh = \"{to}\"")),
        "only the addr and the ssh written from it changed, in place:\n{}",
        second.stderr
    );
    let moved = &second.json["report"]["moved"][0];
    assert_eq!(
        (moved["from"].as_str(), moved["to"].as_str()),
        (Some(old.as_str()), Some(new.as_str()))
    );
    assert_eq!(moved["rewritten"], true);
    assert_eq!(second.json["file"]["moved"][0], format!("{old} -> {new}"));
    assert!(
        second.stderr.contains(&format!("moved {old} -> {new}")),
        "{}",
        second.stderr
    );
    assert!(second.json["missing"].as_array().unwrap().is_empty());
    assert!(second.json["report"]["added"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        second.json["nodes"].as_array().unwrap().len(),
        1,
        "no duplicate"
    );
    assert_eq!(second.code, Some(0), "a clean move: {}", second.stderr);

    // And the next run finds it where the file says.
    let third = expand(&lab, &cfg, &["--write"]);
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), after);
    assert_eq!(third.code, Some(0), "{}", third.stderr);
}

/// The events `watch --json` printed so far.
fn watch_events(w: &Proc) -> Vec<serde_json::Value> {
    w.0.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn watch_reports_a_running_agent_whose_address_changed_at_its_new_address_as_the_same_process() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0"]).env(
        "RUST_LOG",
        std::env::var("WATCH_LOG").unwrap_or("warn".into()),
    );
    let w = Proc::spawn(&lab, 0, cmd);
    let _a = agent(&lab, 1, dir.path());
    let old = format!("{}:9100", lab.host(1).ip);
    eventually(UP, "the agent joined", || {
        let evs = watch_events(&w);
        evs.iter()
            .find(|e| e["event"] == "joined")
            .filter(|e| e["node"]["addr"] == old.as_str())
            .map(|_| ())
            .ok_or(format!("{evs:?}"))
    });

    // A new lease while the agent runs: it re-announces at the new address.
    // Its old address is dead at once, while the coordinator hears the new
    // one only when mdns-sd resolves it (2-3 s here): heard first, the move
    // is `updated` in place; found dark first (its liveness connection
    // silent, nothing answering at the old address: 2.3 s), it is `left` as
    // vanished and `joined` at the new address as the same incarnation,
    // which tells a runtime that its worker process lived on.
    let to = new_lease(&lab, 1);
    readdress(&lab, 1, to);
    let new = format!("{to}:9100");
    let moved = eventually(
        Duration::from_secs(15),
        "the agent at its new address",
        || {
            let evs = watch_events(&w);
            evs.iter()
                .find(|e| {
                    (e["event"] == "updated" || e["event"] == "joined")
                        && e["node"]["addr"] == new.as_str()
                })
                .cloned()
                .ok_or(format!("{evs:?}"))
        },
    );
    let evs = watch_events(&w);
    let first = &evs[0];
    if moved["event"] == "updated" {
        let reason = moved["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&old) && reason.contains(&new),
            "the update says from where to where: {moved}"
        );
    } else {
        let left = evs
            .iter()
            .find(|e| e["event"] == "left")
            .unwrap_or_else(|| panic!("a second join needs a left: {evs:?}"));
        assert!(
            left["reason"]
                .as_str()
                .unwrap_or_default()
                .starts_with("vanished"),
            "{left}"
        );
        assert_eq!(
            moved["incarnation"], first["incarnation"],
            "the same process, joined at its new address: {evs:?}"
        );
    }
    // Past the health checks' bound: one member at the new address, nothing
    // more.
    std::thread::sleep(Duration::from_secs(8));
    let evs = watch_events(&w);
    let kinds: Vec<&str> = evs.iter().filter_map(|e| e["event"].as_str()).collect();
    let joins = kinds.iter().filter(|k| **k == "joined").count();
    let lefts = kinds.iter().filter(|k| **k == "left").count();
    assert!(
        (joins, lefts) == (1, 0) || (joins, lefts) == (2, 1),
        "updated in place, or left once and joined once at the new address: {evs:?}"
    );
    let last = evs.iter().rev().find(|e| e["node"].is_object()).unwrap();
    assert_eq!(last["node"]["addr"], new.as_str(), "{evs:?}");
}

#[test]
fn a_hand_written_node_whose_machine_moved_is_reported_and_neither_rewritten_nor_duplicated() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    let old = format!("{}:9100", lab.host(1).ip);
    let text = format!(
        "[discover]\n\n# the gpu box, mine (id {ID})\n[[node]]\naddr = \"{old}\"\n\
         ckpt_dir = \"/data/m\"\ndevice = \"cpu\"\n"
    );
    std::fs::write(&cfg, &text).unwrap();
    let to = new_lease(&lab, 1);
    readdress(&lab, 1, to);
    let _a = agent(&lab, 1, dir.path());
    let new = format!("{to}:9100");

    let r = expand(&lab, &cfg, &["--write"]);
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        text,
        "never rewritten"
    );
    assert!(
        r.json["report"]["added"].as_array().unwrap().is_empty(),
        "no duplicate"
    );
    let moved = &r.json["report"]["moved"][0];
    assert_eq!(moved["origin"], "hand-written");
    assert_eq!(moved["rewritten"], false);
    assert_eq!(moved["to"], new.as_str());
    assert!(
        r.stderr.contains(&format!(
            "hand-written [[node]] {old}: its machine (gpu-a, id {ID}) now answers at {new}"
        )) && r.stderr.contains(&format!("set addr = \"{new}\"")),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.code,
        Some(1),
        "the file names a dead address: {}",
        r.stderr
    );
}

/// Adds a second link `eth1` on 10.0.77.0/24 to hosts `hosts`, through a
/// second bridge in the lab's switch namespace (torn down with it). The
/// lab's own /16 is 10.X.0.0 with X from 1 to 254, so the two never
/// overlap, and the second link's addresses are the lower ones: the rule
/// picks the link that is not `eth0`, where the agent is heard first.
pub(crate) fn second_link(lab: &Lab, hosts: &[usize]) -> Vec<Ipv4Addr> {
    let sw = lab.switch_ns().expect("a switched lab").to_string();
    run_ok(Command::new("ip").args([
        "-n",
        &sw,
        "link",
        "add",
        "br1",
        "type",
        "bridge",
        "mcast_snooping",
        "0",
    ]));
    run_ok(Command::new("ip").args(["-n", &sw, "link", "set", "br1", "up"]));
    hosts
        .iter()
        .map(|&i| {
            let h = lab.host(i);
            let port = format!("q{i}");
            let ip = Ipv4Addr::new(10, 0, 77, 1 + i as u8);
            let script = format!(
                "link add eth1 type veth peer name {port} netns {sw}\n\
                 addr add {ip}/24 dev eth1\nlink set eth1 up\n"
            );
            let mut c = Command::new("ip");
            c.args(["-n", &h.ns, "-batch", "-"]);
            run_batch(c, &script);
            run_ok(Command::new("ip").args(["-n", &sw, "link", "set", &port, "master", "br1"]));
            run_ok(Command::new("ip").args(["-n", &sw, "link", "set", &port, "up"]));
            ip
        })
        .collect()
}

fn run_batch(mut c: Command, script: &str) {
    use std::io::Write;
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("ip runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "ip -batch failed: {script}"
    );
}

#[test]
fn an_agent_on_two_networks_gets_the_same_address_in_every_run_by_the_documented_rule() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let second = second_link(&lab, &[0, 1]);
    let dir = tempfile::tempdir().unwrap();
    let a = agent(&lab, 1, dir.path());
    // `agent` waits for the first link's announcement; the second link's
    // probing may end 100-200 ms later, and until then the agent rightly
    // answers nothing there (RFC 6762 §8.1), so a run that early sees one
    // link. The rule is about an agent announced on both.
    a.expect_output(":eth1 name=", UP);
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\n").unwrap();
    // Both links are shared with the coordinator, both IPv4, no speeds:
    // the lowest address wins.
    let want = format!("{}:9100", lab.host(1).ip.min(second[1]));
    let mut got = Vec::new();
    let mut logs = String::new();
    for run in 0..5 {
        let r = expand(&lab, &cfg, &[]);
        let added = r.json["report"]["added"].as_array().unwrap();
        assert_eq!(added.len(), 1, "run {run}: one machine:\n{}", r.stderr);
        got.push(added[0]["addr"].as_str().unwrap().to_string());
        logs += &format!("--- run {run}:\n{}\n", r.stderr);
    }
    assert_eq!(
        got,
        vec![want; 5],
        "the same address, 5 runs out of 5:\n{logs}"
    );
}
