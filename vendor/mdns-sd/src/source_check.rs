//! rlx patch: RFC 6762 §11 / §5.5 source address check, and a per-source
//! limit on legacy unicast replies (RFC 6762 §6.7). See `PATCHES.md`.
//!
//! Without these, the responder answered a legacy query (UDP source port not
//! 5353) from any source address by unicast to that address: a small query
//! with a forged source made it send a reply several times larger to anyone,
//! on-link or not, and a forged query to the mDNS group made every responder
//! on the link do so at once (a UDP reflector / amplifier).

use crate::service_info::{valid_ip_on_intf, MyIntf};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// rlx patch: RFC 6762 §11 — is `src` on the local link of `intf`?
///
/// IPv4: `src` is on the subnet of one of `intf`'s IPv4 addresses
/// ("(I & M) == (P & M)"). IPv6: `src` is link-local (`fe80::/10`), or on the
/// prefix of one of `intf`'s IPv6 addresses. (§11 also counts on-link
/// prefixes learned from router advertisements that the host holds no address
/// on; those are not known here, so such a source counts as off-link.)
pub(crate) fn source_on_link(src: &IpAddr, intf: &MyIntf) -> bool {
    if let IpAddr::V6(v6) = src {
        if (v6.segments()[0] & 0xffc0) == 0xfe80 {
            return true;
        }
    }
    intf.addrs.iter().any(|a| valid_ip_on_intf(src, a))
}

/// rlx patch: RFC 6762 §11 / §5.5 — why a packet from an off-link source
/// must be dropped, or `None` to handle it.
///
/// - Sent to the mDNS group (`to_group`): §11 deems it to come from the local
///   link whatever its source (overlaid subnets, misconfigured hosts), so a
///   response is accepted and a multicast query is answered, by multicast as
///   usual. A *legacy* query (`legacy`) is the exception: its only answer is a
///   unicast to its source address and port (§6.7), and §11 says a responder
///   SHOULD NOT send a unicast response to an apparently off-link source; a
///   multicast answer would never reach the legacy querier's port either. So
///   it is dropped.
/// - Sent to one of our unicast addresses: §5.5 says to silently ignore a
///   query from off the link, and §11 that a querier MUST discard a unicast
///   response from off the link. Both are dropped.
pub(crate) fn off_link_drop_reason(
    src_on_link: bool,
    to_group: bool,
    is_query: bool,
    legacy: bool,
) -> Option<&'static str> {
    if src_on_link {
        return None;
    }
    match (to_group, is_query) {
        (true, true) if legacy => {
            Some("legacy query to the group from an off-link source (RFC 6762 §11)")
        }
        (true, _) => None,
        (false, true) => Some("unicast query from an off-link source (RFC 6762 §5.5, §11)"),
        (false, false) => Some("unicast response from an off-link source (RFC 6762 §11)"),
    }
}

/// rlx patch: legacy unicast replies a source may draw at once.
pub(crate) const LEGACY_REPLY_BURST: f64 = 32.0;

/// rlx patch: legacy unicast replies per second a source may draw, sustained.
pub(crate) const LEGACY_REPLY_RATE: f64 = 16.0;

/// rlx patch: RFC 6762 §5.4 QU unicast replies a destination may draw at
/// once (PATCHES.md §29, §36). A querier sets the QU bit only on its first
/// queries after starting or joining a link (RFC 6762 §5.4: "the first
/// query", then QM), so two are room for a querier that asks twice;
/// every further answer is multicast, as §5.4 allows. It was 8: five agents
/// then still sent a forged victim 85 packets in 5 s.
pub(crate) const QU_REPLY_BURST: f64 = 2.0;

/// rlx patch: QU unicast replies per second a destination may draw,
/// sustained (PATCHES.md §29, §36), in the spirit of §6's once a second per
/// record and §11's care for unicast: past it the answers are multicast,
/// under the §6 limit.
pub(crate) const QU_REPLY_RATE: f64 = 2.0;

