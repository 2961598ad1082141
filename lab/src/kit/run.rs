//! **A command run to completion, with what explains its failure**: the
//! command line, the exit status, stdout and stderr, in one message.

use std::process::{Command, Output};

/// A finished command, kept with its command line for assertion messages.
pub struct Run {
    /// The command line (`Command`'s `Debug`).
    pub cmd: String,
    /// What it did.
    pub out: Output,
}

impl Run {
    /// Runs `c` to completion; panics if it cannot be started.
    pub fn of(mut c: Command) -> Run {
        let out = c
            .output()
            .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
        Run {
            cmd: format!("{c:?}"),
            out,
        }
    }

    /// Its exit code; -1 when a signal ended it.
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    /// Its stdout, lossily decoded.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    /// Its stderr, lossily decoded.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// The command, its status and its output, for assertion messages.
    pub fn dump(&self) -> String {
        describe(&self.cmd, &self.out)
    }

    /// Panics with the dump unless it exited with `code`.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(self.code(), code, "{}", self.dump());
        self
    }
}

/// Run `cmd` to completion; panics with its command line, status, stdout and
/// stderr unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        describe(&format!("{cmd:?}"), &out)
    );
    out
}

/// A command's outcome for failure messages.
fn describe(cmd: &str, out: &Output) -> String {
    format!(
        "{cmd} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}
