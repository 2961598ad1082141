use super::*;
use crate::caps::{DeviceInfo, NodeCaps};
use proptest::prelude::*;

fn gpu(name: &str, mem: u64) -> DeviceInfo {
    DeviceInfo {
        device: "cuda".into(),
        name: name.into(),
        mem_bytes: mem,
        unified: false,
        gflops: 0.0,
        available: true,
        ..Default::default()
    }
}

fn sample() -> NodeCaps {
    NodeCaps {
        id: "5f0c1d2e3a4b5c6d".into(),
        incarnation: Some("9a1b2c3d4e5f6071".into()),
        os: "linux".into(),
        arch: "x86_64".into(),
        version: "0.1.0".into(),
        cluster: Some("lab".into()),
        ckpt_dir: Some("/data/models/GLM".into()),
        cores: 32,
        ram_total: 128 << 30,
        ram_avail: 100 << 30,
        disk_free: 900_000_000_000,
        devices: vec![gpu("NVIDIA GeForce RTX 4090, rev A", 24 << 30)],
        gflops: 410.5,
        io_mbps: 1800.0,
        ..Default::default()
    }
}

fn eight_gpu_box() -> NodeCaps {
    let mut c = sample();
    c.ckpt_dir = Some(format!(
        "/mnt/shared-nfs/{}",
        "very-long-directory-name/".repeat(9)
    ));
    c.devices = (0..8)
        .map(|_| {
            gpu(
                "NVIDIA H100 80GB HBM3 (SXM5, PCIe Gen5 x16)",
                85_899_345_920,
            )
        })
        .collect();
    c.devices.push(DeviceInfo {
        device: "cpu".into(),
        name: "AMD EPYC 9654 96-Core Processor".into(),
        mem_bytes: 0,
        unified: true,
        gflops: 3000.0,
        available: true,
        ..Default::default()
    });
    c
}

fn assert_within_limits(pairs: &[(String, String)]) {
    for s in to_strings(pairs) {
        assert!(s.len() <= MAX_STRING_BYTES, "{} bytes: {s}", s.len());
    }
    assert!(
        wire_len(pairs) <= MAX_RECORD_BYTES,
        "{} bytes",
        wire_len(pairs)
    );
    assert_eq!(to_rdata(pairs).len(), wire_len(pairs));
}

#[test]
fn caps_survive_a_txt_round_trip() {
    let c = sample();
    let pairs = encode(&c).unwrap();
    assert_eq!(
        pairs[0],
        ("txtvers".into(), "1".into()),
        "txtvers comes first (RFC 6763 §6.7)"
    );
    assert_eq!(decode(&to_strings(&pairs)).unwrap(), c);
    assert_eq!(decode_rdata(&to_rdata(&pairs)).unwrap(), c);
}

#[test]
fn keys_appear_in_the_documented_order() {
    let keys: Vec<String> = encode(&sample())
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        keys,
        [
            "txtvers", "id", "inc", "cluster", "os", "arch", "cores", "ram", "ramfree", "disk",
            "ckpt", "gflops", "io", "dev0", "ver"
        ]
    );
}

/// Guards the wire spelling: the key constants are what docs/protocol.md
/// and every deployed agent and reader say, so renaming one is a protocol
/// change, not a refactor. The literals here are on purpose.
#[test]
fn every_key_is_spelled_on_the_wire_as_the_protocol_says() {
    let names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "txtvers", "id", "inc", "agent", "worker", "wheld", "ssh", "cluster", "os", "arch",
            "cores", "ram", "ramfree", "disk", "ckpt", "gflops", "io", "ver"
        ]
    );
    assert_eq!(
        (device_key(0), device_key(63)),
        ("dev0".into(), "dev63".into())
    );
    assert_eq!(DEVICE_KEYS, "devN");
}

/// Guards the table against a key whose caps field is misspelled: such a
/// key's validation errors would name the caps field instead of the key.
#[test]
fn every_key_of_the_table_names_a_field_of_the_caps_json() {
    let mut c = sample();
    c.agent_port = Some(6184);
    c.worker_listening = Some(false);
    c.worker_held_by = Some("node_exporter (HTTP)".into());
    c.ssh_listening = Some(true);
    c.ssh_port = Some(22);
    let json: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    for k in KEYS {
        if let Some(field) = k.field {
            assert!(
                json.get(field).is_some(),
                "TXT key `{}` carries `{field}`, which the caps JSON does not have: {json}",
                k.name
            );
        }
    }
}

