//! The agent's side of link measurement, against the real server on
//! loopback: the proof, the limits, one at a time, and old agents.

use crate::measure::{Policy, Rules};
use crate::server::{serve_with, Limits};
use rlx_proto::caps::NodeCaps;
use rlx_proto::handshake::measure::{Request, END_MARK, MAX_BYTES, MAX_MS, MAX_PINGS};
use rlx_proto::handshake::{measure_link, MeasureError};
use rlx_proto::keys::Key;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub(super) const STEP: Duration = Duration::from_secs(2);

pub(super) fn key(b: u8) -> Key {
    Key::from_bytes([b; 32])
}

/// A short request: loopback is fast, the tests need only the exchange
/// (and enough bytes for a window a rate can be computed over).
pub(super) fn small() -> Request {
    Request {
        pings: 3,
        up_bytes: MAX_BYTES,
        up_ms: 50,
        down_bytes: MAX_BYTES,
        down_ms: 50,
        end_mark: true,
        udp: None,
        transfers: true,
        early_stop: true,
    }
}

/// Rules that let anyone measure a keyless agent: what the tests of the
/// exchange itself need.
fn open() -> Rules {
    Rules {
        policy: Policy::Any,
        ..Rules::default()
    }
}

pub(super) async fn agent(key: Option<Key>) -> SocketAddr {
    agent_with(key, open(), Limits::default()).await
}

async fn agent_with(key: Option<Key>, rules: Rules, limits: Limits) -> SocketAddr {
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
            Limits {
                measure: rules,
                ..limits
            },
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
    let most = MAX_BYTES + END_MARK.len() as u64;
    assert!(m.up_bytes > 0 && m.up_bytes <= most, "{m:?}");
    assert!(m.down_bytes > 0 && m.down_bytes <= most, "{m:?}");
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
        end_mark: true,
        udp: None,
        transfers: true,
        early_stop: true,
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

/// Guards the secure default (docs/security.md, "Link measurement"): an
/// agent without a key, started without options, no longer measures for
/// anyone who asks; it refuses before moving a byte and says how to allow
/// it, and `--measure any` lets anyone measure again.
#[tokio::test]
async fn a_keyless_agent_refuses_measurement_by_default_and_says_how_to_allow_it() {
    let addr = agent_with(None, Rules::default(), Limits::default()).await;
    let err = measure_link(addr, None, &small(), STEP, "0.1.0")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MeasureError::Refused { why, .. }
            if why.contains("no cluster key") && why.contains("--measure any")),
        "{err}"
    );
    let open_agent = agent(None).await;
    assert!(measure_link(open_agent, None, &small(), STEP, "0.1.0")
        .await
        .is_ok());
}

/// Guards `--measure off`: every request is refused with the reason, a key
/// holder's too.
#[tokio::test]
async fn an_agent_with_measurement_off_refuses_even_a_key_holder() {
    let off = Rules {
        policy: Policy::Off,
        ..Rules::default()
    };
    for (k, rules) in [(Some(key(1)), off), (None, off)] {
        let addr = agent_with(k.clone(), rules, Limits::default()).await;
        let err = measure_link(addr, k.as_ref(), &small(), STEP, "0.1.0")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, MeasureError::Refused { why, .. } if why.contains("--measure off")),
            "{err}"
        );
    }
}

/// Guards the per-source limit: a source that used its measurements is
/// refused with the time to wait, before anything moves.
#[tokio::test]
async fn a_source_over_its_rate_is_refused_with_the_time_to_wait() {
    let rules = Rules {
        per_minute: 2,
        ..open()
    };
    let addr = agent_with(None, rules, Limits::default()).await;
    for i in 0..2 {
        let r = measure_link(addr, None, &small(), STEP, "0.1.0").await;
        assert!(r.is_ok(), "measurement {i}: {r:?}");
    }
    let err = measure_link(addr, None, &small(), STEP, "0.1.0")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MeasureError::Refused { why, .. }
            if why.contains("rate limit") && why.contains("127.0.0.1") && why.contains("try again in")),
        "{err}"
    );
}

