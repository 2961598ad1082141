//! **The one-shot mDNS browse against real responders**, all inside private
//! networks the tests build ([`rlx_lab`]): python-zeroconf
//! publishers (a third-party stack), mdns-sd responders like the agent's,
//! a malformed announcement, packet loss on the coordinator's link, and an
//! IPv6-only publisher.
//!
//! The coordinator side is the real browse code in its own process
//! (`examples/browse_once`, which prints the browse as JSON) run with `ip
//! netns exec` and `RLX_NETNS_GUARD=1`; this test process stays in the root
//! namespace and never opens an mDNS socket itself. Responders written in
//! Rust are this test binary re-run as [`helper_mdns_responder`].

use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, discover};
use rlx_lab::kit::{agent_bin, eventually, require_lab, run_ok, Proc, PYTHON};
use rlx_lab::Lab;
use rlx_proto::caps::{DeviceInfo, NodeCaps};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// How long a publisher may take to be announced: python-zeroconf and
/// mdns-sd probe for about 750 ms first, and a loaded 2-core box starts
/// Python slowly.
const READY: Duration = Duration::from_secs(20);

/// The browse window the loss tests use, and the bound they promise: every
/// agent found within this many ms of the start at 10% loss.
const LOSSY_WINDOW_MS: u64 = 3000;