/// node_exporter on the worker port reaches the coordinator by TXT alone
/// (a browse that does no handshake), beside `worker=0` for older readers.
#[test]
fn a_worker_port_held_by_another_program_survives_a_txt_round_trip() {
    let mut c = sample();
    c.worker_listening = Some(false);
    c.worker_held_by = Some("node_exporter (HTTP)".into());
    let pairs = encode(&c).unwrap();
    assert!(pairs.contains(&("worker".into(), "0".into())), "{pairs:?}");
    assert!(
        pairs.contains(&("wheld".into(), "node_exporter (HTTP)".into())),
        "{pairs:?}"
    );
    assert_eq!(decode(&to_strings(&pairs)).unwrap(), c);
}

/// A record with every key: encode writes them in the order of the table,
/// the device keys between `io` and `ver`.
#[test]
fn encode_writes_the_keys_in_the_order_of_the_table() {
    let mut c = sample();
    c.agent_port = Some(6184);
    c.worker_listening = Some(false);
    c.worker_held_by = Some("node_exporter (HTTP)".into());
    c.ssh_listening = Some(true);
    c.ssh_port = Some(22);
    let keys: Vec<String> = encode(&c).unwrap().into_iter().map(|(k, _)| k).collect();
    let mut want: Vec<String> = KEYS.iter().map(|k| k.name.to_string()).collect();
    want.insert(want.len() - 1, device_key(0));
    assert_eq!(keys, want);
}

#[test]
fn a_record_without_an_incarnation_decodes_as_from_an_agent_that_predates_it() {
    let mut c = sample();
    c.incarnation = None;
    let pairs = encode(&c).unwrap();
    assert!(pairs.iter().all(|(k, _)| k != INCARNATION_KEY));
    assert_eq!(decode(&to_strings(&pairs)).unwrap().incarnation, None);
}

#[test]
fn an_incarnation_that_is_not_16_hex_characters_is_refused_naming_inc() {
    for bad in ["xyz", "9A1B2C3D4E5F6071", "9a1b2c3d4e5f60711"] {
        let e = decode(&[
            "txtvers=1".to_string(),
            "cores=4".to_string(),
            format!("inc={bad}"),
        ])
        .unwrap_err();
        assert_eq!(e.key(), Some("inc"), "{e}");
    }
}

/// The agent's port and its worker's state ride in TXT after `inc`; the
/// worker's port does not (the SRV record names it).
#[test]
fn the_agent_port_and_the_worker_state_round_trip_and_the_worker_port_stays_out() {
    let mut c = sample();
    c.agent_port = Some(6184);
    c.worker_listening = Some(false);
    c.worker_port = Some(9100);
    let pairs = encode(&c).unwrap();
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(&keys[..5], ["txtvers", "id", "inc", "agent", "worker"]);
    assert!(
        pairs.iter().all(|(_, v)| v != "9100"),
        "no worker port in TXT"
    );
    let back = decode(&to_strings(&pairs)).unwrap();
    assert_eq!(
        (back.agent_port, back.worker_listening, back.worker_port),
        (Some(6184), Some(false), None)
    );
}

/// An agent that predates the two ports announces neither key: its one
/// port (the SRV's) serves both, which the reader decides.
#[test]
fn a_record_without_agent_or_worker_decodes_as_unknown() {
    let c = decode(&["txtvers=1", "cores=4"]).unwrap();
    assert_eq!((c.agent_port, c.worker_listening), (None, None));
}

#[test]
fn a_bad_agent_port_or_worker_flag_is_refused_naming_its_key() {
    for (bad, key) in [
        ("agent=0", "agent"),
        ("agent=65536", "agent"),
        ("agent=-1", "agent"),
        ("agent=", "agent"),
        ("worker=yes", "worker"),
        ("worker=2", "worker"),
        ("worker", "worker"),
    ] {
        let e = decode(&["txtvers=1", "cores=4", bad]).unwrap_err();
        assert_eq!(e.key(), Some(key), "{bad}: {e}");
    }
}

/// The SSH server rides as one key after `worker`: its port, or `0` when
/// the agent looked and none answered as SSH.
#[test]
fn the_ssh_server_round_trips_as_its_port_or_zero_for_none() {
    let mut c = sample();
    c.ssh_listening = Some(true);
    c.ssh_port = Some(2222);
    let pairs = encode(&c).unwrap();
    assert!(pairs.contains(&("ssh".into(), "2222".into())), "{pairs:?}");
    assert_eq!(decode(&to_strings(&pairs)).unwrap(), c);
    c.ssh_listening = Some(false);
    c.ssh_port = None;
    let pairs = encode(&c).unwrap();
    assert!(pairs.contains(&("ssh".into(), "0".into())), "{pairs:?}");
    assert_eq!(decode(&to_strings(&pairs)).unwrap(), c);
    // Hand-written, as avahi-publish would send it.
    let c = decode(&["txtvers=1", "cores=4", "SSH=22"]).unwrap();
    assert_eq!((c.ssh_listening, c.ssh_port), (Some(true), Some(22)));
}

