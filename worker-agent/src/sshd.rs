//! **Does an SSH server listen here?** — the RLX runtime probes a node and
//! launches its worker over ssh (`ssh HOST <bin> --probe ...`), so a
//! coordinator wants to know, before it tries, whether this box has an SSH
//! server and on which port. Reported in the caps (`ssh_listening`,
//! `ssh_port`) and TXT ([`rlx_proto::txt::SSH_KEY`]), checked at start
//! and at each re-probe, as the worker port is ([`crate::worker`]).
//!
//! ```text
//! candidates   22, then every `Port` (and `ListenAddress ...:PORT`) of
//!              /etc/ssh/sshd_config and /etc/ssh/sshd_config.d/*.conf
//! listeners    the kernel's listening TCP sockets (rlx_net::listening)
//! greeting     connect to an address one is bound to, read: `SSH-2.0-...`
//! ```
//!
//! Only a greeting that starts with `SSH-` counts (RFC 4253 §4.2: the
//! server sends its identification string first), so a web server or any
//! other program on port 22 is not taken for sshd. The connection goes to
//! an address the listener is bound to: sshd configured with one
//! `ListenAddress` on the LAN refuses loopback. Where the kernel's list
//! cannot be read (macOS has no `sock_diag`), each candidate is tried on
//! loopback, 127.0.0.1 then ::1.
//!
//! Every check is bounded by [`BUDGET`], candidates in parallel. sshd logs
//! each connection (`Connection closed by ... [preauth]`), so on Linux a
//! definite answer is kept until the listening sockets on the candidate
//! ports change: an idle agent connects once, not once a minute. The agent
//! sends its own identification before closing, so that sshd and log
//! watchers such as fail2ban see a client that spoke SSH, not a scanner
//! (fail2ban's default `ignoreself` also skips the box's own addresses).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one check may take, all candidates together: sshd answers a
/// local connection in a few milliseconds (it forks a session process
/// first), and a re-probe must not hold the agent longer than a few hundred.
pub const BUDGET: Duration = Duration::from_millis(300);

/// Where sshd listens unless its configuration says otherwise.
pub const DEFAULT_SSH_PORT: u16 = 22;

/// Where sshd's configuration is read from.
pub const SSHD_CONFIG_DIR: &str = "/etc/ssh";

/// Most ports tried in one check: 22 and a handful of configured ones; a
/// configuration listing hundreds of `Port` lines is not worth hundreds of
/// connections.
pub const MAX_CANDIDATES: usize = 8;

/// Largest configuration file read, and most `sshd_config.d` files: sshd's
/// own files are a few KiB.
const MAX_CONFIG_BYTES: u64 = 256 << 10;
const MAX_CONFIG_FILES: usize = 64;

/// What this agent says before it hangs up (RFC 4253 §4.2).
const OUR_IDENTIFICATION: &[u8] = b"SSH-2.0-rlx-agent-check\r\n";

/// What one candidate port showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Nothing listens on it (no listening socket, or the connection was
    /// refused).
    Nothing,
    /// An SSH server: its greeting started `SSH-`.
    Ssh,
    /// Something that is not SSH: the start of what it sent (escaped), or
    /// that it closed without a word.
    Other(String),
    /// Connected, but no greeting within the budget (a server that waits
    /// for its client to speak first, or an sshd too busy to answer).
    Silent,
    /// The connection failed other than by a refusal.
    Failed(String),
}

/// The outcome of one check: the SSH port found, if any, and what each
/// candidate showed, in the order tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The first candidate that answered as SSH.
    pub port: Option<u16>,
    /// Each candidate port and what it showed.
    pub tried: Vec<(u16, Seen)>,
}

impl Report {
    /// Whether the answer can be kept while the listeners stay the same:
    /// an SSH server was found, or every candidate gave a clear no. A
    /// silent or failed candidate is tried again at the next check.
    pub fn is_definite(&self) -> bool {
        self.port.is_some()
            || self
                .tried
                .iter()
                .all(|(_, s)| matches!(s, Seen::Nothing | Seen::Other(_)))
    }

    /// What was tried, for a log line or `rlx-agent check`: `TCP 22:
    /// nothing listens; TCP 2222: not SSH ("HTTP/1.1 400")`.
    pub fn describe(&self) -> String {
        let each = self.tried.iter().map(|(port, seen)| {
            let what = match seen {
                Seen::Nothing => "nothing listens".to_string(),
                Seen::Ssh => "SSH".to_string(),
                Seen::Other(s) => format!("not SSH ({s})"),
                Seen::Silent => format!("no greeting within {} ms", BUDGET.as_millis()),
                Seen::Failed(e) => format!("cannot connect ({e})"),
            };
            format!("TCP {port}: {what}")
        });
        each.collect::<Vec<_>>().join("; ")
    }
}

