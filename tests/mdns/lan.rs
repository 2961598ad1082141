//! The heart of the product, end to end on a private LAN of namespaces: an
//! empty `[discover]` finds every `rlx-agent` over mDNS, through the same
//! admission and pipeline as every other source.

use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::promise;
use rlx_lab::kit::sshd;
use rlx_lab::kit::{
    agent_bin, discover_bin, eventually, eventually_every, require_lab, run_ok, Proc, PYTHON,
};
use rlx_lab::Lab;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long an agent may take to announce (mdns-sd probes its name for about
/// 0.75 s first; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(20);

/// Caps of simulated machine `i`: a different device per machine, so a mix-up
/// between machines would show.
fn caps_json(i: usize) -> String {
    let (dev, mem) = match i % 4 {
        0 => ("cuda", 25_769_803_776u64),
        1 => ("rocm", 17_179_869_184),
        2 => ("vulkan", 8_589_934_592),
        _ => ("cpu", 0),
    };
    format!(
        r#"{{"id":"{i:016x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":{cores},
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}},
                      {{"device":"{dev}","name":"{dev} gpu","mem_bytes":{mem}}}]}}"#,
        cores = 8 + i
    )
}

fn expected_device(i: usize) -> &'static str {
    ["cuda", "rocm", "vulkan", "cpu"][i % 4]
}

/// Starts an agent for simulated machine `i` on lab host `host`.
fn start_agent(lab: &Lab, host: usize, i: usize, dir: &Path) -> Proc {
    let caps = dir.join(format!("box{i}.json"));
    std::fs::write(&caps, caps_json(i)).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", &format!("box{i}")])
        .env("RUST_LOG", "info");
    Proc::spawn(lab, host, cmd)
}

fn wait_up(agents: &[Proc]) {
    for a in agents {
        a.expect_output("mDNS: announced on", UP);
    }
}

/// `rlx-discover expand --format json` of `toml` in host 0.
fn expand(lab: &Lab, dir: &Path, toml: &str) -> serde_json::Value {
    let cfg = dir.join("cluster.toml");
    std::fs::write(&cfg, toml).unwrap();
    let out = lab
        .command(0, discover_bin())
        .args(["expand", "--format", "json"])
        .arg(&cfg)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "expand printed no JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// addr -> device of the nodes in an expand's JSON.
fn devices(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut d: Vec<(String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["addr"].as_str().unwrap().to_string(),
                n["device"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    d.sort();
    d
}

fn expected(lab: &Lab, n: usize) -> Vec<(String, String)> {
    let mut e: Vec<(String, String)> = (1..=n)
        .map(|h| {
            (
                format!("{}:9100", lab.host(h).ip),
                expected_device(h).to_string(),
            )
        })
        .collect();
    e.sort();
    e
}

#[test]
fn an_empty_discover_finds_five_agents_with_the_right_devices_twenty_times_in_a_row() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(6);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=5)
        .map(|h| start_agent(&lab, h, h, dir.path()))
        .collect();
    wait_up(&agents);
    let want = expected(&lab, 5);
    for run in 0..20 {
        let v = expand(&lab, dir.path(), "[discover]\n");
        assert_eq!(
            devices(&v),
            want,
            "run {run} missed or mixed up a node: {v:#}"
        );
        assert!(
            v["report"]["failed"].as_array().unwrap().is_empty(),
            "run {run}: {v:#}"
        );
    }
}

/// 10% random loss on the coordinator's link, both ways (nftables; this
/// kernel has no netem). Documented bound: every agent within browse_ms
/// (2 s by default) plus the handshake; the browse listens its whole window
/// once it sees loss.
#[test]
fn ten_percent_loss_on_the_coordinators_link_still_finds_every_agent() {
    if !peer::require(
        "ten_percent_loss_on_the_coordinators_link_still_finds_every_agent",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(6);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=5)
        .map(|h| start_agent(&lab, h, h, dir.path()))
        .collect();
    wait_up(&agents);
    lab.set_loss(0, 10).unwrap();
    let want = expected(&lab, 5);
    for run in 0..5 {
        let t0 = Instant::now();
        let v = expand(&lab, dir.path(), "[discover]\n");
        let took = t0.elapsed();
        assert_eq!(devices(&v), want, "run {run} under 10% loss: {v:#}");
        assert!(took < Duration::from_secs(6), "run {run} took {took:?}");
    }
}

/// 20% random loss on the coordinator's link, both ways, and every ARP
/// cache flushed before each run (the worst case: each agent's reply and
/// each handshake SYN first waits for an ARP exchange that is lost too):
/// every live agent is found *and admitted*, run after run. Before the
/// handshakes overlapped the browse and ARP was nudged, one to four of 50
/// live agents per run were refused as unreachable.
#[test]
fn twenty_percent_loss_with_cold_arp_caches_still_admits_every_live_agent() {
    if !peer::require(
        "twenty_percent_loss_with_cold_arp_caches_still_admits_every_live_agent",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let n = 20;
    let lab = labs.hosts(n + 1);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=n)
        .map(|h| start_agent(&lab, h, h, dir.path()))
        .collect();
    wait_up(&agents);
    lab.set_loss(0, 20).unwrap();
    let want = expected(&lab, n);
    for run in 0..3 {
        for h in lab.hosts() {
            run_ok(Command::new("ip").args(["-n", &h.ns, "neigh", "flush", "all"]));
        }
        let v = expand(&lab, dir.path(), "[discover]\n");
        assert_eq!(devices(&v), want, "run {run} under 20% loss: {v:#}");
        assert!(
            v["report"]["failed"].as_array().unwrap().is_empty(),
            "run {run}: a live agent was refused: {v:#}"
        );
    }
}

/// A node announced by a third-party mDNS stack (python-zeroconf) with the
/// schema, plus a plain TCP listener on its port (no handshake): found, and
/// its device chosen from its TXT record.
#[test]
fn a_node_announced_by_python_zeroconf_is_planned_from_its_txt() {
    if !peer::require(
        "a_node_announced_by_python_zeroconf_is_planned_from_its_txt",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let ip = lab.host(1).ip;
    let script = format!(
        r#"
import socket, time
from zeroconf import Zeroconf, ServiceInfo, IPVersion
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9100)); s.listen(16)
zc = Zeroconf(interfaces=["{ip}"], ip_version=IPVersion.V4Only)
info = ServiceInfo("_rlx._tcp.local.", "zc-box._rlx._tcp.local.", port=9100,
    addresses=[socket.inet_aton("{ip}")], server="zc-box.local.",
    properties={{"txtvers": "1", "id": "00000000000000aa", "cores": "16",
                 "ram": "68719476736", "dev0": "cpu,0,1,1,0,cpu",
                 "dev1": "rocm,34359738368,0,1,0,Radeon, PRO W7800"}})
zc.register_service(info)
print("registered", flush=True)
while True:
    c, _ = s.accept(); c.close()
"#
    );
    let mut cmd = Command::new(PYTHON);
    cmd.args(["-c", &script]);
    let zc = Proc::spawn(&lab, 1, cmd);
    zc.expect_output("registered", UP);
    let dir = tempfile::tempdir().unwrap();
    let v = expand(&lab, dir.path(), "[discover]\n");
    assert_eq!(
        devices(&v),
        vec![(format!("{ip}:9100"), "rocm".to_string())],
        "{v:#}"
    );
    let added = &v["report"]["added"][0];
    assert_eq!(
        added["evidence"], "txt",
        "no handshake, so the TXT caps are kept: {v:#}"
    );
    assert_eq!(added["id"], "00000000000000aa");
    assert_eq!(added["mem_bytes"].as_u64(), Some(34_359_738_368));
}