/// One service for [`zeroconf`] to publish.
struct Svc {
    /// Instance name; the host is `<name>.local.`.
    name: String,
    port: u16,
    /// TXT pairs in announcement order.
    txt: Vec<(&'static str, String)>,
    /// Addresses announced for the host.
    addrs: Vec<String>,
}

impl Svc {
    fn new(name: &str, port: u16, txt: Vec<(&'static str, String)>, addrs: &[String]) -> Svc {
        Svc {
            name: name.into(),
            port,
            txt,
            addrs: addrs.to_vec(),
        }
    }
}

/// A python-zeroconf publisher of `services` on `interfaces` (addresses, as
/// python-zeroconf takes them; empty for all) for IP version `v4`, `v6` or
/// `all`. It prints READY once every service is registered (probed and
/// announced) and unregisters on SIGTERM.
fn zeroconf(
    lab: &Lab,
    i: usize,
    interfaces: &[String],
    ip_version: &str,
    services: &[Svc],
) -> Proc {
    let script = lab.log_dir().join("publish.py");
    std::fs::write(&script, PUBLISH_PY).expect("write the publisher script");
    let services: Vec<Value> = services
        .iter()
        .map(|s| {
            // A list of pairs keeps `txtvers` first (RFC 6763 §6.7).
            serde_json::json!({"name": s.name, "host": format!("{}.local.", s.name),
                               "port": s.port, "txt": s.txt, "addrs": s.addrs})
        })
        .collect();
    let spec = serde_json::json!({"interfaces": interfaces, "ip_version": ip_version,
                                  "services": services});
    let mut cmd = Command::new(PYTHON);
    cmd.arg(&script).arg(spec.to_string());
    let p = Proc::spawn(lab, i, cmd);
    p.expect_output("READY", READY);
    p
}

/// The publisher: python-zeroconf's asyncio API, every service registered
/// concurrently (each probes for about 750 ms).
const PUBLISH_PY: &str = r#"
import asyncio, json, signal, sys
from zeroconf import InterfaceChoice, IPVersion
from zeroconf.asyncio import AsyncZeroconf, AsyncServiceInfo

async def main():
    spec = json.loads(sys.argv[1])
    ipv = {"v4": IPVersion.V4Only, "v6": IPVersion.V6Only, "all": IPVersion.All}[spec["ip_version"]]
    aiozc = AsyncZeroconf(interfaces=spec["interfaces"] or InterfaceChoice.All, ip_version=ipv)
    infos = [AsyncServiceInfo("_rlx._tcp.local.", s["name"] + "._rlx._tcp.local.",
                              port=s["port"], properties=dict(s["txt"]), server=s["host"],
                              parsed_addresses=s["addrs"])
             for s in spec["services"]]
    tasks = await asyncio.gather(*(aiozc.async_register_service(i) for i in infos))
    await asyncio.gather(*tasks)
    print("READY", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await aiozc.async_unregister_all_services()
    await aiozc.async_close()

asyncio.run(main())
"#;

/// Schema v1 TXT pairs for a box with `cores` and one 24 GB CUDA GPU.
fn txt_v1(id: u32, cores: &str) -> Vec<(&'static str, String)> {
    vec![
        ("txtvers", "1".into()),
        ("id", format!("{id:016x}")),
        ("cores", cores.into()),
        ("ram", "68719476736".into()),
        ("dev0", "cuda,25769803776,0,1,0,RTX 4090".into()),
    ]
}

// ---------------------------------------------------------------- responders

const RESPONDER_ENV: &str = "RLX_MDNS_TEST_RESPONDER";

/// Not a test on its own: does nothing unless `RLX_MDNS_TEST_RESPONDER`
/// holds a JSON spec `{"iface", "ip", "services": [{"name", "port",
/// "caps"}]}`. Then it is an mdns-sd responder, as the agent's announcer
/// is: it registers each service with its caps as TXT schema v1 and prints
/// `RESPONDER-ANNOUNCED` once mdns-sd has announced them all, then runs
/// until killed.
#[test]
fn helper_mdns_responder() {
    let Ok(spec) = std::env::var(RESPONDER_ENV) else {
        return;
    };
    rlx_net::netguard::ensure_private_netns("the test responder").expect("private netns");
    let spec: Value = serde_json::from_str(&spec).expect("responder spec");
    let iface = spec["iface"].as_str().unwrap();
    let ip = spec["ip"].as_str().unwrap();
    let daemon = mdns_sd::ServiceDaemon::new().expect("mdns-sd daemon");
    daemon.disable_interface(mdns_sd::IfKind::All).unwrap();
    daemon.enable_interface(iface).unwrap();
    let monitor = daemon.monitor().unwrap();
    let services = spec["services"].as_array().unwrap();
    for s in services {
        let name = s["name"].as_str().unwrap();
        let caps: NodeCaps = serde_json::from_value(s["caps"].clone()).unwrap();
        let props = rlx_proto::txt::encode(&caps).expect("encodable caps");
        let info = mdns_sd::ServiceInfo::new(
            "_rlx._tcp.local.",
            name,
            &format!("{name}.local."),
            ip,
            s["port"].as_u64().unwrap() as u16,
            &props[..],
        )
        .expect("service info");
        daemon.register(info).expect("register");
    }
    let mut announced = std::collections::HashSet::new();
    while announced.len() < services.len() {
        if let Ok(mdns_sd::DaemonEvent::Announce(fullname, _)) = monitor.recv() {
            announced.insert(fullname);
        }
    }
    eprintln!("RESPONDER-ANNOUNCED");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Caps of a simulated box: `cores`, and `gpus` CUDA GPUs of 24 GB.
fn caps(id: usize, cores: u32, gpus: usize) -> NodeCaps {
    NodeCaps {
        id: format!("{id:016x}"),
        os: "linux".into(),
        arch: "x86_64".into(),
        cores,
        ram_total: 64 << 30,
        ram_avail: 48 << 30,
        devices: (0..gpus)
            .map(|_| DeviceInfo {
                device: "cuda".into(),
                name: "RTX 4090".into(),
                mem_bytes: 24 << 30,
                unified: false,
                gflops: 0.0,
                available: true,
                ..Default::default()
            })
            .collect(),
        ..NodeCaps::default()
    }
}

/// Starts an mdns-sd responder in host `i` announcing `caps` as instance
/// `node<i>` on port 9100, and waits until it has announced.
fn responder(lab: &Lab, i: usize, caps: &NodeCaps) -> Proc {
    let h = lab.host(i);
    let spec = serde_json::json!({
        "iface": h.iface, "ip": h.ip.to_string(),
        "services": [{"name": format!("node{i}"), "port": 9100, "caps": caps}],
    });
    let mut cmd = kit::rerun(module_path!(), "helper_mdns_responder");
    cmd.env(RESPONDER_ENV, spec.to_string());
    Proc::spawn(lab, i, cmd)
}

/// Starts responders in hosts `from..lab.hosts().len()` and waits for all.
fn responders(lab: &Lab, from: usize) -> Vec<Proc> {
    let procs: Vec<Proc> = (from..lab.hosts().len())
        .map(|i| responder(lab, i, &caps(i, 8 + i as u32, 1 + i % 3)))
        .collect();
    for p in &procs {
        p.expect_output("RESPONDER-ANNOUNCED", READY);
    }
    procs
}

// ---------------------------------------------------------------- tests

#[test]
fn python_zeroconf_publishers_on_a_lan_are_all_found_with_their_caps_and_addresses() {
    if !peer::require(
        "python_zeroconf_publishers_on_a_lan_are_all_found_with_their_caps_and_addresses",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let _pubs: Vec<Proc> = (1..4)
        .map(|i| {
            let ip = lab.host(i).ip.to_string();
            let svc = Svc::new(
                &format!("zc{i}"),
                9100 + i as u16,
                txt_v1(i as u32, "16"),
                std::slice::from_ref(&ip),
            );
            zeroconf(&lab, i, &[ip], "v4", &[svc])
        })
        .collect();
    // No --interface: the default rule picks eth0 (lo is skipped).
    let v = discover::browse_once(&lab, 0, &["--browse-ms", "2000"]);
    let found = discover::sightings_by_host(&v);
    assert_eq!(found.len(), 3, "all three publishers: {v:#}");
    for i in 1..4 {
        let s = &found[&format!("zc{i}")];
        assert_eq!(
            s["addr"],
            format!("{}:{}", lab.host(i).ip, 9100 + i),
            "{s:#}"
        );
        assert_eq!(s["heard_on"], "eth0");
        assert_eq!(s["evidence"], "txt");
        assert_eq!(s["caps"]["cores"], 16);
        assert_eq!(s["caps"]["devices"][0]["device"], "cuda");
        assert_eq!(s["caps"]["devices"][0]["mem_bytes"], 25769803776u64);
        assert_eq!(s["caps"]["hostname"], format!("zc{i}"));
    }
    assert_eq!(v["problems"], serde_json::json!([]), "{v:#}");
    assert_eq!(
        v["stats"]["stopped_early"], true,
        "a lossless LAN where all answer stops early: {v:#}"
    );
}

#[test]
fn a_malformed_announcement_is_reported_by_key_and_instance_while_the_others_are_found() {
    if !peer::require(
        "a_malformed_announcement_is_reported_by_key_and_instance_while_the_others_are_found",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let lo = vec!["127.0.0.1".to_string()];
    let services = [
        Svc::new("good-a", 9101, txt_v1(1, "8"), &lo),
        Svc::new("broken", 9102, txt_v1(2, "abc"), &lo),
        Svc::new("good-b", 9103, txt_v1(3, "32"), &lo),
    ];
    let _p = zeroconf(&lab, 0, &lo, "v4", &services);
    let v = discover::browse_once(&lab, 0, &["--interface", "lo", "--browse-ms", "2000"]);
    let found = discover::sightings_by_host(&v);
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        ["good-a", "good-b"],
        "the good ones are unaffected: {v:#}"
    );
    assert_eq!(found["good-b"]["caps"]["cores"], 32);
    assert_eq!(found["good-a"]["addr"], "127.0.0.1:9101");
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{v:#}");
    assert_eq!(problems[0]["host"], "broken");
    let reason = problems[0]["reason"].as_str().unwrap();
    for needle in ["`cores`", "abc", "broken"] {
        assert!(
            reason.contains(needle),
            "{needle:?} missing from {reason:?}"
        );
    }
}

#[test]
fn mdns_sd_responders_like_the_agents_are_found_with_the_devices_they_announce() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(6);
    let _r = responders(&lab, 1);
    let v = discover::browse_once(&lab, 0, &["--browse-ms", "2000"]);
    let found = discover::sightings_by_host(&v);
    assert_eq!(found.len(), 5, "{v:#}");
    for i in 1..6 {
        let s = &found[&format!("node{i}")];
        assert_eq!(s["addr"], format!("{}:9100", lab.host(i).ip));
        assert_eq!(s["caps"]["cores"], 8 + i);
        assert_eq!(
            s["caps"]["devices"].as_array().unwrap().len(),
            1 + i % 3,
            "{s:#}"
        );
        assert_eq!(s["caps"]["id"], format!("{i:016x}"));
    }
    assert_eq!(v["stats"]["stopped_early"], true, "{v:#}");
    assert!(
        v["stats"]["listened_ms"].as_u64().unwrap() < 1000,
        "a clean LAN must not cost the whole window: {v:#}"
    );
}

/// The real agent: `rlx-agent --caps-file` in each host, announcing over
/// its own mdns-sd announcer; the browse finds each with the devices from
/// its caps file.
#[test]
fn real_rlx_agents_are_found_with_the_devices_of_their_caps_files() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let _agents: Vec<Proc> = (1..4)
        .map(|i| {
            let file = lab.log_dir().join(format!("caps{i}.json"));
            let c = caps(i, 4 * i as u32, i);
            std::fs::write(&file, serde_json::to_string(&c).unwrap()).unwrap();
            let mut cmd = Command::new(agent_bin());
            cmd.arg("--caps-file")
                .arg(&file)
                .args(["--name", &format!("agent{i}"), "--interface", "eth0"])
                .env("RUST_LOG", "info");
            let p = Proc::spawn(&lab, i, cmd);
            p.expect_output("announcing _rlx._tcp", READY);
            p
        })
        .collect();
    // An agent is visible once its mdns-sd probing is over (about 1 s).
    let v = eventually(READY, "three agents found by one browse", || {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "1000"]);
        if discover::sightings_by_host(&v).len() == 3 {
            Ok(v)
        } else {
            Err(format!("{v:#}"))
        }
    });
    let found = discover::sightings_by_host(&v);
    for i in 1..4 {
        let s = &found[&format!("agent{i}")];
        assert_eq!(s["addr"], format!("{}:9100", lab.host(i).ip), "{s:#}");
        assert_eq!(s["caps"]["cores"], 4 * i);
        assert_eq!(s["caps"]["devices"].as_array().unwrap().len(), i);
        assert_eq!(s["caps"]["id"], format!("{i:016x}"));
    }
}

/// Guards against a late answerer left out: one of six agents gets the CPU
/// only 100 ms of every 400 ms (a loaded box; a Wi-Fi client in power save
/// hears multicast as late), and a browse that stopped at 250 ms, once the
/// five fast agents looked complete, wrote five nodes in one run of five,
/// with no warning. Every run of 20 must find all six, and a stop must say
/// what it cannot see.
#[test]
fn an_agent_that_answers_300_ms_late_is_found_in_every_run() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(7);
    let agents: Vec<Proc> = (1..7)
        .map(|i| {
            let file = lab.log_dir().join(format!("caps{i}.json"));
            let c = caps(i, 8, 1);
            std::fs::write(&file, serde_json::to_string(&c).unwrap()).unwrap();
            let mut cmd = Command::new(agent_bin());
            cmd.arg("--caps-file")
                .arg(&file)
                .args(["--name", &format!("agent{i}"), "--interface", "eth0"])
                .args(["--no-bench"])
                .env("RUST_LOG", "info");
            let p = Proc::spawn(&lab, i, cmd);
            p.expect_output("announcing _rlx._tcp", READY);
            p
        })
        .collect();
    eventually(READY, "six agents found by one browse", || {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "2000"]);
        let n = discover::sightings_by_host(&v).len();
        (n == 6).then_some(()).ok_or(format!("{n} found: {v:#}"))
    });
    // The slow one: stopped 300 ms, running 100 ms, until the test ends.
    let pid = Pid::from_raw(agents[5].0.pid() as i32);
    let run = Arc::new(AtomicBool::new(true));
    let starver = {
        let run = Arc::clone(&run);
        std::thread::spawn(move || {
            while run.load(Ordering::Relaxed) {
                let _ = kill(pid, Signal::SIGSTOP);
                std::thread::sleep(Duration::from_millis(300));
                let _ = kill(pid, Signal::SIGCONT);
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = kill(pid, Signal::SIGCONT);
        })
    };
    // 20 runs: the issue's bound; a stop that missed the late agent 1 time
    // in 5 (as before) would pass only about once in 90 tries (0.8^20).
    let mut runs = Vec::new();
    for _ in 0..20 {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "3000"]);
        let found = discover::sightings_by_host(&v).len();
        let listened = v["stats"]["listened_ms"].as_u64().unwrap_or(0);
        let what = v["attempts"][0]["what"].as_str().unwrap_or("").to_string();
        runs.push((found, listened, what));
    }
    run.store(false, Ordering::Relaxed);
    starver.join().unwrap();
    eprintln!(
        "late answerer: (found, listened ms) per run: {:?}",
        runs.iter().map(|(f, l, _)| (*f, *l)).collect::<Vec<_>>()
    );
    for (found, _, what) in &runs {
        assert_eq!(*found, 6, "every run finds the late agent: {what}");
        if what.contains("stopped early") {
            assert!(
                what.contains("would be missed"),
                "a stop says what it cannot see: {what}"
            );
        }
    }
}

