//! **The instance table** — everything one browse (or a `watch`) has
//! heard, from either path, folded into one bounded table: instances by
//! label with their SRV, TXT, the interface first heard on and the early
//! rounds they answered; host names with their addresses. Records in; the
//! stop rules ([`super::stop`]) and the sightings ([`super::resolve`]) read
//! it out.

use super::browser::BrowserEvent;
use super::schedule::EARLY_ROUNDS;
use super::wire::{host_key, name_text, service_name, strip_service};
use crate::pipeline::prefer::{preferred, AddrCandidate};
use crate::sources::dnssd::{self, instance_label, routable, MAX_INSTANCES, MAX_TXT_BYTES};
use hickory_proto::op::Message;
use hickory_proto::rr::rdata::PTR;
use hickory_proto::rr::RData;
use mdns_sd::{ResolvedService, ScopedIp};
use rlx_net::iface::Iface;
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt;
use rlx_proto::txt::TxtError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// Most instances kept per source address. A host runs one agent, a few at
/// most; a third-party stack announcing thousands of bogus instances from one
/// address must not fill the table and crowd out the real agents that answer
/// after it. 64 leaves room for a host that legitimately runs several.
pub(crate) const MAX_INSTANCES_PER_SOURCE: usize = 64;

/// Most instances kept whose sender is unknown: those first heard on the
/// multicast path, which does not tell who sent an answer (mdns-sd reports
/// what a record claims, and the address an announcement names is the
/// announcer's claim, not its source). The per-source cap cannot apply to
/// them, so a separate cap keeps a multicast flood from filling the table
/// the same way. Real agents also answer the legacy queries, from their
/// own address, and get a sourced slot there.
pub(crate) const MAX_UNSOURCED: usize = 256;

/// Most packet sources remembered per instance (to tell whether the address
/// dialled is one that sent the announcement itself: see
/// [`Table::vouched`]). A real agent is heard from one or two addresses.
const MAX_SOURCES_PER_INSTANCE: usize = 4;

/// The SRV record of an instance.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Srv {
    pub(super) port: u16,
    /// The target host as announced (`box.local.`).
    pub(super) host: String,
}

/// What is known of an instance's TXT record.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Txt {
    /// The record's strings, within [`MAX_TXT_BYTES`], and what they
    /// decode to: decoded once, when the record arrives or changes, not
    /// at every snapshot (a continuous browse of hundreds of agents makes
    /// a snapshot of every instance at each refresh of any one of them).
    Strings(Vec<Vec<u8>>, Box<Result<NodeCaps, TxtError>>),
    /// A record of this many bytes, refused.
    TooBig(usize),
}

/// One announced instance, as far as it is known.
#[derive(Debug, Clone)]
pub(super) struct Instance {
    /// The instance name as announced.
    pub(super) label: String,
    pub(super) srv: Option<Srv>,
    pub(super) txt: Option<Txt>,
    /// Index of the interface it was first heard on.
    pub(super) heard_on: Option<usize>,
    /// Bit `r` set: answered early legacy round `r` (on any interface).
    pub(super) early: u32,
    /// The same per interface it answered on (interface index, rounds):
    /// an agent on two of this host's links answers each round once per
    /// link, and an early stop must not come between the two answers, or
    /// the address rule sees one link in one run and both in the next.
    pub(super) early_on: Vec<(usize, u32)>,
    /// When it first had SRV, TXT and a usable address.
    pub(super) complete_at: Option<Instant>,
    /// When it first had SRV, TXT and a routable address.
    pub(super) routable_at: Option<Instant>,
    /// Said goodbye (TTL 0) during the browse.
    pub(super) removed: bool,
    /// The source address whose share it was counted in (`None`: the
    /// unsourced share), given back when it is pruned.
    pub(super) slot: Option<IpAddr>,
    /// When a record of it was last heard (for [`Table::prune`]).
    pub(super) last_heard: Option<Instant>,
    /// The real sources of the packets that carried its records (at most
    /// [`MAX_SOURCES_PER_INSTANCE`]).
    pub(super) sources: Vec<IpAddr>,
    /// Address families it answered legacy queries on: [`V4_LEGACY`],
    /// [`V6_LEGACY`] (for [`Table::family_adds_nothing`]).
    pub(super) families: u8,
}

