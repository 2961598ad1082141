//! **What `watch` promises, defined once** — for each event, the bound
//! every single one meets on a loaded 2-core CI box (what the lab tests
//! assert, one event at a time) and the p99 the benchmark's fault soak
//! holds on a quiet one (BENCHMARKS.md, "Faults"). docs/guide.md's table
//! ("What watch promises") lists the same figures, and
//! `tests/offline/docs.rs` holds the two equal, so a test can never be
//! looser than the documentation says, nor the documentation promise what
//! no test checks.
//!
//! Why two figures: one event on a box whose two cores also run the build,
//! the other tests and a dozen agents is scheduled late now and then; the
//! promise for *every* event must allow for that, and the benchmark's
//! percentile, over hundreds of events on a quiet machine, says what a user
//! normally sees.

use std::time::Duration;

/// One promise of `watch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promise {
    /// What happens, and the event that reports it (the guide's words).
    pub what: &'static str,
    /// Every such event within this, measured from the action, on a loaded
    /// 2-core box: the lab tests' bound.
    pub every: Duration,
    /// The benchmark's p99 on a quiet machine, when it measures one.
    pub p99: Option<Duration>,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An agent's first announcement -> `joined`.
pub const JOINED: Promise = Promise {
    what: "an agent announces itself -> `joined`",
    every: ms(3000),
    p99: None,
};

/// SIGTERM (the agent's goodbye) -> `left`.
pub const GOODBYE_LEFT: Promise = Promise {
    what: "an agent stops and says goodbye -> `left`",
    every: ms(2000),
    p99: None,
};

/// SIGKILL of a member followed over its liveness connection -> `left`.
pub const CRASH_LEFT: Promise = Promise {
    what: "an agent crashes (SIGKILL) -> `left`",
    every: ms(1000),
    p99: Some(ms(200)),
};

/// SIGKILL of a member seconds old, whose liveness connection may not be
/// up yet (checked by handshake until it is) -> `left`.
pub const YOUNG_CRASH_LEFT: Promise = Promise {
    what: "an agent crashes within seconds of joining -> `left`",
    every: ms(5000),
    p99: None,
};

/// The host vanishes (link down, power off) -> `left`.
pub const VANISHED_LEFT: Promise = Promise {
    what: "a host vanishes (link down, power off) -> `left`",
    every: ms(4000),
    p99: Some(ms(2500)),
};

/// SIGSTOP (a box loading a checkpoint, swapping) -> `suspect`.
pub const STALLED_SUSPECT: Promise = Promise {
    what: "an agent stalls (SIGSTOP) -> `suspect`",
    every: ms(3000),
    p99: Some(ms(1500)),
};

/// SIGCONT of a suspect -> `up`.
pub const RESUMED_UP: Promise = Promise {
    what: "a stalled agent resumes (SIGCONT) -> `up`",
    every: ms(1500),
    p99: None,
};

/// Every promise, in the guide's order.
pub const ALL: [Promise; 7] = [
    JOINED,
    GOODBYE_LEFT,
    CRASH_LEFT,
    YOUNG_CRASH_LEFT,
    VANISHED_LEFT,
    STALLED_SUSPECT,
    RESUMED_UP,
];

impl Promise {
    /// Asserts that one event came `took_ms` after its action, within
    /// what this promises for every event, and prints the figure beside
    /// the promise.
    pub fn held(&self, took_ms: u64) {
        eprintln!(
            "{}: {took_ms} ms (every event within {}; benchmark p99 {})",
            self.what,
            shown(self.every),
            self.p99.map_or_else(|| "not measured".to_string(), shown)
        );
        assert!(
            took_ms <= self.every.as_millis() as u64,
            "{}: {took_ms} ms, over the promised {} (docs/guide.md, \"What watch promises\")",
            self.what,
            shown(self.every)
        );
    }

    /// The guide's table row for this promise:
    /// `| what | every | p99 |`, durations as `1.5 s` or `200 ms`.
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {} |",
            self.what,
            shown(self.every),
            self.p99.map_or_else(|| "not measured".to_string(), shown)
        )
    }
}

/// `200 ms` under a second, else seconds (`1.5 s`, `2 s`).
fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}
