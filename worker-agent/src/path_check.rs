//! **The pre-launch path check, this agent's part**
//! ([`rlx_proto::handshake::path_check`]): standing in for the runtime at
//! the address and port its process group will listen on, for a moment,
//! and dialling another box's as a rank will, with full-size packets.
//!
//! Both need the cluster key, whatever `--measure` says: a listener on a
//! port of the coordinator's choosing and a connection with a payload to
//! an address of its choosing are not for strangers. The listener answers
//! only connections that open with the request's token, takes a port from
//! 1024 up on an address of this box, and stops when the coordinator's
//! connection closes or its time is up. Each is charged to the asker's
//! budget of path checks ([`crate::measure::PATHS_PER_MINUTE`]).

use crate::measure::{authenticate, refuse, send, Gate};
use rlx_proto::handshake::path_check::{
    listening_line, parse_path_request, Outcome, PathRequest, Probed, MAX_PROBE_BYTES, PROBE_STEP,
    SMALL_MSS,
};
use rlx_proto::handshake::Binding;
use rlx_proto::keys::Key;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{timeout, timeout_at, Instant};

/// The refusal of a path check by an agent without a key.
pub const NO_KEY: &str = "this agent has no cluster key, and stands in for the runtime's port or \
                          dials another box's for a pre-launch check only for holders of one: \
                          give the agents and the coordinator the same key_file";

/// Serves one path check whose request `line` was read from `conn`.
pub async fn serve_path(
    mut conn: BufReader<TcpStream>,
    line: &[u8],
    key: Option<&Key>,
    gate: &Gate,
    on: &Binding,
    step: Duration,
    held: &AtomicBool,
) -> Result<String, String> {
    let Some(key) = key else {
        return refuse(&mut conn, NO_KEY.into()).await;
    };
    let req = match parse_path_request(line) {
        Ok(r) => r,
        Err(why) => return refuse(&mut conn, why).await,
    };
    if let Err(refused) = authenticate(&mut conn, line, Some(key), on, step).await {
        return refused;
    }
    if let Err(why) = gate.charge_path(on) {
        return refuse(&mut conn, why).await;
    }
    // A proved coordinator's check: out of reach of the eviction of idle
    // connections while it runs (a stand-in waits for the probes).
    held.store(true, Ordering::Relaxed);
    let done = run(conn, req, on, step).await;
    held.store(false, Ordering::Relaxed);
    done
}

async fn run(
    mut conn: BufReader<TcpStream>,
    req: PathRequest,
    on: &Binding,
    step: Duration,
) -> Result<String, String> {
    match req {
        PathRequest::PathListen {
            at, token, for_ms, ..
        } => listen(conn, at, token, for_ms, on, step).await,
        PathRequest::PathProbe {
            to,
            token,
            bytes,
            from,
            ..
        } => {
            let probed = probe((to, from), &token, bytes).await;
            send(&mut conn, probed.line().as_bytes(), step).await?;
            Ok(format!(
                "path probe to {to} ({bytes} bytes) for {}: {:?}",
                on.peer, probed.outcome
            ))
        }
    }
}

/// Why `at` cannot be listened on, in words that name the fix.
fn bind_refusal(at: SocketAddr, e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::AddrInUse => format!(
            "port {} on {} is in use by another program on this box, so the runtime could not \
             listen there either: stop that program, or choose another [discover] hosts_port \
             and write hosts.json again",
            at.port(),
            at.ip()
        ),
        ErrorKind::AddrNotAvailable => format!(
            "{} is not an address of this box: the hosts.json entry names another machine's \
             address, or one this box no longer has; write hosts.json again (rlx-discover \
             links --hosts-json)",
            at.ip()
        ),
        _ => format!("cannot listen at {at}: {e}"),
    }
}