/// avahi-daemon in host `i` ([`Avahi`]) publishing `args` with
/// `avahi-publish -s`. Stopped on drop in the order of the pair: the
/// publisher, then avahi and its bus.
fn avahi_publish(lab: &Lab, i: usize, args: &[&str]) -> (Proc, Avahi) {
    let avahi = Avahi::start(lab, i, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let publish = avahi.publish(lab, args).unwrap_or_else(|e| panic!("{e}"));
    (publish, avahi)
}

/// The wire contract's own example: a node announced by hand with
/// `avahi-publish` (DESIGN.md) is found with the caps of its TXT record.
#[test]
fn a_node_announced_by_hand_with_avahi_publish_is_found_with_its_txt_caps() {
    if !peer::require(
        "a_node_announced_by_hand_with_avahi_publish_is_found_with_its_txt_caps",
        &[Peer::Avahi],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let _avahi = avahi_publish(
        &lab,
        1,
        &[
            "handbox",
            "_rlx._tcp",
            "9100",
            "txtvers=1",
            "cores=16",
            "dev0=cuda,25769803776,0,1,0,RTX 4090",
        ],
    );
    let v = eventually(READY, "the avahi service found", || {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "1000"]);
        if discover::sightings_by_host(&v).contains_key("handbox") {
            Ok(v)
        } else {
            Err(format!("{v:#}"))
        }
    });
    let s = &discover::sightings_by_host(&v)["handbox"];
    assert_eq!(s["addr"], format!("{}:9100", lab.host(1).ip), "{s:#}");
    assert_eq!(s["caps"]["cores"], 16);
    assert_eq!(s["caps"]["devices"][0]["name"], "RTX 4090");
    assert_eq!(s["caps"]["devices"][0]["mem_bytes"], 25769803776u64);
}

