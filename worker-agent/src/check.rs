//! **`rlx-agent check`** — the worker's self-check, the agent-side twin of
//! the coordinator's `rlx-discover doctor`: what this agent would announce
//! and on which interfaces, its own port and the worker's (free, listening,
//! open in the host firewall), whether an SSH server answers (the RLX
//! runtime probes and launches workers over ssh), the key file and the
//! state directory. Each check is ok, warn, fail or skip, with a fix; the
//! exit code is 0 when none failed, 1 when one did, as doctor's.
//!
//! It opens no mDNS socket and sends nothing to other machines: it reads
//! the settings (flags, `RLX_AGENT_*`, the config file), the machine, the
//! firewall's rules, binds the agent's TCP port for a moment to see whether
//! it is free, and reads the greeting of this box's own SSH ports
//! ([`crate::sshd`]).

use crate::announce::Responder;
use crate::cli::AgentArgs;
use crate::worker::WorkerPort;
use rlx_net::check::{Check, Status};
use rlx_net::{firewall, iface, netguard};
use rlx_proto::keys::KeyRing;
use std::net::{Ipv6Addr, SocketAddr, TcpListener};
use std::path::Path;

/// Every check, in the order printed. `config` is the config file read, if
/// any.
pub async fn run_checks(args: &AgentArgs, config: Option<&Path>) -> Vec<Check> {
    let mut out = vec![
        config_check(config),
        guard_check(),
        interfaces_check(args),
        responder_check(args.responder),
        caps_check(args),
        agent_port_check(args.port),
        worker_port_check(args.worker_port),
        ssh_check(&crate::sshd::check_now()),
    ];
    out.push(firewall_check(args.port, args.worker_port).await);
    out.push(key_check(args));
    out.push(state_check(args));
    out
}

fn config_check(config: Option<&Path>) -> Check {
    match config {
        Some(p) => Check::new(
            "config",
            Status::Ok,
            format!(
                "settings from {} (flags and RLX_AGENT_* override it)",
                p.display()
            ),
        ),
        None => Check::new(
            "config",
            Status::Ok,
            format!(
                "no config file ({} does not exist): flags, RLX_AGENT_* and the defaults",
                crate::config::DEFAULT_CONFIG
            ),
        ),
    }
}

fn guard_check() -> Check {
    match netguard::ensure_private_netns("mDNS announcements") {
        Ok(()) => Check::new("guard", Status::Ok, "announcing is allowed here"),
        Err(e) => Check::new("guard", Status::Fail, e.to_string())
            .fix("unset RLX_NETNS_GUARD outside tests, or run inside a network namespace"),
    }
}

/// Which responder will announce, and whether the system's client library
/// is there when it is wanted (whether its daemon answers shows only when
/// the agent registers).
fn responder_check(choice: Responder) -> Check {
    let library = crate::announce::system_library();
    if !choice.wants_system() {
        return Check::new(
            "responder",
            Status::Ok,
            "the built-in responder (mdns-sd) on UDP 5353",
        );
    }
    match (choice, library) {
        (_, Ok(lib)) => Check::new(
            "responder",
            Status::Ok,
            format!("the system's, through {lib}"),
        ),
        (Responder::Auto, Err(e)) => Check::new(
            "responder",
            Status::Warn,
            format!("{e}; the built-in responder announces instead"),
        ),
        (_, Err(e)) => Check::new("responder", Status::Fail, e)
            .fix("install the library, or set responder = \"builtin\" in agent.toml"),
    }
}

fn interfaces_check(args: &AgentArgs) -> Check {
    match iface::select(&args.interfaces) {
        Ok(chosen) if chosen.is_empty() => Check::new(
            "interfaces",
            Status::Warn,
            format!(
                "no interface to announce on yet (none is up, multicast-capable and non-virtual; \
                 present: {}); the agent announces as soon as one comes up",
                iface::all_interfaces()
                    .map(|a| iface::describe(&a))
                    .unwrap_or_default()
            ),
        )
        .fix("bring a LAN interface up, or name one with interfaces = [\"eth0\"] (--interface)"),
        Ok(chosen) => Check::new(
            "interfaces",
            Status::Ok,
            format!("would announce on {}", iface::describe(&chosen)),
        ),
        Err(e) => Check::new("interfaces", Status::Fail, e.to_string())
            .fix("name an interface that exists and is up (`ip link`), or leave interfaces empty"),
    }
}

