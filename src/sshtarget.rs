//! **The `ssh` written for a node** — one rule for how the RLX runtime
//! will reach each box, and the opt-in check that it can.
//!
//! ```text
//! node at 10.0.0.5, ~/.ssh/config "Host gpu-a / HostName 10.0.0.5"   ssh = "gpu-a"
//! node at 10.0.0.6, no alias, sshd on 22                            ssh = "10.0.0.6"
//! node at 10.0.0.7, no alias, sshd on 2222                          ssh = "ssh://10.0.0.7:2222"
//! node at one of this machine's own addresses                       no ssh: local
//! ```
//!
//! Why it matters: the runtime probes a node with `ssh HOST <bin> --probe`,
//! launches its worker with `ssh HOST <bin> ...` and syncs weights over it,
//! and it takes a node **without** `ssh` for the coordinator's own box (it
//! measures the coordinator's hardware for it and starts its worker on the
//! coordinator). So every node on another box needs one, and it must be a
//! name `ssh` on this machine resolves: the user's own alias when their ssh
//! config has one for that address (their user, key and options come with
//! it), else the address itself. The runtime passes the value to `ssh` as
//! one argument, so a port other than 22 is written as an `ssh://` URI
//! (OpenSSH 7.7 or later), never `host:port`.
//!
//! The aliases come from `ssh -G ALIAS` (OpenSSH's own reading of the
//! config, `Include`s, `Match` and defaults applied), for each `Host` name
//! without wildcards. A `HostName` that is a name is matched against the
//! node's own host name (`gpu-a`, `gpu-a.local`); no DNS lookup is made.

use crate::config::DiscoverSection;
use futures::stream::{self, StreamExt};
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Most `Host` aliases read from an ssh config: a config with more is a
/// generated one, and each costs one `ssh -G`.
pub const MAX_ALIASES: usize = 512;
/// `ssh -G` runs at once; each takes a few milliseconds of CPU.
const CONCURRENCY: usize = 16;
/// How long one `ssh -G` may take (it reads files, never the network).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);
/// Most `Include` levels followed.
const MAX_INCLUDE_DEPTH: usize = 8;

/// One alias of the user's ssh config as `ssh -G` resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The `Host` name the user types.
    pub name: String,
    /// Its `HostName` (the alias itself when none is set).
    pub hostname: String,
    /// Its `Port`.
    pub port: u16,
}

/// What the rule needs to know about this machine: its ssh aliases and its
/// own addresses.
#[derive(Debug, Clone, Default)]
pub struct SshTargets {
    /// The user's aliases, in config order.
    pub aliases: Vec<Alias>,
    /// This machine's addresses (in its network namespace): a node at one
    /// of them is the coordinator's own box.
    pub local: HashSet<IpAddr>,
}

/// What a node's agent says about SSH on its box (`NodeCaps::ssh_listening`
/// and `ssh_port`); `None` when it did not say (an older agent, TXT only).
pub type SshdFact = Option<(bool, Option<u16>)>;

impl SshTargets {
    /// The `ssh` to write for a node at `ip` whose agent calls its box
    /// `hostname`; `None` when `ip` is this machine's own (the runtime then
    /// runs the node locally).
    pub fn for_node(&self, ip: IpAddr, hostname: &str, sshd: SshdFact) -> Option<String> {
        let ip = ip.to_canonical();
        if self.local.contains(&ip) || ip.is_loopback() {
            return None;
        }
        let sshd_port = match sshd {
            Some((true, p)) => p,
            _ => None,
        };
        let names_box = |h: &str| {
            let h = h.trim_end_matches('.');
            !hostname.is_empty()
                && (h.eq_ignore_ascii_case(hostname)
                    || h.eq_ignore_ascii_case(&format!("{hostname}.local")))
        };
        let alias = self.aliases.iter().find(|a| {
            let same_box = a
                .hostname
                .parse::<IpAddr>()
                .map_or_else(|_| names_box(&a.hostname), |h| h.to_canonical() == ip);
            same_box && sshd_port.is_none_or(|p| p == a.port)
        });
        if let Some(a) = alias {
            return Some(a.name.clone());
        }
        Some(match (sshd_port, ip) {
            (Some(p), IpAddr::V4(v4)) if p != 22 => format!("ssh://{v4}:{p}"),
            (Some(p), IpAddr::V6(v6)) if p != 22 => format!("ssh://[{v6}]:{p}"),
            _ => ip.to_string(),
        })
    }

