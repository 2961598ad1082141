//! The engine under churn, on paused time: restarts (seen gone or not),
//! hung handshakes beside live joins, and a randomized schedule of stops,
//! crashes and restarts checked against the stream's grammar and the
//! machines actually running.

use super::*;

/// `host`'s caps as announced by the run with incarnation `inc`.
fn run_of(host: &str, inc: u64) -> NodeCaps {
    let mut c = caps(host, 8, 24 << 30);
    c.incarnation = Some(format!("{inc:016x}"));
    c
}

/// A sighting of `host` (at 10.0.0.`n`) announcing `caps`.
fn announcing(host: &str, n: u8, caps: NodeCaps) -> Sighting {
    seen(Source::Mdns, host, &format!("10.0.0.{n}"), caps)
}

impl Running {
    /// The machine `host` now runs as `caps` (a new process), alive.
    fn runs(&self, host: &str, caps: NodeCaps) {
        let mut m = self.machines.0.lock().unwrap();
        m.dead.remove(host);
        m.fresh.insert(host.into(), caps);
    }
}

/// Guards against a restart that nothing else shows (same id, address and
/// records: a supervisor restarting a crashed agent at once) going
/// unreported: the new incarnation in the announcement is a `restarted`,
/// at once, though the member was never seen gone.
#[tokio::test(start_paused = true)]
async fn a_restart_announced_with_a_new_incarnation_is_reported_restarted_at_once() {
    let mut w = Running::start(false);
    w.runs("box1", run_of("box1", 1));
    w.announce(vec![announcing("box1", 1, run_of("box1", 1))], vec![]);
    let e = w.next().await;
    assert_eq!(
        (e.event, e.incarnation.as_deref()),
        (Kind::Joined, Some("0000000000000001"))
    );
    tokio::time::advance(Duration::from_millis(400)).await;
    w.runs("box1", run_of("box1", 2));
    w.announce(vec![announcing("box1", 1, run_of("box1", 2))], vec![]);
    let e = w.next().await;
    assert_eq!(
        what(&e),
        (
            Kind::Restarted,
            "box1",
            400,
            Some("incarnation 0000000000000001 -> 0000000000000002")
        )
    );
    assert_eq!(e.incarnation.as_deref(), Some("0000000000000002"));
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "once");
    w.stop().await.unwrap();
}