/// 10% random loss on the coordinator's link, both directions (ARP too):
/// every agent is still found within [`LOSSY_WINDOW_MS`], three runs in a
/// row, and a browse that heard late answers does not claim the network was
/// clean: it listened to the end, or stopped on its loss estimate and says
/// so.
#[test]
fn with_ten_percent_loss_on_the_coordinators_link_every_agent_is_found_within_the_window() {
    if !peer::require(
        "with_ten_percent_loss_on_the_coordinators_link_every_agent_is_found_within_the_window",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(11);
    let _r = responders(&lab, 1);
    lab.set_loss(0, 10).expect("loss");
    let window = LOSSY_WINDOW_MS.to_string();
    for run in 0..3 {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", &window]);
        let found = discover::sightings_by_host(&v);
        assert_eq!(found.len(), 10, "run {run}: {v:#}");
        for s in found.values() {
            assert!(
                s["found_ms"].as_u64().unwrap() <= LOSSY_WINDOW_MS,
                "run {run}: {s:#}"
            );
        }
        let late = v["stats"]["late"].as_u64().unwrap();
        if late > 0 && v["stats"]["stopped_early"] == true {
            assert_eq!(
                v["stats"]["stop_rule"], "loss estimate",
                "late answers mean loss: not a clean network: {v:#}"
            );
            let what = v["attempts"][0]["what"].as_str().unwrap();
            assert!(what.contains("loss estimate"), "{what}");
            assert!(v["stats"]["expected_missing"].as_f64().unwrap() < 0.01);
        }
    }
}

#[test]
fn an_ipv6_only_publisher_is_found_at_a_bracketed_ipv6_address() {
    if !peer::require(
        "an_ipv6_only_publisher_is_found_at_a_bracketed_ipv6_address",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(rlx_lab::LabOptions {
        hosts: 2,
        ipv6: true,
    });
    let v6 = lab.host(1).ipv6.expect("lab host with IPv6").to_string();
    // No interface list: python-zeroconf then uses every interface.
    let _p = zeroconf(
        &lab,
        1,
        &[],
        "v6",
        &[Svc::new(
            "six",
            9100,
            txt_v1(6, "4"),
            std::slice::from_ref(&v6),
        )],
    );
    let v = discover::browse_once(&lab, 0, &["--interface", "eth0", "--browse-ms", "2000"]);
    let found = discover::sightings_by_host(&v);
    let s = found
        .get("six")
        .unwrap_or_else(|| panic!("not found: {v:#}"));
    assert_eq!(s["addr"], format!("[{v6}]:9100"), "{s:#}");
    assert_eq!(s["ip"], v6);
    assert_eq!(s["caps"]["cores"], 4);
    assert!(
        v["stats"]["legacy_replies"].as_u64().unwrap() > 0,
        "the IPv6 legacy query socket got no reply: {v:#}"
    );
}

/// Guards against an IPv6-only LAN waiting out the 1.1 s floor meant for hosts
/// that cannot repair a lost neighbour exchange: there the coordinator
/// announces its address by unsolicited Neighbor Advertisements, as it does by
/// gratuitous ARP on IPv4, so the same early stop applies with the same safety
/// argument.
#[test]
fn on_an_ipv6_only_lan_the_browse_stops_as_early_as_on_ipv4() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(rlx_lab::LabOptions {
        hosts: 2,
        ipv6: true,
    });
    for i in 0..2 {
        lab.exec(i, "ip", &["-4", "addr", "flush", "dev", "eth0"])
            .unwrap();
    }
    let v6 = lab.host(1).ipv6.expect("lab host with IPv6").to_string();
    let spec = serde_json::json!({
        "iface": lab.host(1).iface, "ip": v6,
        "services": [{"name": "six", "port": 9100, "caps": caps(6, 4, 1)}],
    });
    let mut cmd = kit::rerun(module_path!(), "helper_mdns_responder");
    cmd.env(RESPONDER_ENV, spec.to_string());
    let p = Proc::spawn(&lab, 1, cmd);
    p.expect_output("RESPONDER-ANNOUNCED", READY);
    let v = discover::browse_once(&lab, 0, &["--interface", "eth0", "--browse-ms", "3000"]);
    let s = discover::sightings_by_host(&v)
        .get("six")
        .cloned()
        .unwrap_or_else(|| panic!("not found: {v:#}"));
    assert_eq!(s["addr"], format!("[{v6}]:9100"), "{s:#}");
    let st = &v["stats"];
    assert_eq!(st["stop_rule"], "clean", "a clean LAN stops early: {st:#}");
    assert_eq!(
        st["early_point_ms"], 500,
        "the floor of a host that can announce itself, as on IPv4 (LATE_ANSWER + QUIET): {st:#}"
    );
    assert!(
        st["na_announcements"].as_u64().unwrap() > 0,
        "our address was advertised: {st:#}"
    );
    assert_eq!(st["arp_announcements"], 0, "no IPv4 here: {st:#}");
}

#[test]
fn an_empty_network_is_browsed_for_the_whole_window_and_says_so() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let v = discover::browse_once(&lab, 0, &["--browse-ms", "400"]);
    assert_eq!(v["sightings"], serde_json::json!([]));
    assert_eq!(v["stats"]["stopped_early"], false);
    assert!(v["stats"]["listened_ms"].as_u64().unwrap() >= 400, "{v:#}");
    let what = v["attempts"][0]["what"].as_str().unwrap();
    assert!(
        what.contains("eth0") && what.contains("nothing answered"),
        "{what}"
    );
}

