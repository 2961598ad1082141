//! **The handshake server** — answers the coordinator's hello on the
//! advertised port with this box's caps (and a proof of the cluster key), and
//! keeps answering whatever else connects.
//!
//! ```text
//! $ printf '{"rlx":"hello","v":2,"nonce":"%064x"}\n' 1 | nc 127.0.0.1 9100
//! {"rlx":"caps","v":2,"nonce":"00..01","caps":{"id":"5f0c...","cores":32,...},"local":"127.0.0.1:9100","peer":"127.0.0.1:51022"}
//! ```
//!
//! With a key, the proof binds the connection: the endpoint it was accepted
//! on, the peer, and the endpoints declared with `--advertise`, so that a
//! relay cannot pass a live proof on (docs/protocol.md, "The proof").
//!
//! The messages and the proof are [`rlx_proto::handshake`], the same code
//! the coordinator runs; so is the cluster filter (an agent started with
//! `--cluster` refuses a hello that names another cluster). This module is only the network side, built so that
//! no client can stall it:
//!
//! - a hello longer than [`MAX_HELLO_BYTES`] is dropped unanswered, so a
//!   10 MB garbage sender costs 1 KiB of reading;
//! - every connection has [`CONNECTION_TIMEOUT`] for the whole exchange, so a
//!   slow-loris client trickling bytes is cut off;
//! - at most [`MAX_CONNECTIONS`] connections are served at once; when a new
//!   one arrives at the limit, one is closed to make room: the oldest of the
//!   source address holding the most, one that has not sent its hello yet
//!   first (see [`MAX_CONNECTIONS`] for why, and `victim`).
//!
//! A first line of `{"rlx":"measure",...}` is a link measurement instead
//! ([`crate::measure`]), if [`Limits::measure`] allows it: it gets its own,
//! longer bound (the granted transfer windows, and at most
//! [`crate::measure::MAX_HOLD`] in all), one runs at a time, each source
//! gets a few a minute, and the one running is not evicted.
//!
//! Shutdown is an argument ([`serve`] returns when the future completes), as
//! in mini-redis: `main` passes the signal handler, tests pass a oneshot.

use rlx_proto::caps::NodeCaps;
use rlx_proto::handshake;
use rlx_proto::identity::NodeKey;
use rlx_proto::keys::Key;
use std::collections::VecDeque;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

pub use rlx_proto::handshake::MAX_HELLO_BYTES;

/// Connections served at once.
///
/// A coordinator holds one connection per agent for about a round trip, and
/// clusters have a handful of coordinators, so legitimate use needs a few;
/// 64 leaves a wide margin while bounding what a flood costs (64 tasks with a
/// 1 KiB read buffer each, well under a megabyte).
///
/// At the limit a newcomer evicts the oldest connection instead of being
/// refused. Refusing newcomers would let anyone hold 64 idle connections and
/// re-open each as it times out, locking every coordinator out for as long
/// as they care to. With oldest-out, a real client, which finishes within a
/// round trip, is only lost if an attacker opens 64 connections inside that
/// round trip: a connection flood, which no application-level limit stops.
///
/// The one link measurement holding the one-at-a-time lock is exempt (so
/// at most one connection more): evicted, it would be cut short by anyone
/// who can open 64 connections, and it has its own bound
/// ([`crate::measure::MAX_HOLD`]).
///
/// Plain oldest-out still let one host evict anyone: 64 idle connections
/// opened while a coordinator's keyed health check was under way closed
/// that check, and two in a row made `watch` report a live member left.
/// So the one evicted is chosen among the connections of the source
/// address that holds the most (`victim`): a flood from one address (or a
/// few) closes only its own, and evicting a coordinator's takes as many
/// on-link addresses as there are slots, each holding one.
pub const MAX_CONNECTIONS: usize = 64;

