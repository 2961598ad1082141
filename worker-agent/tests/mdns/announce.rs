//! **The mDNS announcement as a third-party browser sees it**: an agent
//! announces `_rlx._tcp` inside a private network namespace and
//! python-zeroconf, a real independent mDNS stack, checks the TXT schema v1
//! record, the goodbye on SIGTERM, conflict renames, re-announcements and
//! interface selection.
//!
//! The announcer runs in a child process inside the lab: this very test
//! binary, re-run with `RLX_ANNOUNCE_HELPER=1` (see
//! [`helper_announcer_process`]), because the test process itself lives in
//! the root namespace and must never start an mDNS daemon. Each test prints
//! its children's output when it fails, and the measured latencies with
//! `--nocapture`.

use rlx_agent::announce::{AnnounceOptions, Announcer, Responder, SERVICE_TYPE};
use rlx_agent::shutdown::Shutdown;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::zeroconf::{monotonic, Browser, Event};
use rlx_lab::kit::{require_lab, rerun, Proc};
use rlx_lab::{Lab, LabOptions};
use rlx_proto::caps::{DeviceInfo, NodeCaps};
use rlx_proto::txt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) const GIB: u64 = 1 << 30;

/// The SRV port the tests announce (nothing listens on it; the browser only
/// reads it).
const PORT: u16 = 9177;

/// How long a fresh announcer may take to be seen: mdns-sd probes for 750 ms
/// before announcing, and a loaded 2-core CI box builds and starts the child.
pub(crate) const SEEN_WITHIN: Duration = Duration::from_secs(10);

/// The agent's bound: after SIGTERM, the service disappears from a
/// third-party browser within 2 s.
pub(crate) const GONE_WITHIN: Duration = Duration::from_secs(2);

// ------------------------------------------------------------ the helper

/// Environment of the helper process.
const HELPER_ENV: &str = "RLX_ANNOUNCE_HELPER";
const CAPS_ENV: &str = "RLX_ANNOUNCE_CAPS";
const NAME_ENV: &str = "RLX_ANNOUNCE_NAME";
const IFACES_ENV: &str = "RLX_ANNOUNCE_IFACES";
pub(crate) const INTERVAL_ENV: &str = "RLX_ANNOUNCE_MIN_INTERVAL_MS";
pub(crate) const RESPONDER_ENV: &str = "RLX_ANNOUNCE_RESPONDER";

/// Not a test on its own: does nothing unless `RLX_ANNOUNCE_HELPER=1`. Then
/// it is the agent's announce half of run mode in miniature: announce the
/// caps in `$RLX_ANNOUNCE_CAPS`, re-read them and call `update` on SIGUSR1,
/// send goodbyes and exit 0 on SIGINT/SIGTERM. It prints `HELPER-...` marker
/// lines on stderr for the tests to wait on.
#[test]
fn helper_announcer_process() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let caps_path = PathBuf::from(std::env::var(CAPS_ENV).expect("RLX_ANNOUNCE_CAPS"));
    let read_caps = || {
        let text = std::fs::read_to_string(&caps_path).expect("caps file");
        NodeCaps::from_json(&text).expect("valid caps JSON")
    };
    let opts = AnnounceOptions {
        name: std::env::var(NAME_ENV).ok(),
        port: PORT,
        interfaces: std::env::var(IFACES_ENV)
            .ok()
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        min_interval: std::env::var(INTERVAL_ENV)
            .ok()
            .map(|ms| Duration::from_millis(ms.parse().expect("milliseconds")))
            .unwrap_or(rlx_agent::announce::MIN_REANNOUNCE_INTERVAL),
        responder: match std::env::var(RESPONDER_ENV).as_deref() {
            Ok("system") => Responder::System,
            _ => Responder::Builtin,
        },
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let stop = Shutdown::on_signals().expect("signal handlers");
        let mut usr1 = signal(SignalKind::user_defined1()).expect("SIGUSR1 handler");
        let announcer = match Announcer::start(&read_caps(), opts) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("HELPER-ERROR: {e}");
                std::process::exit(3);
            }
        };
        eprintln!("HELPER-STARTED {}", announcer.fullname());
        loop {
            tokio::select! {
                sig = stop.wait() => {
                    eprintln!("HELPER-STOPPING on {sig}");
                    break;
                }
                _ = usr1.recv() => {
                    let outcome = announcer.update(&read_caps());
                    eprintln!("HELPER-UPDATE {outcome:?}");
                }
            }
        }
        let name = announcer.instance_name();
        announcer.shutdown().await.expect("goodbye");
        eprintln!("HELPER-GOODBYE {name}");
    });
}

