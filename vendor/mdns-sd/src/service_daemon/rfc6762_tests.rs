//! rlx patch: unit tests of the RFC 6762 answering patches (PATCHES.md §20-26, §32):
//! the pure parts, with no daemon and no socket.

use super::{
    check_probing, port_taken_by_another, shared_response_delay, take_aggregated, DelayedResponse,
    Instant, SHARED_RESPONSE_DELAY_MAX_MILLIS, SHARED_RESPONSE_DELAY_MIN_MILLIS,
};
use crate::dns_parser::{
    DnsAddress, DnsIncoming, DnsOutgoing, DnsPointer, DnsRecordBox, DnsRecordExt, InterfaceId,
    RRType, CLASS_CACHE_FLUSH, CLASS_IN, FLAGS_QR_QUERY, FLAGS_QR_RESPONSE,
};
use crate::service_info::{compare_probe_records, DnsRegistry, MyIntf, Probe};
use crate::timers::Timers;
use crate::ServiceInfo;
use if_addrs::{IfAddr, Ifv6Addr};
use std::cmp::Ordering;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddrV4};
use std::time::Duration;

fn intf_id() -> InterfaceId {
    InterfaceId {
        name: "eth0".to_string(),
        index: 2,
    }
}

fn a_record(ip: &str, ttl: u32) -> DnsRecordBox {
    let ip: IpAddr = ip.parse().unwrap();
    DnsAddress::new(
        "host.local.",
        RRType::A,
        CLASS_IN | CLASS_CACHE_FLUSH,
        ttl,
        ip,
        intf_id(),
    )
    .boxed()
}

fn v6_intf(name: &str, index: u32, ip: &str) -> MyIntf {
    MyIntf {
        name: name.to_string(),
        index,
        addrs: HashSet::from([IfAddr::V6(Ifv6Addr {
            ip: ip.parse().unwrap(),
            netmask: Ipv6Addr::from(u128::MAX << 64),
            broadcast: None,
            prefixlen: 64,
        })]),
        max_packet_size_v4: 1500,
        max_packet_size_v6: 1500,
    }
}

/// Guards against the 10-50 ms upstream delay: RFC 6762 §6 asks for 20-120 ms.
#[test]
fn shared_record_responses_wait_between_20_and_120_ms() {
    assert_eq!(SHARED_RESPONSE_DELAY_MIN_MILLIS, 20);
    assert_eq!(SHARED_RESPONSE_DELAY_MAX_MILLIS, 120);
    let delays: Vec<Duration> = (0..20_000).map(|_| shared_response_delay()).collect();
    let (min, max) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
    assert!(
        *min >= Duration::from_millis(20) && *max <= Duration::from_millis(120),
        "delays from {:?} to {:?}, outside 20-120 ms",
        min,
        max
    );
    // Uniform over the whole range: both ends are reached.
    assert!(*min < Duration::from_millis(25) && *max > Duration::from_millis(115));
}

/// Guards against probes sent as QM questions: RFC 6762 §8.1 wants the QU
/// bit, on the wire, in every probe.
#[test]
fn probes_carry_the_unicast_response_bit_on_the_wire() {
    let mut registry = DnsRegistry::new();
    let start = Instant::now() - Duration::from_millis(1);
    let mut probe = Probe::new(start);
    probe.insert_record(a_record("10.0.0.1", 120));
    registry.probing.insert("host.local.".to_string(), probe);

    let (out, _) = check_probing(
        &mut registry,
        &mut Timers::new(Instant::now()),
        Instant::now(),
        true,
    );
    assert_eq!(out.questions().len(), 1);
    let packet = out.to_data_on_wire(1500, true).remove(0);
    let msg = DnsIncoming::new(packet, intf_id()).unwrap();
    assert!(
        msg.questions()[0].unicast_response(),
        "the probe's question has no QU bit"
    );
}

/// Guards against QU probes beside another responder on the mDNS port (RFC
/// 6762 §15.1): a defender's unicast answer reaches only one of the sockets
/// that share the port, maybe not ours. With the port shared, probes ask
/// for multicast answers.
#[test]
fn probes_ask_for_multicast_answers_when_another_program_has_the_port() {
    let mut registry = DnsRegistry::new();
    let start = Instant::now() - Duration::from_millis(1);
    let mut probe = Probe::new(start);
    probe.insert_record(a_record("10.0.0.1", 120));
    registry.probing.insert("host.local.".to_string(), probe);
    let (out, _) = check_probing(
        &mut registry,
        &mut Timers::new(Instant::now()),
        Instant::now(),
        false,
    );
    let packet = out.to_data_on_wire(1500, true).remove(0);
    let msg = DnsIncoming::new(packet, intf_id()).unwrap();
    assert!(!msg.questions()[0].unicast_response());
}

/// The §15.1 test itself: a port another socket holds (with SO_REUSEADDR,
/// as every responder binds it) is taken; a free one is not.
#[test]
fn a_port_another_socket_holds_is_taken_and_a_free_one_is_not() {
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    other.set_reuse_address(true).unwrap();
    other
        .bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into())
        .unwrap();
    let port = other.local_addr().unwrap().as_socket().unwrap().port();
    assert!(port_taken_by_another(port));
    drop(other);
    assert!(!port_taken_by_another(port));
}