/// Guards against a restart being invisible when its announcement is
/// missed: the health check's handshake tells the new incarnation too.
#[tokio::test(start_paused = true)]
async fn a_restart_whose_announcement_is_missed_is_reported_restarted_at_the_next_check() {
    let mut w = Running::start(false);
    w.runs("box1", run_of("box1", 1));
    w.announce(vec![announcing("box1", 1, run_of("box1", 1))], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.runs("box1", run_of("box1", 2));
    let e = w.next().await;
    assert_eq!(e.event, Kind::Restarted);
    assert!(
        (ms(first_check())..=ms(HEALTH_INTERVAL)).contains(&e.at_ms),
        "{}",
        e.at_ms
    );
    w.stop().await.unwrap();
}

/// Guards against a lost rejoin: an agent crashed, was reported
/// left by its health check, and its cached record kept being refused;
/// restarted, its first announcement (a new incarnation) joins it at once.
#[tokio::test(start_paused = true)]
async fn a_restarted_agent_whose_predecessor_crashed_joins_at_its_first_announcement() {
    let mut w = Running::start(false);
    let old = || announcing("box1", 1, run_of("box1", 1));
    w.runs("box1", run_of("box1", 1));
    w.announce(vec![old()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.kill("box1", Death::Reset);
    assert_eq!(w.next().await.event, Kind::Left);
    // The dead one's cached record comes with every snapshot.
    w.announce(vec![old()], vec![]);
    assert_eq!(w.next().await.event, Kind::Refused);
    let t = Instant::now();
    w.runs("box1", run_of("box1", 2));
    w.announce(vec![announcing("box1", 1, run_of("box1", 2))], vec![]);
    let e = w.next().await;
    assert_eq!((e.event, Instant::now()), (Kind::Joined, t), "at once");
    w.stop().await.unwrap();
}

/// Guards against a goodbye of the previous process, delivered after the
/// restarted one announced identical records, leaving a live agent out:
/// the goodbye's check finds the new incarnation, a restart of the member
/// it never stopped being, not a leave and a join.
#[tokio::test(start_paused = true)]
async fn a_late_goodbye_of_the_previous_process_is_a_restart_not_a_leave() {
    let mut w = Running::start(false);
    w.runs("box1", run_of("box1", 1));
    w.announce(vec![announcing("box1", 1, run_of("box1", 1))], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(400)).await;
    w.runs("box1", run_of("box1", 2));
    w.goodbye("box1");
    let e = w.next().await;
    assert_eq!(
        (e.event, e.at_ms, e.incarnation.as_deref()),
        (Kind::Restarted, 400, Some("0000000000000002"))
    );
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "no left");
    w.stop().await.unwrap();
}

/// An agent stopped (its goodbye checked: the port refused) and started
/// again before anything announced it: the quiet dial
/// [`CONFIRM_AFTER_GOODBYE`] after its leave finds the new incarnation.
#[tokio::test(start_paused = true)]
async fn a_member_that_left_on_a_goodbye_joins_again_when_its_successor_answers_the_confirmation() {
    let mut w = Running::start(false);
    w.runs("box1", run_of("box1", 1));
    w.announce(vec![announcing("box1", 1, run_of("box1", 1))], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    assert_eq!(w.next().await.event, Kind::Left);
    tokio::time::advance(Duration::from_millis(500)).await;
    w.runs("box1", run_of("box1", 2));
    let e = w.next().await;
    assert_eq!(
        (e.event, e.at_ms, e.incarnation.as_deref()),
        (
            Kind::Joined,
            ms(CONFIRM_AFTER_GOODBYE),
            Some("0000000000000002")
        )
    );
    w.stop().await.unwrap();
}

/// Guards against candidates admitted as one batch: a candidate whose
/// handshake hangs does not hold back another announced with it.
#[tokio::test(start_paused = true)]
async fn a_candidate_whose_handshake_hangs_does_not_delay_another_join() {
    let mut w = Running::start(false);
    w.kill("hung", Death::Hangs);
    tokio::time::advance(Duration::from_millis(250)).await;
    let hung = announcing("hung", 9, caps("hung", 8, 24 << 30));
    w.announce(
        vec![hung, announcing("box2", 2, caps("box2", 8, 8 << 30))],
        vec![],
    );
    let e = w.next().await;
    assert_eq!(what(&e), (Kind::Joined, "box2", 250, None));
    w.stop().await.unwrap();
}

/// Guards against health checks run as one round: a member whose check
/// hangs does not delay another member's crash from being seen, nor a
/// join announced meanwhile.
#[tokio::test(start_paused = true)]
async fn a_member_whose_health_check_hangs_costs_only_its_own_check() {
    let mut w = Running::start(false);
    w.announce(
        vec![box1(), announcing("box3", 3, caps("box3", 8, 8 << 30))],
        vec![],
    );
    assert_eq!(w.during(Duration::from_millis(1)).await.len(), 2);
    w.kill("box1", Death::Hangs);
    w.kill("box3", Death::Reset);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Left, "box3"));
    assert!(within_crash_bound(e.at_ms), "{}", e.at_ms);
    tokio::time::advance(Duration::from_millis(500)).await;
    let t = Instant::now();
    w.announce(
        vec![announcing("box2", 2, caps("box2", 8, 8 << 30))],
        vec![],
    );
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Joined, "box2"));
    assert_eq!(Instant::now(), t, "at once, box1's check still hanging");
    w.stop().await.unwrap();
}

/// What the randomized schedule does to one machine.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// Starts it (a new incarnation), unless it runs.
    Start,
    /// SIGTERM: goodbye, then gone.
    Stop,
    /// SIGKILL: gone, its records still cached.
    Crash,
    /// kill -9 and start again at once: same records, new incarnation.
    Restart,
}

