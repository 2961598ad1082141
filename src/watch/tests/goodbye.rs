//! Goodbyes on paused time: a goodbye is a claim anyone on the LAN can make,
//! so the engine checks the member and reports it left only when the check
//! fails; real goodbyes keep their bound, forged ones (alone, before a real
//! one, or as a flood) cost a bounded number of handshakes and no event;
//! and member names of different sources cannot collide.

use super::*;
use crate::watch::farewell::{GOODBYE_DEADLINE, GOODBYE_RECHECK, GOODBYE_SPACING};

/// The bound a real goodbye is reported within.
const GOODBYE_BOUND: Duration = Duration::from_secs(2);

/// When `host` was dialled at or after `from_ms`, in ms of watch time.
fn dials_since(w: &Running, host: &str, from_ms: u64) -> Vec<u64> {
    w.dials_of(host)
        .into_iter()
        .filter(|&t| t >= from_ms)
        .collect()
}

/// Guards against a forged goodbye: a stranger's goodbye for a live,
/// answering member made `watch` report it left, for good. Now the member
/// is checked, twice [`GOODBYE_RECHECK`] apart (the first answer could be
/// a stopping agent's last), stays a member, and the browse is asked to
/// re-learn it.
#[tokio::test(start_paused = true)]
async fn a_forged_goodbye_of_a_live_member_is_checked_and_no_left_follows() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(500)).await;
    w.goodbye("box1");
    // The same packet, heard again through mdns-sd a second later.
    assert_eq!(w.during(Duration::from_millis(1000)).await, vec![]);
    w.goodbye("box1");
    let later = w.during(Duration::from_secs(20)).await;
    assert_eq!(later, vec![], "the member stays, with no news");
    let checks: Vec<u64> = dials_since(&w, "box1", 500)
        .into_iter()
        .filter(|&t| t < 2000)
        .collect();
    let (recheck, spacing) = (ms(GOODBYE_RECHECK), ms(GOODBYE_SPACING));
    assert_eq!(
        checks,
        vec![500, 500 + recheck, 500 + spacing, 500 + spacing + recheck],
        "each goodbye: a check and its re-check"
    );
    assert_eq!(
        w.relearns.lock().unwrap().len(),
        2,
        "the browse is asked to re-learn the instance after each refutation"
    );
    w.stop().await.unwrap();
}

/// A stopped agent's goodbye: its port is closed, the check is refused at
/// once, and `left` comes at once, well within [`GOODBYE_BOUND`].
#[tokio::test(start_paused = true)]
async fn a_real_goodbye_is_reported_left_as_soon_as_its_check_is_refused() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(1200)).await;
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    let e = w.next().await;
    assert_eq!(
        what(&e),
        (Kind::Left, "box1", 1200, Some(super::GOODBYE_REFUSED))
    );
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "left once");
    w.stop().await.unwrap();
}

/// A host that says goodbye and then goes silent (powered off) is gone
/// once [`GOODBYE_DEADLINE`] passes, not after a health check's whole
/// round: even heard through mdns-sd, a second after the packet, it is
/// reported within [`GOODBYE_BOUND`].
#[tokio::test(start_paused = true)]
async fn a_host_silent_after_its_goodbye_is_reported_left_once_the_goodbye_deadline_passes() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(300)).await;
    w.kill("box1", Death::Vanished);
    w.goodbye("box1");
    let e = w.next().await;
    let deadline = ms(GOODBYE_DEADLINE);
    assert_eq!(
        what(&e),
        (
            Kind::Left,
            "box1",
            300 + deadline,
            Some(format!("goodbye, and its check failed: no answer within {deadline} ms").as_str())
        )
    );
    assert!(
        Duration::from_secs(1) + GOODBYE_DEADLINE < GOODBYE_BOUND,
        "heard a second late through mdns-sd, still within the bound"
    );
    assert!(
        GOODBYE_DEADLINE < whole_round(),
        "shorter than a health check's round"
    );
    w.stop().await.unwrap();
}

/// Guards against a forged goodbye hiding a real one: the agent stops
/// right after a forgery was checked (mdns-sd no longer holds the
/// instance, but the browse's own socket hears the goodbye), and waits at
/// most [`GOODBYE_SPACING`] for its check: `left` within [`GOODBYE_BOUND`].
/// Stopping between a check and its re-check is caught by the re-check.
#[tokio::test(start_paused = true)]
async fn a_real_goodbye_after_a_refuted_forgery_is_reported_left_within_the_bound() {
    for stop_after in [100u64, 260, 900] {
        let mut w = Running::start(false);
        w.announce(vec![box1()], vec![]);
        assert_eq!(w.next().await.event, Kind::Joined);
        tokio::time::advance(Duration::from_millis(1000)).await;
        w.goodbye("box1");
        assert_eq!(w.during(Duration::from_millis(stop_after)).await, vec![]);
        w.kill("box1", Death::Reset);
        w.goodbye("box1");
        let said = 1000 + stop_after;
        let e = w.next().await;
        assert_eq!(
            e.event,
            Kind::Left,
            "stopped {stop_after} ms after the forgery"
        );
        let late = e.at_ms - said;
        assert!(
            late <= ms(GOODBYE_SPACING),
            "stopped {stop_after} ms after the forgery: left {late} ms after its goodbye"
        );
        assert!(Duration::from_millis(late) < GOODBYE_BOUND);
        if stop_after < ms(GOODBYE_RECHECK) {
            assert_eq!(e.at_ms, 1000 + ms(GOODBYE_RECHECK), "found by the re-check");
        }
        w.stop().await.unwrap();
    }
}

