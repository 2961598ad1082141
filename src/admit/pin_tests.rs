//! Unit tests of the pins in admission: a node key is pinned on first
//! sight, the pinned key is admitted again (also at another address: a
//! move), another key for a pinned id is refused loudly, and an agent
//! without a node key is admitted as before and marked so.

use super::*;
use crate::pins::Pins;
use crate::sighting::Concern;
use rlx_proto::caps::NodeCaps;
use rlx_proto::identity::NodeKey;
use rlx_proto::keys::Key;

const ID: &str = "00000000000000aa";

/// A loopback agent with node `id` that answers every handshake, signed
/// with `node` when it has one, proving `cluster` when given.
async fn agent(node: Option<NodeKey>, cluster: Option<Key>) -> SocketAddr {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    let caps = NodeCaps {
        id: ID.into(),
        hostname: "gpu-a".into(),
        cores: 8,
        ..Default::default()
    };
    tokio::spawn(async move {
        while let Ok((s, peer)) = l.accept().await {
            let (caps, node, cluster) = (caps.clone(), node.clone(), cluster.clone());
            tokio::spawn(async move {
                let on = rlx_proto::handshake::Binding {
                    local: s.local_addr().unwrap(),
                    peer,
                    advertised: vec![],
                };
                let (rd, mut wr) = s.into_split();
                let mut line = Vec::new();
                let _ = BufReader::new(rd).read_until(b'\n', &mut line).await;
                let out = rlx_proto::handshake::answer_signed(
                    &line,
                    &caps,
                    cluster.as_ref(),
                    node.as_ref(),
                    &on,
                );
                if let Ok(out) = out {
                    let _ = wr.write_all(out.as_bytes()).await;
                }
            });
        }
    });
    a
}

fn sighting_at(addr: SocketAddr) -> Sighting {
    Sighting {
        source: Source::Mdns,
        host: format!("gpu-a ({addr})"),
        addr: addr.to_string(),
        ip: Some(addr.ip()),
        port: addr.port(),
        agent_port: Some(addr.port()),
        worker_reachable: None,
        ssh: None,
        caps: Some(NodeCaps {
            id: ID.into(),
            ..Default::default()
        }),
        evidence: Evidence::Txt,
        heard_on: None,
        found_ms: 1,
        identity: Pinning::Unpinned,
    }
}

fn rules(pins: Pins, cluster: Option<Key>) -> Rules {
    Rules {
        keys: cluster.map(KeyRing::single),
        cluster: None,
        timeout: Duration::from_secs(2),
        concurrency: 4,
        pins: Arc::new(Mutex::new(pins)),
        pin_hold: None,
    }
}

async fn admit_one(addr: SocketAddr, rules: &Rules) -> Discovery {
    admit(
        Discovery {
            sightings: vec![sighting_at(addr)],
            ..Default::default()
        },
        rules,
    )
    .await
}

#[tokio::test]
async fn a_node_key_is_pinned_on_first_sight_and_the_same_key_is_admitted_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.pins");
    let r = rules(Pins::load(&file).unwrap(), None);
    let x = NodeKey::from_seed([1; 32]);
    let first = admit_one(agent(Some(x.clone()), None).await, &r).await;
    assert_eq!(first.sightings.len(), 1, "{:?}", first.problems);
    assert_eq!(first.sightings[0].identity, Pinning::New);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(&format!("{ID} ed25519 {} # gpu-a first seen", x.public())),
        "pinned in the file: {text}"
    );
    // The same machine at a new address (a new DHCP lease): the same key.
    let moved = admit_one(agent(Some(x), None).await, &r).await;
    assert_eq!(moved.sightings.len(), 1, "{:?}", moved.problems);
    assert_eq!(moved.sightings[0].identity, Pinning::Pinned);
}

