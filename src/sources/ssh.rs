//! **SSH probes** — run `rlx-agent --probe` on each listed host, all at once.
//!
//! ```toml
//! [discover]
//! ssh_hosts = ["node-a", "node-b"]   # ~/.ssh/config aliases
//! ckpt_dir  = "/data/models/GLM-5.3-Flash"
//! ```
//!
//! SSH is the source that needs nothing on the network but sshd, and the
//! caps it returns are trusted by SSH itself. Every host is probed
//! concurrently (30 hosts cost about one probe, not thirty), with
//! `BatchMode=yes` so a missing key fails instead of prompting, a connect
//! timeout, and an overall deadline per host, so one dead host never holds
//! up or stops the rest. Each failure carries a reason a user can act on.

use crate::progress::Progress;
use crate::sighting::{Attempt, Discovery, Evidence, Problem, Sighting, Source};
use futures::stream::{self, StreamExt};
use rlx_proto::caps::{limits::MAX_JSON_BYTES, NodeCaps};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// Most ssh processes running at once. Each is a few MB and a connection;
/// 64 covers a rack in one round while staying far below sshd's default
/// `MaxStartups` on any one host (each host gets one connection anyway).
pub(crate) const DEFAULT_SSH_CONCURRENCY: usize = 64;

/// Longest ssh `ConnectTimeout`: the TCP connect to a live sshd on a LAN
/// takes milliseconds, so waiting longer only delays the "unreachable"
/// verdict. The overall per-host deadline (`ssh_timeout_ms`) still applies.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Key exchange put first when `ssh_fast_kex` is on (the default), ahead
/// of ssh's own list (`^`, which keeps the rest of the default list behind
/// it, so a server that offers only others still negotiates). Why: OpenSSH
/// 9.x prefers the post-quantum hybrid `sntrup761x25519`, which costs the
/// client about 90 ms of CPU per connection (measured here: 0.09 s user per
/// `ssh host true`, against 0.00 s with curve25519); 30 hosts at once are
/// then 2.7 s of CPU on the coordinator, most of a 3 s budget. What travels
/// over this connection is the node's caps, which the agent also announces
/// in cleartext over mDNS, so long-term secrecy buys nothing here; host-key
/// authentication is unchanged. `ssh_fast_kex = false` leaves ssh's choice
/// (and any `KexAlgorithms` in your ssh config) alone.
pub(crate) const FAST_KEX: &str = "KexAlgorithms=^curve25519-sha256,curve25519-sha256@libssh.org";

/// What the SSH source needs from `[discover]`.
#[derive(Debug, Clone)]
pub(crate) struct SshOptions {
    /// Hosts or ssh aliases.
    pub hosts: Vec<String>,
    /// Worker port written into each node's `addr`.
    pub port: u16,
    /// Checkpoint dir on those hosts (the probe measures its free space).
    pub ckpt_dir: String,
    /// The probe command on the remote side.
    pub remote_bin: String,
    /// Overall deadline per host.
    pub timeout: Duration,
    /// `ssh -F` file, if not the user's own.
    pub ssh_config: Option<PathBuf>,
    /// The ssh client to run (tests and odd installs may point elsewhere).
    pub ssh_program: String,
    /// Most probes in flight.
    pub concurrency: usize,
    /// Put [`FAST_KEX`] first (`ssh_fast_kex`).
    pub fast_kex: bool,
}

/// Where a bare `remote_bin` is looked for after the remote PATH, in
/// order: `cargo install`'s directory, then a hand install's.
pub(crate) const FALLBACK_DIRS: &str = "$HOME/.cargo/bin:/usr/local/bin";

/// `s` as one word for a POSIX shell.
fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("'{}'", s.replace('\'', "'\\''")))
}

impl SshOptions {
    /// The probes `d` configures: `None` without `ssh_hosts`.
    pub(crate) fn configured(d: &crate::config::DiscoverSection) -> Option<Self> {
        (!d.ssh_hosts.is_empty()).then(|| Self::from_section(d))
    }

    /// The options `d` gives, whether or not it lists hosts.
    pub(crate) fn from_section(d: &crate::config::DiscoverSection) -> Self {
        SshOptions {
            hosts: d.ssh_hosts.clone(),
            port: d.port,
            ckpt_dir: d.ckpt_dir.clone().unwrap_or_default(),
            remote_bin: d.remote_bin.clone(),
            timeout: Duration::from_millis(d.ssh_timeout_ms),
            ssh_config: d.ssh_config.clone(),
            // A testing and odd-install hook: run another ssh client (or a
            // stand-in that prints caps) without touching [discover].
            ssh_program: std::env::var("RLX_SSH_PROGRAM").unwrap_or_else(|_| "ssh".into()),
            concurrency: DEFAULT_SSH_CONCURRENCY,
            fast_kex: d.ssh_fast_kex,
        }
    }

