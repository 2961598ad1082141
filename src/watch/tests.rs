//! The watch engine on synthetic sightings, a fake check and paused time:
//! every interval is the real one, and the `at_ms` of each event is exact.

use super::admission::MAX_REMEMBERED;
use super::admission::{
    ADMIT_BURST, ADMIT_EVERY, PER_ADDRESS_GAP, RETRY_CAP, RETRY_FIRST, VOUCHED_BURST, VOUCHED_EVERY,
};
use super::engine::*;
use super::event::SCHEMA_VERSION;
use super::event::{Event, Kind};
use super::goodbyes::{CONFIRM_AFTER_GOODBYE, REVISIT_CAP};
use super::health::{HEALTH_INTERVAL, HEALTH_JITTER, RECHECK_AFTER};
use super::inputs::{member_name, Announcements, Check, Zone};
use super::liveness::Liveness;
use super::liveness::{MemberPulses, Reach, Told, REACH_WINDOW};
use super::local::TICK;
use super::member::Member;
use super::suspicion::PARTITION_HOLD;
use super::*;
use crate::admit::{ATTEMPTS, MIN_ATTEMPT, STAGGER};
use crate::pipeline::report::gib;
use crate::pipeline::NodeDefaults;
use crate::sighting::{Discovery, Problem, Sighting};
use crate::sighting::{Evidence, Source};
use crate::sources::mdns::Change;
use rlx_proto::caps::{DeviceInfo, NodeCaps};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The LAN as the engine reads it: the changes the test sends, and how
/// often the engine asked to re-learn lost instances.
struct FakeLan {
    changes: mpsc::UnboundedReceiver<Change>,
    relearns: Arc<Mutex<Vec<Instant>>>,
}

impl Announcements for FakeLan {
    fn next(&mut self) -> impl Future<Output = Option<Change>> {
        self.changes.recv()
    }

    fn relearn(&mut self) {
        self.relearns.lock().unwrap().push(Instant::now());
    }
}

/// How a dead machine answers the check: at once (its host is up and resets
/// the connection) or after the whole handshake round (its host is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Death {
    Reset,
    Vanished,
    /// Accepts the connection and never answers (a hung process).
    Hangs,
    /// SIGSTOPped: its kernel accepts connections, its handshake goes
    /// unanswered for the whole round, and its stream sends nothing.
    Stalled,
    /// Dead, and another host took its address and accepts on its agent
    /// port without answering: its stream is reset (that host never had
    /// the connection), its handshakes go unanswered.
    TakenOver,
}

/// One full handshake round against a host that never answers: the last of
/// [`ATTEMPTS`] attempts starts [`STAGGER`] apart and waits [`MIN_ATTEMPT`].
fn whole_round() -> Duration {
    STAGGER * (ATTEMPTS as u32 - 1) + MIN_ATTEMPT
}

/// What the fake machines answer: the dead ones fail, the others return
/// their sighting with handshake evidence and, when set, fresh caps.
#[derive(Default)]
struct Machines {
    dead: BTreeMap<String, Death>,
    /// Addresses (`IP:port`) that fail whoever is dialled there: a lease
    /// given up.
    dead_at: BTreeMap<String, Death>,
    fresh: BTreeMap<String, NodeCaps>,
    /// When each host was dialled (checked), in order.
    dials: Vec<(String, Instant)>,
    /// Where each host was dialled (`IP:port`), in the same order.
    dialled_at: Vec<(String, String)>,
    /// How often each host's agent was restarted in place (a supervisor's
    /// restart in milliseconds): its stream ends, its port still accepts.
    restarts: BTreeMap<String, u32>,
    /// Hosts whose agents say goodbye on their stream as they stop.
    byes: BTreeSet<String>,
    /// Hosts whose handshakes go unanswered while their agents run (a
    /// flood holds their connection slots).
    unanswered: BTreeSet<String>,
    /// When each host's port was dialled (a TCP connect, no handshake).
    reaches: Vec<(String, Instant)>,
    /// Hosts whose agents hold a liveness stream (the others predate it).
    streaming: BTreeSet<String>,
    /// Of those, the ones whose pulses carry the digest of their facts.
    telling: BTreeSet<String>,
    /// Streams opened, per host.
    follows: BTreeMap<String, u32>,
    /// The pulse interval the engine last asked of the agents.
    pace: Option<Duration>,
    /// Hosts whose agents prove the node key pinned for their id (in
    /// handshakes and in their streams' opening).
    keyed: BTreeSet<String>,
    /// Hosts whose address now answers as their pinned id without the
    /// pinned node key: admission refuses it as a pin clash.
    claimed: BTreeSet<String>,
}

