//! **The handshake port's sockets** — where the agent accepts coordinators.
//!
//! Without `interfaces` the agent listens on `[::]` (dual stack; IPv4 only
//! where IPv6 is disabled), as any daemon does. With `interfaces` (an agent
//! on a box with a cluster NIC and an office or public one) it listens only
//! on the addresses of the named interfaces, plus loopback for the box's
//! own tools, so that the port is closed (a reset, as if nothing listened)
//! on every other network: the box's caps and the measurement service are
//! not offered where it does not announce itself. Addresses change (DHCP,
//! a cable moved, an IPv6 address leaving its tentative state), so the set
//! is looked at again whenever the kernel reports an interface or address
//! change ([`crate::links`]; every [`REFRESH`] where it cannot, and
//! [`REFRESH`] after an address that could not be bound yet): a new
//! address gets a socket, a socket whose address went is closed.
//!
//! Why sockets per address and not `SO_BINDTODEVICE`: a device-bound socket
//! never sees the box's own connections to its LAN address (they arrive on
//! `lo`), so a coordinator running beside its agent would be refused; and
//! it needs privileges before Linux 5.7. Why not one `[::]` socket that
//! closes what arrives on other addresses: the port would still answer
//! SYNs there, telling a scanner an agent runs.

use anyhow::{Context, Result};
use rlx_net::iface::{self, Iface};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// When an agent restricted to interfaces looks at their addresses again
/// without a kernel notification: after an address it could not bind yet
/// (a tentative IPv6 address), or always where notifications do not work.
/// Reading the interface list costs tens of microseconds.
pub const REFRESH: Duration = Duration::from_secs(2);

/// Connections accepted, from however many sockets.
pub struct Incoming {
    kind: Kind,
}

enum Kind {
    One(TcpListener),
    Some(Restricted),
}

/// The sockets of an agent restricted to interfaces.
struct Restricted {
    port: u16,
    names: Vec<String>,
    /// One accept loop per bound address, feeding `rx`.
    bound: HashMap<SocketAddr, JoinHandle<()>>,
    tx: mpsc::Sender<io::Result<(TcpStream, SocketAddr)>>,
    rx: mpsc::Receiver<io::Result<(TcpStream, SocketAddr)>>,
    /// The kernel's interface and address notifications, when they work.
    changes: Option<crate::links::LinkChanges>,
    /// When to look again without one (`None`: only on a notification).
    next_look: Option<tokio::time::Instant>,
}

impl From<TcpListener> for Incoming {
    fn from(l: TcpListener) -> Incoming {
        Incoming { kind: Kind::One(l) }
    }
}

impl Incoming {
    /// The sockets for `port` (0: any free port, the same on every
    /// address): `[::]` when `interfaces` is empty, else the addresses of
    /// those interfaces and loopback. Fails, with the port and the fix,
    /// when nothing could be bound.
    pub async fn bind(port: u16, interfaces: &[String]) -> Result<Incoming> {
        if interfaces.is_empty() {
            return Ok(Incoming::from(bind_any(port).await?));
        }
        let (tx, rx) = mpsc::channel(64);
        let mut r = Restricted {
            port,
            names: interfaces.to_vec(),
            bound: HashMap::new(),
            tx,
            rx,
            changes: None,
            next_look: None,
        };
        match crate::links::LinkChanges::subscribe() {
            Ok(c) => r.changes = Some(c),
            Err(e) => {
                tracing::info!(
                    "no interface notifications ({e}): looking at the addresses of {} every {} s",
                    interfaces.join(", "),
                    REFRESH.as_secs()
                );
                r.next_look = Some(tokio::time::Instant::now() + REFRESH);
            }
        }
        let all = iface::all_interfaces().context("listing the network interfaces")?;
        let wanted = wanted(&all, &r.names);
        let mut first_err = None;
        for mut a in wanted {
            // The port of the first bound, with `--port 0`.
            a.set_port(r.port);
            if let Err(e) = r.add(a) {
                first_err.get_or_insert((a, e));
            }
        }
        if r.bound.is_empty() {
            let why = first_err.map_or_else(
                || String::from("they have no addresses"),
                |(a, e)| format!("{a}: {e}"),
            );
            anyhow::bail!(
                "cannot listen on the agent's port {port} on interfaces {} ({why}); is another \
                 agent running, or another daemon on that port? choose another with --port",
                interfaces.join(", ")
            );
        }
        if let Some((a, e)) = first_err {
            tracing::warn!(
                "cannot listen on {a} ({e}); tried again in {} s",
                REFRESH.as_secs()
            );
            r.next_look = Some(tokio::time::Instant::now() + REFRESH);
        }
        Ok(Incoming {
            kind: Kind::Some(r),
        })
    }

