//! Admission on the fake machines in paused time: the back-off of refused
//! candidates, the rate limit, the bounded memory of refusals, and that a
//! slow admission never delays a member's goodbye.

use super::*;

/// Guards against refused sightings being handed to admission again on
/// every snapshot: a refused (address, id, TXT) is dialled again only when
/// its back-off runs out, the back-off doubling from [`RETRY_FIRST`] up to
/// [`RETRY_CAP`]; a changed TXT is a new candidate, dialled at once.
#[tokio::test(start_paused = true)]
async fn a_refused_candidate_is_dialled_again_only_after_a_back_off_that_doubles_up_to_its_cap() {
    let mut w = Running::start(false);
    w.kill("box1", Death::Reset);
    // Every snapshot repeats the announcement, once a second for 12 minutes.
    let mut events = Vec::new();
    for _ in 0..720 {
        w.announce(vec![box1()], vec![]);
        events.extend(w.during(Duration::from_secs(1)).await);
    }
    let mut want = vec![0u64];
    let mut wait = RETRY_FIRST;
    while let Some(&last) = want.last() {
        // The retry goes with the first snapshot after the back-off.
        let next = last + wait.as_millis() as u64;
        if next >= 720_000 {
            break;
        }
        want.push(next.div_ceil(1000) * 1000);
        wait = (wait * 2).min(RETRY_CAP);
    }
    assert_eq!(
        w.dials_of("box1"),
        want,
        "5 s, 10 s, 20 s ... then every 5 minutes, not at every snapshot"
    );
    assert_eq!(
        want.len(),
        8,
        "0, 5, 15, 35, 75, 155, 315, 615 s and no more"
    );
    assert_eq!(events.len(), 1, "reported once: {events:?}");
    assert_eq!(events[0].event, Kind::Refused);
    // A changed TXT is another candidate: dialled with the next snapshot.
    let mut tweaked = box1();
    tweaked.caps = Some(caps("box1", 9, 24 << 30));
    w.announce(vec![tweaked], vec![]);
    let _ = w.during(Duration::from_millis(10)).await;
    assert_eq!(w.dials_of("box1").len(), want.len() + 1);
    w.stop().await.unwrap();
}

/// Guards against admission without a rate limit: a flood of candidates
/// is dialled [`ADMIT_BURST`] at once, then one per [`ADMIT_EVERY`].
#[tokio::test(start_paused = true)]
async fn admissions_are_rate_limited_to_a_burst_then_one_per_interval() {
    let mut w = Running::start(false);
    let many: Vec<Sighting> = (0..100)
        .map(|i| {
            let host = format!("n{i:03}");
            let ip = format!("10.0.{}.{}", i / 200, 1 + i % 200);
            seen(Source::Mdns, &host, &ip, caps(&host, 8, 24 << 30))
        })
        .collect();
    w.announce(many, vec![]);
    let joined = w.during(Duration::from_secs(10)).await;
    assert_eq!(joined.len(), 100, "all join in the end");
    let burst = ADMIT_BURST as usize;
    for (k, e) in joined.iter().enumerate() {
        let due = k.saturating_sub(burst - 1) as u64 * ADMIT_EVERY.as_millis() as u64;
        assert_eq!(e.at_ms, due, "candidate {k} (of a burst of {burst})");
    }
    w.stop().await.unwrap();
}

/// Guards against handshakes running inline on the event loop: a member's
/// goodbye is reported at once while another candidate's handshake waits
/// out its whole round.
#[tokio::test(start_paused = true)]
async fn a_slow_admission_does_not_delay_a_members_goodbye() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    let gone = seen(Source::Mdns, "gone", "10.0.0.9", caps("gone", 8, 24 << 30));
    w.kill("gone", Death::Vanished);
    w.announce(vec![box1(), gone], vec![]);
    assert_eq!(w.during(Duration::from_millis(100)).await, vec![]);
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    let e = w.next().await;
    assert_eq!(what(&e), (Kind::Left, "box1", 100, Some(GOODBYE_REFUSED)));
    let e = w.next().await;
    assert_eq!(
        (e.event, e.instance.as_str(), e.at_ms),
        (Kind::Refused, "gone", whole_round().as_millis() as u64)
    );
    w.stop().await.unwrap();
}

#[test]
fn the_refusals_remembered_are_bounded() {
    let mut r = admission::Refusals::default();
    let now = Instant::now();
    for i in 0..MAX_REMEMBERED + 10 {
        r.refused(
            (format!("10.0.{}.{}:9100", i / 250, i % 250), None, None),
            now,
        );
    }
    assert_eq!(r.len(), MAX_REMEMBERED);
}

/// Guards the soak's slow heap growth: each crashed incarnation's refusal
/// is a key of its own, and they were kept until the map was full.
#[test]
fn a_refusal_not_refused_again_is_forgotten_once_its_back_off_is_long_over() {
    let mut r = admission::Refusals::default();
    let t0 = Instant::now();
    let crashed = |i: usize| {
        (
            "10.0.0.1:9100".to_string(),
            Some("id".into()),
            Some(format!("inc {i}")),
        )
    };
    // One crashed incarnation a minute for an hour, and one stranger
    // refused again each time its back-off ends.
    let stranger = ("10.0.0.9:9100".to_string(), None, None);
    let mut stranger_due = t0;
    let mut stranger_wait = Duration::ZERO;
    for minute in 0..60u64 {
        let now = t0 + Duration::from_secs(60 * minute);
        r.refused(crashed(minute as usize), now);
        if now >= stranger_due {
            stranger_wait = r.refused(stranger.clone(), now);
            stranger_due = now + stranger_wait;
        }
    }
    // Remembered: the crashes of the last RETRY_FIRST + FORGET_AFTER (and
    // up to one sweep interval more), and the stranger.
    let window = (RETRY_FIRST + admission::FORGET_AFTER).as_secs() / 60 + 2;
    assert!(r.len() as u64 <= window + 1, "{} remembered", r.len());
    assert!(r.known(&stranger), "the stranger is still backed off");
    assert_eq!(stranger_wait, RETRY_CAP, "and its back-off kept doubling");
    assert!(!r.known(&crashed(0)), "the first crash is forgotten");
    assert!(r.known(&crashed(59)));
}