/// One box, reachable both ways: sshd and a running rlx-agent in the same
/// namespace. SSH gives the alias (the runtime starts workers through it),
/// mDNS and the handshake give fresh caps, and the pipeline makes them one
/// node, by id and port.
#[test]
fn the_same_agent_found_by_ssh_and_mdns_is_one_node() {
    let Some(labs) = require_lab() else { return };
    if !sshd::have_sshd() {
        return;
    }
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::fs::copy(agent_bin(), bin_dir.join("rlx-agent")).unwrap();
    let ip = lab.host(1).ip;
    let cfg = sshd::server_config(
        dir.path(),
        "box",
        "0.0.0.0",
        2222,
        // The host's own state directory, as its agent has it: the probe
        // over ssh then names the agent's node id.
        &format!(
            "PATH={}:/usr/bin:/bin STATE_DIRECTORY={}",
            bin_dir.display(),
            lab.state_dir(1).display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let sshd = Proc::spawn(&lab, 1, sshd::server_command(&cfg));
    let mut agent = Command::new(agent_bin());
    agent.args(["--no-bench"]).env("RUST_LOG", "info");
    let agent = Proc::spawn(&lab, 1, agent);
    agent.expect_output("mDNS: announced on", UP);
    let ssh_config = dir.path().join("ssh_config");
    std::fs::write(
        &ssh_config,
        sshd::client_entry(dir.path(), "box1", &ip.to_string(), 2222),
    )
    .unwrap();
    // sshd starts no faster than the agent on a loaded box: log in once from
    // the coordinator before discovery, so the test measures the merge and
    // not sshd's start-up.
    // One ssh a check, 100 ms apart.
    eventually_every(
        Duration::from_millis(100),
        UP,
        "sshd in host 1 letting the coordinator in",
        || {
            let ok = lab
                .command(0, "ssh")
                .arg("-F")
                .arg(&ssh_config)
                .args(["box1", "true"])
                .output()
                .unwrap();
            if ok.status.success() {
                return Ok(());
            }
            Err(format!(
                "{}\nsshd: {}",
                String::from_utf8_lossy(&ok.stderr),
                sshd.0.dump()
            ))
        },
    );
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let v = expand(
        &lab,
        dir.path(),
        &format!(
            "[discover]\nssh_hosts = [\"box1\"]\nckpt_dir = {:?}\nssh_config = {:?}\n",
            ckpt.display().to_string(),
            ssh_config.display().to_string()
        ),
    );
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(
        nodes.len(),
        1,
        "one box, one node: {v:#}\nsshd: {}",
        sshd.0.dump()
    );
    assert_eq!(nodes[0]["addr"], "box1:9100", "{v:#}");
    assert_eq!(nodes[0]["ssh"], "box1", "{v:#}");
    let sources: Vec<&str> = v["report"]["added"][0]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(sources, vec!["ssh", "mdns"], "{v:#}");
}

/// Runs `rlx-discover watch --json` in host 0 for `ms`, tracked by the lab.
fn start_watch(lab: &Lab, ms: u64) -> Proc {
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--for-ms", &ms.to_string()])
        .env("RUST_LOG", "warn");
    Proc::spawn(lab, 0, cmd)
}

/// The events printed so far, as (event, instance, at_ms).
fn events(w: &Proc) -> Vec<(String, String, u64)> {
    w.0.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            (
                v["event"].as_str().unwrap_or("").to_string(),
                v["instance"].as_str().unwrap_or("").to_string(),
                v["at_ms"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn wait_event(w: &Proc, event: &str, instance: &str, within: Duration) -> u64 {
    eventually(within, &format!("`{event}` for {instance}"), || {
        let seen = events(w);
        match seen.iter().find(|e| e.0 == event && e.1 == instance) {
            Some(e) => Ok(e.2),
            None => Err(format!("events so far: {seen:?}\n{}", w.0.dump())),
        }
    })
}

/// SIGTERM makes an agent say goodbye, SIGKILL sends nothing (its kernel
/// resets the liveness connection): `watch` reports each `left` within what
/// it promises for every event ([`rlx_lab::kit::promise`]).
#[test]
fn watch_reports_joins_a_goodbye_and_a_crash_each_within_its_promise() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let agents = [
        start_agent(&lab, 1, 1, dir.path()),
        start_agent(&lab, 2, 2, dir.path()),
    ];
    wait_up(&agents);
    let w = start_watch(&lab, 60_000);
    wait_event(&w, "joined", "box1", Duration::from_secs(10));
    wait_event(&w, "joined", "box2", Duration::from_secs(10));

    let t0 = Instant::now();
    assert!(agents[0].0.signal(nix::sys::signal::Signal::SIGTERM));
    wait_event(&w, "left", "box1", promise::GOODBYE_LEFT.every * 2);
    let goodbye = t0.elapsed();
    promise::GOODBYE_LEFT.held(goodbye.as_millis() as u64);

    let t1 = Instant::now();
    assert!(agents[1].0.signal(nix::sys::signal::Signal::SIGKILL));
    // box2 joined a moment ago: its liveness connection may not be open
    // yet, so the promise for a member seconds old holds.
    wait_event(&w, "left", "box2", promise::YOUNG_CRASH_LEFT.every * 2);
    let crash = t1.elapsed();
    promise::YOUNG_CRASH_LEFT.held(crash.as_millis() as u64);
    eprintln!("left after goodbye: {goodbye:?}; after SIGKILL: {crash:?}");
    let left: Vec<_> = events(&w).into_iter().filter(|e| e.0 == "left").collect();
    assert_eq!(left.len(), 2, "each agent left once: {left:?}");
}

/// Issue 38, item 7: `watch` exited 2 at start when no interface was up
/// (a coordinator booting, a laptop undocked). It says it waits, waits,
/// and once the link comes up it browses and sees the agent join.
#[test]
fn watch_started_with_its_link_down_waits_for_it_and_then_sees_the_agent() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 1, 1, dir.path());
    wait_up(std::slice::from_ref(&agent));
    let coordinator = lab.host(0).ns.clone();
    run_ok(Command::new("ip").args(["-n", &coordinator, "link", "set", "eth0", "down"]));

    let w = start_watch(&lab, 60_000);
    w.expect_output("waiting for one", Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        w.0.try_wait(),
        None,
        "watch waits instead of exiting: {}",
        w.0.dump()
    );

    run_ok(Command::new("ip").args(["-n", &coordinator, "link", "set", "eth0", "up"]));
    // Taking the link down removed the routes through it.
    run_ok(Command::new("ip").args([
        "-n",
        &coordinator,
        "route",
        "replace",
        "224.0.0.0/4",
        "dev",
        "eth0",
    ]));
    wait_event(&w, "joined", "box1", Duration::from_secs(20));
}
