//! The agent's side of link measurement, against the real server on
//! loopback: the proof, the limits, one at a time, and old agents.

use crate::server::{serve_with, Limits};
use rlx_proto::caps::NodeCaps;
use rlx_proto::handshake::measure::{Request, MAX_BYTES, MAX_MS, MAX_PINGS};
use rlx_proto::handshake::{measure_link, MeasureError};
use rlx_proto::keys::Key;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const STEP: Duration = Duration::from_secs(2);

fn key(b: u8) -> Key {
    Key::from_bytes([b; 32])
}

/// A short request: loopback is fast, the tests need only the exchange.
fn small() -> Request {
    Request {
        pings: 3,
        up_bytes: 1 << 20,
        up_ms: 50,
        down_bytes: 1 << 20,
        down_ms: 50,
    }
}

async fn agent(key: Option<Key>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tx = Arc::new(
        watch::channel(Arc::new(NodeCaps {
            id: "0123456789abcdef".into(),
            ..Default::default()
        }))
        .0,
    );
    tokio::spawn(async move {
        serve_with(
            listener,
            tx,
            key,
            vec![],
            Limits::default(),
            std::future::pending::<()>(),
        )
        .await
    });
    addr
}

/// A raw client up to the agent's go-ahead: the request, the challenge
/// and a prove line without a proof. Returns the connection and the
/// agent's answer to the prove line.
async fn up_to_ready(addr: SocketAddr, req: &Request) -> (BufReader<TcpStream>, String) {
    let mut s = BufReader::new(TcpStream::connect(addr).await.unwrap());
    s.get_mut().write_all(req.line().as_bytes()).await.unwrap();
    let mut challenge = String::new();
    s.read_line(&mut challenge).await.unwrap();
    assert!(
        challenge.starts_with("{\"rlx\":\"challenge\""),
        "{challenge}"
    );
    s.get_mut()
        .write_all(b"{\"rlx\":\"prove\"}\n")
        .await
        .unwrap();
    let mut answer = String::new();
    s.read_line(&mut answer).await.unwrap();
    (s, answer)
}

#[tokio::test]
async fn a_key_holder_measures_a_keyed_agent() {
    let addr = agent(Some(key(1))).await;
    let m = measure_link(addr, Some(&key(1)), &small(), STEP, "0.1.0")
        .await
        .unwrap();
    assert_eq!(m.rtt_samples_ms.len(), 3);
    assert!(
        m.rtt_ms > 0.0 && m.up_mbps > 0.0 && m.down_mbps > 0.0,
        "{m:?}"
    );
    assert!(m.up_bytes > 0 && m.up_bytes <= 1 << 20, "{m:?}");
    assert!(m.down_bytes > 0 && m.down_bytes <= 1 << 20, "{m:?}");
}

/// Guards against measuring for anyone who asks when the agent holds a
/// key: without a proof, or with another key's, it refuses and says why.
#[tokio::test]
async fn a_keyed_agent_refuses_a_measurement_without_a_valid_proof() {
    let addr = agent(Some(key(1))).await;
    let (_s, answer) = up_to_ready(addr, &small()).await;
    assert!(
        answer.starts_with("{\"rlx\":\"error\"") && answer.contains("carries no proof"),
        "{answer}"
    );
    let err = measure_link(addr, Some(&key(2)), &small(), STEP, "0.1.0")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MeasureError::Refused { why, .. } if why.contains("does not verify")),
        "{err}"
    );
    let err = measure_link(addr, None, &small(), STEP, "0.1.0")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("key_file"), "{err}");
}

/// Guards the one-test-at-a-time rule: while one measurement holds the
/// agent, a second is refused as busy with the reason, and the agent
/// measures again once the first ended.
#[tokio::test]
async fn a_second_measurement_while_one_runs_is_refused_as_busy() {
    let addr = agent(None).await;
    let (first, answer) = up_to_ready(addr, &small()).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    let err = measure_link(addr, None, &small(), STEP, "0.1.0")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MeasureError::Refused { why, .. } if why.starts_with("busy")),
        "{err}"
    );
    drop(first);
    let mut last = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        match measure_link(addr, None, &small(), STEP, "0.1.0").await {
            Ok(_) => return,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never free again: {last:?}");
}

/// Guards the agent's hard limits: an oversized request is granted only
/// the limits, and an upload beyond what was granted is cut off with the
/// reason rather than read.
#[tokio::test]
async fn the_agents_limits_hold_whatever_the_request_says() {
    let addr = agent(None).await;
    let huge = Request {
        pings: 1000,
        up_bytes: u64::MAX,
        up_ms: 3_600_000,
        down_bytes: u64::MAX,
        down_ms: 3_600_000,
    };
    let (_s, answer) = up_to_ready(addr, &huge).await;
    let granted: Request = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (
            granted.pings,
            granted.up_bytes,
            granted.up_ms,
            granted.down_ms
        ),
        (MAX_PINGS, MAX_BYTES, MAX_MS, MAX_MS),
        "{answer}"
    );

    let tiny = Request {
        pings: 1,
        up_bytes: 1000,
        ..small()
    };
    let (mut s, answer) = up_to_ready(agent(None).await, &tiny).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    s.get_mut().write_all(b"p").await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    let _ = s.get_mut().write_all(&[0u8; 100_000]).await;
    let mut rest = String::new();
    let _ = tokio::time::timeout(STEP, s.read_line(&mut rest)).await;
    assert!(
        rest.contains("sent more than the 1000 bytes granted"),
        "{rest:?}"
    );

    let garbage = b"{\"rlx\":\"measure\",\"v\":1,\"pings\":\"many\"}\n";
    let mut s = TcpStream::connect(agent(None).await).await.unwrap();
    s.write_all(garbage).await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(STEP, s.read_to_string(&mut out)).await;
    assert!(
        out.starts_with("{\"rlx\":\"error\"") && out.contains("a measure request is"),
        "{out}"
    );
}

/// Guards the old-agent path: an agent that predates measurement answers
/// the request as a bad hello, and the coordinator says which version
/// cannot measure instead of a protocol error.
#[tokio::test]
async fn an_agent_that_predates_measurement_is_reported_by_version() {
    let old = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = old.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = old.accept().await {
            let mut s = BufReader::new(s);
            let mut line = Vec::new();
            let _ = s.read_until(b'\n', &mut line).await;
            // What an agent of the previous version does with any first line.
            let reply = match rlx_proto::handshake::parse_hello(&line) {
                Err(e) => e.to_line(),
                Ok(_) => String::new(),
            };
            let _ = s.get_mut().write_all(reply.as_bytes()).await;
        }
    });
    let err = measure_link(addr, None, &small(), STEP, "0.0.9")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MeasureError::Unsupported { version, .. } if version == "0.0.9"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("link measurement not supported by agent version 0.0.9"),
        "{err}"
    );
}
