//! Caps JSON: round trips, old and new shapes, and the plausibility checks.

use super::*;

fn sample() -> NodeCaps {
    NodeCaps {
        id: "0123456789abcdef".into(),
        hostname: "gpu-a".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cores: 32,
        ram_total: 128 << 30,
        ram_avail: 100 << 30,
        disk_free: 1 << 40,
        devices: vec![DeviceInfo {
            device: "cuda".into(),
            name: "RTX 4090".into(),
            mem_bytes: 24 << 30,
            unified: false,
            gflops: 0.0,
            available: true,
            ..Default::default()
        }],
        gflops: 400.0,
        io_mbps: 1800.0,
        ..Default::default()
    }
}

#[test]
fn caps_survive_a_json_round_trip() {
    let c = sample();
    assert_eq!(NodeCaps::from_json(&c.to_json()).unwrap(), c);
}

#[test]
fn measured_floats_survive_a_json_round_trip_bit_for_bit() {
    // A measured rate has all 53 bits of mantissa in use; serde_json's
    // fast float parser is one ULP off for some of them unless its
    // `float_roundtrip` feature is on, and then a cached measurement no
    // longer equals the one that was written.
    let mut c = sample();
    for x in [
        1.1130749537915121,
        0.1 + 0.2,
        123456.789e-7,
        f64::MIN_POSITIVE,
    ] {
        c.gflops = x;
        c.io_mbps = x;
        c.devices[0].gflops = x;
        let back = NodeCaps::from_json(&c.to_json()).unwrap();
        assert_eq!(back.gflops.to_bits(), x.to_bits(), "{x:e}");
        assert_eq!(back.io_mbps.to_bits(), x.to_bits(), "{x:e}");
        assert_eq!(back.devices[0].gflops.to_bits(), x.to_bits(), "{x:e}");
    }
}

#[test]
fn the_seed_era_json_without_new_fields_still_parses() {
    let old = r#"{"addr":"x:1","os":"linux","cores":8,"ram_total":1000,"ram_avail":10,
        "disk_free":0,"devices":[{"device":"cuda","name":"g","mem_bytes":5,"unified":false,
        "gflops":0.0,"available":true}],"gflops":1.0,"io_mbps":0.0}"#;
    let c = NodeCaps::from_json(old).unwrap();
    assert_eq!(c.devices[0].parsed(), Some(Device::Cuda));
    assert!(c.id.is_empty());
}

#[test]
fn absurd_values_are_rejected_with_the_field_named() {
    type Mutation = Box<dyn Fn(&mut NodeCaps)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|c| c.ram_total = 1_000_000_000_000_000_000),
            "ram_total",
        ),
        (Box::new(|c| c.cores = 1_000_000), "cores"),
        (Box::new(|c| c.gflops = f64::NAN), "gflops"),
        (Box::new(|c| c.gflops = -1.0), "gflops"),
        (Box::new(|c| c.ram_avail = c.ram_total + 1), "ram_avail"),
        (Box::new(|c| c.id = "NOT-HEX".into()), "id"),
        (Box::new(|c| c.hostname = "x".repeat(300)), "hostname"),
        (
            Box::new(|c| c.devices[0].mem_bytes = u64::MAX),
            "devices[0].mem_bytes",
        ),
        (
            Box::new(|c| c.devices = vec![c.devices[0].clone(); 65]),
            "devices",
        ),
    ];
    for (mutate, field) in cases {
        let mut c = sample();
        mutate(&mut c);
        let err = c.validate().expect_err(field).to_string();
        assert!(
            err.contains(&format!("`{field}`")),
            "{err} should name {field}"
        );
    }
}

#[test]
fn negative_numbers_in_json_are_a_syntax_error_not_a_wraparound() {
    let bad = sample().to_json().replace("\"cores\":32", "\"cores\":-4");
    let err = NodeCaps::from_json(&bad).unwrap_err().to_string();
    assert!(
        err.contains("cores") || err.contains("invalid value"),
        "{err}"
    );
}

#[test]
fn device_labels_parse_case_insensitively_with_an_index() {
    assert_eq!("CUDA:1".parse::<Device>(), Ok(Device::Cuda));
    assert_eq!("metal".parse::<Device>(), Ok(Device::Metal));
    assert!("quantum-tpu".parse::<Device>().is_err());
}