#[test]
fn the_browse_refuses_to_run_in_the_root_namespace_under_the_guard() {
    // Runs the coordinator in *this* (root) namespace with the guard on: it
    // must refuse before opening any socket.
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    if own.to_string_lossy() != "net:[4026531833]" {
        eprintln!("SKIP: not in the initial network namespace ({own:?})");
        return;
    }
    // The interface does not exist, so even a broken guard would fail on
    // it before any socket is opened: nothing can reach the real network.
    let out = Command::new(kit::example_bin("browse_once"))
        .args(["--interface", "rlx-no-such-if"])
        .env("RLX_NETNS_GUARD", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to run an mDNS browse"), "{err}");
}

/// Measurement, not a check (run with `--ignored --nocapture`): 50 mdns-sd
/// responders, one per host; browses lossless, then at 20% loss on the
/// coordinator's link with every ARP cache flushed before each run (the
/// worst case: each unicast reply needs ARP, and ARP is lost too). Prints
/// when the last agent was resolved and how long each browse listened.
#[test]
#[ignore]
fn measure_fifty_responders_lossless_and_at_twenty_percent_loss() {
    if !peer::require(
        "measure_fifty_responders_lossless_and_at_twenty_percent_loss",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let runs: usize = std::env::var("RLX_MEASURE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let lab = labs.hosts(51);
    let _r = responders(&lab, 1);
    let flush_arp = || {
        for i in 0..lab.hosts().len() {
            run_ok(Command::new("ip").args(["-n", &lab.host(i).ns, "neigh", "flush", "all"]));
        }
    };
    // Without CAP_NET_RAW (an ordinary user) the browse cannot send ARP
    // announcements: measured too, by dropping the capability.
    let browse_as = |unprivileged: bool, args: &[&str]| -> Value {
        if !unprivileged {
            return discover::browse_once(&lab, 0, args);
        }
        let mut cmd = lab.command(0, "setpriv");
        cmd.args(["--bounding-set", "-net_raw", "--inh-caps", "-net_raw", "--"])
            .arg(kit::example_bin("browse_once"))
            .args(args);
        serde_json::from_slice(&run_ok(&mut cmd).stdout).expect("browse JSON")
    };
    let measure = |label: &str, unprivileged: bool, args: &[&str]| {
        let mut complete = 0;
        for run in 0..runs {
            flush_arp();
            let v = browse_as(unprivileged, args);
            let found = discover::sightings_by_host(&v);
            let last = found
                .values()
                .map(|s| s["found_ms"].as_u64().unwrap())
                .max()
                .unwrap_or(0);
            complete += usize::from(found.len() == 50);
            eprintln!(
                "{label} run {run}: {}/50, last resolved at {last} ms, listened {} ms, \
                 stopped early {}, late {}, legacy queries {}, ARP announcements {}",
                found.len(),
                v["stats"]["listened_ms"],
                v["stats"]["stopped_early"],
                v["stats"]["late"],
                v["stats"]["legacy_queries"],
                v["stats"]["arp_announcements"],
            );
        }
        eprintln!("{label}: {complete}/{runs} runs found 50/50");
    };
    measure("lossless", false, &["--browse-ms", "3000"]);
    lab.set_loss(0, 20).expect("loss");
    measure("20% loss, cold ARP", false, &["--browse-ms", "3000"]);
    measure(
        "20% loss, cold ARP, no CAP_NET_RAW",
        true,
        &["--browse-ms", "3000"],
    );
}