/// The ports sshd may listen on: [`DEFAULT_SSH_PORT`], then those its
/// configuration in `dir` (normally [`SSHD_CONFIG_DIR`]) names, in file
/// order, without repeats, at most [`MAX_CANDIDATES`]. Files that cannot
/// be read (`sshd_config` is mode 0600 on some systems, and the packaged
/// agent runs as a throwaway user) are skipped: 22 is still tried.
pub fn candidate_ports(dir: &Path) -> Vec<u16> {
    let mut files = vec![dir.join("sshd_config")];
    if let Ok(entries) = std::fs::read_dir(dir.join("sshd_config.d")) {
        // sshd's `Include` reads a glob in lexical order.
        let mut conf: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        conf.sort();
        files.extend(conf.into_iter().take(MAX_CONFIG_FILES));
    }
    let mut ports = vec![DEFAULT_SSH_PORT];
    for f in files {
        let mut text = String::new();
        let read = std::fs::File::open(&f)
            .and_then(|h| h.take(MAX_CONFIG_BYTES).read_to_string(&mut text));
        if let Err(e) = read {
            tracing::debug!(file = %f.display(), error = %e, "sshd configuration not read");
            continue;
        }
        ports.extend(config_ports(&text));
    }
    let mut seen = Vec::new();
    ports.retain(|p| {
        let new = !seen.contains(p);
        seen.push(*p);
        new
    });
    ports.truncate(MAX_CANDIDATES);
    ports
}

/// The ports an sshd configuration names (sshd_config(5)): each `Port N`,
/// and the port of each `ListenAddress HOST:PORT` or `[V6]:PORT`.
/// Keywords are case-insensitive and take their argument after spaces or
/// `=`; `#` starts a comment. Values that are not ports are skipped (sshd
/// itself would refuse to start with them).
pub fn config_ports(text: &str) -> Vec<u16> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((keyword, rest)) = line.split_once(|c: char| c.is_whitespace() || c == '=') else {
            continue;
        };
        let value = rest
            .trim_start_matches(|c: char| c.is_whitespace() || c == '=')
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches('"');
        let port = if keyword.eq_ignore_ascii_case("Port") {
            value
        } else if keyword.eq_ignore_ascii_case("ListenAddress") {
            match value.rsplit_once(':') {
                // `[v6]:port`, or `host:port` (a bare IPv6 address has no port).
                Some((host, port)) if host.ends_with(']') || !host.contains(':') => port,
                _ => continue,
            }
        } else {
            continue;
        };
        if let Ok(p @ 1..) = port.parse::<u16>() {
            out.push(p);
        }
    }
    out
}

/// Whether `greeting` (the first bytes a server sent) is an SSH server's
/// identification string (RFC 4253 §4.2: `SSH-protoversion-...`).
/// OpenSSH sends it at once and before anything else.
pub fn is_ssh_greeting(greeting: &[u8]) -> bool {
    greeting.starts_with(b"SSH-")
}

/// The address to connect to for a listener bound to `bound`: loopback of
/// the same family for one bound to every address, else the address
/// itself (a listener on one LAN address accepts only there).
pub fn dial_address(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bound.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bound.port()).into(),
        _ => bound,
    }
}

/// Connects to `addr` and reads its greeting until `deadline`.
pub fn greeting(addr: SocketAddr, deadline: Instant) -> Seen {
    let left = || deadline.saturating_duration_since(Instant::now());
    if left().is_zero() {
        return Seen::Silent;
    }
    let mut s = match TcpStream::connect_timeout(&addr, left()) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Seen::Nothing,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Seen::Silent,
        Err(e) => return Seen::Failed(format!("{addr}: {e}")),
    };
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    // Four bytes tell `SSH-` from anything else.
    while got.len() < 4 {
        let wait = left();
        if wait.is_zero() || s.set_read_timeout(Some(wait)).is_err() {
            return Seen::Silent;
        }
        match s.read(&mut buf) {
            Ok(0) if got.is_empty() => return Seen::Other("closed without a greeting".into()),
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Seen::Silent
            }
            Err(e) => return Seen::Failed(format!("{addr}: {e}")),
        }
    }
    if is_ssh_greeting(&got) {
        // Best effort: a client that identifies itself before it hangs up
        // is logged as a closed session, not as a scan.
        let _ = s.write_all(OUR_IDENTIFICATION);
        Seen::Ssh
    } else {
        let first = got.split(|&b| b == b'\n').next().unwrap_or_default();
        let shown: String = String::from_utf8_lossy(&first[..first.len().min(32)])
            .trim_end()
            .escape_debug()
            .collect();
        Seen::Other(format!("\"{shown}\""))
    }
}