#[tokio::test]
async fn a_pinned_id_with_another_key_is_refused_naming_both_fingerprints_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.pins");
    let x = NodeKey::from_seed([1; 32]);
    let y = NodeKey::from_seed([2; 32]);
    let cluster = Key::from_bytes([7; 32]);
    let r = rules(Pins::load(&file).unwrap(), Some(cluster.clone()));
    let first = admit_one(agent(Some(x.clone()), Some(cluster.clone())).await, &r).await;
    assert_eq!(first.sightings.len(), 1, "{:?}", first.problems);
    // y holds the cluster key and claims x's id, with its own node key.
    let claim = admit_one(agent(Some(y.clone()), Some(cluster)).await, &r).await;
    assert!(claim.sightings.is_empty(), "the claim is refused");
    let p = &claim.problems[0];
    for needle in [
        ID.to_string(),
        x.public().fingerprint(),
        y.public().fingerprint(),
        format!(
            "rlx-discover pins forget {ID} --pins-file {}",
            file.display()
        ),
    ] {
        assert!(p.reason.contains(&needle), "{needle} in {}", p.reason);
    }
    assert_eq!(
        p.concern,
        Concern::Yours,
        "a claim on a known id fails the run"
    );
    let clash = p.pin_clash.as_ref().expect("the JSON names the clash");
    assert_eq!(clash.pinned, x.public().fingerprint());
    assert_eq!(clash.shown, y.public().fingerprint());
    let pins = Pins::load(&file).unwrap();
    assert_eq!(
        pins.get(ID).unwrap().key,
        x.public(),
        "the pin is not moved"
    );
}

#[tokio::test]
async fn after_pins_forget_the_next_key_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.pins");
    let r = rules(Pins::load(&file).unwrap(), None);
    admit_one(agent(Some(NodeKey::from_seed([1; 32])), None).await, &r).await;
    // `pins forget` in another process, while this one keeps running.
    let mut other = Pins::load(&file).unwrap();
    other.forget(ID);
    other.save(&[ID.to_string()]).unwrap();
    let reinstalled = NodeKey::from_seed([3; 32]);
    let out = admit_one(agent(Some(reinstalled.clone()), None).await, &r).await;
    assert_eq!(out.sightings.len(), 1, "{:?}", out.problems);
    assert_eq!(out.sightings[0].identity, Pinning::New);
    assert_eq!(
        Pins::load(&file).unwrap().get(ID).unwrap().key,
        reinstalled.public()
    );
}

#[tokio::test]
async fn an_agent_without_a_node_key_is_admitted_as_before_and_marked_unpinned() {
    let r = rules(Pins::in_memory(), None);
    let out = admit_one(agent(None, None).await, &r).await;
    assert_eq!(out.sightings.len(), 1, "{:?}", out.problems);
    assert_eq!(out.sightings[0].identity, Pinning::Unpinned);
    assert_eq!(out.sightings[0].evidence, Evidence::Handshake);
    assert_eq!(r.pins.lock().unwrap().iter().count(), 0, "nothing to pin");
}

#[tokio::test]
async fn two_keys_claiming_one_new_id_in_one_run_pin_neither() {
    let r = rules(Pins::in_memory(), None);
    let a = agent(Some(NodeKey::from_seed([1; 32])), None).await;
    let b = agent(Some(NodeKey::from_seed([2; 32])), None).await;
    let out = admit(
        Discovery {
            sightings: vec![sighting_at(a), sighting_at(b)],
            ..Default::default()
        },
        &r,
    )
    .await;
    assert_eq!(out.sightings.len(), 2, "the pipeline's clash rule decides");
    assert!(out.sightings.iter().all(|s| s.identity == Pinning::New));
    assert!(
        r.pins.lock().unwrap().get(ID).is_none(),
        "first to answer is no proof"
    );
}

#[tokio::test]
async fn pins_kept_in_memory_refuse_a_second_key_for_the_runs_lifetime() {
    let r = rules(Pins::in_memory(), None);
    admit_one(agent(Some(NodeKey::from_seed([1; 32])), None).await, &r).await;
    let claim = admit_one(agent(Some(NodeKey::from_seed([2; 32])), None).await, &r).await;
    assert!(claim.sightings.is_empty());
    assert!(
        claim.problems[0].reason.contains("in memory"),
        "{}",
        claim.problems[0].reason
    );
}

