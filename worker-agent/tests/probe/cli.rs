//! The real `rlx-agent` binary: `--probe`, `--caps-file`, `--root`.
//! On failure each test prints the command, its exit status, stdout and
//! stderr.

use crate::fixture;
use rlx_proto::caps::{is_valid_id, NodeCaps};
use std::process::{Command, Output};

/// Runs the agent with `args`; RUST_LOG is cleared so the default levels
/// apply unless a test sets it.
pub(crate) fn agent<I, S>(args: I, env: &[(&str, &str)]) -> (Output, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlx-agent"));
    cmd.args(args).env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run rlx-agent");
    let report = format!(
        "command: {cmd:?}\nstatus: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, report)
}

pub(crate) fn stdout_caps(out: &Output, report: &str) -> NodeCaps {
    assert!(out.status.success(), "{report}");
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(
        text.lines().count(),
        1,
        "stdout must be one line of JSON\n{report}"
    );
    NodeCaps::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{report}"))
}

#[test]
fn probe_prints_valid_caps_of_this_machine_on_one_line() {
    let state = tempfile::tempdir().unwrap();
    let (out, report) = agent(
        ["--probe", "--no-bench", "--state-dir"]
            .map(Into::into)
            .into_iter()
            .chain([state.path().as_os_str().to_owned()]),
        &[],
    );
    let caps = stdout_caps(&out, &report);
    assert!(is_valid_id(&caps.id), "{report}");
    assert!(caps.cores >= 1 && caps.ram_total > 0, "{report}");
    assert_eq!(caps.os, std::env::consts::OS);
    assert_eq!(
        caps.devices[0].device, "cpu",
        "the cpu device comes first\n{report}"
    );
    assert_eq!(caps.gflops, 0.0, "--no-bench measures nothing");
}

#[test]
fn debug_logging_goes_to_stderr_and_leaves_stdout_parseable() {
    let (out, report) = agent(
        [
            "--probe".as_ref(),
            "--root".as_ref(),
            fixture("nvidia-aspeed").as_os_str(),
        ],
        &[("RUST_LOG", "debug")],
    );
    stdout_caps(&out, &report);
    assert!(
        !out.stderr.is_empty(),
        "debug logs were expected on stderr\n{report}"
    );
}

/// `--probe` opens no port, so a worker on the agent's default port is no
/// conflict there: the probe answers, naming no agent port of its own.
#[test]
fn a_probe_for_a_worker_on_the_agents_default_port_answers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    std::fs::write(
        &file,
        r#"{"os":"linux","cores":4,"ram_total":1000,"ram_avail":500}"#,
    )
    .unwrap();
    let (out, report) = agent(
        [
            "--probe".as_ref(),
            "--caps-file".as_ref(),
            file.as_os_str(),
            "--worker-port".as_ref(),
            "6184".as_ref(),
        ],
        &[],
    );
    let caps = stdout_caps(&out, &report);
    assert_eq!(
        (caps.worker_port, caps.agent_port),
        (Some(6184), None),
        "{report}"
    );
}

#[test]
fn probe_with_a_good_caps_file_echoes_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    let json = r#"{"id":"5f0c1d2e3a4b5c6d","hostname":"sim-1","os":"linux","arch":"x86_64",
        "cores":32,"ram_total":137438953472,"ram_avail":120000000000,"disk_free":900000000000,
        "gflops":410.5,"io_mbps":1800.0,"devices":[{"device":"cuda","name":"NVIDIA RTX 4090",
        "mem_bytes":25769803776,"unified":false,"gflops":0.0,"available":true}]}"#;
    std::fs::write(&file, json).unwrap();
    let (out, report) = agent(
        ["--probe".as_ref(), "--caps-file".as_ref(), file.as_os_str()],
        &[],
    );
    let got = stdout_caps(&out, &report);
    assert!(
        got.worker_listening.is_some() && got.ssh_listening.is_some(),
        "the worker port and the SSH server were checked: {report}"
    );
    assert_eq!(
        got,
        NodeCaps {
            addr: "sim-1:9100".into(),
            worker_port: Some(rlx_proto::service::DEFAULT_WORKER_PORT),
            agent_port: Some(rlx_proto::service::DEFAULT_AGENT_PORT),
            worker_listening: got.worker_listening,
            ssh_listening: got.ssh_listening,
            ssh_port: got.ssh_port,
            ..NodeCaps::from_json(json).unwrap()
        },
        "{report}"
    );
}