/// [`Instance::families`]: answered a legacy query over IPv4.
pub(super) const V4_LEGACY: u8 = 1;
/// [`Instance::families`]: answered a legacy query over IPv6.
pub(super) const V6_LEGACY: u8 = 2;

/// Everything heard during one browse, bounded (see the [`mdns`](super) docs).
pub(super) struct Table {
    pub(super) ifaces: Vec<Iface>,
    pub(super) instances: Vec<Instance>,
    /// Lowercased instance label -> index in `instances`.
    pub(super) index: HashMap<String, usize>,
    /// Host key -> (address, interface index) as heard.
    pub(super) hosts: HashMap<String, Vec<(IpAddr, usize)>>,
    /// Names ignored because a limit was reached.
    pub(super) over_limit: usize,
    /// Instances created per source address ([`MAX_INSTANCES_PER_SOURCE`]).
    pub(super) per_source: HashMap<IpAddr, usize>,
    /// Instances created without a source address ([`MAX_UNSOURCED`]).
    pub(super) unsourced: usize,
    /// Host names created per source address.
    pub(super) host_sources: HashMap<IpAddr, usize>,
    /// Host key -> the source address whose share it was counted in.
    pub(super) host_owner: HashMap<String, IpAddr>,
    /// Instances resolved since [`Table::take_resolved`] last ran.
    pub(super) newly_resolved: Vec<usize>,
    /// Bit `r` set: some instance answered legacy round `r`, so that query
    /// reached the network.
    pub(super) delivered: u64,
    /// Whether instances first heard on the multicast path count the
    /// address they announce as their source (see [`MAX_UNSOURCED`]).
    pub(super) multicast_by_claim: bool,
    /// Whether a resolution's addresses replace the ones its host was heard
    /// at before (a continuous browse), instead of adding to them (a
    /// one-shot browse). mdns-sd resolves with the host's whole address set
    /// as its cache holds it, stale records flushed (RFC 6762 §10.2: a
    /// cache-flush record replaces the older ones of its name and type), so
    /// a running agent's new DHCP lease replaces its old address; adding
    /// would keep the dead address for good and, the lower of the two, keep
    /// choosing it. A one-shot browse lasts a few seconds, starts with an
    /// empty cache, and also learns addresses from legacy replies that a
    /// resolution made before they arrived must not drop.
    pub(super) resolved_replaces: bool,
}

impl Table {
    pub(super) fn new(ifaces: Vec<Iface>) -> Self {
        Table {
            ifaces,
            instances: Vec::new(),
            index: HashMap::new(),
            hosts: HashMap::new(),
            over_limit: 0,
            per_source: HashMap::new(),
            unsourced: 0,
            host_sources: HashMap::new(),
            host_owner: HashMap::new(),
            newly_resolved: Vec::new(),
            delivered: 0,
            multicast_by_claim: true,
            resolved_replaces: false,
        }
    }

    /// The index of instance `label`, added if new and there is room: in the
    /// table, for its source address (`None`: heard by name only).
    pub(super) fn instance(&mut self, label: &str, source: Option<IpAddr>) -> Option<usize> {
        let key = label.to_lowercase();
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        let room = match source {
            Some(ip) => self.per_source.get(&ip).copied().unwrap_or(0) < MAX_INSTANCES_PER_SOURCE,
            None => self.unsourced < MAX_UNSOURCED,
        };
        if self.instances.len() >= MAX_INSTANCES || !room {
            self.over_limit += 1;
            return None;
        }
        match source {
            Some(ip) => *self.per_source.entry(ip).or_insert(0) += 1,
            None => self.unsourced += 1,
        }
        self.instances.push(Instance {
            label: label.to_string(),
            srv: None,
            txt: None,
            heard_on: None,
            early: 0,
            early_on: Vec::new(),
            complete_at: None,
            routable_at: None,
            removed: false,
            slot: source,
            last_heard: None,
            sources: Vec::new(),
            families: 0,
        });
        self.index.insert(key, self.instances.len() - 1);
        Some(self.instances.len() - 1)
    }

