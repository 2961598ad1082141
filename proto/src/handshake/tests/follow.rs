//! The coordinator's end of the liveness stream, against hand-made agents.

use super::*;
use crate::handshake::follow::follow_pinging;

/// A reply to the hello, followed by `then`, as one write.
fn reply_then(then: &'static [u8]) -> impl Fn(Vec<u8>, Binding) -> Option<Vec<u8>> {
    move |hello, on| {
        let mut out = answer(&hello, &caps(), None, &on).unwrap().into_bytes();
        out.extend_from_slice(then);
        Some(out)
    }
}

const T: Duration = Duration::from_secs(2);

#[tokio::test]
async fn an_agent_that_answers_and_closes_predates_the_stream() {
    let a = fake_agent(reply_then(b"")).await;
    let (reply, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    assert_eq!(reply.caps.id, "0123456789abcdef");
    assert!(f.is_none(), "no pulse after the reply: no stream");
}

#[tokio::test]
async fn pulses_are_heard_in_order_and_the_end_of_the_connection_is_closed() {
    let pulses = b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n{\"rlx\":\"pulse\",\"seq\":1,\"every_ms\":250}\n";
    let a = fake_agent(reply_then(pulses)).await;
    let (_, f) = follow_in_cluster(a, T, None, None, None).await.unwrap();
    let mut f = f.expect("a stream");
    assert_eq!(f.next().await, Heard::Pulse { seq: 1 });
    assert_eq!(f.every(), Duration::from_millis(250));
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
        f.buf.len() <= MAX_FOLLOW_LINE + 1,
        "read {} bytes",
        f.buf.len()
    );
}

#[tokio::test]
async fn a_reply_under_the_wrong_key_is_refused_as_by_a_handshake() {
    let a = fake_agent(|hello, on| {
        let mut out = answer(&hello, &caps(), Some(&key(3)), &on)
            .unwrap()
            .into_bytes();
        out.extend_from_slice(b"{\"rlx\":\"pulse\",\"seq\":0,\"every_ms\":300}\n");
        Some(out)
    })
    .await;
    let err = follow_in_cluster(a, T, Some(&KeyRing::single(key(4))), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, HandshakeError::WrongKey { .. }), "{err:?}");
}

#[tokio::test]
async fn the_coordinator_pings_while_it_waits_for_pulses() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let (tx, mut pings) = tokio::sync::mpsc::unbounded_channel();
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
        loop {
            let mut l = String::new();
            if r.read_line(&mut l).await.unwrap_or(0) == 0 {
                return;
            }
            let _ = tx.send((l, std::time::Instant::now()));
        }
    });
    let every = Duration::from_millis(100);
    let (_, f) = follow_pinging(a, T, (None, None, None), every)
        .await
        .unwrap();
    let mut f = f.unwrap();
    // No more pulses come: the follower only pings.
    let _ = tokio::time::timeout(Duration::from_millis(450), f.next()).await;
    let mut got = Vec::new();
    while let Ok(p) = pings.try_recv() {
        got.push(p);
    }
    assert!(
        (3..=5).contains(&got.len()),
        "{} pings in 450 ms",
        got.len()
    );
    assert!(got.iter().all(|(l, _)| is_ping(l.as_bytes())), "{got:?}");
}
