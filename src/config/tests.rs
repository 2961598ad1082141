use super::*;

fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
    ClusterConfig::parse(Path::new("cluster.toml"), text)
}

#[test]
fn an_empty_discover_stanza_means_browse_with_defaults() {
    let c = parse("[discover]\n").unwrap();
    let d = c.discover.unwrap();
    assert!(d.mdns);
    assert_eq!(d.port, DEFAULT_WORKER_PORT);
    assert_eq!(d.agent_port, DEFAULT_AGENT_PORT);
    assert_eq!(d.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert_eq!(d.remote_bin, "rlx-agent");
}

#[test]
fn dns_sd_is_an_inline_table_checked_with_its_line() {
    let c = parse("[discover]\ndns_sd = { domain = \"lab.test\", server = \"10.0.0.53:5300\" }\n")
        .unwrap();
    let dns = c.discover.unwrap().dns_sd.unwrap();
    assert_eq!(
        (dns.domain.as_str(), dns.server.as_deref()),
        ("lab.test", Some("10.0.0.53:5300"))
    );
    let e = parse("[discover]\nmdns = false\ndns_sd = { domain = \"a..b\" }\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("dns_sd.domain"), "{e}");
    let e =
        parse("[discover]\ndns_sd = { domain = \"lab.test\", server = \"ns:0\" }\n").unwrap_err();
    assert!(
        e.message.contains("dns_sd.server") && e.message.contains("port"),
        "{e}"
    );
    let e = parse("[discover]\ndns_sd = { domian = \"lab.test\" }\n").unwrap_err();
    assert!(e.message.contains("unknown field `domian`"), "{e}");
}

#[test]
fn device_lists_round_trip_through_their_string_form() {
    let d: DeviceList = "cuda:0, cuda:1".parse().unwrap();
    assert_eq!(d.as_str(), "cuda:0,cuda:1");
    assert!("cuda:x".parse::<DeviceList>().is_err());
    assert!("".parse::<DeviceList>().is_err());
}

#[test]
fn a_hand_written_node_keeps_every_seed_field() {
    let c = parse(
        r#"
[[node]]
addr = "a:9100"
ssh = "a"
ckpt_dir = "/pinned"
device = "cuda:0,cuda:1"
precision = "f16"
kv_cache = { precision = "int8", max_tokens = 8192 }
rng_seed = 7
max_ram_gb = 40.0
layers = [0, 24]

[[node]]
addr = "b:9100"
role = "standby"
standby_for = "a:9100"
"#,
    )
    .unwrap();
    let n = &c.nodes[0];
    assert_eq!(n.device.as_str(), "cuda:0,cuda:1");
    assert_eq!(n.kv_cache.max_tokens, Some(8192));
    assert_eq!(n.layers, Some([0, 24]));
    assert_eq!(c.nodes[1].role, Role::Standby);
}

#[test]
fn device_policy_defaults_to_the_seeds_rule_and_a_bad_one_names_its_key_and_line() {
    let d = parse("[discover]\n").unwrap().discover.unwrap();
    assert_eq!(d.device_policy, DevicePolicy::Best);
    let d = parse("[discover]\ndevice_policy = \"all\"\n")
        .unwrap()
        .discover
        .unwrap();
    assert_eq!(d.device_policy, DevicePolicy::All);
    let e = parse("[discover]\nmdns = true\ndevice_policy = \"every\"\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(
        e.message.contains("device_policy") && e.message.contains("\"all\""),
        "{e}"
    );
    let e = parse("[discover]\ndevice = \"cuda\"\ndevice_policy = \"all\"\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("no effect with device"), "{e}");
}

#[test]
fn measure_links_is_a_checked_boolean_of_discover() {
    let d = parse("[discover]\nmeasure_links = true\n")
        .unwrap()
        .discover
        .unwrap();
    assert!(d.measure_links);
    assert!(
        !parse("[discover]\n")
            .unwrap()
            .discover
            .unwrap()
            .measure_links
    );
    let e = parse("[discover]\nmeasure_links = \"yes\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    let e = parse(
        "[discover]\nmdns = false\nssh_hosts = [\"a\"]\nckpt_dir = \"/m\"\nmeasure_links = true\n",
    )
    .unwrap_err();
    assert!(
        e.message.contains("measure_links") && e.message.contains("network source"),
        "{e}"
    );
}

#[test]
fn link_window_ms_is_checked_against_the_agents_limit() {
    let d = parse("[discover]\nlink_window_ms = 50\n")
        .unwrap()
        .discover
        .unwrap();
    assert_eq!(d.link_window_ms, 50);
    assert_eq!(
        parse("[discover]\n")
            .unwrap()
            .discover
            .unwrap()
            .link_window_ms,
        DEFAULT_LINK_WINDOW_MS
    );
    for bad in ["5", "5000"] {
        let e = parse(&format!("[discover]\nlink_window_ms = {bad}\n")).unwrap_err();
        assert!(
            e.message.contains("link_window_ms") && e.message.contains("10..=1000"),
            "{e}"
        );
    }
}
