//! **The lab's namespaces**: the switch, the hosts and the router of a
//! routed lab, built and torn down (see the crate docs, "Shape"), and the
//! commands and processes run in them.

use crate::cmd::{display, is_wrapped, run, run_all};
use crate::error::{LabError, Result};
use crate::neigh::{self, NeighRoom};
use crate::privilege::prepare_netns_dir;
use crate::process::{kill_and_reap, LabProcess};
use crate::{HOST_IFACE, KEEP_ENV};
use ipnet::Ipv4Net;
use rlx_net::netguard::GUARD_ENV;

/// The variable that names `rlx-agent`'s config file (its `--config`,
/// `worker-agent/src/cli.rs`).
const AGENT_CONFIG_ENV: &str = "RLX_AGENT_CONFIG";
/// systemd's variable for a service's state directory, which `rlx-agent`
/// keeps its node id and key in.
const STATE_ENV: &str = "STATE_DIRECTORY";
use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Hosts per /24 in the address plan: `.1` to `.250`, leaving `.251`-`.255`
/// free for peers a test adds by hand.
const HOSTS_PER_24: usize = 250;

/// Most hosts on one bridge of a lab's switch. The kernel stops a bridge
/// at 1,024 ports (`BR_MAX_PORTS`); a larger lab chains bridges, each
/// joined to the next by a veth pair (one port on each), so that its hosts
/// are still one segment (multicast floods across, as across two switches
/// joined by a cable).
pub const HOSTS_PER_BRIDGE: usize = 1000;