#[test]
fn oversized_json_is_refused_before_parsing() {
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(limits::MAX_JSON_BYTES));
    assert!(NodeCaps::from_json(&big)
        .unwrap_err()
        .to_string()
        .contains("limit"));
}

fn detailed() -> NodeCaps {
    let mut c = sample();
    let d = &mut c.devices[0];
    d.mem_free = 20 << 30;
    d.pci = Some("0000:18:00.0".into());
    d.pcie = Some(PcieLink { gen: 4, width: 16 });
    d.compute = Some("8.9".into());
    d.driver = Some("550.54.15".into());
    d.cuda = Some("12.4".into());
    d.mig = Some(false);
    d.peers = vec![PeerLink {
        peer: 1,
        path: "nvlink".into(),
        nvlinks: 4,
    }];
    c.links = vec![LinkInfo {
        name: "eth0".into(),
        kind: "ethernet".into(),
        speed_mbps: Some(10_000),
        mtu: 9000,
        addrs: vec!["10.0.0.5".parse().unwrap()],
        rdma: false,
    }];
    c
}

/// Guards against the details breaking a coordinator of the seed's shape:
/// its reader (the seed's structs, which ignore unknown fields) must still
/// read a new agent's caps.
#[test]
fn a_seed_shaped_reader_reads_caps_carrying_every_new_detail() {
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct SeedDevice {
        device: String,
        name: String,
        mem_bytes: u64,
        unified: bool,
        gflops: f64,
        available: bool,
    }
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct SeedCaps {
        os: String,
        cores: u32,
        ram_total: u64,
        ram_avail: u64,
        disk_free: u64,
        devices: Vec<SeedDevice>,
        gflops: f64,
        io_mbps: f64,
    }
    let json = detailed().to_json();
    assert!(
        json.contains("\"peers\"") && json.contains("\"links\""),
        "{json}"
    );
    let old: SeedCaps = serde_json::from_str(&json).unwrap();
    assert_eq!(old.devices[0].mem_bytes, 24 << 30);
    assert_eq!(old.cores, 32);
}

#[test]
fn details_round_trip_and_unknown_ones_are_left_out_of_the_json() {
    let c = detailed();
    assert_eq!(NodeCaps::from_json(&c.to_json()).unwrap(), c);
    // An agent that knows no detail sends exactly the seed's keys.
    let plain = serde_json::to_value(&sample().devices[0]).unwrap();
    let keys: Vec<&String> = plain.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "available",
            "device",
            "gflops",
            "mem_bytes",
            "name",
            "unified"
        ]
    );
    assert!(!sample().to_json().contains("links"));
}

#[test]
fn absurd_details_are_rejected_with_the_field_named() {
    type Mutation = Box<dyn Fn(&mut NodeCaps)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|c| c.devices[0].mem_free = (24 << 30) + 1),
            "devices[0].mem_free",
        ),
        (
            Box::new(|c| c.devices[0].pcie = Some(PcieLink { gen: 99, width: 16 })),
            "devices[0].pcie",
        ),
        (
            Box::new(|c| c.devices[0].peers[0].peer = 1000),
            "devices[0].peers[0]",
        ),
        (
            Box::new(|c| c.devices[0].gfx = Some("g\nfx".into())),
            "devices[0].gfx",
        ),
        (
            Box::new(|c| c.links[0].speed_mbps = Some(u64::MAX)),
            "links[0].speed_mbps",
        ),
        (Box::new(|c| c.links[0].mtu = 1 << 20), "links[0].mtu"),
        (
            Box::new(|c| c.links = vec![c.links[0].clone(); 65]),
            "links",
        ),
    ];
    for (mutate, field) in cases {
        let mut c = detailed();
        mutate(&mut c);
        let err = c.validate().expect_err(field).to_string();
        assert!(
            err.contains(&format!("`{field}`")),
            "{err} should name {field}"
        );
    }
}

