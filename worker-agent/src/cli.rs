//! **The `rlx-agent` command line** — parsed once into [`AgentArgs`], which
//! `main` and run mode share, plus the two ways of getting this node's caps:
//! probing ([`AgentArgs::probe_options`]) or reading a caps file
//! ([`read_caps_file`]).

// Doc comments on the clap types are the `--help` text, where `[[node]]`
// and `[IPv6]:PORT` are what users type, not documentation links.
#![allow(rustdoc::broken_intra_doc_links)]

use crate::announce::Responder;
use crate::measure::{Policy, Rules};
use crate::probe::{probe, ProbeOptions};
use anyhow::Context;
use clap::Parser;
use rlx_proto::caps::{is_valid_id, limits, Device, NodeCaps};
use std::io::Read;
use std::path::{Path, PathBuf};

pub mod manual;

/// What `rlx-agent` does instead of running, when a subcommand is given.
/// (Its man page and shell completions are files the packages install,
/// written by `cargo run -p rlx-agent --example agent_docs -- DIR`.)
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AgentCommand {
    /// Check this worker and exit: what the agent would announce and on
    /// which interfaces, the agent's and the worker's ports (free,
    /// listening, open in the host firewall), whether an SSH server
    /// answers, the key file and the state directory; each ok, warn, fail
    /// or skip with a fix. Exit 0 when no check failed, 1 when one did.
    Check {
        /// Print JSON: {"v": 1, "checks": [{"check", "status", "detail", "fix"}], "healthy"}.
        #[arg(long)]
        json: bool,
    },
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// When the text logs are coloured (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless `NO_COLOR` is set (no-color.org).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl Color {
    /// Whether to colour stderr now.
    pub fn for_stderr(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// What ends `rlx-agent --help` and its man page: examples, then the exit
/// status table `rlx-discover` shares ([`rlx_proto::exit`]).
fn after_help() -> String {
    format!(
        "Examples:
  rlx-agent --probe --no-bench
  rlx-agent --probe --addr gpu-a:9100 --ckpt /data/models   # what the RLX runtime runs over ssh
  rlx-agent --probe --caps-file node.json
  rlx-agent --ckpt-dir /data/models/GLM-5.3-Flash --cluster lab --key-file /etc/rlx/cluster.key
  rlx-agent --register dns://10.0.0.53/rlx.example.org --tsig-key /etc/rlx/update.key
  rlx-agent check --json

{}
Here, 1 means: rlx-agent check found a failed check (its fix is printed beside it); \
         the agent itself and --probe never exit 1. A running agent stopped by SIGINT or \
         SIGTERM exits 0.",
        rlx_proto::exit::TABLE
    )
}

/// The agent's own port and the worker's, when no flag names them.
pub use rlx_proto::service::{DEFAULT_AGENT_PORT, DEFAULT_WORKER_PORT};

/// Runs on every machine of an RLX cluster: probes this box (cores, RAM,
/// disk, every GPU and accelerator), announces it on the local network as
/// `_rlx._tcp` over mDNS, and answers the coordinator's handshake with its
/// capabilities.
///
/// Logs go to stderr (set RUST_LOG=debug to see every probe decision);
/// stdout carries only the JSON of --probe.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "rlx-agent",
    version,
    after_help = after_help()
)]
pub struct AgentArgs {
    /// Instead of running: check this worker.
    #[command(subcommand)]
    pub command: Option<AgentCommand>,

    /// Print less: warnings and errors only.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Print more (repeat for trace output); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Log lines as text, or as JSON (one object per line: time, level,
    /// fields, message) for journald's and log shippers' parsers.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text,
          env = "RLX_AGENT_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// Colour the text logs: auto (on a terminal, unless NO_COLOR is set),
    /// always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = Color::Auto)]
    pub color: Color,

    /// Read settings from this TOML file: every flag below as a key
    /// (`--worker-port` is `worker_port`; repeatable ones take a list under
    /// their plural, `interfaces = ["eth0"]`). Flags and their RLX_AGENT_*
    /// environment variables override it [default: /etc/rlx/agent.toml,
    /// when it exists].
    #[arg(long, value_name = "FILE", env = "RLX_AGENT_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print this machine's capabilities as one line of JSON on stdout and
    /// exit. This is what a coordinator runs over SSH; nothing is announced
    /// and no port is opened.
    #[arg(long)]
    pub probe: bool,