/// Guards older agents: a record without `ssh` is "not checked", not "no
/// SSH server", and is written back without the key.
#[test]
fn a_record_without_ssh_decodes_as_not_checked_and_encodes_without_it() {
    let c = decode(&["txtvers=1", "cores=4"]).unwrap();
    assert_eq!((c.ssh_listening, c.ssh_port), (None, None));
    assert!(encode(&c).unwrap().iter().all(|(k, _)| k != SSH_KEY));
}

#[test]
fn a_bad_ssh_value_is_refused_naming_the_key() {
    for bad in [
        "ssh=yes",
        "ssh=65536",
        "ssh=-22",
        "ssh=",
        "ssh",
        "ssh=22,2222",
    ] {
        let e = decode(&["txtvers=1", "cores=4", bad]).unwrap_err();
        assert_eq!(e.key(), Some("ssh"), "{bad}: {e}");
        assert!(e.to_string().contains("SSH server"), "{bad}: {e}");
    }
}

#[test]
fn a_typical_record_stays_under_400_bytes() {
    let n = wire_len(&encode(&sample()).unwrap());
    assert!(n < 400, "{n} bytes");
}

#[test]
fn an_eight_gpu_box_fits_one_frame_with_every_gpu_and_name() {
    let c = eight_gpu_box();
    let pairs = encode(&c).unwrap();
    assert_within_limits(&pairs);
    let back = decode(&to_strings(&pairs)).unwrap();
    let gpus: Vec<_> = back.devices.iter().filter(|d| d.device == "cuda").collect();
    assert_eq!(gpus.len(), 8, "all 8 GPUs must be announced");
    assert!(
        gpus.iter()
            .all(|d| d.mem_bytes == 85_899_345_920 && d.name.starts_with("NVIDIA H100")),
        "{gpus:?}"
    );
}

#[test]
fn an_oversized_record_gives_up_ckpt_then_names_then_the_least_useful_devices() {
    let mut c = eight_gpu_box();
    // 64 devices with long names cannot fit: everything optional goes.
    c.devices = (0..64u64)
        .map(|i| gpu(&format!("{i:02} {}", "Ω".repeat(100)), (i + 1) << 30))
        .collect();
    c.devices[5].device = "ane".into();
    let pairs = encode(&c).unwrap();
    assert_within_limits(&pairs);
    let back = decode(&to_strings(&pairs)).unwrap();
    assert_eq!(back.ckpt_dir, None, "ckpt goes first");
    assert!(back.devices.iter().all(|d| d.name.is_empty()), "then names");
    assert!(
        back.devices.iter().all(|d| d.device == "cuda"),
        "the ANE goes before GPUs"
    );
    let mems: Vec<u64> = back.devices.iter().map(|d| d.mem_bytes).collect();
    assert!(
        mems.windows(2).all(|w| w[0] < w[1]),
        "survivors keep their order: {mems:?}"
    );
    assert_eq!(*mems.last().unwrap(), 64 << 30, "the largest GPUs survive");
}

#[test]
fn long_names_are_cut_on_a_char_boundary_to_255_byte_strings() {
    let mut c = sample();
    c.devices[0].name = "é".repeat(127); // 254 bytes of two-byte chars
    c.os = "ö".repeat(127);
    c.ckpt_dir = Some(format!("/{}", "d".repeat(251))); // ckpt=/ddd.. is 257 bytes
    let pairs = encode(&c).unwrap();
    assert_within_limits(&pairs);
    let back = decode(&to_strings(&pairs)).unwrap();
    assert_eq!(back.ckpt_dir, None, "a ckpt that does not fit is left out");
    assert!(back.devices[0].name.chars().all(|ch| ch == 'é'));
    assert!(back.devices[0].name.len() < 254);
    assert_eq!(back.os.len(), 252, "os=<252 bytes> is exactly 255");

    c.ckpt_dir = Some(format!("/{}", "d".repeat(249))); // ckpt=/... is exactly 255
    let pairs = encode(&c).unwrap();
    assert!(to_strings(&pairs)
        .iter()
        .any(|s| s.len() == 255 && s.starts_with("ckpt=")));
    assert_eq!(decode(&to_strings(&pairs)).unwrap().ckpt_dir, c.ckpt_dir);
}

