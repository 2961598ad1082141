//! SSH discovery end to end against real OpenSSH servers on loopback: the
//! `[discover] ssh_hosts` path, through an ssh config alias per server, with
//! the real `rlx-agent --probe` on the far side. SSH sends no multicast and
//! scans nothing, and every server listens on 127.0.0.1 only, so no packet
//! leaves the machine.

use rlx_lab::kit::sshd::{client_entry, have_sshd, keygen, prepare, server_command, server_config};
use rlx_lab::kit::{agent_bin, discover_bin, eventually};
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One sshd on 127.0.0.1, killed (by PID) on drop.
struct Sshd {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Sshd {
    /// Starts sshd with `set_env` (`PATH=... HOME=...`) as the
    /// environment of remote commands.
    fn start(dir: &Path, name: &str, set_env: &str) -> Sshd {
        let port = free_port();
        let cfg =
            server_config(dir, name, "127.0.0.1", port, set_env).unwrap_or_else(|e| panic!("{e}"));
        let log = dir.join(format!("sshd_{name}.log"));
        let child = server_command(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start sshd");
        let s = Sshd { child, port, log };
        s.wait_ready();
        s
    }

    /// Waits until sshd sends its banner.
    fn wait_ready(&self) {
        let what = format!("sshd on port {} greeting", self.port);
        eventually(Duration::from_secs(10), &what, || {
            let mut c = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
            c.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut b = [0u8; 4];
            match c.read_exact(&mut b) {
                Ok(()) if &b == b"SSH-" => Ok(()),
                got => Err(format!(
                    "{got:?}, {b:?}; its log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                )),
            }
        });
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // A stopped process must be continued to die promptly.
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A throwaway SSH world: a client key authorized on every server, a bin
/// dir holding rlx-agent, and an ssh config with one alias per server.
struct World {
    dir: tempfile::TempDir,
    servers: Vec<(String, Sshd)>,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let agent_dir = dir.path().join("bin");
        std::fs::create_dir(&agent_dir).unwrap();
        std::fs::copy(agent_bin(), agent_dir.join("rlx-agent")).unwrap();
        World {
            dir,
            servers: Vec::new(),
        }
    }

    /// Adds a server whose remote PATH does (or does not) hold rlx-agent.
    fn server(&mut self, alias: &str, with_agent: bool) -> &Sshd {
        let path = if with_agent {
            format!(
                "PATH={}:/usr/bin:/bin",
                self.dir.path().join("bin").display()
            )
        } else {
            "PATH=/usr/bin:/bin".to_string()
        };
        self.server_env(alias, &path)
    }

    /// Adds a server whose remote commands get `set_env` (sshd's `SetEnv`).
    fn server_env(&mut self, alias: &str, set_env: &str) -> &Sshd {
        let s = Sshd::start(self.dir.path(), alias, set_env);
        self.servers.push((alias.to_string(), s));
        &self.servers.last().unwrap().1
    }

    /// Writes the ssh config with every server's alias, plus `extra` aliases
    /// pointing at given ports.
    fn ssh_config(&self, extra: &[(&str, u16)]) -> PathBuf {
        let mut s = String::new();
        let entries = self
            .servers
            .iter()
            .map(|(a, d)| (a.as_str(), d.port))
            .chain(extra.iter().copied());
        for (alias, port) in entries {
            s.push_str(&client_entry(self.dir.path(), alias, "127.0.0.1", port));
        }
        let p = self.dir.path().join("ssh_config");
        std::fs::write(&p, s).unwrap();
        p
    }

    fn cluster(&self, hosts: &[&str], ssh_config: &Path, timeout_ms: u64) -> PathBuf {
        let ckpt = self.dir.path().join("ckpt");
        let _ = std::fs::create_dir(&ckpt);
        let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
        let p = self.dir.path().join("cluster.toml");
        std::fs::write(
            &p,
            format!(
                "[discover]\nssh_hosts = [{}]\nckpt_dir = {:?}\nssh_config = {:?}\n\
                 ssh_timeout_ms = {timeout_ms}\nmdns = false\n",
                hosts.join(", "),
                ckpt.display().to_string(),
                ssh_config.display().to_string(),
            ),
        )
        .unwrap();
        p
    }
}

fn expand_json(cluster: &Path) -> (Output, serde_json::Value) {
    let out = Command::new(discover_bin())
        .args(["expand", "--format", "json"])
        .arg(cluster)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "expand printed no JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, v)
}

fn failure_for<'a>(v: &'a serde_json::Value, host: &str) -> &'a str {
    v["report"]["failed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["host"] == host)
        .unwrap_or_else(|| panic!("no failure reported for {host}: {v:#}"))["reason"]
        .as_str()
        .unwrap()
}

#[test]
fn an_agent_behind_an_ssh_alias_is_probed_and_becomes_a_node() {
    if !have_sshd() {
        return;
    }
    let mut w = World::new();
    w.server("node-a", true);
    let cfg = w.ssh_config(&[]);
    let cluster = w.cluster(&["node-a"], &cfg, 10_000);
    let (out, v) = expand_json(&cluster);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{v:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{v:#}");
    assert_eq!(nodes[0]["addr"], "node-a:9100");
    assert_eq!(nodes[0]["ssh"], "node-a");
    let added = &v["report"]["added"][0];
    assert_eq!(added["evidence"], "ssh");
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(
        added["cores"].as_u64(),
        Some(cores),
        "the real probe ran on the far side: {v:#}"
    );
}

/// One dead host never stops the rest: a stopped sshd (accepts TCP, never
/// speaks) costs one timeout and is reported as timed out, not unreachable;
/// a host without rlx-agent and a closed port are reported with reasons a
/// user can act on; and the live host is still found.
#[test]
fn dead_and_broken_hosts_are_reported_while_the_live_one_is_found() {
    if !have_sshd() {
        return;
    }
    let mut w = World::new();
    w.server("live", true);
    w.server("no-agent", false);
    w.server("frozen", true).signal("-STOP");
    let closed = free_port();
    let cfg = w.ssh_config(&[("closed", closed)]);
    // 2.9 s: ssh's ConnectTimeout is then 2 s, which also bounds the wait
    // for the frozen sshd's greeting and so usually ends it first.
    let cluster = w.cluster(&["live", "no-agent", "frozen", "closed"], &cfg, 2_900);
    let t0 = Instant::now();
    let (out, v) = expand_json(&cluster);
    let took = t0.elapsed();
    assert_eq!(
        out.status.code(),
        Some(1),
        "failures make exit code 1: {v:#}"
    );
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{v:#}");
    assert_eq!(nodes[0]["addr"], "live:9100");
    let frozen = failure_for(&v, "frozen");
    // Either timer may end it (ssh's start-up eats into the 0.9 s between
    // them on a loaded box); each names itself. Never "unreachable": the
    // host is up.
    assert!(
        frozen.starts_with("timed out")
            && (frozen.contains("no greeting within 2000 ms") || frozen.contains("within 2900 ms")),
        "{frozen}"
    );
    let no_agent = failure_for(&v, "no-agent");
    assert!(
        no_agent.contains("not installed") && no_agent.contains("remote_bin"),
        "{no_agent}"
    );
    let refused = failure_for(&v, "closed");
    assert!(
        refused.contains("unreachable") && refused.contains("refused"),
        "{refused}"
    );
    // Concurrent, not serial: the frozen host's 2 s deadline is the whole
    // cost (generous bound for a loaded 2-core CI box; not a speed test).
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[test]
fn a_host_that_does_not_accept_our_key_is_reported_as_auth_refused() {
    if !have_sshd() {
        return;
    }
    let mut w = World::new();
    w.server("locked", true);
    // Replace the authorized key with one we do not hold.
    keygen(&w.dir.path().join("other")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(
        w.dir.path().join("other.pub"),
        w.dir.path().join("authorized_keys"),
    )
    .unwrap();
    let cfg = w.ssh_config(&[]);
    let cluster = w.cluster(&["locked"], &cfg, 10_000);
    let (_, v) = expand_json(&cluster);
    let r = failure_for(&v, "locked");
    assert!(
        r.contains("auth refused") && r.contains("ssh-copy-id"),
        "{r}"
    );
}

/// A non-interactive `ssh host cmd` gets sshd's PATH, not the login
/// shell's, so an agent that `cargo install` put in `~/.cargo/bin` is not on
/// it: the coordinator also looks there (and in /usr/local/bin, which is
/// this machine's own and not tried here), with no `remote_bin` set.
#[test]
fn an_agent_that_cargo_installed_in_the_remote_home_is_found_without_remote_bin() {
    if !have_sshd() {
        return;
    }
    let mut w = World::new();
    let home = w.dir.path().join("home");
    let bin = home.join(".cargo").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(agent_bin(), bin.join("rlx-agent")).unwrap();
    w.server_env(
        "cargo-box",
        &format!("PATH=/usr/bin:/bin HOME={}", home.display()),
    );
    let cfg = w.ssh_config(&[]);
    let cluster = w.cluster(&["cargo-box"], &cfg, 10_000);
    let (out, v) = expand_json(&cluster);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{v:#}");
    assert_eq!(nodes[0]["addr"], "cargo-box:9100", "{v:#}");
}
