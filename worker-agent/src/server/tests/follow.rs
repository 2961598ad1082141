//! The liveness stream on a real loopback port: pulses, bye, bounds.

use super::*;
use rlx_proto::handshake::{
    follow_hello_line, follow_in_cluster, Heard, MAX_FOLLOWERS, MAX_FOLLOW_LINE, PULSE_INTERVAL,
};
use tokio::io::AsyncBufReadExt;
use tokio::net::TcpSocket;

/// A follow hello sent by hand from `from` (a loopback address of its
/// own): the connection, once the reply line is read.
async fn raw_follower(agent: SocketAddr, from: &str) -> BufReader<TcpStream> {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(agent).await.unwrap();
    let hello = follow_hello_line(&Nonce::random().unwrap(), None);
    s.write_all(hello.as_bytes()).await.unwrap();
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply).await.unwrap();
    assert!(reply.contains("\"caps\""), "{reply}");
    r
}

/// The next line on a hand-made follower, or `None` at its end.
async fn line_of(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut l = String::new();
    match tokio::time::timeout(Duration::from_secs(3), r.read_line(&mut l)).await {
        Ok(Ok(0)) | Ok(Err(_)) => None,
        Ok(Ok(_)) => Some(l),
        Err(_) => panic!("neither a line nor the end within 3 s"),
    }
}

#[tokio::test]
async fn a_follower_gets_the_reply_then_a_pulse_about_every_300_ms() {
    let agent = start(None, Limits::default()).await;
    let (reply, f) = follow_in_cluster(agent.addr, GOOD, None, Some("0123456789abcdef"), None)
        .await
        .unwrap();
    assert_eq!(reply.caps.cores, 8);
    let mut f = f.expect("a stream");
    assert_eq!(f.every(), PULSE_INTERVAL);
    let t = Instant::now();
    for want in 1..=4 {
        assert_eq!(f.next().await, Heard::Pulse { seq: want });
    }
    let took = t.elapsed();
    assert!(
        took >= PULSE_INTERVAL * 3 && took < PULSE_INTERVAL * 6,
        "four pulses after the first took {took:?}"
    );
}

#[tokio::test]
async fn a_ping_asking_for_fewer_pulses_is_answered_at_once_by_a_pulse_at_the_new_pace() {
    let agent = start(None, Limits::default()).await;
    let mut f = raw_follower(agent.addr, "127.0.0.9").await;
    assert!(line_of(&mut f).await.unwrap().contains("\"every_ms\":300"));
    let ask = |ms| rlx_proto::handshake::ping_line_pacing(Some(Duration::from_millis(ms)));
    f.get_mut().write_all(ask(1000).as_bytes()).await.unwrap();
    // Pulses of the old pace may be under way: the new pace is told by
    // the first pulse that carries it, within one old interval.
    let t = Instant::now();
    loop {
        let l = line_of(&mut f).await.unwrap();
        if l.contains("\"every_ms\":1000") {
            break;
        }
        assert!(t.elapsed() < PULSE_INTERVAL * 2, "not at once: {l}");
    }
    let t = Instant::now();
    for _ in 0..2 {
        let l = line_of(&mut f).await.unwrap();
        assert!(l.contains("\"every_ms\":1000"), "{l}");
    }
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_millis(2600),
        "two pulses at the new pace took {took:?}"
    );
    // Asking for more than the agent will give is held to its bounds.
    f.get_mut().write_all(ask(10).as_bytes()).await.unwrap();
    loop {
        let l = line_of(&mut f).await.unwrap();
        if l.contains("\"every_ms\":300") {
            break;
        }
    }
}

#[tokio::test]
async fn the_agent_says_bye_on_its_streams_when_it_stops() {
    let mut agent = start(None, Limits::default()).await;
    let (_, f) = follow_in_cluster(agent.addr, GOOD, None, None, None)
        .await
        .unwrap();
    let mut f = f.unwrap();
    let _ = agent.stop.take().unwrap().send(());
    let got = loop {
        match f.next().await {
            Heard::Pulse { .. } => continue,
            other => break other,
        }
    };
    assert_eq!(got, Heard::Bye);
    agent.task.await.unwrap();
}

