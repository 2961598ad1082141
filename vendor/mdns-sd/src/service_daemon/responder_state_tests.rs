//! rlx patch: tests of `responder_state` and of the answer fixes after a
//! rename (PATCHES.md, sections 10-13). They drive a `Zeroconf` on loopback
//! with a private port: run them inside a private network namespace
//! (`unshare -n`, then `ip link set lo up`), as `Zeroconf::new` joins the
//! mDNS group on every interface.

use super::super::Zeroconf;
use crate::dns_parser::{
    DnsAddress, DnsIncoming, DnsOutgoing, DnsPointer, DnsSrv, DnsTxt, InterfaceId, RRType,
    CLASS_CACHE_FLUSH, CLASS_IN, FLAGS_AA, FLAGS_QR_QUERY, FLAGS_QR_RESPONSE, MAX_PKT_DEFAULT,
};
use crate::service_info::{DnsRegistry, ServiceStatus, CONFLICT_BACKOFF, CONFLICT_LIMIT};
use crate::ServiceInfo;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const TY: &str = "_state-test._tcp.local.";

/// A daemon on loopback only, on a private port, and loopback's index.
fn loopback_daemon() -> (Zeroconf, u32) {
    let port = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (sender, _receiver) = flume::bounded(100);
    let poller = mio::Poll::new().unwrap();
    let waker = std::sync::Arc::new(
        mio::Waker::new(poller.registry(), mio::Token(super::super::WAKER_EVENT_KEY)).unwrap(),
    );
    let mut daemon = Zeroconf::new(waker, poller, port, sender);
    let index = super::super::my_ip_interfaces(true)
        .iter()
        .find(|intf| intf.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST))
        .expect("loopback is up (ip link set lo up)")
        .index
        .unwrap();
    daemon.my_intfs.retain(|key, _| *key == index);
    daemon.dns_registry_map.retain(|key, _| *key == index);
    (daemon, index)
}

fn service(instance: &str, host: &str, txt: &str) -> ServiceInfo {
    ServiceInfo::new(
        TY,
        instance,
        host,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        9100,
        &[("v", txt)][..],
    )
    .unwrap()
}

/// Ends every probe now, as if their 750 ms had passed, until none is left.
fn finish_probes(daemon: &mut Zeroconf, index: u32) {
    for _ in 0..5 {
        let registry = daemon.dns_registry_map.get_mut(&index).unwrap();
        if registry.probing.is_empty() {
            return;
        }
        for probe in registry.probing.values_mut() {
            probe.start_time = Instant::now() - Duration::from_millis(1000);
            probe.next_send = probe.start_time;
        }
        daemon.probing_handler();
    }
}

/// Sends the first probe query of every probe now: from then on a
/// conflicting response counts (RFC 6762 §8.1).
fn send_first_probes(daemon: &mut Zeroconf, index: u32) {
    let registry = daemon.dns_registry_map.get_mut(&index).unwrap();
    for probe in registry.probing.values_mut() {
        probe.start_time = Instant::now();
        probe.next_send = probe.start_time;
    }
    daemon.probing_handler();
    let registry = &daemon.dns_registry_map[&index];
    assert!(
        registry.probing.values().all(|p| p.sent),
        "a probe was not sent"
    );
}

fn status(daemon: &Zeroconf, instance: &str, index: u32) -> ServiceStatus {
    daemon.my_services[&format!("{instance}.{TY}").to_lowercase()].get_status(index)
}

fn incoming(out: &DnsOutgoing, index: u32) -> DnsIncoming {
    let packet = out.to_data_on_wire(MAX_PKT_DEFAULT, true).remove(0);
    let id = InterfaceId {
        name: "lo".to_string(),
        index,
    };
    DnsIncoming::new(packet, id).unwrap()
}

/// Sends a one-shot (legacy) query for `name`/`ty` and returns the reply.
fn ask(daemon: &mut Zeroconf, index: u32, name: &str, ty: RRType) -> Option<DnsIncoming> {
    let querier = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    querier
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut out = DnsOutgoing::new(FLAGS_QR_QUERY);
    out.add_question(name, ty);
    daemon.handle_query(incoming(&out, index), index, querier.local_addr().unwrap());
    let mut data = [0; 4096];
    let (length, _) = querier.recv_from(&mut data).ok()?;
    let id = InterfaceId {
        name: "lo".to_string(),
        index,
    };
    Some(DnsIncoming::new(data[..length].to_vec(), id).unwrap())
}

