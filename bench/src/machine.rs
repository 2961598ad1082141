//! **The machine a run was taken on** — from `nproc`, `lscpu`, `uname` and
//! `free`, plus the peers' versions, so that figures can be compared with
//! the machine they came from.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::process::Command;

/// Description of the machine and the software measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    /// `nproc`.
    pub nproc: String,
    /// `lscpu` model name, sockets/cores/threads and caches.
    pub lscpu: Vec<String>,
    /// `uname -srvm`.
    pub uname: String,
    /// `free -m` (the `Mem:` line).
    pub memory: String,
    /// `/proc/loadavg` when the run started.
    pub load_at_start: String,
    /// `/proc/loadavg` when the run ended.
    pub load_at_end: String,
    /// Version of each tool measured.
    pub versions: BTreeMap<String, String>,
}

fn first_line(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(o) => {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string()
        }
        Err(e) => format!("not available ({e})"),
    }
}

/// `/proc/loadavg`, trimmed.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The 1-minute load average.
pub fn load1() -> f64 {
    loadavg()
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

impl Machine {
    /// Describes this machine; `discover` and `agent` are the binaries
    /// measured.
    pub fn describe(discover: &std::path::Path, agent: &std::path::Path) -> Machine {
        let lscpu = Command::new("lscpu")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let wanted = [
            "Model name",
            "Socket(s)",
            "Core(s) per socket",
            "Thread(s) per core",
            "CPU max MHz",
            "L2 cache",
            "L3 cache",
            "Hypervisor vendor",
        ];
        let lscpu = lscpu
            .lines()
            .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
            .map(|l| {
                let mut parts = l.splitn(2, ':');
                let k = parts.next().unwrap_or("").trim();
                let v = parts.next().unwrap_or("").trim();
                format!("{k}: {v}")
            })
            .collect();
        let memory = Command::new("free")
            .arg("-m")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find(|l| l.starts_with("Mem:"))
                    .unwrap_or("")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let mut versions = BTreeMap::new();
        versions.insert(
            "rlx-discover".into(),
            first_line(&discover.to_string_lossy(), &["--version"]),
        );
        versions.insert(
            "rlx-agent".into(),
            first_line(&agent.to_string_lossy(), &["--version"]),
        );
        versions.insert(
            "python3-zeroconf".into(),
            first_line(
                rlx_lab::kit::PYTHON,
                &["-c", "import zeroconf,sys; print('zeroconf', zeroconf.__version__, 'python', sys.version.split()[0])"],
            ),
        );
        versions.insert("avahi".into(), first_line("avahi-daemon", &["--version"]));
        versions.insert("nmap".into(), first_line("nmap", &["--version"]));
        versions.insert("ssh".into(), first_line("ssh", &["-V"]));
        versions.insert("gnuplot".into(), first_line("gnuplot", &["--version"]));
        versions.insert("serf".into(), first_line("serf", &["version"]));
        // Which source was measured: set by bench/run.sh from git.
        if let Ok(src) = std::env::var("RLX_BENCH_SOURCE") {
            versions.insert("source measured".into(), src);
        }
        Machine {
            nproc: first_line("nproc", &[]),
            lscpu,
            uname: first_line("uname", &["-srvm"]),
            memory,
            load_at_start: loadavg(),
            load_at_end: String::new(),
            versions,
        }
    }
}