/// Time one connection gets for the whole exchange (hello in, reply out).
///
/// A coordinator sends its hello as soon as it connects and the reply is one
/// write, so a real exchange takes a round trip; 2 s covers a congested Wi-Fi
/// link many times over, and is the longest a slow-loris client keeps a slot.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest pause after a failed `accept()` (out of file descriptors, say)
/// before trying again; the pause starts at 10 ms and doubles, so a transient
/// error costs little and a persistent one does not spin a core.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The server's bounds, for a flag or a test to override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// See [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// See [`CONNECTION_TIMEOUT`].
    pub timeout: Duration,
    /// Who may measure links, how often, and for how long at most
    /// (`--measure`, `--measure-per-minute`).
    pub measure: crate::measure::Rules,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: MAX_CONNECTIONS,
            timeout: CONNECTION_TIMEOUT,
            measure: crate::measure::Rules::default(),
        }
    }
}

/// Serves the handshake on `listener` until `shutdown` completes, with the
/// default [`Limits`].
///
/// `caps` is read when each connection arrives, so the agent can update it
/// (RAM free, a device appearing) without restarting the server; when its
/// `worker_port` is set, whether the worker listens is checked then too
/// (and published through `caps` when it changed). `key` is the
/// cluster key the agent proves (the first of its key file); `None` answers
/// without a proof. `advertised` are the endpoints `--advertise` declares
/// (port-forwards to this agent): each proof binds them along with the
/// connection it answers on.
pub async fn serve(
    listener: TcpListener,
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    key: Option<Key>,
    advertised: Vec<SocketAddr>,
    shutdown: impl Future,
) {
    serve_with(listener, caps, key, advertised, Limits::default(), shutdown).await
}

/// [`serve`] with explicit limits.
///
/// On shutdown it stops accepting and aborts the exchanges in flight (each
/// is at most [`Limits::timeout`] from done and carries no state worth
/// finishing), then returns.
pub async fn serve_with(
    listener: TcpListener,
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    key: Option<Key>,
    advertised: Vec<SocketAddr>,
    limits: Limits,
    shutdown: impl Future,
) {
    serve_signed(listener, caps, key, None, advertised, limits, shutdown).await
}

/// [`serve_with`] for an agent with its own node key: every reply names
/// its public half in the caps and carries its signature beside the proof
/// (`node_sig`, docs/protocol.md §2), so a coordinator that pinned the key
/// for this node id can tell this machine from another that claims the id.
pub async fn serve_signed(
    listener: TcpListener,
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    key: Option<Key>,
    node_key: Option<Arc<NodeKey>>,
    advertised: Vec<SocketAddr>,
    limits: Limits,
    shutdown: impl Future,
) {
    let advertised: Arc<[SocketAddr]> = advertised.into();
    let max = limits.max_connections.max(1);
    let mut tasks = JoinSet::new();
    // Live connections, oldest first: who to evict at the limit.
    let mut live: VecDeque<Live> = VecDeque::new();
    let mut backoff = Duration::from_millis(10);
    let gate = Arc::new(crate::measure::Gate::new(limits.measure));
    // Every handshake tells whether the worker listens now (at most
    // `worker::MAX_AGE` old), not as of the last re-probe.
    let worker = caps
        .borrow()
        .worker_port
        .map(crate::worker::WorkerCheck::new);
    tokio::pin!(shutdown);

    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            // Reap finished connections as they end, so idle periods do not
            // keep their results around.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(x) => {
                backoff = Duration::from_millis(10);
                x
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed; retrying in {} ms", backoff.as_millis());
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                continue;
            }
        };

        live.retain(|c| !c.handle.is_finished());
        loop {
            // The measurement holding the lock is never evicted.
            let open: Vec<usize> = (0..live.len())
                .filter(|&i| !live[i].held.load(Ordering::Relaxed))
                .collect();
            if open.len() < max {
                break;
            }
            let seen: Vec<(IpAddr, bool)> = open
                .iter()
                .map(|&i| (live[i].ip, live[i].spoke.load(Ordering::Relaxed)))
                .collect();
            let Some(gone) = victim(&seen).and_then(|k| live.remove(open[k])) else {
                break;
            };
            tracing::debug!(%peer, from = %gone.ip, "connection limit ({max}) reached: closing a connection of the busiest source");
            gone.handle.abort();
        }
        let caps = match &worker {
            Some(w) => w.refresh(&caps),
            None => caps.borrow().clone(),
        };
        let held = Arc::new(AtomicBool::new(false));
        let spoke = Arc::new(AtomicBool::new(false));
        let handle = tasks.spawn(connection(
            stream,
            peer,
            caps,
            (key.clone(), node_key.clone()),
            Arc::clone(&advertised),
            limits.timeout,
            (Arc::clone(&gate), Arc::clone(&held), Arc::clone(&spoke)),
        ));
        live.push_back(Live {
            handle,
            ip: peer.ip(),
            spoke,
            held,
        });
    }
    tracing::debug!(in_flight = live.len(), "handshake server stopping");
    tasks.shutdown().await;
}

