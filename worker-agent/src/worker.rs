//! **Is the worker up?** — whether the RLX worker listens on this box's
//! worker port, the one every written `addr` names, checked locally and
//! cheaply: at each re-probe and for each handshake (at most once per
//! [`MAX_AGE`]), and reported in the caps (`worker_listening`,
//! `worker_held_by`) and TXT ([`rlx_proto::txt::WORKER_KEY`],
//! [`rlx_proto::txt::WORKER_HELD_KEY`]).
//!
//! ```text
//! listeners   the kernel's listening TCP sockets on the port (rlx_net::listening)
//! identity    connect, name what answers (rlx_net::identify, the subnet scan's rules)
//! result      free | the worker (nothing named it) | held by `node_exporter (HTTP)`
//! ```
//!
//! On Linux the first step asks the kernel for this namespace's listening
//! TCP sockets over netlink `sock_diag` ([`rlx_net::listening`], what `ss
//! -ltn` uses): a worker bound to one address only (not loopback) is found
//! too, and it costs tens of microseconds. Elsewhere (macOS), or where
//! `sock_diag` cannot be used, it connects to the port on loopback (IPv4,
//! then IPv6).
//!
//! "Something listens" is not "the worker listens": port 9100 is also
//! node_exporter's default, and JetDirect's. So a listener is named by the
//! rules the subnet scan uses on boxes no agent vouched for
//! ([`rlx_net::identify`]): one that answers as HTTP, SSH, TLS, a printer
//! ... is reported as holding the port (`9100 is held by node_exporter
//! (HTTP), not an RLX worker`), and the worker as not listening. A silent
//! listener, or one that greets in a way no rule knows, is what an RLX
//! worker looks like and is taken for it. Naming costs a connection and up
//! to [`IDENTIFY_BUDGET`], so on Linux its answer is kept while the
//! listening sockets on the port stay the same (a new process there has a
//! new socket): an idle agent connects to its worker once per worker
//! start, not once per handshake. Without `sock_diag` it is kept for
//! [`IDENTIFY_MAX_AGE`].

use rlx_net::identify::{identify_at, Identity};
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

/// How long naming a listener may take: the scan's banner wait (100 ms),
/// then its answer to the PJL query. A silent RLX worker uses all of it,
/// once per start of the worker (see the module's doc); anything that
/// answers is named in a few milliseconds.
pub const IDENTIFY_BUDGET: Duration = Duration::from_millis(300);

/// How long a name is kept where the listening sockets cannot be read
/// (macOS): long enough that handshakes do not poke the worker, short
/// enough that swapping the program on the port is seen within a minute.
pub const IDENTIFY_MAX_AGE: Duration = Duration::from_secs(60);

/// What holds the worker port now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerPort {
    /// Nothing listens on it.
    Free,
    /// Something listens that no rule names: the RLX worker, as far as
    /// can be told from outside it.
    Worker,
    /// Another program: `node_exporter (HTTP)`, `SSH (SSH-2.0-...)`.
    HeldBy(String),
}

impl WorkerPort {
    /// Whether the RLX worker listens (the caps' `worker_listening`).
    pub fn worker_listening(&self) -> bool {
        *self == WorkerPort::Worker
    }

    /// What holds the port when it is not the worker (the caps'
    /// `worker_held_by`).
    pub fn held_by(&self) -> Option<String> {
        match self {
            WorkerPort::HeldBy(h) => Some(h.clone()),
            _ => None,
        }
    }

    /// What `identify` made of a listener on the port; `None`: the
    /// connection failed, so it cannot be named and is taken for the
    /// worker, as before naming existed.
    pub fn from_identity(id: Option<&Identity>) -> WorkerPort {
        match id.and_then(Identity::held_by) {
            Some(h) => WorkerPort::HeldBy(h),
            None => WorkerPort::Worker,
        }
    }
}

/// The last name, and what it is keyed on: the port and its listening
/// sockets (Linux), or when it was taken (without `sock_diag`).
#[derive(Debug)]
struct Named {
    port: u16,
    listeners: Option<Vec<SocketAddr>>,
    at: Instant,
    state: WorkerPort,
}

static LAST: Mutex<Option<Named>> = Mutex::new(None);

/// What holds TCP `port` on this box now, named again only when its
/// listening sockets changed (see the module's doc).
pub fn state_now(port: u16) -> WorkerPort {
    let listeners = match rlx_net::listening::tcp_listeners() {
        Ok(all) => {
            let mut mine: Vec<SocketAddr> = all.into_iter().filter(|a| a.port() == port).collect();
            if mine.is_empty() {
                return WorkerPort::Free;
            }
            mine.sort();
            mine.dedup();
            Some(mine)
        }
        Err(e) => {
            tracing::debug!("sock_diag unavailable ({e}); connecting to the worker port instead");
            if !loopback_listening(port) {
                return WorkerPort::Free;
            }
            None
        }
    };
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(named) = last.as_ref().filter(|n| {
        n.port == port
            && n.listeners == listeners
            && (listeners.is_some() || n.at.elapsed() < IDENTIFY_MAX_AGE)
    }) {
        return named.state.clone();
    }
    let target = match &listeners {
        Some(ls) => dial_target(ls),
        None => (Ipv4Addr::LOCALHOST, port).into(),
    };
    let id = identify_blocking(target, IDENTIFY_BUDGET);
    let state = WorkerPort::from_identity(id.as_ref());
    tracing::debug!(port, identity = ?id, ?state, "named the listener on the worker port");
    *last = Some(Named {
        port,
        listeners,
        at: Instant::now(),
        state: state.clone(),
    });
    state
}

