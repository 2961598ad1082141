//! The coordinator's end of the liveness stream, against hand-made agents
//! on loopback.

use super::*;
use crate::handshake::follow::follow_pinging;
use tokio::sync::oneshot;

/// A reply to the hello, followed by `then`, as one write.
fn reply_then(then: &'static [u8]) -> impl Fn(Vec<u8>, Binding) -> Option<Vec<u8>> {
    move |hello, on| {
        let mut out = answer(&hello, &caps(), None, &on).unwrap().into_bytes();
        out.extend_from_slice(then);
        Some(out)
    }
}

/// A hand-made agent for one connection that answers the hello and its
/// first pulse in one write, then hands its end to the test to pulse,
/// stall or kill.
async fn one_agent() -> (SocketAddr, oneshot::Receiver<BufReader<TcpStream>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (s, peer) = l.accept().await.unwrap();
        let on = Binding {
            local: s.local_addr().unwrap(),
            peer,
            advertised: vec![],
        };
        let mut r = BufReader::new(s);
        let mut hello = Vec::new();
        r.read_until(b'\n', &mut hello).await.unwrap();
        let mut out = answer(&hello, &caps(), None, &on).unwrap();
        out.push_str(&pulse_line(0));
        r.get_mut().write_all(out.as_bytes()).await.unwrap();
        let _ = tx.send(r);
    });
    (a, rx)
}

const T: Duration = Duration::from_secs(2);

#[test]
fn a_follow_hello_is_the_plain_hello_with_follow_true_and_parses_back() {
    let n = Nonce::from_bytes([0xab; 32]);
    assert_eq!(
        follow_hello_line(&n, Some("lab")),
        format!(
            "{{\"rlx\":\"hello\",\"v\":2,\"nonce\":\"{}\",\"cluster\":\"lab\",\"follow\":true}}\n",
            n.to_hex()
        )
    );
    let h = parse_hello(follow_hello_line(&n, None).as_bytes()).unwrap();
    assert!(h.follow, "the agent sees the request");
    let h = parse_hello(hello_line_for(&n, None).as_bytes()).unwrap();
    assert!(!h.follow, "a plain hello asks for no stream");
    assert!(
        !hello_line_for(&n, Some("lab")).contains("follow"),
        "a plain hello is byte for byte what it was before the stream"
    );
}

#[test]
fn the_stream_lines_are_the_documented_bytes() {
    assert_eq!(
        pulse_line(7),
        "{\"rlx\":\"pulse\",\"seq\":7,\"every_ms\":300}\n"
    );
    assert_eq!(bye_line(), "{\"rlx\":\"bye\"}\n");
    assert_eq!(ping_line(), "{\"rlx\":\"ping\"}\n");
    assert!(is_ping(b"{\"rlx\":\"ping\"}\n"));
    assert!(
        is_ping(b"{\"rlx\": \"ping\"}\r\n"),
        "a hand-typed ping counts"
    );
    assert!(!is_ping(
        b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n"
    ));
    assert!(!is_ping(b"ping\n"));
}

/// An agent that predates the pace reads a ping that asks for one as a
/// ping: its line parser ignores fields it does not know.
#[test]
fn a_ping_asking_for_a_pace_is_still_a_ping_to_an_agent_that_predates_it() {
    #[derive(serde::Deserialize)]
    #[serde(tag = "rlx", rename_all = "lowercase")]
    enum Before {
        Ping,
    }
    let asking = ping_line_pacing(Some(Duration::from_millis(1500)));
    assert!(matches!(
        serde_json::from_str::<Before>(asking.trim_end()),
        Ok(Before::Ping)
    ));
    assert_eq!(
        ping_pace(asking.as_bytes()),
        Some(Some(Duration::from_millis(1500)))
    );
    assert_eq!(ping_pace(ping_line().as_bytes()), Some(None));
    assert_eq!(ping_pace(b"{\"rlx\":\"bye\"}\n"), None);
    assert_eq!(pace_of(Duration::from_millis(10)), PULSE_INTERVAL);
    assert_eq!(pace_of(Duration::from_secs(60)), MAX_PULSE_INTERVAL);
    assert_eq!(pace_of(Duration::from_secs(1)), Duration::from_secs(1));
}

