//! The RLX runtime takes over where `expand` stops: handed the file that
//! `expand --write` made from an mDNS browse, its own `Cluster::probe`
//! (`rlx-runtime-check`, the published crate's code) runs `ssh HOST
//! "rlx-agent --probe --addr ADDR --ckpt DIR"` for every node, with the
//! `ssh` value written for it. Three boxes on a lab LAN, each with a real
//! sshd on its own address, port 22, and an agent with its own simulated
//! hardware; the coordinator is host 0, and the runtime's plain `ssh`
//! reaches the boxes through a wrapper that adds the test's ssh config.

use rlx_lab::kit::sshd::{self, client_defaults, client_entry, client_wrapper};
use rlx_lab::kit::{agent_bin, discover, require_lab, runtime, Proc};
use rlx_lab::Lab;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce, and an sshd to listen (mdns-sd
/// probes its name for about 0.75 s first; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(20);

/// One simulated machine: what its caps file says, and so what a probe
/// that really ran on it must answer.
struct Machine {
    name: &'static str,
    cores: u64,
    ram_total: u64,
    /// (device label, name, memory in bytes, GFLOP/s), the CPU first.
    devices: &'static [(&'static str, &'static str, u64, f64)],
}

const GIB: u64 = 1 << 30;

/// Three boxes that differ in every field the test reads, so a probe that
/// landed on the wrong box (or on the coordinator) shows.
const MACHINES: [Machine; 3] = [
    Machine {
        name: "gpu-box",
        cores: 32,
        ram_total: 128 * GIB,
        devices: &[
            ("cpu", "cpu", 0, 150.0),
            ("cuda", "NVIDIA GeForce RTX 4090", 24 * GIB, 900.0),
        ],
    },
    Machine {
        name: "cpu-box",
        cores: 16,
        ram_total: 64 * GIB,
        devices: &[("cpu", "cpu", 0, 120.0)],
    },
    Machine {
        name: "rocm-box",
        cores: 12,
        ram_total: 96 * GIB,
        devices: &[
            ("cpu", "cpu", 0, 100.0),
            ("rocm", "AMD Radeon PRO W7900", 48 * GIB, 600.0),
        ],
    },
];

impl Machine {
    /// Its caps file, as an agent's `--caps-file` (and `RLX_AGENT_CAPS_FILE`)
    /// reads it.
    fn caps_json(&self, i: usize) -> String {
        let devices: Vec<Value> = self
            .devices
            .iter()
            .map(|(device, name, mem, gflops)| {
                json!({ "device": device, "name": name, "mem_bytes": mem, "gflops": gflops })
            })
            .collect();
        json!({
            "id": format!("{:016x}", 0xb0 + i),
            "hostname": self.name,
            "os": "linux",
            "arch": "x86_64",
            "cores": self.cores,
            "ram_total": self.ram_total,
            "ram_avail": self.ram_total - 8 * GIB,
            "disk_free": 2_000_000_000_000u64,
            "gflops": self.devices[0].3,
            "io_mbps": 3000.0,
            "devices": devices,
        })
        .to_string()
    }

    fn caps_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.json", self.name))
    }

    fn labels(&self) -> Vec<&'static str> {
        self.devices.iter().map(|d| d.0).collect()
    }
}

/// Box `h` (lab host `h`, 1-based): writes its caps file and starts its
/// sshd on its own address, port 22, whose remote commands read that caps
/// file.
fn start_sshd(lab: &Lab, h: usize, dir: &Path) -> Proc {
    let m = &MACHINES[h - 1];
    let caps = m.caps_path(dir);
    std::fs::write(&caps, m.caps_json(h)).unwrap();
    // RLX_AGENT_CONFIG: the agent the probe starts reads none of this
    // machine's own /etc/rlx/agent.toml, as the lab's agents do not.
    let env = format!(
        "RLX_AGENT_CAPS_FILE={} RLX_AGENT_CONFIG=/dev/null PATH=/usr/bin:/bin",
        caps.display()
    );
    sshd::start_in_lab(lab, h, dir, m.name, &env).unwrap_or_else(|e| panic!("{e}"))
}

/// Box `h`'s running agent, with the same caps file. Started once its sshd
/// listens: the agent looks for an SSH server when it starts, and says so
/// in what it announces.
fn start_agent(lab: &Lab, h: usize, dir: &Path) -> Proc {
    let m = &MACHINES[h - 1];
    let mut agent = Command::new(agent_bin());
    agent
        .arg("--caps-file")
        .arg(m.caps_path(dir))
        .args(["--name", m.name])
        .env("RUST_LOG", "info");
    Proc::spawn(lab, h, agent)
}

/// The box (1-based lab host) whose address `addr` (`IP:PORT`) names.
fn box_of(lab: &Lab, addr: &str, file: &str) -> usize {
    let ip: IpAddr = addr
        .rsplit_once(':')
        .and_then(|(ip, _)| ip.parse().ok())
        .unwrap_or_else(|| panic!("node addr {addr} is not IP:PORT:\n{file}"));
    (1..=MACHINES.len())
        .find(|&h| lab.host(h).addr() == ip)
        .unwrap_or_else(|| panic!("node {addr} is none of the boxes:\n{file}"))
}