/// The command that runs [`helper_announcer_process`] as an announcer.
pub(crate) fn announcer(caps_file: &Path, name: Option<&str>, interfaces: &[&str]) -> Command {
    let mut cmd = rerun(module_path!(), "helper_announcer_process");
    cmd.env(HELPER_ENV, "1")
        .env(CAPS_ENV, caps_file)
        .env("RUST_LOG", "info,mdns_sd=warn");
    if let Some(n) = name {
        cmd.env(NAME_ENV, n);
    }
    if !interfaces.is_empty() {
        cmd.env(IFACES_ENV, interfaces.join(","));
    }
    cmd
}

/// The real `rlx-agent` in run mode (handshake server on `port`, mDNS
/// announcement, goodbye on SIGINT/SIGTERM), announcing `caps_file`.
fn real_agent(caps_file: &Path, name: &str, interfaces: &[&str], port: u16) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlx-agent"));
    cmd.arg("--caps-file")
        .arg(caps_file)
        .args(["--name", name, "--port", &port.to_string()])
        .env("RUST_LOG", "info,mdns_sd=warn");
    for i in interfaces {
        cmd.args(["--interface", i]);
    }
    cmd
}

// ------------------------------------------------------------- fixtures

pub(crate) fn caps() -> NodeCaps {
    NodeCaps {
        id: "5f0c1d2e3a4b5c6d".into(),
        hostname: "itest-host".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        version: "0.1.0".into(),
        cluster: Some("lab".into()),
        ckpt_dir: Some("/data/models".into()),
        cores: 16,
        ram_total: 64 * GIB,
        ram_avail: 48 * GIB,
        disk_free: 500 * GIB,
        devices: vec![DeviceInfo {
            device: "cuda".into(),
            name: "NVIDIA GeForce RTX 4090".into(),
            mem_bytes: 24 * GIB,
            unified: false,
            gflops: 82_600.0,
            available: true,
            ..Default::default()
        }],
        gflops: 410.5,
        io_mbps: 1800.0,
        ..NodeCaps::default()
    }
}

pub(crate) fn write_caps(lab: &Lab, file: &str, caps: &NodeCaps) -> PathBuf {
    let path = lab.log_dir().join(file);
    std::fs::write(&path, caps.to_json()).expect("write caps file");
    path
}

pub(crate) fn fullname(instance: &str) -> String {
    format!("{instance}.{SERVICE_TYPE}")
}

pub(crate) fn resolved_as(name: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| e.name() == name && e.resolved() && matches!(e.kind(), "added" | "updated")
}

/// Gives the announcer of `name` caps with 8 GiB free and a second GPU
/// (a material change), tells it to update (SIGUSR1), and checks that
/// `browser` sees the new TXT record.
pub(crate) fn update_to_a_second_gpu(lab: &Lab, agent: &Proc, browser: &Browser, name: &str) {
    let mut changed = caps();
    changed.ram_avail = 8 * GIB;
    let second = changed.devices[0].clone();
    changed.devices.push(second);
    write_caps(lab, "caps.json", &changed);
    let t_update = monotonic();
    agent.signal(nix::sys::signal::Signal::SIGUSR1);
    agent.expect_output("HELPER-UPDATE Ok(Announced", Duration::from_secs(5));
    let updated = browser.wait_for(SEEN_WITHIN, "the re-announced TXT", |e| {
        e.name() == name && e.txt_value("dev1").is_some()
    });
    println!(
        "MEASURED: update -> new TXT at python-zeroconf: {:.0} ms",
        (updated.t() - t_update) * 1000.0
    );
    assert_eq!(
        updated.txt_value("ramfree"),
        Some((8 * GIB).to_string()),
        "the latest caps are announced"
    );
}

