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
use crate::sighting::{Attempt, Discovery, Evidence, Problem, Sighting, Source};
use crate::sources::identify::{identify, Identity};
use futures::stream::{self, StreamExt};
use rlx_net::netguard::GuardError;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// File descriptors kept free for everything else the process does (the
/// runtime, logs, the handshakes that follow).
const SPARE_FDS: u64 = 64;

/// The host addresses of a block: network and broadcast excluded where the
/// prefix has them (/31 and /32 have none).
pub(crate) fn hosts(net: &Subnet) -> Vec<Ipv4Addr> {
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
pub(crate) fn fit_concurrency(want: usize) -> usize {
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

/// The two ports a scan tries on every address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// The RLX worker's (`[discover] port`): what a written `addr` names.
    pub worker: u16,
    /// The agent's (`[discover] agent_port`): the handshake, and the caps.
    pub agent: u16,
}

/// What a scan dials: `[discover] subnet`, its two ports, the per-connect
/// timeout and how many addresses are in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanOptions {
    /// The block, at most a /16 (checked when it is parsed).
    pub net: Subnet,
    /// The ports tried on every address.
    pub ports: Ports,
    /// Per connect.
    pub timeout: Duration,
    /// Most addresses in flight (two sockets each), fitted to the open-file
    /// limit when the scan starts.
    pub concurrency: usize,
}

impl ScanOptions {
    /// The scan `d` configures: `None` without a `subnet`.
    pub fn from_section(d: &crate::config::DiscoverSection) -> Option<ScanOptions> {
        Some(ScanOptions {
            net: d.subnet.clone()?,
            ports: Ports {
                worker: d.port,
                agent: d.agent_port,
            },
            timeout: Duration::from_millis(d.timeout_ms),
            concurrency: d.scan_concurrency,
        })
    }
}

/// One address where something listened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listener {
    /// An agent accepted on its port (the handshake that follows tells
    /// what the box has); `worker_open` says whether the worker port also
    /// accepted, from here.
    Agent {
        /// The worker's endpoint (what the node's `addr` names).
        worker: SocketAddr,
        /// Whether the worker port accepted a connection too.
        worker_open: bool,
    },
    /// No agent, but the worker port accepted: what the scan made of
    /// the listener there.
    Bare {
        /// The worker port's endpoint.
        worker: SocketAddr,
        /// What it is, when it said.
        identity: Identity,
    },
}

