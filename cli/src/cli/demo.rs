//! `rlx-discover demo`: the whole product on a private network, in one
//! command.
//!
//! It builds a LAN out of network namespaces (a bridge and one namespace per
//! machine; [`rlx_lab`]), starts `rlx-agent` on four simulated machines
//! with different hardware (`--caps-file`), writes a cluster file whose
//! `[discover]` stanza is empty, runs `rlx-discover expand` on it from the
//! coordinator's namespace, prints the expanded `[[node]]` list and the
//! report, and tears everything down. Nothing touches the host's network:
//! every packet stays on the private bridge.
//!
//! As root it builds the namespaces directly; as a normal user it re-runs
//! itself inside `unshare --user --map-root-user --net --mount` where the
//! kernel allows unprivileged user namespaces, and says what to do where it
//! does not.

use anyhow::{bail, Context, Result};
use clap::Args;
use rlx_lab::{lab_support, unshare_command, Lab, LabMode, LabOptions, LabProcess};
use rlx_proto::service::DEFAULT_WORKER_PORT;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

/// Set in the re-run under `unshare`, so a failure there cannot loop.
const INNER_ENV: &str = "RLX_DEMO_INNER";

/// How long an agent may take to announce itself: mdns-sd probes the name
/// three times 250 ms apart first (RFC 6762 §8.1), so about 1 s, more on a
/// loaded machine.
const AGENT_START_TIMEOUT: Duration = Duration::from_secs(20);

fn after_help() -> String {
    format!(
        "Examples:
  sudo rlx-discover demo          # as root: namespaces built directly
  rlx-discover demo               # as a user: inside an unprivileged user namespace
  rlx-discover demo --keep-going  # leave the lab up until Enter is pressed

{}",
        crate::cli::runtime::exit_status(
            "the expand the demo ran in its lab exited 1 (the demo exits with that expand's code)"
        )
    )
}

/// Arguments of `demo`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct DemoArgs {
    /// The rlx-agent binary [default: next to this rlx-discover].
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// After the demo, keep the lab up until Enter is pressed (to try
    /// `rlx-discover browse` in it by hand: the commands are printed).
    #[arg(long)]
    pub keep_going: bool,
}

/// One simulated machine.
struct Machine {
    name: &'static str,
    what: &'static str,
    caps: &'static str,
    /// Whether its RLX worker runs (a stand-in, on the worker port): a box
    /// without one is still written, and the report says its worker is
    /// not listening.
    worker: bool,
}

/// The four machines of the demo: the boxes people actually mix.
const MACHINES: [Machine; 4] = [
    Machine {
        name: "gpu-box",
        what: "Linux, 2 x NVIDIA RTX 4090 (24 GiB each), 64 cores, 256 GiB",
        caps: r#"{"id":"d3e0000000000001","hostname":"gpu-box","os":"linux","arch":"x86_64",
          "cores":64,"ram_total":274877906944,"ram_avail":260000000000,"disk_free":2000000000000,
          "gflops":900,"devices":[
            {"device":"cpu","name":"AMD EPYC 7543","mem_bytes":0,"unified":true},
            {"device":"cuda","name":"NVIDIA GeForce RTX 4090","mem_bytes":25757220864},
            {"device":"cuda","name":"NVIDIA GeForce RTX 4090","mem_bytes":25757220864},
            {"device":"vulkan","name":"NVIDIA GeForce RTX 4090","mem_bytes":25757220864}]}"#,
        worker: true,
    },
    Machine {
        name: "mac-studio",
        what: "macOS, Apple M2 Ultra, 128 GiB unified memory, Neural Engine",
        caps: r#"{"id":"d3e0000000000002","hostname":"mac-studio","os":"macos","arch":"aarch64",
          "cores":24,"ram_total":137438953472,"ram_avail":120000000000,"disk_free":1500000000000,
          "gflops":600,"devices":[
            {"device":"cpu","name":"Apple M2 Ultra","mem_bytes":0,"unified":true},
            {"device":"metal","name":"Apple M2 Ultra GPU","mem_bytes":0,"unified":true},
            {"device":"ane","name":"Apple Neural Engine","mem_bytes":0,"unified":true}]}"#,
        worker: true,
    },
    Machine {
        name: "cpu-box",
        what: "Linux, CPU only, 32 cores, 128 GiB",
        caps: r#"{"id":"d3e0000000000003","hostname":"cpu-box","os":"linux","arch":"x86_64",
          "cores":32,"ram_total":137438953472,"ram_avail":130000000000,"disk_free":500000000000,
          "gflops":400,"devices":[
            {"device":"cpu","name":"Intel Xeon Gold 6338","mem_bytes":0,"unified":true}]}"#,
        worker: true,
    },
    Machine {
        name: "old-build",
        what: "Linux, AMD Radeon PRO W7800 (32 GiB), but its rlx build has no ROCm",
        caps: r#"{"id":"d3e0000000000004","hostname":"old-build","os":"linux","arch":"x86_64",
          "cores":16,"ram_total":68719476736,"ram_avail":60000000000,"disk_free":400000000000,
          "gflops":250,"devices":[
            {"device":"cpu","name":"AMD Ryzen 9 7950X","mem_bytes":0,"unified":true},
            {"device":"rocm","name":"AMD Radeon PRO W7800","mem_bytes":34359738368,"available":false}]}"#,
        worker: false,
    },
];

