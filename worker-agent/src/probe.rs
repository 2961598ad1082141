//! **What this machine has** — the hardware probe behind `rlx-agent --probe`,
//! producing the [`NodeCaps`] every coordinator source reads.
//!
//! ```no_run
//! use rlx_agent::probe::{probe, ProbeOptions};
//! let caps = probe(&ProbeOptions { bench: false, ..Default::default() })?;
//! println!("{}", caps.to_json());
//! # anyhow::Ok(())
//! ```
//!
//! Every file read goes through [`ProbeOptions::root`] (`/` normally, a
//! checked-in fixture tree in tests), and the two GPU libraries sit behind
//! the [`NvidiaLib`] and [`VulkanLib`] traits so tests substitute fakes
//! ([`FixtureLibs`]). Nothing here opens a socket.
//!
//! # Layout
//! - [`root`]: the directory standing for `/`.
//! - [`host`]: cores, RAM, CPU model, host name.
//! - [`node_id`]: the stable, clone-proof node id.
//! - [`disk`]: free space and read rate of the checkpoint directory.
//! - [`bench`](mod@bench): the cached CPU GFLOP/s measurement.
//! - [`pci`], [`nvidia`], [`amd`], [`vulkan`], [`apple`]: what each source of
//!   device information sees; [`accel`] merges them into one list.
//! - [`fixture`]: fake GPU libraries described by a fixture tree.
//! - [`model`]: the plain data the parts hand each other ([`model::Memory`]).
//! - [`state`]: files kept in the state directory, written atomically.

pub mod accel;
pub mod amd;
pub mod apple;
pub mod bench;
pub mod disk;
pub mod fixture;
pub mod host;
pub mod model;
pub mod node_id;
pub mod nvidia;
pub mod pci;
pub mod root;
pub mod state;
pub mod vulkan;

pub use fixture::FixtureLibs;
pub use nvidia::{NvidiaGpu, NvidiaLib, Nvml};
pub use vulkan::{AshVulkan, VulkanGpu, VulkanKind, VulkanLib};

use anyhow::{bail, Context};
use rlx_proto::caps::{is_valid_id, limits, Device, DeviceInfo, LinkInfo, NodeCaps};
use root::Root;
use std::fmt;
use std::path::PathBuf;

/// What to probe and how.
pub struct ProbeOptions {
    /// The directory standing for `/` (default `/`). Every `/proc`, `/sys`
    /// and `/etc` read happens under it, so tests point it at a fixture.
    pub root: PathBuf,
    /// Checkpoint directory on this machine: its free space and read rate
    /// are measured, and it is reported in the caps. `None`: both are 0.
    pub ckpt_dir: Option<PathBuf>,
    /// Device kinds this node's rlx build can target. Detected devices of
    /// other kinds are reported with `available = false`. Default: all.
    pub targets: Vec<Device>,
    /// Measure CPU GFLOP/s and the checkpoint read rate. `false` reports 0
    /// for both and keeps the probe to a few milliseconds.
    pub bench: bool,
    /// Where the random node id (when no hardware id exists) and the cached
    /// GFLOP/s live. `None`: nothing is kept.
    pub state_dir: Option<PathBuf>,
    /// Cluster name to put in the caps.
    pub cluster: Option<String>,
    /// A node id that overrides the derived one (16 lowercase hex).
    pub node_id: Option<String>,
    /// NVML, or a fake.
    pub nvidia: Box<dyn NvidiaLib>,
    /// The Vulkan loader, or a fake.
    pub vulkan: Box<dyn VulkanLib>,
    /// The interfaces the agent announces on (`--interface`; empty: the
    /// default rule of [`rlx_net::iface`]): their link facts go in the caps.
    pub interfaces: Vec<String>,
}

impl Default for ProbeOptions {
    /// This machine, every target, with measurements, the real libraries.
    fn default() -> Self {
        ProbeOptions {
            root: PathBuf::from("/"),
            ckpt_dir: None,
            targets: Device::ALL.to_vec(),
            bench: true,
            state_dir: None,
            cluster: None,
            node_id: None,
            nvidia: Box::new(Nvml),
            vulkan: Box::new(AshVulkan),
            interfaces: Vec::new(),
        }
    }
}

impl ProbeOptions {
    /// Options for a fixture tree: its `gpu-libs.json` (if any) answers for
    /// NVML and Vulkan, and nothing is measured (the CPU running the test is
    /// not the fixture's).
    pub fn fixture(root: impl Into<PathBuf>) -> anyhow::Result<ProbeOptions> {
        let root = root.into();
        let libs = FixtureLibs::load(&root)?;
        Ok(ProbeOptions {
            nvidia: Box::new(libs.clone()),
            vulkan: Box::new(libs),
            root,
            bench: false,
            ..Default::default()
        })
    }
}

