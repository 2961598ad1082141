//! Both ends of the handshake. The input is one line as a stranger would
//! send it: to an agent as a hello (`handshake::answer`, which parses it
//! with `parse_hello`) and to a coordinator as a reply (`check_reply`, with
//! and without a key ring and an expected id).
//!
//! Properties beyond "no panic": an agent answers only hellos that parse,
//! its answer verifies at a coordinator that sent that nonce, and a reply
//! the coordinator admits under its key for one nonce is a replay for any
//! other.
//!
//! `cargo +nightly fuzz run handshake fuzz/corpus/handshake`
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_proto::caps::NodeCaps;
use rlx_proto::handshake::{self, check_reply, parse_hello, HandshakeError, Nonce};
use rlx_proto::keys::{Key, KeyRing};
use std::net::SocketAddr;
use std::sync::OnceLock;

fn caps() -> &'static NodeCaps {
    static CAPS: OnceLock<NodeCaps> = OnceLock::new();
    CAPS.get_or_init(|| {
        NodeCaps::from_json(
            r#"{"id":"0123456789abcdef","hostname":"gpu-a","os":"linux","cores":8,
                "ram_total":17179869184,"cluster":"lab",
                "devices":[{"device":"cuda","name":"RTX","mem_bytes":25769803776}]}"#,
        )
        .expect("sample caps")
    })
}

fuzz_target!(|data: &[u8]| {
    let addr: SocketAddr = "10.0.0.1:9100".parse().unwrap();
    let from: SocketAddr = "10.0.0.2:40312".parse().unwrap();
    let on = handshake::Binding {
        local: addr,
        peer: from,
        advertised: vec![],
    };
    let key = Key::from_bytes([0x42; 32]);
    let ring = KeyRing::single(key.clone());

    // Agent side.
    match (
        parse_hello(data),
        handshake::answer(data, caps(), Some(&key), &on),
    ) {
        (Ok(hello), Ok(reply)) => {
            let r = check_reply(
                addr,
                from,
                reply.as_bytes(),
                &hello.nonce,
                Some(&ring),
                Some("0123456789abcdef"),
            );
            if hello.v == 1 {
                // The version 1 proof binds no endpoint: refused with a key.
                assert!(
                    matches!(r, Err(HandshakeError::Unbound { .. })),
                    "{r:?}"
                );
            } else {
                assert!(r.is_ok(), "our own answer verifies: {r:?}");
            }
        }
        (Ok(hello), Err(e)) => {
            assert!(
                hello.cluster.as_deref().is_some_and(|c| c != "lab"),
                "refused {e}"
            );
        }
        (Err(_), Ok(_)) => panic!("answered a hello that does not parse"),
        (Err(e), Err(_)) => assert!(e.to_line().ends_with('\n')),
    }

    // Coordinator side.
    let sent = Nonce::from_bytes([0x11; 32]);
    if check_reply(addr, from, data, &sent, Some(&ring), Some("0123456789abcdef")).is_ok() {
        // Only a reply proved under our key for `sent` gets here (the seeds
        // hold one). The same bytes must never pass for another nonce: a
        // replay when the reply echoes a well-formed nonce, a wrong key when
        // its echo is garbage (the echo is not covered by the proof).
        let other = Nonce::from_bytes([0x12; 32]);
        let again = check_reply(addr, from, data, &other, Some(&ring), None);
        assert!(
            matches!(
                again,
                Err(HandshakeError::Replay { .. } | HandshakeError::WrongKey { .. })
            ),
            "a reply admitted for one nonce passed for another: {again:?}"
        );
    }
    let _ = check_reply(addr, from, data, &sent, None, None);
});
