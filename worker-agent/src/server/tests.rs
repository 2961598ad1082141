//! Unit tests of the handshake server: limits, eviction, proofs, hostile clients.

use super::evict::victim;
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
            (cluster.clone(), Some(Arc::new(node.clone()))),
            vec![],
            Limits::default(),
            crate::proved::ProvedPeers::default(),
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

/// Guards against evicting a keyed check: a flood of idle connections from one
/// address closed a coordinator's keyed check under way (oldest out). Now the
/// flooder's own connections make the room.
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

mod follow;