/// Guards the path from discovery to the runtime's first step: a node
/// found by mDNS must carry an `ssh` the runtime can use (without one the
/// runtime measures the coordinator's own hardware for it), that `ssh`
/// must reach that very box (the user's alias for its address, or the
/// address), and the agent there must answer the runtime's probe command
/// line with caps the runtime reads.
#[test]
fn the_runtime_probes_every_box_of_a_discovered_cluster_over_the_ssh_that_expand_wrote_and_each_probe_answers_for_that_box(
) {
    let Some(labs) = require_lab() else { return };
    if !sshd::have_sshd() || runtime::check_bin().is_none() {
        return;
    }
    let lab = labs.hosts(1 + MACHINES.len());
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    sshd::prepare(dir).unwrap_or_else(|e| panic!("{e}"));
    let hosts = 1..=MACHINES.len();
    let servers: Vec<Proc> = hosts.clone().map(|h| start_sshd(&lab, h, dir)).collect();
    let listening: Vec<(usize, &Proc)> = hosts.clone().zip(&servers).collect();
    sshd::wait_listening(&lab, 0, &listening, UP);
    let agents: Vec<Proc> = hosts.clone().map(|h| start_agent(&lab, h, dir)).collect();
    for agent in &agents {
        agent.expect_output("mDNS: announced on", UP);
    }

    // The user's ssh config: an alias per box, HostName its address, and
    // the test's key for any bare address.
    let mut ssh_config: String = hosts
        .map(|h| client_entry(dir, MACHINES[h - 1].name, &lab.host(h).ip.to_string(), 22))
        .collect();
    ssh_config.push_str(&client_defaults(dir));
    let ssh_config_path = dir.join("ssh_config");
    std::fs::write(&ssh_config_path, ssh_config).unwrap();
    let ssh_dir = client_wrapper(dir, &ssh_config_path).unwrap_or_else(|e| panic!("{e}"));

    let ckpt = dir.join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let cluster = dir.join("cluster.toml");
    std::fs::write(
        &cluster,
        format!(
            "model = \"m\"\n\n[discover]\nmdns = true\nckpt_dir = {:?}\nssh_config = {:?}\n",
            ckpt.display().to_string(),
            ssh_config_path.display().to_string()
        ),
    )
    .unwrap();
    let expanded = discover::expand(&lab, &cluster, &["--write"]);
    let file = std::fs::read_to_string(&cluster).unwrap();
    assert_eq!(
        expanded.code,
        Some(0),
        "expand --write: {}\nthe file:\n{file}",
        expanded.stdout
    );

    // Each agent found its box's sshd (port 22, so the ssh is port-less).
    let no_sshd: Vec<&Value> = expanded.json["report"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains("no SSH server answers"))
        .collect();
    assert!(
        no_sshd.is_empty(),
        "an agent did not see its box's sshd on port 22: {no_sshd:?}\n{}",
        agents.iter().map(|a| a.stderr()).collect::<String>()
    );

    // The runtime's own reading of the file: a node per box, each with an ssh.
    let read = runtime::load(&cluster).expect("the checker was found above");
    assert_eq!(
        read["ok"], true,
        "the runtime refuses the file: {read}\n{file}"
    );
    let nodes = read["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), MACHINES.len(), "a node per box:\n{file}");
    let mut seen = Vec::new();
    for n in nodes {
        let addr = n["addr"].as_str().unwrap();
        let h = box_of(&lab, addr, &file);
        seen.push(h);
        let ssh = n["ssh"].as_str().unwrap_or("");
        let ip = lab.host(h).ip.to_string();
        assert!(
            ssh == MACHINES[h - 1].name || ssh == ip,
            "node {addr} ({}) needs ssh = {:?} (its alias) or {ip:?}, not {:?}: without it \
             the runtime probes the coordinator in its place\n{file}",
            MACHINES[h - 1].name,
            MACHINES[h - 1].name,
            n["ssh"]
        );
    }
    seen.sort();
    assert_eq!(seen, vec![1, 2, 3], "each box once:\n{file}");

    // The runtime probes each node over its ssh, from the coordinator.
    let probed = runtime::over_ssh(&lab, 0, "probe", &cluster, &agent_bin(), &ssh_dir)
        .expect("the checker was found above");
    assert_eq!(
        probed["ok"], true,
        "the runtime's probe failed: {}\n{file}",
        probed["error"]
    );
    let caps = probed["caps"].as_array().unwrap();
    assert_eq!(caps.len(), nodes.len(), "one caps per node: {probed}");
    for (c, n) in caps.iter().zip(nodes) {
        let addr = n["addr"].as_str().unwrap();
        let m = &MACHINES[box_of(&lab, addr, &file) - 1];
        assert_eq!(c["addr"], n["addr"], "the probe answers for its node: {c}");
        let labels: Vec<&str> = c["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["device"].as_str().unwrap())
            .collect();
        let got = (c["cores"].as_u64(), c["ram_total"].as_u64(), labels);
        let want = (Some(m.cores), Some(m.ram_total), m.labels());
        assert_eq!(
            got, want,
            "node {addr}: the probe over ssh {} did not run on {} (cores, ram_total, devices): \
             {c}\n{file}",
            n["ssh"], m.name
        );
    }

    // And it plans a model over what it probed (a synthetic 16 GB one).
    let planned = runtime::over_ssh(&lab, 0, "plan", &cluster, &agent_bin(), &ssh_dir)
        .expect("the checker was found above");
    assert_eq!(
        planned["ok"], true,
        "the runtime's plan failed: {}\n{file}",
        planned["error"]
    );
    let table = planned["table"].as_str().unwrap();
    eprintln!(
        "the runtime's plan ({}) of the discovered cluster:\n{table}",
        planned["model"].as_str().unwrap_or_default()
    );
    let stages = planned["plan"].as_array().unwrap();
    let layers: u64 = stages
        .iter()
        .map(|s| s["layers"][1].as_u64().unwrap() - s["layers"][0].as_u64().unwrap())
        .sum();
    assert_eq!(layers, 32, "every layer placed once: {planned}");
}
