//! **Is the worker up?** — whether something listens on this box's RLX
//! worker port, the one every written `addr` names, checked locally and
//! cheaply: at each re-probe and for each handshake (at most once per
//! [`MAX_AGE`]), and reported in the caps (`worker_listening`) and TXT
//! ([`rlx_proto::txt::WORKER_KEY`]).
//!
//! On Linux the check asks the kernel for this namespace's listening TCP
//! sockets over netlink `sock_diag` ([`rlx_net::listening`], what `ss
//! -ltn` uses): no connection is made, so the worker never sees a probe, a
//! worker bound to one address only (not loopback) is found too, and it
//! costs tens of microseconds (`/proc/net/tcp` walks every namespace's TCP
//! tables: milliseconds). Elsewhere (macOS), or where `sock_diag` cannot be
//! used, it connects to the port on loopback (IPv4, then IPv6), which finds
//! workers that listen on every address or on loopback.
//!
//! What it tells is that *something* listens on the port, not that it is
//! the RLX worker: the agent cannot read another program's sockets under
//! its service's throwaway user.

use rlx_proto::caps::NodeCaps;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How old a check may be before a handshake checks again: a flood of
/// handshakes costs at most ten kernel queries a second, and a worker that
/// just started is reported within this long.
pub const MAX_AGE: Duration = Duration::from_millis(100);

/// Deadline of one loopback connect (where `sock_diag` is not used): loopback
/// answers in microseconds, or refuses at once.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// Whether something listens on TCP `port` on this box now.
pub fn listening_now(port: u16) -> bool {
    match rlx_net::listening::tcp_listening(port) {
        Ok(up) => up,
        Err(e) => {
            tracing::debug!("sock_diag unavailable ({e}); connecting to the worker port instead");
            [
                SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
            ]
            .iter()
            .any(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).is_ok())
        }
    }
}

/// The worker check the handshake server runs: the last answer and when,
/// so that a burst of handshakes asks the kernel once.
#[derive(Debug)]
pub struct WorkerCheck {
    port: u16,
    last: Mutex<Option<(Instant, bool)>>,
}

impl WorkerCheck {
    /// A check of worker port `port`.
    pub fn new(port: u16) -> Self {
        WorkerCheck {
            port,
            last: Mutex::new(None),
        }
    }

    /// Whether the worker listens, checked again when the last check is
    /// older than [`MAX_AGE`].
    pub fn listening(&self) -> bool {
        let mut last = self.last.lock().expect("worker check lock");
        match *last {
            Some((at, up)) if at.elapsed() < MAX_AGE => up,
            _ => {
                let up = listening_now(self.port);
                *last = Some((Instant::now(), up));
                up
            }
        }
    }

    /// The current caps with a fresh `worker_listening`; when it changed,
    /// the new caps are published too, so the announcement follows.
    pub fn refresh(&self, caps: &watch::Sender<Arc<NodeCaps>>) -> Arc<NodeCaps> {
        let up = self.listening();
        caps.send_if_modified(|c| {
            if c.worker_listening == Some(up) {
                return false;
            }
            tracing::info!(
                port = self.port,
                "the worker port is {} now",
                if up { "listening" } else { "not listening" }
            );
            Arc::make_mut(c).worker_listening = Some(up);
            true
        });
        caps.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback only: a real listener, then none.
    #[test]
    fn a_port_is_listening_while_bound_and_not_after() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(listening_now(port));
        let check = WorkerCheck::new(port);
        assert!(check.listening());
        drop(l);
        assert!(check.listening(), "cached for MAX_AGE");
        std::thread::sleep(MAX_AGE);
        assert!(!check.listening(), "checked again after MAX_AGE");
    }

    #[test]
    fn a_change_is_published_so_the_announcement_follows() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, mut rx) = watch::channel(Arc::new(NodeCaps {
            worker_port: Some(port),
            worker_listening: Some(false),
            ..Default::default()
        }));
        rx.mark_unchanged();
        let caps = WorkerCheck::new(port).refresh(&tx);
        assert_eq!(caps.worker_listening, Some(true));
        assert!(rx.has_changed().unwrap(), "published");
    }
}
