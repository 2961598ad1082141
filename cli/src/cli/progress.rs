//! **Progress on a terminal** — the CLI's [`Progress`] hook: a bar on stderr
//! for scans and SSH probes that take more than about a second, and nothing
//! at all anywhere else.
//!
//! ```ignore
//! let bars = Bars::new(quiet, verbose);
//! expand_config(&cfg, &overrides, &bars)   // the sources report, bars draw
//! ```
//!
//! [`Bars::new`] draws only when stderr is a terminal, `-q` and `-v` were
//! not given, `RUST_LOG` is unset (log lines and redrawn bars garble each
//! other), and neither `CI` nor `TERM=dumb` says nobody is watching. So
//! pipes, scripts and CI logs never see one. A source only reports steps;
//! whether a bar shows is decided here.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rlx_discover::{Progress, Task};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};
use std::time::Duration;

/// How long a task runs before its bar appears: a quick run prints no bar
/// (a bar that flashes for 100 ms is noise), a slow one shows it is alive.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Redraw interval, so a bar waiting on slow hosts still moves.
const TICK: Duration = Duration::from_millis(120);

/// Whether bars should be drawn for a run with these flags.
pub fn wanted(quiet: bool, verbose: u8) -> bool {
    let env_says_no = std::env::var_os("RUST_LOG").is_some()
        || std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
        || std::env::var("TERM").is_ok_and(|t| t == "dumb");
    !quiet && verbose == 0 && !env_says_no && std::io::stderr().is_terminal()
}

/// The bars of one run: where they draw, or nowhere.
pub struct Bars {
    screen: Option<MultiProgress>,
}

impl Bars {
    /// Bars for a run with these flags: drawn on stderr when [`wanted`]
    /// says so, otherwise never.
    pub fn new(quiet: bool, verbose: u8) -> Bars {
        Bars {
            screen: wanted(quiet, verbose)
                .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
        }
    }

    /// No bars at all.
    #[cfg(test)]
    fn off() -> Bars {
        Bars { screen: None }
    }
}

impl Progress for Bars {
    fn task(&self, len: u64, what: &str) -> Box<dyn Task> {
        Box::new(self.bar(len, what))
    }
}

/// A task's progress. Does nothing when bars are off; clears itself when
/// dropped.
pub struct Bar {
    inner: Option<Shown>,
}

struct Shown {
    bar: ProgressBar,
    /// Set when the task ends; checked before the bar is revealed so a bar
    /// never appears after its task is done.
    done: Arc<Mutex<bool>>,
    revealer: Thread,
}

impl Bars {
    /// A bar of `len` steps labelled `what`, shown on stderr if the task is
    /// still running after [`SHOW_AFTER`].
    pub fn bar(&self, len: u64, what: impl Into<String>) -> Bar {
        let Some(screen) = &self.screen else {
            return Bar { inner: None };
        };
        let style =
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})")
                .expect("a valid template")
                .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden())
            .with_style(style)
            .with_message(what.into());
        let done = Arc::new(Mutex::new(false));
        let (screen, b, d) = (screen.clone(), bar.clone(), done.clone());
        let revealer = thread::spawn(move || {
            thread::park_timeout(SHOW_AFTER);
            let done = d.lock().unwrap_or_else(|p| p.into_inner());
            if !*done {
                screen.add(b.clone());
                b.enable_steady_tick(TICK);
            }
        })
        .thread()
        .clone();
        Bar {
            inner: Some(Shown {
                bar,
                done,
                revealer,
            }),
        }
    }
}

impl Task for Bar {
    fn step(&self) {
        if let Some(s) = &self.inner {
            s.bar.inc(1);
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some(s) = &self.inner {
            *s.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            s.bar.finish_and_clear();
            s.revealer.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_off_unless_the_binary_turns_them_on() {
        // Bars that are off (a pipe, CI, -q) are no-ops.
        let b = Bars::off().bar(3, "x");
        assert!(b.inner.is_none());
        b.step();
    }

    #[test]
    fn quiet_verbose_and_pipes_all_mean_no_bar() {
        assert!(!wanted(true, 0));
        assert!(!wanted(false, 1));
        // Under `cargo test` stderr is captured, not a terminal.
        if !std::io::stderr().is_terminal() {
            assert!(!wanted(false, 0));
        }
    }
}
