//! DNS-SD members: a registration gone from the zone, one missing from a
//! single browse, and a machine listed by both mDNS and the zone.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_registration_gone_from_the_zone_whose_machine_is_gone_is_left_by_the_next_poll() {
    let mut w = Running::start(true);
    let box3 = seen(Source::Dns, "box3", "10.0.1.3", caps("box3", 4, 8 << 30));
    w.zone.0.lock().unwrap().push(box3);
    // The zone is browsed at once; DNS members carry the suffix.
    assert_eq!(what(&w.next().await), (Kind::Joined, "box3 (dns)", 0, None));
    w.zone.0.lock().unwrap().clear();
    w.kill("box3 (dns)", Death::Reset);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Left, "box3 (dns)"));
    assert!(
        e.at_ms <= DNS_POLL_INTERVAL.as_millis() as u64,
        "left by the next poll: {e:?}"
    );
    w.stop().await.unwrap();
}

/// A registration missing from one answer of the zone (a DNS server
/// restarting, a lease renewed late, a truncated or forged reply) is a
/// claim, checked like a goodbye: its machine answers, so it stays.
#[tokio::test(start_paused = true)]
async fn a_registration_missing_from_one_browse_while_its_machine_answers_is_no_departure() {
    let mut w = Running::start(true);
    let box3 = seen(Source::Dns, "box3", "10.0.1.3", caps("box3", 4, 8 << 30));
    w.zone.0.lock().unwrap().push(box3.clone());
    assert_eq!(what(&w.next().await), (Kind::Joined, "box3 (dns)", 0, None));
    w.zone.0.lock().unwrap().clear();
    assert_eq!(
        w.during(DNS_POLL_INTERVAL + DNS_POLL_INTERVAL / 2).await,
        vec![],
        "checked, found answering, kept"
    );
    w.zone.0.lock().unwrap().push(box3);
    assert_eq!(w.during(DNS_POLL_INTERVAL * 2).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_machine_listed_by_mdns_and_dns_is_one_member() {
    let mut w = Running::start(true);
    w.announce(vec![box1()], vec![]);
    assert_eq!(what(&w.next().await), (Kind::Joined, "box1", 0, None));
    let twin = seen(Source::Dns, "box1", "10.0.0.1", caps("box1", 8, 24 << 30));
    w.zone.0.lock().unwrap().push(twin);
    assert_eq!(
        w.during(DNS_POLL_INTERVAL * 3).await,
        vec![],
        "the DNS registration of a LAN member is the same machine"
    );
    // Once mDNS loses it (it stops answering there), the zone brings it
    // back at its next poll.
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    assert_eq!(w.next().await.event, Kind::Left);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Joined, "box1 (dns)"));
    w.stop().await.unwrap();
}
