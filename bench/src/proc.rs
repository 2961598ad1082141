//! **Running and watching the measured programs** — a command run to
//! completion under a deadline with its wall time, CPU time and peak RSS
//! (from `wait4`), readings of a live process's memory and CPU from
//! `/proc`, and packet counters read from inside a lab namespace.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a finished (or killed) command went.
#[derive(Debug, Clone)]
pub struct Timed {
    /// Exit status; `None` when it was killed at the deadline.
    pub status: Option<ExitStatus>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// From spawn to exit.
    pub wall: Duration,
    /// User + system CPU time.
    pub cpu: Duration,
    /// Peak resident set size, kB.
    pub maxrss_kb: u64,
    /// The wall clock just before the spawn: the zero of a tool that
    /// reports its own times in Unix time ([`Timed::since_spawn_ms`]).
    pub spawned: SystemTime,
}

impl Timed {
    /// Wall time in milliseconds.
    pub fn wall_ms(&self) -> f64 {
        self.wall.as_secs_f64() * 1000.0
    }

    /// Milliseconds from the spawn to `unix_us` (a moment the tool
    /// reported in microseconds of Unix time): what puts a tool's own
    /// clock on the spawn's, so that every tool is timed from its spawn.
    /// `None` for a moment before the spawn (a clock step).
    pub fn since_spawn_ms(&self, unix_us: u64) -> Option<f64> {
        let spawned = self.spawned.duration_since(UNIX_EPOCH).ok()?.as_micros() as f64;
        let d = unix_us as f64 - spawned;
        (d >= 0.0).then_some(d / 1000.0)
    }

    /// `exit N`, `killed by signal N`, or `killed at the deadline`.
    pub fn describe_status(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self.status {
            None => "killed at the deadline".into(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => s.to_string(),
            },
        }
    }

    /// Whether it died of a signal it did not get from us (a crash).
    pub fn crashed(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.status.is_some_and(|s| s.signal().is_some())
    }

    /// The last lines of stderr, for notes.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let all: Vec<&str> = self.stderr.lines().collect();
        all[all.len().saturating_sub(lines)..].join(" | ")
    }
}

fn reader<R: Read + Send + 'static>(r: R) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(r).read_to_string(&mut s);
        s
    })
}

/// `wait4(pid, WNOHANG)`: `Some((status, rusage))` once the child exited.
fn try_wait4(pid: u32) -> std::io::Result<Option<(ExitStatus, libc::rusage)>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 writes into both
    // out-parameters, which live for the duration of the call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
    match r {
        0 => Ok(None),
        r if r < 0 => Err(std::io::Error::last_os_error()),
        _ => Ok(Some((ExitStatus::from_raw(status), ru))),
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// Runs `cmd` to completion, killing it (by its own PID) at `timeout`. The
/// child is reaped with `wait4` so its CPU time and peak RSS come with it.
pub fn run_timed(cmd: &mut Command, timeout: Duration) -> anyhow::Result<Timed> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = SystemTime::now();
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {:?}: {e}", cmd.get_program()))?;
    let out = reader(child.stdout.take().expect("piped"));
    let err = reader(child.stderr.take().expect("piped"));
    finish(child, (start, spawned), timeout, out, err)
}

fn finish(
    child: Child,
    (start, spawned): (Instant, SystemTime),
    timeout: Duration,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
) -> anyhow::Result<Timed> {
    let pid = child.id();
    let deadline = start + timeout;
    let mut killed = false;
    let (status, ru, wall) = loop {
        if let Some((status, ru)) = try_wait4(pid)? {
            break (status, ru, start.elapsed());
        }
        if !killed && Instant::now() >= deadline {
            // Not reaped yet, so the PID is still ours.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Reaped by wait4 above: the Child must not wait again.
    std::mem::forget(child);
    Ok(Timed {
        status: (!killed).then_some(status),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        wall,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        maxrss_kb: ru.ru_maxrss as u64,
        spawned,
    })
}

/// Runs `cmd`, timestamping each stdout line from spawn, until `done` says
/// the lines so far are enough or `timeout` passes; then kills it. Returns
/// the lines with their times and the [`Timed`] of the whole run.
pub fn run_streaming(
    cmd: &mut Command,
    timeout: Duration,
    mut done: impl FnMut(&[(Duration, String)]) -> bool,
) -> anyhow::Result<(Vec<(Duration, String)>, Timed)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = SystemTime::now();
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stdout = child.stdout.take().expect("piped");
    let err = reader(child.stderr.take().expect("piped"));
    let (tx, rx) = mpsc::channel();
    let lines_thread = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((start.elapsed(), line)).is_err() {
                break;
            }
        }
    });
    let deadline = start + timeout;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(l) => {
                lines.push(l);
                if done(&lines) {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= deadline {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let out = std::thread::spawn(move || {
        let _ = lines_thread.join();
        String::new()
    });
    let t = finish(child, (start, spawned), Duration::from_secs(2), out, err)?;
    Ok((lines, t))
}

/// Resident set size of a live process, kB (`VmRSS`).
pub fn rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`.
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time a live process has used so far, all threads, in nanoseconds
/// (`/proc/PID/task/*/schedstat`, nanosecond resolution, unlike the 10 ms
/// ticks of `/proc/PID/stat`).
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            total += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Some(total)
}

/// Packets (rx, tx) counted on `iface` in namespace `ns` so far
/// (`/proc/net/dev` as seen from inside it).
pub fn iface_packets(ns: &str, iface: &str) -> anyhow::Result<(u64, u64)> {
    let iface = iface.to_string();
    rlx_lab::kit::netns::in_netns(ns, move || -> anyhow::Result<(u64, u64)> {
        // /proc/net follows the reading thread's namespace via /proc/thread-self.
        let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
        for l in text.lines() {
            let Some((name, rest)) = l.split_once(':') else {
                continue;
            };
            if name.trim() == iface {
                let f: Vec<u64> = rest
                    .split_whitespace()
                    .map(|v| v.parse().unwrap_or(0))
                    .collect();
                // rx: bytes packets ...; tx starts at field 8.
                return Ok((f[1], f[9]));
            }
        }
        anyhow::bail!("no interface {iface} in /proc/net/dev")
    })?
}
