//! rlx patch: the responder's state machine where mdns-sd 0.21.7 left
//! RFC 6762 out: conflicts found after probing (§9), the probe back-off
//! (§8.1), probing again on a link change (§8, §8.3) and updates that only
//! re-announce (§8.4), among them a new address on a link that stayed up.
//! See PATCHES.md, sections 10-13.

use super::{prepare_announce, Zeroconf};
use crate::dns_parser::{ip_address_rr_type, RRType, CLASS_CACHE_FLUSH, CLASS_IN};
use crate::dns_parser::{DnsAddress, DnsIncoming, DnsRecordBox, DnsRecordExt, DnsSrv, DnsTxt};
use crate::log::debug;
use crate::service_info::{DnsRegistry, MyIntf, ServiceInfo, ServiceStatus};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

impl Zeroconf {
    /// rlx patch: RFC 6762 §7.4 duplicate answer suppression: "If a host is
    /// planning to send an answer, and it sees another host on the network
    /// send a response message containing the same answer record, and the
    /// TTL in that record is not less than the TTL this host would have
    /// given, then this host SHOULD treat its own answer as having been
    /// sent". The answers that wait out the §6 delay are the shared ones
    /// (PTR), which every agent gives alike to a meta-query
    /// (`_services._dns-sd._udp.local.` PTR `_rlx._tcp.local.`): on a LAN
    /// of 200 agents, one Bonjour or avahi browser's meta-query drew 200
    /// identical multicast answers. Now the first to be sent cancels the
    /// others' pending copies, on the same interface and address family
    /// (an IPv4 answer does not reach an IPv6-only listener).
    ///
    /// Only a response the link heard counts: one sent to the mDNS group
    /// (`to_group`) from port 5353 (`from`). A response sent to our
    /// unicast address reached none of the listeners our answer is for,
    /// and one from another port is no mDNS response (§6: ignored), so
    /// neither may cancel ours: upstream's rule counted any, and a
    /// stranger's unicast copies of an agent's answer kept it from the link.
    /// The family of `from` matters too: an answer heard over IPv4 does not
    /// reach an IPv6-only listener.
    pub(super) fn suppress_duplicate_answers(
        &mut self,
        msg: &DnsIncoming,
        if_index: u32,
        from: SocketAddr,
        to_group: bool,
    ) {
        if !to_group || from.port() != self.port {
            return;
        }
        let is_ipv4 = from.is_ipv4();
        for pending in self
            .delayed_responses
            .iter_mut()
            .filter(|p| p.if_index == if_index && p.is_ipv4 == is_ipv4)
        {
            let before = pending.out.answers_count();
            pending.out.retain_answers(|ours| {
                !msg.answers().iter().any(|theirs| {
                    theirs.matches(ours.as_ref())
                        && theirs.get_record().get_ttl() >= ours.get_record().get_ttl()
                })
            });
            let dropped = before - pending.out.answers_count();
            if dropped > 0 {
                debug!(
                    "{dropped} pending answer(s) on intf {if_index} already sent by another host: suppressed (RFC 6762 §7.4)"
                );
            }
        }
    }

    /// rlx patch: RFC 6762 §8.4: re-registering a service under the same
    /// name and host (to change its TXT, or its port) is an update, not a new
    /// service: "there is no need to repeat the Probing step". The records
    /// already verified stay verified and answered; the changed SRV/TXT rdata
    /// replaces the old in the verified set, so the announcements that follow
    /// (two, §8.3) carry it at once. mdns-sd probed the new TXT instead, and
    /// answered nothing of the service (PTR, SRV, A) for the ~1 s it took.
    ///
    /// Changes `info` and the registries in place; the caller announces.
    /// A registration that changes the host name is not an update: its
    /// address records are new and are probed as usual.
    pub(super) fn prepare_update(&mut self, info: &mut ServiceInfo) {
        let Some(old) = self.my_services.get(&info.get_fullname().to_lowercase()) else {
            return;
        };
        if !old.get_hostname().eq_ignore_ascii_case(info.get_hostname())
            || old.get_type() != info.get_type()
            || old.get_subtype() != info.get_subtype()
            || !info.requires_probe()
        {
            return;
        }
        info.carry_state_from(old);
        for (if_index, registry) in self.dns_registry_map.iter_mut() {
            if info.get_status(*if_index) != ServiceStatus::Announced {
                continue;
            }
            let (srv, txt) = unique_service_records(info, registry);
            let key = srv.get_name().to_string();
            let records = registry.active.entry(key).or_default();
            records.retain(|r| !matches!(r.get_type(), RRType::SRV | RRType::TXT));
            records.push(srv);
            records.push(txt);
            debug!(
                "update of {}: re-announcing without probing (RFC 6762 §8.4)",
                info.get_fullname()
            );
        }
    }

