//! **The programs measured, and how each is started in a lab** — simulated
//! agents (real `rlx-agent` with `--caps-file`, or a python-zeroconf stand-in
//! while run mode is not available) and the embedded python scripts. The
//! peers the tests share (avahi-daemon with its private D-Bus, OpenSSH) come
//! from the lab's kit ([`rlx_lab::kit`]).
//!
//! Everything here runs inside lab namespaces ([`rlx_lab`]): no
//! packet reaches the machine's real network.

use anyhow::{bail, Context, Result};
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabProcess};
use rlx_proto::caps::{DeviceInfo, NodeCaps};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The worker port every simulated agent listens on.
pub const PORT: u16 = rlx_proto::service::DEFAULT_WORKER_PORT;

/// The agents' own port: their handshake, where a scan asks for caps.
pub const AGENT_PORT: u16 = rlx_proto::service::DEFAULT_AGENT_PORT;

/// How long a publisher or daemon may take to come up on a busy 2-core
/// machine with 100 of them starting at once.
pub const STARTUP: Duration = Duration::from_secs(90);

const ZC_PUBLISH: &str = include_str!("../py/zc_publish.py");
const ZC_BROWSE: &str = include_str!("../py/zc_browse.py");
const HOSTILE: &str = include_str!("../py/hostile.py");

/// The embedded scripts, written to the run's work directory.
#[derive(Debug, Clone)]
pub struct Scripts {
    /// python-zeroconf publisher plus handshake responder.
    pub zc_publish: PathBuf,
    /// python-zeroconf browser.
    pub zc_browse: PathBuf,
    /// Hostile handshake peers (trust scenario).
    pub hostile: PathBuf,
}

impl Scripts {
    /// Writes the scripts under `dir`.
    pub fn write(dir: &Path) -> Result<Scripts> {
        let put = |name: &str, text: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
            Ok(p)
        };
        Ok(Scripts {
            zc_publish: put("zc_publish.py", ZC_PUBLISH)?,
            zc_browse: put("zc_browse.py", ZC_BROWSE)?,
            hostile: put("hostile.py", HOSTILE)?,
        })
    }
}

/// Caps of simulated node `i`: a distinct id and host name; every other node
/// has a 24 GB CUDA GPU, the rest are CPU-only.
pub fn sim_caps(i: usize) -> NodeCaps {
    let mut devices = vec![DeviceInfo {
        device: "cpu".into(),
        name: "Simulated CPU".into(),
        mem_bytes: 0,
        unified: true,
        gflops: 0.0,
        available: true,
        ..Default::default()
    }];
    if i % 2 == 0 {
        devices.insert(
            0,
            DeviceInfo {
                device: "cuda".into(),
                name: "Simulated RTX 4090".into(),
                mem_bytes: 24 << 30,
                unified: false,
                gflops: 0.0,
                available: true,
                ..Default::default()
            },
        );
    }
    NodeCaps {
        id: format!("{:016x}", 0xbe7c_0000_0000_0000u64 + i as u64),
        hostname: node_name(i),
        os: "linux".into(),
        arch: "x86_64".into(),
        version: "bench".into(),
        cores: 16,
        ram_total: 64 << 30,
        ram_avail: 60 << 30,
        disk_free: 500 << 30,
        devices,
        ..Default::default()
    }
}

/// avahi-daemon's host name in lab host `i`: its own, so that it claims
/// none of the simulated nodes' names (nor the machine's).
pub fn avahi_host_name(i: usize) -> String {
    format!("bench-h{i}")
}

/// Instance and host name of simulated node `i`.
pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// Writes node `i`'s caps JSON and its TXT pairs (JSON list) under `dir`.
pub fn write_caps(dir: &Path, i: usize) -> Result<(PathBuf, PathBuf)> {
    let caps = sim_caps(i);
    let caps_path = dir.join(format!("caps-{i}.json"));
    std::fs::write(&caps_path, caps.to_json())?;
    let txt = rlx_proto::txt::encode(&caps).map_err(|e| anyhow::anyhow!("{e}"))?;
    let txt_path = dir.join(format!("txt-{i}.json"));
    std::fs::write(&txt_path, serde_json::to_string(&txt)?)?;
    Ok((caps_path, txt_path))
}

/// Which program publishes the simulated agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publisher {
    /// The real `rlx-agent` in run mode with `--caps-file`.
    RlxAgent,
    /// python-zeroconf plus a python handshake responder (while run mode is
    /// not available).
    PythonZeroconf,
}