#[test]
fn link_speeds_read_as_people_say_them() {
    let mut l = detailed().links[0].clone();
    assert_eq!(l.describe().as_deref(), Some("10 GbE"));
    l.speed_mbps = Some(2500);
    assert_eq!(l.describe().as_deref(), Some("2.5 GbE"));
    l.speed_mbps = Some(100);
    assert_eq!(l.describe().as_deref(), Some("100 Mb Ethernet"));
    l.speed_mbps = Some(100_000);
    l.rdma = true;
    assert_eq!(l.describe().as_deref(), Some("100 GbE RDMA"));
    l.kind = "wifi".into();
    l.speed_mbps = None;
    assert_eq!(l.describe().as_deref(), Some("Wi-Fi"));
    l.kind = "ethernet".into();
    l.rdma = false;
    assert_eq!(l.describe(), None, "nothing known, nothing said");
    let c = detailed();
    assert_eq!(
        c.link_for(&"10.0.0.5".parse().unwrap()).unwrap().name,
        "eth0"
    );
    assert!(c.link_for(&"10.0.0.6".parse().unwrap()).is_none());
}

/// Guards the documented field names (docs/json.md) against a rename: a
/// hand-written caps object in the documented shape parses field by field.
#[test]
fn hand_written_details_in_the_documented_shape_parse() {
    let json = r#"{"os":"linux","cores":8,"ram_total":1000,"devices":[
        {"device":"cuda","name":"H100","mem_bytes":800,"mem_free":700,"pci":"0000:18:00.0",
         "pcie":{"gen":5,"width":16},"compute":"9.0","driver":"550.54.15","cuda":"12.4",
         "mig":true,"peers":[{"peer":1,"path":"nvlink","nvlinks":18},{"peer":2,"path":"sys"}]},
        {"device":"rocm","name":"MI210","mem_bytes":64,"gfx":"gfx90a"}],
        "links":[{"name":"ib0","kind":"infiniband","speed_mbps":400000,"mtu":4092,
                  "addrs":["10.1.0.5","fe80::1"],"rdma":true},
                 {"name":"wlan0","kind":"wifi","mtu":1500}]}"#;
    let c = NodeCaps::from_json(json).unwrap();
    let d = &c.devices[0];
    assert_eq!(
        (d.mem_free, d.pci.as_deref(), d.pcie, d.mig),
        (
            700,
            Some("0000:18:00.0"),
            Some(PcieLink { gen: 5, width: 16 }),
            Some(true)
        )
    );
    assert_eq!(
        (d.compute.as_deref(), d.driver.as_deref(), d.cuda.as_deref()),
        (Some("9.0"), Some("550.54.15"), Some("12.4"))
    );
    assert_eq!((d.peers[0].nvlinks, d.peers[1].path.as_str()), (18, "sys"));
    assert_eq!(c.devices[1].gfx.as_deref(), Some("gfx90a"));
    assert_eq!(c.links[0].addrs.len(), 2);
    assert!(c.links[0].rdma);
    assert_eq!((c.links[1].speed_mbps, c.links[1].rdma), (None, false));
}

/// The SSH server is two fields, both left out when the agent did not
/// look, so an older coordinator reads the same caps as before; a found
/// server is `ssh_listening: true` with its port, none is `false` alone.
#[test]
fn the_ssh_server_is_reported_as_listening_and_its_port_and_left_out_when_not_checked() {
    let unchecked = sample().to_json();
    assert!(!unchecked.contains("ssh"), "{unchecked}");
    let mut found = sample();
    found.ssh_listening = Some(true);
    found.ssh_port = Some(2222);
    let json = found.to_json();
    assert!(
        json.contains(r#""ssh_listening":true,"ssh_port":2222"#),
        "{json}"
    );
    assert_eq!(NodeCaps::from_json(&json).unwrap(), found);
    let mut none = sample();
    none.ssh_listening = Some(false);
    let json = none.to_json();
    assert!(
        json.contains(r#""ssh_listening":false"#) && !json.contains("ssh_port"),
        "{json}"
    );
    assert_eq!(NodeCaps::from_json(&json).unwrap(), none);
    let hand = NodeCaps::from_json(
        r#"{"os":"linux","cores":8,"ram_total":1000,"ssh_listening":true,"ssh_port":22}"#,
    )
    .unwrap();
    assert_eq!((hand.ssh_listening, hand.ssh_port), (Some(true), Some(22)));
}

#[test]
fn an_ssh_port_that_contradicts_ssh_listening_or_is_zero_is_refused_naming_ssh_port() {
    for (listening, port) in [
        (Some(false), Some(22)),
        (None, Some(22)),
        (Some(true), None),
        (Some(true), Some(0)),
    ] {
        let mut c = sample();
        c.ssh_listening = listening;
        c.ssh_port = port;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("`ssh_port`"), "{listening:?} {port:?}: {e}");
    }
}