/// Guards against a flood of forged goodbyes turning into a flood of
/// handshakes: a thousand goodbyes in ten seconds for one member cost it
/// at most one check and its re-check per [`GOODBYE_SPACING`], report
/// nothing, and cost another member nothing at all.
#[tokio::test(start_paused = true)]
async fn a_flood_of_goodbyes_costs_a_member_at_most_two_handshakes_per_spacing() {
    let mut w = Running::start(false);
    let box2 = seen(Source::Mdns, "box2", "10.0.0.2", caps("box2", 8, 8 << 30));
    w.announce(vec![box1(), box2], vec![]);
    assert_eq!(w.during(Duration::from_millis(1)).await.len(), 2);
    let (start, flood) = (ms(Duration::from_millis(1)), Duration::from_secs(10));
    let mut events = Vec::new();
    for _ in 0..1000 {
        w.goodbye("box1");
        events.extend(w.during(flood / 1000).await);
    }
    assert_eq!(events, vec![], "no member reported anything");
    let end = start + ms(flood);
    let box1: Vec<u64> = dials_since(&w, "box1", start)
        .into_iter()
        .filter(|&t| t < end)
        .collect();
    let box2: Vec<u64> = dials_since(&w, "box2", start)
        .into_iter()
        .filter(|&t| t < end)
        .collect();
    let spacings = flood.as_millis().div_ceil(GOODBYE_SPACING.as_millis()) as usize;
    // Health checks go on as usual beside the goodbye checks.
    let health = ms(flood).div_ceil(ms(first_check())) as usize;
    assert!(
        box1.len() <= 2 * spacings + health,
        "{} dials of the flooded member in {flood:?}: {box1:?}",
        box1.len()
    );
    assert!(
        box2.len() <= health,
        "the other member: its health checks only, {box2:?}"
    );
    w.stop().await.unwrap();
}

/// Guards against member names of two sources colliding: an mDNS instance
/// named `X (dns)` was the DNS-SD member X (`<instance> (dns)`), so its
/// announcement "updated" that member, and a goodbye for it, which anyone
/// on the LAN can send, evicted it.
#[tokio::test(start_paused = true)]
async fn an_mdns_instance_named_like_a_dns_member_is_a_member_of_its_own() {
    let mut w = Running::start(true);
    let dns = seen(Source::Dns, "box3", "10.0.1.3", caps("box3", 4, 8 << 30));
    w.zone.0.lock().unwrap().push(dns);
    assert_eq!(what(&w.next().await), (Kind::Joined, "box3 (dns)", 0, None));
    let lookalike = seen(
        Source::Mdns,
        "box3 (dns)",
        "10.0.0.9",
        caps("box3 (dns)", 8, 24 << 30),
    );
    w.announce(vec![lookalike], vec![]);
    let e = w.next().await;
    assert_eq!(
        (e.event, e.instance.as_str()),
        (Kind::Joined, "box3 (dns) (mdns)"),
        "a member of its own, under a name no DNS member can have"
    );
    assert_eq!(e.node.unwrap().addr, "10.0.0.9:9100");
    // Its machine stops and says goodbye: it leaves, the DNS member stays.
    w.kill("box3 (dns) (mdns)", Death::Reset);
    w.goodbye("box3 (dns)");
    let e = w.next().await;
    assert_eq!(
        (e.event, e.instance.as_str()),
        (Kind::Left, "box3 (dns) (mdns)")
    );
    assert_eq!(
        w.during(DNS_POLL_INTERVAL * 3).await,
        vec![],
        "the DNS member is untouched"
    );
    w.stop().await.unwrap();
}

#[test]
fn member_names_of_different_sources_or_instances_never_coincide() {
    let instances = [
        "X",
        "X (dns)",
        "X (mdns)",
        "X (dns) (mdns)",
        "X (mdns) (dns)",
        "X (dns) (dns)",
        " (dns)",
        " (mdns)",
        "",
    ];
    let mut names = BTreeMap::new();
    for source in [Source::Mdns, Source::Dns] {
        for i in instances {
            let name = member_name(source, i);
            if let Some(before) = names.insert(name.clone(), (source, i)) {
                panic!("{name:?} is both {before:?} and {:?}", (source, i));
            }
        }
    }
    assert_eq!(member_name(Source::Mdns, "box1"), "box1", "unchanged");
    assert_eq!(
        member_name(Source::Dns, "box1"),
        "box1 (dns)",
        "as documented"
    );
}
