//! **What the report says of a node's worker** — the RLX worker on the
//! port the node's `addr` names is what the runtime dials, so a node whose
//! worker is not running, or cannot be reached from here, is written all
//! the same (the runtime may start it) and said.

use crate::escape::{escape_line, untrusted};
use crate::sighting::Sighting;
use rlx_proto::caps::NodeCaps;

/// The warnings for the node at `addr` (found as `host`, worker port
/// `port`), from what its agent said (`caps`) and what the sources saw of
/// that machine (`seen`): its worker not listening; or listening by its
/// agent's word while the worker port refused a scan from here.
pub(super) fn warnings(
    addr: &str,
    host: &str,
    port: u16,
    caps: &NodeCaps,
    seen: &[Sighting],
) -> Vec<String> {
    let who = untrusted(host);
    if let Some(held) = &caps.worker_held_by {
        return vec![format!(
            "{addr} ({who}): {port} is held by {}, not an RLX worker (its agent named it): the \
             runtime would dial that program; move the worker (worker_port on the agent, and \
             [discover] worker_port here) or move the other program off TCP {port}",
            escape_line(held)
        )];
    }
    match caps.worker_listening {
        Some(false) => vec![format!(
            "{addr} ({who}): nothing listens on its worker port (its agent just looked); the \
             node is written all the same, for the runtime to start its RLX worker (over ssh, \
             or start it there yourself)"
        )],
        Some(true)
            if seen
                .iter()
                .any(|s| s.addr == addr && s.worker_reachable == Some(false)) =>
        {
            vec![format!(
                "{addr} ({who}): its agent says its worker listens, but the worker port did not \
                 accept a connection from here: a firewall between this machine and the worker? \
                 (open TCP {port} on it; `rlx-discover doctor` there checks)"
            )]
        }
        _ => Vec::new(),
    }
}
