//! What a member's change is reported as: `updated` for a material change
//! (announced or found by its health check), `worker` when its worker
//! starts or stops listening, nothing for a fresher copy of the same caps.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_member_whose_announced_caps_change_materially_is_reported_updated() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(300)).await;
    let mut more = box1();
    more.caps = Some(caps("box1", 16, 24 << 30));
    w.announce(vec![more], vec![]);
    let e = w.next().await;
    assert_eq!(
        what(&e),
        (Kind::Updated, "box1", 300, Some("cores 8 -> 16"))
    );
    assert_eq!(e.node.unwrap().cores, 16, "updated carries the new node");
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_handshake_caps_change_materially_is_reported_updated_at_the_health_check() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    let fresh = caps("box1", 8, 16 << 30);
    w.machines
        .0
        .lock()
        .unwrap()
        .fresh
        .insert("box1".into(), fresh);
    let e = w.next().await;
    let why = format!("memory {} -> {}", gib(24 << 30), gib(16 << 30));
    assert_eq!(
        (e.event, e.reason.as_deref()),
        (Kind::Updated, Some(why.as_str()))
    );
    assert!((ms(first_check())..=ms(HEALTH_INTERVAL)).contains(&e.at_ms));
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "once");
    w.stop().await.unwrap();
}

/// The runtime learns when a member's worker starts or stops listening:
/// one `worker` event each way, the member itself staying joined.
#[tokio::test(start_paused = true)]
async fn a_member_whose_worker_stops_and_starts_listening_is_reported_by_worker_events() {
    let mut w = Running::start(false);
    let mut up = caps("box1", 8, 24 << 30);
    up.worker_listening = Some(true);
    let mut first = box1();
    first.caps = Some(up.clone());
    w.announce(vec![first], vec![]);
    let joined = w.next().await;
    assert_eq!(joined.event, Kind::Joined);
    assert_eq!(joined.node.unwrap().worker_listening, Some(true));
    let set = |w: &Running, listening: bool| {
        let mut c = up.clone();
        c.worker_listening = Some(listening);
        w.machines.0.lock().unwrap().fresh.insert("box1".into(), c);
    };
    set(&w, false);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Worker, "{e:?}");
    assert_eq!(e.node.as_ref().unwrap().worker_listening, Some(false));
    assert!(e
        .reason
        .unwrap()
        .contains("nothing listens on its worker port"));
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "once");
    set(&w, true);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Worker);
    assert_eq!(e.node.unwrap().worker_listening, Some(true));
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_fresher_copy_of_the_same_caps_is_not_an_update() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    let mut fresh = caps("box1", 8, 24 << 30);
    fresh.ram_avail = 10 << 30;
    fresh.disk_free = 1 << 40;
    w.machines
        .0
        .lock()
        .unwrap()
        .fresh
        .insert("box1".into(), fresh);
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    w.stop().await.unwrap();
}
