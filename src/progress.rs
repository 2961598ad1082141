//! **Progress, as a hook** — a source that takes a while (a subnet scan, a
//! round of SSH probes) reports its steps to the [`Progress`] it is given,
//! and the caller decides what, if anything, to show. The library draws
//! nothing: `rlx-discover`'s CLI turns steps into bars on a terminal, tests
//! and library callers pass [`Silent`].

/// Where a source reports progress.
///
/// ```
/// use rlx_discover::{Progress, Silent};
/// let task = Silent.task(3, "ssh probes");
/// task.step(); // one host done; dropping `task` ends it
/// ```
pub trait Progress: Send + Sync {
    /// A task of `len` steps, called `what` (`"ssh probes"`), starts now. The
    /// task ends when the returned handle is dropped.
    fn task(&self, len: u64, what: &str) -> Box<dyn Task>;
}

/// One running task: a step done at a time, ended by dropping it.
pub trait Task: Send + Sync {
    /// One step done.
    fn step(&self);
}

/// Reports nowhere: the hook for callers that show no progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn task(&self, _len: u64, _what: &str) -> Box<dyn Task> {
        Box::new(Silent)
    }
}

impl Task for Silent {
    fn step(&self) {}
}
