//! The measurement's UDP probe (loss and path MTU) against the real
//! server on loopback.

use super::tests::{agent, key, small, STEP};
use rlx_proto::handshake::measure::Request;
use rlx_proto::handshake::measure_link;
use rlx_proto::handshake::measure_udp::UdpAsk;

fn with_probe(packets: u32) -> Request {
    Request {
        udp: Some(UdpAsk {
            packets,
            ms: 100,
            port: 0,
        }),
        ..small()
    }
}

/// Loopback drops nothing and carries 64 KiB datagrams, so every
/// datagram is counted (a loaded test box may still drop a few from a
/// full receive buffer, hence the margin) and the whole ladder passes.
#[tokio::test]
async fn a_measurement_with_the_probe_counts_the_datagrams_each_way_and_the_ladder_passes() {
    let addr = agent(Some(key(1))).await;
    let m = measure_link(addr, Some(&key(1)), &with_probe(500), STEP, "0.1.0")
        .await
        .unwrap();
    let udp = m.udp.clone().expect("the probe ran");
    assert!(udp.notes.is_empty(), "{udp:?}");
    for d in [udp.up.unwrap(), udp.down.unwrap()] {
        assert_eq!(d.sent, 500, "{d:?}");
        assert!(d.loss_pct < 10.0, "{d:?}");
        assert_eq!(d.mtu, Some(9000), "{d:?}");
        assert!(!d.mtu_limited, "{d:?}");
        assert_eq!(d.rejected, 0, "{d:?}");
    }
    assert!(m.summary().contains("% loss up"), "{}", m.summary());
}

/// An agent grants at most its limit, and the client holds it to that.
#[tokio::test]
async fn more_datagrams_than_the_agent_grants_are_not_sent() {
    let addr = agent(Some(key(1))).await;
    let m = measure_link(addr, Some(&key(1)), &with_probe(1_000_000), STEP, "0.1.0")
        .await
        .unwrap();
    let up = m.udp.unwrap().up.unwrap();
    assert_eq!(
        up.sent,
        rlx_proto::handshake::measure_udp::MAX_UDP_PACKETS,
        "{up:?}"
    );
}

/// Without the probe in the request, nothing of it is in the answer.
#[tokio::test]
async fn a_measurement_without_the_probe_has_no_udp_figures() {
    let addr = agent(Some(key(1))).await;
    let m = measure_link(addr, Some(&key(1)), &small(), STEP, "0.1.0")
        .await
        .unwrap();
    assert_eq!(m.udp, None);
}

/// The link map's quiet phase: round trips and the probe, and not one
/// byte of transfer either way (its rates are zero, its byte counts too).
#[tokio::test]
async fn a_measurement_asked_for_no_transfers_gives_round_trips_and_loss_and_moves_no_bytes() {
    let addr = agent(Some(key(1))).await;
    let quiet = Request {
        transfers: false,
        pings: 3,
        ..with_probe(200)
    };
    let m = measure_link(addr, Some(&key(1)), &quiet, STEP, "0.1.0")
        .await
        .unwrap();
    assert_eq!(m.rtt_samples_ms.len(), 3, "{m:?}");
    assert_eq!((m.up_bytes, m.down_bytes), (0, 0), "{m:?}");
    assert_eq!((m.up_mbps, m.down_mbps), (0.0, 0.0), "{m:?}");
    let udp = m.udp.expect("the probe ran");
    assert_eq!(udp.up.unwrap().sent, 200, "{udp:?}");
}