/// A connection being served: its task, its source address, whether its
/// client has sent a first line yet, and whether it holds the measurement
/// lock.
struct Live {
    handle: AbortHandle,
    ip: IpAddr,
    spoke: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
}

/// Which of the live connections (oldest first: each one's source address,
/// and whether it has sent its first line) to close for a newcomer at the
/// limit: among the source addresses holding the most connections, the
/// oldest connection that has not spoken yet, else the oldest. A real
/// coordinator holds one connection per agent and speaks at once, so it is
/// never the one closed while any address holds two, and a flood from a few
/// addresses costs only those addresses' own connections. `None` for none.
fn victim(live: &[(IpAddr, bool)]) -> Option<usize> {
    let mut counts: std::collections::HashMap<IpAddr, usize> = Default::default();
    for (ip, _) in live {
        *counts.entry(*ip).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    let busiest = |i: &usize| counts[&live[*i].0] == most;
    let mut candidates = (0..live.len()).filter(busiest);
    let first = candidates.clone().next();
    candidates.find(|&i| !live[i].1).or(first)
}

/// What an agent answers with: the cluster key it proves, and its own node
/// key it signs with.
type Credentials = (Option<Key>, Option<Arc<NodeKey>>);

/// One connection, bounded in time; its outcome goes to the debug log only,
/// since a flood of hostile connections must not become a flood of log lines.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    caps: Arc<NodeCaps>,
    (key, node_key): Credentials,
    advertised: Arc<[SocketAddr]>,
    timeout: Duration,
    (gate, held, spoke): (Arc<crate::measure::Gate>, Arc<AtomicBool>, Arc<AtomicBool>),
) {
    // What the proof binds: the endpoint this connection was accepted on
    // and the peer it came from, so that the proof is worth nothing to a
    // relay (its connection to us has other ends than its client's).
    let on = match stream.local_addr() {
        Ok(local) => handshake::Binding {
            local,
            peer,
            advertised: advertised.to_vec(),
        },
        Err(e) => {
            tracing::debug!(%peer, "handshake: no local address for the connection ({e}); closed");
            return;
        }
    };
    let exchanged = exchange(
        stream,
        &caps,
        key.as_ref(),
        node_key.as_deref(),
        &on,
        &spoke,
    );
    match tokio::time::timeout(timeout, exchanged).await {
        Err(_) => {
            tracing::debug!(%peer, "handshake: no complete exchange within {} ms; closed", timeout.as_millis())
        }
        Ok(Err(why)) => tracing::debug!(%peer, "handshake: {why}"),
        Ok(Ok(None)) => tracing::debug!(%peer, "handshake: answered"),
        Ok(Ok(Some((conn, line)))) => {
            let on_hold = || held.store(true, Ordering::Relaxed);
            let served =
                crate::measure::serve(conn, &line, key.as_ref(), &gate, &on, timeout, on_hold);
            match served.await {
                Ok(what) => tracing::debug!(%peer, "{what}"),
                Err(why) => tracing::debug!(%peer, "{why}"),
            }
        }
    }
}

/// A measurement request, handed back with its connection to run outside
/// the handshake's time bound.
type MeasureRequest = (BufReader<TcpStream>, Vec<u8>);