/// A key holder gets 16 times a stranger's budget (a link map measures
/// each box from every other), and a measurement without transfers (the
/// map's quiet phase) is charged to a budget of its own: neither leaves a
/// key holder refused where a stranger's two would be all.
#[tokio::test]
async fn a_key_holder_and_a_quiet_measurement_have_budgets_of_their_own() {
    let rules = Rules {
        per_minute: 2,
        ..Rules::default()
    };
    let addr = agent_with(Some(key(1)), rules, Limits::default()).await;
    for i in 0..6 {
        let r = measure_link(addr, Some(&key(1)), &small(), STEP, "0.1.0").await;
        assert!(r.is_ok(), "keyed measurement {i}: {r:?}");
    }
    let quiet = Request {
        transfers: false,
        ..small()
    };
    for i in 0..40 {
        let r = measure_link(addr, Some(&key(1)), &quiet, STEP, "0.1.0").await;
        assert!(r.is_ok(), "quiet measurement {i}: {r:?}");
    }
    // The keyed budget is 32 here: it ends too.
    let mut refused = None;
    for _ in 0..40 {
        if let Err(e) = measure_link(addr, Some(&key(1)), &small(), STEP, "0.1.0").await {
            refused = Some(e);
            break;
        }
    }
    assert!(
        matches!(&refused, Some(MeasureError::Refused { why, .. }) if why.contains("rate limit")),
        "{refused:?}"
    );
}

