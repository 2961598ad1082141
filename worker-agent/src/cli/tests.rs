use super::*;
use clap::CommandFactory;

#[test]
fn the_command_line_definition_is_consistent() {
    AgentArgs::command().debug_assert();
}

#[test]
fn targets_default_to_every_kind_and_parse_from_a_comma_list() {
    let a = AgentArgs::parse_from(["rlx-agent"]);
    assert_eq!(a.targets, Device::ALL.to_vec());
    assert_eq!(
        (a.port, a.worker_port),
        (DEFAULT_AGENT_PORT, DEFAULT_WORKER_PORT)
    );
    let a = AgentArgs::parse_from([
        "rlx-agent",
        "--targets",
        "cpu,vulkan",
        "--interface",
        "eth0",
        "--interface",
        "eth1",
    ]);
    assert_eq!(a.targets, [Device::Cpu, Device::Vulkan]);
    assert_eq!(a.interfaces, ["eth0", "eth1"]);
    assert!(AgentArgs::try_parse_from(["rlx-agent", "--targets", "cpu,tpu"]).is_err());
}

#[test]
fn a_worker_port_outside_1_to_65535_or_equal_to_the_agents_is_refused() {
    for bad in ["0", "65536", "-1", "http"] {
        assert!(
            AgentArgs::try_parse_from(["rlx-agent", "--worker-port", bad]).is_err(),
            "--worker-port {bad}"
        );
    }
    let same = AgentArgs::parse_from(["rlx-agent", "--port", "9100"]);
    let err = same.check_ports().unwrap_err().to_string();
    assert!(
        err.contains("--port 9100 is also the worker's port"),
        "{err}"
    );
    let moved = AgentArgs::parse_from(["rlx-agent", "--port", "9100", "--worker-port", "9200"]);
    assert!(moved.check_ports().is_ok());
}

/// Guards the secure default: an agent started without options
/// measures only for key holders, and the options say so by name.
#[test]
fn link_measurement_defaults_to_key_holders_and_the_options_parse() {
    let a = AgentArgs::parse_from(["rlx-agent"]);
    assert_eq!(a.measure_rules(), Rules::default());
    assert_eq!(a.measure, Policy::Keyed);
    for (word, policy) in [
        ("off", Policy::Off),
        ("keyed", Policy::Keyed),
        ("any", Policy::Any),
    ] {
        let a = AgentArgs::parse_from(["rlx-agent", "--measure", word]);
        assert_eq!(a.measure, policy, "--measure {word}");
    }
    let a = AgentArgs::parse_from(["rlx-agent", "--measure-per-minute", "60"]);
    assert_eq!(a.measure_rules().per_minute, 60);
    for bad in [
        &["--measure", "yes"][..],
        &["--measure-per-minute", "0"],
        &["--measure-per-minute", "601"],
    ] {
        let args = std::iter::once("rlx-agent").chain(bad.iter().copied());
        assert!(AgentArgs::try_parse_from(args).is_err(), "{bad:?}");
    }
}