fn srv_host(reply: &DnsIncoming) -> String {
    reply
        .answers()
        .iter()
        .find_map(|r| r.any().downcast_ref::<DnsSrv>())
        .expect("an SRV answer")
        .host()
        .to_string()
}

/// Another host's response claiming `host` at 127.0.0.99.
fn someone_else_has_host(host: &str) -> DnsOutgoing {
    let mut out = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    out.add_answer_record(DnsAddress::new(
        host,
        RRType::A,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 99)),
        InterfaceId::default(),
    ));
    out
}

/// Guards against direct SRV answers naming the host as registered after
/// probing renamed it (issue 17 item 1, mdns-sd 0.21.7 `add_answer_of_service`):
/// caches across the LAN then pointed the old name at this box.
#[test]
fn a_direct_srv_answer_after_a_host_rename_names_the_renamed_host() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "clone.local.", "1"));
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(
        &incoming(&someone_else_has_host("clone.local."), index),
        index,
    );
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);

    let reply = ask(&mut daemon, index, &format!("box.{TY}"), RRType::SRV).expect("a reply");
    assert_eq!(srv_host(&reply), "clone-2.local.");
    for additional in reply.additionals() {
        assert_eq!(additional.get_name(), "clone-2.local.", "{additional:?}");
    }
}

/// Guards against the lookup that compared the lowercased service key with
/// renames kept under the original-case name (issue 17 item 1): an instance
/// with capitals answered to its old name, and not to its new one.
#[test]
fn an_instance_with_capitals_answers_only_to_its_new_name_after_a_rename() {
    let (mut daemon, index) = loopback_daemon();
    let fullname = format!("DGX-01.{TY}");
    daemon.register_service(service("DGX-01", "dgx.local.", "1"));
    let mut theirs = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    theirs.add_answer_record(DnsSrv::new(
        &fullname,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        0,
        0,
        7000,
        "other.local.".to_string(),
    ));
    theirs.add_answer_record(DnsTxt::new(
        &fullname,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        vec![5, b'o', b't', b'h', b'e', b'r'],
    ));
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(&incoming(&theirs, index), index);
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "DGX-01", index), ServiceStatus::Announced);

    let renamed = format!("DGX-01 (2).{TY}");
    let reply = ask(&mut daemon, index, &renamed, RRType::SRV).expect("the new name is answered");
    assert_eq!(srv_host(&reply), "dgx.local.");
    assert!(
        ask(&mut daemon, index, &fullname, RRType::SRV).is_none(),
        "the old name must not be answered after the rename"
    );
}

/// Guards against ignoring a conflict found after probing (issue 17 item 2,
/// RFC 6762 §9): the records must go back to probing.
#[test]
fn a_conflicting_announcement_after_probing_puts_the_host_back_to_probing() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "late.local.", "1"));
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);

    daemon.handle_response(
        incoming(&someone_else_has_host("late.local."), index),
        index,
    );
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Probing);
    let registry = &daemon.dns_registry_map[&index];
    assert!(
        registry.probing.contains_key("late.local."),
        "{:?}",
        registry.probing.keys()
    );
    for probe in registry.probing.values() {
        assert!(
            daemon.timers.wakes_for(probe.next_send),
            "a timer wakes the daemon for the probe's first send"
        );
    }

    // Nobody defends the name in the new probe: the same name is announced again.
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    let reply = ask(&mut daemon, index, &format!("box.{TY}"), RRType::SRV).expect("a reply");
    assert_eq!(srv_host(&reply), "late.local.");
}