    /// With --probe only: the address the coordinator reaches this node's
    /// worker at (HOST:PORT or [IPv6]:PORT), as the RLX runtime passes it
    /// (`rlx-agent --probe --addr HOST:PORT --ckpt DIR`). Printed as the
    /// caps' `addr`; its port is the worker port checked, unless
    /// --worker-port is given on the command line [default with --probe:
    /// this host's name and the worker port].
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_probe_addr)]
    pub addr: Option<String>,

    /// Use the capabilities in this JSON file instead of probing (simulated
    /// nodes, or overriding what detection gets wrong). The file is validated
    /// first; errors name the file and the field. --node-id, --cluster and
    /// --ckpt-dir, when given, replace the file's values.
    #[arg(long, value_name = "FILE", env = "RLX_AGENT_CAPS_FILE")]
    pub caps_file: Option<PathBuf>,

    /// mDNS instance name to announce [default: the host name]. If another
    /// agent already uses it, a suffix is added and the rename is logged.
    #[arg(long, env = "RLX_AGENT_NAME")]
    pub name: Option<String>,

    /// This agent's own TCP port: the coordinator's handshake, link
    /// measurement and watch's health checks. Announced in TXT (`agent`);
    /// 0 picks a free port. Must differ from --worker-port.
    #[arg(long, default_value_t = DEFAULT_AGENT_PORT, env = "RLX_AGENT_PORT")]
    pub port: u16,

    /// The port of this box's RLX worker, the one the runtime dials: the
    /// SRV record names it, every written [[node]] addr carries it, and the
    /// agent reports whether something listens there (checked at each
    /// re-probe and each handshake). A worker that is not running is
    /// reported, not an error. Coordinators: `[discover] port`.
    #[arg(long, default_value_t = DEFAULT_WORKER_PORT, value_name = "PORT",
          value_parser = clap::value_parser!(u16).range(1..), env = "RLX_AGENT_WORKER_PORT")]
    pub worker_port: u16,

    /// Checkpoint directory on this machine: reported to the coordinator,
    /// and its free space and read speed are measured (--ckpt is the RLX
    /// runtime's spelling).
    #[arg(
        long,
        visible_alias = "ckpt",
        value_name = "DIR",
        env = "RLX_AGENT_CKPT_DIR"
    )]
    pub ckpt_dir: Option<PathBuf>,

    /// Cluster name to announce. Coordinators with `cluster = "..."` admit
    /// only agents announcing the same name. A filter against mix-ups, not
    /// security: use --key-file for that.
    #[arg(long, env = "RLX_AGENT_CLUSTER")]
    pub cluster: Option<String>,

    /// Shared cluster key (32 random bytes in hex, from `rlx-discover
    /// keygen`). The agent then proves it knows the key in every handshake.
    /// The file must not be readable by group or others.
    #[arg(long, value_name = "FILE", env = "RLX_AGENT_KEY_FILE")]
    pub key_file: Option<PathBuf>,

    /// An endpoint that reaches this agent through a port-forward or NAT
    /// you set up (IP:PORT or [IPv6]:PORT; repeat for several). With a key,
    /// every proof is bound to the endpoint it was accepted on, so a
    /// coordinator that dialled another one refuses it as relayed; a
    /// declared endpoint is bound too, and admitted. Declare only forwards
    /// you control: whoever holds that address can then pass the proof on.
    #[arg(long = "advertise", value_name = "ADDR:PORT", value_parser = parse_advertise, env = "RLX_AGENT_ADVERTISE", value_delimiter = ',')]
    pub advertise: Vec<std::net::SocketAddr>,

    /// Who may make this agent measure its link (`rlx-discover browse
    /// --links`, `expand --links`): `keyed` only coordinators that prove the
    /// cluster key, so an agent without --key-file measures for no one;
    /// `any` also lets anyone who reaches the port measure an agent without
    /// a key (up to 64 MiB each way, a few times a minute); `off` nobody.
    /// A refusal goes back with its reason, and the coordinator reports it
    /// for that link.
    #[arg(long, value_enum, value_name = "WHO", default_value_t = Policy::Keyed, env = "RLX_AGENT_MEASURE")]
    pub measure: Policy,

    /// Link measurements each coordinator address may start a minute (in a
    /// burst, then evenly); all addresses together get 8 times as many.
    /// Raise it for a coordinator that measures in a loop.
    #[arg(long, value_name = "N", default_value_t = crate::measure::limit::DEFAULT_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..=600), env = "RLX_AGENT_MEASURE_PER_MINUTE")]
    pub measure_per_minute: u32,

    /// Device kinds this node's rlx build can target, comma-separated
    /// (cpu, cuda, rocm, vulkan, metal, ane). Devices of other kinds are
    /// still reported, marked unavailable, so the coordinator does not plan
    /// on them.
    #[arg(long, value_delimiter = ',', value_name = "KINDS", default_values_t = Device::ALL.to_vec(), env = "RLX_AGENT_TARGETS")]
    pub targets: Vec<Device>,

    /// Network interface to announce on and answer on; repeat for several.
    /// Given, the handshake port listens only on these interfaces'
    /// addresses (and loopback), following them as they change [default:
    /// announce on every up, multicast-capable interface except virtual
    /// ones such as docker0, veth*, br-*, virbr*, and answer on every
    /// address].
    #[arg(
        long = "interface",
        value_name = "IFACE",
        env = "RLX_AGENT_INTERFACES",
        value_delimiter = ','
    )]
    pub interfaces: Vec<String>,

    /// Who sends the mDNS packets: auto (the system's mDNSResponder on
    /// macOS, falling back to the built-in responder when it cannot be
    /// reached; the built-in one elsewhere), builtin, or system (the DNS-SD
    /// client API: mDNSResponder on macOS, avahi-daemon through
    /// libdns_sd on Linux; no fallback).
    #[arg(long, value_enum, value_name = "WHO", default_value_t = Responder::Auto,
          env = "RLX_AGENT_RESPONDER")]
    pub responder: Responder,

    /// Skip the measurements: CPU GFLOP/s and checkpoint read MB/s are then
    /// reported as 0 (unknown). The GFLOP/s measurement takes about 0.12 s
    /// once per CPU (the result is cached in the state directory); the read
    /// test up to 0.2 s on every probe.
    #[arg(long, env = "RLX_AGENT_NO_BENCH")]
    pub no_bench: bool,

    /// Use this node id (16 lowercase hex characters) instead of the one
    /// derived from machine-id, the board's UUID and the network cards' MACs.
    #[arg(long, value_name = "HEX16", value_parser = parse_node_id, env = "RLX_AGENT_NODE_ID")]
    pub node_id: Option<String>,

    /// Directory for state kept across restarts: the random node id of a
    /// machine without hardware ids, and the cached GFLOP/s [default:
    /// $STATE_DIRECTORY (systemd), /var/lib/rlx-agent as root, else
    /// $XDG_STATE_HOME/rlx-agent or ~/.local/state/rlx-agent].
    #[arg(long, value_name = "DIR", env = "RLX_AGENT_STATE_DIR")]
    pub state_dir: Option<PathBuf>,

    /// Also register this node in a unicast DNS zone, for coordinators beyond
    /// the LAN (`[discover] dns_sd`): DNS UPDATE to SERVER (HOST, HOST:PORT or
    /// [IPv6]:PORT) for ZONE, signed with --tsig-key; refreshed every third
    /// of --lease-secs, deleted on SIGINT/SIGTERM.
    #[arg(long, value_name = "dns://SERVER/ZONE", env = "RLX_AGENT_REGISTER")]
    pub register: Option<crate::register::RegisterTarget>,

    /// TSIG key for --register, in BIND's format (`tsig-keygen -a hmac-sha256
    /// NAME > FILE`). Must not be readable by group or others.
    #[arg(long, value_name = "FILE", env = "RLX_AGENT_TSIG_KEY")]
    pub tsig_key: Option<PathBuf>,

    /// Lease of the DNS registration, seconds: how long after a crash its
    /// records count as gone.
    #[arg(long, value_name = "SECS", default_value_t = crate::register::DEFAULT_LEASE.as_secs(),
          value_parser = clap::value_parser!(u64).range(crate::register::MIN_LEASE.as_secs()..=86_400), env = "RLX_AGENT_LEASE_SECS")]
    pub lease_secs: u64,

    /// Address to publish in the DNS registration (repeatable) [default: the
    /// address this host reaches the DNS server from].
    #[arg(
        long = "register-addr",
        value_name = "IP",
        env = "RLX_AGENT_REGISTER_ADDRS",
        value_delimiter = ','
    )]
    pub register_addrs: Vec<std::net::IpAddr>,

    /// Probe a fixture tree standing for / instead of this machine (tests).
    /// Its gpu-libs.json replaces NVML and Vulkan, nothing is measured, and
    /// the state directory is used only when given explicitly.
    #[arg(long, hide = true, default_value = "/", value_name = "DIR")]
    pub root: PathBuf,
}