/// The spellings of a worker address, as a `[[node]] addr` takes them.
#[test]
fn an_addr_is_host_colon_port_or_bracketed_ipv6_and_its_port_is_after_the_last_colon() {
    for (addr, host, port) in [
        ("gpu-a:9100", "gpu-a", 9100),
        ("10.0.0.5:9200", "10.0.0.5", 9200),
        ("[fd00::5]:9300", "[fd00::5]", 9300),
        ("gpu-a.lab.example.org:1", "gpu-a.lab.example.org", 1),
    ] {
        assert_eq!(split_addr(addr), Ok((host, port)), "{addr}");
        assert_eq!(parse_probe_addr(addr).as_deref(), Ok(addr), "kept as given");
    }
    for (bad, says) in [
        ("gpu-a", "no port"),
        (":9100", "no host"),
        ("[]:9100", "no host"),
        ("fd00::5:9100", "brackets"),
        ("gpu-a:0", "invalid port `0`"),
        ("gpu-a:65536", "invalid port"),
        ("gpu-a:+22", "invalid port"),
        ("gpu-a:http", "invalid port"),
        ("gpu a:9100", "without spaces"),
    ] {
        let e = parse_probe_addr(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn the_addr_port_is_the_worker_port_unless_worker_port_is_on_the_command_line() {
    let mut a = AgentArgs::parse_from(["rlx-agent", "--probe", "--addr", "[fd00::5]:9300"]);
    a.worker_port_from_addr(false);
    assert_eq!(a.worker_port, 9300);
    let mut a = AgentArgs::parse_from([
        "rlx-agent",
        "--probe",
        "--addr",
        "gpu-a:9300",
        "--worker-port",
        "9400",
    ]);
    a.worker_port_from_addr(true);
    assert_eq!(
        a.worker_port, 9400,
        "--worker-port on the command line wins"
    );
    let mut a = AgentArgs::parse_from(["rlx-agent", "--probe"]);
    a.worker_port_from_addr(false);
    assert_eq!(a.worker_port, DEFAULT_WORKER_PORT, "no --addr, no change");
}

#[test]
fn addr_is_a_usage_error_without_probe_that_says_so_and_ckpt_is_ckpt_dir() {
    let m = AgentArgs::command()
        .try_get_matches_from(["rlx-agent", "--addr", "gpu-a:9100"])
        .unwrap();
    let e = check_usage(&m).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("--addr is for --probe only"), "{e}");
    let m = AgentArgs::command()
        .try_get_matches_from(["rlx-agent", "--probe", "--addr", "gpu-a:9100"])
        .unwrap();
    assert!(check_usage(&m).is_ok());
    let a = AgentArgs::parse_from(["rlx-agent", "--ckpt", "/data/models"]);
    assert_eq!(a.ckpt_dir.as_deref(), Some(Path::new("/data/models")));
}

#[test]
fn a_malformed_node_id_is_a_usage_error() {
    let err = AgentArgs::try_parse_from(["rlx-agent", "--node-id", "ABC"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("16 lowercase hex"), "{err}");
}

#[test]
fn unknown_caps_keys_are_found_at_any_depth() {
    let json = r#"{"corez":8,"cores":2,"ram_total":1,"devices":[{"device":"cuda","devcie":1}]}"#;
    assert_eq!(unknown_keys(json), ["corez", "devices.0.devcie"]);
}

#[test]
fn caps_file_values_yield_to_explicit_flags() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("caps.json");
    std::fs::write(
        &f,
        r#"{"id":"00000000000000aa","os":"linux","cores":4,"ram_total":1000,"ram_avail":500}"#,
    )
    .unwrap();
    let a = AgentArgs::parse_from([
        "rlx-agent".as_ref(),
        "--caps-file".as_ref(),
        f.as_os_str(),
        "--node-id".as_ref(),
        "00000000000000bb".as_ref(),
        "--cluster".as_ref(),
        "lab".as_ref(),
    ]);
    let caps = a.caps().unwrap();
    assert_eq!(
        (caps.id.as_str(), caps.cluster.as_deref(), caps.cores),
        ("00000000000000bb", Some("lab"), 4)
    );
}

#[test]
fn the_help_ends_in_the_exit_table_rlx_discover_shares_and_says_what_1_means() {
    let help = AgentArgs::command().render_long_help().to_string();
    assert!(help.contains(rlx_proto::exit::TABLE), "{help}");
    assert!(help.contains("Here, 1 means: rlx-agent check"), "{help}");
}

#[test]
fn every_example_in_the_help_parses() {
    let cmd = AgentArgs::command();
    let after = cmd
        .get_after_help()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut parsed = 0;
    for line in after.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("rlx-agent ") else {
            continue;
        };
        let rest = rest.split(" #").next().unwrap_or_default();
        let words = std::iter::once("rlx-agent").chain(rest.split_whitespace());
        if let Err(e) = AgentArgs::try_parse_from(words) {
            panic!("the example `{line}` does not parse:\n{e}");
        }
        parsed += 1;
    }
    assert!(parsed >= 5, "only {parsed} examples in:\n{after}");
}

#[test]
fn the_man_page_has_environment_files_and_see_also_sections() {
    let mut page = Vec::new();
    clap_mangen::Man::new(AgentArgs::command())
        .render(&mut page)
        .unwrap();
    let page = manual::with_sections(&String::from_utf8(page).unwrap());
    for want in [
        ".SH \"ENVIRONMENT\"",
        "RLX_NETNS_GUARD",
        "RUST_LOG",
        "CREDENTIALS_DIRECTORY",
        ".SH \"FILES\"",
        "/etc/rlx/agent.toml",
        "/var/lib/rlx\\-agent",
        "node\\-key",
        ".SH \"SEE ALSO\"",
        "rlx\\-discover(1)",
        "Exit status",
    ] {
        assert!(page.contains(want), "{want:?} missing from:\n{page}");
    }
}
