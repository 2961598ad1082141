//! **A stand-in RLX worker** — a process that holds the worker port and
//! greets every connection, as the runtime's worker does, so that the lab,
//! the demo and the tests can check that every written `addr` reaches a
//! worker and not the agent beside it.
//!
//! ```no_run
//! // In a lab host: `rlx-discover lab-worker --port 9100 --name gpu-box`
//! rlx_lab::worker::serve(9100, "gpu-box").unwrap();
//! ```

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::time::Duration;

/// The first bytes of the stand-in's greeting: `RLX-WORKER stand-in <name>`,
/// one line. Nothing any scan rule names (so a scan writes it, warning that
/// nothing vouched for it), and easy for a test to recognise.
pub const GREETING: &str = "RLX-WORKER stand-in";

/// How long a connection is kept open for its client to hang up.
const HOLD: Duration = Duration::from_secs(10);

/// The greeting line of a stand-in named `name`.
pub fn greeting(name: &str) -> String {
    format!("{GREETING} {name}\n")
}

/// Binds `port` (dual-stack `[::]` where the host has IPv6, else IPv4) and
/// greets every connection with [`greeting`] until the process is killed.
/// Prints `listening on PORT` to stderr once bound, for a test to wait on.
pub fn serve(port: u16, name: &str) -> std::io::Result<()> {
    let l = TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))))?;
    eprintln!(
        "stand-in worker {name}: listening on {}",
        l.local_addr()?.port()
    );
    let hello = greeting(name);
    for conn in l.incoming() {
        let Ok(mut s) = conn else { continue };
        let hello = hello.clone();
        std::thread::spawn(move || {
            let _ = s.write_all(hello.as_bytes());
            let _ = s.set_read_timeout(Some(HOLD));
            let mut sink = [0u8; 1024];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        });
    }
    Ok(())
}
