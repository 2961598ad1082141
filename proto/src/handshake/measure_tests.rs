//! The measurement messages, the coordinator's proof and the meter.

use super::measure::*;
use super::measure_sense::{check_rtts, check_transfer, MIN_WINDOW_US};
use super::{LinkMeasurement, Nonce};
use crate::keys::Key;
use std::time::{Duration, Instant};

#[test]
fn a_request_line_round_trips_and_is_told_apart_from_a_hello() {
    let r = Request::default();
    let line = r.line();
    assert!(line.starts_with("{\"rlx\":\"measure\",\"v\":1,"), "{line}");
    assert!(line.ends_with('\n'));
    assert!(is_request(line.as_bytes()));
    assert_eq!(parse_request(line.as_bytes()), Ok(r));
    let hello = super::hello_line(&Nonce::from_bytes([1; 32]));
    assert!(!is_request(hello.as_bytes()));
    assert!(!is_request(b"SSH-2.0-OpenSSH_9.2\r\n"));
}

/// Guards the agent's hard limits: whatever a request asks for, what is
/// granted stays within them, and a zero asks for the least, not nothing.
#[test]
fn an_oversized_request_is_granted_only_the_agents_limits() {
    let huge = Request {
        pings: u32::MAX,
        up_bytes: u64::MAX,
        up_ms: u64::MAX,
        down_bytes: u64::MAX,
        down_ms: u64::MAX,
        end_mark: true,
        udp: None,
        transfers: true,
        early_stop: true,
    };
    let g = huge.granted();
    assert_eq!(
        g,
        Request {
            pings: MAX_PINGS,
            up_bytes: MAX_BYTES,
            up_ms: MAX_MS,
            down_bytes: MAX_BYTES,
            down_ms: MAX_MS,
            end_mark: true,
            udp: None,
            transfers: true,
            early_stop: true,
        }
    );
    let zero = Request {
        pings: 0,
        up_bytes: 0,
        up_ms: 0,
        down_bytes: 0,
        down_ms: 0,
        end_mark: false,
        udp: None,
        transfers: false,
        early_stop: false,
    };
    let g = zero.granted();
    assert_eq!((g.pings, g.up_bytes, g.down_ms), (1, 1, 1));
    assert_eq!(g.granted(), g, "granting is idempotent");
}

