//! Unit tests of the endpoint binding (handshake version 2): the proof
//! covers the connection it was made on, so a relay's copy is refused, a
//! declared port-forward is admitted, and an older agent is told to upgrade.

use super::tests::{addr, caps, from, key, on};
use super::*;
use crate::keys::KeyRing;
use std::net::SocketAddr;

/// The version 2 vector, computed independently with Python's hmac module
/// (the `proof` function of docs/protocol.md), once with a declared
/// endpoint and once without.
#[test]
fn the_bound_proof_matches_the_documented_test_vectors() {
    let nonce = Nonce::from_bytes([0x11; 32]);
    let adv = ["198.51.100.7:9100".to_string()];
    let mut b = BoundTo {
        local: "10.0.0.2:9100",
        peer: "10.0.0.1:40312",
        advertised: &adv,
    };
    let caps = br#"{"cores":1}"#;
    assert_eq!(
        prove(&key(0x42), &nonce, "0123456789abcdef", caps, Some(&b)),
        "25c2c78bd3e8401f8b2044ecc85558b21da6662d813e6b72b60788ed1e120b9b"
    );
    b.advertised = &[];
    assert_eq!(
        prove(&key(0x42), &nonce, "0123456789abcdef", caps, Some(&b)),
        "7035f130cad1cfbd98fa8ed35c3f2dd80ac608e94aecdfa68d9b7716ae6e8282"
    );
}

/// Every endpoint field is under the MAC, with boundaries that cannot move:
/// a proof made for one connection verifies for no other, and a version 2
/// proof is not a version 1 proof.
#[test]
fn a_bound_proof_verifies_only_for_the_endpoints_it_was_made_for() {
    let n = Nonce::from_bytes([1; 32]);
    let adv = ["198.51.100.7:9100".to_string()];
    let b = BoundTo {
        local: "10.0.0.2:9100",
        peer: "10.0.0.1:40312",
        advertised: &adv,
    };
    let id = "0123456789abcdef";
    let p = prove(&key(1), &n, id, b"{}", Some(&b));
    assert!(verify(&key(1), &n, id, b"{}", Some(&b), &p));
    let two = [
        "198.51.100.7:9100".to_string(),
        "198.51.100.8:9100".to_string(),
    ];
    let split = ["198.51.100.7:91".to_string(), "00".to_string()];
    let others = [
        BoundTo {
            local: "10.0.0.9:9100",
            ..b
        },
        BoundTo {
            local: "10.0.0.2:9101",
            ..b
        },
        BoundTo {
            peer: "10.0.0.66:40312",
            ..b
        },
        BoundTo {
            advertised: &[],
            ..b
        },
        BoundTo {
            advertised: &two,
            ..b
        },
        BoundTo {
            advertised: &split,
            ..b
        },
        // A boundary moved between local and peer.
        BoundTo {
            local: "10.0.0.2:910",
            peer: "010.0.0.1:40312",
            ..b
        },
    ];
    for o in &others {
        assert!(!verify(&key(1), &n, id, b"{}", Some(o), &p), "{o:?}");
    }
    assert!(
        !verify(&key(1), &n, id, b"{}", None, &p),
        "a bound proof is not a version 1 proof"
    );
}

/// The connection a relay makes to the agent: the agent accepted it from
/// the relay, not from us.
fn relayed_on() -> Binding {
    Binding {
        local: addr(),
        peer: "10.0.0.66:51000".parse().unwrap(),
        advertised: vec![],
    }
}

/// The relay attack (docs/security.md, "Relays, NATs and port-forwards"):
/// a stranger at 10.0.0.66 passes our hello on to the real agent and its
/// live reply back. The proof is valid for our nonce, but binds the relay's
/// connection, so it is refused, and the reason names both ends and says a
/// relay or NAT is in between.
#[test]
fn a_reply_proved_for_another_connection_is_refused_as_relayed() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let hello = hello_line(&n);
    // We dialled the relay: the agent accepted on its own address.
    let relay: SocketAddr = "10.0.0.66:9100".parse().unwrap();
    let reply = answer(hello.as_bytes(), &caps(), Some(&key(1)), &relayed_on()).unwrap();
    let err = check_reply(relay, from(), reply.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Relayed { .. }), "{err}");
    let why = err.to_string();
    for needle in [
        "relay or NAT is in between",
        "10.0.0.66:9100",
        "10.0.0.2:9100",
        "--advertise",
    ] {
        assert!(why.contains(needle), "{needle:?} in {why}");
    }
    // A proxy at the agent's own address (ARP spoofing, a transparent
    // proxy): the accepted endpoint matches, the peer does not.
    let err = check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Relayed { .. }), "{err}");
    assert!(
        err.to_string().contains("10.0.0.66:51000") && err.to_string().contains("40312"),
        "{err}"
    );
    // The same agent, dialled directly: admitted.
    let direct = answer(hello.as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    let r = check_reply(addr(), from(), direct.as_bytes(), &n, Some(&ring), None).unwrap();
    assert!(!r.via_advertised);
    // Without a key nothing is proved, and nothing is checked.
    assert!(check_reply(relay, from(), reply.as_bytes(), &n, None, None).is_ok());
}

