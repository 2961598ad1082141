//! **Code of the test process itself, run inside a lab namespace**: a
//! thread that has entered a host's network namespace (its sockets live
//! there, the rest of the process does not move), for a library call that
//! must talk on the lab's network or a check that a port accepts.

use crate::error::{LabError, Result};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long one connect of [`wait_tcp`] may take: a lab link answers in
/// well under a millisecond, a silent host never.
const CONNECT: Duration = Duration::from_millis(200);

/// Pause between rounds of [`wait_tcp`]: the programs waited for start in
/// hundreds of milliseconds, and a round costs a connect per address.
const ROUND: Duration = Duration::from_millis(50);

/// Runs `f` on a thread that has entered network namespace `ns` (a name
/// under `/run/netns`) and returns its result; a panic in `f` goes on in
/// the caller, as if `f` had run there.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let path = Path::new("/run/netns").join(ns);
    let file = std::fs::File::open(&path).map_err(|source| LabError::Io {
        what: "cannot open network namespace",
        path: path.clone(),
        source,
    })?;
    let entered = std::thread::spawn(move || {
        // Only this thread moves, and it exists only to run `f`.
        enter(&file).map(|()| f()).map_err(|errno| LabError::Io {
            what: "cannot enter network namespace",
            path,
            source: errno.into(),
        })
    })
    .join();
    entered.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Moves the calling thread into the network namespace `file` opens.
#[cfg(target_os = "linux")]
fn enter(file: &std::fs::File) -> nix::Result<()> {
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
}

/// Network namespaces are Linux's: the lab never makes one elsewhere, so
/// there is nothing to enter (the crate still builds for the platform lint).
#[cfg(not(target_os = "linux"))]
fn enter(_file: &std::fs::File) -> nix::Result<()> {
    Err(nix::errno::Errno::ENOSYS)
}

/// Waits (from inside namespace `ns`) until every address accepts a TCP
/// connection, or `timeout` passes; returns those that never did.
pub fn wait_tcp(ns: &str, addrs: Vec<SocketAddr>, timeout: Duration) -> Result<Vec<SocketAddr>> {
    in_netns(ns, move || {
        let deadline = Instant::now() + timeout;
        let mut left = addrs;
        while !left.is_empty() && Instant::now() < deadline {
            left.retain(|a| TcpStream::connect_timeout(a, CONNECT).is_err());
            if !left.is_empty() {
                std::thread::sleep(ROUND);
            }
        }
        left
    })
}