    /// Records an address of `host`, heard from `source`. New host names
    /// share the table like instances do: at most
    /// [`MAX_INSTANCES_PER_SOURCE`] per source address, so a flood of bogus
    /// host names cannot leave the real agents' hosts without an address.
    fn add_addr(&mut self, host: &str, ip: IpAddr, iface: usize, source: Option<IpAddr>) {
        let key = host_key(host);
        if !self.hosts.contains_key(&key) {
            let room = match source {
                Some(src) => {
                    self.host_sources.get(&src).copied().unwrap_or(0) < MAX_INSTANCES_PER_SOURCE
                }
                None => true,
            };
            if self.hosts.len() >= MAX_INSTANCES || !room {
                self.over_limit += 1;
                return;
            }
            if let Some(src) = source {
                *self.host_sources.entry(src).or_insert(0) += 1;
                self.host_owner.insert(key.clone(), src);
            }
        }
        let addrs = self.hosts.entry(key).or_default();
        dnssd::add_addr(addrs, (ip, iface));
    }

    /// The addresses a resolution gave `host` (address, interface): added
    /// to the ones known, or in place of them ([`Table::resolved_replaces`]).
    fn resolved_addrs(
        &mut self,
        host: &str,
        resolved: Vec<(IpAddr, usize)>,
        source: Option<IpAddr>,
    ) {
        if self.resolved_replaces && !resolved.is_empty() {
            if let Some(known) = self.hosts.get_mut(&host_key(host)) {
                known.retain(|a| resolved.contains(a));
            }
        }
        for (ip, k) in resolved {
            self.add_addr(host, ip, k, source);
        }
    }

    fn set_txt(&mut self, i: usize, strings: Vec<Vec<u8>>) {
        if matches!(&self.instances[i].txt, Some(Txt::Strings(known, _)) if *known == strings) {
            return;
        }
        let size: usize = strings.iter().map(|s| 1 + s.len()).sum();
        self.instances[i].txt = Some(if size > MAX_TXT_BYTES {
            Txt::TooBig(size)
        } else {
            let decoded = Box::new(rlx_proto::txt::decode(&strings));
            Txt::Strings(strings, decoded)
        });
    }

    /// Applies a legacy reply heard on interface `iface` to query `round`.
    /// Returns true if something new was learnt (an instance appeared or
    /// became resolved).
    #[cfg(test)]
    pub(super) fn apply_reply(
        &mut self,
        msg: &Message,
        iface: usize,
        round: usize,
        now: Instant,
    ) -> bool {
        self.apply_reply_from(msg, None, iface, round, now)
    }

