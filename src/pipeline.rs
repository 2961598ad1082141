//! **The one pipeline** — sightings from every source become `[[node]]`
//! entries here, and only here: coalesce sightings of the same machine,
//! choose its device ([`crate::select::best_device`]), build its node config,
//! merge with the hand-written nodes, and report everything dropped.
//!
//! ```text
//! sightings ─► coalesce (same id+port, same addr) ─► select device ─► NodeConfig ─► merge ─► Report
//! ```
//!
//! Merge is additive: hand-written nodes are kept untouched and come first,
//! and a discovered machine that is already in the list (same `addr`, same
//! ssh alias, same IP and port, or the host name it reports) is dropped rather
//! than added twice. So you can pin one machine and let the rest be found.

use crate::addr::NodeAddr;
use crate::config::{DiscoverSection, NodeConfig};
use crate::report::{AddedNode, Clash, Duplicate, Report, SkippedDevice};
use crate::select::best_device;
use crate::sighting::{Discovery, Sighting, Source};
use rlx_proto::caps::NodeCaps;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The settings of `[discover]` that shape discovered nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeDefaults {
    /// Checkpoint dir for discovered nodes (falls back to what the agent says).
    pub ckpt_dir: Option<String>,
    /// Device override.
    pub device: Option<crate::config::DeviceList>,
    /// Precision for discovered nodes.
    pub precision: Option<crate::config::Precision>,
}

impl From<&DiscoverSection> for NodeDefaults {
    fn from(d: &DiscoverSection) -> Self {
        NodeDefaults {
            ckpt_dir: d.ckpt_dir.clone(),
            device: d.device.clone(),
            precision: d.precision,
        }
    }
}

/// The finished node list and its report.
#[derive(Debug, Clone)]
pub struct Expansion {
    /// Hand-written nodes first, unchanged, then the added ones.
    pub nodes: Vec<NodeConfig>,
    /// Provenance of each added node, in the same order as the tail of `nodes`.
    pub added: Vec<AddedNode>,
    /// What happened.
    pub report: Report,
}

/// One machine, possibly seen by several sources.
#[derive(Debug, Clone)]
struct Machine {
    sightings: Vec<Sighting>,
}

impl Machine {
    /// The sighting whose caps are believed: strongest evidence, then latest.
    fn best(&self) -> &Sighting {
        self.sightings
            .iter()
            .max_by_key(|s| (s.caps.is_some(), s.evidence, s.found_ms))
            .expect("a machine has at least one sighting")
    }

    fn ssh(&self) -> Option<&Sighting> {
        self.sightings.iter().find(|s| s.ssh.is_some())
    }

    /// The address to write: `alias:port` when SSH saw it (the runtime starts
    /// workers through that alias), else the address chosen by the preferred
    /// source (mDNS picks by interface; the scan knows only the IP it dialled).
    fn addr_sighting(&self) -> &Sighting {
        self.ssh().unwrap_or_else(|| {
            self.sightings
                .iter()
                .min_by_key(|s| (source_rank(s.source), s.found_ms))
                .expect("non-empty")
        })
    }

    fn sources(&self) -> Vec<Source> {
        let set: BTreeSet<Source> = self.sightings.iter().map(|s| s.source).collect();
        set.into_iter().collect()
    }

    fn first_found_ms(&self) -> u64 {
        self.sightings.iter().map(|s| s.found_ms).min().unwrap_or(0)
    }
}

fn source_rank(s: Source) -> u8 {
    match s {
        Source::Ssh => 0,
        Source::Mdns => 1,
        // What the agent registered in DNS: right for a wide-area
        // coordinator, but on the LAN mDNS picks by interface.
        Source::Dns => 2,
        Source::Subnet => 3,
    }
}

/// Whether two sightings are the same machine, or two machines claiming one
/// id (a clash), or unrelated.
#[derive(Debug, PartialEq)]
enum Kinship {
    Same,
    Clash,
    Unrelated,
}

fn kinship(a: &Sighting, b: &Sighting) -> Kinship {
    let same_endpoint = a.addr == b.addr
        || matches!((a.ip, b.ip), (Some(x), Some(y)) if x == y && a.port == b.port);
    if same_endpoint {
        return Kinship::Same;
    }
    match (a.id(), b.id()) {
        (Some(x), Some(y)) if x == y && a.port == b.port => {
            // Same id, different endpoints: the same box reached two ways
            // (an ssh alias and an IP, or two NICs) reports the same host
            // name; a cloned disk image running on two boxes does not.
            let host = |s: &Sighting| {
                s.caps
                    .as_ref()
                    .map(|c| c.hostname.clone())
                    .unwrap_or_default()
            };
            let (ha, hb) = (host(a), host(b));
            let ssh_involved = a.source == Source::Ssh || b.source == Source::Ssh;
            if ha == hb && (!ha.is_empty() || ssh_involved) {
                Kinship::Same
            } else {
                Kinship::Clash
            }
        }
        _ => Kinship::Unrelated,
    }
}