    /// Reads the aliases of the ssh config `[discover] ssh_config` names
    /// (else `~/.ssh/config`) and this machine's addresses. Never fails: a
    /// missing config or `ssh` means no aliases (the address is written),
    /// and what went wrong is logged.
    pub async fn gather(d: &DiscoverSection) -> SshTargets {
        let program = ssh_program();
        let config = d
            .ssh_config
            .clone()
            .or_else(|| home().map(|h| h.join(".ssh/config")));
        let names = config.as_deref().map(host_names).unwrap_or_default();
        let aliases = stream::iter(names)
            .map(|n| resolve(&program, d.ssh_config.as_deref(), n))
            .buffered(CONCURRENCY)
            .filter_map(|a| async move { a })
            .collect()
            .await;
        SshTargets {
            aliases,
            local: local_addresses(),
        }
    }
}

/// Whether `ssh` is the form [`SshTargets::for_node`] writes for the host
/// of `addr` itself (`IP`, or `ssh://IP:PORT`), not a name the user chose:
/// such an `ssh` follows its node when the machine moves to another
/// address.
pub fn follows_addr(ssh: &str, addr: &str) -> bool {
    follow(ssh, addr, addr).is_some()
}

/// The `ssh` for a node whose `addr` moved from `old` to `new`, when
/// `ssh` was written from `old`'s host ([`follows_addr`]); `None` for any
/// other `ssh` (an alias stays as the user has it).
pub fn follow(ssh: &str, old: &str, new: &str) -> Option<String> {
    let host = |a: &str| crate::addr::NodeAddr::split(a).0.to_string();
    let (old_h, new_h) = (host(old), host(new));
    old_h.parse::<IpAddr>().ok()?;
    let bracket = |h: &str| {
        if h.contains(':') {
            format!("[{h}]")
        } else {
            h.to_string()
        }
    };
    if ssh == old_h {
        return Some(new_h);
    }
    let port = ssh.strip_prefix(&format!("ssh://{}:", bracket(&old_h)))?;
    port.parse::<u16>().ok()?;
    Some(format!("ssh://{}:{port}", bracket(&new_h)))
}

/// The ssh program: `RLX_SSH_PROGRAM` (the tests' stand-in), else `ssh`.
pub(crate) fn ssh_program() -> String {
    std::env::var("RLX_SSH_PROGRAM").unwrap_or_else(|_| "ssh".into())
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// The `Host` names without wildcards or negation in `config` and the
/// files it `Include`s, in order, each once, at most [`MAX_ALIASES`].
pub(crate) fn host_names(config: &Path) -> Vec<String> {
    let mut out = Vec::new();
    collect_hosts(config, 0, &mut out);
    out
}

fn collect_hosts(file: &Path, depth: usize, out: &mut Vec<String>) {
    let Ok(text) = std::fs::read_to_string(file) else {
        tracing::debug!(file = %file.display(), "ssh config not readable: no aliases from it");
        return;
    };
    for line in text.lines() {
        let line = line.trim();
        let (key, rest) = match line.split_once(|c: char| c.is_whitespace() || c == '=') {
            Some((k, r)) => (
                k,
                r.trim_start_matches(|c: char| c.is_whitespace() || c == '='),
            ),
            None => continue,
        };
        if key.eq_ignore_ascii_case("host") {
            for name in rest.split_whitespace() {
                let plain = !name.contains(['*', '?', '!', '%', '"']);
                if plain && !out.iter().any(|n| n == name) && out.len() < MAX_ALIASES {
                    out.push(name.to_string());
                }
            }
        } else if key.eq_ignore_ascii_case("include") && depth < MAX_INCLUDE_DEPTH {
            for pattern in rest.split_whitespace() {
                for f in include_files(file, pattern) {
                    collect_hosts(&f, depth + 1, out);
                }
            }
        }
    }
}

/// The files an `Include` pattern names: relative to `~/.ssh` (as ssh
/// reads a user config's), `~` expanded, and a `*` in the file name part
/// matched against that directory's entries.
fn include_files(from: &Path, pattern: &str) -> Vec<PathBuf> {
    let expanded = match pattern.strip_prefix("~/") {
        Some(rest) => home().map_or_else(|| PathBuf::from(pattern), |h| h.join(rest)),
        None => PathBuf::from(pattern),
    };
    let path = if expanded.is_absolute() {
        expanded
    } else {
        home()
            .map(|h| h.join(".ssh"))
            .or_else(|| from.parent().map(Path::to_path_buf))
            .unwrap_or_default()
            .join(expanded)
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name, path.parent()) {
        (Some(n), Some(dir)) if n.contains('*') => {
            let (pre, post) = n.split_once('*').unwrap_or((&n, ""));
            let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|f| {
                        let f = f.to_string_lossy();
                        f.starts_with(pre) && f.ends_with(post) && f.len() >= pre.len() + post.len()
                    })
                })
                .collect();
            v.sort();
            v
        }
        _ => vec![path],
    }
}

