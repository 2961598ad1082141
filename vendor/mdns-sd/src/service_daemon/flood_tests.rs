//! rlx patch: unit tests of the bounds under a flood (PATCHES.md §28): a
//! held truncated query and the cache stay bounded whatever a stranger
//! sends. The pure parts, with no daemon and no socket.

use super::{
    Instant, TruncatedQuery, TRUNCATED_HOLD_MAX, TRUNCATED_KNOWN_ANSWERS_MAX,
    TRUNCATED_QUERY_WAIT_MILLIS,
};
use crate::dns_cache::{CacheWanted, DnsCache, CACHE_RECORDS_MAX, CACHE_RECORDS_PER_NAME_MAX};
use crate::dns_parser::{
    DnsAddress, DnsIncoming, DnsOutgoing, DnsPointer, DnsRecordBox, DnsRecordExt, DnsSrv, DnsTxt,
    InterfaceId, RRType, CLASS_IN, FLAGS_QR_QUERY, FLAGS_TC,
};
use crate::service_info::MyIntf;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// A jumbo packet, within RFC 6762 §17.
const MAX_PKT: usize = 8900;

fn intf_id() -> InterfaceId {
    InterfaceId {
        name: "eth0".to_string(),
        index: 2,
    }
}

fn intf() -> MyIntf {
    MyIntf {
        name: "eth0".to_string(),
        index: 2,
        addrs: HashSet::new(),
        max_packet_size_v4: 1500,
        max_packet_size_v6: 1500,
    }
}

fn ptr(i: usize) -> DnsRecordBox {
    DnsPointer::new(
        "_rlx._tcp.local.",
        RRType::PTR,
        CLASS_IN,
        4500,
        format!("node-{i}._rlx._tcp.local."),
    )
    .boxed()
}

/// A packet of `n` known answers, truncated or not, as it comes off the
/// wire.
fn known_answers(n: usize, from: usize, truncated: bool) -> DnsIncoming {
    let flags = FLAGS_QR_QUERY | if truncated { FLAGS_TC } else { 0 };
    let mut out = DnsOutgoing::new(flags);
    for i in from..from + n {
        out.add_answer_box(ptr(i));
    }
    let packet = out.to_data_on_wire(MAX_PKT, true).remove(0);
    DnsIncoming::new(packet, intf_id()).unwrap()
}

fn held(now: Instant) -> TruncatedQuery {
    TruncatedQuery {
        deadline: now + Duration::from_millis(*TRUNCATED_QUERY_WAIT_MILLIS.end()),
        arrived: now,
        msg: known_answers(10, 0, true),
        if_index: 2,
        querier_addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), 5353),
    }
}

/// Guards against the flood of §28: each follow-up packet added all its
/// answers, so a stranger's stream grew one held query without end.
#[test]
fn a_held_query_keeps_at_most_its_cap_of_known_answers() {
    let now = Instant::now();
    let mut q = held(now);
    for k in 0..40 {
        q.follow_up(&mut known_answers(50, 10 + 50 * k, false), now);
    }
    assert_eq!(q.msg.answers().len(), TRUNCATED_KNOWN_ANSWERS_MAX);
}

/// Guards against each truncated follow-up extending the hold for ever.
#[test]
fn truncated_follow_ups_extend_the_wait_but_never_past_the_hold_cap() {
    let now = Instant::now();
    let mut q = held(now);
    let first = q.follow_up(
        &mut known_answers(1, 10, true),
        now + Duration::from_millis(300),
    );
    assert!(first.unwrap() > now + Duration::from_millis(600));
    let mut last = None;
    for k in 1..100u64 {
        let at = now + Duration::from_millis(300 * k);
        last = q.follow_up(&mut known_answers(1, 10 + k as usize, true), at);
    }
    assert_eq!(last, Some(now + TRUNCATED_HOLD_MAX));
    assert!(q
        .follow_up(&mut known_answers(1, 500, false), now)
        .is_none());
}

fn wanted(
    browsed: &[&str],
    resolved: &[&str],
    cache: &DnsCache,
    msg: &[DnsRecordBox],
) -> CacheWanted {
    let browsed: Vec<String> = browsed.iter().map(|s| s.to_string()).collect();
    let resolved: Vec<String> = resolved.iter().map(|s| s.to_string()).collect();
    CacheWanted::new(browsed.iter(), resolved.iter(), cache, msg.iter())
}

fn srv(instance: &str, host: &str) -> DnsRecordBox {
    DnsSrv::new(instance, CLASS_IN, 120, 0, 0, 6184, host.to_string()).boxed()
}