impl fmt::Debug for ProbeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeOptions")
            .field("root", &self.root)
            .field("ckpt_dir", &self.ckpt_dir)
            .field("targets", &self.targets)
            .field("bench", &self.bench)
            .field("state_dir", &self.state_dir)
            .field("cluster", &self.cluster)
            .field("node_id", &self.node_id)
            .field("interfaces", &self.interfaces)
            .finish_non_exhaustive()
    }
}

/// Probes the machine (or the fixture at `opts.root`).
///
/// Missing information is reported as 0 or left out, never an error: a box
/// without NVML has no CUDA devices, a container without DMI still gets an
/// id. Errors are for what the caller must fix: a root that is not a
/// directory, an invalid `node_id`, or caps that would not validate (a bug,
/// or a fixture with absurd numbers).
pub fn probe(opts: &ProbeOptions) -> anyhow::Result<NodeCaps> {
    let root = Root::new(&opts.root);
    if !root.dir().is_dir() {
        bail!("probe root {} is not a directory", root.dir().display());
    }
    if let Some(id) = &opts.node_id {
        if !is_valid_id(id) {
            bail!("node id {id:?} must be 16 lowercase hex characters, e.g. 5f0c1d2e3a4b5c6d");
        }
    }
    let ckpt_dir = opts
        .ckpt_dir
        .as_deref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));

    // NVML start-up and Vulkan instance creation can each take tens of
    // milliseconds on a GPU box, mostly waiting on the kernel driver: run
    // them beside the measurements and the sysfs reads. The two
    // measurements run one after the other, because on a small machine the
    // read test's system time visibly lowers the GFLOP/s (by about a third
    // on 2 cores).
    let cores = host::cores(&root);
    let cpu_model = host::cpu_model(&root);
    let pci_devices = pci::scan(&root);
    let skip_vulkan = vulkan_pointless(&root, &pci_devices);
    let (nvidia, vulkan, (gflops, io_mbps), rest) = std::thread::scope(|s| {
        let nv = s.spawn(|| opts.nvidia.devices());
        let vk = s.spawn(|| match &skip_vulkan {
            Some(why) => Err(why.clone()),
            None => opts.vulkan.devices(),
        });
        let measured = opts.bench.then(|| {
            s.spawn(|| {
                let gflops = bench::cached_or_measure(opts.state_dir.as_deref(), &cpu_model, cores);
                let io = ckpt_dir.as_deref().map_or(0.0, disk::read_mbps);
                (gflops, io)
            })
        });
        let rest = (
            host::memory(&root),
            host::hostname(&root),
            amd::scan(&root),
            apple_devices(&root),
            match &opts.node_id {
                Some(id) => id.clone(),
                None => node_id::node_id(&root, opts.state_dir.as_deref()),
            },
            ckpt_dir.as_deref().map_or(0, disk::free_bytes),
        );
        let panicked = |what: &str| format!("{what} probe crashed");
        (
            nv.join().unwrap_or_else(|_| Err(panicked("NVML"))),
            vk.join().unwrap_or_else(|_| Err(panicked("Vulkan"))),
            measured.map_or((0.0, 0.0), |h| h.join().unwrap_or((0.0, 0.0))),
            rest,
        )
    });
    let (mem, hostname, amd_gpus, apple, id, disk_free) = rest;
    if let Err(why) = &nvidia {
        tracing::debug!(%why, "no CUDA devices from NVML");
    }
    if let Err(why) = &vulkan {
        tracing::debug!(%why, "no Vulkan devices");
    }

    let names = pci::PciNames::new(&root);
    let sightings = accel::Sightings {
        pci: &pci_devices,
        nvidia: &nvidia,
        amd: &amd_gpus,
        vulkan: &vulkan,
        apple: &apple,
    };
    let mut devices = vec![DeviceInfo {
        device: Device::Cpu.label().into(),
        name: cpu_model.clone(),
        // The CPU works in host RAM: 0 + unified is the caps' way to say so.
        mem_bytes: 0,
        unified: true,
        gflops,
        available: true,
        ..Default::default()
    }];
    devices.extend(accel::assemble(&sightings, &|v, d| names.name(v, d)));
    for d in &mut devices {
        d.name = clean(&d.name);
        if d.parsed().is_some_and(|k| !opts.targets.contains(&k)) {
            d.available = false;
        }
        if d.available
            && d.mem_bytes == 0
            && !d.unified
            && d.parsed().is_some_and(Device::is_accelerator)
        {
            tracing::warn!(device = %d.device, name = %d.name, "accelerator reports no memory size");
        }
    }
    if devices.len() > limits::MAX_DEVICES {
        tracing::warn!(
            found = devices.len(),
            kept = limits::MAX_DEVICES,
            "more devices than the caps allow; listing the first"
        );
        devices.truncate(limits::MAX_DEVICES);
    }

    let caps = NodeCaps {
        id,
        // Chosen by the running agent ([`crate::run::run`]), not the probe.
        incarnation: None,
        // The running agent's own key, set when it answers a handshake
        // ([`crate::run::run`]); a probe proves nothing.
        node_key: None,
        hostname: clean(&hostname),
        addr: String::new(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        cluster: opts.cluster.clone(),
        ckpt_dir: ckpt_dir.map(|p| p.to_string_lossy().into_owned()),
        cores,
        ram_total: mem.total,
        ram_avail: mem.avail,
        disk_free: disk_free.min(limits::MAX_DISK_BYTES),
        devices,
        gflops,
        io_mbps,
        links: links(&root, &opts.interfaces),
        // The ports, the worker check and the SSH check are the command
        // line's ([`crate::cli::AgentArgs::caps`]), not the hardware's.
        worker_port: None,
        worker_listening: None,
        agent_port: None,
        ssh_listening: None,
        ssh_port: None,
        worker_held_by: None,
    };
    caps.validate().with_context(|| {
        format!(
            "probe of {} produced caps that do not validate",
            root.dir().display()
        )
    })?;
    Ok(caps)
}