fn caps_check(args: &AgentArgs) -> Check {
    // The check never runs the GFLOP/s measurement: a cached figure is used
    // if there is one, else it is reported as unknown.
    let mut quick = args.clone();
    quick.no_bench = true;
    match quick.caps() {
        Ok(c) => {
            let devices: Vec<String> = c.devices.iter().map(|d| d.device.to_string()).collect();
            Check::new(
                "announce",
                Status::Ok,
                format!(
                    "would announce id {}, {} cores, {:.1} GiB RAM, devices [{}], worker port {}, \
                     agent port {}{}",
                    c.id,
                    c.cores,
                    c.ram_total as f64 / (1u64 << 30) as f64,
                    devices.join(", "),
                    args.worker_port,
                    args.port,
                    args.cluster
                        .as_deref()
                        .map(|n| format!(", cluster {n}"))
                        .unwrap_or_default()
                ),
            )
        }
        Err(e) => Check::new("announce", Status::Fail, format!("{e:#}"))
            .fix("fix what the message names (the caps file, --ckpt-dir, --node-id), or run `rlx-agent --probe` to see the probe"),
    }
}

fn agent_port_check(port: u16) -> Check {
    if port == 0 {
        return Check::new(
            "agent port",
            Status::Ok,
            "0: a free port is picked at start",
        );
    }
    match TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))))
    {
        Ok(_) => Check::new("agent port", Status::Ok, format!("TCP {port} is free")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Check::new(
            "agent port",
            Status::Warn,
            format!("TCP {port} is in use: an rlx-agent already runs here, or another program has it"),
        )
        .fix(
            "`systemctl status rlx-agent` (a running agent is fine); else pick another with port = N \
             (--port) and set [discover] agent_port = N on the coordinator",
        ),
        Err(e) => Check::new("agent port", Status::Skip, format!("cannot test TCP {port}: {e}")),
    }
}

/// Whether the RLX worker holds its port: a listener the scan's rules name
/// (node_exporter's HTTP on 9100, its default) is another program, and
/// coordinators would otherwise write an `addr` that reaches it.
fn worker_port_check(port: u16) -> Check {
    match crate::worker::state_now(port) {
        WorkerPort::Worker => Check::new(
            "worker port",
            Status::Ok,
            format!("the RLX worker listens on TCP {port} (nothing else answered there)"),
        ),
        WorkerPort::HeldBy(who) => Check::new(
            "worker port",
            Status::Fail,
            format!(
                "{port} is held by {who}, not an RLX worker: coordinators report this node's \
                 worker port as held by it"
            ),
        )
        .fix(format!(
            "move the worker (worker_port = N in /etc/rlx/agent.toml, or --worker-port N, and \
             start the RLX worker there) or move {who} off TCP {port} (node_exporter: \
             --web.listen-address=:9101)"
        )),
        WorkerPort::Free => Check::new(
            "worker port",
            Status::Warn,
            format!(
                "nothing listens on TCP {port} yet: coordinators write this node all the same \
                 and report its worker as not listening"
            ),
        )
        .fix("start the RLX worker, or set worker_port = N (--worker-port) to the port it listens on"),
    }
}

/// Whether the RLX runtime can reach this box the way it probes and
/// launches workers: over ssh.
fn ssh_check(r: &crate::sshd::Report) -> Check {
    match r.port {
        Some(port) => Check::new(
            "ssh",
            Status::Ok,
            format!("an SSH server answers on TCP {port}: the RLX runtime can probe and launch workers here"),
        ),
        None => Check::new(
            "ssh",
            Status::Warn,
            format!(
                "no SSH server answers here ({}): the RLX runtime probes and launches workers over ssh",
                r.describe()
            ),
        )
        .fix(
            "start sshd (sudo systemctl enable --now ssh) or the coordinator cannot launch here; on \
             macOS turn on Remote Login (System Settings > General > Sharing)",
        ),
    }
}

