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
//! A hello with `"follow":true`, once answered, keeps its connection as a
//! liveness stream ([`rlx_proto::handshake::follow`], served by `follow`):
//! pulses every 300 ms until the agent stops (then a `bye`), with their own
//! bound of [`Limits::max_followers`], out of the connection limit's reach.
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
    /// Most liveness streams held at once
    /// ([`rlx_proto::handshake::MAX_FOLLOWERS`]).
    pub max_followers: usize,
    /// How long a liveness stream may bring nothing from its coordinator
    /// ([`rlx_proto::handshake::FOLLOWER_IDLE`]).
    pub follow_idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: MAX_CONNECTIONS,
            timeout: CONNECTION_TIMEOUT,
            measure: crate::measure::Rules::default(),
            max_followers: follow::DEFAULT_MAX,
            follow_idle: follow::DEFAULT_IDLE,
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
/// On shutdown it stops accepting, tells each liveness stream to write its
/// `bye` (they get `follow::BYE_GRACE`, 100 ms, for it), aborts what is
/// still running (an exchange is at most [`Limits::timeout`] from done and
/// carries no state worth finishing), then returns.
pub async fn serve_with(
    listener: TcpListener,
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    key: Option<Key>,
    advertised: Vec<SocketAddr>,
    limits: Limits,
    shutdown: impl Future,
) {
    serve_signed(
        listener,
        caps,
        (key, None),
        advertised,
        limits,
        crate::proved::ProvedPeers::default(),
        shutdown,
    )
    .await
}

/// [`serve_with`] for an agent with its own node key: every reply names
/// its public half in the caps and carries its signature beside the proof
/// (`node_sig`, docs/protocol.md §2), so a coordinator that pinned the key
/// for this node id can tell this machine from another that claims the id.
///
/// Every peer whose connection is accepted goes to `proved`: the TCP
/// handshake showed it receives at its address, so the mDNS responder may
/// answer its QU questions with more bytes than they carried
/// ([`crate::proved`]).
pub async fn serve_signed(
    listener: impl Into<crate::listen::Incoming>,
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    (key, node_key): Credentials,
    advertised: Vec<SocketAddr>,
    limits: Limits,
    proved: crate::proved::ProvedPeers,
    shutdown: impl Future,
) {
    let mut listener = listener.into();
    let advertised: Arc<[SocketAddr]> = advertised.into();
    let max = limits.max_connections.max(1);
    let mut tasks = JoinSet::new();
    // Live connections, oldest first: who to evict at the limit.
    let mut live: VecDeque<Live> = VecDeque::new();
    let mut backoff = Duration::from_millis(10);
    let gate = Arc::new(crate::measure::Gate::new(limits.measure));
    // The liveness streams, and what tells them the agent stops.
    let followers = follow::Followers::new(limits.max_followers);
    let (stopping, stop) = watch::channel(false);
    // Every handshake tells whether the worker listens now (at most
    // `worker::MAX_AGE` old), not as of the last re-probe.
    let worker = caps
        .borrow()
        .worker_port
        .map(|p| Arc::new(crate::worker::WorkerCheck::new(p)));
    // What the streams' pulses digest: the same caps a handshake would get.
    let facts = follow::Facts::new(Arc::clone(&caps), worker.clone());
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
                proved.proved(x.1.ip());
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
            let Some(gone) = evict::victim(&seen).and_then(|k| live.remove(open[k])) else {
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
            (
                Arc::clone(&followers),
                stop.clone(),
                limits.follow_idle,
                facts.clone(),
            ),
        ));
        live.push_back(Live {
            handle,
            ip: peer.ip(),
            spoke,
            held,
        });
    }
    tracing::debug!(in_flight = live.len(), "handshake server stopping");
    // Each liveness stream says bye before the rest is aborted.
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(follow::BYE_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.shutdown().await;
}

/// A connection being served: its task, its source address, whether its
/// client has sent a first line yet, and whether it is out of the
/// connection limit's reach (it holds the measurement lock, or is a
/// liveness stream: both have bounds of their own).
struct Live {
    handle: AbortHandle,
    ip: IpAddr,
    spoke: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
}

/// What an agent answers with: the cluster key it proves, and its own node
/// key it signs with.
pub type Credentials = (Option<Key>, Option<Arc<NodeKey>>);

/// Where a liveness stream goes: the streams held, the agent's stop, the
/// idle limit.
type FollowWith = (
    Arc<follow::Followers>,
    watch::Receiver<bool>,
    Duration,
    follow::Facts,
);