    /// rlx patch: RFC 6762 §9: "If a host receives a response containing a
    /// record that conflicts with one of its unique records [same name,
    /// rrtype and rrclass, different rdata] ... the host MUST immediately
    /// reset its conflicted records to probing state, and then begin probing
    /// for them again". mdns-sd only looked for conflicts while probing.
    ///
    /// Not conflicts: goodbyes (TTL 0, parsed as 1), our own records (matching rdata, or an
    /// address of one of our interfaces: a host with two NICs on one link
    /// hears its other NIC's announcement), names still being probed (the
    /// probing path, `conflict_handler`, owns them).
    pub(super) fn late_conflict_handler(&mut self, msg: &DnsIncoming, if_index: u32) {
        let own_addrs: HashSet<IpAddr> = self
            .my_intfs
            .values()
            .flat_map(|intf| intf.addrs.iter().map(|a| a.ip()))
            .collect();
        let Some(registry) = self.dns_registry_map.get(&if_index) else {
            return;
        };
        let mut conflicted: Vec<String> = Vec::new();
        for answer in msg.answers().iter().chain(msg.additionals()) {
            if let Some(key) = conflicting_key(registry, answer, &own_addrs) {
                debug!(
                    "conflict after probing: {} {} PEER: {} (RFC 6762 §9): probing again",
                    answer.get_type(),
                    answer.get_name(),
                    answer.rdata_print()
                );
                if !conflicted.contains(&key) {
                    conflicted.push(key);
                }
            }
        }
        if conflicted.is_empty() {
            return;
        }
        let start = match self.dns_registry_map.get_mut(&if_index) {
            Some(registry) => registry.conflict_probe_start(Instant::now()),
            None => return,
        };
        self.reprobe_on_intf(if_index, &conflicted, start);
    }

    /// rlx patch: RFC 6762 §9: moves the verified records named `names`
    /// back to probing on `if_index`, and every service that owns one of them
    /// back to `Probing` there, with probes starting no earlier than `start`
    /// (the §8.1 back-off). When the probes end, `probing_handler` announces
    /// (twice) under the same names, or the probing conflict path renames.
    fn reprobe_on_intf(&mut self, if_index: u32, names: &[String], start: Instant) {
        let Some(intf) = self.my_intfs.get(&if_index) else {
            return;
        };
        let Some(registry) = self.dns_registry_map.get_mut(&if_index) else {
            return;
        };
        registry
            .active
            .retain(|key, _| !names.iter().any(|n| n.eq_ignore_ascii_case(key)));
        let before: HashSet<String> = registry.probing.keys().cloned().collect();
        let families = [self.ipv4_sock.is_some(), self.ipv6_sock.is_some()];
        for info in self.my_services.values_mut() {
            if !info.requires_probe() || !owns_any(registry, info, names) {
                continue;
            }
            info.set_status(if_index, ServiceStatus::Probing);
            for (is_ipv4, has_sock) in [(true, families[0]), (false, families[1])] {
                if has_sock {
                    // Creates the probes; nothing is sent until they end.
                    let _ = prepare_announce(info, intf, registry, is_ipv4);
                }
            }
        }
        // The new probes start no earlier than `start`; each needs a timer
        // at its first send, or it would wait for an unrelated wake-up.
        registry.new_timers.clear();
        for (key, probe) in registry.probing.iter_mut() {
            if before.contains(key) {
                continue;
            }
            if probe.start_time < start {
                probe.start_time = start;
                probe.next_send = start;
            }
            self.timers.add(probe.next_send);
        }
    }
}

/// rlx patch: RFC 6762 §8, §8.3: on a link change ("a network interface
/// Link Change event", an address added) the records must be probed and
/// announced again, "the two startup steps". mdns-sd kept them verified in
/// the interface's registry across a link down/up and announced once, without
/// probing and without the second announcement. Forgetting the verified
/// records of the daemon-managed (`addr_auto`) services on that interface
/// makes the announcement that follows go through probing, whose end
/// announces twice.
pub(super) fn forget_verified_on_link_change(
    registry: &mut DnsRegistry,
    services: &HashMap<String, ServiceInfo>,
) {
    for info in services.values() {
        if !info.is_addr_auto() || !info.requires_probe() {
            continue;
        }
        let names = [
            registry.resolve_name(info.get_fullname()).to_string(),
            registry.resolve_name(info.get_hostname()).to_string(),
        ];
        registry
            .active
            .retain(|key, _| !names.iter().any(|n| n.eq_ignore_ascii_case(key)));
    }
}

