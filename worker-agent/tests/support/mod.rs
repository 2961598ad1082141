//! **Harness for the announce tests**: private networks from
//! [`rlx_lab`], the announcer run as a child process inside them,
//! python-zeroconf as the third-party browser, and deadline loops.
//!
//! Nothing here sends multicast from the test process itself: it lives in the
//! root network namespace, so every mDNS speaker (announcer and browser) is a
//! child started by the lab under `ip netns exec` with `RLX_NETNS_GUARD=1`.

// Each test uses a different subset of these helpers.
#![allow(dead_code)]

pub use rlx_lab::Proc;
use rlx_lab::{lab_support, Lab, LabMode, LabOptions};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Debian's interpreter, which has python3-zeroconf (the `python3` on PATH
/// is another build without Debian's packages).
pub const PYTHON: &str = "/usr/bin/python3";

/// How often deadline loops re-check.
const POLL: Duration = Duration::from_millis(10);

/// The browser script, next to this file.
pub fn browse_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/zc_browse.py")
}

/// A lab, or `None` (after printing why the test is skipped) when this
/// process cannot build one; under `CI=true` it panics instead, so that a
/// broken runner does not pass silently.
pub fn lab(opts: Option<LabOptions>) -> Option<Lab> {
    let why = match lab_support() {
        Ok(LabMode::Root) => {
            let lab =
                match opts {
                    Some(o) => Lab::new(o.clone())
                        .unwrap_or_else(|e| panic!("cannot build a lab {o:?}: {e}")),
                    None => Lab::loopback()
                        .unwrap_or_else(|e| panic!("cannot build a loopback lab: {e}")),
                };
            return Some(lab);
        }
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

/// CLOCK_MONOTONIC in seconds: the clock of Rust's `Instant` and of
/// Python's `time.monotonic()`, so the browser's event times and the test's
/// compare directly.
pub fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec and CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// One event printed by `zc_browse.py`.
#[derive(Debug, Clone)]
pub struct Event(pub Value);

impl Event {
    /// `ready`, `added`, `updated` or `removed`.
    pub fn kind(&self) -> &str {
        self.0["event"].as_str().unwrap_or_default()
    }
    /// The full instance name (`box._rlx._tcp.local.`).
    pub fn name(&self) -> &str {
        self.0["name"].as_str().unwrap_or_default()
    }
    /// CLOCK_MONOTONIC seconds when the browser saw it.
    pub fn t(&self) -> f64 {
        self.0["t"].as_f64().unwrap_or_default()
    }
    /// Whether SRV, TXT and an address were resolved.
    pub fn resolved(&self) -> bool {
        self.0["resolved"].as_bool().unwrap_or(false)
    }
    /// The SRV port.
    pub fn port(&self) -> u64 {
        self.0["port"].as_u64().unwrap_or_default()
    }
    /// The SRV target host.
    pub fn server(&self) -> &str {
        self.0["server"].as_str().unwrap_or_default()
    }
    /// The addresses, as text.
    pub fn addrs(&self) -> Vec<String> {
        strings(&self.0["addrs"])
    }
    /// The TXT strings in wire order.
    pub fn txt(&self) -> Vec<String> {
        strings(&self.0["txt"])
    }
    /// The value of TXT key `key` (first occurrence).
    pub fn txt_value(&self, key: &str) -> Option<String> {
        self.txt().into_iter().find_map(|s| {
            s.split_once('=')
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        })
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// python-zeroconf browsing `_rlx._tcp` in one host of a lab.
pub struct Browser(pub Proc);

impl Browser {
    /// Start browsing in host `i` and wait until it is ready.
    pub fn start(lab: &Lab, i: usize) -> Browser {
        let mut cmd = Command::new(PYTHON);
        cmd.arg("-u").arg(browse_script());
        let b = Browser(Proc::spawn(lab, i, cmd));
        b.0.expect_output("\"ready\"", Duration::from_secs(10));
        b
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.0
            .stdout()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok().map(Event))
            .collect()
    }

    /// The first event satisfying `pred`, waiting up to `timeout`; panics
    /// with every event and the browser's output otherwise.
    pub fn wait_for(&self, timeout: Duration, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return e;
            }
            if Instant::now() >= deadline {
                panic!(
                    "the browser did not see {what} within {timeout:?}; it saw:\n{}",
                    self.events()
                        .iter()
                        .map(|e| e.0.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Whether any event satisfies `pred` so far.
    pub fn saw(&self, pred: impl Fn(&Event) -> bool) -> bool {
        self.events().iter().any(pred)
    }
}

/// Wait until `cond` holds, or panic after `timeout` naming `what`.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() >= deadline {
            panic!("{what}: not true within {timeout:?}");
        }
        std::thread::sleep(POLL);
    }
}