    /// The port listened on (known only now with `--port 0`).
    pub fn port(&self) -> io::Result<u16> {
        match &self.kind {
            Kind::One(l) => Ok(l.local_addr()?.port()),
            Kind::Some(r) => Ok(r.port),
        }
    }

    /// The addresses listened on, for the log and the tests.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        match &self.kind {
            Kind::One(l) => l.local_addr().into_iter().collect(),
            Kind::Some(r) => {
                let mut v: Vec<SocketAddr> = r.bound.keys().copied().collect();
                v.sort();
                v
            }
        }
    }

    /// The next connection. Cancel-safe (a `select!` may drop it).
    pub async fn accept(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        match &mut self.kind {
            Kind::One(l) => l.accept().await,
            Kind::Some(r) => loop {
                let look = r.next_look;
                let changes = r.changes.as_mut();
                let changed = async {
                    match changes {
                        Some(c) => c.next().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    got = r.rx.recv() => {
                        // The sender lives in `r`: never closed.
                        if let Some(got) = got {
                            return got;
                        }
                    }
                    told = changed => {
                        if let Err(e) = told {
                            tracing::warn!("interface notifications failed ({e}): looking at the addresses every {} s instead", REFRESH.as_secs());
                            r.changes = None;
                        }
                        r.refresh();
                    }
                    () = async { tokio::time::sleep_until(look.expect("guarded")).await }, if look.is_some() => {
                        r.refresh();
                    }
                }
            },
        }
    }
}