/// The cluster file of the demo: the runtime's `model`, an empty
/// `[discover]`, one hand-written node (a machine that is not on this LAN),
/// and comments that must survive.
const CLUSTER_TOML: &str = "\
# cluster.toml of the demo: nobody typed the machines below.
model = \"unsloth/GLM-5.3-Flash-GGUF\"   # what the RLX runtime will load

[discover]          # empty: browse the LAN for rlx-agents
ckpt_dir = \"/data/models/GLM-5.3-Flash\"

# A machine in another building, written by hand: kept exactly as it is.
[[node]]
addr     = \"192.0.2.10:9100\"
ssh      = \"far-away\"
ckpt_dir = \"/data/models/GLM-5.3-Flash\"
device   = \"cuda\"
";

fn banner(s: &str) {
    println!("\n== {s} ==");
}

/// Runs the demo, re-running inside a user namespace when not root.
pub fn run(a: DemoArgs) -> Result<ExitCode> {
    match lab_support() {
        Ok(LabMode::Root) => demo(&a),
        Ok(LabMode::Unshare) if std::env::var_os(INNER_ENV).is_none() => {
            eprintln!(
                "not root: re-running inside an unprivileged user namespace (unshare --user --net)"
            );
            let exe = std::env::current_exe().context("finding this program")?;
            let status = unshare_command()
                .arg(exe)
                .args(std::env::args_os().skip(1))
                .env(INNER_ENV, "1")
                .status()
                .context("running unshare (util-linux)")?;
            Ok(ExitCode::from(
                status.code().unwrap_or(2).clamp(0, 255) as u8
            ))
        }
        Ok(LabMode::Unshare) => {
            bail!("still not root inside the user namespace; cannot build the lab")
        }
        Err(why) => bail!("the demo needs a private network and cannot build one here: {why}"),
    }
}

fn agent_path(a: &DemoArgs) -> Result<PathBuf> {
    let p = match &a.agent {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("finding this program")?
            .with_file_name("rlx-agent"),
    };
    if !p.is_file() {
        bail!(
            "{} not found: build both programs first (`cargo build --release --workspace`), or pass --agent PATH",
            p.display()
        );
    }
    Ok(p)
}

fn start_agent(
    lab: &Lab,
    host: usize,
    agent: &Path,
    m: &Machine,
    dir: &Path,
) -> Result<LabProcess> {
    let caps = dir.join(format!("{}.json", m.name));
    std::fs::write(&caps, m.caps).with_context(|| format!("writing {}", caps.display()))?;
    let mut cmd = Command::new(agent);
    cmd.args(["--caps-file"])
        .arg(&caps)
        .args(["--name", m.name])
        .env("RUST_LOG", "info");
    Ok(lab.spawn(host, cmd)?)
}