/// A stranger opening streams from one address must only ever close its
/// own: the 17th stream (the limit is 16) closes the oldest of the address
/// holding the most, not a coordinator's.
#[tokio::test]
async fn the_17th_stream_closes_the_busiest_addresss_oldest_and_a_coordinators_survives() {
    let agent = start(None, Limits::default()).await;
    let (_, f) = follow_in_cluster(agent.addr, GOOD, None, None, None)
        .await
        .unwrap();
    let mut coordinator = f.unwrap();
    let mut flood = Vec::new();
    for _ in 0..MAX_FOLLOWERS {
        flood.push(raw_follower(agent.addr, "127.0.0.2").await);
    }
    // The coordinator's and 16 from 127.0.0.2 made 17: the oldest of
    // 127.0.0.2's went.
    let mut first = flood.remove(0);
    let mut ended = false;
    for _ in 0..20 {
        if line_of(&mut first).await.is_none() {
            ended = true;
            break;
        }
    }
    assert!(ended, "the busiest address's oldest stream is closed");
    for _ in 0..3 {
        assert!(
            matches!(coordinator.next().await, Heard::Pulse { .. }),
            "the coordinator's stream, from another address, keeps pulsing"
        );
    }
    for (i, f) in flood.iter_mut().enumerate() {
        let l = line_of(f).await;
        assert!(
            l.as_deref().is_some_and(|l| l.contains("pulse")),
            "the flood's stream {} is still served: {l:?}",
            i + 1
        );
    }
}

#[tokio::test]
async fn ordinary_handshakes_are_answered_while_16_streams_are_held() {
    let agent = start(None, Limits::default()).await;
    let mut held = Vec::new();
    for _ in 0..MAX_FOLLOWERS {
        let (_, f) = follow_in_cluster(agent.addr, GOOD, None, None, None)
            .await
            .unwrap();
        held.push(f.expect("a stream"));
    }
    for _ in 0..5 {
        let r = query(agent.addr, GOOD, None, None).await.unwrap();
        assert_eq!(r.caps.cores, 8);
    }
    for f in &mut held {
        assert!(
            matches!(f.next().await, Heard::Pulse { .. }),
            "every stream held is still served"
        );
    }
}

#[tokio::test]
async fn a_stream_whose_coordinator_sends_nothing_is_closed_after_the_idle_limit() {
    let limits = Limits {
        follow_idle: Duration::from_millis(700),
        ..Limits::default()
    };
    let agent = start(None, limits).await;
    let mut quiet = raw_follower(agent.addr, "127.0.0.3").await;
    let mut pinging = raw_follower(agent.addr, "127.0.0.4").await;
    let t = Instant::now();
    let mut quiet_open = true;
    while t.elapsed() < Duration::from_millis(1500) {
        pinging
            .get_mut()
            .write_all(rlx_proto::handshake::ping_line().as_bytes())
            .await
            .unwrap();
        assert!(
            line_of(&mut pinging).await.is_some(),
            "a pinging stream stays"
        );
        if quiet_open && line_of(&mut quiet).await.is_none() {
            quiet_open = false;
            let at = t.elapsed();
            assert!(at >= Duration::from_millis(600), "closed early, at {at:?}");
        }
    }
    assert!(!quiet_open, "a stream that sends nothing is closed");
}

#[tokio::test]
async fn a_coordinator_line_that_is_no_ping_closes_the_stream() {
    let agent = start(None, Limits::default()).await;
    let mut f = raw_follower(agent.addr, "127.0.0.5").await;
    f.get_mut()
        .write_all(b"{\"rlx\":\"what\"}\n")
        .await
        .unwrap();
    let mut lines = 0;
    while line_of(&mut f).await.is_some() {
        lines += 1;
        assert!(lines < 5, "still open after garbage");
    }
}

#[tokio::test]
async fn a_coordinator_line_longer_than_the_limit_closes_the_stream() {
    let agent = start(None, Limits::default()).await;
    let mut f = raw_follower(agent.addr, "127.0.0.7").await;
    // No newline: the agent must not wait for one.
    let long = vec![b'x'; MAX_FOLLOW_LINE + 10];
    f.get_mut().write_all(&long).await.unwrap();
    let mut lines = 0;
    while line_of(&mut f).await.is_some() {
        lines += 1;
        assert!(lines < 5, "still open after an endless line");
    }
}