impl Restricted {
    fn add(&mut self, at: SocketAddr) -> io::Result<()> {
        let std = bind_exact(at)?;
        let l = TcpListener::from_std(std)?;
        let local = l.local_addr()?;
        if self.port == 0 {
            self.port = local.port();
        }
        let mut at = at;
        at.set_port(self.port);
        let tx = self.tx.clone();
        let task = tokio::spawn(async move {
            loop {
                let got = l.accept().await;
                let failed = got.is_err();
                if tx.send(got).await.is_err() {
                    return;
                }
                if failed {
                    // The server backs off on errors; so does this loop.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        });
        self.bound.insert(at, task);
        Ok(())
    }

    /// Looks at the addresses again, and decides when to look next without
    /// a notification.
    fn refresh(&mut self) {
        let again = self.sync();
        self.next_look =
            (again || self.changes.is_none()).then(|| tokio::time::Instant::now() + REFRESH);
    }

    /// One socket per wanted address; whether one could not be bound.
    fn sync(&mut self) -> bool {
        let all = match iface::all_interfaces() {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!("cannot list the interfaces to follow their addresses: {e}");
                return true;
            }
        };
        let port = self.port;
        let wanted: Vec<SocketAddr> = wanted(&all, &self.names)
            .into_iter()
            .map(|mut a| {
                a.set_port(port);
                a
            })
            .collect();
        self.bound.retain(|at, task| {
            let keep = wanted.contains(at);
            if !keep {
                tracing::info!(%at, "address gone from the chosen interfaces: no longer listening there");
                task.abort();
            }
            keep
        });
        let mut failed = false;
        for at in wanted {
            if self.bound.contains_key(&at) {
                continue;
            }
            match self.add(at) {
                Ok(()) => {
                    tracing::info!(%at, "listening on a new address of the chosen interfaces")
                }
                // A tentative IPv6 address cannot be bound yet: next time.
                Err(e) => {
                    tracing::debug!(%at, "cannot listen there yet: {e}");
                    failed = true;
                }
            }
        }
        failed
    }
}

impl Drop for Restricted {
    fn drop(&mut self) {
        for task in self.bound.values() {
            task.abort();
        }
    }
}

/// The socket addresses to listen on (port 0 until the first is bound):
/// every address of the named interfaces, IPv6 link-local ones with their
/// interface as scope, and loopback's.
fn wanted(all: &[Iface], names: &[String]) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for i in all
        .iter()
        .filter(|i| i.is_up() && (names.contains(&i.name) || i.is_loopback()))
    {
        for net in &i.addrs {
            let a = match net.addr() {
                IpAddr::V6(v6) if is_link_local(&v6) => {
                    SocketAddr::V6(SocketAddrV6::new(v6, 0, 0, i.index))
                }
                ip => SocketAddr::new(ip, 0),
            };
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

fn is_link_local(v6: &Ipv6Addr) -> bool {
    v6.segments()[0] & 0xffc0 == 0xfe80
}

/// One listening socket on exactly `at`: IPv6 sockets IPv6 only, so the
/// IPv4 addresses get their own; `SO_REUSEADDR` as tokio sets it, so a
/// restart does not wait out TIME_WAIT.
fn bind_exact(at: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
    if at.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&at.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Binds the handshake port on every address: dual-stack `[::]` when the
/// host has IPv6, else IPv4 only (IPv6 disabled by sysctl, as in many
/// containers and labs).
async fn bind_any(port: u16) -> Result<TcpListener> {
    match TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))).await {
        Ok(l) => Ok(l),
        Err(v6) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on the agent's port {port} (IPv6: {v6}); is another agent \
                     running, or another daemon on that port? choose another with --port \
                     (coordinators: [discover] agent_port for scans)"
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo_and(name: &str, addrs: &[&str]) -> Vec<Iface> {
        use nix::net::if_::InterfaceFlags as F;
        vec![
            Iface {
                name: "lo".into(),
                index: 1,
                flags: F::IFF_UP | F::IFF_LOOPBACK,
                addrs: vec!["127.0.0.1/8".parse().unwrap()],
            },
            Iface {
                name: name.into(),
                index: 2,
                flags: F::IFF_UP | F::IFF_MULTICAST,
                addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            },
            Iface {
                name: "wlan0".into(),
                index: 3,
                flags: F::IFF_UP | F::IFF_MULTICAST,
                addrs: vec!["192.168.1.5/24".parse().unwrap()],
            },
        ]
    }

    #[test]
    fn a_restricted_agent_listens_on_its_interfaces_addresses_and_loopback_only() {
        let all = lo_and("eth0", &["10.0.0.2/24", "fe80::2/64", "fd00::2/64"]);
        let got = wanted(&all, &["eth0".into()]);
        let want: Vec<SocketAddr> = vec![
            "127.0.0.1:0".parse().unwrap(),
            "10.0.0.2:0".parse().unwrap(),
            SocketAddr::V6(SocketAddrV6::new("fe80::2".parse().unwrap(), 0, 0, 2)),
            "[fd00::2]:0".parse().unwrap(),
        ];
        assert_eq!(got, want, "wlan0's 192.168.1.5 is not listened on");
    }

    #[tokio::test]
    async fn an_address_not_on_the_chosen_interfaces_refuses_the_handshake_port() {
        // Loopback only, in the root namespace: 127.0.0.1 is wanted (lo),
        // so binding succeeds, and the set holds no other address.
        let mut inc = Incoming::bind(0, &["lo".into()]).await.unwrap();
        let port = inc.port().unwrap();
        assert!(inc.addresses().iter().all(
            |a| a.ip().is_loopback() || matches!(a, SocketAddr::V6(v) if is_link_local(v.ip()))
        ));
        let dial = tokio::net::TcpStream::connect(("127.0.0.1", port));
        let (accepted, dialled) = tokio::join!(inc.accept(), dial);
        assert!(dialled.is_ok() && accepted.is_ok());
        // 127.0.0.2 is on lo too but is not one of its addresses: refused.
        let other = tokio::net::TcpStream::connect(("127.0.0.2", port)).await;
        assert_eq!(
            other.unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused,
            "an address the agent does not listen on refuses, as if nothing ran"
        );
    }
}