impl Publisher {
    /// For reports.
    pub fn describe(self) -> &'static str {
        match self {
            Publisher::RlxAgent => "rlx-agent (run mode, --caps-file)",
            Publisher::PythonZeroconf => {
                "python-zeroconf publisher + python handshake responder (stand-in for rlx-agent)"
            }
        }
    }
}

/// `rlx-agent` in run mode for node `i` of `lab`, with its own UTS
/// namespace and host name (as on a real machine; otherwise every agent
/// would claim the machine's one host name).
pub fn agent_command(lab: &Lab, i: usize, agent: &Path, caps: &Path, node: usize) -> Command {
    let host = lab.host(i);
    let mut c = lab.command(i, "unshare");
    c.args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\""])
        .arg(node_name(node))
        .arg(agent)
        .arg("--caps-file")
        .arg(caps)
        .args(["--name", &node_name(node)])
        .args(["--interface", &host.iface]);
    c.env("RUST_LOG", "info");
    c
}

/// Starts the publisher of node `node` in host `i`.
pub fn start_publisher(
    lab: &Lab,
    i: usize,
    node: usize,
    kind: Publisher,
    agent: &Path,
    scripts: &Scripts,
    dir: &Path,
) -> Result<LabProcess> {
    let (caps, txt) = write_caps(dir, node)?;
    let cmd = match kind {
        Publisher::RlxAgent => agent_command(lab, i, agent, &caps, node),
        Publisher::PythonZeroconf => {
            let mut c = lab.command(i, PYTHON);
            c.arg(&scripts.zc_publish)
                .arg(node_name(node))
                .arg(lab.host(i).ip.to_string())
                .arg(PORT.to_string())
                .arg(&caps)
                .arg(&txt);
            c
        }
    };
    Ok(lab.spawn(i, cmd)?)
}

/// Waits until every publisher is up: the python ones print `ready` once
/// registered; agents are up when their handshake port accepts, plus the
/// ~1 s mdns-sd needs to probe and announce.
pub fn wait_publishers(lab: &Lab, procs: &[(usize, LabProcess)], kind: Publisher) -> Result<()> {
    wait_publishers_on(lab, procs, kind, false)
}

/// [`wait_publishers`], reaching the agents at their IPv6 ULA when `v6`
/// (an IPv6-only lab).
pub fn wait_publishers_on(
    lab: &Lab,
    procs: &[(usize, LabProcess)],
    kind: Publisher,
    v6: bool,
) -> Result<()> {
    let addr_of = |i: usize| -> std::net::IpAddr {
        match (v6, lab.host(i).ipv6) {
            (true, Some(a)) => a.into(),
            _ => lab.host(i).addr(),
        }
    };
    match kind {
        Publisher::PythonZeroconf => {
            for (_, p) in procs {
                p.wait_for_output("ready", STARTUP)
                    .map_err(|e| anyhow::anyhow!(e))?;
            }
        }
        Publisher::RlxAgent => {
            let addrs = procs
                .iter()
                .map(|(i, _)| std::net::SocketAddr::new(addr_of(*i), AGENT_PORT))
                .collect();
            let left = rlx_lab::kit::netns::wait_tcp(&lab.host(0).ns, addrs, STARTUP)?;
            if let Some(a) = left.first() {
                let dump = procs
                    .iter()
                    .find(|(i, _)| addr_of(*i) == a.ip())
                    .map(|(_, p)| p.dump())
                    .unwrap_or_default();
                bail!("agent at {a} never accepted its handshake port\n{dump}");
            }
            std::thread::sleep(Duration::from_millis(1500));
        }
    }
    Ok(())
}

/// avahi-daemon in lab host `i`, publishing node `node`'s service (its
/// caps in TXT) from one static `.service` file, under its own host name.
pub fn start_avahi(lab: &Lab, i: usize, node: usize) -> Result<rlx_lab::kit::avahi::Avahi> {
    use rlx_lab::kit::avahi::{Avahi, AvahiOptions, StaticService};
    let caps = sim_caps(node);
    let txt: Vec<String> = rlx_proto::txt::to_strings(
        &rlx_proto::txt::encode(&caps).map_err(|e| anyhow::anyhow!("{e}"))?,
    );
    Avahi::start(
        lab,
        i,
        &AvahiOptions {
            services: vec![StaticService {
                name: node_name(node),
                port: PORT,
                txt,
            }],
            host_name: Some(avahi_host_name(node)),
        },
    )
    .map_err(|e| anyhow::anyhow!("starting avahi-daemon in h{i}: {e}"))
}