/// Whether two sightings are the same machine, by the rule `expand` merges
/// with (same endpoint, or same node id and port from one host name); two
/// boxes claiming one id are not. `watch` uses it to keep one member per
/// machine.
pub fn same_machine(a: &Sighting, b: &Sighting) -> bool {
    kinship(a, b) == Kinship::Same
}

/// Groups sightings into machines (union-find over "same machine"), and
/// collects id clashes.
fn coalesce(sightings: Vec<Sighting>) -> (Vec<Machine>, Vec<Clash>) {
    let n = sightings.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut clash_pairs = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            match kinship(&sightings[i], &sightings[j]) {
                Kinship::Same => {
                    let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                Kinship::Clash => clash_pairs.push((i, j)),
                Kinship::Unrelated => {}
            }
        }
    }
    let mut groups: Vec<(usize, Machine)> = Vec::new();
    let mut root_of = vec![0; n];
    for (i, s) in sightings.into_iter().enumerate() {
        let r = find(&mut parent, i);
        root_of[i] = r;
        match groups.iter_mut().find(|(root, _)| *root == r) {
            Some((_, m)) => m.sightings.push(s),
            None => groups.push((r, Machine { sightings: vec![s] })),
        }
    }
    let mut clashes: Vec<Clash> = Vec::new();
    for (i, j) in clash_pairs {
        if root_of[i] == root_of[j] {
            continue;
        }
        let id = groups
            .iter()
            .find(|(r, _)| *r == root_of[i])
            .and_then(|(_, m)| m.best().id().map(str::to_string))
            .unwrap_or_default();
        let addrs: Vec<String> = [root_of[i], root_of[j]]
            .iter()
            .filter_map(|r| groups.iter().find(|(g, _)| g == r))
            .map(|(_, m)| m.addr_sighting().addr.clone())
            .collect();
        match clashes.iter_mut().find(|c| c.id == id) {
            Some(c) => {
                for a in addrs {
                    if !c.addrs.contains(&a) {
                        c.addrs.push(a);
                    }
                }
            }
            None => clashes.push(Clash { id, addrs }),
        }
    }
    (groups.into_iter().map(|(_, m)| m).collect(), clashes)
}

/// How a hand-written node matches a discovered machine, if it does.
fn hand_match(hand: &NodeConfig, m: &Machine) -> Option<&'static str> {
    // Leniently: a node built through the library API need not have passed
    // the config check.
    let (hand_host, hand_port) = NodeAddr::split(&hand.addr);
    let hand_ip = hand_host.parse::<IpAddr>().ok();
    for s in &m.sightings {
        if hand.addr == s.addr {
            return Some("addr");
        }
        if let (Some(a), Some(b)) = (&hand.ssh, &s.ssh) {
            if a == b {
                return Some("ssh alias");
            }
        }
        if hand_ip.is_some() && hand_ip == s.ip && hand_port == Some(s.port) {
            return Some("IP and port");
        }
        if let Some(c) = &s.caps {
            let h = hand_host.strip_suffix(".local").unwrap_or(hand_host);
            if !c.hostname.is_empty()
                && h.eq_ignore_ascii_case(&c.hostname)
                && hand_port == Some(s.port)
            {
                return Some("host name");
            }
        }
    }
    None
}

/// Warns when a hand-written node names a device its machine does not have
/// (or cannot use): the mistake this whole tool exists to catch.
fn disagreement(hand: &NodeConfig, caps: &NodeCaps) -> Option<String> {
    let usable: BTreeSet<_> = caps
        .devices
        .iter()
        .filter(|d| d.available)
        .filter_map(|d| d.parsed())
        .collect();
    let missing: Vec<String> = hand
        .device
        .kinds()
        .filter(|k| k.is_accelerator() && !usable.contains(k))
        .map(|k| k.to_string())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let found = best_device(caps).device.as_str();
    Some(format!(
        "hand-written [[node]] {} says device = \"{}\", but the machine reports no usable {} \
         (discovery would choose \"{found}\"); the node was kept as written",
        hand.addr,
        hand.device,
        missing.join(", ")
    ))
}