/// rlx patch: RFC 6762 §8.4: "if any of a host's IP addresses change, it
/// MUST re-announce those address records. The host does not need to repeat
/// the Probing step because it has already established unique ownership of
/// that name." Probing is of a name (§8.1, §8.2: one question per name, all
/// its records in the Authority section), and the host name is ours once its
/// address records on this interface are verified. So a new address `ip` on
/// `intf`, an interface that stayed up (a second IPv4 address, a DHCP
/// renewal, an RFC 4941 temporary IPv6 address, IPv6 coming up after DAD), is
/// verified at once: the announcement that follows carries it, and the
/// service stays answered on that interface. mdns-sd counted every new
/// address as a link change (PATCHES.md §12) and probed it, silencing the
/// whole service there for about 0.75 s. A host that does hold that address
/// under our name is still found: its answer is a late conflict (§9,
/// `late_conflict_handler`).
///
/// Does nothing unless `info` is announced on `intf` and its (possibly
/// renamed) host name has verified records there; otherwise the address
/// joins the usual probe. Returns whether it verified the record.
pub(super) fn verify_added_address(
    registry: &mut DnsRegistry,
    info: &ServiceInfo,
    intf: &MyIntf,
    ip: IpAddr,
) -> bool {
    if !info.requires_probe() || info.get_status(intf.index) != ServiceStatus::Announced {
        return false;
    }
    let on_intf = if ip.is_ipv4() {
        info.get_addrs_on_my_intf_v4(intf)
    } else {
        info.get_addrs_on_my_intf_v6(intf)
    };
    if !on_intf.contains(&ip) {
        return false;
    }
    let hostname = registry.resolve_name(info.get_hostname()).to_string();
    let Some(records) = registry
        .active
        .iter_mut()
        .find(|(key, _)| key.eq_ignore_ascii_case(&hostname))
        .map(|(_, records)| records)
    else {
        return false;
    };
    // Built as `prepare_announce` builds it, so that it finds it verified.
    let mut record = DnsAddress::new(
        info.get_hostname(),
        ip_address_rr_type(&ip),
        CLASS_IN | CLASS_CACHE_FLUSH,
        info.get_host_ttl(),
        ip,
        intf.into(),
    );
    if hostname != info.get_hostname() {
        record.get_record_mut().set_new_name(hostname.clone());
    }
    if !records.iter().any(|r| record.matches(r.as_ref())) {
        debug!(
            "new address {ip} of {hostname} on {}: announcing without probing (RFC 6762 §8.4)",
            intf.name
        );
        records.push(record.boxed());
    }
    true
}

/// Whether `info` owns (under its current, possibly renamed, names) one of
/// `names`.
fn owns_any(registry: &DnsRegistry, info: &ServiceInfo, names: &[String]) -> bool {
    let fullname = registry.resolve_name(info.get_fullname());
    let hostname = registry.resolve_name(info.get_hostname());
    names
        .iter()
        .any(|n| n.eq_ignore_ascii_case(fullname) || n.eq_ignore_ascii_case(hostname))
}

/// The key in `registry.active` of the verified record that `answer`
/// conflicts with, if it does (see `late_conflict_handler`).
fn conflicting_key(
    registry: &DnsRegistry,
    answer: &DnsRecordBox,
    own_addrs: &HashSet<IpAddr>,
) -> Option<String> {
    let ty = answer.get_type();
    if !matches!(ty, RRType::SRV | RRType::TXT | RRType::A | RRType::AAAA)
        // A goodbye (TTL 0) is parsed as TTL 1 (RFC 6762 §10.1).
        || answer.get_record().get_ttl() <= 1
    {
        return None;
    }
    let name = answer.get_name();
    if registry
        .probing
        .keys()
        .any(|k| k.eq_ignore_ascii_case(name))
    {
        return None;
    }
    let (key, records) = registry
        .active
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))?;
    let mut same_type = records
        .iter()
        .filter(|r| r.get_type() == ty && r.get_class() == answer.get_class())
        .peekable();
    same_type.peek()?;
    if same_type.any(|r| r.rrdata_match(answer.as_ref())) {
        return None;
    }
    if let Some(addr) = answer.any().downcast_ref::<DnsAddress>() {
        if own_addrs.contains(&addr.address().to_ip_addr()) {
            return None;
        }
    }
    Some(key.clone())
}

/// The SRV and TXT records of `info` as `prepare_announce` builds them
/// (under the renamed names, if probing renamed them).
fn unique_service_records(
    info: &ServiceInfo,
    registry: &DnsRegistry,
) -> (DnsRecordBox, DnsRecordBox) {
    let hostname = registry.resolve_name(info.get_hostname()).to_string();
    let mut srv = DnsSrv::new(
        info.get_fullname(),
        CLASS_IN | CLASS_CACHE_FLUSH,
        info.get_host_ttl(),
        info.get_priority(),
        info.get_weight(),
        info.get_port(),
        hostname,
    );
    let mut txt = DnsTxt::new(
        info.get_fullname(),
        CLASS_IN | CLASS_CACHE_FLUSH,
        info.get_other_ttl(),
        info.generate_txt(),
    );
    if let Some(new_name) = registry.name_changes.get(info.get_fullname()) {
        srv.get_record_mut().set_new_name(new_name.to_string());
        txt.get_record_mut().set_new_name(new_name.to_string());
    }
    (srv.boxed(), txt.boxed())
}

#[cfg(test)]
#[path = "responder_state_tests.rs"]
mod tests;