pub(crate) fn parse_node_id(s: &str) -> Result<String, String> {
    if is_valid_id(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a node id: expected 16 lowercase hex characters, e.g. 5f0c1d2e3a4b5c6d"
        ))
    }
}

pub(crate) fn parse_advertise(s: &str) -> Result<std::net::SocketAddr, String> {
    let a: std::net::SocketAddr = s.parse().map_err(|_| {
        format!("`{s}` is not an endpoint: expected IP:PORT, e.g. 203.0.113.7:9100 or [2001:db8::7]:9100")
    })?;
    if a.ip().is_unspecified() || a.port() == 0 {
        return Err(format!(
            "`{s}` is not an endpoint a coordinator can dial: give the forwarder's address and port"
        ));
    }
    Ok(a)
}

/// Splits a worker address, `HOST:PORT` or `[IPv6]:PORT`, into its host
/// (brackets kept) and port: the rule `rlx-discover` holds a `[[node]]
/// addr` to (src/addr.rs), so that the runtime's `--addr` reads the same
/// here.
pub fn split_addr(s: &str) -> Result<(&str, u16), String> {
    let example = "e.g. gpu-a:9100, 10.0.0.5:9100 or [fd00::5]:9100";
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("`{s}` has no port: expected HOST:PORT, {example}"));
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("`{s}` has no host: expected HOST:PORT, {example}"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!(
            "`{s}`: write an IPv6 address in brackets, [addr]:port, {example}"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok((host, p)),
        _ => Err(format!(
            "`{s}` has an invalid port `{port}` (1-65535), {example}"
        )),
    }
}

