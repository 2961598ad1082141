//! **Whether a lab test may run here**: [`require_lab`] gives permission to
//! build labs as root, or says `SKIP` and lets the test pass on a machine
//! where it cannot (not root, no network namespaces), so that `cargo test`
//! typed anywhere is green and says what it did not check. Under `CI=true`
//! ([`in_ci`](super::peer::in_ci)) it panics instead: the runner is root, and a
//! skip there would hide a broken runner. The same policy as
//! [`peer::require`](super::peer::require) for a missing peer.

use crate::privilege::{lab_support, LabMode};
use crate::topology::{Lab, LabOptions, RoutedOptions};

/// Permission to build labs, given by [`require_lab`]; its methods panic
/// with the reason when a lab cannot be built after all (a test has nothing
/// better to do with the error).
#[derive(Debug, Clone, Copy)]
pub struct Labs(());

impl Labs {
    /// A lab with `n` IPv4 hosts on one switch.
    pub fn hosts(self, n: usize) -> Lab {
        self.with(LabOptions {
            hosts: n,
            ipv6: false,
        })
    }

    /// A lab with the given options.
    pub fn with(self, opts: LabOptions) -> Lab {
        Lab::new(opts.clone()).unwrap_or_else(|e| panic!("cannot build a lab {opts:?}: {e}"))
    }

    /// A lab with `n` IPv4 hosts on a chain of bridges of at most
    /// `per_bridge` hosts each ([`Lab::chained`]).
    pub fn chained(self, n: usize, per_bridge: usize) -> Lab {
        let opts = LabOptions {
            hosts: n,
            ipv6: false,
        };
        Lab::chained(opts, per_bridge).unwrap_or_else(|e| {
            panic!("cannot build a lab of {n} hosts, {per_bridge} a bridge: {e}")
        })
    }

    /// Subnets joined by a router ([`Lab::routed`]).
    pub fn routed(self, opts: RoutedOptions) -> Lab {
        Lab::routed(opts.clone())
            .unwrap_or_else(|e| panic!("cannot build a routed lab {opts:?}: {e}"))
    }

    /// A loopback-only namespace ([`Lab::loopback`]).
    pub fn loopback(self) -> Lab {
        Lab::loopback().unwrap_or_else(|e| panic!("cannot build a loopback lab: {e}"))
    }
}

/// `Some` when this process can build labs. Otherwise prints why the
/// calling test is skipped and returns `None`, or panics under `CI=true`.
///
/// Not root but allowed user namespaces is a skip too: the lab could be
/// built inside `unshare`, and the message says how to run the tests there.
pub fn require_lab() -> Option<Labs> {
    let why = match lab_support() {
        Ok(LabMode::Root) => return Some(Labs(())),
        Ok(LabMode::Unshare) => "not root; run the tests as root of a user namespace: \
                                 `unshare --user --map-root-user --net --mount cargo test`"
            .to_string(),
        Err(e) => e,
    };
    let test = test_name();
    assert!(
        !super::peer::in_ci(),
        "CI=true and {test} cannot build its private network: {why}"
    );
    super::peer::skip(&format!(
        "{test}: cannot build a private network here: {why}"
    ));
    None
}

/// [`require_lab`] for a test that also needs peer programs: the peers are
/// asked first ([`peer::require`](super::peer::require), under the running
/// test's name), so a machine without them says `SKIP` naming the package
/// before any lab is built, and never reaches an `exec` that would fail.
pub fn require_lab_with(peers: &[super::peer::Peer]) -> Option<Labs> {
    if !super::peer::require(&test_name(), peers) {
        return None;
    }
    require_lab()
}

/// The running test's name as the harness gives it (its thread's name:
/// `module::test` in a test binary of several modules), for skip messages.
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string()
}
