//! **The one-shot browse** — both paths run into one instance table until
//! the window ends or a stop rule holds. Each pass of the loop is a named
//! step: pass on what resolved, test the stop rules, send what is due
//! (legacy rounds, standard queries, ARP announcements), then sleep until
//! the next thing is due or a datagram or multicast event arrives.

use super::browser::{BrowserEvent, MdnsBrowser};
use super::options::{AnsweredElsewhere, BrowseOptions, MdnsError};
use super::schedule::{
    legacy_offset, legacy_round_wanted, matured, ms, silent_floor, ARP_ANNOUNCE_MS,
    EARLY_FLOOR_WITHOUT_ARP, EARLY_FLOOR_WITH_ARP, EARLY_ROUNDS, EXTRA_QM_MS, LEGACY_BURST_MS,
    MULTICAST_DECISION, QUIET, ROUND_WAIT, STOP_RISK,
};
use super::sockets::{
    open_sockets, read_loop, send_standard_query, Datagram, LegacySocket, READ_QUEUE,
};
use super::stats::{describe_attempt, Browse, BrowseStats, StopRule};
use super::table::Table;
use super::wire::{
    legacy_query, lenient_message, on_link, parse_reply, standard_queries, MDNS_PORT,
};
use crate::sighting::{Attempt, Discovery, Problem, Source};
use hickory_proto::op::Message;
use rlx_net::iface::{self, Iface};
use rlx_net::ndp::NdpSocket;
use rlx_net::neighbour::ArpSocket;
use rlx_net::netguard;
use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The mDNS source for the pipeline: [`browse`], with a failure to browse at
/// all reported as a [`Problem`] (other sources go on).
pub(crate) async fn discover(opts: &BrowseOptions, started: Instant) -> Discovery {
    match browse(opts, started).await {
        Ok(b) => b.discovery,
        Err(e) => {
            let mut d = Discovery::default();
            d.problems
                .push(Problem::new(Source::Mdns, "mDNS browse", e.to_string()));
            d.attempts.push(Attempt {
                source: Source::Mdns,
                what: format!("mDNS browse of {SERVICE_TYPE}: could not start ({e})"),
                elapsed_ms: 0,
                answered: 0,
                stopped_early: None,
                late: None,
            });
            d
        }
    }
}
/// Browses `_rlx._tcp` once (docs/protocol.md says what it sends) and returns what it found.
///
/// Checks the network-namespace guard before any socket exists. Fails only
/// when nothing can be browsed at all; everything per node is a [`Problem`].
pub async fn browse(opts: &BrowseOptions, started: Instant) -> Result<Browse, MdnsError> {
    let mut run = Run::open(opts)?;
    run.listen(opts, started).await;
    Ok(run.finish(opts, started))
}

/// One browse in progress: its sockets and paths, the table, and where the
/// schedule stands.
struct Run {
    t0: Instant,
    deadline: Instant,
    socks: Vec<LegacySocket>,
    browser: Option<MdnsBrowser>,
    /// Announcers of our own address (gratuitous ARP, unsolicited Neighbor
    /// Advertisements), one per interface and family where this process may.
    kickers: Vec<Kicker>,
    rx: mpsc::Receiver<Datagram>,
    readers: JoinSet<()>,
    table: Table,
    stats: BrowseStats,
    /// Legacy query IDs are `base_id + round`.
    base_id: u16,
    /// Query ID -> legacy round.
    rounds: HashMap<u16, usize>,
    /// Legacy rounds sent.
    round: usize,
    next_qm: usize,
    next_kick: usize,
    /// When an early stop first becomes possible.
    early_point: Instant,
    /// Earliest stop by the `dns_sd` rule ([`silent_floor`]).
    silent_point: Instant,
    /// When something new was last learnt.
    last_change: Instant,
    /// Early stop needs legacy queries; without sockets it cannot be judged.
    early_possible: bool,
    /// Told when `dns_sd` answers; `None` once it can tell nothing more.
    elsewhere: Option<AnsweredElsewhere>,
    /// When `dns_sd` answered, and with how many sightings.
    answered_elsewhere: Option<(Instant, usize)>,
}