impl Machines {
    fn death(&self, s: &Sighting) -> Option<Death> {
        self.dead
            .get(&s.host)
            .or(self.dead_at.get(&s.addr))
            .copied()
    }
}

/// The admission stand-in: no network, answers from [`Machines`].
#[derive(Clone, Default)]
struct FakeCheck(Arc<Mutex<Machines>>);

impl Check for FakeCheck {
    async fn check(&self, d: Discovery) -> Discovery {
        let (mut out, mut wait) = (Discovery::default(), Duration::ZERO);
        {
            let mut m = self.0.lock().unwrap();
            for mut s in d.sightings {
                m.dials.push((s.host.clone(), Instant::now()));
                m.dialled_at.push((s.host.clone(), s.addr.clone()));
                if m.claimed.contains(&s.host) {
                    let mut p = Problem::stranger(
                        s.source,
                        s.host.clone(),
                        "refused: node id is pinned and its handshake proves no node key",
                    );
                    p.pin_clash = Some(crate::sighting::PinClash {
                        pinned: "SHA256:pinned".into(),
                        shown: "none".into(),
                        pins_file: None,
                        fix: "rlx-discover pins forget".into(),
                    });
                    out.problems.push(p);
                    continue;
                }
                let death = m
                    .death(&s)
                    .or_else(|| m.unanswered.contains(&s.host).then_some(Death::Stalled));
                match death {
                    Some(death) => {
                        let (delay, reason) = match death {
                            Death::Reset => (Duration::ZERO, "connection refused"),
                            Death::Vanished => (whole_round(), "no answer within 1.5 s"),
                            Death::Hangs => (Duration::from_secs(86_400), "never answered"),
                            Death::Stalled | Death::TakenOver => {
                                (whole_round(), "no reply within 1.5 s")
                            }
                        };
                        wait = wait.max(delay);
                        out.problems
                            .push(Problem::stranger(s.source, s.host.clone(), reason));
                    }
                    None => {
                        if let Some(c) = m.fresh.get(&s.host) {
                            s.caps = Some(c.clone());
                        }
                        if m.keyed.contains(&s.host) {
                            s.identity = crate::sighting::Pinning::Pinned;
                        }
                        s.evidence = Evidence::Handshake;
                        out.sightings.push(s);
                    }
                }
            }
        }
        tokio::time::sleep(wait).await;
        out
    }
}

impl Liveness for FakeCheck {
    fn ask_pace(&self, every: Duration) {
        self.0.lock().unwrap().pace = Some(every);
    }