/// Guards the bound on the lock (it was held about 28 s by a client
/// pausing under the per-step timeout): a measurement that runs past the
/// hold limit is aborted with the reason, and the next one is served at
/// once.
#[tokio::test]
async fn a_measurement_held_past_the_hold_limit_is_aborted_and_the_lock_freed() {
    let rules = Rules {
        max_hold: Duration::from_millis(300),
        ..open()
    };
    let addr = agent_with(None, rules, Limits::default()).await;
    let slow = Request {
        pings: MAX_PINGS,
        ..small()
    };
    let (mut s, answer) = up_to_ready(addr, &slow).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    let t = std::time::Instant::now();
    // One round trip every 200 ms: each within the step, all far past the
    // hold limit.
    let mut rest = String::new();
    for _ in 0..MAX_PINGS {
        if s.get_mut().write_all(b"p").await.is_err() {
            break;
        }
        let mut b = [0u8; 1];
        if tokio::time::timeout(STEP, s.read_exact(&mut b))
            .await
            .is_err()
        {
            break;
        }
        if b[0] != b'p' {
            rest.push(b[0] as char);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = tokio::time::timeout(STEP, s.read_line(&mut rest)).await;
    assert!(
        rest.contains("aborted") && rest.contains("300 ms"),
        "{rest:?}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "aborted at the limit, not after every round trip (1.8 s): {:?}",
        t.elapsed()
    );
    let r = measure_link(addr, None, &small(), STEP, "0.1.0").await;
    assert!(r.is_ok(), "the lock is free again: {r:?}");
}

/// Guards the lock against a client that stops reading (tried live): it
/// started a download and read nothing more, so when the hold limit fired
/// the abort notice's write waited on its full socket with the lock still
/// held, and every other measurement was refused as busy for as long as the
/// client kept its connection. Now the lock is freed before the notice and
/// the notice waits at most `NOTICE_WAIT`: another measurement gets through
/// just after the hold limit, while the stalled client is still connected.
#[tokio::test]
async fn a_client_that_stops_reading_its_download_holds_the_lock_no_longer_than_the_hold_limit() {
    let hold = Duration::from_millis(1500);
    let rules = Rules {
        max_hold: hold,
        ..open()
    };
    let addr = agent_with(None, rules, Limits::default()).await;
    let req = Request {
        pings: 1,
        up_bytes: 200_000,
        up_ms: 50,
        down_bytes: MAX_BYTES,
        down_ms: MAX_MS,
        end_mark: true,
        udp: None,
        transfers: true,
        early_stop: true,
    };
    let t = std::time::Instant::now();
    let (mut s, answer) = up_to_ready(addr, &req).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    s.get_mut().write_all(b"p").await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    for _ in 0..20 {
        s.get_mut().write_all(&[0u8; 10_000]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    s.get_mut().write_all(END_MARK).await.unwrap();
    s.get_mut().shutdown().await.unwrap();
    let mut up = String::new();
    tokio::time::timeout(STEP, s.read_line(&mut up))
        .await
        .expect("the upload's figures")
        .unwrap();
    assert!(up.starts_with("{\"rlx\":\"up\""), "{up}");
    // The download now runs (64 MiB for 1 s, then 3 s of drain grace: far
    // past the hold limit), and this client reads none of it: `s` stays
    // open and unread until the end of the test.
    let mut last = None;
    let deadline = t + hold + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        match measure_link(addr, None, &small(), STEP, "0.1.0").await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        last.is_none(),
        "another measurement still refused {:?} after the stalled one started, with a hold \
         limit of {hold:?}: {last:?}",
        t.elapsed()
    );
    // And the stalled connection was closed by the agent: draining what it
    // queued ends at the close, not at our timeout.
    let mut sink = Vec::new();
    let drained = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut sink)).await;
    assert!(
        drained.is_ok(),
        "the agent closed the stalled connection (read {} bytes, then nothing for 10 s)",
        sink.len()
    );
}

/// Guards the eviction that cut measurements short: a flood of connections
/// beyond the server's limit does not close the one measurement holding
/// the lock.
#[tokio::test]
async fn a_connection_flood_does_not_evict_the_running_measurement() {
    let limits = Limits {
        max_connections: 4,
        timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let addr = agent_with(None, open(), limits).await;
    let (mut s, answer) = up_to_ready(addr, &small()).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    let mut flood = Vec::new();
    for _ in 0..12 {
        flood.push(TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.get_mut().write_all(b"p").await.unwrap();
    let mut b = [0u8; 1];
    let echoed = tokio::time::timeout(STEP, s.read_exact(&mut b)).await;
    assert!(
        matches!(echoed, Ok(Ok(_))) && b == *b"p",
        "the measurement's connection survived the flood: {echoed:?}"
    );
}

/// Sends `n` raw bytes in `pieces` writes 1 ms apart as the upload after
/// one round trip, optionally with the end mark, half-closes, and returns
/// what the agent says.
async fn upload_raw(n: usize, mark: bool, pieces: usize) -> String {
    let req = Request {
        pings: 1,
        up_ms: 1000,
        ..small()
    };
    let (mut s, answer) = up_to_ready(agent(None).await, &req).await;
    assert!(answer.starts_with("{\"rlx\":\"ready\""), "{answer}");
    s.get_mut().write_all(b"p").await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    for i in 0..pieces {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        s.get_mut().write_all(&vec![0u8; n / pieces]).await.unwrap();
    }
    if mark {
        s.get_mut().write_all(END_MARK).await.unwrap();
    }
    s.get_mut().shutdown().await.unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(STEP, s.read_line(&mut out)).await;
    out
}

/// Guards the agent's side of a cut-short upload: a coordinator's
/// connection that ends without the end mark gets a refusal, never
/// figures.
#[tokio::test]
async fn an_upload_that_ends_without_its_mark_is_refused_not_reported() {
    let out = upload_raw(200_000, false, 4).await;
    assert!(
        out.starts_with("{\"rlx\":\"error\"") && out.contains("without the end mark"),
        "{out}"
    );
}

/// Guards the agent's sense check: a complete upload over too short a
/// window (a burst read at once) gets a refusal naming the window, not a
/// rate.
#[tokio::test]
async fn an_upload_over_too_short_a_window_is_refused_with_the_window() {
    let out = upload_raw(4000, true, 2).await;
    assert!(
        out.starts_with("{\"rlx\":\"error\"") && out.contains("µs window"),
        "{out}"
    );
}

/// A fake agent that follows the protocol up to the download, then sends
/// `down` zero bytes in ten writes `pause` apart and closes without an end
/// mark; `ready_mark` is what its go-ahead says about end marks (an agent
/// predating them says nothing).
async fn cutting_agent(down: usize, ready_mark: bool, pause: Duration) -> SocketAddr {
    use rlx_proto::handshake::measure::{receive, End};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (s, peer) = l.accept().await.unwrap();
        let mut s = BufReader::new(s);
        let mut line = String::new();
        s.read_line(&mut line).await.unwrap();
        let req: Request = serde_json::from_str(&line).unwrap();
        let challenge = format!(
            "{{\"rlx\":\"challenge\",\"v\":1,\"nonce\":\"{}\",\"local\":\"{addr}\",\
             \"peer\":\"{peer}\",\"keyed\":false,\"limits\":{{\"pings\":9,\"bytes\":{MAX_BYTES},\
             \"ms\":1000}}}}\n",
            "00".repeat(32)
        );
        s.get_mut().write_all(challenge.as_bytes()).await.unwrap();
        line.clear();
        s.read_line(&mut line).await.unwrap();
        let g = Request {
            end_mark: ready_mark,
            udp: None,
            ..req.granted()
        };
        let ready = rlx_proto::handshake::measure::Ready::line(g, None);
        s.get_mut().write_all(ready.as_bytes()).await.unwrap();
        for _ in 0..g.pings {
            let mut b = [0u8; 1];
            s.read_exact(&mut b).await.unwrap();
            s.get_mut().write_all(&b).await.unwrap();
        }
        let deadline = tokio::time::Instant::now() + STEP;
        let got = receive(&mut s, g.up_bytes, deadline, true, req.end_mark)
            .await
            .unwrap();
        let up = got.meter.result();
        let up_line = format!(
            "{{\"rlx\":\"up\",{}\n",
            &serde_json::to_string(&up).unwrap()[1..]
        );
        s.get_mut().write_all(up_line.as_bytes()).await.unwrap();
        if got.end == End::Steady {
            let _ = receive(&mut s, g.up_bytes, deadline, false, req.end_mark).await;
        }
        for _ in 0..10 {
            if s.get_mut().write_all(&vec![0u8; down / 10]).await.is_err() {
                return;
            }
            tokio::time::sleep(pause).await;
        }
        // Closed like an evicted connection: no end mark.
    });
    addr
}

/// Guards the coordinator's side (a stranger who evicted the measurement's
/// connection made a truncated download count): a download that closes without
/// the agent's end mark is a failure with the reason, and so is one from an
/// agent predating the mark that stops far short of its window.
#[tokio::test]
async fn a_download_cut_short_is_a_failure_not_a_result() {
    let req = Request {
        down_ms: 1000,
        ..small()
    };
    for ready_mark in [true, false] {
        let addr = cutting_agent(400_000, ready_mark, Duration::from_millis(2)).await;
        let err = measure_link(addr, None, &req, STEP, "0.1.0")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, MeasureError::Failed { why, .. } if why.contains("cut short")),
            "end mark {ready_mark}: {err}"
        );
    }
}

