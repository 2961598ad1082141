//! **Is the worker up?** — whether something listens on this box's RLX
//! worker port, the one every written `addr` names, checked locally and
//! cheaply: at each re-probe and for each handshake (at most once per
//! [`MAX_AGE`]), and reported in the caps (`worker_listening`) and TXT
//! (`worker`).
//!
//! On Linux the check reads the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`) for a listening socket on the port:
//! no connection is made, so the worker never sees a probe, and a worker
//! bound to one address only (not loopback) is found too. Elsewhere (macOS),
//! or where `/proc` cannot be read, it connects to the port on loopback
//! (IPv4, then IPv6), which finds workers that listen on every address or
//! on loopback.
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
/// handshakes costs at most ten reads of `/proc` a second (each well under
/// a millisecond on a box with a few thousand sockets), and a worker that
/// just started is reported within this long.
pub const MAX_AGE: Duration = Duration::from_millis(100);

/// Deadline of one loopback connect (where `/proc` is not used): loopback
/// answers in microseconds, or refuses at once.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// The TCP state number of a listening socket in `/proc/net/tcp*`
/// (`TCP_LISTEN`, include/net/tcp_states.h).
const TCP_LISTEN: &str = "0A";

/// Whether something listens on TCP `port` on this box now.
pub fn listening_now(port: u16) -> bool {
    #[cfg(target_os = "linux")]
    if let Some(up) = listening_in_proc(port) {
        return up;
    }
    [
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
    ]
    .iter()
    .any(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).is_ok())
}

/// Reads `/proc/net/tcp` and `/proc/net/tcp6`; `None` when neither can be
/// read (a `/proc` without `net`).
#[cfg(target_os = "linux")]
fn listening_in_proc(port: u16) -> Option<bool> {
    let mut any_read = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            any_read = true;
            if listens_in(&text, port) {
                return Some(true);
            }
        }
    }
    any_read.then_some(false)
}

/// Whether a `/proc/net/tcp`-format table has a listening socket on `port`
/// (its lines: `sl local_address rem_address st ...`, addresses as
/// `HEXIP:HEXPORT`).
pub fn listens_in(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut f = line.split_whitespace();
        let (Some(_), Some(local), Some(_), Some(state)) = (f.next(), f.next(), f.next(), f.next())
        else {
            return false;
        };
        state == TCP_LISTEN
            && local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// The worker check the handshake server runs: the last answer and when,
/// so that a burst of handshakes reads `/proc` once.
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

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:238C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1823 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1235 1 0000000000000000 20 4 30 10 -1
";

    #[test]
    fn a_listening_socket_is_found_by_its_port_and_an_established_one_is_not() {
        assert!(listens_in(TABLE, 9100), "0x238C = 9100, state 0A");
        assert!(
            !listens_in(TABLE, 6179),
            "0x1823 is an established connection (01)"
        );
        assert!(!listens_in(TABLE, 80));
        assert!(!listens_in("", 9100));
    }

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