#[tokio::test]
async fn an_agent_that_answers_and_closes_predates_the_stream() {
    let a = fake_agent(reply_then(b"")).await;
    let (reply, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    assert_eq!(reply.caps.id, "0123456789abcdef");
    assert!(f.is_none(), "no pulse after the reply: no stream");
}

#[tokio::test]
async fn an_agent_that_sends_something_else_after_its_reply_gives_no_stream() {
    let a = fake_agent(reply_then(b"{\"rlx\":\"caps\"}\n")).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    assert!(f.is_none(), "a line that is no pulse: no stream");
}

#[tokio::test]
async fn pulses_are_heard_in_order_and_the_end_of_the_connection_is_closed() {
    let pulses = b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n{\"rlx\":\"pulse\",\"seq\":1,\"every_ms\":250}\n{\"rlx\":\"pulse\",\"seq\":2,\"every_ms\":1,\"load\":3}\n";
    let a = fake_agent(reply_then(pulses)).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.expect("a stream");
    assert_eq!(f.next().await, Heard::Pulse { seq: 1 });
    assert_eq!(f.every(), Duration::from_millis(250));
    assert_eq!(
        f.next().await,
        Heard::Pulse { seq: 2 },
        "a pulse with fields this version does not know is still a pulse"
    );
    assert_eq!(
        f.every(),
        Duration::from_millis(50),
        "an absurd interval is clamped"
    );
    assert_eq!(f.next().await, Heard::Closed);
}

#[tokio::test]
async fn a_bye_is_heard() {
    let lines = b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n{\"rlx\":\"bye\"}\n";
    let a = fake_agent(reply_then(lines)).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    assert_eq!(f.unwrap().next().await, Heard::Bye);
}

#[tokio::test]
async fn an_agent_killed_mid_stream_is_heard_as_closed() {
    let (a, agent) = one_agent().await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.unwrap();
    let mut agent = agent.await.unwrap();
    for seq in 1..=3 {
        agent
            .get_mut()
            .write_all(pulse_line(seq).as_bytes())
            .await
            .unwrap();
        assert_eq!(f.next().await, Heard::Pulse { seq });
    }
    // What the kernel does for a process that dies: closes its socket (a
    // FIN, nothing unread).
    drop(agent);
    let t = std::time::Instant::now();
    assert_eq!(f.next().await, Heard::Closed);
    assert!(t.elapsed() < Duration::from_millis(500), "seen at once");
}

/// A process that dies with bytes unread in its socket (our pings) makes
/// its kernel reset the connection: the caller is told it failed.
#[tokio::test]
async fn an_agent_that_dies_with_our_ping_unread_resets_the_stream() {
    let (a, agent) = one_agent().await;
    let every = Duration::from_millis(50);
    let (_, f) = follow_pinging(a, T, (None, None, None), every)
        .await
        .unwrap();
    let mut f = f.unwrap();
    let agent = agent.await.unwrap();
    // Pings pile up unread at the agent while the follower waits.
    let _ = tokio::time::timeout(Duration::from_millis(200), f.next()).await;
    drop(agent);
    let got = tokio::time::timeout(T, f.next())
        .await
        .expect("heard in time");
    assert!(matches!(got, Heard::Reset(_)), "{got:?}");
}

#[tokio::test]
async fn an_endless_line_is_garbage_and_costs_a_bounded_buffer() {
    static LONG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let long = LONG.get_or_init(|| {
        let mut v = b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n".to_vec();
        v.extend(std::iter::repeat_n(b'x', 10_000));
        v
    });
    let a = fake_agent(reply_then(long)).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.unwrap();
    assert!(matches!(f.next().await, Heard::Garbage(_)));
    assert!(
        f.s.buf.len() <= MAX_FOLLOW_LINE + 1,
        "the follower's line buffer holds {} bytes",
        f.s.buf.len()
    );
    // The reply's reader buffers at most its capacity (8 KiB) past the
    // reply: together less than the 10 KB line, which is never read whole.
    let held = f.s.buf.len() + f.conn.0.buffer().len();
    assert!(held < 10_000, "held {held} bytes of the line");
}

/// A `select!` that drops `next()` between the halves of a line must not
/// lose the first half (the caller would see garbage, or miss a pulse).
#[tokio::test]
async fn a_line_split_across_cancelled_calls_is_heard_whole() {
    let (a, agent) = one_agent().await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.unwrap();
    let mut agent = agent.await.unwrap();
    let line = pulse_line(1);
    let (head, tail) = line.split_at(10);
    agent.get_mut().write_all(head.as_bytes()).await.unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(100), f.next()).await;
    assert!(cut.is_err(), "half a line is no line: {cut:?}");
    agent.get_mut().write_all(tail.as_bytes()).await.unwrap();
    assert_eq!(f.next().await, Heard::Pulse { seq: 1 });
}

#[tokio::test]
async fn a_reply_under_the_wrong_key_is_refused_as_by_a_handshake() {
    let a = fake_agent(|hello, on| {
        let mut out = answer(&hello, &caps(), Some(&key(3)), &on)
            .unwrap()
            .into_bytes();
        out.extend_from_slice(pulse_line(0).as_bytes());
        Some(out)
    })
    .await;
    let ring = KeyRing::single(key(4));
    let followed = follow_in_cluster(a, T, Some(&ring), None, None)
        .await
        .unwrap_err();
    let queried = query_in_cluster(a, T, Some(&ring), None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(followed, HandshakeError::WrongKey { .. }),
        "{followed:?}"
    );
    assert_eq!(followed, queried, "the same check, the same refusal");
}

#[tokio::test]
async fn the_coordinator_pings_while_it_waits_for_pulses() {
    let (a, agent) = one_agent().await;
    let every = Duration::from_millis(100);
    let (_, f) = follow_pinging(a, T, (None, None, None), every)
        .await
        .unwrap();
    let mut f = f.unwrap();
    let mut agent = agent.await.unwrap();
    let (tx, mut pings) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let mut l = String::new();
            if agent.read_line(&mut l).await.unwrap_or(0) == 0 {
                return;
            }
            let _ = tx.send(l);
        }
    });
    // No more pulses come: the follower only pings, across calls cut short.
    for _ in 0..3 {
        let _ = tokio::time::timeout(Duration::from_millis(150), f.next()).await;
    }
    let mut got = Vec::new();
    while let Ok(p) = pings.try_recv() {
        got.push(p);
    }
    assert!(
        (3..=5).contains(&got.len()),
        "{} pings in 450 ms at one per 100 ms: {got:?}",
        got.len()
    );
    assert!(got.iter().all(|l| is_ping(l.as_bytes())), "{got:?}");
}

