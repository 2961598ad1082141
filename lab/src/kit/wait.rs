//! **Deadline loops, never fixed sleeps**: a test waits for what it
//! expects, as long as a loaded 2-core box may need and no longer than the
//! thing takes, and says what it waited for when the deadline passes.

use crate::process::POLL;
use std::time::{Duration, Instant};

/// Call `check` until it returns `Ok`, or panic after `timeout` with `what`
/// and the last error.
pub fn eventually<T>(timeout: Duration, what: &str, check: impl FnMut() -> Result<T, String>) -> T {
    eventually_every(POLL, timeout, what, check)
}

/// [`eventually`], pausing `every` between checks instead of a few
/// milliseconds: for a check that runs a whole program (a browse), which
/// would otherwise load the box for as long as the wait lasts.
pub fn eventually_every<T>(
    every: Duration,
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
            Err(_) => std::thread::sleep(every),
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
