//! A member whose stream tells the digest of its facts: checked by
//! handshake when they change, otherwise only as a net (issue 41: the
//! steady state of a large cluster).

use super::*;
use crate::watch::health::{FACTS_INTERVAL, HEALTH_INTERVAL};

/// `box1` joined, its stream open (telling its facts when `telling`).
async fn joined(telling: bool) -> (Running, NodeCaps) {
    joined_as(telling, None).await
}

/// [`joined`], `box1`'s agent proving `key`, pinned for its id, when one
/// is given.
async fn joined_as(telling: bool, key: Option<&str>) -> (Running, NodeCaps) {
    let mut w = Running::start(false);
    if telling {
        w.telling("box1");
    } else {
        w.streaming("box1");
    }
    let mut up = caps("box1", 8, 24 << 30);
    up.worker_listening = Some(true);
    if let Some(k) = key {
        up.node_key = Some(k.into());
        w.machines.0.lock().unwrap().keyed.insert("box1".into());
    }
    let mut first = box1();
    first.caps = Some(up.clone());
    w.announce(vec![first], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    (w, up)
}

/// `box1`'s worker stops: its agent's facts change.
fn worker_stops(w: &Running, up: &NodeCaps) {
    let mut down = up.clone();
    down.worker_listening = Some(false);
    let mut m = w.machines.0.lock().unwrap();
    m.fresh.insert("box1".into(), down);
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
    worker_stops(&w, &up);
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

/// The steady state of issue 41: a member whose stream was opened with a
/// reply signed by its pinned node key is the same agent for as long as
/// the stream lasts, so the once-a-minute handshake (a signature made and
/// checked) proves nothing new and is left out; news in its facts is
/// still checked at once, and its stream's end brings the handshakes back.
#[tokio::test(start_paused = true)]
async fn a_member_whose_stream_is_bound_to_its_pinned_key_is_not_handshaken_while_nothing_changes()
{
    let key = "ed25519:box1-node-key";
    let (mut w, up) = joined_as(true, Some(key)).await;
    assert_eq!(w.during(Duration::from_secs(20)).await, vec![]);
    let settled = w.dials_of("box1").len();
    assert_eq!(w.during(Duration::from_secs(300)).await, vec![]);
    assert_eq!(
        w.dials_of("box1").len(),
        settled,
        "no handshake in five quiet minutes: {:?}",
        w.dials_of("box1")
    );

    worker_stops(&w, &up);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Worker, "news is checked at once: {e:?}");
    assert_eq!(w.dials_of("box1").len(), settled + 1);

    // Its stream ended (its agent restarted in place): a new stream is
    // opened, and its opening (a reply signed by the same key on the new
    // connection) is the proof of the new session.
    *w.machines
        .0
        .lock()
        .unwrap()
        .restarts
        .entry("box1".into())
        .or_default() += 1;
    assert_eq!(w.during(Duration::from_secs(120)).await, vec![]);
    let follows = w.machines.0.lock().unwrap().follows["box1"];
    assert_eq!(follows, 2, "a second stream was opened");
    assert_eq!(
        w.dials_of("box1").len(),
        settled + 1,
        "and it needed no handshake beside it: {:?}",
        w.dials_of("box1")
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_proved_no_key_leaves_the_handshake_as_the_net() {
    let (mut w, _) = joined_as(true, None).await;
    assert_eq!(w.during(Duration::from_secs(300)).await, vec![]);
    let checks = w.dials_of("box1").len();
    assert!(
        checks as u64 >= 300 / FACTS_INTERVAL.as_secs(),
        "an unpinned member is still checked about once a minute: {:?}",
        w.dials_of("box1")
    );
    w.stop().await.unwrap();
}