/// Whether something listens on TCP `port` on this box now, by the
/// kernel's list or, without it, a loopback connection.
pub fn listening_now(port: u16) -> bool {
    match rlx_net::listening::tcp_listening(port) {
        Ok(up) => up,
        Err(_) => loopback_listening(port),
    }
}

fn loopback_listening(port: u16) -> bool {
    [
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
    ]
    .iter()
    .any(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).is_ok())
}

/// The address to name a port's listeners at: one bound to every address
/// (through loopback) before one bound to a single address, IPv4 first.
fn dial_target(listeners: &[SocketAddr]) -> SocketAddr {
    let mut bound = listeners.to_vec();
    bound.sort_by_key(|a| (a.is_ipv6(), !a.ip().is_unspecified()));
    crate::sshd::dial_address(bound[0])
}

/// [`identify_at`] from synchronous code (the caps, the accept loop):
/// on a thread of its own with a one-thread runtime, so it works whether
/// or not the caller is inside the agent's runtime.
pub fn identify_blocking(addr: SocketAddr, budget: Duration) -> Option<Identity> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(identify_at(addr, tokio::time::Instant::now() + budget))
        })
        .join()
        .ok()
        .flatten()
    })
}

/// The worker check the handshake server runs: the last answer and when,
/// so that a burst of handshakes asks the kernel once.
#[derive(Debug)]
pub struct WorkerCheck {
    port: u16,
    last: Mutex<Option<(Instant, WorkerPort)>>,
}

impl WorkerCheck {
    /// A check of worker port `port`.
    pub fn new(port: u16) -> Self {
        WorkerCheck {
            port,
            last: Mutex::new(None),
        }
    }

    /// What holds the worker port, checked again when the last check is
    /// older than [`MAX_AGE`].
    pub fn state(&self) -> WorkerPort {
        let mut last = self.last.lock().expect("worker check lock");
        match &*last {
            Some((at, state)) if at.elapsed() < MAX_AGE => state.clone(),
            _ => {
                let state = state_now(self.port);
                *last = Some((Instant::now(), state.clone()));
                state
            }
        }
    }

    /// Whether the RLX worker listens ([`WorkerCheck::state`]).
    pub fn listening(&self) -> bool {
        self.state().worker_listening()
    }

    /// The current caps with a fresh `worker_listening`; when it changed,
    /// the new caps are published too, so the announcement follows.
    pub fn refresh(&self, caps: &watch::Sender<Arc<NodeCaps>>) -> Arc<NodeCaps> {
        let state = self.state();
        let (up, held) = (state.worker_listening(), state.held_by());
        caps.send_if_modified(|c| {
            if c.worker_listening == Some(up) && c.worker_held_by == held {
                return false;
            }
            match &held {
                Some(h) => tracing::warn!(
                    port = self.port,
                    "{} is held by {h}, not an RLX worker",
                    self.port
                ),
                None => tracing::info!(
                    port = self.port,
                    "the worker port is {} now",
                    if up { "listening" } else { "not listening" }
                ),
            }
            let c = Arc::make_mut(c);
            c.worker_listening = Some(up);
            c.worker_held_by = held;
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

    /// A stand-in node_exporter: answers every request with its landing
    /// page (Go's net/http sends no `Server` header), and counts
    /// connections.
    fn node_exporter() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let conns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = conns.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf);
                    let page = "<html><head><title>Node Exporter</title></head><body>\
                                <a href=\"/metrics\">Metrics</a></body></html>";
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{page}",
                        page.len()
                    );
                });
            }
        });
        (port, conns)
    }

    /// Issue 38, item 3: node_exporter on the worker port was taken for
    /// the RLX worker (`worker_listening`), so coordinators showed the
    /// worker up. It is named, and the worker reported not listening.
    #[test]
    fn node_exporter_on_the_worker_port_holds_it_and_is_not_the_worker() {
        let (port, _) = node_exporter();
        let state = state_now(port);
        assert_eq!(
            state,
            WorkerPort::HeldBy("node_exporter (HTTP)".into()),
            "an HTTP landing page titled Node Exporter is node_exporter"
        );
        let (tx, _rx) = watch::channel(Arc::new(NodeCaps {
            worker_port: Some(port),
            ..Default::default()
        }));
        let caps = WorkerCheck::new(port).refresh(&tx);
        assert_eq!(caps.worker_listening, Some(false), "not the worker");
        assert_eq!(caps.worker_held_by.as_deref(), Some("node_exporter (HTTP)"));
    }

    /// Naming connects to the listener, so it is done once per listening
    /// socket, not at every handshake or re-probe.
    #[test]
    fn a_listener_is_named_once_while_its_socket_stays() {
        let (port, conns) = node_exporter();
        let first = state_now(port);
        let after_first = conns.load(std::sync::atomic::Ordering::SeqCst);
        assert!(after_first >= 1, "named by connecting");
        for _ in 0..3 {
            assert_eq!(state_now(port), first);
        }
        if rlx_net::listening::tcp_listeners().is_ok() {
            assert_eq!(
                conns.load(std::sync::atomic::Ordering::SeqCst),
                after_first,
                "the same socket is not connected to again"
            );
        }
    }

    /// A silent listener (how the RLX worker looks from outside) is the
    /// worker; a free port is free.
    #[test]
    fn a_silent_listener_is_the_worker_and_a_free_port_is_free() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(state_now(port), WorkerPort::Worker);
        drop(l);
        assert_eq!(state_now(port), WorkerPort::Free);
    }
}
