//! **Heavy tests that time what they measure, one at a time**: each loads
//! the 2-core box on its own (twenty agents under 20% loss, link throughput
//! against iperf3, a flood of 10,000 instances) and asserts a bound that a
//! second test sharing the CPU would move: a throughput within 10% of
//! iperf3's, joins within their bound, every handshake done before its
//! timeout. Each was alone in its own binary before; here [`alone`] keeps
//! it so, while the other binaries run their tests side by side.
//!
//! - `ipv6_loss`: an IPv6-only LAN at 20% loss loses no machine at the
//!   handshake.
//! - `links_measure`: measured links against iperf3 at 100 Mbit/s and
//!   1 Gbit/s.
//! - `watch_flood`: `watch` under a flood of bogus instances.
//! - `responder_floods`: an agent and `watch` under floods of truncated
//!   queries and unsolicited records stay within a few MB.

mod ipv6_loss;
mod links_measure;
mod responder_floods;
mod watch_flood;

use std::sync::{Mutex, MutexGuard};

/// Held for the whole of each test of this binary, so that the harness's
/// threads run them one after another. A failed test poisons the lock; the
/// next one still runs.
fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