#[test]
fn malformed_requests_are_refused_with_what_a_request_is() {
    for (line, says) in [
        (&b"{\"rlx\":\"measure\",\"v\":1}\n"[..], "missing field"),
        (
            b"{\"rlx\":\"measure\",\"v\":9,\"pings\":1,\"up_bytes\":1,\"up_ms\":1,\"down_bytes\":1,\"down_ms\":1}",
            "measure version 9",
        ),
        (
            b"{\"rlx\":\"measure\",\"v\":1,\"pings\":-1,\"up_bytes\":1,\"up_ms\":1,\"down_bytes\":1,\"down_ms\":1}",
            "a measure request is",
        ),
        (
            b"{\"rlx\":\"measure\",\"v\":1,\"pings\":1,\"up_bytes\":1e99,\"up_ms\":1,\"down_bytes\":1,\"down_ms\":1}",
            "a measure request is",
        ),
        (b"\xff\xfe", "a measure request is"),
    ] {
        let err = parse_request(line).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn the_proof_binds_the_key_the_nonce_the_connection_and_the_request() {
    let key = Key::from_bytes([7; 32]);
    let nonce = Nonce::from_bytes([3; 32]);
    let req = Request::default().line();
    let p = prove_request(
        &key,
        &nonce,
        "10.0.0.2:9100",
        "10.0.0.1:4000",
        req.as_bytes(),
    );
    let ok =
        |k: &Key, n: &Nonce, l: &str, peer: &str, r: &[u8]| verify_request(k, n, l, peer, r, &p);
    assert!(ok(
        &key,
        &nonce,
        "10.0.0.2:9100",
        "10.0.0.1:4000",
        req.as_bytes()
    ));
    assert!(
        ok(
            &key,
            &nonce,
            "10.0.0.2:9100",
            "10.0.0.1:4000",
            req.trim_end().as_bytes()
        ),
        "the newline is not under the MAC"
    );
    assert!(!ok(
        &Key::from_bytes([8; 32]),
        &nonce,
        "10.0.0.2:9100",
        "10.0.0.1:4000",
        req.as_bytes()
    ));
    assert!(!ok(
        &key,
        &Nonce::from_bytes([4; 32]),
        "10.0.0.2:9100",
        "10.0.0.1:4000",
        req.as_bytes()
    ));
    assert!(!ok(
        &key,
        &nonce,
        "10.0.0.2:9100",
        "10.0.0.9:4000",
        req.as_bytes()
    ));
    let bigger = Request {
        up_ms: 1000,
        ..Request::default()
    }
    .line();
    assert!(!ok(
        &key,
        &nonce,
        "10.0.0.2:9100",
        "10.0.0.1:4000",
        bigger.as_bytes()
    ));
    assert!(!verify_request(&key, &nonce, "a", "b", b"c", "zz"));
}

#[test]
fn the_meter_leaves_out_the_first_quarter() {
    let t0 = Instant::now();
    let mut m = Meter::new();
    // A 1 MB burst at the start, then 100 kB every 10 ms for 400 ms.
    m.add_at(t0, 1_000_000);
    for i in 1..=40 {
        m.add_at(t0 + Duration::from_millis(10 * i), 100_000);
    }
    let r = m.result();
    assert_eq!(r.bytes, 5_000_000);
    assert_eq!(r.window_us, 300_000, "from 100 ms to 400 ms");
    assert_eq!(r.window_bytes, 3_000_000);
    assert!((r.mbps() - 80.0).abs() < 1e-9, "{}", r.mbps());
    assert_eq!(Meter::new().result().mbps(), 0.0);
}

/// On a lossy link the first segments can be lost and resent only after
/// TCP's retransmission timeout: everything then arrives in one burst, a
/// window too short for a rate. The meter times such a transfer from the
/// receiver's opening instead, and the figures pass the sense check.
#[test]
fn a_transfer_stalled_then_burst_is_timed_from_the_receivers_opening() {
    let t0 = Instant::now();
    let mut m = Meter::new();
    m.open_at(t0);
    for i in 0..20u64 {
        m.add_at(t0 + Duration::from_micros(250_000 + 10 * i), 100_000);
    }
    let r = m.result();
    assert_eq!((r.bytes, r.window_bytes), (2_000_000, 2_000_000));
    assert_eq!(r.window_us, 250_190);
    assert_eq!(m.lasted_us(), 250_190);
    let rate = check_transfer("download", &r, r.bytes, m.lasted_us()).unwrap();
    assert!((rate - 63.95).abs() < 0.01, "{rate}");
    // Without an opening the same reads are refused, as before.
    let mut unopened = Meter::new();
    for i in 0..20u64 {
        unopened.add_at(t0 + Duration::from_micros(10 * i), 100_000);
    }
    let r = unopened.result();
    assert!(check_transfer("download", &r, r.bytes, unopened.lasted_us()).is_err());
}

#[test]
fn a_measurement_reads_like_the_found_by_comment() {
    let m = LinkMeasurement {
        rtt_ms: 0.2149,
        rtt_samples_ms: vec![0.2149],
        up_mbps: 9300.0,
        down_mbps: 9100.0,
        up_bytes: 1,
        down_bytes: 1,
        took_ms: 500,
        udp: None,
    };
    assert_eq!(m.summary(), "0.21 ms, 9.3 Gbit/s up, 9.1 down");
    let slow = LinkMeasurement {
        rtt_ms: 12.4,
        up_mbps: 94.2,
        down_mbps: 1200.0,
        ..m
    };
    assert_eq!(slow.summary(), "12 ms, 94 Mbit/s up, 1.2 Gbit/s down");
}

/// Guards the early end: a steady rate ends a transfer after
/// [`STEADY_MIN`], a rate still climbing (slow start) or too short a
/// transfer does not.
#[test]
fn a_transfer_is_steady_only_after_its_minimum_and_at_an_even_rate() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut even = Meter::new();
    for ms in 0..=30 {
        even.add_at(at(ms), 100_000);
    }
    assert!(!even.steady(), "30 ms is under the minimum");
    for ms in 31..=60 {
        even.add_at(at(ms), 100_000);
    }
    assert!(even.steady());
    let mut climbing = Meter::new();
    for ms in 0..=60 {
        climbing.add_at(at(ms), 10_000 * (ms as usize + 1));
    }
    assert!(!climbing.steady(), "a rate still rising is not steady");
    assert!(!Meter::new().steady());
}

/// Guards backward compatibility of the end mark: a request or go-ahead
/// without `end_mark` (from a coordinator or agent that predates it)
/// parses, as unmarked; this version asks for it.
#[test]
fn the_end_mark_is_asked_for_and_its_absence_means_an_older_peer() {
    let line = Request::default().line();
    assert!(line.contains("\"end_mark\":true"), "{line}");
    let old = b"{\"rlx\":\"measure\",\"v\":1,\"pings\":7,\"up_bytes\":1,\"up_ms\":1,\"down_bytes\":1,\"down_ms\":1}";
    assert!(!parse_request(old).unwrap().end_mark);
    let ready: Ready = serde_json::from_slice(
        b"{\"rlx\":\"ready\",\"pings\":7,\"up_bytes\":1,\"up_ms\":1,\"down_bytes\":1,\"down_ms\":1}",
    )
    .unwrap();
    assert!(!ready.granted.end_mark);
    let unmarked = Request {
        end_mark: false,
        udp: None,
        ..Request::default()
    };
    assert!(
        !unmarked.line().contains("end_mark"),
        "the old line exactly"
    );
}

/// Runs `receive` on what `write` sends through an in-memory pipe.
fn received<F, Fut>(mark: bool, write: F) -> Result<Received, String>
where
    F: FnOnce(tokio::io::DuplexStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (mut r, w) = tokio::io::duplex(1 << 16);
        tokio::spawn(write(w));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        receive(&mut r, 1 << 20, deadline, false, mark).await
    })
}