#[test]
fn the_facts_digest_changes_with_news_and_not_with_free_memory() {
    let base = caps();
    let f = crate::handshake::follow::facts_of(&base);
    assert_eq!(f.len(), 16, "8 bytes in hex: {f}");
    let mut noise = base.clone();
    noise.ram_avail = noise.ram_avail.saturating_sub(1 << 30);
    noise.disk_free += 1 << 30;
    assert_eq!(
        crate::handshake::follow::facts_of(&noise),
        f,
        "free memory is no news"
    );
    let mut worker = base.clone();
    worker.worker_listening = Some(!worker.worker_listening.unwrap_or(false));
    assert_ne!(
        crate::handshake::follow::facts_of(&worker),
        f,
        "the worker's state is"
    );
    let mut cores = base.clone();
    cores.cores += 1;
    assert_ne!(
        crate::handshake::follow::facts_of(&cores),
        f,
        "so are the cores"
    );
}

#[tokio::test]
async fn a_pulse_carries_the_agents_facts_and_the_follower_keeps_the_last() {
    let line = crate::handshake::follow::pulse_line_with(1, Some("00112233aabbccdd"));
    assert_eq!(
        line,
        "{\"rlx\":\"pulse\",\"seq\":1,\"every_ms\":300,\"facts\":\"00112233aabbccdd\"}\n"
    );
    let pulses: &'static [u8] = Box::leak(
        format!("{}{line}", pulse_line(0))
            .into_bytes()
            .into_boxed_slice(),
    );
    let a = fake_agent(reply_then(pulses)).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.expect("a stream");
    assert_eq!(f.facts(), None, "the first pulse had none");
    assert_eq!(f.next().await, Heard::Pulse { seq: 1 });
    assert_eq!(f.facts(), Some("00112233aabbccdd"));
}