/// The downgrade of issue 37: a reply that leaves `node_key` and
/// `node_sig` out, with a pinned node's id, holding the cluster key or in a
/// keyless cluster alike, is refused naming the pin, and the pin stays.
#[tokio::test]
async fn a_pinned_id_answered_without_a_node_key_is_refused_keyed_or_not() {
    for cluster in [None, Some(Key::from_bytes([7; 32]))] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster.pins");
        let r = rules(Pins::load(&file).unwrap(), cluster.clone());
        let x = NodeKey::from_seed([1; 32]);
        let first = admit_one(agent(Some(x.clone()), cluster.clone()).await, &r).await;
        assert_eq!(first.sightings.len(), 1, "{:?}", first.problems);
        let claim = admit_one(agent(None, cluster.clone()).await, &r).await;
        assert!(
            claim.sightings.is_empty(),
            "keyed {}: a keyless claim on a pinned id is refused",
            cluster.is_some()
        );
        let p = &claim.problems[0];
        for needle in [
            ID,
            "proves no node key",
            &x.public().fingerprint(),
            "pins forget",
        ] {
            assert!(p.reason.contains(needle), "{needle} in {}", p.reason);
        }
        assert_eq!(p.concern, Concern::Yours, "it fails the run");
        assert_eq!(p.pin_clash.as_ref().unwrap().shown, "none");
        assert_eq!(Pins::load(&file).unwrap().get(ID).unwrap().key, x.public());
        // The real machine is still admitted as itself.
        let again = admit_one(agent(Some(x.clone()), cluster).await, &r).await;
        assert_eq!(again.sightings.len(), 1, "{:?}", again.problems);
        assert_eq!(again.sightings[0].identity, Pinning::Pinned);
    }
}

/// Caps that came from no handshake (a keyless cluster keeps TXT caps when
/// the port does not speak it) cannot take a pinned id either.
#[tokio::test]
async fn a_pinned_id_announced_in_txt_by_something_that_does_not_handshake_is_refused() {
    let r = rules(Pins::in_memory(), None);
    let x = NodeKey::from_seed([1; 32]);
    admit_one(agent(Some(x), None).await, &r).await;
    // A listener that accepts and closes without a word.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            drop(s);
        }
    });
    let out = admit_one(a, &r).await;
    assert!(out.sightings.is_empty(), "{:?}", out.sightings);
    assert!(
        out.problems[0].reason.contains("answered no handshake"),
        "{}",
        out.problems[0].reason
    );
}

/// `watch` admits candidates one by one: the first of two keys claiming a
/// new id must not be pinned just because its handshake finished first,
/// or the real machine, a moment later, is refused as an impostor. With
/// the hold, both are admitted unpinned, neither is pinned while both
/// claim, and the one left alone is pinned once the hold has passed.
#[tokio::test]
async fn with_the_pin_hold_two_keys_claiming_a_new_id_one_after_the_other_pin_neither() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.pins");
    let mut r = rules(Pins::load(&file).unwrap(), None);
    r.pin_hold = Some(Default::default());
    let x = NodeKey::from_seed([1; 32]);
    let y = NodeKey::from_seed([2; 32]);
    let (ax, ay) = (
        agent(Some(x.clone()), None).await,
        agent(Some(y), None).await,
    );
    let first = admit_one(ay, &r).await;
    let second = admit_one(ax, &r).await;
    for d in [&first, &second] {
        assert_eq!(
            d.sightings.len(),
            1,
            "admitted, not refused: {:?}",
            d.problems
        );
        assert_eq!(d.sightings[0].identity, Pinning::New);
    }
    assert!(
        r.pins.lock().unwrap().get(ID).is_none(),
        "neither key is pinned while both claim the id"
    );
    // y stops claiming; x, checked again as a member is every few
    // seconds, is pinned once y has been gone for the hold.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = admit_one(ax, &r).await;
    assert_eq!(still.sightings.len(), 1, "{:?}", still.problems);
    assert!(
        r.pins.lock().unwrap().get(ID).is_none(),
        "y claimed 3 s ago"
    );
    tokio::time::sleep(hold::PIN_HOLD - Duration::from_secs(3) + Duration::from_millis(300)).await;
    let later = admit_one(ax, &r).await;
    assert_eq!(later.sightings.len(), 1, "{:?}", later.problems);
    assert_eq!(r.pins.lock().unwrap().get(ID).unwrap().key, x.public());
}