/// Guards the receiver's verdict on how a transfer ended: closed after the
/// mark is complete, even when the mark arrives in pieces; closed without
/// it is cut short; zeros that merely end the stream are no mark.
#[test]
fn a_transfer_is_complete_only_when_it_ends_with_the_mark() {
    use tokio::io::AsyncWriteExt;
    let marked = received(true, |mut w| async move {
        w.write_all(&[0u8; 5000]).await.unwrap();
        w.write_all(&END_MARK[..5]).await.unwrap();
        w.flush().await.unwrap();
        tokio::task::yield_now().await;
        w.write_all(&END_MARK[5..]).await.unwrap();
    })
    .unwrap();
    assert_eq!(marked.end, End::Marked);
    assert_eq!(marked.meter.total(), 5000 + END_MARK.len() as u64);
    let cut = received(true, |mut w| async move {
        w.write_all(&[0u8; 5000]).await.unwrap();
    })
    .unwrap();
    assert_eq!(cut.end, End::Closed, "closed without the mark");
    let unasked = received(false, |mut w| async move {
        w.write_all(&[0u8; 100]).await.unwrap();
        w.write_all(END_MARK).await.unwrap();
    })
    .unwrap();
    assert_eq!(unasked.end, End::Closed, "no mark was expected");
    let over = received(true, |mut w| async move {
        let _ = w.write_all(&vec![0u8; (1 << 20) + 100]).await;
    });
    assert!(
        over.unwrap_err()
            .contains("sent more than the 1048576 bytes granted"),
        "the mark's allowance is no room for more payload"
    );
}

fn figures(bytes: u64, window_bytes: u64, window_us: u64) -> UpResult {
    UpResult {
        bytes,
        window_bytes,
        window_us,
    }
}

/// Guards the sense checks (a rate from a 1 µs window once reached the
/// file): each impossible figure is refused with the limit it broke, and a
/// real one passes with its rate.
#[test]
fn figures_outside_physical_sense_are_refused_with_the_reason() {
    let ok = figures(64 << 20, 48 << 20, 50_000);
    let rate = check_transfer("download", &ok, 64 << 20, 60_000).unwrap();
    assert!((rate - 8053.06).abs() < 0.1, "{rate}");
    for (f, moved, lasted, says) in [
        (
            figures(1 << 20, 1 << 19, 1),
            1 << 20,
            60_000,
            "a rate from a 1 µs window",
        ),
        (
            figures(1 << 20, 1 << 19, MIN_WINDOW_US - 1),
            1 << 20,
            60_000,
            "µs window, under",
        ),
        (figures(100, 200, 50_000), 100, 60_000, "only 100 in all"),
        (
            figures(0, 0, 0),
            0,
            60_000,
            "no bytes in the measured window",
        ),
        (
            figures(2000, 1000, 50_000),
            1000,
            60_000,
            "only 1000 were sent",
        ),
        (
            figures(1 << 20, 1 << 19, 90_000),
            1 << 20,
            60_000,
            "longer than the 60000 µs",
        ),
        (
            // 2 Tbit/s: 125 GB over half a second.
            figures(u64::MAX, 125_000_000_000, 500_000),
            u64::MAX,
            u64::MAX,
            "above the 1 Tbit/s",
        ),
    ] {
        let why = check_transfer("upload", &f, moved, lasted).unwrap_err();
        assert!(
            why.starts_with("upload: ") && why.contains(says),
            "{f:?}: {why}"
        );
    }
}

#[test]
fn round_trips_of_no_time_or_of_no_link_are_refused() {
    assert!(check_rtts(&[0.21, 0.2, 0.25]).is_ok());
    assert!(check_rtts(&[]).unwrap_err().contains("no round trip"));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.0001, 20_000.0] {
        let why = check_rtts(&[0.2, bad]).unwrap_err();
        assert!(why.starts_with("round trip 2: "), "{bad}: {why}");
    }
}

/// An agent that predates `transfers` and `early_stop` echoes neither in
/// its go-ahead: read as true, so the client makes the transfers that
/// agent waits for, and expects it to stop early; a request that wants
/// the old behaviour does not name them on the wire.
#[test]
fn a_go_ahead_without_transfers_or_early_stop_means_the_old_behaviour() {
    let old = br#"{"rlx":"ready","pings":3,"up_bytes":10,"up_ms":10,"down_bytes":10,"down_ms":10}"#;
    let r: Ready = serde_json::from_slice(old).unwrap();
    assert!(r.granted.transfers);
    assert!(!Request::default().line().contains("transfers"));
    let quiet = Request {
        transfers: false,
        ..Request::default()
    };
    assert!(quiet.line().contains("\"transfers\":false"));
    assert_eq!(parse_request(quiet.line().as_bytes()).unwrap(), quiet);
    assert!(r.granted.early_stop, "an old go-ahead stops early");
    let whole = Request {
        early_stop: false,
        ..Request::default()
    };
    assert!(whole.line().contains("\"early_stop\":false"));
    assert_eq!(parse_request(whole.line().as_bytes()).unwrap(), whole);
    assert_eq!(whole.granted(), whole);
}