/// Runs the pipeline: hand-written nodes plus what the sources found.
pub fn expand(hand: &[NodeConfig], defaults: &NodeDefaults, found: Discovery) -> Expansion {
    let mut report = Report {
        tried: found.attempts,
        kept: hand.len(),
        failed: found.problems,
        ..Default::default()
    };
    let (mut machines, clashes) = coalesce(found.sightings);
    report.clashes = clashes;
    machines.sort_by_key(|m| (m.first_found_ms(), m.addr_sighting().addr.clone()));

    let mut nodes: Vec<NodeConfig> = hand.to_vec();
    let mut added = Vec::new();
    for m in machines {
        let addr_s = m.addr_sighting();
        let addr = addr_s.addr.clone();
        if let Some((h, why)) = hand.iter().find_map(|h| hand_match(h, &m).map(|w| (h, w))) {
            if let Some(caps) = &m.best().caps {
                report.warnings.extend(disagreement(h, caps));
            }
            report.duplicates.push(Duplicate {
                source: addr_s.source,
                host: addr_s.host.clone(),
                addr: addr.clone(),
                same_as: h.addr.clone(),
                matched_by: why.into(),
            });
            continue;
        }
        // Extra sightings of this machine from other sources are reported as
        // folded in, so the user sees that SSH and mDNS agreed.
        for s in &m.sightings {
            if s.source != addr_s.source {
                report.duplicates.push(Duplicate {
                    source: s.source,
                    host: s.host.clone(),
                    addr: s.addr.clone(),
                    same_as: addr.clone(),
                    matched_by: if s.id().is_some() && s.addr != addr {
                        "id"
                    } else {
                        "addr"
                    }
                    .into(),
                });
            }
        }
        let best = m.best();
        let (device, mem_bytes) = match (&defaults.device, &best.caps) {
            (Some(forced), caps) => (forced.clone(), caps.as_ref().map_or(0, |c| c.ram_total)),
            (None, Some(caps)) => {
                let sel = best_device(caps);
                for sk in &sel.skipped {
                    report.skipped_devices.push(SkippedDevice {
                        addr: addr.clone(),
                        device: sk.label.clone(),
                        name: sk.name.clone(),
                        reason: sk.reason,
                        why: sk.to_string(),
                    });
                }
                (sel.device, sel.mem_bytes)
            }
            (None, None) => {
                report.warnings.push(format!(
                    "{addr} ({}) accepted a connection but did not say what it has, so it was \
                     added as a CPU node with default settings; run rlx-agent there to have its \
                     devices found",
                    best.host
                ));
                (Default::default(), 0)
            }
        };
        let ckpt_dir = defaults
            .ckpt_dir
            .clone()
            .or_else(|| best.caps.as_ref().and_then(|c| c.ckpt_dir.clone()))
            .unwrap_or_default();
        let mut node = NodeConfig::new(addr.clone());
        node.ssh = m.ssh().and_then(|s| s.ssh.clone());
        node.ckpt_dir = ckpt_dir;
        node.device = device.clone();
        node.precision = defaults.precision.unwrap_or_default();
        let caps = best.caps.clone().unwrap_or_default();
        added.push(AddedNode {
            addr: addr.clone(),
            host: addr_s.host.clone(),
            hostname: caps.hostname.clone(),
            id: caps.id.clone(),
            sources: m.sources(),
            evidence: best.evidence,
            device: device.as_str(),
            mem_bytes,
            cores: caps.cores,
            cluster: caps.cluster.clone(),
            heard_on: m.sightings.iter().find_map(|s| s.heard_on.clone()),
            found_ms: m.first_found_ms(),
        });
        nodes.push(node);
    }
    report.added = added.clone();
    Expansion {
        nodes,
        added,
        report,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sighting::Evidence;
    use rlx_proto::caps::DeviceInfo;

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
            }],
            ..Default::default()
        }
    }

    fn seen(source: Source, addr: &str, caps: Option<NodeCaps>, ms: u64) -> Sighting {
        let (host, port) = NodeAddr::split(addr);
        Sighting {
            source,
            host: host.into(),
            addr: addr.into(),
            ip: host.parse().ok(),
            port: port.unwrap(),
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
        assert_eq!(e.added[0].sources, vec![Source::Ssh, Source::Mdns]);
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
        assert_eq!(e.added[0].evidence, Evidence::Handshake);
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
        assert!(e.report.warnings[0].contains("did not say what it has"));
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
}
