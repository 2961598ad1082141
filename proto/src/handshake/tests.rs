use super::*;
use crate::caps::{DeviceInfo, NodeCaps};
use crate::keys::{Key, KeyRing};
use proptest::prelude::*;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub(super) fn caps() -> NodeCaps {
    NodeCaps {
        id: "0123456789abcdef".into(),
        hostname: "gpu-a".into(),
        os: "linux".into(),
        cores: 8,
        ram_total: 16 << 30,
        ram_avail: 8 << 30,
        devices: vec![DeviceInfo {
            device: "cuda".into(),
            name: "RTX".into(),
            mem_bytes: 24 << 30,
            unified: false,
            gflops: 0.0,
            available: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub(super) fn key(b: u8) -> Key {
    Key::from_bytes([b; 32])
}

/// The agent's address, as the coordinator dials it.
pub(super) fn addr() -> SocketAddr {
    "10.0.0.2:9100".parse().unwrap()
}

/// The coordinator's end of the connection.
pub(super) fn from() -> SocketAddr {
    "10.0.0.1:40312".parse().unwrap()
}

/// The connection as the agent sees it when nothing is in between.
pub(super) fn on() -> Binding {
    Binding {
        local: addr(),
        peer: from(),
        advertised: vec![],
    }
}

/// A fixed vector, also computed independently with Python's hmac module
/// (see docs/protocol.md), so the MAC input layout cannot drift.
#[test]
fn the_proof_matches_the_documented_test_vector() {
    let nonce = Nonce::from_bytes([0x11; 32]);
    let proof = prove(
        &key(0x42),
        &nonce,
        "0123456789abcdef",
        br#"{"cores":1}"#,
        None,
    );
    assert_eq!(
        proof,
        "02457afea2a9eaa4ea2edf1995a4c039f10afccb85334d859c67972ab1c2750f"
    );
}

#[test]
fn a_proof_verifies_only_for_its_own_inputs() {
    let n = Nonce::from_bytes([1; 32]);
    let p = prove(&key(1), &n, "0123456789abcdef", b"{}", None);
    assert!(verify(&key(1), &n, "0123456789abcdef", b"{}", None, &p));
    assert!(verify(
        &key(1),
        &n,
        "0123456789abcdef",
        b"{}",
        None,
        &p.to_uppercase()
    ));
    assert!(
        !verify(&key(2), &n, "0123456789abcdef", b"{}", None, &p),
        "other key"
    );
    assert!(
        !verify(
            &key(1),
            &Nonce::from_bytes([2; 32]),
            "0123456789abcdef",
            b"{}",
            None,
            &p
        ),
        "other nonce"
    );
    assert!(
        !verify(&key(1), &n, "0123456789abcdee", b"{}", None, &p),
        "other id"
    );
    assert!(
        !verify(&key(1), &n, "0123456789abcdef", b"{ }", None, &p),
        "other caps bytes"
    );
    assert!(
        !verify(&key(1), &n, "", b"0123456789abcdef{}", None, &p),
        "length prefixes separate id and caps"
    );
    assert!(
        !verify(&key(1), &n, "0123456789abcdef", b"{}", None, "zz"),
        "malformed proof"
    );
}

#[test]
fn the_agent_answer_round_trips_through_the_client_check() {
    let n = Nonce::random().unwrap();
    let reply = answer(hello_line(&n).as_bytes(), &caps(), None, &on()).unwrap();
    assert!(
        reply.ends_with('\n') && !reply.trim_end().contains('\n'),
        "one line"
    );
    let r = check_reply(
        addr(),
        from(),
        reply.as_bytes(),
        &n,
        None,
        Some("0123456789abcdef"),
    )
    .unwrap();
    assert_eq!(r.caps, caps());
    assert_eq!(r.key_index, None);
    assert!(!reply.contains("proof"), "no key, no proof");
}

#[test]
fn a_keyed_answer_proves_and_rotation_accepts_an_older_key() {
    let n = Nonce::random().unwrap();
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(7)), &on()).unwrap();
    let ring = KeyRing::new(vec![key(8), key(7)]).unwrap();
    let r = check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).unwrap();
    assert_eq!(r.key_index, Some(1), "proved with the second (older) key");
}

#[test]
fn each_refusal_has_its_own_reason() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let plain = answer(hello_line(&n).as_bytes(), &caps(), None, &on()).unwrap();
    let err = check_reply(addr(), from(), plain.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::NoProof { .. }), "{err}");

    let other = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(2)), &on()).unwrap();
    let err = check_reply(addr(), from(), other.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(
        matches!(err, HandshakeError::WrongKey { keys: 1, .. }),
        "{err}"
    );

    let old = Nonce::random().unwrap();
    let captured = answer(hello_line(&old).as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    let err = check_reply(addr(), from(), captured.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");

    let mine = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    let err = check_reply(
        addr(),
        from(),
        mine.as_bytes(),
        &n,
        Some(&ring),
        Some("ffffffffffffffff"),
    )
    .unwrap_err();
    assert!(matches!(err, HandshakeError::IdMismatch { .. }), "{err}");

    // A replayer that rewrites the echo to our nonce only gets "wrong key".
    let forged = captured.replace(&old.to_hex(), &n.to_hex());
    let err = check_reply(addr(), from(), forged.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err}");
}

#[test]
fn tampered_caps_do_not_verify() {
    let n = Nonce::random().unwrap();
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    let tampered = reply.replace("\"cores\":8", "\"cores\":80");
    let err = check_reply(
        addr(),
        from(),
        tampered.as_bytes(),
        &n,
        Some(&KeyRing::single(key(1))),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err}");
}

#[test]
fn absurd_caps_are_bad_caps_naming_the_field() {
    let n = Nonce::random().unwrap();
    let line = r#"{"rlx":"caps","v":1,"caps":{"os":"linux","cores":1000000,"ram_total":1}}"#;
    let err = check_reply(addr(), from(), line.as_bytes(), &n, None, None).unwrap_err();
    assert!(
        matches!(err, HandshakeError::BadCaps { .. }) && err.to_string().contains("cores"),
        "{err}"
    );
}

#[test]
fn garbage_and_foreign_protocols_are_not_rlx() {
    let n = Nonce::random().unwrap();
    for line in [
        &b"SSH-2.0-OpenSSH_9.2p1\r\n"[..],
        b"\xff\xfe",
        b"{}",
        b"{\"rlx\":\"caps\",\"v\":1}",
    ] {
        let err = check_reply(addr(), from(), line, &n, None, None).unwrap_err();
        assert!(matches!(err, HandshakeError::NotRlx { .. }), "{err}");
    }
    let err =
        check_reply(addr(), from(), b"SSH-2.0-OpenSSH_9.2p1\r\n", &n, None, None).unwrap_err();
    assert!(
        err.to_string().contains("SSH-2.0"),
        "the report shows what answered: {err}"
    );
}

#[test]
fn another_version_or_an_error_line_is_incompatible() {
    let n = Nonce::random().unwrap();
    let v3 = format!("{{\"rlx\":\"caps\",\"v\":3,\"caps\":{}}}", caps().to_json());
    let err = check_reply(addr(), from(), v3.as_bytes(), &n, None, None).unwrap_err();
    assert!(matches!(err, HandshakeError::Incompatible { .. }), "{err}");
    let refused = HelloError::new("nonce must be 64 hex characters").to_line();
    let err = check_reply(addr(), from(), refused.as_bytes(), &n, None, None).unwrap_err();
    assert!(err.to_string().contains("nonce must be"), "{err}");
}

#[test]
fn malformed_hellos_are_refused_with_a_reason() {
    for (hello, why) in [
        (&b"hello\n"[..], "not"),
        (b"{\"rlx\":\"caps\",\"v\":1,\"nonce\":\"00\"}", "hello"),
        (b"{\"rlx\":\"hello\",\"v\":0,\"nonce\":\"00\"}", "version 0"),
        (b"{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"00\"}", "64 hex"),
        (b"\xff", "UTF-8"),
    ] {
        let err = answer(hello, &caps(), None, &on()).unwrap_err();
        assert!(err.to_string().contains(why), "{err}");
        assert!(
            err.to_line().starts_with("{\"rlx\":\"error\""),
            "{}",
            err.to_line()
        );
    }
    // A later client's extra fields and higher version are answered.
    let n = Nonce::random().unwrap();
    let future = format!(
        "{{\"rlx\":\"hello\",\"v\":3,\"nonce\":\"{}\",\"want\":\"more\"}}\r\n",
        n.to_hex()
    );
    assert!(answer(future.as_bytes(), &caps(), None, &on()).is_ok());
}

fn in_cluster(name: &str) -> NodeCaps {
    NodeCaps {
        cluster: Some(name.into()),
        ..caps()
    }
}

#[test]
fn a_hello_without_a_cluster_is_the_plain_hello_line_byte_for_byte() {
    let n = Nonce::from_bytes([0xab; 32]);
    assert_eq!(
        hello_line(&n),
        format!(
            "{{\"rlx\":\"hello\",\"v\":2,\"nonce\":\"{}\"}}\n",
            n.to_hex()
        ),
        "coordinators without a cluster send the three fields older agents expect"
    );
    assert_eq!(
        hello_line_for(&n, Some("lab")),
        format!(
            "{{\"rlx\":\"hello\",\"v\":2,\"nonce\":\"{}\",\"cluster\":\"lab\"}}\n",
            n.to_hex()
        )
    );
    let h = parse_hello(hello_line_for(&n, Some("lab")).as_bytes()).unwrap();
    assert_eq!((h.v, h.nonce, h.cluster.as_deref()), (2, n, Some("lab")));
}

#[test]
fn an_agent_in_a_cluster_refuses_a_hello_for_another_and_the_client_says_so() {
    let n = Nonce::random().unwrap();
    let err = answer(
        hello_line_for(&n, Some("prod")).as_bytes(),
        &in_cluster("lab"),
        Some(&key(1)),
        &on(),
    )
    .unwrap_err();
    let line = err.to_line();
    assert!(
        line.starts_with("{\"rlx\":\"error\"") && line.contains("\"cluster\":\"lab\""),
        "{line}"
    );
    assert!(
        !line.contains("caps"),
        "no caps for another cluster: {line}"
    );
    let err = check_reply(addr(), from(), line.as_bytes(), &n, None, None).unwrap_err();
    assert_eq!(
        err,
        HandshakeError::OtherCluster {
            addr: addr(),
            theirs: "lab".into()
        }
    );
    assert!(err.to_string().contains("cluster \"lab\""), "{err}");
}

#[test]
fn hellos_without_a_cluster_or_for_the_same_one_are_answered_and_agents_without_one_answer_all() {
    let n = Nonce::random().unwrap();
    for (hello, agent) in [
        (hello_line(&n), in_cluster("lab")),
        (hello_line_for(&n, Some("lab")), in_cluster("lab")),
        (hello_line_for(&n, Some("prod")), caps()),
    ] {
        let reply = answer(hello.as_bytes(), &agent, None, &on())
            .unwrap_or_else(|e| panic!("{hello} to {:?}: {e}", agent.cluster));
        assert!(check_reply(addr(), from(), reply.as_bytes(), &n, None, None).is_ok());
    }
    // An ordinary error line (no "cluster") is still "incompatible".
    let err = check_reply(
        addr(),
        from(),
        HelloError::new("x").to_line().as_bytes(),
        &n,
        None,
        None,
    )
    .unwrap_err();
    assert!(matches!(err, HandshakeError::Incompatible { .. }), "{err}");
}

#[tokio::test]
async fn query_in_cluster_names_the_cluster_and_reports_the_agents() {
    let a = fake_agent(|hello, on| {
        Some(match answer(&hello, &in_cluster("lab"), None, &on) {
            Ok(r) => r.into_bytes(),
            Err(e) => e.to_line().into_bytes(),
        })
    })
    .await;
    let err = query_in_cluster(a, Duration::from_secs(2), None, None, Some("prod"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HandshakeError::OtherCluster { theirs, .. } if theirs == "lab"),
        "{err}"
    );
    let ok = query_in_cluster(a, Duration::from_secs(2), None, None, Some("lab")).await;
    assert_eq!(ok.unwrap().caps.cluster.as_deref(), Some("lab"));
}

#[test]
fn errors_and_debug_output_never_show_the_key() {
    let k = key(0xab);
    let secret = hex::encode([0xabu8; 32]);
    let n = Nonce::random().unwrap();
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&k), &on()).unwrap();
    assert!(!reply.contains(&secret));
    let err = check_reply(
        addr(),
        from(),
        reply.as_bytes(),
        &Nonce::random().unwrap(),
        Some(&KeyRing::single(k)),
        None,
    )
    .unwrap_err();
    assert!(!format!("{err} {err:?}").contains(&secret[..16]));
}