/// Checks each of `candidates`, in parallel and within `budget`: through
/// `listeners` (the kernel's list; a port none is bound to is `Nothing`
/// without a connection), or, when that list is unknown (`None`), on
/// loopback, 127.0.0.1 then ::1.
pub fn detect(candidates: &[u16], listeners: Option<&[SocketAddr]>, budget: Duration) -> Report {
    let deadline = Instant::now() + budget;
    let targets: Vec<(u16, Vec<SocketAddr>)> = candidates
        .iter()
        .map(|&port| {
            let addrs = match listeners {
                Some(ls) => {
                    // One address per port: IPv4 first, as more boxes
                    // have it than IPv6 loopback.
                    let mut bound: Vec<SocketAddr> =
                        ls.iter().copied().filter(|a| a.port() == port).collect();
                    bound.sort_by_key(|a| (a.is_ipv6(), !a.ip().is_unspecified()));
                    bound.into_iter().take(1).map(dial_address).collect()
                }
                None => vec![
                    (Ipv4Addr::LOCALHOST, port).into(),
                    (Ipv6Addr::LOCALHOST, port).into(),
                ],
            };
            (port, addrs)
        })
        .collect();
    let tried: Vec<(u16, Seen)> = std::thread::scope(|s| {
        let running: Vec<_> = targets
            .iter()
            .map(|(port, addrs)| {
                let handle = s.spawn(move || {
                    let mut seen = Seen::Nothing;
                    for a in addrs {
                        seen = greeting(*a, deadline);
                        if seen != Seen::Nothing {
                            break;
                        }
                    }
                    seen
                });
                (*port, handle)
            })
            .collect();
        running
            .into_iter()
            .map(|(port, h)| {
                let seen = h
                    .join()
                    .unwrap_or_else(|_| Seen::Failed("the check crashed".into()));
                (port, seen)
            })
            .collect()
    });
    let port = tried.iter().find(|(_, s)| *s == Seen::Ssh).map(|(p, _)| *p);
    Report { port, tried }
}

/// Checks this box now: the candidates of [`SSHD_CONFIG_DIR`], through the
/// kernel's listening sockets where they can be read. No memory of earlier
/// checks: `rlx-agent check` uses it to say what it sees.
pub fn check_now() -> Report {
    let candidates = candidate_ports(Path::new(SSHD_CONFIG_DIR));
    let listeners = match rlx_net::listening::tcp_listeners() {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::debug!("sock_diag unavailable ({e}); trying the SSH ports on loopback");
            None
        }
    };
    detect(&candidates, listeners.as_deref(), BUDGET)
}

/// The last definite answer, and the listeners on the candidate ports it
/// was read from (see the module's doc).
static LAST: Mutex<Option<(Vec<SocketAddr>, Option<u16>)>> = Mutex::new(None);

/// The SSH port of this box now, `None` when no SSH server listens: the
/// caps' view ([`crate::cli::AgentArgs::caps`]). On Linux a definite answer
/// is reused while the listening sockets on the candidate ports stay the
/// same, so an idle agent's re-probes do not connect to sshd again.
pub fn port_now() -> Option<u16> {
    let candidates = candidate_ports(Path::new(SSHD_CONFIG_DIR));
    let Ok(all) = rlx_net::listening::tcp_listeners() else {
        return check_now().port;
    };
    let mut mine: Vec<SocketAddr> = all
        .into_iter()
        .filter(|a| candidates.contains(&a.port()))
        .collect();
    mine.sort();
    mine.dedup();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((seen, port)) = last.as_ref().filter(|(seen, _)| *seen == mine) {
        tracing::trace!(listeners = ?seen, ?port, "SSH server unchanged");
        return *port;
    }
    let report = detect(&candidates, Some(mine.as_slice()), BUDGET);
    tracing::debug!(found = ?report.port, "SSH check: {}", report.describe());
    *last = report.is_definite().then_some((mine, report.port));
    report.port
}

#[cfg(test)]
mod tests;