/// A port-forward its operator declares (`--advertise`) is admitted at the
/// declared endpoint whatever peer the agent saw (the forwarder's, or ours
/// through a DNAT), and an endpoint nobody declared is still a relay.
#[test]
fn a_declared_endpoint_is_admitted_and_an_undeclared_one_is_not() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let forward: SocketAddr = "198.51.100.7:19100".parse().unwrap();
    let mut on = relayed_on();
    on.advertised = vec![forward];
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on).unwrap();
    let r = check_reply(forward, from(), reply.as_bytes(), &n, Some(&ring), None).unwrap();
    assert!(r.via_advertised);
    let other: SocketAddr = "198.51.100.7:9100".parse().unwrap();
    let err = check_reply(other, from(), reply.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Relayed { .. }), "{err}");
    assert!(
        err.to_string().contains("declares 198.51.100.7:19100"),
        "{err}"
    );
}

/// An agent listening on `[::]` sees an IPv4 coordinator as an
/// IPv4-mapped address; it writes the plain IPv4 form, and the comparison
/// ignores IPv6 scopes (interface numbers differ between machines).
#[test]
fn mapped_and_scoped_addresses_compare_as_the_same_endpoint() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let on = Binding {
        local: "[::ffff:10.0.0.2]:9100".parse().unwrap(),
        peer: "[::ffff:10.0.0.1]:40312".parse().unwrap(),
        advertised: vec![],
    };
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on).unwrap();
    assert!(
        reply.contains(r#""local":"10.0.0.2:9100","peer":"10.0.0.1:40312""#),
        "{reply}"
    );
    assert!(check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).is_ok());

    let v6 = |s: &str| s.parse::<SocketAddr>().unwrap();
    let on = Binding {
        local: v6("[fe80::2%7]:9100"),
        peer: v6("[fe80::1%7]:40000"),
        advertised: vec![],
    };
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on).unwrap();
    let r = check_reply(
        v6("[fe80::2%3]:9100"),
        v6("[fe80::1%3]:40000"),
        reply.as_bytes(),
        &n,
        Some(&ring),
        None,
    );
    assert!(r.is_ok(), "{r:?}");
}

/// A reply line up to its clock reading (`"time_ms"`, the last field):
/// two replies written a millisecond apart differ there and nowhere else,
/// and the reading is outside the proof.
fn without_clock(reply: &str) -> &str {
    let end = reply
        .rfind(r#","time_ms":"#)
        .expect("a reply carries time_ms");
    &reply[..end]
}

/// An older agent (handshake version 1) proves nothing about the
/// connection: with a key its reply is refused with a reason that says to
/// upgrade it, a replayed version 1 reply is still called a replay, and
/// without a key it is admitted as before.
#[test]
fn a_version_1_reply_is_refused_with_a_key_and_admitted_without() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let v1_hello = format!(
        "{{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"{}\"}}\n",
        n.to_hex()
    );
    let reply = answer(v1_hello.as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    assert!(reply.starts_with(r#"{"rlx":"caps","v":1,"#), "{reply}");
    assert!(
        !reply.contains("\"local\""),
        "a version 1 reply binds nothing: {reply}"
    );
    assert_eq!(
        without_clock(&reply),
        without_clock(&reply_line_v1(&n, &caps(), Some(&key(1)))),
        "answer gives the version 1 reply line"
    );
    let err = check_reply(addr(), from(), reply.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Unbound { .. }), "{err}");
    assert!(err.to_string().contains("upgrade rlx-agent"), "{err}");

    let old = Nonce::random().unwrap();
    let captured = reply_line_v1(&old, &caps(), Some(&key(1)));
    let err = check_reply(addr(), from(), captured.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(matches!(err, HandshakeError::Replay { .. }), "{err}");

    let plain = reply_line_v1(&n, &caps(), None);
    assert!(check_reply(addr(), from(), plain.as_bytes(), &n, None, None).is_ok());
}

/// A keyed version 2 reply that lost an endpoint field, or names one that
/// is not an address, is refused as incompatible.
#[test]
fn a_version_2_reply_without_its_endpoints_is_incompatible() {
    let n = Nonce::random().unwrap();
    let ring = KeyRing::single(key(1));
    let reply = answer(hello_line(&n).as_bytes(), &caps(), Some(&key(1)), &on()).unwrap();
    let stripped = reply.replace(r#""local":"10.0.0.2:9100","#, "");
    let err = check_reply(addr(), from(), stripped.as_bytes(), &n, Some(&ring), None).unwrap_err();
    assert!(
        matches!(err, HandshakeError::Incompatible { .. }) && err.to_string().contains("local"),
        "{err}"
    );
}
