//! Multi-accelerator nodes through the pipeline: the one device kind
//! written (the runtime has no device indices), and the details and link facts each added node carries.

use super::*;
use crate::sighting::Discovery;
use crate::sighting::{Evidence, Sighting, Source};
use rlx_proto::caps::NodeCaps;
use rlx_proto::caps::{DeviceInfo, LinkInfo, PcieLink};

const GIB: u64 = 1 << 30;

fn gpu(label: &str, mem: u64) -> DeviceInfo {
    DeviceInfo {
        device: label.into(),
        name: format!("{label} {}", mem / GIB),
        mem_bytes: mem,
        pcie: Some(PcieLink { gen: 4, width: 16 }),
        ..Default::default()
    }
}

fn node_with(devices: Vec<DeviceInfo>) -> NodeCaps {
    NodeCaps {
        hostname: "gpu-a".into(),
        os: "linux".into(),
        cores: 32,
        ram_total: 128 * GIB,
        ram_avail: 100 * GIB,
        devices,
        links: vec![
            LinkInfo {
                name: "wlan0".into(),
                kind: "wifi".into(),
                speed_mbps: None,
                mtu: 1500,
                addrs: vec!["192.168.1.20".parse().unwrap()],
                rdma: false,
            },
            LinkInfo {
                name: "eth0".into(),
                kind: "ethernet".into(),
                speed_mbps: Some(10_000),
                mtu: 9000,
                addrs: vec!["10.0.0.5".parse().unwrap()],
                rdma: false,
            },
        ],
        ..Default::default()
    }
}

fn run(caps: NodeCaps) -> Expansion {
    let found = Discovery {
        sightings: vec![Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source: Source::Subnet,
            host: "10.0.0.5".into(),
            addr: "10.0.0.5:9100".into(),
            ip: "10.0.0.5".parse().ok(),
            port: 9100,
            agent_port: Some(9100),
            worker_reachable: None,
            ssh: None,
            evidence: Evidence::Handshake,
            caps: Some(caps),
            heard_on: None,
            found_ms: 3,
        }],
        ..Default::default()
    };
    expand(&[], &NodeDefaults::default(), found)
}

fn cpu() -> DeviceInfo {
    DeviceInfo {
        device: "cpu".into(),
        unified: true,
        ..Default::default()
    }
}

/// Guards against a two-GPU box being reported as if it had one GPU.
#[test]
fn a_box_with_two_gpus_is_reported_with_both_and_keeps_the_seeds_device() {
    let e = run(node_with(vec![
        cpu(),
        gpu("cuda", 24 * GIB),
        gpu("cuda", 24 * GIB),
    ]));
    let a = &e.added()[0];
    assert_eq!(
        e.nodes[0].device.as_str(),
        "cuda",
        "one device kind, no index: the runtime names devices so"
    );
    assert_eq!(a.device_mems, [24 * GIB, 24 * GIB]);
    assert_eq!(a.device_summary(), "2x cuda 24.0 GiB");
    assert_eq!(a.accelerators.len(), 2, "details travel, the CPU does not");
    assert_eq!(a.accelerators[1].pcie, Some(PcieLink { gen: 4, width: 16 }));
}

#[test]
fn the_link_of_the_chosen_address_is_reported_with_the_node() {
    let e = run(node_with(vec![cpu(), gpu("cuda", 24 * GIB)]));
    let link = e.added()[0].link.as_ref().expect("10.0.0.5 is on eth0");
    assert_eq!(
        (link.name.as_str(), link.speed_mbps),
        ("eth0", Some(10_000))
    );
    assert_eq!(e.added()[0].link_text().as_deref(), Some("10 GbE"));
    let mut old = node_with(vec![cpu()]);
    old.links.clear();
    assert_eq!(run(old).added()[0].link, None, "an older agent");
}

/// The runtime reaches every box over `ssh` and takes a node without it
/// for the coordinator's own: a node found on the network is written with
/// one, and a box whose agent says no SSH server answers is still written,
/// with a warning that the runtime cannot probe or launch there yet.
#[test]
fn a_node_found_on_the_network_is_written_with_ssh_and_a_box_without_sshd_is_warned_about() {
    let mut caps = node_with(vec![cpu()]);
    caps.ssh_listening = Some(true);
    caps.ssh_port = Some(22);
    let e = run(caps.clone());
    assert_eq!(e.nodes[0].ssh.as_deref(), Some("10.0.0.5"));
    assert!(!e.report.warnings.iter().any(|w| w.contains("SSH")));
    caps.ssh_listening = Some(false);
    caps.ssh_port = None;
    let e = run(caps);
    assert_eq!(e.nodes[0].ssh.as_deref(), Some("10.0.0.5"), "still written");
    assert!(
        e.report
            .warnings
            .iter()
            .any(|w| w.contains("no SSH server answers") && w.contains("cannot probe it or launch")),
        "{:?}",
        e.report.warnings
    );
}