/// One connection, bounded in time; its outcome goes to the debug log only,
/// since a flood of hostile connections must not become a flood of log lines.
#[allow(clippy::too_many_arguments)]
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    caps: Arc<NodeCaps>,
    (key, node_key): Credentials,
    advertised: Arc<[SocketAddr]>,
    timeout: Duration,
    (gate, held, spoke): (Arc<crate::measure::Gate>, Arc<AtomicBool>, Arc<AtomicBool>),
    (followers, stop, idle, facts): FollowWith,
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
        Ok(Ok(Some(Handoff::Follow(mut conn, asked)))) => {
            // A keyed agent's stream first proves its coordinator, still
            // under the handshake's bound and limit: a slot is never
            // given to a stranger.
            if let (Some(key), Some((nonce, reply))) = (key.as_ref(), asked) {
                let proved = follow::proved(&mut conn, key, &nonce, reply.as_bytes());
                match tokio::time::timeout(timeout, proved).await {
                    Ok(Ok(())) => {}
                    Ok(Err(why)) => {
                        tracing::debug!(%peer, "{why}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "liveness stream refused: no stream proof within {} ms", timeout.as_millis());
                        return;
                    }
                }
            }
            // Out of the connection limit's reach: the streams have their own.
            held.store(true, Ordering::Relaxed);
            let why = follow::serve(conn, peer.ip(), followers, (stop, idle), facts).await;
            tracing::debug!(%peer, "{why}");
        }
        Ok(Ok(Some(Handoff::Measure(conn, line)))) => {
            let served = if handshake::path_check::is_path_request(&line) {
                let path = crate::path_check::serve_path(
                    conn,
                    &line,
                    key.as_ref(),
                    &gate,
                    &on,
                    timeout,
                    &held,
                );
                path.await
            } else if handshake::measure_peer::is_peer_request(&line) {
                let peer = crate::peer_measure::serve_peer(
                    conn,
                    &line,
                    key.as_ref(),
                    &gate,
                    &on,
                    timeout,
                    &held,
                );
                peer.await
            } else {
                crate::measure::serve(conn, &line, key.as_ref(), &gate, &on, timeout, &held).await
            };
            match served {
                Ok(what) => tracing::debug!(%peer, "{what}"),
                Err(why) => tracing::debug!(%peer, "{why}"),
            }
        }
    }
}

/// A connection handed back to run outside the handshake's time bound: a
/// measurement request (with its first line), or a liveness stream whose
/// follow hello was answered (with that hello's nonce and the reply, which
/// a keyed agent's coordinator must prove it holds the key for).
enum Handoff {
    Measure(BufReader<TcpStream>, Vec<u8>),
    Follow(BufReader<TcpStream>, Option<(handshake::Nonce, String)>),
}

/// Reads one hello line (at most [`MAX_HELLO_BYTES`]) and writes the reply,
/// or an error line for a malformed hello. Longer input is dropped without a
/// word: whoever sends it is not a coordinator. A measurement request is
/// returned, unanswered, with its connection; so is a follow hello, once
/// answered.
async fn exchange(
    stream: TcpStream,
    caps: &NodeCaps,
    key: Option<&Key>,
    node_key: Option<&NodeKey>,
    on: &handshake::Binding,
    spoke: &AtomicBool,
) -> Result<Option<Handoff>, String> {
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
    if handshake::measure::is_request(&line)
        || handshake::measure_peer::is_peer_request(&line)
        || handshake::path_check::is_path_request(&line)
    {
        return Ok(Some(Handoff::Measure(conn, line)));
    }
    let follow = handshake::parse_hello(&line)
        .ok()
        .filter(|h| h.follow)
        .map(|h| h.nonce);
    let (out, refused) = match handshake::answer_signed(&line, caps, key, node_key, on) {
        Ok(reply) => (reply, None),
        Err(e) => (e.to_line(), Some(e)),
    };
    let wr = conn.get_mut();
    wr.write_all(out.as_bytes())
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    if let (Some(nonce), None) = (follow, &refused) {
        let asked = key.map(|_| (nonce, out));
        return Ok(Some(Handoff::Follow(conn, asked)));
    }
    let _ = wr.shutdown().await;
    match refused {
        Some(e) => Err(format!("refused hello: {e}")),
        None => Ok(None),
    }
}

mod evict;
mod follow;
#[cfg(test)]
mod tests;