/// Our own records heard back (multicast loop, a second NIC on the link) and
/// goodbyes are not conflicts.
#[test]
fn our_own_announcement_heard_back_is_not_a_conflict() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "own.local.", "1"));
    finish_probes(&mut daemon, index);
    let mut ours = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    ours.add_answer_record(DnsAddress::new(
        "own.local.",
        RRType::A,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        InterfaceId::default(),
    ));
    daemon.handle_response(incoming(&ours, index), index);
    assert_eq!(
        status(&daemon, "box", index),
        ServiceStatus::Announced,
        "own A"
    );
    let mut goodbye = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    goodbye.add_answer_record(DnsAddress::new(
        "own.local.",
        RRType::A,
        CLASS_IN | CLASS_CACHE_FLUSH,
        0,
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 99)),
        InterfaceId::default(),
    ));
    daemon.handle_response(incoming(&goodbye, index), index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
}

/// Guards against probing again at once however many conflicts came before
/// (RFC 6762 §8.1: after 15 conflicts in 10 s, wait 5 s).
#[test]
fn fifteen_conflicts_in_ten_seconds_delay_the_next_probe_by_five_seconds() {
    let mut registry = DnsRegistry::new();
    let now = Instant::now();
    for i in 0..CONFLICT_LIMIT - 1 {
        let start = registry.conflict_probe_start(now + Duration::from_millis(i as u64));
        assert!(start < now + Duration::from_secs(1), "conflict {}", i);
    }
    let start = registry.conflict_probe_start(now + Duration::from_millis(20));
    assert!(
        start >= now + CONFLICT_BACKOFF,
        "the 15th conflict backs off"
    );
    // Ten seconds later the old conflicts no longer count.
    let later = now + Duration::from_secs(11);
    assert!(registry.conflict_probe_start(later) < later + Duration::from_secs(1));
}

/// Guards against a link coming back up getting one announcement of the old
/// state, without probing or the second announcement (RFC 6762 §8, §8.3).
#[test]
fn a_link_coming_back_probes_before_announcing() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "flap.local.", "1").enable_addr_auto());
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);

    // The link goes down (its addresses vanish) and comes back.
    let lo: Vec<_> = super::super::my_ip_interfaces(true)
        .into_iter()
        .filter(|intf| intf.index == Some(index) && intf.ip().is_ipv4())
        .collect();
    daemon.my_intfs.remove(&index);
    daemon.add_interface(&lo[0], &lo);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Probing);
    assert!(!daemon.dns_registry_map[&index].probing.is_empty());
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    let resends = daemon
        .retransmissions
        .iter()
        .filter(|r| matches!(r.command, super::super::Command::RegisterResend(..)))
        .count();
    assert!(resends >= 1, "the second announcement is scheduled");
}

/// Guards against a TXT update re-probing the service and so silencing it,
/// PTR, SRV and A records included, for about a second (issue 17 item 3;
/// RFC 6762 §8.4 asks only for a re-announcement).
#[test]
fn a_txt_update_keeps_the_service_answered_and_does_not_probe() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "upd.local.", "1").enable_addr_auto());
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);

    daemon.register_service(service("box", "upd.local.", "2").enable_addr_auto());
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    assert!(daemon.dns_registry_map[&index].probing.is_empty());
    let reply = ask(&mut daemon, index, &format!("box.{TY}"), RRType::TXT).expect("a reply");
    let txt = reply
        .answers()
        .iter()
        .find_map(|r| r.any().downcast_ref::<DnsTxt>())
        .expect("a TXT answer");
    assert_eq!(txt.text(), b"\x03v=2");
    assert!(ask(&mut daemon, index, "upd.local.", RRType::A).is_some());
}

/// Guards against the second announcement (RFC 6762 §8.3) of a name with
/// capitals being lost: `RegisterResend` carries the original-case name and
/// looked it up in the lowercased service map, so it found nothing.
#[test]
fn a_name_with_capitals_gets_its_second_announcement() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("DGX-01", "dgx.local.", "1"));
    finish_probes(&mut daemon, index);
    let resend = |daemon: &Zeroconf| {
        daemon
            .counters
            .get(&super::super::Counter::RegisterResend.to_string())
            .copied()
            .unwrap_or(0)
    };
    let before = resend(&daemon);
    daemon
        .exec_command_register_resend(format!("DGX-01.{TY}"), index)
        .unwrap();
    assert_eq!(resend(&daemon), before + 1, "the resend found the service");
}

