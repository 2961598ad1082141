//! The real `rlx-agent` binary as the RLX runtime runs it: `rlx-distributed`
//! 0.2.19 (`src/cluster/caps.rs`, `probe_remote`) runs `ssh HOST <bin>
//! --probe --addr HOST:PORT --ckpt DIR`, takes the first stdout line that
//! starts with `{` and reads it as its own `NodeCaps`, whose fields are
//! all required but the device's `gflops` and `available`; unknown fields
//! are ignored. The runtime's types are copied below ([`RuntimeCaps`]), so
//! that a field the agent stops printing, or prints with another type,
//! fails here.

use crate::cli::{agent, stdout_caps};
use serde::Deserialize;
use std::net::TcpListener;
use std::path::Path;

/// `rlx_distributed::cluster::caps::DeviceInfo` (0.2.19), field for field.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct RuntimeDevice {
    device: String,
    name: String,
    mem_bytes: u64,
    unified: bool,
    #[serde(default)]
    gflops: f64,
    #[serde(default = "yes")]
    available: bool,
}

fn yes() -> bool {
    true
}

/// `rlx_distributed::cluster::caps::NodeCaps` (0.2.19), field for field.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct RuntimeCaps {
    addr: String,
    os: String,
    cores: usize,
    ram_total: u64,
    ram_avail: u64,
    disk_free: u64,
    devices: Vec<RuntimeDevice>,
    gflops: f64,
    io_mbps: f64,
}

/// A simulated node with a GPU, named `sim-1`.
const CAPS: &str = r#"{"id":"5f0c1d2e3a4b5c6d","hostname":"sim-1","os":"linux","arch":"x86_64",
    "cores":32,"ram_total":137438953472,"ram_avail":120000000000,"disk_free":900000000000,
    "devices":[{"device":"cpu","name":"EPYC","mem_bytes":0,"unified":true},
               {"device":"cuda","name":"NVIDIA RTX 4090","mem_bytes":25769803776}]}"#;

fn caps_file(dir: &Path, json: &str) -> std::ffi::OsString {
    let f = dir.join("node.json");
    std::fs::write(&f, json).unwrap();
    f.into_os_string()
}

/// No `/etc/rlx/agent.toml` of the machine running the tests.
const NO_CONFIG: (&str, &str) = ("RLX_AGENT_CONFIG", "/dev/null");

/// The line the runtime reads, found as it finds it.
fn runtime_line(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("")
        .to_string()
}

#[test]
fn the_runtimes_probe_command_prints_one_json_line_that_the_runtimes_node_caps_reads() {
    let dir = tempfile::tempdir().unwrap();
    let file = caps_file(dir.path(), CAPS);
    let (out, report) = agent(
        [
            "--probe".into(),
            "--addr".into(),
            "gpu-a.lab:9100".into(),
            "--ckpt".into(),
            dir.path().as_os_str().to_owned(),
            "--caps-file".into(),
            file,
            "--no-bench".into(),
        ],
        &[NO_CONFIG],
    );
    let caps = stdout_caps(&out, &report);
    assert_eq!(caps.addr, "gpu-a.lab:9100", "--addr as given\n{report}");
    let line = runtime_line(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    // The runtime's required fields and their JSON types, checked one by
    // one so that a failure names the field.
    let unsigned = |k: &str, at: &serde_json::Value| {
        assert!(at[k].is_u64(), "`{k}` must be an unsigned integer: {at}")
    };
    assert!(v["addr"].is_string() && v["os"].is_string(), "{line}");
    for k in ["cores", "ram_total", "ram_avail", "disk_free"] {
        unsigned(k, &v);
    }
    for k in ["gflops", "io_mbps"] {
        assert!(v[k].is_number(), "`{k}` must be a number: {line}");
    }
    let devices = v["devices"].as_array().expect("`devices` is an array");
    assert_eq!(devices.len(), 2, "{line}");
    for d in devices {
        assert!(d["device"].is_string() && d["name"].is_string(), "{d}");
        unsigned("mem_bytes", d);
        assert!(
            d["unified"].is_boolean(),
            "`unified` must be a boolean: {d}"
        );
    }
    // And read by the runtime's own types.
    let rt: RuntimeCaps = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the runtime could not read the probe: {e}\n{report}"));
    assert_eq!(
        (rt.addr.as_str(), rt.cores, rt.devices[1].device.as_str()),
        ("gpu-a.lab:9100", 32, "cuda"),
        "{report}"
    );
}

/// The real probe (not a caps file) too: `disk_free` is measured where
/// `--ckpt` points, as the runtime's own probe measures it there.
#[test]
fn a_real_probe_read_by_the_runtime_measures_disk_free_at_the_ckpt_path() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (out, report) = agent(
        [
            "--probe".into(),
            "--addr".into(),
            "[fd00::5]:9100".into(),
            "--ckpt".into(),
            dir.path().as_os_str().to_owned(),
            "--no-bench".into(),
            "--state-dir".into(),
            state.path().as_os_str().to_owned(),
        ],
        &[NO_CONFIG],
    );
    let caps = stdout_caps(&out, &report);
    let rt: RuntimeCaps = serde_json::from_str(&runtime_line(&out.stdout))
        .unwrap_or_else(|e| panic!("the runtime could not read the probe: {e}\n{report}"));
    assert_eq!(rt.addr, "[fd00::5]:9100", "{report}");
    assert_eq!(
        caps.ckpt_dir.as_deref(),
        Some(dir.path().to_str().unwrap()),
        "{report}"
    );
    assert!(
        rt.disk_free > 0,
        "free space of the file system holding {}\n{report}",
        dir.path().display()
    );
}

