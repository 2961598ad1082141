//! Liveness streams, suspicion, partitions and the engine's own health, on
//! the fake machines in paused time.

use super::*;
use crate::watch::liveness::{REACH_WINDOW, SILENT_AFTER};
use crate::watch::suspicion::{PARTITION_HOLD, SUSPECT_PROBE};

/// A mDNS sighting of machine `i` (`m<i>` at 10.0.1.`i`).
fn machine(i: usize) -> Sighting {
    let host = format!("m{i}");
    seen(
        Source::Mdns,
        &host,
        &format!("10.0.1.{i}"),
        caps(&host, 8, 24 << 30),
    )
}

/// A watch of `n` machines, each holding a stream, all joined and opened.
async fn cluster(n: usize, tuning: WatchTuning) -> Running {
    let mut w = Running::tuned(false, tuning);
    for i in 0..n {
        w.streaming(&format!("m{i}"));
    }
    w.announce((0..n).map(machine).collect(), vec![]);
    for _ in 0..n {
        assert_eq!(w.next().await.event, Kind::Joined);
    }
    // The streams open and pulse.
    assert_eq!(w.during(Duration::from_secs(2)).await, vec![]);
    w
}

fn at(w: &Running) -> u64 {
    ms(Instant::now() - w.t0)
}