fn bind(at: SocketAddr) -> std::io::Result<TcpListener> {
    let s = match at {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // A runtime that exited a moment ago leaves TIME_WAIT behind, which
    // must not read as "in use"; a listener (another program) still does.
    s.set_reuseaddr(true)?;
    s.bind(at)?;
    s.listen(64)
}

/// Stands in at `at` until the coordinator closes `conn` or `for_ms` is up.
async fn listen(
    mut conn: BufReader<TcpStream>,
    at: SocketAddr,
    token: String,
    for_ms: u64,
    on: &Binding,
    step: Duration,
) -> Result<String, String> {
    let listener = match bind(at) {
        Ok(l) => l,
        Err(e) => return refuse(&mut conn, bind_refusal(at, &e)).await,
    };
    send(&mut conn, listening_line().as_bytes(), step).await?;
    let until = Instant::now() + Duration::from_millis(for_ms);
    let answered = Arc::new(AtomicUsize::new(0));
    let strangers = Arc::new(AtomicUsize::new(0));
    let mut handlers = JoinSet::new();
    let mut ignored = [0u8; 64];
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(until) => break,
            // The coordinator's close (or anything it sends) ends it.
            _ = conn.read(&mut ignored) => break,
            accepted = listener.accept() => {
                let Ok((s, _)) = accepted else { continue };
                let (token, answered, strangers) =
                    (token.clone(), Arc::clone(&answered), Arc::clone(&strangers));
                handlers.spawn(async move {
                    if answer(s, &token).await {
                        answered.fetch_add(1, Ordering::Relaxed);
                    } else {
                        strangers.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
    }
    // Dropping the set ends whatever is still being answered.
    drop(handlers);
    Ok(format!(
        "stood in at {at} for {}: {} probe(s) answered, {} connection(s) without the token",
        on.peer,
        answered.load(Ordering::Relaxed),
        strangers.load(Ordering::Relaxed)
    ))
}

/// Answers one connection to the stand-in: `"<token> <n>\n"`, `n` bytes,
/// then `"ok <n>\n"`. False for a connection without the token.
async fn answer(s: TcpStream, token: &str) -> bool {
    let mut rd = BufReader::new(s);
    let mut line = Vec::new();
    let head = timeout(PROBE_STEP, (&mut rd).take(80).read_until(b'\n', &mut line)).await;
    if !matches!(head, Ok(Ok(_))) {
        return false;
    }
    let text = String::from_utf8_lossy(&line);
    let mut words = text.split_whitespace();
    if words.next() != Some(token) {
        return false;
    }
    let Some(n) = words
        .next()
        .and_then(|w| w.parse::<u64>().ok())
        .filter(|n| *n <= MAX_PROBE_BYTES)
    else {
        return false;
    };
    let mut left = n;
    let mut buf = vec![0u8; 16 * 1024];
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        match timeout(PROBE_STEP * 2, rd.read(&mut buf[..want])).await {
            Ok(Ok(k)) if k > 0 => left -= k as u64,
            _ => return true,
        }
    }
    let _ = timeout(
        PROBE_STEP,
        rd.get_mut().write_all(format!("ok {n}\n").as_bytes()),
    )
    .await;
    true
}

/// One try's end: done, or connected but never acknowledged.
enum Try {
    Done(Option<IpAddr>, Outcome),
    Stalled(Option<IpAddr>, Option<u32>),
}

/// Dials `to` as a rank will; on a connection whose bytes are never
/// acknowledged, once more with [`SMALL_MSS`] segments.
async fn probe(to: (SocketAddr, Option<IpAddr>), token: &str, bytes: u64) -> Probed {
    match attempt(to, token, bytes, None).await {
        Try::Done(from, outcome) => Probed { from, outcome },
        Try::Stalled(from, mss) => {
            let small = matches!(
                attempt(to, token, bytes, Some(SMALL_MSS)).await,
                Try::Done(_, Outcome::Ok { .. })
            );
            Probed {
                from,
                outcome: Outcome::Stalled { mss, small },
            }
        }
    }
}

/// This box's address towards `to`, as the routing table has it.
fn route_source(to: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
        SocketAddr::V6(_) => "[::]:0".parse().ok()?,
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(to).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// A TCP socket for `to`, leaving from `from` (any port) when given, its
/// segment size capped at `mss`.
fn socket(to: SocketAddr, from: Option<IpAddr>, mss: Option<u32>) -> std::io::Result<TcpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(m) = mss {
        s.set_tcp_mss(m)?;
    }
    if let Some(ip) = from {
        s.bind(&SocketAddr::new(ip, 0).into())?;
    }
    s.set_nonblocking(true)?;
    Ok(TcpSocket::from_std_stream(s.into()))
}

async fn attempt(
    (to, leave_from): (SocketAddr, Option<IpAddr>),
    token: &str,
    bytes: u64,
    mss: Option<u32>,
) -> Try {
    let sock = match socket(to, leave_from, mss) {
        Ok(s) => s,
        Err(e) => {
            let why = format!("cannot open a socket: {e}");
            return Try::Done(None, Outcome::Other { why });
        }
    };
    let started = Instant::now();
    let stream = match timeout(PROBE_STEP, sock.connect(to)).await {
        Err(_) => return Try::Done(leave_from.or_else(|| route_source(to)), Outcome::NoAnswer),
        Ok(Err(e)) => {
            let outcome = match e.kind() {
                ErrorKind::ConnectionRefused => Outcome::Refused,
                ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => {
                    Outcome::Unreachable { why: e.to_string() }
                }
                _ => Outcome::Other { why: e.to_string() },
            };
            return Try::Done(leave_from.or_else(|| route_source(to)), outcome);
        }
        Ok(Ok(s)) => s,
    };
    let connect_ms = started.elapsed().as_secs_f64() * 1000.0;
    let from = stream.local_addr().ok().map(|a| a.ip().to_canonical());
    if bytes == 0 {
        let outcome = Outcome::Ok {
            connect_ms,
            transfer_ms: 0.0,
        };
        return Try::Done(from, outcome);
    }
    let path_mss = socket2::SockRef::from(&stream).tcp_mss().ok();
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let sent = Instant::now();
    let deadline = sent + PROBE_STEP * 2;
    let exchange = async {
        wr.write_all(format!("{token} {bytes}\n").as_bytes())
            .await?;
        let block = vec![0u8; 16 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            wr.write_all(&block[..n]).await?;
            left -= n as u64;
        }
        let mut line = Vec::new();
        (&mut rd).take(80).read_until(b'\n', &mut line).await?;
        Ok::<Vec<u8>, std::io::Error>(line)
    };
    match timeout_at(deadline, exchange).await {
        Err(_) => Try::Stalled(from, path_mss),
        Ok(Err(e)) => Try::Done(
            from,
            Outcome::Other {
                why: format!("connected, then {e}"),
            },
        ),
        Ok(Ok(line)) if line == format!("ok {bytes}\n").as_bytes() => Try::Done(
            from,
            Outcome::Ok {
                connect_ms,
                transfer_ms: sent.elapsed().as_secs_f64() * 1000.0,
            },
        ),
        Ok(Ok(line)) => Try::Done(
            from,
            Outcome::Other {
                why: format!(
                    "connected, but what listens there is not the check's stand-in (it said \
                     {:?}): another program has the port",
                    String::from_utf8_lossy(&line[..line.len().min(60)])
                ),
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "00112233445566778899aabbccddeeff";

    #[tokio::test]
    async fn a_probe_crosses_to_a_stand_in_that_knows_its_token() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            answer(s, TOKEN).await
        });
        let p = probe((at, None), TOKEN, 100_000).await;
        assert!(matches!(p.outcome, Outcome::Ok { .. }), "{p:?}");
        assert_eq!(p.from, Some("127.0.0.1".parse().unwrap()));
        assert!(server.await.unwrap(), "the stand-in counted it");
    }

    #[tokio::test]
    async fn a_stand_in_drops_a_connection_without_the_token() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            answer(s, TOKEN).await
        });
        let p = probe((at, None), "ffeeddccbbaa99887766554433221100", 10).await;
        assert!(!matches!(p.outcome, Outcome::Ok { .. }), "{p:?}");
        assert!(!server.await.unwrap());
    }

    #[tokio::test]
    async fn a_closed_port_is_refused_and_a_bare_connect_needs_no_token() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = l.local_addr().unwrap();
        let p = probe((at, Some("127.0.0.1".parse().unwrap())), "", 0).await;
        assert!(matches!(p.outcome, Outcome::Ok { .. }), "{p:?}");
        drop(l);
        let p = probe((at, None), "", 0).await;
        assert_eq!(p.outcome, Outcome::Refused);
    }

    #[test]
    fn a_port_in_use_and_a_foreign_address_are_refused_with_the_fix() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = taken.local_addr().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt.block_on(async { bind(at).map(|_| ()) }).unwrap_err();
        assert!(
            bind_refusal(at, &e).contains("in use by another program"),
            "{e}"
        );
        let foreign: SocketAddr = "192.0.2.7:9000".parse().unwrap();
        let e = rt
            .block_on(async { bind(foreign).map(|_| ()) })
            .unwrap_err();
        assert!(
            bind_refusal(foreign, &e).contains("not an address of this box"),
            "{e}"
        );
    }
}