/// Guards against a host rename counting up a numeric id suffix
/// (`gpu-123456` became `gpu-123457`, which may be another agent's name).
#[test]
fn a_host_rename_counts_up_only_a_short_counter() {
    use super::super::hostname_change;
    assert_eq!(hostname_change("gpu-123456.local."), "gpu-123456-2.local.");
    assert_eq!(
        hostname_change("gpu-123456-2.local."),
        "gpu-123456-3.local."
    );
    assert_eq!(hostname_change("gpu-5f0c1d.local."), "gpu-5f0c1d-2.local.");
    assert_eq!(hostname_change("foo-999.local."), "foo-1000.local.");
}

/// A later announcement of our instance's SRV record with another target is
/// a conflict too (RFC 6762 §9): the service probes again, and renames when
/// the other host defends the name.
#[test]
fn a_conflicting_srv_after_probing_puts_the_service_back_to_probing() {
    let (mut daemon, index) = loopback_daemon();
    let fullname = format!("box.{TY}");
    daemon.register_service(service("box", "mine.local.", "1"));
    finish_probes(&mut daemon, index);
    let mut theirs = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    theirs.add_answer_record(DnsSrv::new(
        &fullname,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        0,
        0,
        9100,
        "theirs.local.".to_string(),
    ));
    daemon.handle_response(incoming(&theirs, index), index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Probing);
    // The other host defends its SRV in our probe: we rename the instance.
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(&incoming(&theirs, index), index);
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    let renamed = format!("box (2).{TY}");
    let reply = ask(&mut daemon, index, &renamed, RRType::SRV).expect("the new name is answered");
    assert_eq!(srv_host(&reply), "mine.local.");
}

/// Loopback's IPv4 interface, and a copy of it carrying `ip` instead: an
/// address added to an interface that stays up.
fn loopback_with(index: u32, ip: Ipv4Addr) -> (if_addrs::Interface, if_addrs::Interface) {
    let lo = super::super::my_ip_interfaces(true)
        .into_iter()
        .find(|intf| intf.index == Some(index) && intf.ip().is_ipv4())
        .expect("loopback has an IPv4 address");
    let mut added = lo.clone();
    if let if_addrs::IfAddr::V4(v4) = &mut added.addr {
        v4.ip = ip;
    }
    (lo, added)
}

fn resends(daemon: &Zeroconf) -> usize {
    daemon
        .retransmissions
        .iter()
        .filter(|r| matches!(r.command, super::super::Command::RegisterResend(..)))
        .count()
}

/// Guards against a new address on an interface that stayed up counting as
/// a link change (PATCHES.md §12 before this patch): the interface's
/// verified records were forgotten and probed again, so for about 0.75 s
/// nothing of the service (PTR, SRV, TXT, the other addresses) was answered
/// there. RFC 6762 §8.4: the new address record is announced (twice, §8.3),
/// not probed; the host name is already ours.
#[test]
fn a_new_address_on_a_link_that_stayed_up_is_announced_without_silence() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "addr.local.", "1").enable_addr_auto());
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    daemon.retransmissions.clear();

    let added_ip = Ipv4Addr::new(127, 0, 0, 2);
    let (lo, added) = loopback_with(index, added_ip);
    daemon.add_interface(&added, &[lo, added.clone()]);

    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
    assert!(
        daemon.dns_registry_map[&index].probing.is_empty(),
        "nothing probed again"
    );
    assert!(ask(&mut daemon, index, &format!("box.{TY}"), RRType::SRV).is_some());
    let reply = ask(&mut daemon, index, "addr.local.", RRType::A).expect("an A reply");
    let addrs: Vec<IpAddr> = reply
        .answers()
        .iter()
        .filter_map(|r| r.any().downcast_ref::<DnsAddress>())
        .map(|a| a.address().to_ip_addr())
        .collect();
    assert!(
        addrs.contains(&IpAddr::V4(added_ip)) && addrs.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)),
        "both addresses answered: {:?}",
        addrs
    );
    assert_eq!(resends(&daemon), 1, "the second announcement is scheduled");
}