    /// The remote command line: the probe, with the checkpoint dir quoted
    /// for the remote shell (ssh joins its arguments into one string).
    ///
    /// A bare `remote_bin` (the default `rlx-agent`) is looked up on the
    /// remote user's PATH and then in [`FALLBACK_DIRS`]: a non-interactive
    /// `ssh host cmd` gets sshd's default PATH, not the login shell's, so
    /// an agent from `cargo install` (`~/.cargo/bin`) or installed by hand
    /// (`/usr/local/bin` on a Mac) would otherwise be "not installed". The
    /// lookup runs in `sh -c '...'`, which every login shell (bash, zsh,
    /// fish, tcsh) hands to sh unchanged. A path is run as given.
    pub(crate) fn remote_command(&self, host: &str) -> String {
        // The runtime's own probe command line (`probe_remote`: `--probe
        // --addr HOST:PORT --ckpt DIR`), so that `remote_bin` may be the
        // RLX worker binary, which self-reports, as well as rlx-agent; the
        // agent checks for a worker on the port of `--addr`.
        let mut cmd = format!(
            "{} --probe --addr {}",
            self.remote_bin,
            quote(&format!("{host}:{}", self.port))
        );
        if !self.ckpt_dir.is_empty() {
            cmd.push_str(" --ckpt ");
            cmd.push_str(&quote(&self.ckpt_dir));
        }
        if self.remote_bin.contains('/') {
            return cmd;
        }
        let inner = format!("PATH=\"$PATH:{FALLBACK_DIRS}\" exec {cmd}");
        format!("sh -c {}", quote(&inner))
    }

    /// The `ConnectTimeout` ssh is given, in the whole seconds ssh takes.
    /// OpenSSH applies it to the TCP connect *and* to the server's greeting
    /// (the banner), so a host whose sshd accepts but never speaks ends on
    /// this timer, which can fire before or at our overall deadline.
    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.min(MAX_CONNECT_TIMEOUT).as_secs().max(1))
    }

    fn command(&self, host: &str) -> Command {
        let connect = self.connect_timeout();
        let mut c = Command::new(&self.ssh_program);
        if let Some(f) = &self.ssh_config {
            c.arg("-F").arg(f);
        }
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            &format!("ConnectTimeout={}", connect.as_secs()),
            "-o",
            "LogLevel=ERROR",
        ]);
        if self.fast_kex {
            c.args(["-o", FAST_KEX]);
        }
        c.args(["-T", "--", host, &self.remote_command(host)]);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }
}

/// Why one host could not be probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SshFailure {
    /// No answer within the deadline.
    TimedOut(Duration),
    /// The TCP connection was accepted but no SSH greeting came within
    /// ssh's `ConnectTimeout`: the host is up, its sshd is hung or
    /// overloaded (or the port is not an sshd). Told apart from
    /// [`SshFailure::Unreachable`] because "is it up?" is the wrong advice.
    Silent(Duration),
    /// The network or name lookup failed before SSH could talk.
    Unreachable(String),
    /// SSH refused us (key not accepted, host key unknown or changed).
    AuthRefused(String),
    /// The remote side has no probe binary.
    NotInstalled(String),
    /// The probe ran and failed.
    ProbeFailed(String),
    /// The probe printed something that is not caps JSON.
    NotCaps(String),
    /// ssh itself could not be run here.
    NoSshClient(String),
}

impl std::fmt::Display for SshFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SshFailure::TimedOut(d) => write!(
                f,
                "timed out: no answer within {} ms (ssh_timeout_ms); the host, or its sshd, is not responding",
                d.as_millis()
            ),
            SshFailure::Silent(d) => write!(
                f,
                "timed out: the host accepted the connection but its sshd sent no greeting within {} ms \
                 (ssh's ConnectTimeout: ssh_timeout_ms, at most 5 s); that sshd is hung or overloaded, \
                 or the port is not an sshd",
                d.as_millis()
            ),
            SshFailure::Unreachable(s) => write!(f, "unreachable: {s}"),
            SshFailure::AuthRefused(s) => write!(f, "auth refused: {s}"),
            SshFailure::NotInstalled(s) => write!(f, "rlx-agent not installed: {s}"),
            SshFailure::ProbeFailed(s) => write!(f, "probe failed: {s}"),
            SshFailure::NotCaps(s) => write!(f, "probe printed something that is not caps JSON: {s}"),
            SshFailure::NoSshClient(s) => write!(f, "cannot run ssh here: {s}"),
        }
    }
}