/// RFC 4861 §7.2.6's MAX_NEIGHBOR_ADVERTISEMENT: unsolicited Neighbor
/// Advertisements of one address, at most (the first of the ARP schedule's
/// times; the ARP announcements go on).
const MAX_UNSOLICITED_NA: usize = 3;

/// What woke the loop.
enum Wake {
    Timer,
    Datagram(Option<Datagram>),
    Event(Option<BrowserEvent>),
    /// What `dns_sd` said; `None` when it can say nothing more.
    Elsewhere(Option<Option<(Instant, usize)>>),
}

/// The next word from `dns_sd`, or never when there is none to hear.
async fn answered(rx: &mut Option<AnsweredElsewhere>) -> Option<Option<(Instant, usize)>> {
    match rx {
        Some(rx) => match rx.changed().await {
            Ok(()) => Some(*rx.borrow_and_update()),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}

impl Run {
    /// Checks the guard, picks the interfaces, opens the sockets and the
    /// multicast path, and starts the socket readers.
    fn open(opts: &BrowseOptions) -> Result<Run, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let ifaces = iface::select(&opts.interfaces)?;
        if ifaces.is_empty() {
            return Err(MdnsError::NoInterface {
                available: iface::describe(&iface::all_interfaces()?),
            });
        }
        let t0 = Instant::now();
        let names: Vec<String> = ifaces.iter().map(|i| i.name.clone()).collect();
        let (socks, socket_errors) = open_sockets(&ifaces);
        // With legacy sockets the multicast path waits for MULTICAST_DECISION
        // (a light browse); without them it is the only path.
        let started = if socks.is_empty() {
            MdnsBrowser::start(&ifaces)
        } else {
            MdnsBrowser::start_quiet(&ifaces)
        };
        let browser = match started {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!("mDNS multicast path unavailable, legacy queries only: {e}");
                if socks.is_empty() {
                    return Err(MdnsError::NoPath {
                        interfaces: names.join(", "),
                        reasons: format!("{}; daemon: {e}", socket_errors.join("; ")),
                    });
                }
                None
            }
        };
        let stats = BrowseStats {
            service: SERVICE_TYPE.into(),
            interfaces: names.clone(),
            socket_errors,
            multicast_error: browser
                .is_none()
                .then(|| "mdns-sd did not start (see the log)".to_string()),
            window_ms: opts.browse.as_millis() as u64,
            multicast_begun_ms: browser.as_ref().filter(|b| b.begun()).map(|_| 0),
            ..BrowseStats::default()
        };

        let (tx, rx) = mpsc::channel::<Datagram>(READ_QUEUE);
        let mut readers = JoinSet::new();
        for (k, s) in socks.iter().enumerate() {
            readers.spawn(read_loop(k, s.sock.clone(), tx.clone()));
        }
        drop(tx);

        let mut id_bytes = [0u8; 2];
        let _ = getrandom::fill(&mut id_bytes);
        let mut table = Table::new(ifaces);
        table.multicast_by_claim = socks.is_empty();
        let (kickers, every_iface) = Kicker::open_all(&table.ifaces);
        // The short floor holds only where a lost neighbour exchange can be
        // repaired on every interface: IPv4 by ARP, IPv6 by NDP.
        let short_floor = !kickers.is_empty() && every_iface;
        let floor = if short_floor {
            EARLY_FLOOR_WITH_ARP
        } else {
            EARLY_FLOOR_WITHOUT_ARP
        };
        let early_point =
            t0 + (Duration::from_millis(LEGACY_BURST_MS[EARLY_ROUNDS - 1]) + QUIET).max(floor);
        let silent_point = t0 + silent_floor(short_floor);
        let early_possible = opts.early_stop && !socks.is_empty();
        Ok(Run {
            t0,
            deadline: t0 + opts.browse,
            socks,
            browser,
            kickers,
            rx,
            readers,
            table,
            stats,
            base_id: u16::from_be_bytes(id_bytes),
            rounds: HashMap::new(),
            round: 0,
            next_qm: 0,
            next_kick: 0,
            early_point,
            silent_point,
            last_change: t0,
            early_possible,
            elsewhere: opts.elsewhere.clone(),
            answered_elsewhere: None,
        })
    }

    /// The loop: until the window ends or a stop rule holds.
    async fn listen(&mut self, opts: &BrowseOptions, started: Instant) {
        loop {
            self.pass_on_resolved(opts, started);
            let now = Instant::now();
            if self.stop_early(now) || now >= self.deadline {
                break;
            }
            self.send_legacy_rounds(now).await;
            self.begin_multicast(now);
            self.send_standard_queries(now);
            self.announce_arp(now);
            let wake = self.next_wake(now);
            let woke = tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => Wake::Timer,
                d = self.rx.recv() => Wake::Datagram(d),
                ev = next_event(&mut self.browser) => Wake::Event(ev),
                more = answered(&mut self.elsewhere) => Wake::Elsewhere(more),
            };
            match woke {
                Wake::Timer | Wake::Datagram(None) => {}
                Wake::Elsewhere(Some(a)) => self.answered_elsewhere = a,
                Wake::Elsewhere(None) => self.elsewhere = None,
                Wake::Datagram(Some(d)) => self.on_datagram(d),
                Wake::Event(ev) => self.on_event(ev),
            }
        }
    }

    /// Tells [`BrowseOptions::on_resolved`] of the instances resolved since
    /// the last pass.
    fn pass_on_resolved(&mut self, opts: &BrowseOptions, started: Instant) {
        match &opts.on_resolved {
            Some(hook) => {
                for s in self.table.take_resolved(opts, started, self.deadline) {
                    (hook.0)(&s);
                }
            }
            None => self.table.newly_resolved.clear(),
        }
    }

    /// Whether a stop rule holds now (see "When it stops early" in the
    /// [`mdns`](super) docs); records which one.
    fn stop_early(&mut self, now: Instant) -> bool {
        // Nothing heard on any link, and a DNS server answered for the
        // cluster: it is not on this link. The floor is LATE_ANSWER after
        // the first query (and QUIET after the DNS answer), so an agent
        // here answering that late is heard; with nothing heard there is
        // no stream of answers for QUIET to let settle.
        if let (true, 0, Some((at, n))) = (
            self.early_possible,
            self.stats.unparsed_replies,
            self.answered_elsewhere,
        ) {
            if n > 0 && self.table.heard_nothing() && now >= self.silent_point && now >= at + QUIET
            {
                self.stats.stopped_early = true;
                self.stats.stop_rule = Some(StopRule::DnsSdAnswered);
                return true;
            }
        }
        if !(self.early_possible
            && self.stats.unparsed_replies == 0
            && now >= self.early_point
            && now >= self.last_change + QUIET)
        {
            return false;
        }
        if self.table.clean() {
            self.stats.stopped_early = true;
            self.stats.stop_rule = Some(StopRule::Clean);
            self.stats.expected_missing = Some(0.0);
            return true;
        }
        let (k, _) = matured(now - self.t0, self.round);
        if let Some(e) = self.table.expected_missing(k).filter(|&e| e < STOP_RISK) {
            self.stats.stopped_early = true;
            self.stats.stop_rule = Some(StopRule::LossEstimate);
            self.stats.expected_missing = Some(e);
            return true;
        }
        false
    }

    /// Sends every legacy round that is due, on every socket.
    async fn send_legacy_rounds(&mut self, now: Instant) {
        while !self.socks.is_empty() && self.t0 + legacy_offset(self.round) <= now {
            let round = self.round;
            if !legacy_round_wanted(round, self.table.clean()) {
                self.stats.legacy_rounds_skipped += 1;
                self.round += 1;
                continue;
            }
            let id = self.base_id.wrapping_add(round as u16);
            self.rounds.insert(id, round);
            // No known answers, ever: a legacy querier sends none (RFC 6762
            // §6.7), and avahi-daemon refuses a legacy query that carries
            // them ("Invalid legacy unicast query packet", logged for every
            // one). Every responder answers each round, by unicast to us
            // only, and any answer shows that the round went out.
            // One family, when the other reaches every instance: decided
            // once round 0's answers are in, so an agent slow to answer
            // is heard first. IPv6 goes first; IPv4 only when IPv6 alone
            // reaches everyone.
            let judged = now >= self.t0 + legacy_offset(0) + ROUND_WAIT;
            let dual = self.socks.iter().any(|s| s.dest.is_ipv4())
                && self.socks.iter().any(|s| s.dest.is_ipv6());
            let skip_v6 = judged && dual && self.table.family_adds_nothing(true);
            let skip_v4 = judged && dual && !skip_v6 && self.table.family_adds_nothing(false);
            match legacy_query(id, &[]) {
                Ok(bytes) => {
                    for s in &self.socks {
                        if (s.dest.is_ipv6() && skip_v6) || (s.dest.is_ipv4() && skip_v4) {
                            self.stats.legacy_family_skipped += 1;
                            continue;
                        }
                        match s.sock.send_to(&bytes, s.dest).await {
                            Ok(_) => self.stats.legacy_queries += 1,
                            Err(e) => tracing::debug!(
                                "legacy mDNS query on {} to {}: {e}",
                                self.table.ifaces[s.iface].name,
                                s.dest
                            ),
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot build a legacy mDNS query: {e}"),
            }
            self.round += 1;
        }
    }

    /// Whether the multicast path runs: from the start without legacy
    /// sockets; else from [`MULTICAST_DECISION`] on, once the answers are
    /// not clean (loss, a late or a legacy-deaf responder, nothing heard
    /// yet) or when the browse cannot stop early anyway.
    fn multicast_on(&self) -> bool {
        self.stats.multicast_begun_ms.is_some() || self.socks.is_empty()
    }

    /// Begins the multicast path when the browse needs it (see
    /// [`Run::multicast_on`] and "A light browse" in the [`mdns`](super)
    /// docs).
    fn begin_multicast(&mut self, now: Instant) {
        if self.multicast_on()
            || now < self.t0 + MULTICAST_DECISION
            || (self.early_possible && self.table.clean())
        {
            return;
        }
        self.stats.multicast_begun_ms = Some(ms(now - self.t0));
        if let Some(b) = self.browser.as_mut() {
            if let Err(e) = b.begin() {
                tracing::warn!("mDNS multicast path unavailable, legacy queries only: {e}");
                self.stats.multicast_error = Some(e.to_string());
                self.browser = None;
            }
        }
    }

    /// The extra standard queries that are due, each sent once (a second
    /// copy doubled every bystander's share of the browse and broke RFC
    /// 6762 §5.2's pacing; the legacy rounds cover a lost one).
    fn send_standard_queries(&mut self, now: Instant) {
        while self.multicast_on()
            && self.next_qm < EXTRA_QM_MS.len()
            && self.t0 + Duration::from_millis(EXTRA_QM_MS[self.next_qm]) <= now
        {
            // Every resolved instance as a known answer, in as many packets
            // as it takes (RFC 6762 §7.2).
            match standard_queries(&self.table.known_answers(self.next_qm, 0)) {
                Ok(packets) => {
                    for s in &self.socks {
                        let sent = packets.iter().all(|p| send_standard_query(s, p));
                        self.stats.standard_queries += usize::from(sent);
                    }
                }
                Err(e) => tracing::warn!("cannot build a standard mDNS query: {e}"),
            }
            self.next_qm += 1;
        }
    }

    /// The gratuitous ARP announcements that are due.
    fn announce_arp(&mut self, now: Instant) {
        while self.next_kick < ARP_ANNOUNCE_MS.len()
            && self.t0 + Duration::from_millis(ARP_ANNOUNCE_MS[self.next_kick]) <= now
        {
            for k in &self.kickers {
                match k {
                    Kicker::Arp(_) => self.stats.arp_announcements += usize::from(k.announce()),
                    // RFC 4861 §7.2.6: at most MAX_NEIGHBOR_ADVERTISEMENT
                    // (3) unsolicited advertisements per address.
                    Kicker::Ndp(_) if self.next_kick < MAX_UNSOLICITED_NA => {
                        self.stats.na_announcements += usize::from(k.announce())
                    }
                    Kicker::Ndp(_) => {}
                }
            }
            self.next_kick += 1;
        }
    }

    /// When the loop must next wake without any packet: the deadline, or
    /// the next query, announcement, or change of the stop rules.
    fn next_wake(&self, now: Instant) -> Instant {
        let t0 = self.t0;
        let mut wake = self.deadline;
        if !self.socks.is_empty() {
            wake = wake.min(t0 + legacy_offset(self.round));
            match EXTRA_QM_MS.get(self.next_qm) {
                Some(&at) if self.multicast_on() => {
                    wake = wake.min(t0 + Duration::from_millis(at));
                }
                // The decision is taken at MULTICAST_DECISION, and again
                // whenever the table changes (a datagram wakes the loop).
                _ if !self.multicast_on() && now < t0 + MULTICAST_DECISION => {
                    wake = wake.min(t0 + MULTICAST_DECISION);
                }
                _ => {}
            }
        }
        if let (false, Some(&at)) = (self.kickers.is_empty(), ARP_ANNOUNCE_MS.get(self.next_kick)) {
            wake = wake.min(t0 + Duration::from_millis(at));
        }
        if let (true, Some((at, _))) = (self.early_possible, self.answered_elsewhere) {
            wake = wake.min(self.silent_point.max(at + QUIET).max(now));
        }
        if self.early_possible {
            wake = wake.min(self.early_point.max(self.last_change + QUIET).max(now));
            // The loss estimate changes when another query's answers are due.
            if let (_, Some(next)) = matured(now - t0, self.round) {
                wake = wake.min(t0 + next);
            }
        }
        wake
    }

    /// A datagram on a legacy socket: a reply into the table, or counted
    /// as ignored.
    fn on_datagram(&mut self, d: Datagram) {
        let s = &self.socks[d.sock];
        match parse_reply(&d.bytes, d.src, &self.table.ifaces[s.iface], &self.rounds) {
            Some((msg, r)) => {
                self.stats.legacy_replies += 1;
                if self
                    .table
                    .apply_reply_from(&msg, Some(d.src.ip()), s.iface, r, Instant::now())
                {
                    self.last_change = Instant::now();
                }
            }
            None => {
                self.stats.ignored_datagrams += 1;
                // A responder answered (port 5353, on the link) in a
                // form the decoder rejects as a whole: it may be an
                // agent we cannot see on this path, so the network
                // cannot be judged clean.
                if d.src.port() == MDNS_PORT
                    && on_link(&d.src.ip(), &self.table.ifaces[s.iface])
                    && Message::from_vec(&d.bytes).is_err()
                    && lenient_message(&d.bytes).is_none()
                {
                    self.stats.unparsed_replies += 1;
                }
            }
        }
    }

    /// An event of the multicast path into the table; `None`: the path
    /// closed, the browse goes on with legacy queries.
    fn on_event(&mut self, ev: Option<BrowserEvent>) {
        match ev {
            Some(ev) => {
                self.stats.multicast_events += 1;
                if self.table.apply_event(&ev, Instant::now()) {
                    self.last_change = Instant::now();
                }
            }
            None => {
                tracing::warn!("mDNS multicast path closed; continuing with legacy queries");
                self.stats.multicast_error = Some("the mdns-sd event channel closed".into());
                self.browser = None;
            }
        }
    }

    /// Stops the paths and turns the table and the statistics into the
    /// browse's result.
    fn finish(mut self, opts: &BrowseOptions, started: Instant) -> Browse {
        let stopped = Instant::now();
        self.readers.abort_all();
        if let Some(b) = self.browser.take() {
            b.shutdown();
        }
        let (t0, table) = (self.t0, &self.table);
        let stats = &mut self.stats;
        stats.listened_ms = ms(stopped - t0);
        stats.early_point_ms = ms(self.early_point - t0);
        stats.answer_rate = table.answer_rate().map(|(ok, of)| ok as f64 / of as f64);
        if stats.expected_missing.is_none() {
            let (k, _) = matured(stopped - t0, self.round);
            stats.expected_missing = table.expected_missing(k).filter(|e| e.is_finite());
        }
        stats.over_limit = table.over_limit;
        if !stats.stopped_early {
            stats.why_full_window = Some(if !opts.early_stop {
                "early stop disabled".into()
            } else if self.socks.is_empty() {
                "no legacy query socket, so loss could not be judged".into()
            } else if stats.unparsed_replies > 0 {
                format!(
                    "{} reply(ies) from responders could not be decoded, so answers may be missing \
                     from the fast path",
                    stats.unparsed_replies
                )
            } else {
                table.why_not_clean()
            });
        }
        let (sightings, problems) = table.finish(opts, started, self.deadline);
        stats.answered = table.heard();
        stats.late = table.late(self.early_point);
        let attempt = Attempt {
            source: Source::Mdns,
            what: describe_attempt(stats),
            elapsed_ms: stats.listened_ms,
            answered: stats.answered,
            stopped_early: Some(stats.stopped_early),
            late: Some(stats.late),
        };
        Browse {
            discovery: Discovery {
                sightings,
                problems,
                attempts: vec![attempt],
                mdns_links: self
                    .table
                    .ifaces
                    .iter()
                    .flat_map(|i| i.addrs.clone())
                    .collect(),
            },
            stats: self.stats,
        }
    }
}

/// The next mDNS event, or never when the multicast path is off.
async fn next_event(browser: &mut Option<MdnsBrowser>) -> Option<BrowserEvent> {
    match browser.as_mut() {
        Some(b) => b.next().await,
        None => std::future::pending().await,
    }
}

/// Announces this host's own link-layer address on one interface, so that a
/// responder's reply stuck behind a lost neighbour exchange is released:
/// gratuitous ARP for IPv4, an unsolicited Neighbor Advertisement for IPv6.
enum Kicker {
    Arp(ArpSocket),
    Ndp(NdpSocket),
}

impl Kicker {
    /// One announcer per interface and family in use where this process may
    /// send them, and whether every such interface and family got one.
    fn open_all(ifaces: &[Iface]) -> (Vec<Kicker>, bool) {
        let mut out = Vec::new();
        let mut every = true;
        for i in ifaces {
            if i.addrs.iter().any(|a| a.addr().is_ipv4()) {
                match ArpSocket::open(&i.name) {
                    Some(k) => out.push(Kicker::Arp(k)),
                    None => every = false,
                }
            }
            if i.addrs.iter().any(|a| a.addr().is_ipv6()) {
                match NdpSocket::open(&i.name) {
                    Some(k) => out.push(Kicker::Ndp(k)),
                    None => every = false,
                }
            }
        }
        (out, every)
    }

    fn announce(&self) -> bool {
        match self {
            Kicker::Arp(k) => k.announce(),
            Kicker::Ndp(k) => k.announce(),
        }
    }
}