/// Guards against the §8.4 shortcut skipping a probe it needs: an address
/// that comes while the link is still probing (a dual-stack link coming
/// up) joins the probe of the host name, and nothing is announced before
/// it ends.
#[test]
fn an_address_added_while_the_link_probes_joins_the_probe() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "late.local.", "1").enable_addr_auto());
    finish_probes(&mut daemon, index);

    let added_ip = Ipv4Addr::new(127, 0, 0, 3);
    let (lo, added) = loopback_with(index, added_ip);
    daemon.my_intfs.remove(&index);
    daemon.add_interface(&lo, &[lo.clone()]);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Probing);
    daemon.add_interface(&added, &[lo, added.clone()]);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Probing);
    let probed = daemon.dns_registry_map[&index]
        .probing
        .get("late.local.")
        .expect("the host name is probed")
        .records
        .iter()
        .filter_map(|r| r.any().downcast_ref::<DnsAddress>())
        .any(|a| a.address().to_ip_addr() == IpAddr::V4(added_ip));
    assert!(probed, "the new address is in the host name's probe");
    finish_probes(&mut daemon, index);
    assert_eq!(status(&daemon, "box", index), ServiceStatus::Announced);
}

/// The host name `host` claimed by another box with an AAAA record only.
fn someone_else_has_host_v6(host: &str) -> DnsOutgoing {
    let mut out = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    out.add_answer_record(DnsAddress::new(
        host,
        RRType::AAAA,
        CLASS_IN | CLASS_CACHE_FLUSH,
        120,
        IpAddr::V6("fd00::99".parse().unwrap()),
        InterfaceId::default(),
    ));
    out
}

/// The renamed host of the registered instance `box`, once probing ends.
fn host_after_probing(daemon: &mut Zeroconf, index: u32) -> String {
    finish_probes(daemon, index);
    assert_eq!(status(daemon, "box", index), ServiceStatus::Announced);
    let reply = ask(daemon, index, &format!("box.{TY}"), RRType::SRV).expect("a reply");
    srv_host(&reply)
}

/// Guards against a stale answer renaming a host that has not asked yet
/// (RFC 6762 §8.1: "A conflicting Multicast DNS response received before
/// the first probe packet is sent MUST be silently ignored"); the same
/// answer after the first probe is a conflict.
#[test]
fn a_conflicting_response_before_the_first_probe_is_ignored_and_after_it_renames() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "early.local.", "1"));
    let theirs = incoming(&someone_else_has_host("early.local."), index);
    daemon.conflict_handler(&theirs, index);
    assert_eq!(host_after_probing(&mut daemon, index), "early.local.");

    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "early.local.", "1"));
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(&theirs, index);
    assert_eq!(host_after_probing(&mut daemon, index), "early-2.local.");
}

/// Guards against a name held by a record of another type passing as free
/// (RFC 6762 §8.1: the probe asks for type ANY, so any record with the
/// name answers it): an IPv4-only box probing `dual.local.` and an
/// IPv6-only box announcing it.
#[test]
fn a_record_of_another_type_under_the_probed_name_is_a_conflict() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "dual.local.", "1"));
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(
        &incoming(&someone_else_has_host_v6("dual.local."), index),
        index,
    );
    assert_eq!(host_after_probing(&mut daemon, index), "dual-2.local.");
}

/// Guards against a conflict missed for its letter case (RFC 6762 §16:
/// names compare without regard to case): `CLONE.local.` is `clone.local.`.
#[test]
fn a_conflict_in_other_letter_case_is_a_conflict() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "clone.local.", "1"));
    send_first_probes(&mut daemon, index);
    daemon.conflict_handler(
        &incoming(&someone_else_has_host("CLONE.local."), index),
        index,
    );
    assert_eq!(host_after_probing(&mut daemon, index), "clone-2.local.");
}

const META: &str = "_services._dns-sd._udp.local.";