async fn firewall_check(port: u16, worker_port: u16) -> Check {
    let rules = firewall::rulesets().await;
    let f = firewall::read_both(&rules, port, worker_port);
    if f.read.is_empty() {
        return Check::new(
            "firewall",
            Status::Skip,
            format!(
                "no firewall rules could be read: {}",
                f.unreadable.join("; ")
            ),
        );
    }
    if f.blockers.is_empty() {
        return Check::new(
            "firewall",
            Status::Ok,
            format!(
                "{}: nothing stops UDP 5353, TCP {port} or TCP {worker_port}",
                f.read.join(", ")
            ),
        );
    }
    let full = f.blockers.iter().any(|b| !b.partial);
    let list: Vec<String> = f
        .blockers
        .iter()
        .map(|b| {
            format!(
                "{} {} {} ({})",
                b.chain,
                if b.partial { "partly stops" } else { "stops" },
                b.what,
                b.rule
            )
        })
        .collect();
    Check::new(
        "firewall",
        if full { Status::Fail } else { Status::Warn },
        list.join("; "),
    )
    .fix(format!(
        "open them: `ufw allow 5353/udp && ufw allow {port}/tcp && ufw allow {worker_port}/tcp`, \
         or `firewall-cmd --permanent --add-service=mdns --add-port={port}/tcp \
         --add-port={worker_port}/tcp && firewall-cmd --reload`, or an nft rule \
         `udp dport 5353 accept` and `tcp dport {{ {port}, {worker_port} }} accept` before the drop"
    ))
}

/// Run as root (`sudo rlx-agent check`), every file reads: whether the
/// packaged service's user could read key `path` on this systemd
/// ([`crate::credential::service_read_problem`]). `None` when not root,
/// or without systemd.
fn root_problem(path: &Path) -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let v = crate::credential::systemd_version()?;
    crate::credential::service_read_problem(path, v, rlx_proto::keys::service_gid())
}

fn key_check(args: &AgentArgs) -> Check {
    let path = match args.key_path() {
        Ok(p) => p,
        Err(e) => return Check::new("key", Status::Fail, format!("{e:#}")),
    };
    let Some(path) = path else {
        return Check::new(
            "key",
            Status::Warn,
            "no cluster key: any coordinator that reaches this box can admit it, and \
             link measurement is refused to everyone (docs/security.md)",
        )
        .fix("on the coordinator `rlx-discover keygen /etc/rlx/cluster.key`; copy it here (mode 0600) and set key_file = \"/etc/rlx/cluster.key\"");
    };
    match KeyRing::load(&path) {
        // Root reads any file: ask whether the service's user could.
        Ok(ring) => match root_problem(&path) {
            Some(problem) => Check::new("key", Status::Fail, problem),
            None => Check::new(
                "key",
                Status::Ok,
                format!(
                    "{}: {} key(s), current {}",
                    path.display(),
                    ring.keys().len(),
                    ring.keys()[0].fingerprint()
                ),
            ),
        },
        Err(e) => Check::new("key", Status::Fail, e.to_string()).fix(format!(
            "`chown $(id -un) {p} && chmod 600 {p}` for the user the agent runs as (the package's \
             unit: root reads it and hands it over as a credential; on systemd before 247, \
             `chown root:rlx-agent {p} && chmod 640 {p}`), and a key from `rlx-discover keygen`",
            p = path.display()
        )),
    }
}