    /// Folds a legacy reply from `src` (its source address) into the table.
    pub(super) fn apply_reply_from(
        &mut self,
        msg: &Message,
        src: Option<IpAddr>,
        iface: usize,
        round: usize,
        now: Instant,
    ) -> bool {
        let service = service_name();
        let before = self.progress();
        let mut answered: Vec<usize> = Vec::new();
        for rec in msg.answers().iter().chain(msg.additionals()) {
            let name = rec.name();
            match rec.data() {
                RData::PTR(PTR(target))
                    if name.num_labels() == service.num_labels() && service.zone_of(name) =>
                {
                    let Some(label) = instance_label(target, &service) else {
                        continue;
                    };
                    let label = String::from_utf8_lossy(&label);
                    if rec.ttl() == 0 {
                        // A goodbye removes what it names, and adds nothing.
                        if let Some(i) = self.lookup(&label) {
                            self.instances[i].removed = true;
                        }
                        continue;
                    }
                    let Some(i) = self.instance(&label, src) else {
                        continue;
                    };
                    // Announced again after a goodbye (a restart, or a
                    // goodbye someone else sent): live.
                    self.instances[i].removed = false;
                    answered.push(i);
                }
                RData::SRV(srv) => {
                    let Some(label) = instance_label(name, &service) else {
                        continue;
                    };
                    let Some(i) = self.instance(&String::from_utf8_lossy(&label), src) else {
                        continue;
                    };
                    self.instances[i].srv = Some(Srv {
                        port: srv.port(),
                        host: name_text(srv.target()),
                    });
                    answered.push(i);
                }
                RData::TXT(t) => {
                    let Some(label) = instance_label(name, &service) else {
                        continue;
                    };
                    let Some(i) = self.instance(&String::from_utf8_lossy(&label), src) else {
                        continue;
                    };
                    self.set_txt(i, t.txt_data().iter().map(|s| s.to_vec()).collect());
                    answered.push(i);
                }
                RData::A(a) => self.add_addr(&name_text(name), IpAddr::V4(a.0), iface, src),
                RData::AAAA(a) => self.add_addr(&name_text(name), IpAddr::V6(a.0), iface, src),
                _ => {}
            }
        }
        for &i in &answered {
            let inst = &mut self.instances[i];
            inst.last_heard = Some(now);
            if let Some(ip) = src {
                inst.families |= if ip.is_ipv4() { V4_LEGACY } else { V6_LEGACY };
                if !inst.sources.contains(&ip) && inst.sources.len() < MAX_SOURCES_PER_INSTANCE {
                    inst.sources.push(ip);
                }
            }
            inst.heard_on.get_or_insert(iface);
            if round < EARLY_ROUNDS {
                inst.early |= 1 << round;
                match inst.early_on.iter_mut().find(|(k, _)| *k == iface) {
                    Some((_, mask)) => *mask |= 1 << round,
                    None => inst.early_on.push((iface, 1 << round)),
                }
            }
        }
        if !answered.is_empty() && round < 64 {
            self.delivered |= 1 << round;
        }
        self.refresh(now);
        self.progress() != before
    }

    /// Applies an event of the multicast path. Returns true if something
    /// new was learnt.
    pub(super) fn apply_event(&mut self, ev: &BrowserEvent, now: Instant) -> bool {
        let before = self.progress();
        match ev {
            BrowserEvent::Found(fullname) => {
                if let Some(i) = strip_service(fullname).and_then(|l| self.instance(l, None)) {
                    self.instances[i].last_heard = Some(now);
                }
            }
            BrowserEvent::Removed(fullname) => {
                if let Some(i) = strip_service(fullname).and_then(|l| self.lookup(l)) {
                    self.instances[i].removed = true;
                }
            }
            BrowserEvent::Resolved(r) => self.apply_resolved(r, now),
        }
        self.refresh(now);
        self.progress() != before
    }

    pub(super) fn lookup(&self, label: &str) -> Option<usize> {
        self.index.get(&label.to_lowercase()).copied()
    }