#[tokio::test]
async fn a_refused_follow_hello_is_closed_after_the_refusal_without_pulses() {
    let agent = start(None, Limits::default()).await;
    agent.caps.send_replace(Arc::new(NodeCaps {
        cluster: Some("lab".into()),
        ..caps(8)
    }));
    let hello = follow_hello_line(&Nonce::random().unwrap(), Some("prod"));
    let out = raw_exchange(agent.addr, hello.as_bytes()).await;
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("{\"rlx\":\"error\""), "{out}");
    assert_eq!(
        out.lines().count(),
        1,
        "the refusal only, then the end: {out}"
    );
    let err = follow_in_cluster(agent.addr, GOOD, None, None, Some("prod"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HandshakeError::OtherCluster { theirs, .. } if theirs == "lab"),
        "{err}"
    );
}

/// A flood of handshake connections evicts among its own: a stream is out
/// of the connection limit's reach, or any flood would make its
/// coordinator report a live member dead.
#[tokio::test]
async fn handshakes_and_a_flood_of_connections_leave_the_streams_alone() {
    let limits = Limits {
        max_connections: 8,
        ..Limits::default()
    };
    let agent = start(None, limits).await;
    let (_, f) = follow_in_cluster(agent.addr, GOOD, None, None, None)
        .await
        .unwrap();
    let mut f = f.unwrap();
    // Twenty idle connections from another address: the limit evicts
    // among them, never the stream.
    let mut idle = Vec::new();
    for _ in 0..20 {
        let sock = TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.6:0".parse().unwrap()).unwrap();
        idle.push(sock.connect(agent.addr).await.unwrap());
    }
    let r = query(agent.addr, GOOD, None, None).await.unwrap();
    assert_eq!(r.caps.cores, 8);
    for _ in 0..3 {
        assert!(matches!(f.next().await, Heard::Pulse { .. }));
    }
}

/// A keyed agent holds a stream only for a coordinator that proves the
/// cluster key: strangers from sixteen addresses (the limit) answer its
/// question with nothing or with a made-up proof, are closed, and never
/// take a slot, so the coordinator's stream, opened first, keeps pulsing.
#[tokio::test]
async fn a_keyed_agent_gives_no_stream_slot_to_strangers_and_keeps_a_proving_coordinators() {
    let agent = start(Some(key(1)), Limits::default()).await;
    let ring = KeyRing::single(key(1));
    let (_, f) = follow_in_cluster(agent.addr, GOOD, Some(&ring), None, None)
        .await
        .unwrap();
    let mut coordinator = f.expect("a coordinator holding the key gets a stream");
    let mut strangers = Vec::new();
    for i in 0..MAX_FOLLOWERS as u8 {
        let mut s = raw_follower(agent.addr, &format!("127.0.1.{}", i + 1)).await;
        assert_eq!(
            line_of(&mut s).await.as_deref().map(str::trim_end),
            Some(r#"{"rlx":"prove"}"#),
            "the agent asks before it pulses"
        );
        if i % 2 == 0 {
            let forged = format!("{{\"rlx\":\"proof\",\"proof\":\"{}\"}}\n", "ab".repeat(32));
            s.get_mut().write_all(forged.as_bytes()).await.unwrap();
        }
        strangers.push(s);
    }
    for (i, s) in strangers.iter_mut().enumerate() {
        let mut pulsed = false;
        while let Some(l) = line_of(s).await {
            pulsed |= l.contains("pulse");
        }
        assert!(!pulsed, "stranger {} got pulses without a proof", i + 1);
    }
    for _ in 0..3 {
        assert!(
            matches!(coordinator.next().await, Heard::Pulse { .. }),
            "the proving coordinator's stream keeps pulsing"
        );
    }
    // A coordinator without the key is answered, and gets no stream.
    let (_, none) = follow_in_cluster(agent.addr, GOOD, None, None, None)
        .await
        .unwrap();
    assert!(none.is_none(), "no stream without the key");
}