    /// A stream as the machine's agent would hold it: opened (as the
    /// machine's caps say), then a pulse every [`PULSE`] while it is
    /// alive; nothing while it is stalled or vanished; the end, at once,
    /// when its process died (its kernel closes the stream).
    async fn follow(&self, s: Sighting, to: MemberPulses) {
        let (opened, streaming) = {
            let mut m = self.0.lock().unwrap();
            if m.death(&s) == Some(Death::Reset) {
                drop(m);
                let why = "connection refused".to_string();
                to.tell(Told::Failed { why, refused: true });
                return;
            }
            if m.death(&s) == Some(Death::TakenOver) {
                drop(m);
                let why = "no reply to the follow hello".to_string();
                to.tell(Told::Failed {
                    why,
                    refused: false,
                });
                return;
            }
            *m.follows.entry(s.host.clone()).or_default() += 1;
            let caps = m.fresh.get(&s.host).cloned().or(s.caps.clone());
            let keyed = m.keyed.contains(&s.host);
            let opened = Told::Opened {
                id: caps.as_ref().map(|c| c.id.clone()),
                incarnation: caps.as_ref().and_then(|c| c.incarnation.clone()),
                node_key: caps
                    .as_ref()
                    .and_then(|c| c.node_key.clone())
                    .filter(|_| keyed),
            };
            (opened, m.streaming.contains(&s.host))
        };
        let process = self.0.lock().unwrap().restarts.get(&s.host).copied();
        if !to.tell(opened) {
            return;
        }
        if !streaming {
            to.tell(Told::Unsupported);
            return;
        }
        // Its process is looked at every 10 ms: a death is heard as soon
        // as a real kernel would close the stream.
        let mut next_pulse = Instant::now();
        let mut told_facts: Option<String> = None;
        loop {
            let facts = {
                let m = self.0.lock().unwrap();
                let caps = m.fresh.get(&s.host).cloned().or(s.caps.clone());
                (m.telling.contains(&s.host))
                    .then(|| caps.map(|c| rlx_proto::handshake::follow::facts_of(&c)))
                    .flatten()
            };
            if let Some(f) = facts.filter(|f| told_facts.as_ref() != Some(f)) {
                told_facts = Some(f.clone());
                if !to.tell(Told::Facts(f)) {
                    return;
                }
            }
            let (death, bye, restarted) = {
                let m = self.0.lock().unwrap();
                let restarted = m.restarts.get(&s.host).copied() != process;
                (m.death(&s), m.byes.contains(&s.host), restarted)
            };
            if restarted {
                let why = "its liveness connection closed".to_string();
                to.tell(Told::Ended { why, reset: false });
                return;
            }
            match death {
                Some(Death::TakenOver) => {
                    let why = "its liveness connection failed (connection reset)".to_string();
                    to.tell(Told::Ended { why, reset: true });
                    return;
                }
                Some(Death::Reset) => {
                    let told = if bye {
                        Told::Bye
                    } else {
                        let why = "its liveness connection closed".to_string();
                        Told::Ended { why, reset: false }
                    };
                    to.tell(told);
                    return;
                }
                None if Instant::now() >= next_pulse => {
                    if !to.tell(Told::Pulse) {
                        return;
                    }
                    next_pulse += PULSE;
                }
                // Stalled, vanished or hung: nothing is sent, and a
                // process that resumes pulses at its next turn.
                Some(_) => next_pulse = next_pulse.max(Instant::now()),
                None => {}
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The machine's kernel: accepting for a live or stalled agent,
    /// refusing for a dead one, silent for a vanished host.
    async fn reach(&self, s: Sighting, window: Duration) -> Reach {
        let death = {
            let mut m = self.0.lock().unwrap();
            m.reaches.push((s.host.clone(), Instant::now()));
            m.death(&s)
        };
        match death {
            Some(Death::Reset) => Reach::Refused,
            Some(Death::Vanished) => {
                tokio::time::sleep(window).await;
                Reach::Silent
            }
            _ => Reach::Accepted,
        }
    }
}

/// The agents' pulse interval.
const PULSE: Duration = Duration::from_millis(300);

/// A zone listing whatever the test puts in it.
#[derive(Clone, Default)]
struct FakeZone(Arc<Mutex<Vec<Sighting>>>);

impl Zone for FakeZone {
    async fn browse(&mut self) -> Result<Discovery, String> {
        Ok(Discovery {
            sightings: self.0.lock().unwrap().clone(),
            ..Default::default()
        })
    }
}

/// A node id of its own for each host name, as real agents have.
fn node_id(host: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    host.hash(&mut h);
    format!("{:016x}", h.finish())
}

fn caps(host: &str, cores: u32, gpu_mem: u64) -> NodeCaps {
    NodeCaps {
        id: node_id(host),
        hostname: host.into(),
        os: "linux".into(),
        cores,
        ram_total: 64 << 30,
        ram_avail: 32 << 30,
        devices: vec![DeviceInfo {
            device: "cuda".into(),
            name: "cuda".into(),
            mem_bytes: gpu_mem,
            unified: false,
            gflops: 0.0,
            available: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An mDNS sighting of `host` at `ip`:9100 with TXT caps.
fn seen(source: Source, host: &str, ip: &str, caps: NodeCaps) -> Sighting {
    Sighting {
        identity: crate::sighting::Pinning::Unpinned,
        source,
        host: host.into(),
        addr: format!("{ip}:9100"),
        ip: ip.parse().ok(),
        port: 9100,
        agent_port: Some(9100),
        worker_reachable: None,
        ssh: None,
        caps: Some(caps),
        evidence: Evidence::Txt,
        heard_on: None,
        found_ms: 0,
    }
}

fn box1() -> Sighting {
    seen(Source::Mdns, "box1", "10.0.0.1", caps("box1", 8, 24 << 30))
}

/// A watch running in its own task, fed by the test.
struct Running {
    t0: Instant,
    lan: Option<mpsc::UnboundedSender<Change>>,
    events: mpsc::UnboundedReceiver<Event>,
    machines: FakeCheck,
    zone: FakeZone,
    /// When the engine asked the LAN to re-learn lost instances.
    relearns: Arc<Mutex<Vec<Instant>>>,
    stopper: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), WatchError>>,
}

impl Running {
    /// Starts a watch of the fake LAN, and of the fake zone when `dns`.
    fn start(dns: bool) -> Running {
        Running::tuned(dns, WatchTuning::default())
    }

    /// [`Running::start`] with the engine's knobs set.
    fn tuned(dns: bool, tuning: WatchTuning) -> Running {
        let (lan, changes) = mpsc::unbounded_channel();
        let relearns = Arc::new(Mutex::new(Vec::new()));
        let mut rx = FakeLan {
            changes,
            relearns: Arc::clone(&relearns),
        };
        let (ev_tx, events) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let machines = FakeCheck::default();
        let zone = FakeZone::default();
        // A fixed seed: the health checks' jitter replays the same way each run.
        let mut w = Watch::new(
            (machines.clone(), machines.clone()),
            NodeDefaults::default(),
            tuning,
            Instant::now(),
        );
        // The health checks' jitter from a fixed seed: a replayable schedule.
        w.members.reseed(7);
        let mut z = dns.then(|| zone.clone());
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            w.run(Some(&mut rx), z.as_mut(), shutdown, move |e| {
                let _ = ev_tx.send(e);
            })
            .await
        });
        Running {
            t0: Instant::now(),
            lan: Some(lan),
            events,
            machines,
            zone,
            relearns,
            stopper: Some(stop),
            task,
        }
    }

    fn announce(&self, sightings: Vec<Sighting>, problems: Vec<Problem>) {
        let change = Change::Snapshot {
            sightings,
            problems,
            vouched: BTreeSet::new(),
        };
        self.lan.as_ref().unwrap().send(change).unwrap();
    }

    /// As [`Running::announce`], each sighting vouched for: its address
    /// sent the announcement itself.
    fn announce_vouched(&self, sightings: Vec<Sighting>) {
        let vouched = sightings.iter().map(|s| s.host.clone()).collect();
        let change = Change::Snapshot {
            sightings,
            problems: Vec::new(),
            vouched,
        };
        self.lan.as_ref().unwrap().send(change).unwrap();
    }

    /// When `host` was dialled, in ms of watch time.
    fn dials_of(&self, host: &str) -> Vec<u64> {
        let m = self.machines.0.lock().unwrap();
        m.dials
            .iter()
            .filter(|(h, _)| h == host)
            .map(|(_, t)| (*t - self.t0).as_millis() as u64)
            .collect()
    }

    fn goodbye(&self, label: &str) {
        let change = Change::Removed(label.into());
        self.lan.as_ref().unwrap().send(change).unwrap();
    }

    /// `host`'s agent holds a liveness stream from now on.
    fn streaming(&self, host: &str) {
        let mut m = self.machines.0.lock().unwrap();
        m.streaming.insert(host.into());
    }

    /// `host`'s agent holds a liveness stream whose pulses carry the digest
    /// of its facts.
    fn telling(&self, host: &str) {
        let mut m = self.machines.0.lock().unwrap();
        m.streaming.insert(host.into());
        m.telling.insert(host.into());
    }

    /// `host`'s agent stops cleanly: a goodbye on its stream, its port
    /// closed.
    fn stop_agent(&self, host: &str) {
        let mut m = self.machines.0.lock().unwrap();
        m.byes.insert(host.into());
        m.dead.insert(host.into(), Death::Reset);
    }

    /// `host`'s handshakes go unanswered from now on (its agent still runs).
    fn unanswered(&self, host: &str) {
        let mut m = self.machines.0.lock().unwrap();
        m.unanswered.insert(host.into());
    }

    /// `host`'s agent restarted in place as incarnation `inc`.
    fn restart(&self, host: &str, caps: NodeCaps) {
        let mut m = self.machines.0.lock().unwrap();
        m.fresh.insert(host.into(), caps);
        *m.restarts.entry(host.into()).or_default() += 1;
    }

    /// `host` is alive again (resumed, or its link back).
    /// Another host takes `host`'s address and answers as its pinned id
    /// without its node key.
    fn claim(&self, host: &str) {
        let mut m = self.machines.0.lock().unwrap();
        m.dead.remove(host);
        m.claimed.insert(host.into());
    }

    fn revive(&self, host: &str) {
        self.machines.0.lock().unwrap().dead.remove(host);
    }

    fn kill(&self, host: &str, death: Death) {
        self.machines
            .0
            .lock()
            .unwrap()
            .dead
            .insert(host.into(), death);
    }

    /// The next event; paused time runs on to it.
    async fn next(&mut self) -> Event {
        tokio::time::timeout(Duration::from_secs(600), self.events.recv())
            .await
            .expect("an event within 10 minutes of watch time")
            .expect("the watch is running")
    }

    /// Every event of the next `d` of watch time.
    async fn during(&mut self, d: Duration) -> Vec<Event> {
        let until = Instant::now() + d;
        let mut got = Vec::new();
        while let Ok(Some(e)) = tokio::time::timeout_at(until, self.events.recv()).await {
            got.push(e);
        }
        got
    }

    async fn stop(mut self) -> Result<(), WatchError> {
        let _ = self.stopper.take().unwrap().send(());
        self.task.await.expect("the watch task")
    }
}

/// Milliseconds of a duration, for comparing with `at_ms`.
fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The soonest a member's first health check can come.
fn first_check() -> Duration {
    HEALTH_INTERVAL - HEALTH_JITTER
}

/// Whether `at_ms` (a member that joined at 0 and crashed at once) is
/// within the crash bound: its first check, the re-check
/// [`RECHECK_AFTER`] later, and under the 5 s promised.
fn within_crash_bound(at_ms: u64) -> bool {
    let lo = ms(first_check() + RECHECK_AFTER);
    let hi = ms(HEALTH_INTERVAL + RECHECK_AFTER);
    (lo..=hi).contains(&at_ms) && hi < 5000
}

fn what(e: &Event) -> (Kind, &str, u64, Option<&str>) {
    (e.event, e.instance.as_str(), e.at_ms, e.reason.as_deref())
}

#[tokio::test(start_paused = true)]
async fn an_announced_node_that_passes_the_check_is_reported_joined_with_its_node() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    let e = w.next().await;
    assert_eq!(what(&e), (Kind::Joined, "box1", 0, None));
    let node = e.node.expect("a joined event carries the node");
    assert_eq!(node.addr, "10.0.0.1:9100");
    assert_eq!((node.device.as_str(), node.cores), ("cuda", 8));
    assert_eq!(node.evidence, Evidence::Handshake, "caps from the check");
    // The same announcement again (every snapshot repeats it) is no event.
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![]);
    w.stop().await.unwrap();
}

/// What a `left` after a goodbye says when the port was closed.
const GOODBYE_REFUSED: &str = "goodbye, and its check failed: connection refused";

#[tokio::test(start_paused = true)]
async fn a_member_that_says_goodbye_and_whose_port_is_closed_is_reported_left_at_once() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(700)).await;
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    let e = w.next().await;
    assert_eq!(what(&e), (Kind::Left, "box1", 700, Some(GOODBYE_REFUSED)));
    assert_eq!(e.node.unwrap().addr, "10.0.0.1:9100", "left names the node");
    // A goodbye of a non-member (or a second one) is no event.
    w.goodbye("box1");
    assert_eq!(w.during(Duration::from_secs(5)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_health_check_fails_is_reported_left() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    tokio::time::advance(Duration::from_millis(100)).await;
    w.kill("box1", Death::Reset);
    let e = w.next().await;
    assert_eq!(
        (e.event, e.reason.as_deref()),
        (Kind::Left, Some("health check failed: connection refused"))
    );
    assert!(
        within_crash_bound(e.at_ms),
        "a crashed agent on a live host is found at its next health check and the \
         re-check: {} ms",
        e.at_ms
    );
    assert_eq!(w.dials_of("box1").len(), 3, "admission, check, re-check");
    assert_eq!(w.during(Duration::from_secs(10)).await, vec![], "left once");
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_host_vanished_is_reported_left_after_one_whole_handshake_round() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.kill("box1", Death::Vanished);
    let e = w.next().await;
    assert_eq!(e.event, Kind::Left);
    // The round, then a dial of its port (nothing answers), then the
    // partition hold (nobody else went dark), on the engine's tick.
    let round = ms(whole_round() + REACH_WINDOW + PARTITION_HOLD);
    let tick = ms(TICK);
    assert!(
        (ms(first_check()) + round..=ms(HEALTH_INTERVAL) + round + tick).contains(&e.at_ms),
        "the documented bound (docs/membership.md) for an agent without a liveness stream: one jittered interval, 5 \
         attempts 200 ms apart each up to 1.5 s (no re-check: the round retried it), a 0.9 s \
         dial and a 0.4 s hold: {} ms",
        e.at_ms
    );
    assert_eq!(
        e.reason.as_deref(),
        Some("vanished: its checks went unanswered, and nothing answers at 10.0.0.1:9100")
    );
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_reported_once_per_host_and_reason() {
    let mut w = Running::start(false);
    let bad = || Problem::stranger(Source::Mdns, "bad", "TXT record: no caps");
    w.announce(vec![], vec![bad()]);
    let e = w.next().await;
    assert_eq!(
        what(&e),
        (Kind::Refused, "bad", 0, Some("TXT record: no caps"))
    );
    assert_eq!(e.node, None);
    w.announce(vec![], vec![bad()]);
    assert_eq!(w.during(Duration::from_secs(5)).await, vec![]);
    w.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_watch_fails_when_the_announcements_stop_for_good() {
    let mut w = Running::start(false);
    w.lan.take();
    let r = (&mut w.task).await.expect("the watch task");
    assert_eq!(r, Err(WatchError::BrowseStopped));
    assert_eq!(
        WatchError::BrowseStopped.to_string(),
        "the mDNS daemon stopped; watch cannot go on"
    );
}

#[tokio::test(start_paused = true)]
async fn the_watch_ends_cleanly_on_shutdown() {
    let mut w = Running::start(true);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.stop().await.expect("a shutdown is no error");
}

#[test]
fn the_json_of_an_event_has_the_documented_fields_in_order() {
    let e = Event {
        v: SCHEMA_VERSION,
        event: Kind::Refused,
        at_ms: 12,
        instance: "bad".into(),
        node: None,
        incarnation: None,
        reason: Some("why".into()),
        reachable: None,
        unreachable: None,
        in_file: None,
    };
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"v":1,"event":"refused","at_ms":12,"instance":"bad","reason":"why"}"#
    );
    let r = Event {
        event: Kind::Restarted,
        incarnation: Some("9a1b2c3d4e5f6071".into()),
        ..e
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"v":1,"event":"restarted","at_ms":12,"instance":"bad","incarnation":"9a1b2c3d4e5f6071","reason":"why"}"#
    );
    assert_eq!(format!("[{:<8}]", Kind::Left), "[left    ]", "pads");
}

mod admitting;
mod churn;
mod facts;
mod goodbye;
mod identity;
mod live;
mod moves;
mod updates;
mod zone;