/// The usage rules clap's own words would leave unclear: `--addr` means
/// something only with `--probe`. An error exits 2, as clap's usage errors
/// do.
pub fn check_usage(m: &clap::ArgMatches) -> Result<(), clap::Error> {
    if m.contains_id("addr") && !m.get_flag("probe") {
        return Err(<AgentArgs as clap::CommandFactory>::command().error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "--addr is for --probe only: it is the worker address the printed caps carry (the \
             RLX runtime runs `rlx-agent --probe --addr HOST:PORT --ckpt DIR`); add --probe, or \
             leave --addr out (coordinators find a running agent's address themselves)",
        ));
    }
    Ok(())
}

/// `--addr`: a worker address ([`split_addr`]) that fits the caps' `addr`
/// (at most 255 bytes, no spaces or control characters), kept as given.
pub(crate) fn parse_probe_addr(s: &str) -> Result<String, String> {
    if s.len() > limits::MAX_STRING || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{s:?} is not an address: at most {} bytes, without spaces or control characters",
            limits::MAX_STRING
        ));
    }
    split_addr(s).map(|_| s.to_string())
}

impl AgentArgs {
    /// Takes `--addr`'s port as the worker port, unless `--worker-port` was
    /// given on the command line (`explicit`): the runtime's address is the
    /// one it will dial, so it is what the probe checks, over
    /// `RLX_AGENT_WORKER_PORT` and `worker_port` in the config file, which
    /// describe the box and not this call.
    pub fn worker_port_from_addr(&mut self, explicit: bool) {
        let port = self.addr.as_deref().and_then(|a| split_addr(a).ok());
        if let (Some((_, port)), false) = (port, explicit) {
            self.worker_port = port;
        }
    }

    /// Whether `--root` points somewhere other than this machine.
    pub fn is_fixture(&self) -> bool {
        self.root != Path::new("/")
    }

