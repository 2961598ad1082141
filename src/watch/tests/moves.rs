//! Members whose address moves, on the fake machines in paused time: an
//! update with the new address, never a `left` for the old one.

use super::*;

/// Guards against a `left` for a move: the health check dialled the old
/// address just before the agent's new lease was announced, and failed
/// there after the member had been updated to the new one.
#[tokio::test(start_paused = true)]
async fn a_check_that_fails_at_the_address_a_member_moved_from_is_no_leave() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    // The old lease is gone: a check there hears nothing for a whole round.
    w.machines
        .0
        .lock()
        .unwrap()
        .dead_at
        .insert("10.0.0.1:9100".into(), Death::Vanished);
    // Just after the first check (at 2.8 s or later) left for the old address.
    tokio::time::sleep(first_check() + Duration::from_millis(800)).await;
    assert_eq!(
        w.dials_of("box1").len(),
        2,
        "admission, then the first check"
    );
    let moved = seen(Source::Mdns, "box1", "10.0.0.7", caps("box1", 8, 24 << 30));
    w.announce(vec![moved], vec![]);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Updated, "{e:?}");
    assert_eq!(e.node.as_ref().unwrap().addr, "10.0.0.7:9100");
    // The old address's check fails meanwhile; later ones dial the new one.
    let later = w.during(Duration::from_secs(12)).await;
    assert!(later.is_empty(), "no left, no re-join: {later:?}");
    assert!(
        w.dials_of("box1").len() >= 5,
        "checked on at the new address"
    );
    w.stop().await.unwrap();
}

/// A moved machine (docs/security.md, "A node that moved"): a member that re-announces at a new address (a new
/// DHCP lease) is one member, updated with its new address, not a new one.
#[tokio::test(start_paused = true)]
async fn a_member_whose_address_changes_is_reported_updated_with_the_new_address() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(300)).await;
    // The old lease is given up: nothing answers there any more.
    w.machines
        .0
        .lock()
        .unwrap()
        .dead_at
        .insert("10.0.0.1:9100".into(), Death::Reset);
    let moved = seen(Source::Mdns, "box1", "10.0.0.7", caps("box1", 8, 24 << 30));
    w.announce(vec![moved], vec![]);
    let e = w.next().await;
    assert_eq!(
        what(&e),
        (
            Kind::Updated,
            "box1",
            300,
            Some("address 10.0.0.1:9100 -> 10.0.0.7:9100")
        )
    );
    assert_eq!(e.node.unwrap().addr, "10.0.0.7:9100");
    w.stop().await.unwrap();
}