    fn apply_resolved(&mut self, r: &ResolvedService, now: Instant) {
        let Some(label) = strip_service(&r.fullname) else {
            return;
        };
        // Who sent it is unknown here. With the legacy path running, every
        // real agent is also heard there from its own address, so the
        // multicast path shares the unsourced slots: otherwise a flood naming
        // a different address per bogus instance would pass for thousands of
        // sources (measured: a 10,000-instance flood kept 4096 instances and
        // held the browse's admission for 147 s). A continuous browse has no
        // legacy path and counts each announced address as a source.
        let source = if self.multicast_by_claim {
            r.addresses.iter().find_map(|a| match a {
                ScopedIp::V4(v4) => Some(IpAddr::V4(*v4.addr())),
                ScopedIp::V6(v6) => Some(IpAddr::V6(*v6.addr())),
                _ => None,
            })
        } else {
            None
        };
        let Some(i) = self.instance(label, source) else {
            return;
        };
        // Back after a goodbye (an agent restarted): live again.
        self.instances[i].removed = false;
        self.instances[i].last_heard = Some(now);
        if !r.host.is_empty() {
            self.instances[i].srv = Some(Srv {
                port: r.port,
                host: r.host.clone(),
            });
        }
        // mdns-sd resolves before the TXT record arrives, with empty
        // properties: that is "not yet known", not an empty record.
        let strings = txt::strings_of(&r.txt_properties);
        if !strings.is_empty() {
            self.set_txt(i, strings);
        }
        let mut first_iface = None;
        let mut resolved: Vec<(IpAddr, usize)> = Vec::new();
        for a in &r.addresses {
            let (ip, names): (IpAddr, Vec<&str>) = match a {
                ScopedIp::V4(v4) => (
                    IpAddr::V4(*v4.addr()),
                    v4.interface_ids()
                        .iter()
                        .map(|id| id.name.as_str())
                        .collect(),
                ),
                ScopedIp::V6(v6) => (IpAddr::V6(*v6.addr()), vec![v6.scope_id().name.as_str()]),
                _ => continue,
            };
            for name in names {
                if let Some(k) = self.ifaces.iter().position(|i| i.name == name) {
                    first_iface.get_or_insert(k);
                    resolved.push((ip, k));
                }
            }
        }
        self.resolved_addrs(&r.host, resolved, source);
        if let Some(k) = first_iface {
            self.instances[i].heard_on.get_or_insert(k);
        }
    }

    /// (instances heard, instances resolved): what "something new" means.
    fn progress(&self) -> (usize, usize) {
        let live = self.instances.iter().filter(|i| !i.removed);
        let mut heard = 0;
        let mut done = 0;
        for i in live {
            heard += 1;
            done += usize::from(i.complete_at.is_some());
        }
        (heard, done)
    }

    /// The address chosen for instance `i` and the interface it goes with:
    /// among every address its host was heard at, on every interface, the
    /// one [`crate::pipeline::prefer::preferred`] picks, with "shared link" meaning on
    /// a subnet of the interface it was heard on. Which interface answered
    /// first takes no part, so an agent on two of this host's links gets the
    /// same address in every run. Loopback counts only
    /// when heard on a loopback interface (a node on another host that
    /// announces 127.0.0.1 is misconfigured, not reachable there).
    pub(super) fn chosen(&self, i: usize) -> Option<(IpAddr, usize)> {
        let srv = self.instances[i].srv.as_ref()?;
        let addrs = self.hosts.get(&host_key(&srv.host))?;
        let usable: Vec<(IpAddr, usize)> = addrs
            .iter()
            .copied()
            .filter(|(ip, k)| !ip.is_loopback() || self.ifaces[*k].is_loopback())
            .collect();
        let cands: Vec<AddrCandidate> = usable
            .iter()
            .map(|(ip, k)| AddrCandidate::new(*ip, self.ifaces[*k].on_subnet(ip)))
            .collect();
        preferred(&cands).map(|j| usable[j])
    }

    /// Stamps instances that just became resolved.
    fn refresh(&mut self, now: Instant) {
        for i in 0..self.instances.len() {
            let inst = &self.instances[i];
            if inst.routable_at.is_some() || inst.srv.is_none() || inst.txt.is_none() {
                continue;
            }
            let Some((ip, _)) = self.chosen(i) else {
                continue;
            };
            let inst = &mut self.instances[i];
            if inst.complete_at.is_none() {
                inst.complete_at = Some(now);
                self.newly_resolved.push(i);
            }
            if routable(&ip) {
                inst.routable_at = Some(now);
            }
        }
    }

