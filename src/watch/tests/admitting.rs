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

/// `n` candidates on addresses of their own.
fn rack(n: usize) -> Vec<Sighting> {
    (0..n)
        .map(|i| {
            let host = format!("n{i:04}");
            let ip = format!("10.0.{}.{}", i / 200, 1 + i % 200);
            seen(Source::Mdns, &host, &ip, caps(&host, 8, 24 << 30))
        })
        .collect()
}

/// A rack powering on (issue 41): candidates whose own address announced
/// them go in the fast lane, [`VOUCHED_BURST`] at once, then one per
/// [`VOUCHED_EVERY`], so 1,000 join within 5 s (the slow lane's 20 a
/// second would take 50), and none is refused for the rate.
#[tokio::test(start_paused = true)]
async fn a_thousand_vouched_candidates_join_in_the_fast_lane_within_five_seconds() {
    let mut w = Running::start(false);
    w.announce_vouched(rack(1000));
    let joined = w.during(Duration::from_secs(10)).await;
    assert!(joined.iter().all(|e| e.event == Kind::Joined), "{joined:?}");
    assert_eq!(joined.len(), 1000, "all join");
    let burst = VOUCHED_BURST as usize;
    for (k, e) in joined.iter().enumerate() {
        let due = k.saturating_sub(burst - 1) as u64 * ms(VOUCHED_EVERY);
        assert_eq!(e.at_ms, due, "candidate {k} (of a burst of {burst})");
    }
    assert!(joined[999].at_ms <= 5000);
    w.stop().await.unwrap();
}

/// Guards the fast lane against a stranger that vouches for itself: however
/// many names and TXT tweaks it announces from its own address, that
/// address is dialled at most once per [`PER_ADDRESS_GAP`].
#[tokio::test(start_paused = true)]
async fn one_address_is_dialled_at_most_once_per_gap_however_many_names_it_announces() {
    let mut w = Running::start(false);
    let names: Vec<String> = (0..64).map(|i| format!("s{i:02}")).collect();
    for n in &names {
        w.kill(n, Death::Reset);
    }
    // Every 20 ms for 2 s, each name's TXT changed each time.
    for round in 0..100u32 {
        let flood = names
            .iter()
            .map(|n| seen(Source::Mdns, n, "10.0.9.9", caps(n, 1 + round, 24 << 30)))
            .collect();
        w.announce_vouched(flood);
        let _ = w.during(Duration::from_millis(20)).await;
    }
    let mut dials: Vec<u64> = names.iter().flat_map(|n| w.dials_of(n)).collect();
    dials.sort_unstable();
    let most = (2000 / ms(PER_ADDRESS_GAP) + 1) as usize;
    assert!(
        !dials.is_empty() && dials.len() <= most,
        "{} dials of one address in 2 s (at most {most}): {dials:?}",
        dials.len()
    );
    for pair in dials.windows(2) {
        assert!(pair[1] - pair[0] >= ms(PER_ADDRESS_GAP), "{dials:?}");
    }
    w.stop().await.unwrap();
}

/// The fast lane does not open the slow one: candidates nobody vouched for
/// still go at the slow lane's pace beside a rack joining in the fast one.
#[tokio::test(start_paused = true)]
async fn unvouched_candidates_keep_the_slow_pace_while_vouched_ones_join() {
    let mut w = Running::start(false);
    let all = rack(200);
    let (vouched, claimed) = all.split_at(100);
    w.announce(claimed.to_vec(), vec![]);
    w.announce_vouched(vouched.to_vec());
    let joined = w.during(Duration::from_secs(10)).await;
    assert_eq!(joined.len(), 200, "all join in the end");
    let last_of = |hosts: &[Sighting]| {
        joined
            .iter()
            .filter(|e| {
                hosts
                    .iter()
                    .any(|s| e.instance.starts_with(s.host.as_str()))
            })
            .map(|e| e.at_ms)
            .max()
            .unwrap()
    };
    // The claimed ones: a burst, then one per ADMIT_EVERY.
    let slow = (100 - ADMIT_BURST as u64) * ms(ADMIT_EVERY);
    assert_eq!(last_of(claimed), slow);
    assert!(
        last_of(vouched) < 1000,
        "the vouched ones do not wait for them"
    );
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