impl Listener {
    /// The worker endpoint at this address.
    pub fn worker(&self) -> SocketAddr {
        match self {
            Listener::Agent { worker, .. } | Listener::Bare { worker, .. } => *worker,
        }
    }
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct ScanResult {
    /// Addresses where something listened, in address order.
    pub found: Vec<Listener>,
    /// Addresses where both ports refused (RST): a host is there, no worker.
    pub refused: usize,
    /// Addresses that did not answer on either port within the timeout.
    pub silent: usize,
    /// Addresses actually allowed in flight (each takes two connects, so
    /// twice as many sockets are open).
    pub concurrency: usize,
    /// Wall time of the scan.
    pub elapsed: Duration,
}

impl ScanResult {
    /// The worker endpoints of every address where something listened.
    pub fn open(&self) -> Vec<SocketAddr> {
        self.found.iter().map(Listener::worker).collect()
    }
}

/// How one connect ended: accepted, refused (a host is there, nothing
/// listens) or silent (nothing answered within the timeout).
enum Dial {
    Open(TcpStream),
    Refused,
    Silent,
}

async fn dial(sa: SocketAddr, timeout: Duration) -> Dial {
    match tokio::time::timeout(timeout, TcpStream::connect(sa)).await {
        Ok(Ok(s)) => Dial::Open(s),
        Ok(Err(_)) => Dial::Refused,
        Err(_) => Dial::Silent,
    }
}

/// Outcome at one address: a listener, or how it did not answer.
enum Probed {
    Found(Listener),
    Refused,
    Silent,
}

/// Tries both ports of `ip` at once, each within `timeout`; a listener on
/// the worker port with no agent beside it is then named ([`identify`]),
/// within one more `timeout` from its connect.
async fn probe(ip: IpAddr, ports: Ports, timeout: Duration) -> Probed {
    let worker = SocketAddr::new(ip, ports.worker);
    let (a, w) = tokio::join!(
        dial(SocketAddr::new(ip, ports.agent), timeout),
        dial(worker, timeout)
    );
    match (a, w) {
        (Dial::Open(_), w) => Probed::Found(Listener::Agent {
            worker,
            worker_open: matches!(w, Dial::Open(_)),
        }),
        (_, Dial::Open(stream)) => {
            let identity = identify(worker, stream, tokio::time::Instant::now() + timeout).await;
            Probed::Found(Listener::Bare { worker, identity })
        }
        (Dial::Refused, _) | (_, Dial::Refused) => Probed::Refused,
        _ => Probed::Silent,
    }
}

/// Dials both ports on every host of the block, with at most
/// `concurrency` addresses in flight and `timeout` per connect.
///
/// The network-namespace guard ([`rlx_net::netguard`]) is checked here,
/// where the sockets are opened, so that no caller of the library can
/// scan a shared network by forgetting it: with `RLX_NETNS_GUARD=1` a
/// scan from the machine's initial namespace is refused, unless the
/// block is loopback's (127.0.0.0/8 never leaves the host).
pub async fn scan(opts: &ScanOptions, progress: &dyn Progress) -> Result<ScanResult, GuardError> {
    if !opts.net.0.network().is_loopback() {
        rlx_net::netguard::ensure_private_netns("a subnet scan")?;
    }
    let ScanOptions {
        net,
        ports,
        timeout,
        concurrency,
    } = opts;
    let (ports, timeout, concurrency) = (*ports, *timeout, *concurrency);
    let t0 = Instant::now();
    let addrs = hosts(net);
    // Two sockets per address in flight.
    let concurrency = fit_concurrency(2 * concurrency.min(addrs.len()).max(1)).div_ceil(2);
    let task = &progress.task(
        addrs.len() as u64,
        &format!("scanning {net} ports {} and {}", ports.worker, ports.agent),
    );
    let outcomes: Vec<Probed> = stream::iter(addrs)
        .map(|ip| async move {
            let r = probe(IpAddr::V4(ip), ports, timeout).await;
            task.step();
            r
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut res = ScanResult {
        concurrency,
        ..Default::default()
    };
    for o in outcomes {
        match o {
            Probed::Found(l) => res.found.push(l),
            Probed::Refused => res.refused += 1,
            Probed::Silent => res.silent += 1,
        }
    }
    res.found.sort_by_key(Listener::worker);
    res.elapsed = t0.elapsed();
    Ok(res)
}

/// Scans `[discover] subnet` and returns one sighting per agent or
/// unnamed listener on the worker port (no caps yet: the handshake stage
/// fills them in); a listener named as another service (node_exporter, a
/// printer, sshd) is a reported problem, never a node.
pub(crate) async fn discover(
    opts: &ScanOptions,
    started: Instant,
    progress: &dyn Progress,
) -> Discovery {
    let r = match scan(opts, progress).await {
        Ok(r) => r,
        Err(e) => {
            let mut d = Discovery::default();
            let subnet = opts.net.to_string();
            d.problems.push(Problem::new(
                Source::Subnet,
                subnet,
                format!("not scanned: {e}"),
            ));
            return d;
        }
    };
    let (net, ports, timeout) = (&opts.net, opts.ports, opts.timeout);
    let found_ms = started.elapsed().as_millis() as u64;
    let mut d = Discovery::default();
    let mut named = 0;
    for l in &r.found {
        let sa = l.worker();
        let (agent_port, worker_reachable) = match l {
            Listener::Agent { worker_open, .. } => (Some(ports.agent), Some(*worker_open)),
            Listener::Bare {
                identity: identity @ Identity::Other { .. },
                ..
            } => {
                named += 1;
                d.problems.push(
                    Problem::stranger(
                        Source::Subnet,
                        sa.ip().to_string(),
                        format!(
                            "{sa} is {}, not an RLX worker, and no rlx-agent answered on port {}: \
                         not written (if an RLX worker should be here, it is on another port: \
                         set [discover] port)",
                            identity.describe(),
                            ports.agent
                        ),
                    )
                    .claiming(Some(NodeAddr::from(sa).to_string()), None),
                );
                continue;
            }
            Listener::Bare { .. } => (None, Some(true)),
        };
        d.sightings.push(Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source: Source::Subnet,
            host: sa.ip().to_string(),
            addr: NodeAddr::from(sa).to_string(),
            ip: Some(sa.ip()),
            port: ports.worker,
            agent_port,
            worker_reachable,
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
            "{net} port {} (agents on {}): {} addresses, {} in flight, {} ms timeout ({} refused, \
             {} silent, {named} other service(s))",
            ports.worker,
            ports.agent,
            hosts(net).len(),
            r.concurrency,
            timeout.as_millis(),
            r.refused,
            r.silent
        ),
        elapsed_ms: r.elapsed.as_millis() as u64,
        answered: r.found.len() - named,
        stopped_early: None,
        late: None,
    });
    d
}

#[cfg(test)]
mod tests {
    //! The predecessor's CIDR tests, kept as behaviour tests.
    use super::*;

    fn net(s: &str) -> Result<Subnet, crate::config::ValueError> {
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

    /// A port bound but not listening: it holds a port nobody else can
    /// take, and answers connects with a reset.
    fn closed_port() -> (tokio::net::TcpSocket, u16) {
        let closed = tokio::net::TcpSocket::new_v4().unwrap();
        closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = closed.local_addr().unwrap().port();
        (closed, port)
    }

    fn lo_opts(ports: Ports) -> ScanOptions {
        ScanOptions {
            net: net("127.0.0.1/32").unwrap(),
            ports,
            timeout: Duration::from_millis(300),
            concurrency: 16,
        }
    }

    async fn scan_lo(ports: Ports) -> ScanResult {
        scan(&lo_opts(ports), &crate::progress::Silent)
            .await
            .expect("loopback is never refused")
    }

    /// The library's own scan checks the namespace guard, so a caller that
    /// forgot it cannot scan a shared network: a non-loopback block is
    /// refused from where the guard refuses (checked against the guard's
    /// own verdict here, so the test means the same inside a namespace).
    #[tokio::test]
    async fn the_librarys_scan_refuses_a_lan_block_wherever_the_guard_refuses() {
        let opts = ScanOptions {
            net: net("192.0.2.0/30").unwrap(),
            ..lo_opts(Ports {
                worker: 9100,
                agent: 6184,
            })
        };
        // Where the guard allows it, the block is not scanned at all: this
        // test must never send a SYN off the machine.
        match rlx_net::netguard::ensure_private_netns("a test") {
            Err(_) => {
                let got = scan(&opts, &crate::progress::Silent).await;
                let e = got.expect_err("refused where the guard refuses");
                assert!(e.to_string().contains("a subnet scan"), "{e}");
            }
            Ok(()) => eprintln!(
                "SKIP the_librarys_scan_refuses_a_lan_block_wherever_the_guard_refuses: the guard \
                 allows scanning here (RLX_NETNS_GUARD unset, or a private namespace)"
            ),
        }
        // Loopback is never refused.
        assert!(scan(&lo_opts(opts.ports), &crate::progress::Silent)
            .await
            .is_ok());
    }

    /// Loopback only (no traffic leaves the machine): an agent beside a
    /// worker, an agent whose worker is down, a bare listener, nothing.
    #[tokio::test]
    async fn a_scan_tries_both_ports_and_tells_an_agent_from_a_bare_listener() {
        let agent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let worker = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (_c, closed) = closed_port();
        let (a, w) = (agent.local_addr().unwrap(), worker.local_addr().unwrap());
        let r = scan_lo(Ports {
            worker: w.port(),
            agent: a.port(),
        })
        .await;
        assert_eq!(
            r.found,
            vec![Listener::Agent {
                worker: w,
                worker_open: true
            }]
        );
        let r = scan_lo(Ports {
            worker: closed,
            agent: a.port(),
        })
        .await;
        assert_eq!(
            r.found,
            vec![Listener::Agent {
                worker: "127.0.0.1:0"
                    .parse::<SocketAddr>()
                    .map(|mut x| {
                        x.set_port(closed);
                        x
                    })
                    .unwrap(),
                worker_open: false
            }],
            "an agent whose worker is not running is still found"
        );
        let r = scan_lo(Ports {
            worker: w.port(),
            agent: closed,
        })
        .await;
        assert_eq!(
            r.found,
            vec![Listener::Bare {
                worker: w,
                identity: Identity::Unknown { greeting: None }
            }]
        );
        let (_c2, closed2) = closed_port();
        let r = scan_lo(Ports {
            worker: closed2,
            agent: closed,
        })
        .await;
        assert!(r.found.is_empty(), "{:?}", r.found);
        assert_eq!(r.refused, 1);
    }

    /// A named service on the worker port is reported as what it is, and
    /// never becomes a sighting.
    #[tokio::test]
    async fn an_sshd_on_the_worker_port_is_reported_and_not_a_sighting() {
        use tokio::io::AsyncWriteExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let w = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2p1\r\n").await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        let (_c, closed) = closed_port();
        let opts = lo_opts(Ports {
            worker: w.port(),
            agent: closed,
        });
        let d = discover(&opts, Instant::now(), &crate::progress::Silent).await;
        assert!(d.sightings.is_empty(), "{:?}", d.sightings);
        assert_eq!(d.problems.len(), 1);
        let why = &d.problems[0].reason;
        assert!(
            why.contains("is SSH (SSH-2.0-OpenSSH_9.2p1), not an RLX worker"),
            "{why}"
        );
        assert_eq!(d.problems[0].concern, crate::sighting::Concern::Stranger);
        assert_eq!(d.attempts[0].answered, 0);
    }
}