/// A multicast meta-query (`_services._dns-sd._udp.local.` PTR) put to the
/// daemon: its answer waits out the §6 delay. Returns that answer's TTL.
fn pending_meta_answer(daemon: &mut Zeroconf, index: u32) -> u32 {
    daemon.delayed_responses.clear();
    let mut q = DnsOutgoing::new(FLAGS_QR_QUERY);
    q.add_question(META, RRType::PTR);
    let querier = (IpAddr::V4(Ipv4Addr::LOCALHOST), daemon.port).into();
    daemon.handle_query(incoming(&q, index), index, querier);
    assert_eq!(daemon.delayed_responses.len(), 1, "a shared answer waits");
    let answers = daemon.delayed_responses[0].out._answers();
    assert_eq!(answers.len(), 1, "{answers:?}");
    answers[0].get_record().get_ttl()
}

/// Another host's multicast answer: `META` PTR the test's service type.
fn meta_answer_from_another_host(ttl: u32, index: u32) -> DnsIncoming {
    let mut theirs = DnsOutgoing::new(FLAGS_QR_RESPONSE | FLAGS_AA);
    theirs.add_answer_record(DnsPointer::new(
        META,
        RRType::PTR,
        CLASS_IN,
        ttl,
        TY.to_string(),
    ));
    incoming(&theirs, index)
}

/// Guards against a meta-query drawing one identical multicast answer from
/// every agent on the LAN (RFC 6762 §7.4): a pending shared answer that
/// another host has just sent, with a TTL at least ours, is treated as
/// sent; one with a lower TTL, or heard over the other address family, is
/// not.
#[test]
fn a_pending_shared_answer_another_host_just_sent_is_not_sent_again() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "meta.local.", "1"));
    finish_probes(&mut daemon, index);
    // rlx patch: PATCHES.md §34: who sent it, and whether to the group.
    let other_v4: SocketAddr = (Ipv4Addr::new(127, 0, 0, 2), daemon.port).into();
    let other_v6: SocketAddr = ("::2".parse::<IpAddr>().unwrap(), daemon.port).into();

    let ttl = pending_meta_answer(&mut daemon, index);
    daemon.suppress_duplicate_answers(
        &meta_answer_from_another_host(ttl, index),
        index,
        other_v4,
        true,
    );
    assert_eq!(
        daemon.delayed_responses[0].out.answers_count(),
        0,
        "suppressed"
    );

    pending_meta_answer(&mut daemon, index);
    daemon.suppress_duplicate_answers(
        &meta_answer_from_another_host(ttl - 1, index),
        index,
        other_v4,
        true,
    );
    assert_eq!(
        daemon.delayed_responses[0].out.answers_count(),
        1,
        "a lower TTL does not count"
    );

    pending_meta_answer(&mut daemon, index);
    daemon.suppress_duplicate_answers(
        &meta_answer_from_another_host(ttl, index),
        index,
        other_v6,
        true,
    );
    assert_eq!(
        daemon.delayed_responses[0].out.answers_count(),
        1,
        "IPv6 is another audience"
    );
}

/// rlx patch: PATCHES.md §34. Guards against a stranger cancelling an
/// agent's pending multicast answer with copies of it that no listener
/// heard: sent to the agent's unicast address, or from a port other than
/// 5353 (not an mDNS response at all, RFC 6762 §6).
#[test]
fn a_pending_shared_answer_stays_when_its_copy_came_by_unicast_or_from_another_port() {
    let (mut daemon, index) = loopback_daemon();
    daemon.register_service(service("box", "meta.local.", "1"));
    finish_probes(&mut daemon, index);
    let other = Ipv4Addr::new(127, 0, 0, 2);

    let ttl = pending_meta_answer(&mut daemon, index);
    let from_5353: SocketAddr = (other, daemon.port).into();
    daemon.suppress_duplicate_answers(
        &meta_answer_from_another_host(ttl, index),
        index,
        from_5353,
        false,
    );
    assert_eq!(
        daemon.delayed_responses[0].out.answers_count(),
        1,
        "a copy sent to our unicast address"
    );

    daemon.suppress_duplicate_answers(
        &meta_answer_from_another_host(ttl, index),
        index,
        (other, 40000).into(),
        true,
    );
    assert_eq!(
        daemon.delayed_responses[0].out.answers_count(),
        1,
        "a copy to the group from another port"
    );
}
