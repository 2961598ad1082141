//! **Subnet scan** — concurrent TCP connects across a CIDR block, for
//! workers that are already listening.
//!
//! ```toml
//! [discover]
//! subnet = "10.0.0.0/24"
//! port   = 9100
//! ```
//!
//! The predecessor connected to one address at a time, so a /24 of silent
//! addresses cost 254 timeouts (76 s at 300 ms). Here every address of a
//! block is dialled at once, up to [`DEFAULT_SCAN_CONCURRENCY`] in flight, so
//! a silent /24 costs one `timeout_ms` and a /16 about sixteen. The scan only
//! learns that something listens; what it is (an agent with caps, or
//! something else) is settled by the handshake afterwards.

use crate::addr::NodeAddr;
use crate::config::Subnet;
use crate::progress::Progress;
use crate::sighting::{Attempt, Discovery, Evidence, Sighting, Source};
use futures::stream::{self, StreamExt};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// The default of `[discover] scan_concurrency`, defined with the section;
/// re-exported here for the `scan` command's flag.
pub use crate::config::DEFAULT_SCAN_CONCURRENCY;

/// File descriptors kept free for everything else the process does (the
/// runtime, logs, the handshakes that follow).
const SPARE_FDS: u64 = 64;

/// The host addresses of a block: network and broadcast excluded where the
/// prefix has them (/31 and /32 have none).
pub fn hosts(net: &Subnet) -> Vec<Ipv4Addr> {
    let n = net.0;
    if n.prefix_len() >= 31 {
        let base = u32::from(n.network());
        let count = 1u32 << (32 - n.prefix_len());
        return (0..count).map(|i| Ipv4Addr::from(base + i)).collect();
    }
    n.hosts().collect()
}