/// rlx patch: RFC 6762 §5.4, §11 (PATCHES.md §36): how long an address
/// passed to `ServiceDaemon::prove_source` stays proved. Ten minutes: a
/// coordinator that keeps a member list reconnects far more often, and an
/// address that changes hands (DHCP) is not vouched for long after.
pub const PROVEN_FOR: Duration = Duration::from_secs(600);

/// rlx patch: PATCHES.md §36: how many proved addresses are remembered at
/// most; past it, the oldest is forgotten first.
pub const PROVEN_MAX: usize = 1024;

/// rlx patch: RFC 6762 §5.4, §11 (PATCHES.md §36): why a QU answer of
/// `answer_len` bytes to a question of `question_len` bytes must go by
/// multicast rather than by unicast to its source, or `None` to unicast it.
///
/// A QU question's source address is whatever its sender wrote: a stranger
/// on the link can put a victim's there, and every responder then unicasts
/// its answer at the victim. So an answer bigger than its question goes by
/// unicast only to a source shown to receive at its address (`proven`,
/// `ServiceDaemon::prove_source`): to anyone else, the bytes a forger draws
/// toward a victim are at most the bytes it sends. Then each destination
/// gets at most [`QU_REPLY_BURST`], then [`QU_REPLY_RATE`] a second
/// (`rate_allows`, asked last so that only an answer that is sent takes a
/// token).
pub(crate) fn qu_unicast_refusal(
    proven: bool,
    question_len: usize,
    answer_len: usize,
    rate_allows: impl FnOnce() -> bool,
) -> Option<String> {
    if !proven && answer_len > question_len {
        return Some(format!(
            "the unicast answer ({answer_len} bytes) would be bigger than the question, and the source is not proved (RFC 6762 §11)"
        ));
    }
    if !rate_allows() {
        return Some(format!(
            "over {QU_REPLY_RATE} unicast replies/s to that address (burst {QU_REPLY_BURST})"
        ));
    }
    None
}

/// rlx patch: RFC 6762 §5.4, §11 (PATCHES.md §36): the addresses shown to
/// receive at their address (`ServiceDaemon::prove_source`), each until
/// [`PROVEN_FOR`] after it was last proved, [`PROVEN_MAX`] at most.
#[derive(Debug, Default)]
pub(crate) struct ProvenSources {
    proven: HashMap<IpAddr, Instant>,
}

impl ProvenSources {
    /// `addr` was proved at `now`.
    pub(crate) fn prove(&mut self, addr: IpAddr, now: Instant) {
        self.proven
            .retain(|_, at| now.saturating_duration_since(*at) < PROVEN_FOR);
        if !self.proven.contains_key(&addr) && self.proven.len() >= PROVEN_MAX {
            if let Some(oldest) = self
                .proven
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(a, _)| *a)
            {
                self.proven.remove(&oldest);
            }
        }
        self.proven.insert(addr, now);
    }

    /// Whether `addr` was proved less than [`PROVEN_FOR`] before `now`.
    pub(crate) fn is_proven(&self, addr: IpAddr, now: Instant) -> bool {
        self.proven
            .get(&addr)
            .is_some_and(|at| now.saturating_duration_since(*at) < PROVEN_FOR)
    }
}

/// rlx patch: how many sources are tracked at once. At the cap, sources idle
/// long enough to be back at a full burst are forgotten; if none is, new
/// sources share one bucket, so memory stays bounded under a flood of forged
/// sources.
pub(crate) const LEGACY_REPLY_SOURCES: usize = 4096;

/// rlx patch: a token bucket per querier address for legacy unicast replies
/// (RFC 6762 §6.7 answers bypass the §6 once-a-second multicast limit, so
/// nothing else bounds them). On-link only by then (see
/// [`off_link_drop_reason`]), but an on-link host can still forge another
/// on-link host's address.
///
/// The same limit, with its own figures ([`LegacyReplyLimit::qu`]), bounds
/// the QU unicast replies of RFC 6762 §5.4 (PATCHES.md §29).
#[derive(Debug)]
pub(crate) struct LegacyReplyLimit {
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Bucket,
    /// rlx patch: PATCHES.md §29: the burst and the rate, per limit.
    burst: f64,
    rate: f64,
}

