//! **A lab process for tests**: [`Proc`] wraps a [`LabProcess`] so that a
//! failing test prints the process's command line, stdout and stderr, and
//! turns waits that time out into panics that carry that output, so that a
//! test reads as its steps and a failure still shows what every program
//! said.

use crate::process::LabProcess;
use crate::topology::Lab;
use std::ops::Deref;
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// A [`LabProcess`] that prints its command, stdout and stderr if the test
/// fails while it is alive. Killed on drop, like the process it wraps.
pub struct Proc(pub LabProcess);

impl Deref for Proc {
    type Target = LabProcess;
    fn deref(&self) -> &LabProcess {
        &self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Only while unwinding: a passing test stays quiet.
        if std::thread::panicking() {
            eprintln!("{}", self.0.dump());
        }
    }
}

impl Proc {
    /// Start `cmd` in host `i` of `lab` (see [`Lab::spawn`]), panicking with
    /// the reason on failure.
    pub fn spawn(lab: &Lab, i: usize, cmd: Command) -> Proc {
        Proc(
            lab.spawn(i, cmd)
                .unwrap_or_else(|e| panic!("cannot start a process in host {i}: {e}")),
        )
    }

    /// Wait for `needle` in its output, panicking with its output if it does
    /// not come within `timeout` (or the process exits first).
    pub fn expect_output(&self, needle: &str, timeout: Duration) {
        if let Err(e) = self.0.wait_for_output(needle, timeout) {
            panic!("{e}");
        }
    }

    /// The JSON lines it has printed on stdout so far (`watch --json`'s
    /// events): every complete line must be one, and a last line still
    /// being written is left for the next call, not misread as malformed.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        let out = self.0.stdout();
        let complete = out.rfind('\n').map_or("", |end| &out[..end]);
        complete
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("{}: a line that is not JSON ({e}): {l}", self.0.label())
                })
            })
            .collect()
    }

    /// Wait up to `timeout` for it to exit, panicking if it does not.
    pub fn expect_exit(&self, timeout: Duration) -> ExitStatus {
        self.0
            .wait_timeout(timeout)
            .unwrap_or_else(|| panic!("{} still running after {timeout:?}", self.0.label()))
    }
}