#[test]
fn a_cluster_name_that_cannot_fit_is_an_error_not_a_cut() {
    let mut c = sample();
    c.cluster = Some("c".repeat(250));
    let err = encode(&c).unwrap_err();
    assert_eq!(err.key(), Some("cluster"), "{err}");
}

#[test]
fn a_label_with_a_comma_cannot_be_encoded() {
    let mut c = sample();
    c.devices[0].device = "cu,da".into();
    assert_eq!(encode(&c).unwrap_err().key(), Some("dev0"));
}

#[test]
fn hand_written_strings_decode_like_avahi_publish_would_send_them() {
    let strings: &[&[u8]] = &[
        b"txtvers=1",
        b"cores=16",
        b"dev0=cuda,25769803776,0,1,0,RTX 4090",
    ];
    let c = decode(strings).unwrap();
    assert_eq!(c.cores, 16);
    assert_eq!(c.devices.len(), 1);
    assert_eq!(c.devices[0].name, "RTX 4090");
    assert_eq!(c.devices[0].mem_bytes, 24 << 30);
    assert!(c.devices[0].available && !c.devices[0].unified);
    assert_eq!(
        (c.ram_total, c.cluster.as_deref(), c.id.as_str()),
        (0, None, "")
    );
}

#[test]
fn hand_written_wire_bytes_decode() {
    let rdata =
        b"\x09txtvers=1\x07cores=8\x0aOS=freebsd\x1ddev1=metal,0,1,1,7.5,Apple M2\x00\x08cores=99";
    let c = decode_rdata(rdata).unwrap();
    assert_eq!(c.cores, 8, "the first `cores` counts");
    assert_eq!(c.os, "freebsd", "keys are case-insensitive");
    assert_eq!(c.devices[0].device, "metal");
    assert_eq!(c.devices[0].gflops, 7.5);
    assert!(
        decode_rdata(b"\x09txtvers=1\x20cores").is_err(),
        "truncated wire data"
    );
}

#[test]
fn a_repeated_key_counts_once_the_first_even_in_another_case() {
    let c = decode(&["txtvers=1", "cores=4", "CORES=abc", "Cores=8"]).unwrap();
    assert_eq!(c.cores, 4);
}

#[test]
fn unknown_keys_and_rfc_ignorable_strings_are_skipped() {
    let c = decode(&[
        "txtvers=1",
        "",
        "=orphan",
        "future=thing",
        "dev64=cuda,1,0,1,0,x",
        "dev01=cuda,1,0,1,0,y",
        "cores=2",
        "path=/",
    ])
    .unwrap();
    assert_eq!(c.cores, 2);
    assert!(
        c.devices.is_empty(),
        "dev64 and dev01 are not schema keys: {:?}",
        c.devices
    );
}

#[test]
fn devices_are_read_in_index_order_with_gaps() {
    let c = decode(&[
        "txtvers=1",
        "cores=2",
        "dev10=rocm,3,0,1,0,c",
        "dev2=cuda,2,0,1,0,b",
        "dev0=cuda,1,0,0,0,a,with,commas",
    ])
    .unwrap();
    let names: Vec<&str> = c.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["a,with,commas", "b", "c"]);
    assert!(!c.devices[0].available);
}

/// DESIGN.md: every key but `txtvers` is optional, so a hand-made
/// announcement with nothing else still decodes, with unknowns as 0.
#[test]
fn a_record_with_only_txtvers_decodes_with_unknown_counts() {
    let caps = decode(&["txtvers=1"]).unwrap();
    assert_eq!(caps.cores, 0);
    assert!(caps.devices.is_empty());
}

#[test]
fn malformed_values_are_refused_naming_the_key() {
    let cases: &[(&[&str], &str)] = &[
        (&["cores=8"], "txtvers"),
        (&["txtvers=2", "cores=8"], "txtvers"),
        (&["txtvers", "cores=8"], "txtvers"),
        (&["txtvers=1", "cores=abc"], "cores"),
        (&["txtvers=1", "cores"], "cores"),
        (&["txtvers=1", "cores=1000000"], "cores"),
        (&["txtvers=1", "cores=99999999999999999999999"], "cores"),
        (&["txtvers=1", "cores=8", "ram=-5"], "ram"),
        (&["txtvers=1", "cores=8", "ram=1000000000000000000"], "ram"),
        (&["txtvers=1", "cores=8", "ram=10", "ramfree=11"], "ramfree"),
        (&["txtvers=1", "cores=8", "disk=1e9"], "disk"),
        (&["txtvers=1", "cores=8", "gflops=NaN"], "gflops"),
        (&["txtvers=1", "cores=8", "gflops=inf"], "gflops"),
        (&["txtvers=1", "cores=8", "io=-1"], "io"),
        (&["txtvers=1", "cores=8", "id=NOT-HEX"], "id"),
        (&["txtvers=1", "cores=8", "dev0=cuda,123"], "dev0"),
        (&["txtvers=1", "cores=8", "dev3=cuda,x,0,1,0,n"], "dev3"),
        (&["txtvers=1", "cores=8", "dev1=cuda,1,2,1,0,n"], "dev1"),
        (&["txtvers=1", "cores=8", "dev1=cuda,1,0,1,fast,n"], "dev1"),
        (&["txtvers=1", "cores=8", "dev0=,1,0,1,0,n"], "dev0"),
        (
            &[
                "txtvers=1",
                "cores=8",
                "dev5=cuda,18446744073709551615,0,1,0,n",
            ],
            "dev5",
        ),
    ];
    for (strings, key) in cases {
        let err = decode(strings).expect_err(key);
        assert_eq!(err.key(), Some(*key), "{strings:?}: {err}");
        assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
    }
}

