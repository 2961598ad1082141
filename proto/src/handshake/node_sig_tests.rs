//! Unit tests of the node-key signature: an agent with its own key pair
//! signs the same fields as the cluster-key proof, with or without a
//! cluster key, and a coordinator learns the key only from a reply whose
//! signature verifies for its nonce and the connection as sent.

use super::tests::{addr, caps, from, key, on};
use super::*;
use crate::caps::NodeCaps;
use crate::identity::NodeKey;
use crate::keys::KeyRing;

fn node(b: u8) -> NodeKey {
    NodeKey::from_seed([b; 32])
}

/// Replaces the first `from` in `line` with `to` (a field rewritten on
/// the way).
fn rewrite(line: &str, from: &str, to: &str) -> String {
    assert!(line.contains(from), "{from} in {line}");
    line.replacen(from, to, 1)
}

#[test]
fn a_signed_reply_proves_the_node_key_with_and_without_a_cluster_key() {
    let n = Nonce::from_bytes([3; 32]);
    let ring = KeyRing::single(key(1));
    for cluster in [None, Some(&ring)] {
        let line = reply_line_signed(
            &n,
            &caps(),
            cluster.map(KeyRing::first),
            Some(&node(5)),
            &on(),
        );
        let r = check_reply(addr(), from(), line.as_bytes(), &n, cluster, None).unwrap();
        assert_eq!(
            r.node_key,
            Some(node(5).public()),
            "keyed: {}",
            cluster.is_some()
        );
        assert_eq!(
            r.caps.node_key.as_deref(),
            Some(node(5).public().to_base64().as_str()),
            "the public key travels in the caps"
        );
    }
}

#[test]
fn a_reply_without_a_node_key_is_an_older_agent_and_proves_none() {
    let n = Nonce::from_bytes([3; 32]);
    let line = reply_line(&n, &caps(), None, &on());
    let r = check_reply(addr(), from(), line.as_bytes(), &n, None, None).unwrap();
    assert_eq!(r.node_key, None);
    assert!(
        !line.contains("node_sig") && !line.contains("node_key"),
        "{line}"
    );
}

#[test]
fn a_tampered_node_signature_is_refused_naming_the_key() {
    let n = Nonce::from_bytes([3; 32]);
    let line = reply_line_signed(&n, &caps(), None, Some(&node(5)), &on());
    let sig = line.split("\"node_sig\":\"").nth(1).unwrap();
    let first = &sig[..1];
    let flipped = rewrite(
        &line,
        &format!("\"node_sig\":\"{first}"),
        &format!("\"node_sig\":\"{}", if first == "A" { "B" } else { "A" }),
    );
    let e = check_reply(addr(), from(), flipped.as_bytes(), &n, None, None).unwrap_err();
    assert!(matches!(e, HandshakeError::NodeSignature { .. }), "{e}");
    assert!(
        e.to_string().contains(&node(5).public().fingerprint()),
        "{e}"
    );
}

#[test]
fn caps_that_name_a_node_key_without_its_signature_are_refused() {
    let n = Nonce::from_bytes([3; 32]);
    let with_key = NodeCaps {
        node_key: Some(node(5).public().to_base64()),
        ..caps()
    };
    // A stranger copies a member's caps (its public key included) but
    // cannot sign.
    let line = reply_line(&n, &with_key, None, &on());
    let e = check_reply(addr(), from(), line.as_bytes(), &n, None, None).unwrap_err();
    assert!(e.to_string().contains("no node_sig"), "{e}");
}