/// Guards against a QU bit lost between a question and its bytes.
#[test]
fn a_question_keeps_its_qu_bit_through_the_wire_and_a_plain_one_has_none() {
    let mut out = DnsOutgoing::new(FLAGS_QR_QUERY);
    out.add_question_unicast("_rlx._tcp.local.", RRType::PTR);
    out.add_question("_rlx._tcp.local.", RRType::SRV);
    let packet = out.to_data_on_wire(1500, true).remove(0);
    let msg = DnsIncoming::new(packet, intf_id()).unwrap();
    assert!(msg.questions()[0].unicast_response());
    assert!(!msg.questions()[1].unicast_response());
}

/// Guards against the §8.2.1 tie-break comparing the other side's records
/// in packet order: the same records listed in another order are a tie, not
/// a loss or a win.
#[test]
fn probe_tiebreak_sorts_both_sides_before_comparing() {
    let ours = vec![a_record("10.0.0.2", 120), a_record("10.0.0.1", 120)];
    let theirs_owned = [a_record("10.0.0.1", 120), a_record("10.0.0.2", 120)];
    let theirs: Vec<&DnsRecordBox> = theirs_owned.iter().collect();
    assert_eq!(compare_probe_records(&ours, &theirs), Ordering::Equal);

    // A real difference still decides: their 10.0.0.3 is later than our 10.0.0.2.
    let later = [a_record("10.0.0.3", 120), a_record("10.0.0.1", 120)];
    let later: Vec<&DnsRecordBox> = later.iter().collect();
    assert_eq!(compare_probe_records(&ours, &later), Ordering::Less);
    // With equal records, more records win.
    let fewer = [a_record("10.0.0.1", 120)];
    let fewer: Vec<&DnsRecordBox> = fewer.iter().collect();
    assert_eq!(compare_probe_records(&ours, &fewer), Ordering::Greater);
}

/// Guards against the prefix match that put every NIC's fe80:: address on
/// every link (RFC 6762 §6.2): only the interface's own addresses.
#[test]
fn an_interface_gets_only_its_own_ipv6_addresses() {
    let info = ServiceInfo::new(
        "_rlx._tcp.local.",
        "box",
        "box.local.",
        "fe80::1,fe80::2,fd00::1",
        9100,
        None,
    )
    .unwrap();
    let eth1 = v6_intf("eth1", 3, "fe80::2");
    let addrs = info.get_addrs_on_my_intf_v6(&eth1);
    assert_eq!(addrs, vec!["fe80::2".parse::<IpAddr>().unwrap()]);
}

/// RFC 6762 §5.4: a record counts as multicast "recently" for a quarter of
/// its TTL after it went out, per family; a goodbye forgets it.
#[test]
fn a_multicast_record_is_recent_for_a_quarter_of_its_ttl() {
    let mut registry = DnsRegistry::new();
    let t0 = Instant::now();
    let mut out = DnsOutgoing::new(FLAGS_QR_RESPONSE);
    out.add_answer_box(a_record("10.0.0.1", 120));
    registry.apply_multicast_rate_limit(&mut out, t0, true);

    let record = a_record("10.0.0.1", 120);
    assert!(registry.multicast_recently(&record, t0 + Duration::from_secs(29), true));
    assert!(!registry.multicast_recently(&record, t0 + Duration::from_secs(30), true));
    assert!(
        !registry.multicast_recently(&record, t0, false),
        "IPv6 is another group"
    );
    assert!(!registry.multicast_recently(&a_record("10.0.0.9", 120), t0, true));

    let mut goodbye = DnsOutgoing::new(FLAGS_QR_RESPONSE);
    goodbye.add_answer_box(a_record("10.0.0.1", 0));
    registry.apply_multicast_rate_limit(&mut goodbye, t0 + Duration::from_secs(2), true);
    assert!(!registry.multicast_recently(&record, t0 + Duration::from_secs(3), true));
}

/// A delayed response on interface `if_index` answering with PTRs to
/// `instances`, queued `ago` before `now`.
fn delayed(if_index: u32, instances: &[&str], now: Instant, ago: Duration) -> DelayedResponse {
    let mut out = DnsOutgoing::new(FLAGS_QR_RESPONSE);
    for i in instances {
        out.add_answer_box(
            DnsPointer::new(
                "_rlx._tcp.local.",
                RRType::PTR,
                CLASS_IN,
                4500,
                i.to_string(),
            )
            .boxed(),
        );
    }
    DelayedResponse {
        next_time: now,
        out,
        if_index,
        is_ipv4: true,
        queued_at: now - ago,
    }
}

/// Guards against one multicast packet per query (RFC 6762 §7.3, PATCHES.md
/// §35): the pending responses of one interface and family whose queries
/// are at least 20 ms old go out with the due one, each record once; a
/// response on another interface, or to a query younger than 20 ms, waits.
#[test]
fn due_responses_carry_the_other_pending_ones_of_their_link_each_record_once() {
    let now = Instant::now();
    let ms = Duration::from_millis;
    let mut pending = vec![
        delayed(2, &["a._rlx._tcp.local."], now, ms(100)),
        delayed(
            2,
            &["a._rlx._tcp.local.", "b._rlx._tcp.local."],
            now,
            ms(30),
        ),
        delayed(3, &["c._rlx._tcp.local."], now, ms(50)),
        delayed(2, &["d._rlx._tcp.local."], now, ms(5)),
    ];
    let (resp, merged) = take_aggregated(&mut pending, 0, now);
    assert_eq!(merged, 1);
    assert_eq!(resp.out.answers_count(), 2, "a once, and b");
    assert_eq!(pending.len(), 2, "eth3's and the young one wait");
    assert!(pending.iter().any(|p| p.if_index == 3));
    assert!(pending
        .iter()
        .any(|p| p.if_index == 2 && p.out.answers_count() == 1));
}