    /// Whether the address chosen for instance `i` is the real source of a
    /// packet that carried its records: the machine there spoke for itself,
    /// so dialling it is no favour to whoever announced it.
    pub(super) fn vouched(&self, i: usize) -> bool {
        self.chosen(i)
            .is_some_and(|(ip, _)| self.instances[i].sources.contains(&ip))
    }

    /// Drops the instances that said goodbye or were last heard before
    /// `stale_before`, and the host names no remaining instance points
    /// at, giving their shares back to their sources: a continuous browse
    /// keeps only what is alive, so the bounds above hold for what is
    /// announced now, not for everything ever heard. Returns how many
    /// instances were dropped. O(table); run it at most every second or so.
    pub(super) fn prune(&mut self, stale_before: Instant) -> usize {
        let before = self.instances.len();
        self.instances
            .retain(|i| !i.removed && i.last_heard.is_none_or(|t| t >= stale_before));
        let dropped = before - self.instances.len();
        if dropped == 0 {
            return 0;
        }
        self.index = self
            .instances
            .iter()
            .enumerate()
            .map(|(k, i)| (i.label.to_lowercase(), k))
            .collect();
        self.newly_resolved.clear();
        self.per_source.clear();
        self.unsourced = 0;
        for i in &self.instances {
            match i.slot {
                Some(ip) => *self.per_source.entry(ip).or_insert(0) += 1,
                None => self.unsourced += 1,
            }
        }
        let wanted: std::collections::HashSet<String> = self
            .instances
            .iter()
            .filter_map(|i| i.srv.as_ref().map(|s| host_key(&s.host)))
            .collect();
        self.hosts.retain(|k, _| wanted.contains(k));
        self.host_owner.retain(|k, _| wanted.contains(k));
        self.host_sources.clear();
        for src in self.host_owner.values() {
            *self.host_sources.entry(*src).or_insert(0) += 1;
        }
        dropped
    }

    /// Instances heard and not gone.
    pub(super) fn heard(&self) -> usize {
        self.instances.iter().filter(|i| !i.removed).count()
    }