/// Serves `reply(hello, connection)` to every connection on a loopback
/// port; `connection` is what a real agent would bind its proof to.
async fn fake_agent(
    reply: impl Fn(Vec<u8>, Binding) -> Option<Vec<u8>> + Send + Sync + 'static,
) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let reply = std::sync::Arc::new(reply);
    tokio::spawn(async move {
        while let Ok((s, peer)) = l.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                let on = Binding {
                    local: s.local_addr().unwrap(),
                    peer,
                    advertised: vec![],
                };
                let (rd, mut wr) = s.into_split();
                let mut line = Vec::new();
                let _ = BufReader::new(rd).read_until(b'\n', &mut line).await;
                match reply(line, on) {
                    Some(out) => {
                        let _ = wr.write_all(&out).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    a
}

#[tokio::test]
async fn query_gets_verified_caps_from_an_agent() {
    let a = fake_agent(|hello, on| {
        answer(&hello, &caps(), Some(&key(3)), &on)
            .ok()
            .map(String::into_bytes)
    })
    .await;
    let ring = KeyRing::single(key(3));
    let r = query(
        a,
        Duration::from_secs(2),
        Some(&ring),
        Some("0123456789abcdef"),
    )
    .await
    .unwrap();
    assert_eq!(r.caps, caps());
    assert_eq!(r.key_index, Some(0));
}

#[tokio::test]
async fn query_detects_a_replayed_reply() {
    let old = Nonce::random().unwrap();
    let captured = reply_line(&old, &caps(), Some(&key(3)), &on());
    let a = fake_agent(move |_, _| Some(captured.clone().into_bytes())).await;
    let err = query(
        a,
        Duration::from_secs(2),
        Some(&KeyRing::single(key(3))),
        None,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");
}

#[tokio::test]
async fn a_closed_port_is_unreachable_refused() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    let err = query(a, Duration::from_secs(2), None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        HandshakeError::Unreachable {
            addr: a,
            why: ConnectFailure::Refused
        },
        "{err}"
    );
}

#[tokio::test]
async fn a_silent_peer_is_not_rlx_and_cannot_hold_us_past_the_timeout() {
    let a = fake_agent(|_, _| None).await;
    let t = std::time::Instant::now();
    let err = query(a, Duration::from_millis(300), None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, HandshakeError::NotRlx { .. }) && err.to_string().contains("no reply"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn a_trickling_peer_cannot_hold_us_past_the_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        for _ in 0..100 {
            if s.write_all(b"{").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let t = std::time::Instant::now();
    let err = query(a, Duration::from_millis(300), None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no complete reply"), "{err}");
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "took {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn an_endless_reply_is_cut_at_the_size_bound() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        while s.write_all(&chunk).await.is_ok() {}
    });
    let err = query(a, Duration::from_secs(5), None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("longer than"), "{err}");
}

#[tokio::test]
async fn a_peer_that_closes_at_once_is_not_rlx() {
    let a = fake_agent(|_, _| Some(Vec::new())).await;
    let err = query(a, Duration::from_secs(2), None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("without replying"), "{err}");
}

#[tokio::test]
async fn a_full_accept_queue_times_out_as_unreachable() {
    // A listener that never accepts, with its queue filled, drops further
    // SYNs: the connect hangs like one to a firewalled host.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let l = sock.listen(0).unwrap();
    let a = l.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(a)).await
        {
            held.push(s);
        }
    }
    let err = query(a, Duration::from_millis(200), None, None)
        .await
        .unwrap_err();
    let timed_out = matches!(
        err,
        HandshakeError::Unreachable {
            why: ConnectFailure::TimedOut(_),
            ..
        }
    );
    assert!(
        timed_out,
        "a connect to a full queue should time out: {err}"
    );
    assert!(err.to_string().contains("no answer within 200 ms"), "{err}");
}

proptest! {
    #[test]
    fn arbitrary_hello_bytes_never_panic_the_agent(line in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = answer(&line, &caps(), Some(&key(1)), &on());
    }

    #[test]
    fn arbitrary_reply_bytes_never_panic_the_client(line in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let n = Nonce::from_bytes([5; 32]);
        let _ = check_reply(addr(), from(), &line, &n, Some(&KeyRing::single(key(1))), Some("0123456789abcdef"));
        let _ = check_reply(addr(), from(), &line, &n, None, None);
    }

    #[test]
    fn json_shaped_replies_never_panic_the_client(
        v in 0u64..4, rlx in "caps|error|x", nonce in "[0-9a-f]{0,70}", proof in "[0-9a-fA-F]{0,70}",
        caps in "\\{(\"[a-z_]{1,10}\":(-?[0-9]{1,20}|\"[^\"]{0,10}\"|\\[\\]),?){0,6}\\}",
    ) {
        let line = format!("{{\"rlx\":\"{rlx}\",\"v\":{v},\"nonce\":\"{nonce}\",\"caps\":{caps},\"proof\":\"{proof}\"}}");
        let n = Nonce::from_bytes([5; 32]);
        let _ = check_reply(addr(), from(), line.as_bytes(), &n, Some(&KeyRing::single(key(1))), None);
        let _ = check_reply(addr(), from(), line.as_bytes(), &n, None, Some("x"));
    }
}

/// The incarnation rides in the reply's caps object, under the proof: a
/// keyed coordinator reads back the one the agent chose.
#[test]
fn a_reply_carries_the_agents_incarnation_under_its_proof() {
    let n = Nonce::random().unwrap();
    let mut c = caps();
    c.incarnation = Some("9a1b2c3d4e5f6071".into());
    let reply = answer(hello_line(&n).as_bytes(), &c, Some(&key(7)), &on()).unwrap();
    let ring = KeyRing::single(key(7));
    let r = check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).unwrap();
    assert_eq!(r.caps.incarnation.as_deref(), Some("9a1b2c3d4e5f6071"));
}

/// An agent that predates the incarnation sends none: it is still admitted,
/// with no incarnation (watch then cannot tell its restarts).
#[test]
fn a_reply_from_an_agent_without_an_incarnation_is_still_admitted() {
    let n = Nonce::random().unwrap();
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(7)), &on()).unwrap();
    assert!(!reply.contains("incarnation"));
    let ring = KeyRing::single(key(7));
    let r = check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).unwrap();
    assert_eq!(r.caps.incarnation, None);
}