/// Guards compatibility with agents that predate the end mark: one that
/// sent for its whole window and closed is still measured.
#[tokio::test]
async fn an_agent_that_predates_end_marks_is_measured_when_it_sent_its_window() {
    let req = Request {
        down_ms: 60,
        ..small()
    };
    let addr = cutting_agent(1 << 20, false, Duration::from_millis(8)).await;
    let r = measure_link(addr, None, &req, STEP, "0.1.0").await;
    assert!(r.is_ok(), "{r:?}");
}

/// Guards compatibility with coordinators that predate the end mark: a
/// request without `end_mark` is served without marks, and measured.
#[tokio::test]
async fn a_coordinator_that_predates_end_marks_is_still_served() {
    let addr = agent(None).await;
    let old = Request {
        end_mark: false,
        udp: None,
        ..small()
    };
    let (_s, answer) = up_to_ready(addr, &old).await;
    assert!(
        answer.starts_with("{\"rlx\":\"ready\"") && !answer.contains("end_mark"),
        "{answer}"
    );
    let r = measure_link(agent(None).await, None, &old, STEP, "0.1.0").await;
    assert!(r.is_ok(), "{r:?}");
}

/// Guards the pre-launch check's rule (docs/security.md): a listener on a
/// port of the asker's choosing, and a connection with a payload to an
/// address of its choosing, are for holders of the cluster key only. An
/// agent without a key refuses both path requests, even when it lets
/// anyone measure (`--measure any`), and says how to allow them; a keyed
/// agent refuses a wrong key, and serves the right one end to end.
#[tokio::test]
async fn path_checks_need_the_cluster_key_whatever_measure_allows() {
    use rlx_proto::handshake::path_check::{path_listen, path_probe, Outcome};
    const TOKEN: &str = "00112233445566778899aabbccddeeff";
    // A free port of this box for the stand-in (from 1024 up, by the OS).
    let at = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();

    let keyless = agent(None).await;
    let refused = |r: Result<(), MeasureError>, what: &str| match r {
        Err(MeasureError::Refused { why, .. }) => why,
        other => panic!("{what}: expected a refusal, got {other:?}"),
    };
    let listen = path_listen(keyless, &key(1), at, TOKEN, 1000, STEP).await;
    let why = refused(listen.map(drop), "keyless path_listen");
    assert!(
        why.contains("no cluster key") && why.contains("key_file"),
        "{why}"
    );
    let probe = path_probe(keyless, &key(1), (at, None), TOKEN, 1000, STEP).await;
    let why = refused(probe.map(drop), "keyless path_probe");
    assert!(why.contains("no cluster key"), "{why}");

    let keyed = agent_with(Some(key(1)), Rules::default(), Limits::default()).await;
    let wrong = path_listen(keyed, &key(2), at, TOKEN, 1000, STEP).await;
    refused(wrong.map(drop), "path_listen with the wrong key");

    let stand_in = path_listen(keyed, &key(1), at, TOKEN, 2000, STEP)
        .await
        .expect("the key holder's stand-in");
    let probed = path_probe(keyed, &key(1), (at, None), TOKEN, 100_000, STEP)
        .await
        .expect("the key holder's probe");
    assert!(matches!(probed.outcome, Outcome::Ok { .. }), "{probed:?}");
    drop(stand_in);
}