impl Default for LegacyReplyLimit {
    fn default() -> Self {
        Self::with(LEGACY_REPLY_BURST, LEGACY_REPLY_RATE)
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Option<Instant>,
}

impl Bucket {
    fn full(burst: f64) -> Self {
        Bucket {
            tokens: burst,
            at: None,
        }
    }

    /// Refills for the time since the last use, then takes a token if any.
    fn take(&mut self, now: Instant, burst: f64, rate: f64) -> bool {
        if let Some(at) = self.at {
            let secs = now.saturating_duration_since(at).as_secs_f64();
            self.tokens = (self.tokens + secs * rate).min(burst);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Back at a full burst by `now`: forgetting it changes nothing.
    fn is_full(&self, now: Instant, burst: f64, rate: f64) -> bool {
        match self.at {
            None => true,
            Some(at) => {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                self.tokens + secs * rate >= burst
            }
        }
    }
}

impl LegacyReplyLimit {
    /// A limit of `burst` replies at once and `rate` a second per source.
    fn with(burst: f64, rate: f64) -> Self {
        LegacyReplyLimit {
            buckets: HashMap::new(),
            overflow: Bucket::full(burst),
            burst,
            rate,
        }
    }

    /// rlx patch: RFC 6762 §5.4: the limit of QU unicast replies
    /// ([`QU_REPLY_BURST`], [`QU_REPLY_RATE`]; PATCHES.md §29).
    pub(crate) fn qu() -> Self {
        Self::with(QU_REPLY_BURST, QU_REPLY_RATE)
    }

    /// May `src` be sent one more unicast reply at `now`?
    pub(crate) fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        let (burst, rate) = (self.burst, self.rate);
        if !self.buckets.contains_key(&src) && self.buckets.len() >= LEGACY_REPLY_SOURCES {
            self.buckets.retain(|_, b| !b.is_full(now, burst, rate));
        }
        if let Some(b) = self.buckets.get_mut(&src) {
            return b.take(now, burst, rate);
        }
        if self.buckets.len() >= LEGACY_REPLY_SOURCES {
            return self.overflow.take(now, burst, rate);
        }
        self.buckets
            .entry(src)
            .or_insert(Bucket::full(burst))
            .take(now, burst, rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use if_addrs::{IfAddr, Ifv4Addr, Ifv6Addr};
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    fn intf() -> MyIntf {
        MyIntf {
            name: "eth0".into(),
            index: 2,
            addrs: HashSet::from([
                IfAddr::V4(Ifv4Addr {
                    ip: Ipv4Addr::new(10, 0, 1, 1),
                    netmask: Ipv4Addr::new(255, 255, 255, 0),
                    prefixlen: 24,
                    broadcast: None,
                }),
                IfAddr::V6(Ifv6Addr {
                    ip: "fd00:1::1".parse().unwrap(),
                    netmask: "ffff:ffff:ffff:ffff::".parse().unwrap(),
                    prefixlen: 64,
                    broadcast: None,
                }),
            ]),
            max_packet_size_v4: 1500,
            max_packet_size_v6: 1500,
        }
    }

    #[test]
    fn sources_on_the_interfaces_subnets_and_ipv6_link_local_are_on_link() {
        let i = intf();
        let on = |s: &str| source_on_link(&s.parse().unwrap(), &i);
        assert!(on("10.0.1.200"));
        assert!(!on("10.0.2.1"));
        assert!(!on("192.0.2.7"));
        assert!(on("fd00:1::99"));
        assert!(on("fe80::1234"));
        assert!(!on("fd00:2::1"));
        assert!(!on("2001:db8::1"));
    }

    #[test]
    fn off_link_packets_are_dropped_except_multicast_queries_and_group_responses() {
        // On-link: always handled.
        for (g, q, l) in [
            (true, true, true),
            (false, true, true),
            (false, false, false),
        ] {
            assert_eq!(off_link_drop_reason(true, g, q, l), None);
        }
        // Off-link, to the group: a multicast query or a response is handled.
        assert_eq!(off_link_drop_reason(false, true, true, false), None);
        assert_eq!(off_link_drop_reason(false, true, false, false), None);
        // Off-link: a legacy query to the group, anything unicast, dropped.
        assert!(off_link_drop_reason(false, true, true, true).is_some());
        assert!(off_link_drop_reason(false, false, true, true).is_some());
        assert!(off_link_drop_reason(false, false, true, false).is_some());
        assert!(off_link_drop_reason(false, false, false, false).is_some());
    }

    #[test]
    fn a_source_gets_its_burst_then_the_sustained_rate() {
        let mut l = LegacyReplyLimit::default();
        let src: IpAddr = Ipv4Addr::new(10, 0, 1, 9).into();
        let t0 = Instant::now();
        let burst = (0..100).filter(|_| l.allow(src, t0)).count();
        assert_eq!(burst, LEGACY_REPLY_BURST as usize);
        // One second later: the sustained rate's worth.
        let t1 = t0 + Duration::from_secs(1);
        let more = (0..100).filter(|_| l.allow(src, t1)).count();
        assert_eq!(more, LEGACY_REPLY_RATE as usize);
        // Another source is not affected.
        assert!(l.allow(Ipv4Addr::new(10, 0, 1, 10).into(), t1));
    }

    /// rlx patch: PATCHES.md §29, §36. Guards against QU replies with no
    /// limit: 247 forged QU queries in 5 s drew 247 unicast replies from each
    /// agent (then 17 with a burst of 8).
    #[test]
    fn qu_replies_to_one_source_get_a_small_burst_then_two_a_second() {
        let mut l = LegacyReplyLimit::qu();
        let victim: IpAddr = Ipv4Addr::new(10, 0, 1, 9).into();
        let t0 = Instant::now();
        let replies: usize = (0..50)
            .map(|k| {
                let at = t0 + Duration::from_millis(100 * k);
                (0..5).filter(|_| l.allow(victim, at)).count()
            })
            .sum();
        // 250 queries over 5 s: the burst and about 5 s of the rate.
        assert!(
            replies <= QU_REPLY_BURST as usize + 5 * QU_REPLY_RATE as usize,
            "{}",
            replies
        );
        assert!(replies >= QU_REPLY_BURST as usize, "{}", replies);
    }

    /// rlx patch: PATCHES.md §36. Guards against QU answers that outgrow
    /// their question toward an address nothing proved (a forger's victim):
    /// 5 agents sent 1.95 times the bytes the forger sent.
    #[test]
    fn a_qu_answer_bigger_than_its_question_goes_by_unicast_to_proved_sources_only() {
        let never = || -> bool { panic!("the rate is asked only of an answer that may go") };
        assert!(qu_unicast_refusal(false, 40, 300, never).is_some());
        assert_eq!(qu_unicast_refusal(false, 300, 300, || true), None);
        assert_eq!(qu_unicast_refusal(true, 40, 300, || true), None);
        assert!(
            qu_unicast_refusal(true, 40, 300, || false).is_some(),
            "proved sources are bounded per destination too"
        );

        let mut p = ProvenSources::default();
        let a: IpAddr = Ipv4Addr::new(10, 0, 1, 9).into();
        let t0 = Instant::now();
        assert!(!p.is_proven(a, t0));
        p.prove(a, t0);
        assert!(p.is_proven(a, t0 + PROVEN_FOR - Duration::from_secs(1)));
        assert!(!p.is_proven(a, t0 + PROVEN_FOR));
        for n in 0..(PROVEN_MAX as u32 * 2) {
            p.prove(IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + n)), t0);
        }
        assert!(p.proven.len() <= PROVEN_MAX);
    }

    #[test]
    fn a_flood_of_forged_sources_keeps_the_table_bounded() {
        let mut l = LegacyReplyLimit::default();
        let t0 = Instant::now();
        for n in 0..(LEGACY_REPLY_SOURCES as u32 * 3) {
            l.allow(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)), t0);
        }
        assert!(l.buckets.len() <= LEGACY_REPLY_SOURCES);
        // Once they have been idle long enough, a new source gets a bucket.
        let later = t0 + Duration::from_secs(3);
        let fresh: IpAddr = Ipv4Addr::new(10, 200, 0, 1).into();
        assert!(l.allow(fresh, later));
        assert!(l.buckets.contains_key(&fresh));
    }
}
