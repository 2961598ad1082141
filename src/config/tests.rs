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
    assert!(
        e.message
            .contains("unknown key `domian`: did you mean `domain`?"),
        "{e}"
    );
}

#[test]
fn device_lists_are_the_runtimes_primary_first_with_cpu_spill() {
    let d: DeviceList = " metal+cpu ".parse().unwrap();
    assert_eq!(
        d.as_str(),
        "metal+cpu",
        "kept as written, trimmed as the runtime keeps it"
    );
    assert_eq!(
        d.kinds().collect::<Vec<_>>(),
        [DeviceKind::Metal, DeviceKind::Cpu]
    );
    assert_eq!(d.primary(), DeviceKind::Metal);
    let e = "cuda:0,cuda:1"
        .parse::<DeviceList>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown device 'cuda:0'"),
        "the runtime has no indices: {e}"
    );
    assert!("".parse::<DeviceList>().is_err());
}

/// Every `[[node]]` field with the runtime's types and vocabulary: a file
/// the runtime reads is read here, and nothing in it is refused.
#[test]
fn a_hand_written_node_takes_every_runtime_field_in_the_runtimes_spelling() {
    let c = parse(
        r#"
model = "some/model"
seq = 6
rng_seed = 42
reserve_ram_gb = 6.0
[placement]
policy = "manual"
[placement.objective]
optimize = "latency"
precision_ladder = ["f16", "mxfp4"]

[[node]]
addr = "a:9100"
ssh = "a"
ckpt_dir = "/pinned"
device = "cuda+cpu"
precision = "f8e4m3"
kv_cache = "device"
rng_seed = 7
max_ram_gb = 40
layers = "0:24"

[[node]]
addr = "b:9100"
ckpt_dir = "/pinned"
role = "standby"

[[node]]
addr = "c:9100"
ckpt_dir = "/pinned"
precision = "nvfp4"
role = "draining"
"#,
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.model.as_deref(), Some("some/model"));
    let n = &c.nodes[0];
    assert_eq!(n.device.as_str(), "cuda+cpu");
    assert_eq!(n.precision.as_str(), "f8e4m3");
    assert_eq!(n.kv_cache, KvPolicy::Device);
    assert_eq!(n.manual_range(), Some(0..24));
    assert_eq!(n.max_ram_gb, Some(40.0));
    assert_eq!(
        c.nodes[1].role,
        Role::Standby,
        "a standby may back the largest stage"
    );
    assert_eq!(
        c.nodes[1].precision.as_str(),
        "bf16",
        "the runtime's default"
    );
    assert_eq!(c.nodes[2].role, Role::Draining);
}

/// The runtime refuses these files; so does this, naming the line and
/// saying what the runtime reads instead.
#[test]
fn values_the_runtime_refuses_are_refused_with_the_line_and_the_runtimes_rule() {
    let node = "[[node]]\naddr = \"a:9100\"\nckpt_dir = \"/m\"\n";
    for (extra, needles) in [
        (
            "precision = \"fp32\"\n",
            &["unknown precision `fp32`", "f8e4m3"][..],
        ),
        ("device = \"quantum\"\n", &["unknown device 'quantum'"]),
        (
            "device = \"cuda:0,cuda:1\"\n",
            &["cuda:0", "write \"cuda\""],
        ),
        (
            "kv_cache = { precision = \"int8\" }\n",
            &["kv_cache", "\"none\" | \"host\" | \"device\""],
        ),
        ("layers = [0, 24]\n", &["layers", "\"0:24\""]),
        (
            "role = \"worker\"\n",
            &["unknown variant `worker`", "\"active\""],
        ),
        ("rng_seed = -1\n", &["rng_seed"]),
    ] {
        let e = parse(&format!("{node}{extra}")).unwrap_err();
        assert_eq!(e.line, Some(4), "{extra}: {e}");
        for n in needles {
            assert!(e.message.contains(n), "{extra}: {n:?} not in: {e}");
        }
    }
    let e = parse("[[node]]\naddr = \"a:9100\"\n").unwrap_err();
    assert!(e.message.contains("missing field `ckpt_dir`"), "{e}");
    let e = parse("model = \"m\"\nseq = \"eight\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    let e = parse("model = \"m\"\n[placement]\npolicy = \"fastest\"\n").unwrap_err();
    assert!(e.message.contains("unknown variant `fastest`"), "{e}");
}

/// What the runtime loads but will not do as meant is a warning with its
/// line, never a refusal: the runtime is the judge of the file.
#[test]
fn what_the_runtime_loads_but_ignores_is_a_warning_with_its_line() {
    let c = parse(
        "[[node]]\naddr = \"a\"\nckpt_dir = \"/m\"\ndevcie = \"cuda\"\nlayers = \"0-12\"\n\
         [[node]]\naddr = \"a\"\nckpt_dir = \"/m\"\nstandby_for = \"z:1\"\n",
    )
    .unwrap();
    let all: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    let has = |needle: &str| all.iter().any(|w| w.contains(needle));
    assert!(has("no `model`"), "{all:#?}");
    assert!(
        has("cluster.toml:4:1: [[node]] #1: the RLX runtime does not read `devcie`")
            && has("did you mean `device`?"),
        "{all:#?}"
    );
    assert!(has("cluster.toml:5:") && has("\"0:12\""), "{all:#?}");
    assert!(has("needs a port"), "{all:#?}");
    assert!(has("the same addr"), "{all:#?}");
    assert!(has("standby_for is read only with role"), "{all:#?}");
    assert!(parse("model = \"m\"\n").unwrap().warnings.is_empty());
}