#[test]
fn an_error_reads_as_key_value_and_reason() {
    let err = decode(&["txtvers=1", "cores=abc"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "TXT key `cores` = \"abc\": not a whole decimal number >= 0"
    );
    let err = decode(&["txtvers=1", "cores=1", "dev0=cuda,-1,0,1,0,x"]).unwrap_err();
    assert!(
        err.to_string().contains("mem_bytes: \"-1\" is not a whole"),
        "{err}"
    );
}

#[test]
fn non_utf8_values_and_keys_are_handled() {
    let err = decode(&[b"txtvers=1".as_slice(), b"cores=8", b"os=\xff\xfe"]).unwrap_err();
    assert_eq!(err.key(), Some("os"));
    // A non-ASCII key is not ours: ignored.
    assert!(decode(&[b"txtvers=1".as_slice(), b"cores=8", b"\xffos=x"]).is_ok());
}

#[test]
fn an_oversized_record_is_refused_before_decoding() {
    let big = vec![vec![b'x'; 255]; 40];
    assert!(matches!(decode(&big), Err(TxtError::Record(_))));
}

#[test]
fn decoding_reads_what_mdns_sd_hands_us() {
    let pairs = encode(&sample()).unwrap();
    let props = mdns_sd::TxtProperties::from(to_rdata(&pairs).as_slice());
    assert_eq!(decode_properties(&props).unwrap(), sample());
    // And what mdns-sd would publish from our pairs, without a network.
    let info = mdns_sd::ServiceInfo::new(
        "_rlx._tcp.local.",
        "box",
        "box.local.",
        "127.0.0.1",
        9100,
        &pairs[..],
    )
    .expect("mdns-sd accepts every string encode() produces");
    assert_eq!(strings_of(info.get_properties()), strings_of(&props));
}

proptest! {
    #[test]
    fn arbitrary_byte_strings_never_panic_the_decoder(
        strings in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..40)
    ) {
        let _ = decode(&strings);
    }

    #[test]
    fn arbitrary_rdata_never_panics_the_decoder(rdata in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = decode_rdata(&rdata);
    }

    #[test]
    fn plausible_key_value_soup_never_panics_and_errors_name_a_key(
        entries in proptest::collection::vec(
            (prop::sample::select(vec!["txtvers", "cores", "ram", "ramfree", "disk", "gflops", "io",
                "id", "os", "dev0", "dev1", "DEV2", "ckpt", "cluster", "ssh"]), "[0-9a-z,.=-]{0,30}"),
            0..20),
    ) {
        let mut strings = vec!["txtvers=1".to_string()];
        strings.extend(entries.iter().map(|(k, v)| format!("{k}={v}")));
        if let Err(e) = decode(&strings) {
            prop_assert!(e.key().is_some(), "{}", e);
        }
    }

    #[test]
    fn encoded_records_always_fit_and_decode(
        names in proptest::collection::vec("\\PC{0,60}", 0..64),
        ckpt in "/\\PC{0,300}",
    ) {
        let mut c = sample();
        c.ckpt_dir = Some(ckpt);
        c.devices = names.iter().enumerate()
            .map(|(i, n)| gpu(n, i as u64 * 1000))
            .collect();
        if let Ok(pairs) = encode(&c) {
            for s in to_strings(&pairs) {
                prop_assert!(s.len() <= MAX_STRING_BYTES);
            }
            prop_assert!(wire_len(&pairs) <= MAX_RECORD_BYTES);
            let back = decode(&to_strings(&pairs));
            prop_assert!(back.is_ok(), "{:?}", back);
        }
    }
}