fn txt(instance: &str) -> DnsRecordBox {
    DnsTxt::new(instance, CLASS_IN, 4500, vec![]).boxed()
}

fn a(host: &str, ip: Ipv4Addr) -> DnsRecordBox {
    DnsAddress::new(host, RRType::A, CLASS_IN, 120, IpAddr::V4(ip), intf_id()).boxed()
}

/// Guards against upstream's "a response with no PTR is for us": a daemon
/// that browses nothing (the agent) cached every record any host sent it.
#[test]
fn a_daemon_that_browses_nothing_wants_no_unsolicited_record() {
    let cache = DnsCache::new();
    let msg = [
        srv("x._rlx._tcp.local.", "x.local."),
        txt("x._rlx._tcp.local."),
        a("x.local.", Ipv4Addr::new(10, 0, 0, 1)),
    ];
    let w = wanted(&[], &[], &cache, &msg);
    assert!(msg.iter().all(|r| !w.wants(r)));
}

#[test]
fn a_browsed_types_instances_and_the_hosts_they_name_are_wanted_in_any_letter_case() {
    let cache = DnsCache::new();
    let msg = [
        srv("Node-1._RLX._tcp.local.", "Gpu-1.local."),
        txt("node-1._rlx._tcp.local."),
        a("gpu-1.local.", Ipv4Addr::new(10, 0, 0, 1)),
        ptr(1),
        // Another type's, and an address no SRV names.
        srv("printer._ipp._tcp.local.", "printer.local."),
        a("stranger.local.", Ipv4Addr::new(10, 0, 0, 2)),
        txt("_rlx._tcp.local."),
    ];
    let w = wanted(&["_rlx._tcp.local."], &[], &cache, &msg);
    let got: Vec<bool> = msg.iter().map(|r| w.wants(r)).collect();
    assert_eq!(got, [true, true, true, true, false, false, false]);
}

#[test]
fn an_address_is_wanted_for_a_host_looked_up_or_named_by_a_cached_srv() {
    let mut cache = DnsCache::new();
    let mut timers = Vec::new();
    cache.add_or_update(
        &intf(),
        srv("n._rlx._tcp.local.", "cached.local."),
        &mut timers,
        true,
    );
    let msg = [
        a("cached.local.", Ipv4Addr::new(10, 0, 0, 1)),
        a("asked.local.", Ipv4Addr::new(10, 0, 0, 2)),
        a("other.local.", Ipv4Addr::new(10, 0, 0, 3)),
    ];
    let w = wanted(&["_rlx._tcp.local."], &["asked.local."], &cache, &msg);
    let got: Vec<bool> = msg.iter().map(|r| w.wants(r)).collect();
    assert_eq!(got, [true, true, false]);
}

/// Guards against an unbounded cache: past its cap new records are not
/// kept, and those it holds are still refreshed.
#[test]
fn the_cache_never_holds_more_than_its_cap_and_still_refreshes_what_it_has() {
    let mut cache = DnsCache::new();
    let mut timers = Vec::new();
    for i in 0..CACHE_RECORDS_MAX + 500 {
        cache.add_or_update(
            &intf(),
            txt(&format!("n{i}._rlx._tcp.local.")),
            &mut timers,
            true,
        );
    }
    assert_eq!(cache.record_count(), CACHE_RECORDS_MAX);
    let again = cache.add_or_update(&intf(), txt("n7._rlx._tcp.local."), &mut timers, true);
    assert!(
        matches!(again, Some((_, false))),
        "an old record is refreshed"
    );
    let new = cache.add_or_update(&intf(), txt("new._rlx._tcp.local."), &mut timers, true);
    assert!(new.is_none(), "a new one is refused while full");
}

/// Guards against one name's list growing without end (and each insert's
/// linear scan of it): the oldest gives way, the newest is kept.
#[test]
fn one_name_holds_at_most_its_cap_and_the_newest_is_kept() {
    let mut cache = DnsCache::new();
    let mut timers = Vec::new();
    for i in 0..200u32 {
        let ip = Ipv4Addr::from(0x0a00_0000 + i);
        cache.add_or_update(&intf(), a("h.local.", ip), &mut timers, true);
    }
    let held = cache.get_addr("h.local.").unwrap();
    assert_eq!(held.len(), CACHE_RECORDS_PER_NAME_MAX);
    let newest = held[0].record.any().downcast_ref::<DnsAddress>().unwrap();
    assert_eq!(
        newest.address().to_ip_addr(),
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + 199))
    );
}