/// Reads one hello line (at most [`MAX_HELLO_BYTES`]) and writes the reply,
/// or an error line for a malformed hello. Longer input is dropped without a
/// word: whoever sends it is not a coordinator. A measurement request is
/// returned, unanswered, with its connection.
async fn exchange(
    stream: TcpStream,
    caps: &NodeCaps,
    key: Option<&Key>,
    node_key: Option<&NodeKey>,
    on: &handshake::Binding,
    spoke: &AtomicBool,
) -> Result<Option<MeasureRequest>, String> {
    let _ = stream.set_nodelay(true);
    let mut conn = BufReader::with_capacity(512, stream);
    let mut line = Vec::new();
    let n = (&mut conn)
        .take(MAX_HELLO_BYTES as u64 + 1)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("read failed: {e}"))?;
    if n == 0 {
        return Err("closed without a hello".into());
    }
    spoke.store(true, Ordering::Relaxed);
    if line.len() > MAX_HELLO_BYTES {
        return Err(format!(
            "hello longer than {MAX_HELLO_BYTES} bytes; dropped"
        ));
    }
    if handshake::measure::is_request(&line) {
        return Ok(Some((conn, line)));
    }
    let (out, refused) = match handshake::answer_signed(&line, caps, key, node_key, on) {
        Ok(reply) => (reply, None),
        Err(e) => (e.to_line(), Some(e)),
    };
    let wr = conn.get_mut();
    wr.write_all(out.as_bytes())
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    let _ = wr.shutdown().await;
    match refused {
        Some(e) => Err(format!("refused hello: {e}")),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::caps::DeviceInfo;
    use rlx_proto::handshake::{query, HandshakeError, Nonce};
    use rlx_proto::keys::KeyRing;
    use std::time::Instant;
    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;

    fn caps(cores: u32) -> NodeCaps {
        NodeCaps {
            id: "0123456789abcdef".into(),
            hostname: "gpu-a".into(),
            os: "linux".into(),
            cores,
            ram_total: 64 << 30,
            ram_avail: 32 << 30,
            devices: vec![DeviceInfo {
                device: "cuda".into(),
                name: "RTX 4090".into(),
                mem_bytes: 24 << 30,
                unified: false,
                gflops: 0.0,
                available: true,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn key(b: u8) -> Key {
        Key::from_bytes([b; 32])
    }

    struct Agent {
        addr: SocketAddr,
        caps: Arc<watch::Sender<Arc<NodeCaps>>>,
        stop: Option<oneshot::Sender<()>>,
        task: JoinHandle<()>,
    }

    async fn start(key: Option<Key>, limits: Limits) -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        start_on(listener, key, vec![], limits)
    }

    fn start_on(
        listener: TcpListener,
        key: Option<Key>,
        advertised: Vec<SocketAddr>,
        limits: Limits,
    ) -> Agent {
        let addr = listener.local_addr().unwrap();
        let caps_tx = Arc::new(watch::channel(Arc::new(caps(8))).0);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with(
            listener,
            caps_tx.clone(),
            key,
            advertised,
            limits,
            async {
                let _ = stopped.await;
            },
        ));
        Agent {
            addr,
            caps: caps_tx,
            stop: Some(stop),
            task,
        }
    }

    const GOOD: Duration = Duration::from_secs(2);

    #[tokio::test]
    async fn it_answers_with_the_current_caps() {
        let agent = start(None, Limits::default()).await;
        let r = query(agent.addr, GOOD, None, Some("0123456789abcdef"))
            .await
            .unwrap();
        assert_eq!(r.caps, caps(8));

        agent.caps.send_replace(Arc::new(caps(16)));
        let r = query(agent.addr, GOOD, None, None).await.unwrap();
        assert_eq!(
            r.caps.cores, 16,
            "caps changes are served without a restart"
        );
    }

    /// An agent with a node key proves it with or without a cluster key:
    /// the coordinator learns the key from a reply it can verify.
    #[tokio::test]
    async fn an_agent_with_a_node_key_signs_every_reply_with_it() {
        let node = NodeKey::from_seed([9; 32]);
        for cluster in [None, Some(key(1))] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let caps_tx = Arc::new(watch::channel(Arc::new(caps(8))).0);
            let (stop, stopped) = oneshot::channel::<()>();
            let task = tokio::spawn(serve_signed(
                listener,
                caps_tx,
                cluster.clone(),
                Some(Arc::new(node.clone())),
                vec![],
                Limits::default(),
                async {
                    let _ = stopped.await;
                },
            ));
            let ring = cluster.map(KeyRing::single);
            let r = query(addr, GOOD, ring.as_ref(), None).await.unwrap();
            assert_eq!(r.node_key, Some(node.public()), "keyed: {}", ring.is_some());
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    #[tokio::test]
    async fn with_a_key_the_proof_verifies_and_a_wrong_key_fails() {
        let agent = start(Some(key(1)), Limits::default()).await;
        let r = query(agent.addr, GOOD, Some(&KeyRing::single(key(1))), None)
            .await
            .unwrap();
        assert_eq!(r.key_index, Some(0));

        let err = query(agent.addr, GOOD, Some(&KeyRing::single(key(2))), None)
            .await
            .unwrap_err();
        assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err}");

        let plain = start(None, Limits::default()).await;
        let err = query(plain.addr, GOOD, Some(&KeyRing::single(key(1))), None)
            .await
            .unwrap_err();
        assert!(matches!(err, HandshakeError::NoProof { .. }), "{err}");
    }

    /// Cluster names are filtered on both sides: an agent started with
    /// `--cluster lab` does not hand its caps to a coordinator of another
    /// cluster, and says which cluster it is in; hellos without a cluster
    /// (older coordinators, scripts) are still answered.
    #[tokio::test]
    async fn an_agent_in_a_cluster_answers_only_hellos_for_it_or_for_none() {
        let agent = start(Some(key(1)), Limits::default()).await;
        agent.caps.send_replace(Arc::new(NodeCaps {
            cluster: Some("lab".into()),
            ..caps(8)
        }));
        let ring = KeyRing::single(key(1));
        let err = handshake::query_in_cluster(agent.addr, GOOD, Some(&ring), None, Some("prod"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, HandshakeError::OtherCluster { theirs, .. } if theirs == "lab"),
            "{err}"
        );
        for wanted in [Some("lab"), None] {
            let r = handshake::query_in_cluster(agent.addr, GOOD, Some(&ring), None, wanted)
                .await
                .unwrap_or_else(|e| panic!("hello for {wanted:?}: {e}"));
            assert_eq!(r.caps.cluster.as_deref(), Some("lab"));
        }
    }

    /// Sends `hello` raw and returns everything the agent sent back.
    async fn raw_exchange(addr: SocketAddr, hello: &[u8]) -> Vec<u8> {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(hello).await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(GOOD, s.read_to_end(&mut out)).await;
        out
    }

    #[tokio::test]
    async fn a_replayed_proof_is_detected_by_the_client() {
        let agent = start(Some(key(1)), Limits::default()).await;
        let old = Nonce::random().unwrap();
        let captured = raw_exchange(agent.addr, handshake::hello_line(&old).as_bytes()).await;
        assert!(captured.starts_with(b"{\"rlx\":\"caps\""));

        // An impostor that replays the captured reply to every hello.
        let impostor = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let impostor_addr = impostor.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = impostor.accept().await {
                let mut buf = [0u8; 200];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(&captured).await;
            }
        });
        let err = query(impostor_addr, GOOD, Some(&KeyRing::single(key(1))), None)
            .await
            .unwrap_err();
        assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_malformed_hello_gets_an_error_line_and_an_oversized_one_nothing() {
        let agent = start(None, Limits::default()).await;
        let out = raw_exchange(
            agent.addr,
            b"{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"12\"}\n",
        )
        .await;
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("{\"rlx\":\"error\"") && out.contains("64 hex"),
            "{out}"
        );

        let mut long = vec![b'{'; 2 * MAX_HELLO_BYTES];
        long.push(b'\n');
        let out = raw_exchange(agent.addr, &long).await;
        assert!(
            out.is_empty(),
            "an oversized hello is dropped unanswered: {out:?}"
        );

        // A hello without a newline, then EOF, is still a hello.
        let hello = handshake::hello_line(&Nonce::random().unwrap());
        let mut s = TcpStream::connect(agent.addr).await.unwrap();
        s.write_all(hello.trim_end().as_bytes()).await.unwrap();
        s.shutdown().await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(GOOD, s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.starts_with(b"{\"rlx\":\"caps\""),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_the_timeout() {
        let limits = Limits {
            timeout: Duration::from_millis(200),
            ..Limits::default()
        };
        let agent = start(None, limits).await;
        let mut s = TcpStream::connect(agent.addr).await.unwrap();
        let t = Instant::now();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(GOOD, s.read(&mut buf))
            .await
            .expect("closed by the agent");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn at_the_limit_the_oldest_connection_makes_room() {
        let limits = Limits {
            max_connections: 4,
            timeout: Duration::from_secs(30),
            ..Limits::default()
        };
        let agent = start(None, limits).await;
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(TcpStream::connect(agent.addr).await.unwrap());
        }
        // Let the agent accept all four before the newcomer arrives.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = query(agent.addr, GOOD, None, None).await;
        assert!(r.is_ok(), "a newcomer is served at the limit: {r:?}");
        let mut buf = [0u8; 1];
        let first = tokio::time::timeout(GOOD, idle[0].read(&mut buf)).await;
        assert!(
            matches!(first, Ok(Ok(0)) | Ok(Err(_))),
            "the oldest was closed: {first:?}"
        );
    }

    /// Guards against issue 23's eviction: a flood of idle connections from
    /// one address closed a coordinator's keyed check under way (oldest
    /// out). Now the flooder's own connections make the room.
    #[tokio::test]
    async fn a_flood_from_one_address_closes_only_its_own_connections() {
        let limits = Limits {
            max_connections: 4,
            timeout: Duration::from_secs(30),
            ..Limits::default()
        };
        let agent = start(Some(key(3)), limits).await;
        let from = |ip: [u8; 4]| async move {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind(SocketAddr::from((ip, 0))).unwrap();
            sock.connect(agent.addr).await.unwrap()
        };
        // The coordinator's connection, its hello not yet sent (the check
        // under way), then 20 idle ones from the flooder.
        let mut check = from([127, 0, 0, 3]).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut flood = Vec::new();
        for _ in 0..20 {
            flood.push(from([127, 0, 0, 2]).await);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let nonce = Nonce::random().unwrap();
        check
            .write_all(handshake::hello_line(&nonce).as_bytes())
            .await
            .unwrap();
        let mut reply = String::new();
        tokio::time::timeout(GOOD, BufReader::new(&mut check).read_line(&mut reply))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(
            reply.contains("\"rlx\":\"caps\"") || reply.contains("\"caps\""),
            "the coordinator's check was answered, not closed: {reply:?}"
        );
    }

    #[test]
    fn the_connection_closed_at_the_limit_is_the_busiest_sources_quiet_oldest() {
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        // b holds the most: its oldest quiet one goes, not a's older one.
        assert_eq!(
            victim(&[(a, false), (b, true), (b, false), (b, false)]),
            Some(2)
        );
        // All of the busiest spoke: its oldest.
        assert_eq!(victim(&[(a, false), (b, true), (b, true)]), Some(1));
        // A tie: the oldest quiet one among the tied.
        assert_eq!(victim(&[(a, true), (b, false)]), Some(1));
        assert_eq!(victim(&[(a, false), (b, false)]), Some(0));
        assert_eq!(victim(&[]), None);
    }

    /// The hostile crowd: idle connections beyond the limit, a slow-loris
    /// sending a byte every 100 ms, 10 MB of garbage, half-closed sockets and
    /// clients that never read. None of it may delay a real coordinator.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_clients_do_not_block_a_well_behaved_one() {
        let agent = start(Some(key(9)), Limits::default()).await;
        let addr = agent.addr;
        let ring = KeyRing::single(key(9));

        let mut held = Vec::new();
        for _ in 0..(MAX_CONNECTIONS * 3) {
            held.push(TcpStream::connect(addr).await.unwrap());
        }
        for _ in 0..8 {
            // Half-open: our side closed for writing, never reading.
            let s = TcpStream::connect(addr).await.unwrap();
            let s = s.into_std().unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            held.push(TcpStream::from_std(s).unwrap());
            // A hello whose reply nobody reads.
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(handshake::hello_line(&Nonce::random().unwrap()).as_bytes())
                .await
                .unwrap();
            held.push(s);
        }
        let loris = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            for b in b"{\"rlx\":\"hello\"".iter().cycle().take(60) {
                if s.write_all(&[*b]).await.is_err() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        });
        let garbage = tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let chunk = vec![0x5au8; 64 * 1024];
            let mut sent = 0usize;
            while sent < 10 * 1024 * 1024 {
                match tokio::time::timeout(Duration::from_secs(5), s.write_all(&chunk)).await {
                    Ok(Ok(())) => sent += chunk.len(),
                    _ => return sent,
                }
            }
            sent
        });
        tokio::time::sleep(Duration::from_millis(100)).await;

        for round in 0..5 {
            let t = Instant::now();
            let r = query(addr, GOOD, Some(&ring), Some("0123456789abcdef")).await;
            let took = t.elapsed();
            assert!(r.is_ok(), "round {round}: {r:?}");
            assert!(
                took < Duration::from_millis(500),
                "round {round}: answered in {took:?}"
            );
        }
        let sent = garbage.await.unwrap();
        assert!(
            sent < 10 * 1024 * 1024,
            "the garbage sender was cut off (after {sent} bytes)"
        );
        drop(held);
        assert!(
            loris.await.unwrap(),
            "the slow-loris was cut off within the connection timeout"
        );
        assert!(
            query(addr, GOOD, Some(&ring), None).await.is_ok(),
            "still serving afterwards"
        );
    }

    #[tokio::test]
    async fn shutdown_returns_promptly_even_with_connections_open() {
        let mut agent = start(None, Limits::default()).await;
        let _idle: Vec<_> = connect_many(agent.addr, 10).await;
        agent.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(1), &mut agent.task)
            .await
            .expect("serve returns after shutdown")
            .unwrap();
        let err = query(agent.addr, GOOD, None, None).await.unwrap_err();
        assert!(matches!(err, HandshakeError::Unreachable { .. }), "{err}");
    }

    /// A TCP relay on `listener` to `to`: what a stranger runs to pass a
    /// real agent's live handshake on as its own.
    fn relay(listener: TcpListener, to: SocketAddr) {
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut agent) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut agent).await;
                    }
                });
            }
        });
    }

    /// The relay attack (docs/security.md, "Relays, NATs and
    /// port-forwards"): a keyed agent's live reply, carried by a relay at
    /// another port, is refused as relayed; the same relay declared by the
    /// agent's operator (`--advertise`) is a port-forward, and the agent is
    /// admitted there.
    #[tokio::test]
    async fn a_relayed_proof_is_refused_unless_the_agent_declares_that_endpoint() {
        let ring = KeyRing::single(key(1));
        let agent = start(Some(key(1)), Limits::default()).await;
        let stranger = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay_addr = stranger.local_addr().unwrap();
        relay(stranger, agent.addr);
        let err = query(relay_addr, GOOD, Some(&ring), Some("0123456789abcdef"))
            .await
            .unwrap_err();
        assert!(matches!(err, HandshakeError::Relayed { .. }), "{err}");
        assert!(
            err.to_string().contains(&agent.addr.to_string())
                && err.to_string().contains(&relay_addr.to_string()),
            "names both endpoints: {err}"
        );
        let direct = query(agent.addr, GOOD, Some(&ring), None).await.unwrap();
        assert!(!direct.via_advertised);

        // The operator's own forwarder, declared.
        let forward = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let forward_addr = forward.local_addr().unwrap();
        let declared = start_on(
            TcpListener::bind("127.0.0.1:0").await.unwrap(),
            Some(key(1)),
            vec![forward_addr],
            Limits::default(),
        );
        relay(forward, declared.addr);
        let r = query(forward_addr, GOOD, Some(&ring), Some("0123456789abcdef"))
            .await
            .unwrap();
        assert!(r.via_advertised, "admitted at the declared endpoint");
        assert!(query(declared.addr, GOOD, Some(&ring), None).await.is_ok());
    }

    async fn connect_many(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(TcpStream::connect(addr).await.unwrap());
        }
        v
    }
}