/// Labs made by this process so far: part of every namespace name.
static LAB_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Options for [`Lab::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabOptions {
    /// Number of host namespaces on the switch.
    pub hosts: usize,
    /// Keep IPv6 on (link-local plus a ULA per host). Off by default, which
    /// avoids duplicate link-local answers in IPv4 tests.
    pub ipv6: bool,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            hosts: 2,
            ipv6: false,
        }
    }
}

/// Options for [`Lab::routed`]: several LANs joined by a router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedOptions {
    /// Hosts on each subnet, in order: `[2, 3]` is two subnets, hosts 0-1 on
    /// the first and 2-4 on the second. At most 250 subnets of 250 hosts.
    pub subnets: Vec<usize>,
}

/// One host of a lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Its network namespace (`ip netns exec <ns> ...`).
    pub ns: String,
    /// Its link: `eth0`, or `lo` in a loopback lab.
    pub iface: String,
    /// Its IPv4 address (`127.0.0.1` in a loopback lab).
    pub ip: Ipv4Addr,
    /// Prefix length of `ip` (16; 8 on loopback).
    pub prefix_len: u8,
    /// Its IPv6 ULA when the lab has IPv6.
    pub ipv6: Option<Ipv6Addr>,
    /// The switch-side end of its veth, in the switch namespace.
    pub switch_port: Option<String>,
}

impl Host {
    /// The IPv4 address as an [`IpAddr`].
    pub fn addr(&self) -> IpAddr {
        IpAddr::V4(self.ip)
    }
}

/// A private network of namespaces, torn down on drop.
pub struct Lab {
    name: String,
    switch: Option<String>,
    /// The router namespace of a routed lab.
    router: Option<String>,
    /// Subnet index of each host (all 0 but in a routed lab).
    host_subnet: Vec<usize>,
    hosts: Vec<Host>,
    subnet: Ipv4Net,
    /// Every namespace this lab asked for, deleted on drop.
    namespaces: Vec<String>,
    /// Output of spawned processes; removed on drop.
    logs: PathBuf,
    procs: Mutex<Vec<Arc<Mutex<Child>>>>,
    spawned: AtomicUsize,
    /// The neighbour table's limits raised for a large lab, put back when
    /// it is dropped (after its namespaces: see [`crate::neigh`]).
    neigh: Option<NeighRoom>,
}

impl fmt::Debug for Lab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lab")
            .field("name", &self.name)
            .field("subnet", &self.subnet)
            .field("hosts", &self.hosts.len())
            .finish()
    }
}

impl Lab {
    fn empty(subnet: Ipv4Net) -> Result<Lab> {
        prepare_netns_dir()?;
        sweep_stale();
        let n = LAB_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("rlx-{}-{n}", std::process::id());
        // The name holds our live pid, so an existing directory is a dead
        // process's leftover.
        let logs = std::env::temp_dir().join(format!("{name}-logs"));
        let _ = fs::remove_dir_all(&logs);
        fs::create_dir_all(&logs).map_err(|source| LabError::Io {
            what: "cannot create the log directory",
            path: logs.clone(),
            source,
        })?;
        Ok(Lab {
            name,
            switch: None,
            router: None,
            host_subnet: Vec::new(),
            hosts: Vec::new(),
            subnet,
            namespaces: Vec::new(),
            logs,
            procs: Mutex::new(Vec::new()),
            neigh: None,
            spawned: AtomicUsize::new(0),
        })
    }

    /// Build a switch and `opts.hosts` host namespaces (see the module docs).
    /// On error, whatever was built is torn down. Beyond
    /// [`HOSTS_PER_BRIDGE`] hosts the switch is a chain of bridges.
    pub fn new(opts: LabOptions) -> Result<Lab> {
        Lab::chained(opts, HOSTS_PER_BRIDGE)
    }

    /// [`Lab::new`] with at most `per_bridge` hosts on each bridge of the
    /// switch (`br0`, `br1`, ..., joined in a chain by veth pairs `tkK` on
    /// `brK` and `tbK` on `brK+1`): one segment however many bridges.
    pub fn chained(opts: LabOptions, per_bridge: usize) -> Result<Lab> {
        if per_bridge == 0 || per_bridge > HOSTS_PER_BRIDGE {
            return Err(LabError::Invalid(format!(
                "a bridge of the lab takes 1 to {HOSTS_PER_BRIDGE} hosts, not {per_bridge}"
            )));
        }
        if opts.hosts == 0 || opts.hosts > HOSTS_PER_24 * 254 {
            return Err(LabError::Invalid(format!(
                "a lab needs 1 to {} hosts, not {}",
                HOSTS_PER_24 * 254,
                opts.hosts
            )));
        }
        let x = random_octet();
        let subnet = Ipv4Net::new(Ipv4Addr::new(10, x, 0, 0), 16).expect("/16 is valid");
        let mut lab = Lab::empty(subnet)?;
        lab.neigh = NeighRoom::make(neigh::needed(opts.hosts));
        let sw = format!("{}-sw", lab.name);
        for i in 0..opts.hosts {
            lab.hosts.push(Host {
                ns: format!("{}-h{i}", lab.name),
                iface: HOST_IFACE.into(),
                ip: Ipv4Addr::new(
                    10,
                    x,
                    (1 + i / HOSTS_PER_24) as u8,
                    (1 + i % HOSTS_PER_24) as u8,
                ),
                prefix_len: 16,
                ipv6: opts
                    .ipv6
                    .then(|| Ipv6Addr::new(0xfd52, 0, 0, x.into(), 0, 0, 0, (i + 1) as u16)),
                switch_port: Some(format!("p{i}")),
            });
        }
        lab.switch = Some(sw.clone());
        lab.namespaces.push(sw.clone());
        lab.namespaces
            .extend(lab.hosts.iter().map(|h| h.ns.clone()));
        let adds: String = lab
            .namespaces
            .iter()
            .map(|ns| format!("netns add {ns}\n"))
            .collect();
        run(Command::new("ip").args(["-batch", "-"]), Some(&adds))?;

        // Kernel settings first: `default` applies to eth0 when it is created.
        let mut sysctls = vec![(sw.clone(), ipv6_sysctls(false))];
        sysctls.extend(
            lab.hosts
                .iter()
                .map(|h| (h.ns.clone(), ipv6_sysctls(opts.ipv6))),
        );
        run_all(sysctls.iter().map(|(ns, settings)| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sysctl", "-q", "-w"])
                .args(settings);
            (c, None)
        }))?;

        let bridges = opts.hosts.div_ceil(per_bridge);
        let mut switch = String::new();
        for b in 0..bridges {
            switch.push_str(&format!(
                "link add br{b} type bridge mcast_snooping 0\nlink set br{b} up\n"
            ));
            if b > 0 {
                let k = b - 1;
                switch.push_str(&format!(
                    "link add tk{k} type veth peer name tb{k}\n\
                     link set tk{k} master br{k}\nlink set tb{k} master br{b}\n\
                     link set tk{k} up\nlink set tb{k} up\n"
                ));
            }
        }
        run(
            Command::new("ip").args(["-n", &sw, "-batch", "-"]),
            Some(&switch),
        )?;
        let host_batches: Vec<(Command, Option<String>)> = lab
            .hosts
            .iter()
            .map(|h| {
                let mut script = format!(
                    "link add {HOST_IFACE} type veth peer name {port} netns {sw}\n\
                     addr add {ip}/{len} dev {HOST_IFACE}\n\
                     link set {HOST_IFACE} up\n\
                     link set lo up\n\
                     route add 224.0.0.0/4 dev {HOST_IFACE}\n",
                    port = h.switch_port.as_deref().unwrap_or_default(),
                    ip = h.ip,
                    len = h.prefix_len,
                );
                if let Some(v6) = h.ipv6 {
                    script.push_str(&format!("addr add {v6}/64 dev {HOST_IFACE} nodad\n"));
                }
                let mut c = Command::new("ip");
                c.args(["-n", &h.ns, "-batch", "-"]);
                (c, Some(script))
            })
            .collect();
        run_all(host_batches)?;
        let ports: String = lab
            .hosts
            .iter()
            .enumerate()
            .filter_map(|(i, h)| Some((i / per_bridge, h.switch_port.as_ref()?)))
            .map(|(b, p)| format!("link set {p} master br{b}\nlink set {p} up\n"))
            .collect();
        run(
            Command::new("ip").args(["-n", &sw, "-batch", "-"]),
            Some(&ports),
        )?;
        Ok(lab)
    }

    /// Several LANs joined by a router, so that unicast crosses between them
    /// and multicast (mDNS) does not, as with a real router:
    ///
    /// ```text
    ///  h0 h1 ── sw0 (br0) ── e0 10.X.1.254 ┐
    ///                                      rt (ip_forward=1, no multicast routing)
    ///  h2 h3 ── sw1 (br0) ── e1 10.X.2.254 ┘
    /// ```
    ///
    /// Subnet `k` is `10.X.(k+1).0/24`; its hosts get `.1`, `.2`, ... in
    /// order, a default route via `.254`, and (like [`Lab::new`]'s) `eth0`,
    /// `lo` up, the `224.0.0.0/4` route and IPv6 off. Host indices run
    /// across subnets; [`Lab::subnet_of`] says which one a host is on.
    /// [`Lab::subnet`] is the `/16` holding them all; [`Lab::switch_ns`] is
    /// the first subnet's switch.
    pub fn routed(opts: RoutedOptions) -> Result<Lab> {
        if opts.subnets.is_empty()
            || opts.subnets.len() > HOSTS_PER_24
            || opts.subnets.iter().any(|&n| n == 0 || n > HOSTS_PER_24)
        {
            return Err(LabError::Invalid(format!(
                "a routed lab needs 1 to {HOSTS_PER_24} subnets of 1 to {HOSTS_PER_24} hosts, not {:?}",
                opts.subnets
            )));
        }
        let x = random_octet();
        let subnet = Ipv4Net::new(Ipv4Addr::new(10, x, 0, 0), 16).expect("/16 is valid");
        let mut lab = Lab::empty(subnet)?;
        let rt = format!("{}-rt", lab.name);
        let switches: Vec<String> = (0..opts.subnets.len())
            .map(|k| format!("{}-sw{k}", lab.name))
            .collect();
        for (k, &n) in opts.subnets.iter().enumerate() {
            for j in 0..n {
                let i = lab.hosts.len();
                lab.hosts.push(Host {
                    ns: format!("{}-h{i}", lab.name),
                    iface: HOST_IFACE.into(),
                    ip: Ipv4Addr::new(10, x, (k + 1) as u8, (j + 1) as u8),
                    prefix_len: 24,
                    ipv6: None,
                    switch_port: Some(format!("p{i}")),
                });
                lab.host_subnet.push(k);
            }
        }
        lab.switch = switches.first().cloned();
        lab.router = Some(rt.clone());
        lab.namespaces.push(rt.clone());
        lab.namespaces.extend(switches.iter().cloned());
        lab.namespaces
            .extend(lab.hosts.iter().map(|h| h.ns.clone()));
        let adds: String = lab
            .namespaces
            .iter()
            .map(|ns| format!("netns add {ns}\n"))
            .collect();
        run(Command::new("ip").args(["-batch", "-"]), Some(&adds))?;
        run_all(lab.namespaces.iter().map(|ns| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sysctl", "-q", "-w"])
                .args(ipv6_sysctls(false));
            if ns == &rt {
                c.arg("net.ipv4.ip_forward=1");
            }
            (c, None)
        }))?;
        run_all(switches.iter().map(|sw| {
            let mut c = Command::new("ip");
            c.args(["-n", sw, "-batch", "-"]);
            (
                c,
                Some("link add br0 type bridge mcast_snooping 0\nlink set br0 up\n".to_string()),
            )
        }))?;
        let mut router_script = String::from("link set lo up\n");
        for (k, sw) in switches.iter().enumerate() {
            router_script.push_str(&format!(
                "link add e{k} type veth peer name rt netns {sw}\n\
                 addr add 10.{x}.{}.254/24 dev e{k}\n\
                 link set e{k} up\n",
                k + 1
            ));
        }
        run(
            Command::new("ip").args(["-n", &rt, "-batch", "-"]),
            Some(&router_script),
        )?;
        let host_batches: Vec<(Command, Option<String>)> = lab
            .hosts
            .iter()
            .zip(&lab.host_subnet)
            .map(|(h, &k)| {
                let script = format!(
                    "link add {HOST_IFACE} type veth peer name {port} netns {sw}\n\
                     addr add {ip}/24 dev {HOST_IFACE}\n\
                     link set {HOST_IFACE} up\n\
                     link set lo up\n\
                     route add 224.0.0.0/4 dev {HOST_IFACE}\n\
                     route add default via 10.{x}.{net}.254\n",
                    port = h.switch_port.as_deref().unwrap_or_default(),
                    sw = switches[k],
                    ip = h.ip,
                    net = k + 1,
                );
                let mut c = Command::new("ip");
                c.args(["-n", &h.ns, "-batch", "-"]);
                (c, Some(script))
            })
            .collect();
        run_all(host_batches)?;
        run_all(switches.iter().enumerate().map(|(k, sw)| {
            let mut script = String::from("link set rt master br0\nlink set rt up\n");
            for (h, _) in lab
                .hosts
                .iter()
                .zip(&lab.host_subnet)
                .filter(|(_, &hk)| hk == k)
            {
                let p = h.switch_port.as_deref().unwrap_or_default();
                script.push_str(&format!("link set {p} master br0\nlink set {p} up\n"));
            }
            let mut c = Command::new("ip");
            c.args(["-n", sw, "-batch", "-"]);
            (c, Some(script))
        }))?;
        Ok(lab)
    }

    /// The subnet index host `i` is on (0 except in a [`Lab::routed`] lab).
    pub fn subnet_of(&self, i: usize) -> usize {
        self.host(i);
        self.host_subnet.get(i).copied().unwrap_or(0)
    }

    /// The router namespace of a [`Lab::routed`] lab.
    pub fn router_ns(&self) -> Option<&str> {
        self.router.as_deref()
    }

    /// One namespace with only `lo` (up, multicast on, the `224.0.0.0/4`
    /// route, IPv6 off): many agents on one host. Its single host is index 0,
    /// address `127.0.0.1`, interface `lo`.
    pub fn loopback() -> Result<Lab> {
        let subnet = Ipv4Net::new(Ipv4Addr::new(127, 0, 0, 0), 8).expect("/8 is valid");
        let mut lab = Lab::empty(subnet)?;
        let ns = format!("{}-lo", lab.name);
        lab.namespaces.push(ns.clone());
        lab.hosts.push(Host {
            ns: ns.clone(),
            iface: "lo".into(),
            ip: Ipv4Addr::LOCALHOST,
            prefix_len: 8,
            ipv6: None,
            switch_port: None,
        });
        run(Command::new("ip").args(["netns", "add", &ns]), None)?;
        run(
            Command::new("ip")
                .args(["netns", "exec", &ns, "sysctl", "-q", "-w"])
                .args(ipv6_sysctls(false)),
            None,
        )?;
        run(
            Command::new("ip").args(["-n", &ns, "-batch", "-"]),
            Some("link set lo up\nlink set lo multicast on\nroute add 224.0.0.0/4 dev lo\n"),
        )?;
        Ok(lab)
    }

    /// This lab's name, the prefix of all its namespaces (`rlx-<pid>-<n>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hosts' subnet (`10.X.0.0/16`; `127.0.0.0/8` for a loopback lab).
    pub fn subnet(&self) -> Ipv4Net {
        self.subnet
    }

    /// The smallest block of the subnet that holds every host: what a test
    /// scans to find the lab's agents. Scanning the whole `/16` dials 65,534
    /// addresses and fills the namespace's neighbour table (1,024 entries)
    /// with unanswered ARP, and on a loaded machine a real agent's connect
    /// then timed out among them (a CI flake, never a finding).
    pub fn hosts_block(&self) -> Ipv4Net {
        let ips: Vec<u32> = self.hosts.iter().map(|h| u32::from(h.ip)).collect();
        let (lo, hi) = (ips.iter().min().copied(), ips.iter().max().copied());
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return self.subnet;
        };
        // Widen until every host is a host address of the block (neither
        // its network nor its broadcast address, which a scan skips).
        let mut prefix = (lo ^ hi).leading_zeros().min(30) as u8;
        while prefix > self.subnet.prefix_len() {
            let Ok(block) = Ipv4Net::new(std::net::Ipv4Addr::from(lo), prefix) else {
                break;
            };
            let block = block.trunc();
            let (net, bcast) = (u32::from(block.network()), u32::from(block.broadcast()));
            if lo > net && hi < bcast {
                return block;
            }
            prefix -= 1;
        }
        self.subnet
    }

    /// All hosts.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// Host `i`. Panics when out of range (a bug in the test).
    pub fn host(&self, i: usize) -> &Host {
        self.hosts.get(i).unwrap_or_else(|| {
            panic!(
                "lab {} has {} hosts, no host {i}",
                self.name,
                self.hosts.len()
            )
        })
    }

    /// The switch namespace, `None` for a loopback lab.
    pub fn switch_ns(&self) -> Option<&str> {
        self.switch.as_deref()
    }

    /// Where spawned processes' output goes (removed on drop).
    pub fn log_dir(&self) -> &Path {
        &self.logs
    }

    /// `ip netns exec <host i> <program>` with `RLX_NETNS_GUARD=1`: add
    /// arguments and run it. Not tracked: use [`Lab::spawn`] for anything
    /// that keeps running.
    ///
    /// Its `RLX_AGENT_CONFIG` is `/dev/null` (an empty config), so that an
    /// `rlx-agent` in a lab never reads this machine's own
    /// `/etc/rlx/agent.toml`: on a box where the agent is installed, its
    /// interfaces, key or ports would otherwise change what every test
    /// sees. A test that wants a config sets the variable itself.
    ///
    /// Its `STATE_DIRECTORY` is the host's own ([`Lab::state_dir`]): an
    /// agent keeps its node id and node key there, as a machine keeps them
    /// on its disk. Without it every lab agent run as root shared this
    /// machine's `/var/lib/rlx-agent`: agents of every lab and test had one
    /// node key, two first starts at once raced to write it (so a restarted
    /// agent could come back with another key than the one pinned), and
    /// the demo wrote into the real machine's state. `--state-dir` still
    /// wins.
    pub fn command(&self, i: usize, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.host(i).ns])
            .arg(program)
            .env(GUARD_ENV, "1")
            .env(AGENT_CONFIG_ENV, "/dev/null")
            .env(STATE_ENV, self.state_dir(i));
        cmd
    }

    /// Host `i`'s state directory, the agent's `$STATE_DIRECTORY` in the
    /// lab: kept across restarts of an agent on that host (a reboot keeps
    /// the disk), one per host, removed with the lab's logs.
    pub fn state_dir(&self, i: usize) -> PathBuf {
        let dir = self.logs.join(format!("h{i}-state"));
        let _ = std::fs::create_dir_all(&dir);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        dir
    }

    /// Run `program args...` in host `i` to completion; its stdout, or an
    /// error naming the command and its stderr if it fails.
    pub fn exec<S: AsRef<OsStr>>(&self, i: usize, program: &str, args: &[S]) -> Result<String> {
        run(self.command(i, program).args(args), None)
    }

    /// Start `cmd` in host `i`, tracked: its stdout and stderr go to files
    /// in [`Lab::log_dir`], and it is killed when the [`LabProcess`] or the
    /// lab is dropped. `cmd` is an ordinary command (program, arguments,
    /// environment, working directory), which the lab runs under `ip netns
    /// exec` with `RLX_NETNS_GUARD=1`; a command made by [`Lab::command`] is
    /// used as it is. Its stdin is closed. (`env_clear` cannot be read back
    /// from a `Command`, so it is not carried over: remove variables one by
    /// one with `env_remove`.)
    pub fn spawn(&self, i: usize, cmd: Command) -> Result<LabProcess> {
        let host = self.host(i);
        let mut cmd = if is_wrapped(&cmd) {
            cmd
        } else {
            let mut wrapped = self.command(i, cmd.get_program());
            wrapped.args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => wrapped.env(k, v),
                    None => wrapped.env_remove(k),
                };
            }
            if let Some(dir) = cmd.get_current_dir() {
                wrapped.current_dir(dir);
            }
            wrapped
        };
        cmd.env(GUARD_ENV, "1");
        let program = cmd
            .get_args()
            .nth(3)
            .map(|p| {
                Path::new(p)
                    .file_name()
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_else(|| "proc".into());
        let seq = self.spawned.fetch_add(1, Ordering::Relaxed);
        let label = format!("{program}#{seq}@h{i}");
        let base = self.logs.join(format!("{seq:03}-h{i}-{program}"));
        let stdout = base.with_extension("out");
        let stderr = base.with_extension("err");
        let create = |path: &PathBuf| {
            fs::File::create(path).map_err(|source| LabError::Io {
                what: "cannot create log file",
                path: path.clone(),
                source,
            })
        };
        cmd.stdin(Stdio::null())
            .stdout(create(&stdout)?)
            .stderr(create(&stderr)?);
        let cmdline = display(&cmd);
        let child = cmd.spawn().map_err(|source| LabError::Spawn {
            cmd: cmdline.clone(),
            source,
        })?;
        let pid = child.id();
        let child = Arc::new(Mutex::new(child));
        {
            let mut procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
            // Forget processes whose handle is gone (already killed and reaped).
            procs.retain(|p| Arc::strong_count(p) > 1);
            procs.push(child.clone());
        }
        tracing::debug!(lab = %self.name, host = %host.ns, %label, pid, "spawned {cmdline}");
        Ok(LabProcess {
            child,
            pid,
            label,
            cmdline,
            stdout,
            stderr,
        })
    }

    /// Kill every process this lab started, then anything else left in its
    /// namespaces, then delete them. Errors are logged, not returned: this
    /// runs in `drop`.
    fn teardown(&mut self) {
        let procs = std::mem::take(&mut *self.procs.lock().unwrap_or_else(|e| e.into_inner()));
        for child in procs {
            kill_and_reap(&child);
        }
        for ns in &self.namespaces {
            // Daemons that forked away from what we spawned (avahi, sshd...).
            if let Ok(pids) = run(Command::new("ip").args(["netns", "pids", ns]), None) {
                for pid in pids
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        // Hosts first: deleting them removes the veths from the switch.
        let dels: String = self
            .namespaces
            .iter()
            .rev()
            .map(|ns| format!("netns del {ns}\n"))
            .collect();
        if let Err(e) = run(
            Command::new("ip").args(["-force", "-batch", "-"]),
            Some(&dels),
        ) {
            tracing::warn!(lab = %self.name, "tearing down: {e}");
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some_and(|v| v == "1") {
            eprintln!(
                "{KEEP_ENV}=1: keeping lab {} (namespaces {}; logs {})",
                self.name,
                self.namespaces.join(" "),
                self.logs.display()
            );
            return;
        }
        self.teardown();
        let _ = fs::remove_dir_all(&self.logs);
    }
}

/// sysctl arguments for a namespace with or without IPv6. With IPv6, DAD is
/// off so that addresses (link-local included) are usable at once.
fn ipv6_sysctls(ipv6: bool) -> Vec<&'static str> {
    if ipv6 {
        vec![
            "net.ipv6.conf.all.disable_ipv6=0",
            "net.ipv6.conf.default.disable_ipv6=0",
            "net.ipv6.conf.all.accept_dad=0",
            "net.ipv6.conf.default.accept_dad=0",
        ]
    } else {
        vec![
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]
    }
}

/// A per-lab second octet in 1..=254.
fn random_octet() -> u8 {
    let mut b = [0u8; 1];
    if getrandom::fill(&mut b).is_err() {
        b[0] = (std::process::id() as u8) ^ (LAB_COUNTER.load(Ordering::Relaxed) as u8);
    }
    1 + b[0] % 254
}

/// Delete namespaces left by labs of processes that died without dropping
/// them (SIGKILL, abort): `rlx-<pid>-<n>-*` whose pid is gone and in which
/// nothing runs any more. Best effort; never kills anything.
pub fn sweep_stale() {
    let Ok(list) = run(Command::new("ip").args(["netns", "list"]), None) else {
        return;
    };
    let dels: String = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|ns| {
            stale_owner(ns).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .filter(|ns| {
            run(Command::new("ip").args(["netns", "pids", ns]), None)
                .is_ok_and(|pids| pids.trim().is_empty())
        })
        .map(|ns| format!("netns del {ns}\n"))
        .collect();
    if !dels.is_empty() {
        tracing::info!(
            "deleting namespaces of dead labs: {}",
            dels.replace('\n', " ")
        );
        let _ = run(
            Command::new("ip").args(["-force", "-batch", "-"]),
            Some(&dels),
        );
    }
}

/// The pid in a lab namespace name `rlx-<pid>-<n>-<suffix>`.
pub(crate) fn stale_owner(ns: &str) -> Option<u32> {
    let mut parts = ns.strip_prefix("rlx-")?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<usize>().ok()?;
    parts.next()?;
    Some(pid)
}
