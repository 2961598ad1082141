//! **Helpers shared by the integration tests**: whether a lab can be built
//! here, processes that dump their output when a test fails, deadline loops
//! instead of sleeps, and where the built binaries are.
//!
//! Every test that sends multicast or scans builds its own lab
//! ([`rlx_lab`]) and runs its programs inside it:
//!
//! ```ignore
//! mod common;
//! let Some(labs) = common::require_lab() else { return };
//! let lab = labs.hosts(3);
//! let agent = common::spawn(&lab, 0, Command::new(common::agent_bin()));
//! ```
//!
//! Without root the lab tests print `SKIP` and pass, except under `CI=true`,
//! where they must run and fail instead. As a non-root user with
//! unprivileged user namespaces, run them as root of a user namespace:
//! `unshare --user --map-root-user --net --mount cargo test`.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod avahi;
pub mod bind;
pub mod sshd;

pub use rlx_lab::Proc;
use rlx_lab::{lab_support, Lab, LabMode, LabOptions};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Debian's interpreter, which has python3-zeroconf (the `python3` on PATH
/// may be another build without Debian's packages).
pub const PYTHON: &str = "/usr/bin/python3";

/// How often deadline loops re-check their condition.
const POLL: Duration = Duration::from_millis(10);

/// Permission to build labs, given by [`require_lab`].
#[derive(Debug, Clone, Copy)]
pub struct Labs;

impl Labs {
    /// A lab with `n` IPv4 hosts on one switch; panics with the reason if it
    /// cannot be built.
    pub fn hosts(self, n: usize) -> Lab {
        self.with(LabOptions {
            hosts: n,
            ipv6: false,
        })
    }

    /// A lab with the given options; panics with the reason on failure.
    pub fn with(self, opts: LabOptions) -> Lab {
        Lab::new(opts.clone()).unwrap_or_else(|e| panic!("cannot build a lab {opts:?}: {e}"))
    }

    /// A loopback-only namespace; panics with the reason on failure.
    pub fn loopback(self) -> Lab {
        Lab::loopback().unwrap_or_else(|e| panic!("cannot build a loopback lab: {e}"))
    }
}

/// `Some` when this process can build labs. Otherwise prints why the
/// calling test is skipped and returns `None`, or panics under `CI=true`
/// (where skipping would hide a broken runner).
pub fn require_lab() -> Option<Labs> {
    let why = match lab_support() {
        Ok(LabMode::Root) => return Some(Labs),
        Ok(LabMode::Unshare) => "not root; run the tests as root of a user namespace: \
                                 `unshare --user --map-root-user --net --mount cargo test`"
            .to_string(),
        Err(e) => e,
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and {test} cannot build its private network: {why}");
    }
    rlx_lab::peer::skip(&format!(
        "{test}: cannot build a private network here: {why}"
    ));
    None
}

/// Start `cmd` in host `i` of `lab` (see [`Lab::spawn`]), panicking on failure.
pub fn spawn(lab: &Lab, i: usize, cmd: Command) -> Proc {
    Proc::spawn(lab, i, cmd)
}

/// Run `cmd` to completion; panics with its command line, status, stdout and
/// stderr unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!("{}", describe_output(cmd, &out));
    }
    out
}

/// A command's outcome for failure messages.
pub fn describe_output(cmd: &Command, out: &Output) -> String {
    format!(
        "{cmd:?} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}

/// Call `check` until it returns `Ok`, or panic after `timeout` with `what`
/// and the last error. A deadline loop, never a fixed sleep.
pub fn eventually<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if Instant::now() >= deadline => {
                panic!("{what}: not done within {timeout:?}; last: {e}")
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Wait until `cond` holds, or panic after `timeout` naming `what`.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    eventually(timeout, what, || {
        if cond() {
            Ok(())
        } else {
            Err("condition false".into())
        }
    })
}

/// The `rlx-discover` binary (of the `rlx-discover-cli` package, beside
/// this test's `deps/`: [`rlx_lab::bins`]).
pub fn discover_bin() -> PathBuf {
    rlx_lab::bins::workspace_bin("rlx-discover")
}

/// The `rlx-agent` binary, likewise.
pub fn agent_bin() -> PathBuf {
    rlx_lab::bins::workspace_bin("rlx-agent")
}

/// The example program `name` (`browse_once`, `runtime`), built beside
/// this test's `deps/`; panics with what to run when it has not been.
pub fn example_bin(name: &str) -> PathBuf {
    let bin = rlx_lab::bins::profile_dir().join("examples").join(name);
    assert!(
        bin.is_file(),
        "{} not found: build it first (`cargo build --examples`, or `cargo test`)",
        bin.display()
    );
    bin
}

/// The `browse_once` example (one mDNS browse, its JSON on stdout).
pub fn browse_once_bin() -> PathBuf {
    example_bin("browse_once")
}

/// Runs one `browse_once ARGS..` in lab host `i` and returns its JSON.
pub fn browse_once(lab: &Lab, i: usize, args: &[&str]) -> serde_json::Value {
    let out = run_ok(lab.command(i, browse_once_bin()).args(args));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "browse printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The sightings of a browse's JSON by instance name.
pub fn sightings_by_host(
    v: &serde_json::Value,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    v["sightings"]
        .as_array()
        .expect("sightings")
        .iter()
        .map(|s| (s["host"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// One `rlx-discover expand --format json EXTRA.. CFG` in lab host 0, with
/// `RUST_LOG=debug` (refusal reasons are then in stderr too).
pub struct Expanded {
    /// The exit code.
    pub code: Option<i32>,
    /// The JSON printed.
    pub json: serde_json::Value,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr: the report and the log.
    pub stderr: String,
}

/// Runs [`Expanded`]'s command; panics with stdout and stderr when no JSON
/// came out.
pub fn expand(lab: &Lab, cfg: &std::path::Path, extra: &[&str]) -> Expanded {
    let out = lab
        .command(0, discover_bin())
        .args(["expand", "--format", "json"])
        .args(extra)
        .arg(cfg)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("expand printed no JSON ({e}); stdout:\n{stdout}\nstderr:\n{stderr}")
    });
    Expanded {
        code: out.status.code(),
        json,
        stdout,
        stderr,
    }
}

/// host -> reason of every refused host in an expand's report.
pub fn refusals(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    v["report"]["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["host"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// host -> (id, evidence) of every admitted node.
pub fn admitted(v: &serde_json::Value) -> std::collections::BTreeMap<String, (String, String)> {
    v["report"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["host"].as_str().unwrap().to_string(),
                (
                    a["id"].as_str().unwrap().to_string(),
                    a["evidence"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}