fn expect_caps_file_error(json: &str, field: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad-node.json");
    std::fs::write(&file, json).unwrap();
    let (out, report) = agent(
        ["--probe".as_ref(), "--caps-file".as_ref(), file.as_os_str()],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(i32::from(rlx_proto::exit::ERROR)),
        "a bad caps file is an error, exit 2 as rlx-discover's bad files are\n{report}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout for a bad file\n{report}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(file.to_str().unwrap()),
        "the error must name the file\n{report}"
    );
    assert!(
        err.contains(field),
        "the error must name `{field}`\n{report}"
    );
}

#[test]
fn a_caps_file_with_an_absurd_core_count_is_refused_naming_file_and_field() {
    expect_caps_file_error(
        r#"{"os":"linux","cores":1000000,"ram_total":1000}"#,
        "`cores`",
    );
}

#[test]
fn a_caps_file_with_a_misspelt_required_field_is_refused_naming_it() {
    expect_caps_file_error(r#"{"os":"linux","cores":8,"ram_totl":1000}"#, "ram_total");
}

#[test]
fn a_caps_file_device_without_its_label_is_refused_naming_it() {
    expect_caps_file_error(
        r#"{"os":"linux","cores":8,"ram_total":1000,"devices":[{"devcie":"cuda"}]}"#,
        "device",
    );
}

/// Optional keys may be absent, so a misspelt one parses; the warning is
/// what tells the user their `cores` was read as unknown.
#[test]
fn a_misspelt_optional_key_in_a_caps_file_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    std::fs::write(&file, r#"{"os":"linux","corez":8,"ram_total":1000}"#).unwrap();
    let (out, report) = agent(
        ["--probe".as_ref(), "--caps-file".as_ref(), file.as_os_str()],
        &[],
    );
    assert!(out.status.success(), "{report}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("corez") && err.contains(file.to_str().unwrap()),
        "{report}"
    );
}

#[test]
fn a_missing_caps_file_is_an_error_naming_it() {
    let (out, report) = agent(["--probe", "--caps-file", "/nonexistent/node.json"], &[]);
    assert_eq!(
        out.status.code(),
        Some(i32::from(rlx_proto::exit::ERROR)),
        "a bad caps file is an error, exit 2 as rlx-discover's bad files are\n{report}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/node.json"),
        "{report}"
    );
}

#[test]
fn fixture_roots_give_the_expected_devices() {
    let run = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "--probe".into(),
            "--root".into(),
            fixture(name).into_os_string(),
        ];
        args.extend(extra.iter().map(Into::into));
        let (out, report) = agent(args, &[]);
        stdout_caps(&out, &report)
            .devices
            .into_iter()
            .map(|d| (d.device, d.available))
            .collect::<Vec<_>>()
    };
    let own = |v: &[(&str, bool)]| {
        v.iter()
            .map(|(l, a)| (l.to_string(), *a))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        run("nvidia-aspeed", &[]),
        own(&[("cpu", true), ("cuda", true), ("cuda", true)])
    );
    assert_eq!(
        run("nvidia-aspeed", &["--targets", "cpu,vulkan"]),
        own(&[("cpu", true), ("cuda", false), ("cuda", false)])
    );
    assert_eq!(
        run("amd", &[]),
        own(&[
            ("cpu", true),
            ("rocm", true),
            ("rocm", true),
            ("vulkan", true),
            ("vulkan", true)
        ])
    );
    assert_eq!(run("cpu-only", &[]), own(&[("cpu", true)]));
    assert_eq!(
        run("unknown-accel", &[]),
        own(&[
            ("cpu", true),
            ("vulkan", false),
            ("pci-1e52:401e", false),
            ("pci-1fff:0042", false)
        ])
    );
}

#[test]
fn help_explains_the_flags_and_hides_the_fixture_root() {
    let (out, report) = agent(["--help"], &[]);
    assert!(out.status.success(), "{report}");
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--probe",
        "--addr",
        "--ckpt",
        "--caps-file",
        "--name",
        "--port",
        "--ckpt-dir",
        "--cluster",
        "--key-file",
        "--targets",
        "--interface",
        "--no-bench",
        "--node-id",
        "--state-dir",
        "--measure",
        "--measure-per-minute",
    ] {
        assert!(help.contains(flag), "--help must explain {flag}\n{report}");
    }
    assert!(
        !help.contains("--root"),
        "--root is for tests only\n{report}"
    );
}

#[test]
fn an_unknown_target_is_a_usage_error_listing_the_known_ones() {
    let (out, report) = agent(["--probe", "--targets", "cpu,tpu"], &[]);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cuda"),
        "{report}"
    );
}