/// Raises the open-file soft limit so `want` sockets fit, and returns how
/// many connects may really be in flight (less than `want` if the hard limit
/// is lower, with a warning).
pub fn fit_concurrency(want: usize) -> usize {
    let need = want as u64 + SPARE_FDS;
    match rlimit::increase_nofile_limit(need) {
        Ok(got) if got >= need => want,
        Ok(got) => {
            let fit = got.saturating_sub(SPARE_FDS).max(1) as usize;
            tracing::warn!(
                wanted = want,
                limit = got,
                "the open-file limit allows only {fit} connects in flight; the scan will take longer \
                 (raise `ulimit -Hn` to scan faster)"
            );
            fit
        }
        Err(e) => {
            tracing::warn!("could not raise the open-file limit ({e}); scanning 256 at a time");
            want.min(256)
        }
    }
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct ScanResult {
    /// Addresses that accepted a connection, in address order.
    pub open: Vec<SocketAddr>,
    /// Addresses that refused (RST): a host is there, no worker.
    pub refused: usize,
    /// Addresses that did not answer within the timeout.
    pub silent: usize,
    /// Connects actually allowed in flight.
    pub concurrency: usize,
    /// Wall time of the scan.
    pub elapsed: Duration,
}

/// Dials `port` on every host of `net`, with at most `concurrency` connects
/// in flight and `timeout` per connect.
pub async fn scan(
    net: &Subnet,
    port: u16,
    timeout: Duration,
    concurrency: usize,
    progress: &dyn Progress,
) -> ScanResult {
    let t0 = Instant::now();
    let addrs = hosts(net);
    let concurrency = fit_concurrency(concurrency.min(addrs.len()).max(1));
    let task = &progress.task(addrs.len() as u64, &format!("scanning {net} port {port}"));
    let outcomes: Vec<(SocketAddr, Option<bool>)> = stream::iter(addrs)
        .map(|ip| async move {
            let sa = SocketAddr::new(IpAddr::V4(ip), port);
            let r = tokio::time::timeout(timeout, TcpStream::connect(sa)).await;
            task.step();
            // Some(true) open, Some(false) refused/unreachable, None silent.
            (sa, r.ok().map(|c| c.is_ok()))
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut res = ScanResult {
        concurrency,
        ..Default::default()
    };
    for (sa, o) in outcomes {
        match o {
            Some(true) => res.open.push(sa),
            Some(false) => res.refused += 1,
            None => res.silent += 1,
        }
    }
    res.open.sort();
    res.elapsed = t0.elapsed();
    res
}

/// Scans `[discover] subnet` and returns one sighting per listener (no caps
/// yet: the handshake stage fills them in).
pub async fn discover(
    net: &Subnet,
    port: u16,
    timeout: Duration,
    concurrency: usize,
    started: Instant,
    progress: &dyn Progress,
) -> Discovery {
    let r = scan(net, port, timeout, concurrency, progress).await;
    let found_ms = started.elapsed().as_millis() as u64;
    let mut d = Discovery::default();
    for sa in &r.open {
        d.sightings.push(Sighting {
            source: Source::Subnet,
            host: sa.ip().to_string(),
            addr: NodeAddr::from(*sa).to_string(),
            ip: Some(sa.ip()),
            port,
            ssh: None,
            caps: None,
            evidence: Evidence::TcpOnly,
            heard_on: None,
            found_ms,
        });
    }
    d.attempts.push(Attempt {
        source: Source::Subnet,
        what: format!(
            "{net} port {port}: {} addresses, {} in flight, {} ms timeout ({} refused, {} silent)",
            hosts(net).len(),
            r.concurrency,
            timeout.as_millis(),
            r.refused,
            r.silent
        ),
        elapsed_ms: r.elapsed.as_millis() as u64,
        answered: r.open.len(),
        stopped_early: None,
        late: None,
    });
    d
}

#[cfg(test)]
mod tests {
    //! The predecessor's CIDR tests, kept as behaviour tests.
    use super::*;

    fn net(s: &str) -> Result<Subnet, String> {
        s.parse()
    }

    #[test]
    fn a_24_expands_to_its_usable_hosts() {
        let h = hosts(&net("10.0.0.0/24").unwrap());
        assert_eq!(h.len(), 254, "network and broadcast excluded");
        assert_eq!(h[0], Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(h[253], Ipv4Addr::new(10, 0, 0, 254));
    }

    #[test]
    fn the_base_address_is_masked_to_its_network() {
        // 10.0.5.7/24 describes the 10.0.5.0 network, not a range from .7.
        let h = hosts(&net("10.0.5.7/24").unwrap());
        assert_eq!(h[0], Ipv4Addr::new(10, 0, 5, 1));
    }

    #[test]
    fn oversized_and_malformed_subnets_are_rejected() {
        assert!(net("10.0.0.0/8").is_err(), "/8 is 16M hosts");
        assert!(net("10.0.0.0/15").is_err(), "larger than the /16 limit");
        assert!(net("10.0.0.0").is_err(), "not CIDR");
        assert!(net("10.0.0.0/33").is_err());
        assert!(net("fe80::/64").is_err(), "IPv6 blocks are not scanned");
        assert_eq!(
            hosts(&net("10.1.0.0/16").unwrap()).len(),
            65_534,
            "a /16 is accepted"
        );
    }

    #[test]
    fn point_to_point_prefixes_keep_every_address() {
        assert_eq!(hosts(&net("10.0.0.4/31").unwrap()).len(), 2);
        assert_eq!(hosts(&net("10.0.0.4/32").unwrap()).len(), 1);
    }

    /// Loopback only: a listener and a closed port on 127.0.0.1 (no traffic
    /// leaves the machine).
    #[tokio::test]
    async fn a_listener_is_found_and_a_closed_port_is_counted_as_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let r = scan(
            &net("127.0.0.1/32").unwrap(),
            port,
            Duration::from_millis(300),
            16,
            &crate::progress::Silent,
        )
        .await;
        assert_eq!(r.open, vec![l.local_addr().unwrap()]);
        // A bound but not listening socket holds a port nobody else can take,
        // and answers connects with a reset.
        let closed = tokio::net::TcpSocket::new_v4().unwrap();
        closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = closed.local_addr().unwrap().port();
        let r = scan(
            &net("127.0.0.1/32").unwrap(),
            port,
            Duration::from_millis(300),
            16,
            &crate::progress::Silent,
        )
        .await;
        assert!(r.open.is_empty(), "{:?}", r.open);
        assert_eq!(r.refused, 1);
    }
}
