//! A member's identity never changes under it (docs/security.md, "The
//! membership feed"): records that would move a member to another machine
//! or address are claims its own check settles, a machine heard under
//! several names is one member, and an address that answers as another
//! machine is no longer the member.

use super::*;

/// `host`'s sighting at `ip`, carrying the caps of the machine `machine`
/// (what a forged SRV/A/TXT set for `host` pointing at `machine` reads as).
fn posing(host: &str, ip: &str, machine: &str) -> Sighting {
    seen(Source::Mdns, host, ip, caps(machine, 8, 24 << 30))
}

/// The addresses `host` was dialled at since the `from`-th dial.
fn dialled_at(w: &Running, host: &str) -> Vec<String> {
    let m = w.machines.0.lock().unwrap();
    m.dialled_at
        .iter()
        .filter(|(h, _)| h == host)
        .map(|(_, a)| a.clone())
        .collect()
}

/// The failure this guards against: a stranger's SRV/TXT/A for member box1,
/// pointing at member box2's address and carrying box2's TXT, passed box2's
/// check and became `restarted` for box1 with box2's node, and box1's
/// health checks went to box2. Now box1 is checked where it is, still
/// answers, and the claim is refused, once, with both sides named.
#[tokio::test(start_paused = true)]
async fn records_pointing_a_member_at_another_members_machine_move_nothing() {
    let mut w = Running::start(false);
    let box2 = || seen(Source::Mdns, "box2", "10.0.0.2", caps("box2", 8, 8 << 30));
    w.announce(vec![box1(), box2()], vec![]);
    let joined = w.during(Duration::from_millis(100)).await;
    assert_eq!(joined.len(), 2, "{joined:?}");
    tokio::time::advance(Duration::from_millis(500)).await;
    let forged = posing("box1", "10.0.0.2", "box2");
    w.announce(vec![forged, box2()], vec![]);
    let later = w.during(Duration::from_secs(20)).await;
    let news: Vec<_> = later.iter().filter(|e| e.event != Kind::Refused).collect();
    assert!(news.is_empty(), "no restarted, updated or left: {news:?}");
    let refused: Vec<_> = later.iter().filter(|e| e.event == Kind::Refused).collect();
    assert_eq!(refused.len(), 1, "reported once: {later:?}");
    let why = refused[0].reason.as_deref().unwrap();
    assert!(
        why.contains("10.0.0.2:9100") && why.contains("still answers at 10.0.0.1:9100"),
        "{why}"
    );
    let at = dialled_at(&w, "box1");
    assert!(
        at.iter().rev().take(3).all(|a| a == "10.0.0.1:9100"),
        "box1 is still checked at its own address: {at:?}"
    );
    w.stop().await.unwrap();
}

/// The same forged records in every snapshot are a refusal like any other:
/// backed off, not dialled again each time a stranger repeats them.
#[tokio::test(start_paused = true)]
async fn repeated_forged_records_for_a_member_are_dialled_once_per_back_off() {
    let mut w = Running::start(false);
    let box2 = || seen(Source::Mdns, "box2", "10.0.0.2", caps("box2", 8, 8 << 30));
    w.announce(vec![box1(), box2()], vec![]);
    assert_eq!(w.during(Duration::from_millis(100)).await.len(), 2);
    for _ in 0..5 {
        w.announce(vec![posing("box1", "10.0.0.2", "box2"), box2()], vec![]);
        let _ = w.during(Duration::from_millis(700)).await;
    }
    let forged = dialled_at(&w, "box1")
        .iter()
        .filter(|a| *a == "10.0.0.2:9100")
        .count();
    assert_eq!(forged, 1, "dialled once, then backed off");
    w.stop().await.unwrap();
}

/// Phantom members: a stranger's new instance names at a real agent's
/// address joined as extra members (each later `left`). The machine is
/// one member, and a goodbye for a phantom name is a claim about it.
#[tokio::test(start_paused = true)]
async fn instances_at_a_members_address_are_that_member_not_new_ones() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    let phantoms: Vec<Sighting> = (0..5)
        .map(|i| posing(&format!("phantom{i}"), "10.0.0.1", "box1"))
        .collect();
    w.announce(phantoms, vec![]);
    assert_eq!(w.during(Duration::from_secs(1)).await, vec![], "no joins");
    w.goodbye("phantom3");
    assert_eq!(
        w.during(Duration::from_secs(10)).await,
        vec![],
        "the member answers its check: no left"
    );
    w.stop().await.unwrap();
}

