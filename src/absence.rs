//! **Is a missing node gone?** — what `expand --prune` asks before it cuts
//! a node out of the file.
//!
//! A node that no source saw in one run is not yet a retired machine. An
//! agent that answers later than the browse waited (a Wi-Fi client in
//! power save, a box swapping), a lossy link, or a neighbour that forges a
//! name conflict so the agent renames or goes quiet for a few seconds
//! (docs/security.md, "Forged conflicts") all make a live node unseen for
//! one run. Pruning on that alone cut live nodes. So a node found by the
//! network (mDNS, DNS-SD, a subnet scan) is cut only when its absence is
//! confirmed here: its host answers at the node's address and nothing
//! listens on the agent port (a TCP reset). Anything else keeps it:
//!
//! | the agent port at the node's address | means                         | `--prune` |
//! |--------------------------------------|-------------------------------|-----------|
//! | refuses (reset)                      | the host is up, no agent      | cuts it   |
//! | accepts                              | an agent (or something) lives | keeps it  |
//! | silent                               | off, or cut off from us       | keeps it  |
//!
//! A powered-off machine and a partition look the same from here, so a
//! silent host is kept, and the report names the line to delete by hand
//! when the machine is really retired. A node found over SSH is not dialled:
//! its source either reached it (seen) or reported why not, and one dropped
//! from `ssh_hosts` is the user's own decision.

use crate::addr::NodeAddr;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// How long a dial of a missing node's agent port may take. Two seconds
/// outlast one lost SYN (Linux resends it after one second) and one lost
/// ARP exchange, so a live host under loss still answers within it.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// What dialling a missing node's agent port said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "absence", rename_all = "kebab-case")]
pub enum Absence {
    /// Its host refused the connection: up, and no agent listens. Gone.
    Gone {
        /// The address dialled.
        dialled: String,
    },
    /// Something accepted the connection: the agent lives, only unheard.
    Alive {
        /// The address dialled.
        dialled: String,
    },
    /// Nothing answered within [`CONFIRM_TIMEOUT`] (or the host is
    /// unreachable): powered off, or a partition.
    Silent {
        /// The address dialled.
        dialled: String,
        /// How it failed.
        why: String,
    },
    /// It could not be dialled at all (a name that does not resolve).
    Unchecked {
        /// Why not.
        why: String,
    },
}

impl Absence {
    /// Whether the absence is confirmed, so `--prune` may cut the node.
    pub fn confirmed(&self) -> bool {
        matches!(self, Absence::Gone { .. })
    }

    /// Why `--prune` keeps the node (`line` of its `[[node]]` header), when
    /// it does.
    pub fn kept_because(&self, line: usize) -> Option<String> {
        match self {
            Absence::Gone { .. } => None,
            Absence::Alive { dialled } => Some(format!(
                "something accepts connections on its agent port ({dialled}): it is alive and was \
                 only unheard this run (an answer later than the browse waited, loss, or a \
                 neighbour silencing its announcements), so it is not pruned"
            )),
            Absence::Silent { dialled, why } => Some(format!(
                "its host did not answer on {dialled} ({why}): a machine that is off and one cut \
                 off from this machine look the same, so --prune keeps it; if it is retired, \
                 delete its [[node]] block (line {line}) by hand"
            )),
            Absence::Unchecked { why } => Some(format!(
                "its absence could not be confirmed ({why}), so it is not pruned"
            )),
        }
    }
}

/// The confirmed (or not) absences of a run, by the missing node's `addr`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Absences(pub BTreeMap<String, Absence>);

impl Absences {
    /// What was learnt about the node at `addr`, if it was dialled.
    pub fn get(&self, addr: &str) -> Option<&Absence> {
        self.0.get(addr)
    }
}

/// Dials `agent_port` at every address of `addrs` (missing nodes' `addr`,
/// from [`crate::write::prune_candidates`]), all at once, each within
/// [`CONFIRM_TIMEOUT`].
pub async fn confirm(addrs: Vec<String>, agent_port: u16) -> Absences {
    let dials = addrs.into_iter().map(|a| async move {
        let absence = dial(&a, agent_port).await;
        (a, absence)
    });
    Absences(futures::future::join_all(dials).await.into_iter().collect())
}

/// Dials `port` on the host of node address `addr`. One connect to an
/// address the user's own file names, as the handshake and the runtime
/// make: not a scan, so the network-namespace guard does not apply.
async fn dial(addr: &str, port: u16) -> Absence {
    let host = NodeAddr::split(addr).0;
    let target: SocketAddr = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => match tokio::net::lookup_host((host, port)).await {
            Ok(mut it) => match it.next() {
                Some(sa) => sa,
                None => {
                    return Absence::Unchecked {
                        why: format!("{host} resolves to no address"),
                    }
                }
            },
            Err(e) => {
                return Absence::Unchecked {
                    why: format!("{host} does not resolve: {e}"),
                }
            }
        },
    };
    let dialled = target.to_string();
    match tokio::time::timeout(CONFIRM_TIMEOUT, tokio::net::TcpStream::connect(target)).await {
        Ok(Ok(_)) => Absence::Alive { dialled },
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Absence::Gone { dialled }
        }
        Ok(Err(e)) => Absence::Silent {
            dialled,
            why: e.to_string(),
        },
        Err(_) => Absence::Silent {
            dialled,
            why: format!("no answer within {} ms", CONFIRM_TIMEOUT.as_millis()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_nothing_listens_on_confirms_the_absence() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let a = dial("127.0.0.1:9100", port).await;
        assert!(a.confirmed(), "{a:?}");
    }

    #[tokio::test]
    async fn a_port_something_listens_on_keeps_the_node() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let a = dial("127.0.0.1:9100", port).await;
        assert!(matches!(a, Absence::Alive { .. }), "{a:?}");
        assert!(a.kept_because(3).unwrap().contains("alive"));
    }

    #[test]
    fn a_silent_host_is_kept_with_the_line_to_delete_by_hand() {
        let a = Absence::Silent {
            dialled: "10.0.0.9:6184".into(),
            why: "no answer".into(),
        };
        assert!(!a.confirmed());
        let why = a.kept_because(12).unwrap();
        assert!(
            why.contains("line 12") && why.contains("10.0.0.9:6184"),
            "{why}"
        );
    }
}