/// Why asking the Vulkan loader is pointless here, if it is.
///
/// Every hardware Vulkan driver on Linux drives a GPU through a DRM card
/// (`/sys/class/drm/cardN`), except NVIDIA's on a headless server without
/// `nvidia-drm`. With neither, the loader can only find software renderers,
/// which are not reported, yet loading Mesa's drivers to learn that costs
/// tens of milliseconds (a GPU-less VM with mesa-vulkan-drivers), most of
/// the `--probe` budget. Other systems (macOS with MoltenVK) are always asked.
fn vulkan_pointless(root: &Root, pci_devices: &[pci::PciDevice]) -> Option<String> {
    if cfg!(not(target_os = "linux")) && root.is_host() {
        return None;
    }
    let drm_card = root.list("/sys/class/drm").iter().any(|n| {
        n.strip_prefix("card")
            .is_some_and(|i| i.parse::<u32>().is_ok())
    });
    let nvidia = pci_devices.iter().any(|p| p.vendor == pci::vendor::NVIDIA);
    (!drm_card && !nvidia)
        .then(|| "no GPU kernel driver (no /sys/class/drm/card*): Vulkan not asked".to_string())
}

/// The link facts of the interfaces the agent announces on: on the host,
/// the ones [`rlx_net::iface::select`] picks; in a fixture (whose
/// addresses are not this machine's), each `sys/class/net` entry the
/// default rule would take by name, without addresses.
fn links(root: &Root, interfaces: &[String]) -> Vec<LinkInfo> {
    use rlx_net::{iface, linkfacts};
    let facts = if root.is_host() {
        match iface::select(interfaces) {
            Ok(chosen) => linkfacts::facts(&chosen),
            Err(e) => {
                tracing::warn!(error = %e, "no link facts in the caps");
                Vec::new()
            }
        }
    } else {
        root.list("/sys/class/net")
            .into_iter()
            .filter(|n| n != "lo" && !iface::is_virtual_name(n))
            .map(|n| linkfacts::read_sysfs(root.dir(), &n, Vec::new()))
            .collect()
    };
    facts
        .into_iter()
        .take(limits::MAX_LINKS)
        .map(|f| LinkInfo {
            name: clean(&f.name),
            kind: f.kind.label().into(),
            speed_mbps: f.speed_mbps.filter(|s| *s <= limits::MAX_LINK_MBPS),
            mtu: f.mtu.min(limits::MAX_MTU),
            addrs: f.addrs.into_iter().take(limits::MAX_LINKS).collect(),
            rdma: f.rdma,
        })
        .collect()
}

/// Metal GPUs and the Neural Engine, on macOS probing itself.
fn apple_devices(root: &Root) -> Vec<DeviceInfo> {
    #[cfg(target_os = "macos")]
    if root.is_host() {
        return apple::devices(
            apple::sysctl::cpu_brand().as_deref(),
            apple::sysctl::is_arm64(),
            &apple::sysctl::gpus(),
            apple::wired_limit_bytes(apple::sysctl::wired_limit_mb()),
        );
    }
    let _ = root;
    Vec::new()
}

/// Makes a string from a driver or firmware fit the caps: control
/// characters become spaces, runs of spaces collapse, and it is cut to
/// [`limits::MAX_STRING`] bytes at a character boundary.
pub fn clean(s: &str) -> String {
    let spaced: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.len() > limits::MAX_STRING {
        let mut end = limits::MAX_STRING;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_from_drivers_are_made_to_fit_the_caps() {
        assert_eq!(clean("  NVIDIA\tH100\n "), "NVIDIA H100");
        let long = "é".repeat(200);
        let c = clean(&long);
        assert!(c.len() <= limits::MAX_STRING && c.chars().all(|ch| ch == 'é'));
    }
}