    /// The state directory in effect (see `--state-dir`).
    pub fn state_dir(&self) -> Option<PathBuf> {
        match &self.state_dir {
            Some(d) => Some(d.clone()),
            None if self.is_fixture() => None,
            None => default_state_dir(),
        }
    }

    /// Probe options for these arguments: the real GPU libraries for this
    /// machine, the fixture's fakes for `--root`.
    pub fn probe_options(&self) -> anyhow::Result<ProbeOptions> {
        let base = if self.is_fixture() {
            ProbeOptions::fixture(&self.root)?
        } else {
            ProbeOptions {
                bench: !self.no_bench,
                ..Default::default()
            }
        };
        Ok(ProbeOptions {
            ckpt_dir: self.ckpt_dir.clone(),
            targets: self.targets.clone(),
            state_dir: self.state_dir(),
            cluster: self.cluster.clone(),
            node_id: self.node_id.clone(),
            interfaces: self.interfaces.clone(),
            ..base
        })
    }

    /// The link-measurement rules these arguments set.
    pub fn measure_rules(&self) -> Rules {
        Rules {
            policy: self.measure,
            per_minute: self.measure_per_minute,
            ..Rules::default()
        }
    }

    /// The file the cluster key is read from, if one is set: systemd's
    /// copy of it, once the file itself passed the key file's rules, or the
    /// file ([`crate::credential::key_source`]).
    pub fn key_path(&self) -> anyhow::Result<Option<PathBuf>> {
        self.key_file
            .as_deref()
            .map(|p| {
                crate::credential::key_source(p, crate::credential::credentials_dir().as_deref())
                    .with_context(|| format!("--key-file (key_file) {}", p.display()))
            })
            .transpose()
    }

    /// The file the TSIG key is read from, if one is set: as
    /// [`AgentArgs::key_path`].
    pub fn tsig_path(&self) -> anyhow::Result<Option<PathBuf>> {
        self.tsig_key
            .as_deref()
            .map(|p| {
                crate::credential::key_source(p, crate::credential::credentials_dir().as_deref())
                    .with_context(|| format!("--tsig-key (tsig_key) {}", p.display()))
            })
            .transpose()
    }