#[test]
fn device_policy_all_is_read_as_best_with_a_warning_and_a_bad_one_names_its_key_and_line() {
    let c = parse("model = \"m\"\n[discover]\n").unwrap();
    assert_eq!(c.discover.unwrap().device_policy, DevicePolicy::Best);
    let c = parse("model = \"m\"\n[discover]\ndevice_policy = \"all\"\n").unwrap();
    assert_eq!(c.discover.unwrap().device_policy, DevicePolicy::All);
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].line, Some(3));
    assert!(
        c.warnings[0].message.contains("read as \"best\""),
        "{}",
        c.warnings[0]
    );
    let e = parse("[discover]\nmdns = true\ndevice_policy = \"every\"\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(
        e.message.contains("device_policy") && e.message.contains("\"best\""),
        "{e}"
    );
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
fn hosts_port_defaults_to_9000_and_must_be_its_own_port() {
    let d = |t: &str| parse(t).map(|c| c.discover.unwrap());
    assert_eq!(d("[discover]\n").unwrap().hosts_port, DEFAULT_HOSTS_PORT);
    assert_eq!(DEFAULT_HOSTS_PORT, 9000);
    assert_eq!(
        d("[discover]\nhosts_port = 29500\n").unwrap().hosts_port,
        29500
    );
    for (bad, says) in [
        ("0", "1-65535"),
        ("9100", "also `port`"),
        ("6184", "also `agent_port`"),
    ] {
        let e = d(&format!("[discover]\nhosts_port = {bad}\n")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.message.contains("hosts_port") && e.message.contains(says),
            "{e}"
        );
    }
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

#[test]
fn link_probe_packets_defaults_to_2000_may_be_0_and_is_held_to_the_agents_limit() {
    let of = |text: &str| parse(text).unwrap().discover.unwrap().link_probe_packets;
    assert_eq!(of("[discover]\n"), 2000);
    assert_eq!(of("[discover]\nlink_probe_packets = 0\n"), 0);
    let e = parse("[discover]\nlink_probe_packets = 4001\n").unwrap_err();
    assert!(
        e.message.contains("link_probe_packets") && e.message.contains("0..=4000"),
        "{e}"
    );
}

/// A number written right but out of range was told to be written "as a
/// whole number without quotes", which it was (issue 38, item 6).
#[test]
fn a_port_out_of_range_says_the_range_not_how_to_write_a_number() {
    let e = parse("[discover]\nport = 70000\n").unwrap_err();
    assert!(
        e.message.contains("70000 is out of range") && e.message.contains("1-65535"),
        "{e}"
    );
    assert!(!e.message.contains("without quotes"), "{e}");
    assert_eq!((e.line, e.column), (Some(2), Some(8)), "{e}");
    assert!(
        e.to_string().contains("|        ^^^^^"),
        "a caret under the value: {e}"
    );
}

/// serde said "invalid type: ..." for our tables with the wrong brackets,
/// which does not say what to write.
#[test]
fn a_table_with_the_wrong_brackets_says_which_brackets_to_write() {
    let e = parse("model = \"m\"\n[[discover]]\nmdns = true\n").unwrap_err();
    assert!(e.message.contains("single [discover] table"), "{e}");
    assert_eq!(e.line, Some(2), "{e}");
    let e = parse("model = \"m\"\n[node]\naddr = \"a:1\"\nckpt_dir = \"/m\"\n").unwrap_err();
    assert!(e.message.contains("write [[node]]"), "{e}");
}

/// `key_file` was taken from the working directory and `pins_file` from
/// the cluster file's: one rule now, the cluster file's directory.
#[test]
fn a_relative_key_file_and_pins_file_are_both_taken_from_the_cluster_files_directory() {
    let c = ClusterConfig::parse(
        Path::new("/etc/rlx/cluster.toml"),
        "[discover]\nkey_file = \"cluster.key\"\npins_file = \"p/cluster.pins\"\n",
    )
    .unwrap();
    let d = c.discover.unwrap();
    assert_eq!(
        d.key_file.as_deref(),
        Some(Path::new("/etc/rlx/cluster.key"))
    );
    assert_eq!(
        d.pins_file.as_deref(),
        Some(Path::new("/etc/rlx/p/cluster.pins"))
    );
    let c = ClusterConfig::parse(
        Path::new("/etc/rlx/cluster.toml"),
        "[discover]\nkey_file = \"/keys/k\"\n",
    )
    .unwrap();
    assert_eq!(
        c.discover.unwrap().key_file.as_deref(),
        Some(Path::new("/keys/k"))
    );
}

/// A 200 KB line was echoed whole under its error.
#[test]
fn an_error_on_a_very_long_line_shows_a_cut_line_with_the_caret_on_the_error() {
    let text = format!(
        "[discover]\nssh_hosts = [{}7]\nckpt_dir = \"/m\"\n",
        "\"h\", ".repeat(40_000)
    );
    let e = parse(&text).unwrap_err();
    let shown = e.snippet.clone().unwrap();
    assert!(shown.len() < 400, "the line is cut: {} bytes", shown.len());
    assert!(shown.contains('…'), "{shown}");
    assert!(e.message.contains("ssh_hosts"), "{e}");
}

#[test]
fn a_misspelt_top_level_table_is_a_warning_with_its_line() {
    let c = parse("model = \"m\"\n\n[discovr]\nmdns = true\n").unwrap();
    let all: Vec<String> = c.warnings.iter().map(ConfigError::headline).collect();
    assert!(
        all.iter()
            .any(|w| w.starts_with("cluster.toml:3:") && w.contains("did you mean [discover]?")),
        "{all:#?}"
    );
}