/// `ssh -G name`: the alias as OpenSSH resolves it.
async fn resolve(program: &str, config: Option<&Path>, name: String) -> Option<Alias> {
    let mut c = Command::new(program);
    if let Some(f) = config {
        c.arg("-F").arg(f);
    }
    c.arg("-G")
        .arg("--")
        .arg(&name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(RESOLVE_TIMEOUT, c.output()).await {
        Ok(Ok(o)) if o.status.success() => o,
        other => {
            tracing::debug!(alias = %name, ?other, "ssh -G gave nothing for this alias");
            return None;
        }
    };
    parse_g(&name, &String::from_utf8_lossy(&out.stdout))
}

/// The `hostname` and `port` lines of `ssh -G`'s output.
pub(crate) fn parse_g(name: &str, out: &str) -> Option<Alias> {
    let mut hostname = None;
    let mut port = 22;
    for line in out.lines() {
        match line.split_once(' ') {
            Some(("hostname", h)) => hostname = Some(h.trim().to_string()),
            Some(("port", p)) => port = p.trim().parse().ok()?,
            _ => {}
        }
    }
    Some(Alias {
        name: name.to_string(),
        hostname: hostname?,
        port,
    })
}

/// This machine's addresses, in its network namespace.
fn local_addresses() -> HashSet<IpAddr> {
    let mut out = HashSet::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            let Some(sa) = a.address else { continue };
            if let Some(v4) = sa.as_sockaddr_in() {
                out.insert(IpAddr::V4(v4.ip()));
            } else if let Some(v6) = sa.as_sockaddr_in6() {
                out.insert(IpAddr::V6(v6.ip()).to_canonical());
            }
        }
    }
    out
}

/// Why the runtime's `ssh HOST` fails for one node, from ssh's own words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SshCheck {
    /// The node's `addr`.
    pub addr: String,
    /// The `ssh` value tried.
    pub ssh: String,
    /// `None` when `ssh -o BatchMode=yes HOST true` succeeded, else why not.
    pub failure: Option<String>,
}

/// Runs `ssh -o BatchMode=yes -o ConnectTimeout=N HOST true` for each
/// `(addr, ssh)` at once (at most `CONCURRENCY`, 16), the way the runtime's
/// own probe and launch will reach each box, and says for each why it
/// failed: the host key, the authentication, a timeout, a refused port, a
/// name that does not resolve.
pub async fn check(
    nodes: Vec<(String, String)>,
    ssh_config: Option<&Path>,
    timeout: Duration,
) -> Vec<SshCheck> {
    let program = ssh_program();
    stream::iter(nodes)
        .map(|(addr, ssh)| {
            let program = program.clone();
            async move {
                let failure = check_one(&program, ssh_config, &ssh, timeout).await;
                SshCheck { addr, ssh, failure }
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

async fn check_one(
    program: &str,
    config: Option<&Path>,
    host: &str,
    timeout: Duration,
) -> Option<String> {
    let mut c = Command::new(program);
    if let Some(f) = config {
        c.arg("-F").arg(f);
    }
    c.args([
        "-o",
        "BatchMode=yes",
        "-o",
        &format!("ConnectTimeout={}", timeout.as_secs().max(1)),
        "-T",
        "--",
        host,
        "true",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let out = match tokio::time::timeout(timeout + Duration::from_secs(2), c.output()).await {
        Err(_) => return Some(format!("timed out after {} s", timeout.as_secs())),
        Ok(Err(e)) => return Some(format!("cannot run {program}: {e}")),
        Ok(Ok(o)) => o,
    };
    if out.status.success() {
        return None;
    }
    Some(classify(&String::from_utf8_lossy(&out.stderr)))
}

/// ssh's error text, named by its cause with what to do.
pub(crate) fn classify(stderr: &str) -> String {
    let last = stderr
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("ssh failed without a message")
        .trim();
    let why = if stderr.contains("Host key verification failed")
        || stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
    {
        "host key: unknown or changed; connect once by hand (ssh HOST) and check the key"
    } else if stderr.contains("Permission denied") {
        "authentication refused: put your key on that box (ssh-copy-id) or fix the alias's User/IdentityFile"
    } else if stderr.contains("timed out") {
        "timeout: the box or its port 22 does not answer"
    } else if stderr.contains("Connection refused") {
        "no SSH server listens there: start sshd on that box"
    } else if stderr.contains("Could not resolve hostname") {
        "the name does not resolve on this machine"
    } else if stderr.contains("No route to host") || stderr.contains("Network is unreachable") {
        "no route to that box"
    } else {
        "ssh failed"
    };
    format!("{why} ({})", crate::escape::escape_line(last))
}

#[cfg(test)]
mod tests;
