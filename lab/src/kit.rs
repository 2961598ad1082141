//! **The test kit** — what the workspace's tests and the benchmark share on
//! top of the lab, in one place instead of a copy per harness: whether a
//! test may run here, deadline loops, processes that dump their output when
//! a test fails, where the built programs are, and the real peers started
//! in a lab host. Behind the `kit` feature: `rlx-discover demo` needs only
//! the lab.
//!
//! ```no_run
//! use rlx_lab::kit::{agent_bin, eventually, require_lab, Proc};
//! use std::process::Command;
//! use std::time::Duration;
//! # fn a_test() {
//! let Some(labs) = require_lab() else { return }; // SKIP without root
//! let lab = labs.hosts(2);
//! let agent = Proc::spawn(&lab, 0, Command::new(agent_bin()));
//! agent.expect_output("announcing", Duration::from_secs(10));
//! eventually(Duration::from_secs(5), "the agent's port open", || {
//!     Ok::<_, String>(()) // a check that returns Err(why) until it holds
//! });
//! # }
//! ```
//!
//! # The skip policy
//!
//! A test that needs a lab asks [`require_lab`]; one that needs a peer
//! program asks [`peer::require`] (or both at once, peers first:
//! [`require_lab_with`]), before it runs anything. On a machine that cannot (not root, or
//! the package missing) the test prints `SKIP <test>: <why and what to
//! install>` and passes, so `cargo test --workspace` typed on a fresh
//! machine is green and says what it did not check. Under `CI=true` both
//! panic instead: `.ci/run` runs as root and installs every peer, so a
//! skip there would hide a broken runner.
//!
//! # Layout
//! - `gate`: [`require_lab`] and [`Labs`], the lab half of the policy;
//!   [`require_lab_with`] asks for peers first, then the lab.
//! - [`peer`]: the peer programs, [`peer::require`], [`PYTHON`].
//! - `wait`: [`eventually`], [`eventually_every`], [`wait_until`].
//! - `proc`: [`Proc`], a lab process that dumps its output when a test fails.
//! - `run`: [`Run`], [`run_ok`]: a command run to completion.
//! - [`runtime`]: the RLX runtime's own loader judging what `expand` wrote.
//! - [`promise`]: what `watch` promises per event, the lab tests' bounds.
//! - [`bins`]: the workspace's programs, the peer scripts in `py/`, and a
//!   test's own executable re-run as a helper ([`rerun`]).
//! - [`netns`]: code of the test process run inside a lab host.
//! - [`discover`]: `rlx-discover expand` and a browse in a lab host, their
//!   JSON read back.
//! - [`avahi`], [`bind`], [`sshd`], [`zeroconf`]: the peers, started in a
//!   lab host with nothing of the machine's own configuration touched.

pub mod avahi;
pub mod bind;
pub mod bins;
pub mod discover;
mod gate;
pub mod netns;
pub mod peer;
mod proc;
pub mod promise;
mod run;
pub mod runtime;
pub mod sshd;
mod wait;
pub mod zeroconf;

pub use bins::{agent_bin, discover_bin, example_bin, rerun, script};
pub use gate::{require_lab, require_lab_with, test_name, Labs};
pub use peer::{Peer, PYTHON};
pub use proc::Proc;
pub use run::{run_ok, Run};
pub use wait::{eventually, eventually_every, wait_until};