/// A coordinator that predates the incarnation reads the caps object with a
/// type that lacks it, and proves the raw bytes: the extra field is ignored
/// by its parse and covered by its proof.
#[test]
fn a_coordinator_without_the_incarnation_reads_and_proves_a_new_reply() {
    #[derive(serde::Deserialize)]
    struct OldCaps {
        id: String,
        cores: u32,
        ram_total: u64,
    }
    #[derive(serde::Deserialize)]
    struct OldReply<'a> {
        #[serde(borrow)]
        caps: &'a serde_json::value::RawValue,
        proof: String,
    }
    let n = Nonce::random().unwrap();
    let mut c = caps();
    c.incarnation = Some("9a1b2c3d4e5f6071".into());
    let line = reply_line_v1(&n, &c, Some(&key(7)));
    let msg: OldReply<'_> = serde_json::from_str(line.trim_end()).unwrap();
    assert!(msg
        .caps
        .get()
        .contains("\"incarnation\":\"9a1b2c3d4e5f6071\""));
    let old: OldCaps = serde_json::from_str(msg.caps.get()).unwrap();
    assert_eq!(
        (old.id.as_str(), old.cores, old.ram_total),
        (c.id.as_str(), 8, 16 << 30)
    );
    assert!(verify(
        &key(7),
        &n,
        &c.id,
        msg.caps.get().as_bytes(),
        None,
        &msg.proof
    ));
}

mod follow;
