//! **A machine becomes a node** — its device chosen ([`super::select`]),
//! its `[[node]]` config built with `[discover]`'s defaults, and its
//! report entry; the one place both `expand` and `watch` make nodes.

use super::coalesce::Machine;
use super::report::{AddedNode, Report, SkippedDevice};
use super::select::best_device;
use super::worker;
use crate::config::{DiscoverSection, NodeConfig};
use crate::sighting::Sighting;
use rlx_proto::caps::NodeCaps;
use std::net::IpAddr;

/// The settings of `[discover]` that shape discovered nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeDefaults {
    /// Checkpoint dir for discovered nodes (falls back to what the agent says).
    pub ckpt_dir: Option<String>,
    /// Device override.
    pub device: Option<crate::config::DeviceList>,
    /// Precision for discovered nodes (else the runtime's default).
    pub precision: Option<crate::config::Precision>,
    /// The user's ssh aliases and this machine's addresses, for the `ssh`
    /// of nodes found on the network.
    pub ssh: crate::sshtarget::SshTargets,
}

impl From<&DiscoverSection> for NodeDefaults {
    fn from(d: &DiscoverSection) -> Self {
        NodeDefaults {
            ckpt_dir: d.ckpt_dir.clone(),
            device: d.device.clone(),
            precision: d.precision.clone(),
            ssh: Default::default(),
        }
    }
}

/// The node `watch` makes of one admitted sighting: the same device
/// selection and defaults as `expand`, without a file to merge with. What
/// `expand` would report about it beside (skipped devices, warnings) is
/// for `expand`'s report; `watch` reports changes instead.
pub(crate) fn node_of(s: &Sighting, defaults: &NodeDefaults) -> AddedNode {
    let m = Machine::of(s.clone());
    build(&m, defaults, &mut Report::default()).1
}

/// The node config and report entry for machine `m`, with what is worth
/// telling about it (skipped devices, a worker not listening) in `report`.
pub(super) fn build(
    m: &Machine,
    defaults: &NodeDefaults,
    report: &mut Report,
) -> (NodeConfig, AddedNode) {
    let addr_s = m.addr_sighting();
    let addr = addr_s.addr.clone();
    let best = m.best();
    let mut device_mems = Vec::new();
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
            if sel.of_kind.len() > 1 {
                device_mems = sel.mems();
            }
            // `device_policy = "all"` is read as "best" (a warning at load
            // says why): the runtime has one device per node.
            (sel.device.clone(), sel.mem_bytes)
        }
        (None, None) => {
            report.warnings.push(format!(
                "{addr} ({}) accepted a connection on the worker port but no rlx-agent \
                     answered beside it, so nothing vouched for it (it may not be an RLX worker) \
                     and it was added as a CPU node with default settings; run rlx-agent there \
                     to have it vouched for and its devices found",
                crate::escape::untrusted(&best.host)
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
    node.ssh = ssh_of(m, defaults, report);
    node.ckpt_dir = ckpt_dir;
    node.device = device.clone();
    node.precision = defaults.precision.clone().unwrap_or_default();
    let caps = best.caps.clone().unwrap_or_default();
    let added = AddedNode {
        addr: addr.clone(),
        host: addr_s.host.clone(),
        hostname: caps.hostname.clone(),
        id: caps.id.clone(),
        sources: m.sources(),
        evidence: best.evidence,
        identity: best.identity,
        node_key: caps
            .node_key
            .as_deref()
            .and_then(rlx_proto::identity::NodePublicKey::parse)
            .filter(|_| best.identity != crate::sighting::Pinning::Unpinned)
            .map(|k| k.fingerprint()),
        device: device.as_str().to_string(),
        mem_bytes,
        cores: caps.cores,
        cluster: caps.cluster.clone(),
        heard_on: m.sightings.iter().find_map(|s| s.heard_on.clone()),
        found_ms: m.first_found_ms(),
        also_at: m.also_at(&addr),
        device_mems,
        accelerators: caps
            .devices
            .iter()
            .filter(|d| d.parsed() != Some(rlx_proto::caps::Device::Cpu))
            .cloned()
            .collect(),
        link: chosen_link(&caps, &addr),
        measured_link: None,
        agent: addr_s.agent_addr(),
        worker_listening: caps.worker_listening,
        worker_held_by: caps.worker_held_by.clone(),
    };
    report.warnings.extend(worker::warnings(
        &addr,
        &best.host,
        addr_s.port,
        &caps,
        &m.sightings,
    ));
    (node, added)
}

/// The `ssh` the runtime will reach the machine with: the alias SSH
/// discovery used, else [`crate::sshtarget`]'s rule for the chosen address
/// (none for this machine's own). A box whose agent says no SSH server
/// answers is still written with one, and the report says the runtime
/// cannot probe or launch there until one does.
fn ssh_of(m: &Machine, defaults: &NodeDefaults, report: &mut Report) -> Option<String> {
    if let Some(s) = m.ssh().and_then(|s| s.ssh.clone()) {
        return Some(s);
    }
    let addr_s = m.addr_sighting();
    let caps = m.best().caps.as_ref();
    let hostname = caps.map_or("", |c| c.hostname.as_str());
    let sshd = caps.and_then(|c| c.ssh_listening.map(|l| (l, c.ssh_port)));
    let ssh = defaults.ssh.for_node(addr_s.ip?, hostname, sshd)?;
    if sshd == Some((false, None)) {
        report.warnings.push(format!(
            "{} ({}): no SSH server answers on that box, so the RLX runtime cannot probe it or \
             launch its worker there (it does both over ssh {ssh}) until one does: start sshd \
             on it",
            addr_s.addr,
            crate::escape::untrusted(&addr_s.host)
        ));
    }
    Some(ssh)
}

/// The agent's facts about the link holding the node's chosen address,
/// when `addr` is an IP (not an ssh alias) the agent listed.
fn chosen_link(caps: &NodeCaps, addr: &str) -> Option<rlx_proto::caps::LinkInfo> {
    let ip = addr
        .parse::<std::net::SocketAddr>()
        .map(|s| s.ip())
        .or_else(|_| addr.parse::<IpAddr>())
        .ok()?;
    caps.link_for(&ip.to_canonical()).cloned()
}
