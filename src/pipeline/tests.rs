//! Unit tests of the pipeline: coalescing, id clashes, merge, selection.

use super::*;
use crate::addr::NodeAddr;
use crate::sighting::{Evidence, Sighting, Source};
use rlx_proto::caps::DeviceInfo;
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;

fn caps(id: &str, hostname: &str, dev: &str, mem: u64) -> NodeCaps {
    NodeCaps {
        id: id.into(),
        hostname: hostname.into(),
        os: "linux".into(),
        cores: 8,
        ram_total: 64 << 30,
        ram_avail: 32 << 30,
        devices: vec![DeviceInfo {
            device: dev.into(),
            name: dev.into(),
            mem_bytes: mem,
            unified: false,
            gflops: 0.0,
            available: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn seen(source: Source, addr: &str, caps: Option<NodeCaps>, ms: u64) -> Sighting {
    let (host, port) = NodeAddr::split(addr);
    Sighting {
        identity: crate::sighting::Pinning::Unpinned,
        source,
        host: host.into(),
        addr: addr.into(),
        ip: host.parse().ok(),
        port: port.unwrap(),
        agent_port: Some(port.unwrap()),
        worker_reachable: None,
        ssh: (source == Source::Ssh).then(|| host.to_string()),
        evidence: match (source, &caps) {
            (_, None) => Evidence::TcpOnly,
            (Source::Ssh, _) => Evidence::Ssh,
            (Source::Mdns, _) => Evidence::Txt,
            _ => Evidence::Handshake,
        },
        caps,
        heard_on: None,
        found_ms: ms,
    }
}

fn discovery(s: Vec<Sighting>) -> Discovery {
    Discovery {
        sightings: s,
        ..Default::default()
    }
}

/// The predecessor's merge test: a pinned node survives untouched and a
/// discovered duplicate of it is dropped, not added twice.
#[test]
fn merge_keeps_hand_written_nodes_and_drops_duplicates_by_addr() {
    let mut pinned = NodeConfig::new("a:9100");
    pinned.ckpt_dir = "/pinned".into();
    pinned.device = "cuda".parse().unwrap();
    pinned.precision = "f16".parse().unwrap();
    pinned.max_ram_gb = Some(40.0);
    let found = discovery(vec![
        seen(Source::Ssh, "a:9100", Some(caps("", "a", "cpu", 0)), 1),
        seen(Source::Ssh, "b:9100", Some(caps("", "b", "metal", 0)), 2),
    ]);
    let defaults = NodeDefaults {
        ckpt_dir: Some("/auto".into()),
        ..Default::default()
    };
    let e = expand(std::slice::from_ref(&pinned), &defaults, found);
    assert_eq!(e.nodes.len(), 2, "one added, one dropped");
    assert_eq!(e.nodes[0], pinned, "the pinned entry survives untouched");
    assert_eq!(e.nodes[1].addr, "b:9100");
    assert_eq!(e.nodes[1].ckpt_dir, "/auto");
    assert_eq!(e.report.duplicates.len(), 1);
    assert_eq!(e.report.duplicates[0].same_as, "a:9100");
}

#[test]
fn the_same_box_seen_by_ssh_and_mdns_becomes_one_node_with_the_ssh_alias() {
    let c = caps("00000000000000aa", "box", "cuda", 24 << 30);
    let found = discovery(vec![
        seen(Source::Mdns, "10.0.0.5:9100", Some(c.clone()), 5),
        seen(Source::Ssh, "box:9100", Some(c), 900),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.nodes.len(), 1, "{:?}", e.nodes);
    assert_eq!(e.nodes[0].addr, "box:9100");
    assert_eq!(e.nodes[0].ssh.as_deref(), Some("box"));
    assert_eq!(e.added()[0].sources, vec![Source::Ssh, Source::Mdns]);
    assert!(e.report.clashes.is_empty());
}

#[test]
fn a_scan_hit_and_an_mdns_sighting_of_one_ip_and_port_are_one_node() {
    let found = discovery(vec![
        seen(Source::Subnet, "10.0.0.5:9100", None, 300),
        seen(
            Source::Mdns,
            "10.0.0.5:9100",
            Some(caps("00000000000000bb", "x", "rocm", 16 << 30)),
            40,
        ),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.nodes.len(), 1);
    assert_eq!(
        e.nodes[0].device.as_str(),
        "rocm",
        "caps come from the source that had them"
    );
}

#[test]
fn two_live_hosts_claiming_one_id_are_both_kept_and_the_clash_is_reported() {
    let id = "00000000000000cc";
    let found = discovery(vec![
        seen(
            Source::Mdns,
            "10.0.0.5:9100",
            Some(caps(id, "clone-a", "cuda", 8 << 30)),
            1,
        ),
        seen(
            Source::Mdns,
            "10.0.0.6:9100",
            Some(caps(id, "clone-b", "cuda", 8 << 30)),
            2,
        ),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.nodes.len(), 2);
    assert_eq!(e.report.clashes.len(), 1);
    assert_eq!(e.report.clashes[0].addrs.len(), 2);
}

#[test]
fn the_caps_with_the_strongest_evidence_win() {
    let mut stale = caps("00000000000000dd", "n", "cuda", 8 << 30);
    stale.ram_avail = 1;
    let fresh = caps("00000000000000dd", "n", "cuda", 8 << 30);
    let mut a = seen(Source::Mdns, "10.0.0.7:9100", Some(stale), 1);
    a.evidence = Evidence::Txt;
    let mut b = seen(Source::Mdns, "10.0.0.7:9100", Some(fresh.clone()), 2);
    b.evidence = Evidence::Handshake;
    let e = expand(&[], &NodeDefaults::default(), discovery(vec![b, a]));
    assert_eq!(e.added()[0].evidence, Evidence::Handshake);
}

#[test]
fn a_hand_written_node_that_claims_a_missing_gpu_is_kept_and_warned_about() {
    let mut hand = NodeConfig::new("10.0.0.8:9100");
    hand.device = "cuda".parse().unwrap();
    let found = discovery(vec![seen(
        Source::Mdns,
        "10.0.0.8:9100",
        Some(caps("00000000000000ee", "m", "metal", 0)),
        3,
    )]);
    let e = expand(std::slice::from_ref(&hand), &NodeDefaults::default(), found);
    assert_eq!(e.nodes, vec![hand]);
    assert_eq!(e.report.warnings.len(), 1, "{:?}", e.report.warnings);
    assert!(
        e.report.warnings[0].contains("cuda"),
        "{}",
        e.report.warnings[0]
    );
}

#[test]
fn a_listener_without_caps_becomes_a_default_node_with_a_warning() {
    let found = discovery(vec![seen(Source::Subnet, "10.0.0.9:9100", None, 1)]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.nodes[0].device.as_str(), "cpu");
    assert!(e.report.warnings[0].contains("nothing vouched for it"));
}

/// A node whose worker is not running is still written (the runtime may
/// start it), with a warning naming it.
#[test]
fn a_node_whose_worker_is_not_listening_is_written_with_a_warning() {
    let mut c = caps("00000000000000a1", "gpu-a", "cuda", 24 << 30);
    c.worker_listening = Some(false);
    let found = discovery(vec![seen(Source::Mdns, "10.0.0.9:9100", Some(c), 1)]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.nodes.len(), 1);
    assert_eq!(e.added()[0].worker_listening, Some(false));
    assert_eq!(e.added()[0].agent.as_deref(), Some("10.0.0.9:9100"));
    assert!(
        e.report.warnings.iter().any(
            |w| w.contains("10.0.0.9:9100") && w.contains("nothing listens on its worker port")
        ),
        "{:?}",
        e.report.warnings
    );
    assert!(e.report.render_text().contains("worker not listening"));
}

/// Guards against a firewall in front of the worker going unnoticed: the
/// agent says its worker listens, the scan's connect to it failed.
#[test]
fn a_worker_that_listens_but_refused_the_scan_is_a_firewall_warning() {
    let mut c = caps("00000000000000a2", "gpu-b", "cuda", 24 << 30);
    c.worker_listening = Some(true);
    let mut s = seen(Source::Subnet, "10.0.0.8:9100", Some(c), 1);
    s.worker_reachable = Some(false);
    let e = expand(&[], &NodeDefaults::default(), discovery(vec![s]));
    assert_eq!(e.nodes.len(), 1);
    let w = e.report.warnings.join("\n");
    assert!(
        w.contains("10.0.0.8:9100") && w.contains("a firewall"),
        "{w}"
    );
}

#[test]
fn skipped_devices_are_reported_with_the_node_address() {
    let mut c = caps("00000000000000ff", "q", "quantum-tpu", 80 << 30);
    c.devices.push(DeviceInfo {
        device: "cuda".into(),
        name: "g".into(),
        mem_bytes: 8 << 30,
        unified: false,
        gflops: 0.0,
        available: true,
        ..Default::default()
    });
    let e = expand(
        &[],
        &NodeDefaults::default(),
        discovery(vec![seen(Source::Mdns, "10.0.0.10:9100", Some(c), 1)]),
    );
    assert_eq!(e.nodes[0].device.as_str(), "cuda");
    assert_eq!(e.report.skipped_devices.len(), 1);
    assert_eq!(e.report.skipped_devices[0].addr, "10.0.0.10:9100");
}

#[test]
fn a_forced_device_overrides_selection() {
    let defaults = NodeDefaults {
        device: Some("vulkan".parse().unwrap()),
        ..Default::default()
    };
    let e = expand(
        &[],
        &defaults,
        discovery(vec![seen(
            Source::Ssh,
            "h:9100",
            Some(caps("", "h", "cuda", 8 << 30)),
            1,
        )]),
    );
    assert_eq!(e.nodes[0].device.as_str(), "vulkan");
}

/// An authenticated sighting of `instance` at `addr` with `c`.
fn keyed(source: Source, instance: &str, addr: &str, c: &NodeCaps, ms: u64) -> Sighting {
    let mut s = seen(source, addr, Some(c.clone()), ms);
    s.host = instance.into();
    s.evidence = Evidence::Authenticated;
    s
}

/// Guards against a silent merge (docs/security.md, "Same id at two
/// endpoints"): two agents that both prove
/// the cluster key, claim one id and report one host name, at two
/// addresses, were coalesced as one machine and whichever answered first
/// got the node. Now it is a clash, neither is added, both are refused.
#[test]
fn two_authenticated_agents_claiming_one_id_at_two_endpoints_are_a_clash_and_neither_is_added() {
    let c = caps("00000000000000a1", "box1", "cuda", 8 << 30);
    let found = discovery(vec![
        keyed(Source::Mdns, "box1", "10.0.0.5:9100", &c, 1),
        keyed(Source::Mdns, "box1 (2)", "10.0.0.6:9100", &c, 2),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert!(e.added().is_empty(), "{:?}", e.added());
    assert_eq!(e.report.clashes.len(), 1, "{:?}", e.report);
    let clash = &e.report.clashes[0];
    assert!(clash.authenticated);
    assert_eq!(clash.addrs, vec!["10.0.0.5:9100", "10.0.0.6:9100"]);
    assert!(clash.kept.is_empty());
    assert_eq!(clash.refused.len(), 2);
    assert_eq!(e.report.failed.len(), 2, "each refusal is reported");
    assert!(e.report.has_failures(), "exit code 1");
    let text = e.report.render_text();
    assert!(
        text.contains("10.0.0.5:9100 and 10.0.0.6:9100") && text.contains("neither"),
        "{text}"
    );
    let r = &e.report.failed[0].reason;
    assert!(
        r.contains("00000000000000a1") && r.contains("10.0.0.6:9100"),
        "{r}"
    );
}

/// Guards against the claimant taking over a node already in the file: the
/// file's node keeps its address and the other claimant is refused.
#[test]
fn with_one_claimant_in_the_file_it_keeps_its_address_and_the_other_is_refused() {
    let c = caps("00000000000000a2", "box2", "cuda", 8 << 30);
    let hand = NodeConfig::new("10.0.0.7:9100");
    let found = discovery(vec![
        keyed(Source::Mdns, "box2-imp", "10.0.0.8:9100", &c, 1),
        keyed(Source::Mdns, "box2", "10.0.0.7:9100", &c, 2),
    ]);
    let e = expand(std::slice::from_ref(&hand), &NodeDefaults::default(), found);
    assert_eq!(
        e.nodes,
        vec![hand],
        "nothing added, the file's node untouched"
    );
    let clash = &e.report.clashes[0];
    assert_eq!(clash.kept, vec!["10.0.0.7:9100"]);
    assert_eq!(clash.refused, vec!["10.0.0.8:9100"]);
    assert_eq!(e.report.failed.len(), 1);
    assert_eq!(e.report.failed[0].host, "box2-imp");
    assert_eq!(
        e.report.duplicates.len(),
        1,
        "the file's node is still seen"
    );
    assert_eq!(e.report.duplicates[0].same_as, "10.0.0.7:9100");
}

/// One agent on two networks (announced over mDNS on one, registered in
/// DNS with its other address) answers both handshakes with the same id,
/// host name and caps: one machine, as before, with the other address
/// shown.
#[test]
fn one_agent_answering_at_two_addresses_with_the_same_caps_stays_one_machine() {
    let c = caps("00000000000000a3", "box3", "cuda", 8 << 30);
    let mut later = c.clone();
    later.ram_avail -= 1 << 20;
    let found = discovery(vec![
        keyed(Source::Mdns, "box3", "10.0.0.9:9100", &c, 1),
        keyed(Source::Dns, "box3", "192.168.7.9:9100", &later, 2),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.added().len(), 1, "{:?}", e.report);
    assert!(e.report.clashes.is_empty() && e.report.failed.is_empty());
    assert_eq!(e.added()[0].addr, "10.0.0.9:9100");
    assert_eq!(e.added()[0].also_at, vec!["192.168.7.9:9100"]);
    assert!(e.report.render_text().contains("also at 192.168.7.9:9100"));
}

/// Guards against a phantom instance that a stranger announced at a
/// member's other address (its IPv6 one, which every answer carries, RFC
/// 6762 §6.2) becoming a second node or refusing the member: both
/// handshakes proved one node key with one incarnation, so it is one
/// running agent, under whatever names. A clone of the agent's disk (the
/// key, another incarnation) is still a clash, and so is a sighting that
/// proved no key.
#[test]
fn one_node_key_and_incarnation_at_two_addresses_under_two_names_is_one_machine() {
    let mut c = caps("00000000000000a6", "box6", "cuda", 8 << 30);
    c.node_key = Some("k6".into());
    c.incarnation = Some("1111111111111111".into());
    let proved = |instance: &str, addr: &str, c: &NodeCaps| {
        let mut s = keyed(Source::Mdns, instance, addr, c, 1);
        s.identity = crate::sighting::Pinning::Pinned;
        s
    };
    let found = discovery(vec![
        proved("box6", "10.0.0.16:9100", &c),
        proved("ghost", "[fd00::16]:9100", &c),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.added().len(), 1, "{:?}", e.report);
    assert!(e.report.clashes.is_empty() && e.report.failed.is_empty());
    assert_eq!(
        e.added()[0].addr,
        "10.0.0.16:9100",
        "IPv4 by the address rule"
    );
    assert_eq!(e.added()[0].also_at, vec!["[fd00::16]:9100"]);

    let mut clone = c.clone();
    clone.incarnation = Some("2222222222222222".into());
    let found = discovery(vec![
        proved("box6", "10.0.0.16:9100", &c),
        proved("ghost", "10.0.0.17:9100", &clone),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.report.clashes.len(), 1, "a cloned disk: {:?}", e.report);

    let mut unproved = proved("ghost", "[fd00::16]:9100", &c);
    unproved.identity = crate::sighting::Pinning::Unpinned;
    let found = discovery(vec![proved("box6", "10.0.0.16:9100", &c), unproved]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert_eq!(e.report.clashes.len(), 1, "no key proved: {:?}", e.report);
}

/// Guards against two boxes that a scan found with one id and one host
/// name but different hardware being merged as one dual-homed agent.
#[test]
fn two_scan_hits_with_one_id_and_different_hardware_are_a_clash() {
    let a = caps("00000000000000a4", "box4", "cuda", 8 << 30);
    let b = caps("00000000000000a4", "box4", "cuda", 24 << 30);
    let found = discovery(vec![
        keyed(Source::Subnet, "10.0.0.10", "10.0.0.10:9100", &a, 1),
        keyed(Source::Subnet, "10.0.0.11", "10.0.0.11:9100", &b, 2),
    ]);
    let e = expand(&[], &NodeDefaults::default(), found);
    assert!(e.added().is_empty());
    assert_eq!(e.report.clashes.len(), 1);
    assert_eq!(e.report.failed.len(), 2);
}

/// Without a key an id proves nothing: a clash is reported and each
/// claimant is kept by address (a stranger could otherwise keep any node
/// out by claiming its id).
#[test]
fn without_a_key_two_agents_with_one_id_and_host_name_are_both_kept_and_reported() {
    let c = caps("00000000000000a5", "box5", "cuda", 8 << 30);
    let mut a = keyed(Source::Mdns, "box5", "10.0.0.12:9100", &c, 1);
    let mut b = keyed(Source::Mdns, "box5 (2)", "10.0.0.13:9100", &c, 2);
    a.evidence = Evidence::Handshake;
    b.evidence = Evidence::Handshake;
    let e = expand(&[], &NodeDefaults::default(), discovery(vec![a, b]));
    assert_eq!(e.added().len(), 2);
    let clash = &e.report.clashes[0];
    assert!(!clash.authenticated);
    assert_eq!(clash.kept.len(), 2);
    assert!(e.report.failed.is_empty());
}

/// Guards against a network-supplied name printing a fake report line:
/// an instance label with a newline and one with an escape sequence each
/// stay one escaped line of the report.
#[test]
fn untrusted_names_in_the_report_are_one_escaped_line_each() {
    let evil = "x\n+ 10.0.0.9:9100 via mdns (authenticated)";
    let found = Discovery {
        problems: vec![
            Problem::new(
                Source::Mdns,
                evil,
                format!("host {evil}.local announced no TXT record"),
            ),
            Problem::new(Source::Mdns, "\x1b[2Jclear", "no address \u{9b}31m"),
        ],
        ..Default::default()
    };
    let text = expand(&[], &NodeDefaults::default(), found)
        .report
        .render_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "a summary and one line per refusal: {text}");
    assert!(
        !lines.iter().any(|l| l.trim_start().starts_with('+')),
        "{text}"
    );
    assert!(
        lines[1].starts_with("  ! \"x\\n+ 10.0.0.9:9100 via mdns (authenticated)\" (mdns): "),
        "{}",
        lines[1]
    );
    assert!(
        !text.contains('\x1b') && !text.contains('\u{9b}'),
        "{text:?}"
    );
    assert!(lines[2].contains("\"\\u{1b}[2Jclear\""), "{}", lines[2]);
}

const MOVED_ID: &str = "0123456789abcdef";

/// A handshake sighting at `addr` with node id [`MOVED_ID`].
fn answering(addr: &str, evidence: Evidence) -> Sighting {
    let mut s = seen(
        Source::Mdns,
        addr,
        Some(caps(MOVED_ID, "gpu-a", "cuda", 8 << 30)),
        1,
    );
    s.evidence = evidence;
    s
}

/// A node rlx-discover appended, at `addr`, its comment naming
/// `MOVED_ID`: the node, and the file's reading of it.
fn found_node(addr: &str) -> (NodeConfig, crate::clusterfile::FileNode) {
    let text = format!(
        "# found by mdns (handshake) T: gpu-a, id {MOVED_ID}\n[[node]]\naddr = \"{addr}\"\n"
    );
    let file = crate::clusterfile::file_nodes(&text).unwrap();
    (NodeConfig::new(addr), file[0].clone())
}

#[test]
fn a_machine_answering_with_a_found_nodes_id_at_a_new_address_is_that_node_moved() {
    let (node, mark) = found_node("10.0.0.5:9100");
    let e = expand_file(
        &[node],
        &[mark],
        &NodeDefaults::default(),
        discovery(vec![answering("10.0.0.7:9100", Evidence::Handshake)]),
    );
    assert_eq!(e.nodes.len(), 1, "no duplicate");
    assert_eq!(e.nodes[0].addr, "10.0.0.7:9100");
    assert!(e.added().is_empty());
    assert_eq!(
        (
            e.report.moved[0].from.as_str(),
            e.report.moved[0].to.as_str()
        ),
        ("10.0.0.5:9100", "10.0.0.7:9100")
    );
}

/// Guards against a member holding the shared key being redirected by a
/// box that only answers a plain handshake.
#[test]
fn with_a_cluster_key_in_play_only_an_authenticated_machine_moves_a_node() {
    let (node, mark) = found_node("10.0.0.5:9100");
    let mut other = seen(
        Source::Mdns,
        "10.0.0.9:9100",
        Some(caps("aaaaaaaaaaaaaaaa", "b", "cpu", 0)),
        1,
    );
    other.evidence = Evidence::Authenticated;
    let e = expand_file(
        &[node],
        &[mark],
        &NodeDefaults::default(),
        discovery(vec![other, answering("10.0.0.7:9100", Evidence::Handshake)]),
    );
    assert!(e.report.moved.is_empty(), "{:?}", e.report.moved);
    assert_eq!(e.nodes[0].addr, "10.0.0.5:9100");
}

#[test]
fn a_node_id_two_machines_answer_with_moves_nothing_and_says_why() {
    let (node, mark) = found_node("10.0.0.5:9100");
    let mut b = answering("10.0.0.8:9100", Evidence::Handshake);
    b.caps.as_mut().unwrap().hostname = "gpu-b".into();
    let e = expand_file(
        &[node],
        &[mark],
        &NodeDefaults::default(),
        discovery(vec![answering("10.0.0.7:9100", Evidence::Handshake), b]),
    );
    assert!(e.report.moved.is_empty());
    assert_eq!(e.nodes[0].addr, "10.0.0.5:9100");
    assert!(
        e.report
            .warnings
            .iter()
            .any(|w| w.contains("was not moved")),
        "{:?}",
        e.report.warnings
    );
}

/// Guards against an address that depends on who answered first
/// (docs/protocol.md, "Which address a machine on several networks gets"): a machine seen at two addresses got
/// whichever answered first, so the written address alternated.
#[test]
fn a_machine_seen_at_two_addresses_gets_the_same_one_whichever_answered_first() {
    let at = |addr: &str, ms: u64| {
        let mut s = answering(addr, Evidence::Handshake);
        s.source = Source::Subnet;
        s.found_ms = ms;
        s
    };
    let mut picked = BTreeSet::new();
    for (a, b) in [(1, 2), (2, 1)] {
        let e = expand(
            &[],
            &NodeDefaults::default(),
            discovery(vec![at("192.168.7.3:9100", a), at("10.0.77.3:9100", b)]),
        );
        assert_eq!(e.added().len(), 1, "one machine");
        picked.insert(e.added()[0].addr.clone());
    }
    assert_eq!(picked.into_iter().collect::<Vec<_>>(), ["10.0.77.3:9100"]);
}

/// Guards against one link-local address on two links being taken for one
/// machine: `fe80::1` on eth0 and on eth1 are two boxes, and both are kept.
#[test]
fn one_link_local_address_on_two_links_is_two_machines() {
    let mut a = seen(
        Source::Mdns,
        "[fe80::1%eth0]:9100",
        Some(caps("a", "a", "cuda", 1 << 30)),
        1,
    );
    let mut b = seen(
        Source::Mdns,
        "[fe80::1%eth1]:9100",
        Some(caps("b", "b", "cpu", 0)),
        2,
    );
    // As the mDNS source writes them: the scope in the address, not the IP.
    a.ip = Some("fe80::1".parse().unwrap());
    b.ip = a.ip;
    let mut a2 = a.clone();
    a2.source = Source::Subnet;
    let exp = expand(&[], &NodeDefaults::default(), discovery(vec![a, b, a2]));
    let addrs: Vec<&str> = exp.added().iter().map(|n| n.addr.as_str()).collect();
    assert_eq!(
        addrs,
        ["[fe80::1%eth0]:9100", "[fe80::1%eth1]:9100"],
        "{:#?}",
        exp.report
    );
}