    /// Checks the settings that need each other or a range, once the
    /// flags, the environment and the config file are merged (clap checks
    /// only what came on the command line).
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.register.is_some() == self.tsig_key.is_some(),
            "--register (register) and --tsig-key (tsig_key) go together: a DNS registration \
             is signed with the TSIG key; set both, or neither"
        );
        anyhow::ensure!(
            self.register_addrs.is_empty() || self.register.is_some(),
            "--register-addr (register_addrs) names addresses for --register (register), which \
             is not set"
        );
        anyhow::ensure!(
            (1..=600).contains(&self.measure_per_minute),
            "--measure-per-minute (measure_per_minute) is {}: give 1 to 600",
            self.measure_per_minute
        );
        let lease = crate::register::MIN_LEASE.as_secs()..=86_400;
        anyhow::ensure!(
            lease.contains(&self.lease_secs),
            "--lease-secs (lease_secs) is {}: give {} to {} seconds",
            self.lease_secs,
            lease.start(),
            lease.end()
        );
        anyhow::ensure!(
            self.worker_port != 0,
            "--worker-port (worker_port) is 0: give the port the RLX worker listens on"
        );
        Ok(())
    }

    /// Refuses an agent port that is the worker's: one of the two could
    /// not bind, and a coordinator would dial the agent as the worker.
    pub fn check_ports(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.port != self.worker_port,
            "--port {} is also the worker's port (--worker-port {}): the agent and the RLX \
             worker each need their own port; keep the agent on its default {DEFAULT_AGENT_PORT} \
             or pick another with --port",
            self.port,
            self.worker_port
        );
        Ok(())
    }

    /// This node's caps: the caps file's (with command-line overrides) when
    /// `--caps-file` is given, else a fresh probe; with the two ports and
    /// whether the worker listens now ([`crate::worker`]).
    pub fn caps(&self) -> anyhow::Result<NodeCaps> {
        let mut caps = self.hardware()?;
        caps.worker_port = Some(self.worker_port);
        caps.agent_port = (self.port != 0 && self.port != self.worker_port).then_some(self.port);
        let worker = crate::worker::state_now(self.worker_port);
        caps.worker_listening = Some(worker.worker_listening());
        caps.worker_held_by = worker.held_by();
        let ssh = crate::sshd::port_now();
        caps.ssh_listening = Some(ssh.is_some());
        caps.ssh_port = ssh;
        Ok(caps)
    }

    /// What `--probe` prints: [`AgentArgs::caps`] with an `addr` always
    /// there, since the RLX runtime reads the line as its own `NodeCaps`,
    /// whose `addr` is required: `--addr` as given, else a caps file's own
    /// `addr`, else this host's name and the worker port.
    pub fn probe_caps(&self) -> anyhow::Result<NodeCaps> {
        let mut caps = self.caps()?;
        if let Some(a) = &self.addr {
            caps.addr = a.clone();
        } else if caps.addr.is_empty() {
            let mut host = caps.hostname.clone();
            if host.is_empty() {
                host = crate::probe::clean(&crate::naming::this_host_name());
            }
            if host.is_empty() {
                host = "localhost".into();
            }
            caps.addr = format!("{host}:{}", self.worker_port);
        }
        caps.validate().context("the caps --probe would print")?;
        Ok(caps)
    }

    /// What the box has: the caps file's (with command-line overrides), or
    /// a fresh probe.
    fn hardware(&self) -> anyhow::Result<NodeCaps> {
        let Some(file) = &self.caps_file else {
            return probe(&self.probe_options()?);
        };
        let mut caps = read_caps_file(file)?;
        if let Some(id) = &self.node_id {
            caps.id = id.clone();
        }
        if let Some(c) = &self.cluster {
            caps.cluster = Some(c.clone());
        }
        if let Some(d) = &self.ckpt_dir {
            caps.ckpt_dir = Some(d.to_string_lossy().into_owned());
        }
        caps.validate().with_context(|| {
            format!(
                "caps file {} with the command-line overrides",
                file.display()
            )
        })?;
        Ok(caps)
    }
}

/// Reads and validates a caps file. Errors name the file and, through
/// [`NodeCaps::from_json`], the field (`missing field `cores``, `` `cores` =
/// 1000000 is not plausible ``).
pub fn read_caps_file(path: &Path) -> anyhow::Result<NodeCaps> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot open caps file {}", path.display()))?;
    let mut text = String::new();
    // One byte over the limit is enough for from_json to refuse the size.
    f.take(limits::MAX_JSON_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .with_context(|| {
            format!(
                "cannot read caps file {} (is it UTF-8 JSON?)",
                path.display()
            )
        })?;
    let caps =
        NodeCaps::from_json(&text).with_context(|| format!("caps file {}", path.display()))?;
    for key in unknown_keys(&text) {
        tracing::warn!(
            file = %path.display(),
            %key,
            "unknown key in caps file ignored (a typo, or a field from a newer agent)"
        );
    }
    Ok(caps)
}

/// Keys of caps JSON that [`NodeCaps`] does not know, as paths
/// (`corez`, `devices.0.devcie`). The caps parser ignores them so that
/// newer agents stay readable; a hand-written file deserves a warning, since
/// a misspelt `cores` would otherwise silently read as "unknown".
pub fn unknown_keys(text: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let _: Result<NodeCaps, _> =
        serde_ignored::deserialize(&mut de, |path| unknown.push(path.to_string()));
    unknown
}

/// Where state lives when `--state-dir` is not given: systemd's
/// `StateDirectory=` (`$STATE_DIRECTORY`), `/var/lib/rlx-agent` for root,
/// else the XDG state directory. `None` when no home is known.
pub fn default_state_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dirs) = std::env::var_os("STATE_DIRECTORY").filter(|v| !v.is_empty()) {
        // systemd passes a colon-separated list when several are configured.
        let first = dirs
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        return Some(PathBuf::from(first));
    }
    if nix::unistd::geteuid().is_root() {
        return Some(PathBuf::from("/var/lib/rlx-agent"));
    }
    env("XDG_STATE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".local/state")))
        .map(|d| d.join("rlx-agent"))
}

#[cfg(test)]
mod tests;