/// Arguments of the hidden `lab-worker`.
#[derive(Debug, Args)]
pub struct LabWorkerArgs {
    /// The port to hold.
    #[arg(long, default_value_t = DEFAULT_WORKER_PORT)]
    pub port: u16,
    /// The name it greets with.
    #[arg(long, default_value = "worker")]
    pub name: String,
}

/// `rlx-discover lab-worker`: [`rlx_lab::worker::serve`] until killed.
pub fn lab_worker(a: LabWorkerArgs) -> Result<ExitCode> {
    rlx_lab::worker::serve(a.port, &a.name)
        .with_context(|| format!("stand-in worker: cannot listen on port {}", a.port))?;
    Ok(ExitCode::SUCCESS)
}

/// Starts the stand-in RLX worker of machine `m` (the runtime's worker, as
/// far as discovery can tell) on the default worker port.
fn start_worker(lab: &Lab, host: usize, me: &Path, m: &Machine) -> Result<LabProcess> {
    let mut cmd = Command::new(me);
    cmd.args(["lab-worker", "--name", m.name]);
    let p = lab.spawn(host, cmd)?;
    p.wait_for_output("listening on", AGENT_START_TIMEOUT)
        .map_err(|e| {
            anyhow::anyhow!(
                "{}'s stand-in worker did not start: {e}\n{}",
                m.name,
                p.dump()
            )
        })?;
    Ok(p)
}

fn demo(a: &DemoArgs) -> Result<ExitCode> {
    let agent = agent_path(a)?;
    let me = std::env::current_exe().context("finding this program")?;
    let lab = Lab::new(LabOptions {
        hosts: 1 + MACHINES.len(),
        ipv6: false,
    })?;
    banner(&format!(
        "a private LAN: {} network namespaces named {}-* on a bridge, {} \
         (nothing touches this machine's network)",
        lab.hosts().len() + 1,
        lab.name(),
        lab.subnet()
    ));
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let mut agents = Vec::new();
    let mut workers = Vec::new();
    for (i, m) in MACHINES.iter().enumerate() {
        let h = lab.host(i + 1);
        println!(
            "  {:<11} {:<15} rlx-agent --caps-file {}.json   # {}",
            m.name, h.ip, m.name, m.what
        );
        agents.push(start_agent(&lab, i + 1, &agent, m, dir.path())?);
        if m.worker {
            println!(
                "  {:<11} {:<15} its RLX worker on port {DEFAULT_WORKER_PORT} (a stand-in that greets)",
                "", ""
            );
            workers.push(start_worker(&lab, i + 1, &me, m)?);
        } else {
            println!(
                "  {:<11} {:<15} no RLX worker running yet (the runtime may start it over ssh)",
                "", ""
            );
        }
    }
    println!(
        "  {:<11} {:<15} the coordinator",
        "coordinator",
        lab.host(0).ip
    );
    for (p, m) in agents.iter().zip(MACHINES.iter()) {
        p.wait_for_output("mDNS: announced on", AGENT_START_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("{} did not come up: {e}\n{}", m.name, p.dump()))?;
    }

    let cluster = dir.path().join("cluster.toml");
    std::fs::write(&cluster, CLUSTER_TOML)?;
    banner("cluster.toml (the input)");
    print!("{CLUSTER_TOML}");
    banner("rlx-discover expand cluster.toml   (run in the coordinator's namespace)");
    let out = lab
        .command(0, &me)
        .arg("expand")
        .arg(&cluster)
        .env("RUST_LOG", "warn")
        .output()
        .context("running rlx-discover expand in the lab")?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    banner("report (stderr)");
    print!("{}", String::from_utf8_lossy(&out.stderr));
    let code = out.status.code().unwrap_or(2);

    if a.keep_going {
        banner("the lab is up");
        println!(
            "  try: sudo ip netns exec {} {} browse\n  press Enter to tear it down",
            lab.host(0).ns,
            me.display()
        );
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    drop(agents);
    drop(workers);
    drop(lab);
    banner("cleaned up: agents and workers stopped, namespaces deleted");
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
