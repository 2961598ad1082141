use super::*;
use crate::netlink::NLMSG_ERROR;

fn ip(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn the_solicited_node_address_keeps_the_targets_low_24_bits() {
    assert_eq!(solicited_node(ip("fd52::7")), ip("ff02::1:ff00:7"));
    assert_eq!(
        solicited_node(ip("fe80::14c1:a5ff:fed1:40ce")),
        ip("ff02::1:ffd1:40ce")
    );
}

/// The layout of RFC 4861 §4.3 and §4.6.1, byte for byte, and the checksum
/// computed independently (Python, over the same pseudo-header).
#[test]
fn a_solicitation_asks_for_the_target_with_our_link_layer_address_and_a_valid_checksum() {
    let m = solicitation(ip("fd52::1"), [2, 0, 0, 0, 0, 1], ip("fd52::7"));
    assert_eq!(m[0], 135, "type: Neighbor Solicitation");
    assert_eq!(m[1], 0, "code 0");
    assert_eq!(&m[2..4], &[0x7c, 0xe9], "checksum");
    assert_eq!(&m[4..8], &[0; 4], "reserved");
    assert_eq!(&m[8..24], &ip("fd52::7").octets());
    assert_eq!(&m[24..26], &[1, 1], "Source Link-Layer Address, 8 bytes");
    assert_eq!(&m[26..32], &[2, 0, 0, 0, 0, 1]);
}

/// A receiver sums pseudo-header and message, checksum included, and must
/// get all ones; a checksum over the wrong destination would not.
#[test]
fn the_checksum_covers_the_pseudo_header_of_the_solicited_node_destination() {
    let (src, t) = (ip("fe80::ff:fe00:1"), ip("fd00::1234:5678"));
    let m = solicitation(src, [2, 0, 0, 0, 0, 1], t);
    let mut sum: u32 = 0;
    let mut words = Vec::new();
    words.extend_from_slice(&src.octets());
    words.extend_from_slice(&solicited_node(t).octets());
    words.extend_from_slice(&32u32.to_be_bytes());
    words.extend_from_slice(&[0, 0, 0, 58]);
    words.extend_from_slice(&m);
    for c in words.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    assert_eq!(sum, 0xffff);
    assert_ne!(
        icmpv6_checksum(src, ip("ff02::1"), &m),
        u16::from_be_bytes([m[2], m[3]]),
        "the destination is part of the sum"
    );
}

/// Bytes read from a real kernel's reply to `ip -6 neigh show` (captured
/// with `strace -e read=3` in a scratch namespace): an INCOMPLETE entry
/// for fd00::7, a multicast NOARP entry, a STALE fd00::8, then
/// NLMSG_DONE. All on interface 3.
const CAPTURED: &str = concat!(
    "4c0000001c000200fab60e6bb13d00000a000000030000000100000114000100",
    "fd00000000000000000000000000000708000400040000001400030085170000",
    "150000001500000001000000580000001c000200fab60e6bb13d00000a000000",
    "030000004000000514000100ff0200000000000000000000000000020a000200",
    "3333000000020000080004000000000014000300061b00009603000096030000",
    "00000000580000001c000200fab60e6bb13d00000a0000000300000004000001",
    "14000100fd0000000000000000000000000000080a0002000200000000080000",
    "080004000000000014000300951b000025040000250400000000000014000000",
    "03000200fab60e6bb13d000000000000",
);

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_captured_neighbour_dump_gives_each_entry_with_its_state() {
    let p = parse_neighbours(&unhex(CAPTURED));
    let n = |s: &str, state| Neighbour6 {
        ip: ip(s),
        ifindex: 3,
        state,
    };
    assert_eq!(
        p.entries,
        vec![
            n("fd00::7", NUD_INCOMPLETE),
            n("ff02::2", 0x40),
            n("fd00::8", 0x04),
        ]
    );
    assert!(p.done, "NLMSG_DONE ends the dump");
    assert_eq!(p.error, None);
    let resolving: Vec<_> = p.entries.iter().filter(|e| e.resolving()).collect();
    assert_eq!(resolving, vec![&n("fd00::7", NUD_INCOMPLETE)]);
}

#[test]
fn a_truncated_dump_yields_the_whole_entries_and_is_not_done() {
    let b = unhex(CAPTURED);
    let p = parse_neighbours(&b[..100]);
    assert_eq!(p.entries.len(), 1, "{p:?}");
    assert!(!p.done);
}

#[test]
fn a_netlink_error_is_reported_not_taken_for_an_empty_table() {
    let mut m = vec![0u8; 36];
    m[0..4].copy_from_slice(&36u32.to_ne_bytes());
    m[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
    m[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
    let p = parse_neighbours(&m);
    assert_eq!(p.error, Some(-1));
    assert!(p.done);
}

#[cfg(target_os = "linux")]
#[test]
fn the_dump_request_asks_for_ipv6_neighbours() {
    let r = dump_request(7);
    assert_eq!(u32::from_ne_bytes(r[0..4].try_into().unwrap()), 28);
    assert_eq!(u16::from_ne_bytes([r[4], r[5]]), RTM_GETNEIGH);
    assert_eq!(u16::from_ne_bytes([r[6], r[7]]), 0x301, "request, dump");
    assert_eq!(r[16], 10, "AF_INET6");
}
