//! **The checks `watch` runs off its event loop** — one kind per reason
//! to dial a machine, each carrying what its end is judged by.

use super::admission::Key;
use super::inputs::Check;
use crate::sighting::Discovery;
use tokio::time::Instant;

/// A check under way, off the event loop: one candidate (with what it
/// announced, and its refusal key), one member's health check, the check
/// of a member said goodbye for, or the quiet confirmation of an instance
/// that left on a goodbye.
pub(super) enum Job {
    Admit {
        label: String,
        announced: Option<String>,
        key: Key,
        /// When its handshake started: an answer from before its
        /// instance left is the stopped process's last word.
        started: Instant,
    },
    Health {
        label: String,
        generation: u64,
        started: Instant,
        /// The address dialled: a member that moved meanwhile is judged
        /// at its new one, not by a failure at the old.
        addr: String,
    },
    Goodbye {
        label: String,
        generation: u64,
        /// The address dialled (as for [`Job::Health`]).
        addr: String,
    },
    Confirm {
        label: String,
        /// Its revisit, rescheduled when nobody answers.
        revisit: Box<super::member::Revisit>,
    },
}

/// Runs one check: the future the event loop polls beside its other inputs.
pub(super) async fn run_job<C: Check>(check: C, job: Job, d: Discovery) -> (Job, Discovery) {
    let checked = check.check(d).await;
    (job, checked)
}