/// A phantom heard before the real announcement names the machine; the
/// real instance is then that member, and its real goodbye (its port
/// closed) is still a `left` at once, not at the next health check.
#[tokio::test(start_paused = true)]
async fn the_real_goodbye_of_a_machine_a_phantom_named_first_is_a_left_at_once() {
    let mut w = Running::start(false);
    w.announce(vec![posing("phantom", "10.0.0.1", "box1")], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.during(Duration::from_secs(1)).await, vec![], "one member");
    w.machines
        .0
        .lock()
        .unwrap()
        .dead_at
        .insert("10.0.0.1:9100".into(), Death::Reset);
    let t = Instant::now();
    w.goodbye("box1");
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Left, "phantom"));
    assert!(Instant::now() - t < Duration::from_millis(100), "at once");
    w.stop().await.unwrap();
}

/// A member's address that now answers as another machine (a reinstall
/// with a new node id, or another box on its old lease) is the member
/// gone, at its next health check: never a `restarted` of the member
/// into a machine it is not.
#[tokio::test(start_paused = true)]
async fn a_members_address_answering_as_another_machine_is_a_leave() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    w.machines
        .0
        .lock()
        .unwrap()
        .fresh
        .insert("box1".into(), caps("stranger", 8, 24 << 30));
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Left, "box1"));
    let why = e.reason.unwrap();
    assert!(why.contains("answers as another machine"), "{why}");
    w.stop().await.unwrap();
}

/// A machine announcing a member's name from elsewhere, with another node
/// id, is refused while the member answers where it is; once the member
/// is gone, it joins under the name (with its own node).
#[tokio::test(start_paused = true)]
async fn a_machine_taking_a_members_name_joins_only_once_the_member_is_gone() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(w.next().await.event, Kind::Joined);
    let taker = || posing("box1", "10.0.0.5", "newbox");
    w.announce(vec![taker()], vec![]);
    let e = w.next().await;
    assert_eq!((e.event, e.instance.as_str()), (Kind::Refused, "box1"));
    assert_eq!(w.during(Duration::from_secs(2)).await, vec![]);
    w.machines
        .0
        .lock()
        .unwrap()
        .dead_at
        .insert("10.0.0.1:9100".into(), Death::Reset);
    // Its announcement again (a second copy of the same: another snapshot).
    let mut again = taker();
    again.caps.as_mut().unwrap().cores = 9;
    w.announce(vec![again], vec![]);
    let got = w.during(Duration::from_secs(2)).await;
    let kinds: Vec<_> = got.iter().map(|e| (e.event, e.instance.as_str())).collect();
    assert_eq!(kinds, vec![(Kind::Left, "box1"), (Kind::Joined, "box1")]);
    assert_eq!(got[1].node.as_ref().unwrap().addr, "10.0.0.5:9100");
    w.stop().await.unwrap();
}

/// A member that left and whose address a claimant then answers at, as
/// its pinned id without its node key: the revisit of the departed
/// instance reports the refusal (once), never reschedules it in silence,
/// and the claimant never joins.
#[tokio::test(start_paused = true)]
async fn a_claim_on_a_departed_members_pinned_id_at_its_address_is_reported_at_the_revisit() {
    let mut w = Running::start(false);
    w.announce(vec![box1()], vec![]);
    assert_eq!(what(&w.next().await), (Kind::Joined, "box1", 0, None));
    w.kill("box1", Death::Reset);
    w.goodbye("box1");
    assert_eq!(w.next().await.event, Kind::Left);
    w.claim("box1");
    let got = w.during(Duration::from_secs(30)).await;
    let refused: Vec<&Event> = got.iter().filter(|e| e.event == Kind::Refused).collect();
    assert_eq!(refused.len(), 1, "reported once: {got:?}");
    assert!(refused[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("proves no node key"));
    assert!(
        got.iter().all(|e| e.event != Kind::Joined),
        "the claimant never joins: {got:?}"
    );
    w.stop().await.unwrap();
}
