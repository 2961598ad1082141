//! **A process the lab started**: killed on drop, its output in files that
//! failure messages quote.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often deadline loops re-check: short against the 100 ms-scale
/// timings tests measure, long enough not to busy-wait.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// A process started by [`Lab::spawn`](crate::Lab::spawn): killed on drop, output in files.
pub struct LabProcess {
    pub(crate) child: Arc<Mutex<Child>>,
    pub(crate) pid: u32,
    pub(crate) label: String,
    pub(crate) cmdline: String,
    pub(crate) stdout: PathBuf,
    pub(crate) stderr: PathBuf,
}

impl fmt::Debug for LabProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.label, self.pid)
    }
}

impl LabProcess {
    /// Its PID (the program itself: `ip netns exec` execs it).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A short name: `program#seq@hI`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The full command line.
    pub fn cmdline(&self) -> &str {
        &self.cmdline
    }

    /// Send `sig` (e.g. SIGTERM to test goodbyes). `false` if the process had
    /// already exited. Never signals a reused PID: the child is not reaped
    /// while the signal is sent.
    pub fn signal(&self, sig: nix::sys::signal::Signal) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(child.try_wait(), Ok(None)) {
            return false;
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), sig).is_ok()
    }

    /// SIGKILL it and reap it.
    pub fn kill(&self) {
        kill_and_reap(&self.child);
    }

    /// Its exit status if it has exited.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .ok()
            .flatten()
    }

    /// Wait up to `timeout` for it to exit.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Everything it has written to stdout so far.
    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Everything it has written to stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Where its stdout goes.
    pub fn stdout_path(&self) -> &Path {
        &self.stdout
    }

    /// Where its stderr goes.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr
    }

    /// Wait until `needle` appears in its stdout or stderr. Fails early if
    /// it exits first; the error carries [`LabProcess::dump`].
    pub fn wait_for_output(&self, needle: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stdout().contains(needle) || self.stderr().contains(needle) {
                return Ok(());
            }
            if let Some(status) = self.try_wait() {
                // It may have printed just before exiting.
                if self.stdout().contains(needle) || self.stderr().contains(needle) {
                    return Ok(());
                }
                return Err(format!(
                    "{} exited ({status}) without printing {needle:?}\n{}",
                    self.label,
                    self.dump()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not print {needle:?} within {timeout:?}\n{}",
                    self.label,
                    self.dump()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Command line, status, stdout and stderr, for failure messages.
    pub fn dump(&self) -> String {
        let status = match self.try_wait() {
            Some(s) => s.to_string(),
            None => "running".into(),
        };
        format!(
            "--- {} (pid {}, {status})\n$ {}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- end {} ---",
            self.label,
            self.pid,
            self.cmdline,
            self.stdout().trim_end(),
            self.stderr().trim_end(),
            self.label
        )
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) fn kill_and_reap(child: &Mutex<Child>) {
    let mut child = child.lock().unwrap_or_else(|e| e.into_inner());
    // `Child::kill` does nothing once the child has been reaped, so a
    // reused PID is never hit.
    let _ = child.kill();
    let _ = child.wait();
}