/// Sends SIGTERM to `agent` and checks that `browser` sees `name` removed
/// within [`GONE_WITHIN`]; returns when SIGTERM was sent.
pub(crate) fn sigterm_and_wait_for_removal(browser: &Browser, agent: &Proc, name: &str) -> f64 {
    let t_term = monotonic();
    assert!(
        agent.signal(nix::sys::signal::Signal::SIGTERM),
        "the agent died before SIGTERM"
    );
    let gone = browser.wait_for(GONE_WITHIN + Duration::from_secs(3), "the removal", |e| {
        e.kind() == "removed" && e.name() == name
    });
    let latency = gone.t() - t_term;
    println!(
        "MEASURED: SIGTERM -> removed at python-zeroconf: {:.0} ms",
        latency * 1000.0
    );
    assert!(
        latency < GONE_WITHIN.as_secs_f64(),
        "removed {latency:.2} s after SIGTERM; the bound is {GONE_WITHIN:?}"
    );
    t_term
}

// ----------------------------------------------------------------- tests

#[test]
fn python_zeroconf_sees_the_announced_node_with_its_exact_txt_schema_v1_record() {
    if !peer::require(
        "python_zeroconf_sees_the_announced_node_with_its_exact_txt_schema_v1_record",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let caps = caps();
    let file = write_caps(&lab, "caps.json", &caps);
    let browser = Browser::start(&lab, 0);
    let t0 = monotonic();
    let agent = Proc::spawn(&lab, 0, real_agent(&file, "itest-node", &["lo"], PORT));

    let name = fullname("itest-node");
    let seen = browser.wait_for(SEEN_WITHIN, "the announced node", resolved_as(&name));
    println!(
        "MEASURED: start -> seen by python-zeroconf: {:.0} ms",
        (seen.t() - t0) * 1000.0
    );

    // The running agent adds its incarnation (random at each start).
    let inc = seen
        .txt_value("inc")
        .expect("a running agent announces its incarnation (TXT inc)");
    assert!(rlx_proto::caps::is_valid_id(&inc), "inc={inc}: 16 hex");
    let mut announced = caps.clone();
    announced.incarnation = Some(inc);
    // And its own port (`--port`, TXT agent), whether its worker listens
    // (TXT worker) and whether an SSH server answers (TXT ssh): neither
    // does in this lab.
    announced.agent_port = Some(PORT);
    announced.worker_listening = Some(false);
    announced.ssh_listening = Some(false);
    let expected = txt::to_strings(&txt::encode(&announced).expect("test caps encode"));
    assert_eq!(
        seen.txt(),
        expected,
        "the TXT record on the wire must be txt::encode's, in order"
    );
    assert_eq!(seen.txt()[0], "txtvers=1", "RFC 6763 §6.7: txtvers first");
    for (key, value) in [
        ("id", "5f0c1d2e3a4b5c6d"),
        ("cluster", "lab"),
        ("cores", "16"),
        ("ram", &(64 * GIB).to_string()),
        ("ramfree", &(48 * GIB).to_string()),
        ("disk", &(500 * GIB).to_string()),
        ("dev0", "cuda,25769803776,0,1,82600,NVIDIA GeForce RTX 4090"),
    ] {
        assert_eq!(seen.txt_value(key).as_deref(), Some(value), "TXT key {key}");
    }
    assert_eq!(
        seen.port(),
        u64::from(rlx_proto::service::DEFAULT_WORKER_PORT),
        "SRV port = the worker port (the agent's own is in TXT)"
    );
    assert_eq!(
        seen.server(),
        "itest-host-5f0c1d.local.",
        "SRV target <host>-<first 6 hex of the id>.local.: unique by construction"
    );
    assert_eq!(
        seen.addrs(),
        ["127.0.0.1"],
        "the address of the chosen interface"
    );
    drop(agent);
}

#[test]
fn sigterm_makes_the_service_disappear_from_python_zeroconf_within_two_seconds() {
    if !peer::require(
        "sigterm_makes_the_service_disappear_from_python_zeroconf_within_two_seconds",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let file = write_caps(&lab, "caps.json", &caps());
    let browser = Browser::start(&lab, 0);
    let agent = Proc::spawn(&lab, 0, real_agent(&file, "goodbye-node", &["lo"], PORT));
    let name = fullname("goodbye-node");
    browser.wait_for(SEEN_WITHIN, "the announced node", resolved_as(&name));

    let t_term = sigterm_and_wait_for_removal(&browser, &agent, &name);
    let status = agent
        .wait_timeout(Duration::from_secs(5))
        .expect("the agent exits after its goodbyes");
    println!(
        "MEASURED: SIGTERM -> agent exited: {:.0} ms (10 ms polling)",
        (monotonic() - t_term) * 1000.0
    );
    assert!(status.success(), "exit status after SIGTERM: {status}");
    agent.expect_output("goodbye sent", Duration::ZERO);
}

#[test]
fn two_agents_claiming_the_same_name_end_up_with_distinct_names_and_the_rename_is_logged() {
    if !peer::require(
        "two_agents_claiming_the_same_name_end_up_with_distinct_names_and_the_rename_is_logged",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    // Two machines started with the same --name. (Two agents announcing
    // identical records, same host and port, would not conflict at all:
    // RFC 6762 §8.2 treats identical rdata as the same record.)
    let host_a = NodeCaps {
        hostname: "host-a".into(),
        ..caps()
    };
    let host_b = NodeCaps {
        hostname: "host-b".into(),
        ..caps()
    };
    let file_a = write_caps(&lab, "a.json", &host_a);
    let file_b = write_caps(&lab, "b.json", &host_b);
    let browser = Browser::start(&lab, 0);
    let first = Proc::spawn(&lab, 0, announcer(&file_a, Some("twin"), &["lo"]));
    let name = fullname("twin");
    browser.wait_for(SEEN_WITHIN, "the first twin", resolved_as(&name));
    let second = Proc::spawn(&lab, 0, announcer(&file_b, Some("twin"), &["lo"]));

    let other = browser.wait_for(SEEN_WITHIN, "a second, renamed instance", |e| {
        e.resolved() && e.name() != name && e.name().ends_with(SERVICE_TYPE)
    });
    assert_eq!(
        other.name(),
        fullname("twin (2)"),
        "RFC 6762 §9 style rename"
    );
    second.expect_output("name conflict", Duration::from_secs(2));
    let stderr = second.stderr();
    for line in stderr.lines().filter(|l| l.contains("name conflict")) {
        println!("LOGGED: {line}");
    }
    assert!(
        !first.stderr().contains("name conflict"),
        "the first agent kept its name and has nothing to log"
    );
    assert_eq!(
        other.server(),
        "host-b-5f0c1d.local.",
        "the renamed one is host-b"
    );
    assert!(
        !browser.saw(|e| e.kind() == "removed"),
        "both stay announced"
    );

    // The goodbye withdraws the name actually announced, not the original.
    second.signal(nix::sys::signal::Signal::SIGTERM);
    browser.wait_for(GONE_WITHIN, "the renamed twin's goodbye", |e| {
        e.kind() == "removed" && e.name() == other.name()
    });
    second.expect_output("HELPER-GOODBYE twin (2)", Duration::from_secs(5));
    assert!(
        !browser.saw(|e| e.kind() == "removed" && e.name() == name),
        "the first twin is still announced"
    );
}

#[test]
fn a_material_caps_change_is_reannounced_and_a_small_drift_is_not() {
    if !peer::require(
        "a_material_caps_change_is_reannounced_and_a_small_drift_is_not",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let file = write_caps(&lab, "caps.json", &caps());
    let browser = Browser::start(&lab, 0);
    let mut cmd = announcer(&file, Some("changing"), &["lo"]);
    cmd.env(INTERVAL_ENV, "0");
    let agent = Proc::spawn(&lab, 0, cmd);
    let name = fullname("changing");
    browser.wait_for(SEEN_WITHIN, "the first announcement", resolved_as(&name));

    let mut drift = caps();
    drift.ram_avail -= GIB; // 1 GiB of 64: under the threshold
    write_caps(&lab, "caps.json", &drift);
    agent.signal(nix::sys::signal::Signal::SIGUSR1);
    agent.expect_output("HELPER-UPDATE Ok(Unchanged)", Duration::from_secs(5));

    update_to_a_second_gpu(&lab, &agent, &browser, &name);
    assert!(
        !browser.saw(|e| e.kind() == "removed" || (e.resolved() && e.name() != name)),
        "an update must look neither like a leave nor like a new node"
    );
    assert!(
        !agent.stderr().contains("name conflict"),
        "the agent must not conflict with its own earlier record"
    );
}

#[test]
fn by_default_the_agent_announces_on_eth0_with_its_address_and_sigint_says_goodbye() {
    if !peer::require(
        "by_default_the_agent_announces_on_eth0_with_its_address_and_sigint_says_goodbye",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: false,
    });
    let file = write_caps(&lab, "caps.json", &caps());
    let browser = Browser::start(&lab, 1);
    let t0 = monotonic();
    let agent = Proc::spawn(&lab, 0, announcer(&file, Some("lan-node"), &[]));
    let name = fullname("lan-node");
    let seen = browser.wait_for(SEEN_WITHIN, "the node on the LAN", resolved_as(&name));
    println!(
        "MEASURED: start -> seen across the lab LAN: {:.0} ms",
        (seen.t() - t0) * 1000.0
    );
    assert_eq!(
        seen.addrs(),
        [lab.host(0).ip.to_string()],
        "only the address of eth0 is announced"
    );

    // SIGINT (Ctrl-C) says goodbye across the LAN too.
    let t_int = monotonic();
    agent.signal(nix::sys::signal::Signal::SIGINT);
    let gone = browser.wait_for(GONE_WITHIN, "the goodbye across the LAN", |e| {
        e.kind() == "removed" && e.name() == name
    });
    println!(
        "MEASURED: SIGINT -> removed across the lab LAN: {:.0} ms",
        (gone.t() - t_int) * 1000.0
    );
    let status = agent
        .wait_timeout(Duration::from_secs(5))
        .expect("the agent exits after SIGINT");
    assert!(status.success(), "exit status after SIGINT: {status}");
}

#[test]
fn an_interface_that_comes_up_after_start_is_announced_on_and_one_that_goes_down_is_dropped() {
    if !peer::require(
        "an_interface_that_comes_up_after_start_is_announced_on_and_one_that_goes_down_is_dropped",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: false,
    });
    let file = write_caps(&lab, "caps.json", &caps());
    let host = lab.host(0).clone();
    let ip = |args: &str| {
        let out = Command::new("ip")
            .args(["-n", &host.ns])
            .args(args.split(' '))
            .output()
            .expect("ip");
        assert!(
            out.status.success(),
            "ip -n {} {args}: {}",
            host.ns,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip("link set eth0 down");
    let browser = Browser::start(&lab, 1);
    let agent = Proc::spawn(&lab, 0, announcer(&file, Some("late-link"), &[]));
    agent.expect_output("no interface to announce on yet", Duration::from_secs(10));
    agent.expect_output("HELPER-STARTED", Duration::from_secs(2));

    let t_up = monotonic();
    ip("link set eth0 up");
    // Bringing a link down drops its routes; restore the lab's multicast route.
    ip("route replace 224.0.0.0/4 dev eth0");
    let name = fullname("late-link");
    let seen = browser.wait_for(
        Duration::from_secs(15),
        "the node once eth0 is up",
        resolved_as(&name),
    );
    println!(
        "MEASURED: link up -> seen by python-zeroconf: {:.0} ms",
        (seen.t() - t_up) * 1000.0
    );
    assert_eq!(seen.addrs(), [host.ip.to_string()]);
    agent.expect_output("interface is up and now used", Duration::from_secs(2));

    // And going: the address is withdrawn from the service at the next check.
    let t_down = monotonic();
    ip("link set eth0 down");
    agent.expect_output("address gone; no longer announced", Duration::from_secs(15));
    println!(
        "MEASURED: link down -> address withdrawn by the agent: {:.0} ms (10 ms polling)",
        (monotonic() - t_down) * 1000.0
    );
    assert!(
        agent.try_wait().is_none(),
        "the agent keeps running without links"
    );
}

#[test]
fn naming_a_missing_interface_fails_with_the_list_of_available_ones() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let file = write_caps(&lab, "caps.json", &caps());
    let agent = Proc::spawn(&lab, 0, announcer(&file, None, &["nope0"]));
    let status = agent
        .wait_timeout(Duration::from_secs(10))
        .expect("the agent gives up at once");
    assert_eq!(status.code(), Some(3), "{}", agent.dump());
    let err = agent.stderr();
    assert!(
        err.contains("HELPER-ERROR") && err.contains("nope0") && err.contains("lo"),
        "the error names the missing interface and the available ones: {err}"
    );
}
