//! **The programs measured, and how each is started in a lab** — simulated
//! agents (real `rlx-agent` with `--caps-file`, or a python-zeroconf stand-in
//! while run mode is not available), avahi-daemon with its private D-Bus,
//! and the embedded python scripts.
//!
//! Everything here runs inside lab namespaces ([`rlx_lab`]): no
//! packet reaches the machine's real network.

use anyhow::{bail, Context, Result};
use rlx_lab::{Lab, LabProcess};
use rlx_proto::caps::{DeviceInfo, NodeCaps};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Debian's interpreter, which has python3-zeroconf (the `python3` on PATH
/// may be another build without Debian's packages).
pub const PYTHON: &str = "/usr/bin/python3";

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
            let left = crate::proc::wait_tcp(&lab.host(0).ns, addrs, STARTUP)?;
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

/// avahi-daemon in one lab host, with the private system D-Bus it needs.
/// The daemon can be restarted (a fresh cache) while the bus stays.
pub struct Avahi {
    host: usize,
    dir: PathBuf,
    bus: String,
    _dbus: LabProcess,
    daemon: Option<LabProcess>,
}

impl Avahi {
    /// Starts D-Bus and avahi-daemon in host `i`; `services` (name, type,
    /// port, TXT strings) are published from static service files.
    pub fn start(
        lab: &Lab,
        i: usize,
        dir: &Path,
        services: &[(String, u16, Vec<String>)],
    ) -> Result<Avahi> {
        let dir = dir.join(format!("avahi-h{i}"));
        std::fs::create_dir_all(dir.join("services"))?;
        let sock = dir.join("bus");
        std::fs::write(
            dir.join("dbus.conf"),
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                sock.display()
            ),
        )?;
        let host = lab.host(i);
        std::fs::write(
            dir.join("avahi-daemon.conf"),
            format!(
                "[server]\nhost-name=bench-h{i}\nuse-ipv4=yes\nuse-ipv6={}\nallow-interfaces={}\n\
                 enable-dbus=yes\n[wide-area]\nenable-wide-area=no\n[publish]\npublish-hinfo=no\n\
                 publish-workstation=no\n",
                // IPv6 only in a lab that has it (an IPv6-only mdns case).
                if host.ipv6.is_some() { "yes" } else { "no" },
                host.iface
            ),
        )?;
        for (n, (name, port, txt)) in services.iter().enumerate() {
            let txt: String = txt
                .iter()
                .map(|t| format!("    <txt-record>{}</txt-record>\n", xml_escape(t)))
                .collect();
            std::fs::write(
                dir.join("services").join(format!("s{n}.service")),
                format!(
                    "<?xml version=\"1.0\" standalone='no'?>\n<!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
                     <service-group>\n  <name>{}</name>\n  <service>\n    <type>{service}</type>\n    <port>{port}</port>\n{txt}  </service>\n</service-group>\n",
                    xml_escape(name),
                    service = rlx_proto::service::SERVICE,
                ),
            )?;
        }
        let mut c = lab.command(i, "dbus-daemon");
        c.arg(format!("--config-file={}", dir.join("dbus.conf").display()))
            .args(["--nofork", "--nopidfile"]);
        let dbus = lab.spawn(i, c)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            if std::time::Instant::now() > deadline {
                bail!(
                    "private dbus-daemon did not create {}\n{}",
                    sock.display(),
                    dbus.dump()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut a = Avahi {
            host: i,
            bus: format!("unix:path={}", sock.display()),
            dir,
            _dbus: dbus,
            daemon: None,
        };
        a.restart(lab)?;
        Ok(a)
    }

    /// (Re)starts avahi-daemon: a fresh daemon has an empty cache. Returns
    /// once it logged "Server startup complete".
    pub fn restart(&mut self, lab: &Lab) -> Result<()> {
        if let Some(d) = self.daemon.take() {
            d.kill();
        }
        let mut c = lab.command(self.host, "sh");
        c.arg("-c")
            .arg(format!(
                "mount -t tmpfs tmpfs /run && mount --bind {svc} /etc/avahi/services && \
                 exec avahi-daemon --no-chroot --no-drop-root --no-rlimits -f {conf}",
                svc = self.dir.join("services").display(),
                conf = self.dir.join("avahi-daemon.conf").display()
            ))
            .env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus);
        let d = lab.spawn(self.host, c)?;
        d.wait_for_output("Server startup complete", Duration::from_secs(30))
            .map_err(|e| anyhow::anyhow!(e))?;
        self.daemon = Some(d);
        Ok(())
    }

    /// A client command (avahi-browse ...) in the daemon's host, on its bus.
    pub fn client(&self, lab: &Lab, program: &str) -> Command {
        let mut c = lab.command(self.host, program);
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus);
        c
    }

    /// The daemon's PID.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(|d| d.pid())
    }

    /// The D-Bus daemon's PID.
    pub fn dbus_pid(&self) -> u32 {
        self._dbus.pid()
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