fn last_line(s: &str) -> String {
    let line = s
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

/// Classifies a finished ssh run into caps or a reason a user can act on.
/// `connect` is the `ConnectTimeout` ssh ran with, named when ssh gave up
/// waiting for the server's greeting.
pub(crate) fn classify(
    host: &str,
    remote_bin: &str,
    connect: Duration,
    code: Option<i32>,
    stdout: &str,
    stderr: &str,
) -> Result<NodeCaps, SshFailure> {
    let err = stderr.to_ascii_lowercase();
    let last = last_line(stderr);
    match code {
        Some(0) => NodeCaps::from_json(stdout).map_err(|e| {
            let first = stdout.lines().next().unwrap_or("").trim();
            let shown: String = first.chars().take(80).collect();
            SshFailure::NotCaps(format!(
                "{e}; it printed {shown:?} (is `{remote_bin}` on {host} the rlx agent, and a version that knows --probe?)"
            ))
        }),
        Some(255) => {
            if err.contains("bad key exchange algorithm") {
                Err(SshFailure::NoSshClient(format!(
                    "this ssh does not accept `-o {FAST_KEX}` (an old OpenSSH?); \
                     set [discover] ssh_fast_kex = false ({last})"
                )))
            } else if err.contains("could not resolve hostname") || err.contains("name or service not known") {
                Err(SshFailure::Unreachable(format!(
                    "the name {host} does not resolve; check the alias in your ssh config ({last})"
                )))
            } else if err.contains("connection refused") {
                Err(SshFailure::Unreachable(format!(
                    "connection refused: no sshd listening on {host}'s ssh port ({last})"
                )))
            } else if err.contains("during banner exchange") {
                Err(SshFailure::Silent(connect))
            } else if err.contains("timed out") || err.contains("no route to host") || err.contains("network is unreachable") {
                Err(SshFailure::Unreachable(format!("{last}; is {host} up and on this network?")))
            } else if err.contains("host key verification failed") || err.contains("remote host identification has changed") {
                Err(SshFailure::AuthRefused(format!(
                    "{host}'s host key is unknown or has changed; connect once by hand (`ssh {host}`) to check and accept it"
                )))
            } else if err.contains("permission denied") || err.contains("too many authentication failures") {
                Err(SshFailure::AuthRefused(format!(
                    "{host} did not accept any of your keys (BatchMode never prompts for a password); \
                     install your public key there with `ssh-copy-id {host}` ({last})"
                )))
            } else if err.contains("connection closed") || err.contains("connection reset") || err.contains("kex_exchange") {
                Err(SshFailure::Unreachable(format!("{host} closed the connection: {last}")))
            } else {
                Err(SshFailure::Unreachable(format!("ssh exited 255: {last}")))
            }
        }
        Some(127) if remote_bin.contains('/') => Err(SshFailure::NotInstalled(format!(
            "`{remote_bin}` does not exist on {host}; install rlx-agent there or fix \
             [discover] remote_bin ({last})"
        ))),
        Some(127) => Err(SshFailure::NotInstalled(format!(
            "`{remote_bin}` was not found on {host}'s PATH nor in {FALLBACK_DIRS}; install \
             rlx-agent there or set [discover] remote_bin to its full path ({last})"
        ))),
        Some(126) => Err(SshFailure::NotInstalled(format!(
            "`{remote_bin}` on {host} is not executable ({last})"
        ))),
        Some(c) => {
            if err.contains("command not found") || err.contains("no such file or directory") {
                Err(SshFailure::NotInstalled(format!(
                    "`{remote_bin}` was not found on {host} ({last})"
                )))
            } else if err.contains("unexpected argument '--addr'") {
                Err(SshFailure::ProbeFailed(format!(
                    "`{remote_bin}` on {host} is older than this coordinator (it does not know \
                     --addr, the runtime's probe command line); upgrade rlx-agent there: {last}"
                )))
            } else if err.contains("unexpected argument") || err.contains("unrecognized option") {
                Err(SshFailure::ProbeFailed(format!(
                    "`{remote_bin}` on {host} does not understand --probe (an older or different program?): {last}"
                )))
            } else {
                Err(SshFailure::ProbeFailed(format!("`{remote_bin} --probe` exited {c}: {last}")))
            }
        }
        None => Err(SshFailure::ProbeFailed(format!("killed by a signal: {last}"))),
    }
}

/// Probes one host, within the overall deadline.
pub(crate) async fn probe_host(opts: &SshOptions, host: &str) -> Result<NodeCaps, SshFailure> {
    let mut child = opts
        .command(host)
        .spawn()
        .map_err(|e| SshFailure::NoSshClient(format!("{}: {e}", opts.ssh_program)))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let run = async {
        // Bounded reads: a remote that prints forever cannot grow us.
        let mut so = Vec::new();
        let mut se = Vec::new();
        let mut out = (&mut out).take(MAX_JSON_BYTES as u64 + 1);
        let mut err = (&mut err).take(64 * 1024);
        // Read errors only shorten the output, which classify() reports.
        let _ = tokio::join!(out.read_to_end(&mut so), err.read_to_end(&mut se));
        let status = child.wait().await;
        (status, so, se)
    };
    match tokio::time::timeout(opts.timeout, run).await {
        Err(_) => Err(SshFailure::TimedOut(opts.timeout)),
        Ok((status, so, se)) => {
            let status = status.map_err(|e| SshFailure::NoSshClient(e.to_string()))?;
            if so.len() > MAX_JSON_BYTES {
                return Err(SshFailure::NotCaps(format!(
                    "more than {MAX_JSON_BYTES} bytes of output"
                )));
            }
            classify(
                host,
                &opts.remote_bin,
                opts.connect_timeout(),
                status.code(),
                &String::from_utf8_lossy(&so),
                &String::from_utf8_lossy(&se),
            )
        }
    }
}

/// Probes every host concurrently and returns sightings and failures.
pub(crate) async fn discover(
    opts: &SshOptions,
    started: Instant,
    progress: &dyn Progress,
) -> Discovery {
    let t0 = Instant::now();
    let task = &progress.task(opts.hosts.len() as u64, "ssh probes");
    let results: Vec<(String, Result<NodeCaps, SshFailure>, u64)> = stream::iter(opts.hosts.iter())
        .map(|host| async move {
            let r = probe_host(opts, host).await;
            task.step();
            (host.clone(), r, started.elapsed().as_millis() as u64)
        })
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    let mut d = Discovery::default();
    // Report in the order the user listed the hosts.
    let mut results = results;
    results.sort_by_key(|(h, _, _)| opts.hosts.iter().position(|x| x == h));
    for (host, r, ms) in results {
        match r {
            Ok(caps) => d.sightings.push(Sighting {
                identity: crate::sighting::Pinning::Unpinned,
                source: Source::Ssh,
                addr: format!("{host}:{}", opts.port),
                host: host.clone(),
                ip: None,
                port: opts.port,
                // The agent's own port as its probe tells it; a probe that
                // names none is an agent whose one port serves both.
                agent_port: caps.agent_port.or(Some(opts.port)),
                worker_reachable: None,
                ssh: Some(host),
                caps: Some(caps),
                evidence: Evidence::Ssh,
                heard_on: None,
                found_ms: ms,
            }),
            Err(e) => {
                tracing::debug!(%host, error = %e, "ssh probe failed");
                d.problems
                    .push(Problem::new(Source::Ssh, host, e.to_string()));
            }
        }
    }
    d.attempts.push(Attempt {
        source: Source::Ssh,
        what: format!(
            "{} ssh host(s), `{}`",
            opts.hosts.len(),
            opts.remote_command("HOST")
        ),
        elapsed_ms: t0.elapsed().as_millis() as u64,
        answered: d.sightings.len(),
        stopped_early: None,
        late: None,
    });
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: &str = r#"{"os":"linux","cores":4,"ram_total":1000,"ram_avail":10}"#;
    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_clean_exit_with_caps_json_is_a_success() {
        assert!(classify("h", "rlx-agent", SEC, Some(0), CAPS, "").is_ok());
    }

    #[test]
    fn each_failure_gets_a_reason_a_user_can_act_on() {
        let cases = [
            (
                Some(255),
                "",
                "ssh: Could not resolve hostname nope: Name or service not known",
                "unreachable",
            ),
            (
                Some(255),
                "",
                "ssh: connect to host h port 22: Connection refused",
                "unreachable",
            ),
            (
                Some(255),
                "",
                "ssh: connect to host h port 22: Connection timed out",
                "unreachable",
            ),
            (
                Some(255),
                "",
                "Connection timed out during banner exchange\nConnection to 10.0.0.7 port 22 timed out",
                "sent no greeting within 1000 ms",
            ),
            (
                Some(255),
                "",
                "root@h: Permission denied (publickey).",
                "auth refused",
            ),
            (
                Some(255),
                "",
                "Host key verification failed.",
                "auth refused",
            ),
            (
                Some(127),
                "",
                "bash: line 1: rlx-agent: command not found",
                "not installed",
            ),
            (Some(0), "Welcome to the box!\n", "", "not caps JSON"),
            (
                Some(2),
                "",
                "error: unexpected argument '--probe' found",
                "does not understand --probe",
            ),
        ];
        for (code, out, err, want) in cases {
            let e = classify("h", "rlx-agent", SEC, code, out, err)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{err:?} gave {e:?}, wanted {want:?}");
        }
    }

    #[test]
    fn a_missing_agent_is_named_by_the_path_it_was_given_or_by_where_it_was_looked_for() {
        let stderr = "sh: 1: exec: rlx-agent: not found";
        let e = classify("h", "rlx-agent", SEC, Some(127), "", stderr)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("PATH nor in $HOME/.cargo/bin:/usr/local/bin"),
            "{e}"
        );
        let e = classify("h", "/opt/rlx/bin/rlx-agent", SEC, Some(127), "", stderr)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`/opt/rlx/bin/rlx-agent` does not exist on h") && !e.contains("PATH"),
            "{e}"
        );
    }

    #[test]
    fn the_checkpoint_dir_is_quoted_for_the_remote_shell_and_a_bare_agent_is_also_looked_for_where_cargo_installs_it(
    ) {
        let o = SshOptions {
            hosts: vec![],
            port: 9100,
            ckpt_dir: "/data/my models/$x".into(),
            remote_bin: "rlx-agent".into(),
            timeout: Duration::from_secs(1),
            ssh_config: None,
            ssh_program: "ssh".into(),
            concurrency: 1,
            fast_kex: true,
        };
        // What the remote login shell hands to sh, and what sh then runs.
        let words = shlex::split(&o.remote_command("gpu-a")).unwrap();
        assert_eq!(words[..2], ["sh", "-c"]);
        assert!(
            words[2].starts_with("PATH=\"$PATH:$HOME/.cargo/bin:/usr/local/bin\" exec "),
            "{}",
            words[2]
        );
        assert_eq!(
            shlex::split(&words[2]).unwrap()[1..],
            [
                "exec",
                "rlx-agent",
                "--probe",
                "--addr",
                "gpu-a:9100",
                "--ckpt",
                "/data/my models/$x"
            ]
        );
        let o = SshOptions {
            remote_bin: "/opt/rlx/bin/rlx-agent".into(),
            ..o
        };
        assert_eq!(
            o.remote_command("gpu-a"),
            "/opt/rlx/bin/rlx-agent --probe --addr gpu-a:9100 --ckpt '/data/my models/$x'",
            "the runtime's own probe command line (probe_remote), so the RLX worker can answer it"
        );
    }

    #[test]
    fn ssh_gets_the_deadline_as_its_connect_timeout_in_whole_seconds_at_most_five() {
        let mut o = SshOptions::from_section(&crate::config::DiscoverSection::default());
        for (ms, want) in [(300, 1), (2_000, 2), (2_900, 2), (10_000, 5)] {
            o.timeout = Duration::from_millis(ms);
            assert_eq!(o.connect_timeout(), Duration::from_secs(want), "{ms} ms");
            assert!(args(&o).contains(&format!("ConnectTimeout={want}")));
        }
    }

    fn args(o: &SshOptions) -> Vec<String> {
        o.command("h1")
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn curve25519_goes_first_unless_ssh_fast_kex_is_off() {
        let mut d = crate::config::DiscoverSection::default();
        let on = SshOptions::from_section(&d);
        assert!(on.fast_kex, "on by default");
        let a = args(&on);
        let k = a.iter().position(|x| x == FAST_KEX).expect("KexAlgorithms");
        assert_eq!(a[k - 1], "-o");
        assert!(
            k < a.iter().position(|x| x == "h1").unwrap(),
            "before the host"
        );
        d.ssh_fast_kex = false;
        assert!(!args(&SshOptions::from_section(&d))
            .iter()
            .any(|x| x.contains("KexAlgorithms")));
    }

    #[test]
    fn an_ssh_that_rejects_the_fast_kex_option_says_how_to_turn_it_off() {
        let err = classify(
            "h1",
            "rlx-agent",
            SEC,
            Some(255),
            "",
            "command-line line 0: Bad key exchange algorithms '^curve25519-sha256'.\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ssh_fast_kex = false"), "{err}");
    }
}
