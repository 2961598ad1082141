//! The UDP probe's datagrams, figures and the two halves on loopback.

use super::*;

fn nonce() -> Nonce {
    Nonce::from_bytes([7; 32])
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn a_datagram_opens_only_with_its_own_key_nonce_and_direction() {
    let key = Key::from_bytes([1; 32]);
    let t = Tagger::new(Some(&key), &nonce());
    let to = addr("10.0.0.2:6184");
    let d = t.datagram(Dir::Up, KIND_LOSS, 42, LOSS_SIZE, to);
    assert_eq!(d.len(), usize::from(LOSS_SIZE - 28));
    assert_eq!(t.open(&d, Dir::Up, to), Some((KIND_LOSS, 42, LOSS_SIZE)));
    assert_eq!(t.open(&d, Dir::Down, to), None, "the other direction");
    let other_key = Tagger::new(Some(&Key::from_bytes([2; 32])), &nonce());
    assert_eq!(other_key.open(&d, Dir::Up, to), None, "another key");
    let other_nonce = Tagger::new(Some(&key), &Nonce::from_bytes([8; 32]));
    assert_eq!(other_nonce.open(&d, Dir::Up, to), None, "another nonce");
    let mut renumbered = d.clone();
    renumbered[9] ^= 1;
    assert_eq!(t.open(&renumbered, Dir::Up, to), None, "a replayed tag");
    assert_eq!(t.open(&d[..d.len() - 1], Dir::Up, to), None, "cut short");
}

#[test]
fn an_ipv6_datagram_is_sized_for_the_larger_header() {
    let t = Tagger::new(None, &nonce());
    let to = addr("[fd00::2]:6184");
    let d = t.datagram(Dir::Down, KIND_MTU, 0, 1500, to);
    assert_eq!(d.len(), 1500 - 48);
    assert_eq!(t.open(&d, Dir::Down, to), Some((KIND_MTU, 0, 1500)));
}

#[test]
fn loss_is_what_was_sent_less_what_arrived_and_a_smaller_mtu_is_flagged() {
    let d = UdpDirection::from_counts(
        Sent {
            packets: 2000,
            mtu: 1500,
            failed: 0,
        },
        Got {
            got: 1960,
            mtu: 1400,
            rejected: 3,
            dropped_here: 0,
        },
    )
    .unwrap();
    assert!((d.loss_pct - 2.0).abs() < 1e-9);
    assert_eq!(d.mtu, Some(1400));
    assert!(d.mtu_limited);
    assert_eq!(d.rejected, 3);
    assert!(d.summary().contains("MTU 1400"), "{}", d.summary());
}

#[test]
fn a_direction_where_nothing_arrived_is_a_filter_not_total_loss() {
    let why = UdpDirection::from_counts(
        Sent {
            packets: 2000,
            mtu: 1500,
            failed: 0,
        },
        Got::default(),
    )
    .unwrap_err();
    assert!(why.contains("filtered"), "{why}");
}

#[test]
fn a_receiver_claiming_more_than_was_sent_is_refused() {
    let sent = Sent {
        packets: 10,
        mtu: 0,
        failed: 0,
    };
    let got = Got {
        got: 11,
        ..Got::default()
    };
    assert!(UdpDirection::from_counts(sent, got).is_err());
}

#[test]
fn without_dont_fragment_no_mtu_is_claimed() {
    let d = UdpDirection::from_counts(
        Sent {
            packets: 10,
            mtu: 0,
            failed: 0,
        },
        Got {
            got: 10,
            mtu: 0,
            rejected: 0,
            dropped_here: 0,
        },
    )
    .unwrap();
    assert_eq!(d.mtu, None);
    assert!(!d.mtu_limited);
}

/// Datagrams the receiving box dropped itself (its buffer full) crossed
/// the link: they count as arrived, and are reported.
#[test]
fn what_the_receiving_box_dropped_itself_is_not_the_links_loss() {
    let sent = Sent {
        packets: 2000,
        mtu: 1500,
        failed: 0,
    };
    let got = Got {
        got: 1290,
        mtu: 1500,
        rejected: 0,
        dropped_here: 700,
    };
    let d = UdpDirection::from_counts(sent, got).unwrap();
    assert_eq!((d.got, d.receiver_drops), (1990, 700));
    assert!((d.loss_pct - 0.5).abs() < 1e-9, "{d:?}");
    // Its count cannot make more arrive than were sent.
    let over = Got {
        dropped_here: 5000,
        ..got
    };
    let d = UdpDirection::from_counts(sent, over).unwrap();
    assert_eq!((d.got, d.loss_pct), (2000, 0.0));
}

/// A socket's drop count is read from the kernel's table by its inode:
/// none on a fresh socket, some on one that nobody reads while a flood
/// overfills its small buffer.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_socket_that_is_not_read_counts_what_its_full_buffer_dropped() {
    let r = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket2::SockRef::from(&r)
        .set_recv_buffer_size(4096)
        .unwrap();
    assert_eq!(socket_drops(&r), 0);
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = r.local_addr().unwrap();
    for _ in 0..500 {
        s.send_to(&[0u8; 100], to).await.unwrap();
    }
    assert!(socket_drops(&r) > 0, "nothing read, 500 sent into 4 KiB");
}

#[tokio::test]
async fn two_probes_on_loopback_count_every_datagram_and_reject_a_forged_one() {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let key = Key::from_bytes([3; 32]);
    let ask = UdpAsk {
        packets: 200,
        ms: 20,
        port: aa.port(),
    };
    let mut client = Probe::new(a, ba, Tagger::new(Some(&key), &nonce()), ask, Dir::Up);
    let mut agent = Probe::new(b, aa, Tagger::new(Some(&key), &nonce()), ask, Dir::Down);
    // A stranger on the same host with the wrong key.
    let forger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let forged = Tagger::new(Some(&Key::from_bytes([4; 32])), &nonce()).datagram(
        Dir::Up,
        KIND_LOSS,
        0,
        LOSS_SIZE,
        ba,
    );
    forger.send_to(&forged, ba).await.unwrap();
    let c = async {
        client.send_all().await;
        client
            .receive_until(tokio::time::sleep(Duration::from_millis(60)))
            .await;
        client
    };
    let g = async {
        agent.await_first().await;
        agent.send_all().await;
        agent
            .receive_until(tokio::time::sleep(Duration::from_millis(60)))
            .await;
        agent
    };
    let (client, agent) = tokio::join!(c, g);
    assert_eq!(client.sent().packets, 200);
    assert_eq!(agent.got().got, 200);
    assert_eq!(client.got().got, 200);
    assert_eq!(agent.got().rejected, 1, "the forged datagram");
    let up = UdpDirection::from_counts(client.sent(), agent.got()).unwrap();
    assert_eq!(up.loss_pct, 0.0);
    // Loopback's MTU is 65536: the whole ladder passes.
    assert_eq!(up.mtu, Some(9000));
    assert!(!up.mtu_limited);
}
