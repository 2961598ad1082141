//! A member whose stream tells the digest of its facts: checked by
//! handshake when they change, otherwise only as a net (issue 41: the
//! steady state of a large cluster).

use super::*;
use crate::watch::health::{FACTS_INTERVAL, HEALTH_INTERVAL};

/// `box1` joined, its stream open (telling its facts when `telling`).
async fn joined(telling: bool) -> (Running, NodeCaps) {
    let mut w = Running::start(false);
    if telling {
        w.telling("box1");
    } else {
        w.streaming("box1");
    }
    let mut up = caps("box1", 8, 24 << 30);
    up.worker_listening = Some(true);
    let mut first = box1();
    first.caps = Some(up.clone());
    w.announce(vec![first], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    (w, up)
}

#[tokio::test(start_paused = true)]
async fn a_member_telling_its_facts_is_checked_by_handshake_about_once_a_minute_not_every_3_s() {
    let (mut w, _) = joined(true).await;
    assert_eq!(w.during(Duration::from_secs(120)).await, vec![]);
    let telling = w.dials_of("box1").len();
    // Its admission, the check of the stream's first facts, then the net.
    let most = 2 + (120 / (FACTS_INTERVAL.as_secs() * 4 / 5)) as usize;
    assert!(
        telling <= most,
        "{telling} handshakes in 120 s: {:?}",
        w.dials_of("box1")
    );
    w.stop().await.unwrap();

    let (mut w, _) = joined(false).await;
    assert_eq!(w.during(Duration::from_secs(120)).await, vec![]);
    let silent = w.dials_of("box1").len();
    assert!(
        silent as u128 >= 120_000 / HEALTH_INTERVAL.as_millis(),
        "an agent without facts is checked as before: {silent}"
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn news_in_a_members_facts_is_checked_at_once_and_reported() {
    let (mut w, up) = joined(true).await;
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    let before = Instant::now();
    let mut down = up.clone();
    down.worker_listening = Some(false);
    w.machines
        .0
        .lock()
        .unwrap()
        .fresh
        .insert("box1".into(), down);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Worker, "{e:?}");
    let took = Instant::now() - before;
    assert!(
        took < Duration::from_secs(1),
        "the worker event came {took:?} after the news"
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn free_memory_moving_is_no_news_and_costs_no_handshake() {
    let (mut w, up) = joined(true).await;
    assert_eq!(w.during(Duration::from_secs(5)).await, vec![]);
    let dials = w.dials_of("box1").len();
    let mut busier = up.clone();
    busier.ram_avail /= 2;
    w.machines
        .0
        .lock()
        .unwrap()
        .fresh
        .insert("box1".into(), busier);
    assert_eq!(w.during(Duration::from_secs(20)).await, vec![]);
    assert_eq!(w.dials_of("box1").len(), dials, "{:?}", w.dials_of("box1"));
    w.stop().await.unwrap();
}