/// Checks one instance's events against the grammar: joined, then
/// (updated | restarted | worker | suspect up?)*, then left, and so on.
fn grammar_holds(instance: &str, events: &[Event], seed: u64) {
    let (mut member, mut suspect) = (false, false);
    for e in events.iter().filter(|e| e.instance == instance) {
        let ok = match e.event {
            Kind::Joined => !std::mem::replace(&mut member, true),
            Kind::Left => {
                suspect = false;
                std::mem::replace(&mut member, false)
            }
            Kind::Updated | Kind::Restarted | Kind::Worker => member,
            Kind::Suspect => member && !std::mem::replace(&mut suspect, true),
            Kind::Up => std::mem::replace(&mut suspect, false),
            Kind::Refused => true,
            _ => false,
        };
        assert!(ok, "seed {seed}: {instance}: {:?} out of order", what(e));
    }
}

/// The stream's grammar and its final membership under a random schedule
/// of starts, stops, crashes and fast restarts of 6 machines (40 seeds).
/// The machines' records stay cached after a crash, as mdns-sd's do.
#[tokio::test(start_paused = true)]
async fn under_random_churn_the_stream_keeps_its_grammar_and_ends_with_the_running_machines() {
    for seed in 0..40u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut w = Running::start(false);
        let hosts: Vec<String> = (0..6).map(|i| format!("m{i}")).collect();
        // What runs (host -> incarnation) and what the cache announces.
        let mut running: BTreeMap<String, u64> = BTreeMap::new();
        let mut cached: BTreeMap<String, u64> = BTreeMap::new();
        let mut events = Vec::new();
        let mut next_inc = 1u64;
        for _ in 0..60 {
            let i = rng.usize(..hosts.len());
            let host = &hosts[i];
            let act = [Act::Start, Act::Stop, Act::Crash, Act::Restart][rng.usize(..4)];
            let start = |w: &Running, running: &mut BTreeMap<String, u64>, inc: u64| {
                w.runs(host, run_of(host, inc));
                running.insert(host.clone(), inc);
            };
            match act {
                Act::Start if running.contains_key(host) => {}
                Act::Start | Act::Restart => {
                    start(&w, &mut running, next_inc);
                    cached.insert(host.clone(), next_inc);
                    next_inc += 1;
                }
                Act::Stop | Act::Crash if !running.contains_key(host) => {}
                Act::Stop => {
                    w.kill(host, Death::Reset);
                    running.remove(host);
                    cached.remove(host);
                    w.goodbye(host);
                }
                Act::Crash => {
                    w.kill(host, Death::Reset);
                    running.remove(host);
                }
            }
            if matches!(act, Act::Start | Act::Restart) {
                let snapshot = cached
                    .iter()
                    .map(|(h, inc)| {
                        // One address per machine, as on a real LAN.
                        let n = hosts.iter().position(|x| x == h).unwrap() as u8 + 1;
                        announcing(h, n, run_of(h, *inc))
                    })
                    .collect();
                w.announce(snapshot, vec![]);
            }
            let pause = Duration::from_millis(rng.u64(0..1600));
            events.extend(w.during(pause).await);
        }
        // Past every bound: crashes seen, confirmations done.
        events.extend(w.during(Duration::from_secs(12)).await);
        for h in &hosts {
            grammar_holds(h, &events, seed);
        }
        let mut members = BTreeSet::new();
        for e in &events {
            match e.event {
                Kind::Joined => {
                    members.insert(e.instance.clone());
                }
                Kind::Left => {
                    members.remove(&e.instance);
                }
                _ => {}
            }
        }
        let want: BTreeSet<String> = running.keys().cloned().collect();
        assert_eq!(
            members, want,
            "seed {seed}: the membership the events describe"
        );
        for (h, inc) in &running {
            let last = events
                .iter()
                .rfind(|e| &e.instance == h && e.event != Kind::Refused)
                .and_then(|e| e.incarnation.clone());
            assert_eq!(
                last,
                Some(format!("{inc:016x}")),
                "seed {seed}: {h} as it runs now"
            );
        }
        w.stop().await.unwrap();
    }
}
