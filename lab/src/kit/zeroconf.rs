//! **python-zeroconf as a third-party browser**: `py/zc_browse.py`, a real
//! independent mDNS stack, browsing `_rlx._tcp` in a lab host and printing
//! one JSON line per event, so that a test checks what a browser that is
//! not ours sees (TXT records, goodbyes, renames, re-announcements). Its
//! event times are CLOCK_MONOTONIC, which [`monotonic`] reads too, so that
//! latencies compare directly. Callers check
//! [`Peer::PythonZeroconf`](super::peer::Peer::PythonZeroconf) first.

use super::bins::script;
use super::peer::PYTHON;
use super::proc::Proc;
use super::wait::eventually;
use crate::topology::Lab;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// How long the browser may take to start: python's imports on a loaded
/// 2-core box.
const READY: Duration = Duration::from_secs(10);

/// CLOCK_MONOTONIC in seconds: the clock of Rust's `Instant` and of
/// Python's `time.monotonic()`, so the browser's event times and the test's
/// compare directly.
pub fn monotonic() -> f64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC always exists");
    ts.tv_sec() as f64 + ts.tv_nsec() as f64 / 1e9
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
        if let Err(e) = super::peer::ensure(super::peer::Peer::PythonZeroconf) {
            panic!("{e}");
        }
        let mut cmd = Command::new(PYTHON);
        cmd.arg("-u").arg(script("zc_browse.py"));
        let b = Browser(Proc::spawn(lab, i, cmd));
        b.0.expect_output("\"ready\"", READY);
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
        eventually(timeout, &format!("the browser seeing {what}"), || {
            let events = self.events();
            events.iter().find(|e| pred(e)).cloned().ok_or_else(|| {
                let seen: Vec<String> = events.iter().map(|e| e.0.to_string()).collect();
                format!("it saw:\n{}", seen.join("\n"))
            })
        })
    }

    /// Whether any event satisfies `pred` so far.
    pub fn saw(&self, pred: impl Fn(&Event) -> bool) -> bool {
        self.events().iter().any(pred)
    }
}