#[test]
fn a_node_signature_made_for_another_connection_is_refused() {
    let n = Nonce::from_bytes([3; 32]);
    let line = reply_line_signed(&n, &caps(), None, Some(&node(5)), &on());
    // The binding rewritten on the way: the signature covers the strings.
    let moved = rewrite(
        &line,
        "\"local\":\"10.0.0.2:9100\"",
        "\"local\":\"10.0.0.9:9100\"",
    );
    let e = check_reply(addr(), from(), moved.as_bytes(), &n, None, None).unwrap_err();
    assert!(matches!(e, HandshakeError::NodeSignature { .. }), "{e}");
    // And the message itself: no other binding, tag or nonce verifies.
    let b = BoundTo {
        local: "10.0.0.2:9100",
        peer: "10.0.0.1:40312",
        advertised: &[],
    };
    let id = "0123456789abcdef";
    let sig = node_sign(&node(5), &n, id, b"{}", Some(&b));
    let pk = node(5).public();
    assert!(node_verify(&pk, &n, id, b"{}", Some(&b), &sig));
    let other = BoundTo {
        peer: "10.0.0.66:40312",
        ..b
    };
    assert!(
        !node_verify(&pk, &n, id, b"{}", Some(&other), &sig),
        "another peer"
    );
    assert!(
        !node_verify(&pk, &n, id, b"{}", None, &sig),
        "the version 1 message"
    );
    assert!(
        !node_verify(&pk, &Nonce::from_bytes([4; 32]), id, b"{}", Some(&b), &sig),
        "another nonce"
    );
    assert!(
        !node_verify(&pk, &n, "0123456789abcdee", b"{}", Some(&b), &sig),
        "another id"
    );
}

#[test]
fn a_replayed_signed_reply_is_a_replay_even_without_a_cluster_key() {
    let old = Nonce::from_bytes([3; 32]);
    let ours = Nonce::from_bytes([4; 32]);
    let line = reply_line_signed(&old, &caps(), None, Some(&node(5)), &on());
    let e = check_reply(addr(), from(), line.as_bytes(), &ours, None, None).unwrap_err();
    assert!(matches!(e, HandshakeError::Replay { .. }), "{e}");
}

#[test]
fn a_node_signature_is_never_a_cluster_key_proof() {
    let n = Nonce::from_bytes([3; 32]);
    let b = BoundTo {
        local: "10.0.0.2:9100",
        peer: "10.0.0.1:40312",
        advertised: &[],
    };
    let msg = node_message(&n, "0123456789abcdef", b"{}", Some(&b));
    assert!(msg.starts_with(NODE_SIG_TAG), "its own domain tag");
    assert_ne!(NODE_SIG_TAG, PROOF_TAG);
    assert!(node_message(&n, "0123456789abcdef", b"{}", None).starts_with(NODE_SIG_TAG_V1));
}

#[test]
fn a_version_1_hello_gets_a_signature_that_binds_no_connection() {
    let n = Nonce::from_bytes([3; 32]);
    let hello = format!(
        "{{\"rlx\":\"hello\",\"v\":1,\"nonce\":\"{}\"}}\n",
        n.to_hex()
    );
    let line = answer_signed(hello.as_bytes(), &caps(), None, Some(&node(5)), &on()).unwrap();
    let r = check_reply(addr(), from(), line.as_bytes(), &n, None, None).unwrap();
    assert_eq!(r.node_key, Some(node(5).public()));
}

/// The vector of docs/protocol.md ("The node signature"), also computed
/// independently with Python's `cryptography` (the script there): Ed25519
/// is deterministic, so the message layout cannot drift unnoticed.
#[test]
fn the_node_signature_matches_the_documented_test_vector() {
    let n = Nonce::from_bytes([0x11; 32]);
    let b = BoundTo {
        local: "10.0.0.2:9100",
        peer: "10.0.0.1:40312",
        advertised: &[],
    };
    let node = NodeKey::from_seed([0x42; 32]);
    let sig = node_sign(&node, &n, "0123456789abcdef", br#"{"cores":1}"#, Some(&b));
    assert_eq!(
        node.public().to_base64(),
        "IVL40Zt5HSRFMkLhXy6rbLfP+ntqXtMAl5YOBpiB2xI="
    );
    assert_eq!(
        sig,
        "bV6BBGKuaw+dLu6D0aF3LYNG784kYDyS3S3F1BBWBwmTjHGOs2cpunZvrG9hcXFqzHZc3F25pHlywSruYxmODQ=="
    );
}