#[tokio::test(start_paused = true)]
async fn a_streaming_member_whose_agent_crashes_is_left_within_milliseconds() {
    let mut w = cluster(1, WatchTuning::default()).await;
    let t = at(&w);
    w.kill("m0", Death::Reset);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Left, "{e:?}");
    assert!(
        e.at_ms - t <= 20,
        "the stream's end is heard at once: {} ms",
        e.at_ms - t
    );
    assert_eq!(
        e.reason.as_deref(),
        Some("its liveness connection ended, and its port refuses connections: its agent is gone")
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_goodbye_on_the_stream_is_left_at_once() {
    let mut w = cluster(1, WatchTuning::default()).await;
    let t = at(&w);
    w.stop_agent("m0");
    let e = w.next().await;
    assert_eq!(e.event, Kind::Left);
    assert!(e.at_ms - t <= 20, "{} ms", e.at_ms - t);
    assert!(e
        .reason
        .unwrap()
        .starts_with("goodbye on its liveness connection"));
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_stalled_member_is_suspect_within_1_5_s_up_within_half_a_second_of_resuming_and_never_left(
) {
    let mut w = cluster(2, WatchTuning::default()).await;
    let t = at(&w);
    w.kill("m0", Death::Stalled);
    let e = w.next().await;
    assert_eq!(
        (e.event, e.instance.as_str()),
        (Kind::Suspect, "m0"),
        "{e:?}"
    );
    assert!(e.at_ms - t <= 1500, "suspect after {} ms", e.at_ms - t);
    assert!(
        e.reason
            .as_deref()
            .unwrap()
            .contains("while its host accepts connections"),
        "{e:?}"
    );
    // Twenty seconds stopped, as a box loading a checkpoint: its health
    // checks go unanswered, its dials are accepted: no left.
    assert_eq!(w.during(Duration::from_secs(20)).await, vec![]);
    let resumed = at(&w);
    w.revive("m0");
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Up, "m0"), "{e:?}");
    assert!(
        e.at_ms - resumed <= 500,
        "up {} ms after resuming",
        e.at_ms - resumed
    );
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_agent_restarted_faster_than_its_crash_is_confirmed_is_restarted_at_once() {
    let mut w = cluster(1, WatchTuning::default()).await;
    let t = at(&w);
    let mut c = caps("m0", 8, 24 << 30);
    c.incarnation = Some("00000000000000b2".into());
    w.restart("m0", c);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Restarted, "{e:?}");
    assert!(e.at_ms - t <= 100, "restarted {} ms after", e.at_ms - t);
    assert_eq!(e.incarnation.as_deref(), Some("00000000000000b2"));
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_suspect_past_the_suspicion_timeout_is_left() {
    let tuning = WatchTuning {
        suspect_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let mut w = cluster(1, tuning).await;
    w.kill("m0", Death::Stalled);
    let s = w.next().await;
    assert_eq!(s.event, Kind::Suspect);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Left);
    let after = e.at_ms - s.at_ms;
    assert!(
        (10_000..=10_100).contains(&after),
        "left {after} ms after the suspicion"
    );
    assert!(e.reason.unwrap().contains("the suspicion timeout"));
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_streaming_member_whose_host_vanished_is_left_within_2_5_s() {
    let mut w = cluster(3, WatchTuning::default()).await;
    let t = at(&w);
    w.kill("m1", Death::Vanished);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Left, "m1"), "{e:?}");
    let took = e.at_ms - t;
    assert!(
        took <= ms(SILENT_AFTER + REACH_WINDOW + PARTITION_HOLD) + 150 && took <= 2500,
        "vanished host left after {took} ms"
    );
    assert!(e.reason.unwrap().starts_with("vanished: no pulse for"));
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_handshakes_go_unanswered_while_it_pulses_stays_up() {
    let mut w = cluster(1, WatchTuning::default()).await;
    w.unanswered("m0");
    assert_eq!(w.during(Duration::from_secs(30)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_forged_goodbye_for_a_stalled_member_makes_it_suspect_not_left() {
    let mut w = cluster(1, WatchTuning::default()).await;
    w.kill("m0", Death::Stalled);
    w.goodbye("m0");
    let e = w.next().await;
    assert_eq!(e.event, Kind::Suspect, "{e:?}");
    assert_eq!(w.during(Duration::from_secs(15)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_that_vanished_joins_again_when_it_comes_back() {
    let mut w = cluster(1, WatchTuning::default()).await;
    w.kill("m0", Death::Vanished);
    assert_eq!(w.next().await.event, Kind::Left);
    // Its link is down for 20 s; its cached records are no news.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let back = at(&w);
    w.revive("m0");
    let e = w.next().await;
    assert_eq!(
        (e.event, e.instance.as_str()),
        (Kind::Joined, "m0"),
        "{e:?}"
    );
    assert!(
        e.at_ms - back <= ms(REVISIT_CAP + whole_round()),
        "joined {} ms after its link came back",
        e.at_ms - back
    );
    w.stop().await.unwrap();
}

/// Every instance named as unreachable by the partition events in `got`.
fn unreachable(got: &[Event]) -> Vec<String> {
    got.iter()
        .filter(|e| e.event == Kind::Partitioned)
        .flat_map(|e| e.unreachable.clone().unwrap())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_partition_of_three_of_five_is_one_partitioned_event_and_heals_without_a_join() {
    let tuning = WatchTuning {
        cluster_size: 5,
        ..Default::default()
    };
    let mut w = cluster(5, tuning).await;
    let cut = ["m0", "m2", "m4"];
    for h in cut {
        w.kill(h, Death::Vanished);
    }
    let got = w.during(Duration::from_secs(30)).await;
    let kinds: Vec<Kind> = got.iter().map(|e| e.event).collect();
    assert_eq!(kinds, vec![Kind::Partitioned], "{got:?}");
    let p = &got[0];
    assert_eq!(p.instance, PARTITION_INSTANCE);
    assert_eq!(p.unreachable.as_deref().unwrap(), ["m0", "m2", "m4"]);
    assert_eq!(p.reachable.as_deref().unwrap(), ["m1", "m3"]);
    // Then the rest are cut off too: the coordinator's own link.
    for h in ["m1", "m3"] {
        w.kill(h, Death::Vanished);
    }
    let got = w.during(Duration::from_secs(30)).await;
    assert!(got.iter().all(|e| e.event == Kind::Partitioned), "{got:?}");
    assert_eq!(unreachable(&got), ["m0", "m1", "m2", "m3", "m4"]);
    // It heals: every member up within a dial and a stream's opening.
    let healed = at(&w);
    for i in 0..5 {
        w.revive(&format!("m{i}"));
    }
    let got = w.during(Duration::from_secs(10)).await;
    let ups: BTreeSet<&str> = got
        .iter()
        .filter(|e| e.event == Kind::Up)
        .map(|e| e.instance.as_str())
        .collect();
    assert_eq!(ups.len(), 5, "{got:?}");
    assert!(
        got.iter().all(|e| e.event == Kind::Up),
        "no join, no left: {got:?}"
    );
    let last = got.iter().map(|e| e.at_ms).max().unwrap();
    assert!(
        last - healed <= ms(SUSPECT_PROBE + PULSE) + 100,
        "every member up within one check: {} ms",
        last - healed
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn two_of_five_going_dark_is_no_partition_and_both_are_left() {
    let tuning = WatchTuning {
        cluster_size: 5,
        ..Default::default()
    };
    let mut w = cluster(5, tuning).await;
    w.kill("m1", Death::Vanished);
    w.kill("m3", Death::Vanished);
    let got = w.during(Duration::from_secs(5)).await;
    let left: Vec<(Kind, &str)> = got.iter().map(|e| (e.event, e.instance.as_str())).collect();
    assert_eq!(
        left,
        vec![(Kind::Left, "m1"), (Kind::Left, "m3")],
        "{got:?}"
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_was_itself_stalled_accuses_nobody() {
    let mut w = cluster(4, WatchTuning::default()).await;
    // The coordinator SIGSTOPped for 3 s: its clock jumps, every stream's
    // last pulse looks 3 s old when it runs again.
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    // Shorter stalls while every member is at rest (its tick then comes
    // every 200 ms, not 50): around the 1 s of silence, and below it.
    for ms in [500, 800, 1000, 1200] {
        tokio::time::advance(Duration::from_millis(ms)).await;
        assert_eq!(
            w.during(Duration::from_secs(5)).await,
            vec![],
            "after a stall of {ms} ms"
        );
    }
    // And a real stall of a member after it is still seen.
    w.kill("m2", Death::Stalled);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Suspect, "m2"));
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_agent_predates_the_stream_is_still_suspect_not_left_when_stalled() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.kill("box1", Death::Stalled);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Suspect, "{e:?}");
    assert_eq!(w.during(Duration::from_secs(20)).await, vec![]);
    w.revive("box1");
    let e = w.next().await;
    assert_eq!(e.event, Kind::Up, "{e:?}");
    assert!(e.reason.unwrap().starts_with("its handshake answers again"));
    w.stop().await.unwrap();
}

/// An engine with one member, `m0`, whose open stream last pulsed at
/// `heard`: for looking at one decision of the engine at a time.
fn engine_with_a_member(heard: Instant) -> Watch<FakeCheck, FakeCheck> {
    use crate::watch::liveness::Abort;
    use crate::watch::member::Live;
    let f = FakeCheck::default();
    let mut w = Watch::new(
        (f.clone(), f),
        NodeDefaults::default(),
        WatchTuning::default(),
        heard,
    );
    let s = machine(0);
    let node = crate::pipeline::node::node_of(&s, &NodeDefaults::default());
    let mut m = Member::new(s, node, (None, None), 1, heard + Duration::from_secs(60));
    m.live = Live::Following {
        _task: Abort(tokio::spawn(async {}).abort_handle()),
        id: 1,
        heard,
        open: true,
        bound: false,
        beat: crate::watch::liveness::Beat::new(),
    };
    w.members.put("m0".into(), m);
    w
}

#[tokio::test(start_paused = true)]
async fn a_silence_is_dialled_when_the_watch_ran_on_time_throughout() {
    let t0 = Instant::now();
    let mut w = engine_with_a_member(t0);
    let mut t = t0;
    while t < t0 + SILENT_AFTER {
        t += crate::watch::local::TICK;
        assert_eq!(w.health.observe(t), None);
        w.health.ticked(t);
        let due = w.due_probes(t);
        if t - t0 < SILENT_AFTER {
            assert!(due.is_empty(), "dialled after {:?} of silence", t - t0);
        } else {
            assert_eq!(due.len(), 1);
            assert_eq!(due[0].why, crate::watch::liveness::ProbeFor::Silence);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_silence_that_spans_the_watchs_own_stall_counts_only_from_its_end() {
    let t0 = Instant::now();
    let mut w = engine_with_a_member(t0);
    // Three seconds without a turn of the loop (SIGSTOP, saturated cores).
    let resumed = t0 + Duration::from_secs(3);
    assert!(w.health.observe(resumed).is_some(), "the stall is noticed");
    assert!(w.due_probes(resumed).is_empty(), "no member accused for it");
    w.health.ticked(resumed);
    assert!(
        !w.health.trusts(t0 + Duration::from_secs(1)),
        "a dial from before it is not believed"
    );
    assert!(w.health.trusts(resumed + Duration::from_millis(1)));
    // Then a real silence, counted from the stall's end, is dialled.
    let mut t = resumed;
    while t < resumed + SILENT_AFTER {
        t += crate::watch::local::TICK;
        assert_eq!(w.health.observe(t), None);
        w.health.ticked(t);
        let due = w.due_probes(t);
        assert_eq!(
            due.len(),
            usize::from(t - resumed >= SILENT_AFTER),
            "at {:?}",
            t - t0
        );
    }
}

#[tokio::test(start_paused = true)]
async fn when_a_partition_heals_but_one_member_stays_dark_it_alone_is_left() {
    let tuning = WatchTuning {
        cluster_size: 5,
        ..Default::default()
    };
    let mut w = cluster(5, tuning).await;
    for h in ["m0", "m2", "m4"] {
        w.kill(h, Death::Vanished);
    }
    let got = w.during(Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].event, Kind::Partitioned);
    w.revive("m0");
    w.revive("m2");
    let got = w.during(Duration::from_secs(10)).await;
    let seen: BTreeSet<(&str, &str)> = got
        .iter()
        .map(|e| (e.event.as_str(), e.instance.as_str()))
        .collect();
    let want: BTreeSet<(&str, &str)> = [("up", "m0"), ("up", "m2"), ("left", "m4")]
        .into_iter()
        .collect();
    assert_eq!(seen, want, "{got:?}");
    assert_eq!(got.len(), 3, "{got:?}");
    w.stop().await.unwrap();
}

/// A partition explains a silence for a while, not for ever: members held
/// in one are left once nothing has been heard from them for the whole
/// suspicion timeout, and the partition event said so from the start.
#[tokio::test(start_paused = true)]
async fn members_held_in_a_partition_are_left_after_the_suspicion_timeout() {
    let tuning = WatchTuning {
        cluster_size: 5,
        suspect_timeout: Duration::from_secs(60),
    };
    let mut w = cluster(5, tuning).await;
    for h in ["m0", "m2", "m4"] {
        w.kill(h, Death::Vanished);
    }
    let cut = at(&w);
    let got = w.during(Duration::from_secs(50)).await;
    let kinds: Vec<Kind> = got.iter().map(|e| e.event).collect();
    assert_eq!(kinds, vec![Kind::Partitioned], "held first: {got:?}");
    let got = w.during(Duration::from_secs(20)).await;
    let left: BTreeSet<&str> = got
        .iter()
        .filter(|e| e.event == Kind::Left)
        .map(|e| e.instance.as_str())
        .collect();
    assert_eq!(left, BTreeSet::from(["m0", "m2", "m4"]), "{got:?}");
    for e in got.iter().filter(|e| e.event == Kind::Left) {
        assert!(
            e.reason.as_deref().unwrap().contains("in a partition"),
            "{e:?}"
        );
        // The suspicion starts when the partition is seen, a few seconds
        // after the cut.
        assert!(e.at_ms - cut <= 66_000, "left by the timeout: {e:?}");
    }
    w.stop().await.unwrap();
}

/// A member that died and whose address another host took, accepting on
/// its agent port without answering: its stream is reset (a stalled
/// agent's never is), and a port that then proves nothing for a whole
/// handshake round is no reason to keep it: left within a health check
/// and a round, not held as a suspect for the suspicion timeout.
#[tokio::test(start_paused = true)]
async fn a_member_whose_address_another_host_took_is_left_without_waiting_out_the_suspicion() {
    let mut w = cluster(2, WatchTuning::default()).await;
    let t = at(&w);
    w.kill("m0", Death::TakenOver);
    let got = w.during(Duration::from_secs(20)).await;
    let left: Vec<&Event> = got.iter().filter(|e| e.event == Kind::Left).collect();
    assert_eq!(left.len(), 1, "{got:?}");
    let e = left[0];
    assert_eq!(e.instance, "m0");
    assert!(
        e.reason.as_deref().unwrap().contains("proves nothing"),
        "{e:?}"
    );
    assert!(
        e.at_ms - t <= ms(health::HEALTH_INTERVAL + whole_round()) + 1_000,
        "left {} ms after the takeover",
        e.at_ms - t
    );
    assert!(
        got.iter().all(|e| e.instance == "m0"),
        "m1 untouched: {got:?}"
    );
    w.stop().await.unwrap();
}

/// What lets the engine's tick skip its walks over every member (issue
/// 41): with every member at rest, nothing is due before the first
/// member's silence would begin (or its check); a member in doubt makes
/// every tick look again.
#[tokio::test(start_paused = true)]
async fn the_tick_has_nothing_to_do_for_members_at_rest_until_a_silence_could_begin() {
    let t0 = Instant::now();
    let mut w = engine_with_a_member(t0);
    assert_eq!(w.at_rest_until(t0), Some(t0 + SILENT_AFTER));
    tokio::time::advance(Duration::from_millis(400)).await;
    let now = Instant::now();
    assert_eq!(
        w.at_rest_until(now),
        Some(t0 + SILENT_AFTER),
        "the silence counts from the last pulse, not from the look"
    );
    w.members.member_mut("m0").unwrap().probing = true;
    assert_eq!(w.at_rest_until(now), None, "a member being dialled");
    let m = w.members.member_mut("m0").unwrap();
    m.probing = false;
    m.suspicion = Some(crate::watch::member::Suspicion {
        since: now,
        next_probe: now,
    });
    assert_eq!(w.at_rest_until(now), None, "a suspect");
}

/// A large cluster asks its agents for fewer pulses (issue 41), and each
/// member's silence is then judged by the pace its own pulses say it keeps.
#[test]
fn the_pace_asked_of_agents_grows_with_the_cluster_past_300_members_in_steps() {
    use crate::watch::liveness::{pace_for, silence_after};
    let ms = |m| pace_for(m).as_millis();
    assert_eq!((ms(1), ms(200), ms(300)), (300, 300, 300));
    assert_eq!((ms(301), ms(350), ms(1_000)), (400, 400, 1_000));
    assert_eq!(ms(100_000), 2_000, "never slower than an agent takes");
    assert_eq!(silence_after(Duration::from_millis(300)), SILENT_AFTER);
    assert_eq!(
        silence_after(Duration::from_secs(1)),
        Duration::from_millis(3_100)
    );
    assert_eq!(
        silence_after(Duration::from_secs(10)),
        Duration::from_millis(6_100),
        "an agent's claim of a slower pace than it is ever asked counts as the slowest"
    );
}

#[tokio::test(start_paused = true)]
async fn a_member_pulsing_every_second_is_dialled_after_three_missed_pulses_not_after_one_second() {
    use crate::watch::member::Live;
    let t0 = Instant::now();
    let mut w = engine_with_a_member(t0);
    let Live::Following { beat, .. } = &w.members.member_mut("m0").unwrap().live else {
        unreachable!()
    };
    beat.set_pace(Duration::from_secs(1));
    assert_eq!(
        w.at_rest_until(t0),
        Some(t0 + Duration::from_millis(1_000)),
        "a look at most a second apart"
    );
    tokio::time::advance(Duration::from_millis(2_500)).await;
    assert!(
        w.due_probes(Instant::now()).is_empty(),
        "2.5 s: two pulses late"
    );
    assert_eq!(
        w.at_rest_until(Instant::now()),
        Some(t0 + Duration::from_millis(3_100))
    );
    tokio::time::advance(Duration::from_millis(700)).await;
    assert_eq!(w.due_probes(Instant::now()).len(), 1, "3.2 s: dialled");
}