    /// Instances first resolved after `point`.
    pub(super) fn late(&self, point: Instant) -> usize {
        self.instances
            .iter()
            .filter(|i| !i.removed && i.complete_at.is_some_and(|t| t > point))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::mdns::fixtures::eth0;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    #[test]
    fn the_table_stops_growing_at_its_limit_and_counts_the_rest() {
        let mut t = Table::new(vec![eth0()]);
        // Many sources, a few instances each: only the global cap applies.
        for i in 0..MAX_INSTANCES + 10 {
            let src = IpAddr::V4(Ipv4Addr::from(0x0a09_0000 + (i / 8) as u32));
            t.instance(&format!("n{i}"), Some(src));
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES);
        assert_eq!(t.over_limit, 10);
        assert!(
            t.instance("n0", None).is_some(),
            "known names still resolve"
        );
    }

    /// A flood of bogus instances from one host must not crowd out the real
    /// agents that answer after it.
    #[test]
    fn a_flood_from_one_address_cannot_fill_the_table() {
        let mut t = Table::new(vec![eth0()]);
        let flooder = IpAddr::V4(Ipv4Addr::new(10, 9, 1, 66));
        for i in 0..10_000 {
            t.instance(&format!("bogus{i}"), Some(flooder));
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES_PER_SOURCE);
        for i in 0..10_000 {
            t.instance(&format!("named{i}"), None);
        }
        assert_eq!(t.instances.len(), MAX_INSTANCES_PER_SOURCE + MAX_UNSOURCED);
        let real = IpAddr::V4(Ipv4Addr::new(10, 9, 1, 5));
        assert!(
            t.instance("real-agent", Some(real)).is_some(),
            "room is left for real agents"
        );
        assert_eq!(
            t.over_limit,
            2 * 10_000 - MAX_INSTANCES_PER_SOURCE - MAX_UNSOURCED
        );
    }

    /// Guards against a continuous browse's table never dropping entries:
    /// instances that said goodbye or went unheard are pruned, and their
    /// source's share is given back.
    #[test]
    fn pruning_drops_the_gone_and_the_stale_and_gives_their_shares_back() {
        let mut t = Table::new(vec![eth0()]);
        let src = IpAddr::V4(Ipv4Addr::new(10, 9, 1, 66));
        let t0 = Instant::now();
        for i in 0..MAX_INSTANCES_PER_SOURCE {
            let k = t.instance(&format!("n{i}"), Some(src)).unwrap();
            t.instances[k].last_heard = Some(t0);
        }
        assert!(t.instance("one-more", Some(src)).is_none(), "share used up");
        t.instances[0].removed = true;
        let later = t0 + Duration::from_secs(1);
        t.instances[1].last_heard = Some(later);
        assert_eq!(
            t.prune(t0),
            1,
            "the goodbye only: the others are not stale yet"
        );
        assert!(
            t.instance("one-more", Some(src)).is_some(),
            "its slot is free"
        );
        assert_eq!(
            t.prune(later),
            MAX_INSTANCES_PER_SOURCE - 2,
            "all unheard since"
        );
        assert_eq!(t.per_source.get(&src), Some(&2), "n1 and one-more");
        assert_eq!(t.lookup("n1"), Some(0), "the index follows");
    }

    /// Guards against a moved machine missed by `watch`: a running agent's new
    /// lease was added beside the dead address, the lower of the two was
    /// still chosen, and its health check then failed: a `left` instead of
    /// an `updated`.
    #[test]
    fn in_a_continuous_browse_a_resolution_replaces_the_hosts_old_addresses() {
        use crate::sources::mdns::fixtures::{reply, GOOD};
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        for (replaces, want) in [(true, "10.9.1.200"), (false, "10.9.1.5")] {
            let mut t = Table::new(vec![eth0()]);
            t.resolved_replaces = replaces;
            t.apply_reply(
                &reply(7, "box", "box.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                0,
                Instant::now(),
            );
            t.resolved_addrs("box.local.", vec![(ip("10.9.1.200"), 0)], None);
            let i = t.lookup("box").unwrap();
            assert_eq!(
                t.chosen(i).map(|c| c.0),
                Some(ip(want)),
                "replaces: {replaces}"
            );
        }
        // A resolution without addresses (TXT first) forgets none.
        let mut t = Table::new(vec![eth0()]);
        t.resolved_replaces = true;
        t.apply_reply(
            &reply(7, "box", "box.local.", 9100, GOOD, &["10.9.1.5"]),
            0,
            0,
            Instant::now(),
        );
        t.resolved_addrs("box.local.", Vec::new(), None);
        assert_eq!(
            t.chosen(t.lookup("box").unwrap()).map(|c| c.0),
            Some(ip("10.9.1.5"))
        );
    }

    /// Guards against an address that depends on who answered first: an agent on two of this host's links
    /// got the address of whichever link answered first, so it alternated.
    #[test]
    fn an_agent_on_two_links_gets_the_same_address_whichever_link_answered_first() {
        use crate::sources::mdns::fixtures::{reply, GOOD};
        let mut eth1 = eth0();
        eth1.name = "eth1".into();
        eth1.index = 3;
        eth1.addrs = vec!["10.0.77.1/24".parse().unwrap()];
        let on = |iface: usize| {
            let ip = ["10.9.1.5", "10.0.77.5"][iface];
            reply(7, "box", "box.local.", 9100, GOOD, &[ip])
        };
        for order in [[0, 1], [1, 0]] {
            let mut t = Table::new(vec![eth0(), eth1.clone()]);
            let t0 = Instant::now();
            for k in order {
                t.apply_reply(&on(k), k, 0, t0);
            }
            let i = t.lookup("box").unwrap();
            assert_eq!(
                t.chosen(i),
                Some(("10.0.77.5".parse().unwrap(), 1)),
                "heard on {order:?} first"
            );
        }
    }
}