fn state_check(args: &AgentArgs) -> Check {
    let Some(dir) = args.state_dir() else {
        return Check::new(
            "state",
            Status::Warn,
            "no state directory (no $STATE_DIRECTORY, $XDG_STATE_HOME or $HOME): the node id and key are not kept across restarts",
        )
        .fix("set state_dir = \"/var/lib/rlx-agent\" (--state-dir)");
    };
    if !dir.exists() {
        return Check::new(
            "state",
            Status::Ok,
            format!(
                "{} does not exist yet: created at the first start",
                dir.display()
            ),
        );
    }
    let probe = dir.join(".rlx-agent-check");
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            let key = dir.join(rlx_proto::identity::NODE_KEY_FILE);
            Check::new(
                "state",
                Status::Ok,
                format!(
                    "{} is writable{}",
                    dir.display(),
                    if key.exists() {
                        ", node key present"
                    } else {
                        "; the node key is made at the first start"
                    }
                ),
            )
        }
        Err(e) => Check::new(
            "state",
            Status::Fail,
            format!("{} is not writable: {e}", dir.display()),
        )
        .fix("run as the user that owns it, or set state_dir (--state-dir) to a directory it can write"),
    }
}

/// The checks as text, one line each (and a `fix:` line under a warn or a
/// fail), then the verdict, as `rlx-discover doctor` prints them.
pub fn render(checks: &[Check]) -> String {
    let clean = |s: &str| s.replace(|c: char| c.is_control(), " ");
    let mut out = String::new();
    for c in checks {
        out.push_str(&format!(
            "{:<5} {:<12} {}\n",
            c.status.as_str(),
            c.check,
            clean(&c.detail)
        ));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("{:<5} {:<12} fix: {}\n", "", "", clean(fix)));
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    out.push_str(&match (count(Status::Fail), count(Status::Warn)) {
        (0, 0) => "healthy".to_string(),
        (0, w) => format!("healthy, with {w} warning(s)"),
        (f, _) => format!("{f} check(s) failed: see the fixes above"),
    });
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_prints_its_fix_and_the_verdict_counts_it() {
        let checks = [
            Check::new("key", Status::Fail, "bad\nmode").fix("chmod 600"),
            Check::new("state", Status::Ok, "fine"),
        ];
        let text = render(&checks);
        assert!(text.contains("fail  key          bad mode"), "{text}");
        assert!(text.contains("fix: chmod 600"), "{text}");
        assert!(
            text.ends_with("1 check(s) failed: see the fixes above\n"),
            "{text}"
        );
    }

    #[test]
    fn a_key_file_readable_by_others_fails_with_a_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("cluster.key");
        std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut args = <AgentArgs as clap::Parser>::parse_from(["rlx-agent"]);
        args.key_file = Some(key.clone());
        let c = key_check(&args);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.fix.unwrap().contains("chmod 600"));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(key_check(&args).status, Status::Ok);
    }

    #[test]
    fn an_ssh_server_is_ok_with_its_port_and_none_is_a_warning_that_says_how_to_start_one() {
        use crate::sshd::{Report, Seen};
        let found = ssh_check(&Report {
            port: Some(2222),
            tried: vec![(22, Seen::Nothing), (2222, Seen::Ssh)],
        });
        assert_eq!(found.status, Status::Ok, "{found:?}");
        assert!(found.detail.contains("TCP 2222"), "{found:?}");
        let none = ssh_check(&Report {
            port: None,
            tried: vec![(22, Seen::Other("\"HTTP/1.1 400\"".into()))],
        });
        assert_eq!(none.status, Status::Warn, "{none:?}");
        assert!(
            none.detail.contains("probes and launches workers over ssh")
                && none.detail.contains("TCP 22: not SSH"),
            "{none:?}"
        );
        assert!(
            none.fix
                .as_deref()
                .is_some_and(|f| f.contains("sudo systemctl enable --now ssh")),
            "{none:?}"
        );
    }

    #[test]
    fn a_port_someone_holds_is_reported_in_use() {
        let held = TcpListener::bind("[::]:0").unwrap();
        let port = held.local_addr().unwrap().port();
        assert_eq!(agent_port_check(port).status, Status::Warn);
        drop(held);
        assert_eq!(agent_port_check(port).status, Status::Ok);
    }
}