#[test]
fn the_port_of_addr_is_the_worker_port_the_probe_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = caps_file(dir.path(), CAPS);
    let worker = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = worker.local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["--probe".into(), "--caps-file".into(), file.clone()];
        args.extend(["--addr", addr.as_str()].map(Into::into));
        args.extend(extra.iter().map(Into::into));
        let (out, report) = agent(args, env);
        (stdout_caps(&out, &report), report)
    };
    let (caps, report) = run(&[], &[NO_CONFIG]);
    assert_eq!(
        (caps.worker_port, caps.worker_listening),
        (Some(port), Some(true)),
        "the listener on --addr's port was found\n{report}"
    );
    assert_eq!(caps.addr, addr);
    // The variable describes the box; --addr this call: --addr wins.
    let (caps, report) = run(&[], &[NO_CONFIG, ("RLX_AGENT_WORKER_PORT", "9")]);
    assert_eq!(caps.worker_port, Some(port), "{report}");
    // --worker-port on the command line wins over --addr's port.
    let (caps, report) = run(&["--worker-port", "9"], &[NO_CONFIG]);
    assert_eq!(
        (caps.worker_port, caps.worker_listening, caps.addr.as_str()),
        (Some(9), Some(false), addr.as_str()),
        "{report}"
    );
}

/// The runtime needs `addr` in every line it reads, so the probe always
/// prints one: this host's name and the worker port.
#[test]
fn without_addr_the_probe_prints_the_host_name_and_the_worker_port() {
    let dir = tempfile::tempdir().unwrap();
    let file = caps_file(dir.path(), CAPS);
    let (out, report) = agent(
        [
            "--probe".as_ref(),
            "--caps-file".as_ref(),
            file.as_os_str(),
            "--worker-port".as_ref(),
            "9200".as_ref(),
        ],
        &[NO_CONFIG],
    );
    assert_eq!(stdout_caps(&out, &report).addr, "sim-1:9200", "{report}");
    // A caps file without a host name: the system's.
    let bare = caps_file(dir.path(), r#"{"os":"linux","cores":4,"ram_total":1000}"#);
    let (out, report) = agent(
        ["--probe".as_ref(), "--caps-file".as_ref(), bare.as_os_str()],
        &[NO_CONFIG],
    );
    let rt: RuntimeCaps = serde_json::from_str(&runtime_line(&out.stdout))
        .unwrap_or_else(|e| panic!("{e}\n{report}"));
    let host = rlx_agent::naming::this_host_name();
    let want = format!("{}:9100", if host.is_empty() { "localhost" } else { &host });
    assert_eq!(rt.addr, want, "{report}");
}

#[test]
fn addr_without_probe_is_a_usage_error_that_says_so() {
    let (out, report) = agent(["--addr", "gpu-a:9100"], &[NO_CONFIG]);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--addr is for --probe only"),
        "{report}"
    );
    let (out, report) = agent(["--probe", "--addr", "fd00::5:9100"], &[NO_CONFIG]);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("brackets"),
        "an unbracketed IPv6 address is refused, not split at a guess\n{report}"
    );
}
