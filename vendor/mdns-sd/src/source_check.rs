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
use std::time::Instant;

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

/// rlx patch: RFC 6762 §5.4 QU unicast replies a source may draw at once
/// (PATCHES.md §29). A querier sets the QU bit only on its first queries
/// after starting or joining a link, a few in its first second.
pub(crate) const QU_REPLY_BURST: f64 = 8.0;

/// rlx patch: QU unicast replies per second a source may draw, sustained
/// (PATCHES.md §29): past it the answers are multicast, under the §6 limit.
pub(crate) const QU_REPLY_RATE: f64 = 2.0;

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
    use std::time::Duration;

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

    /// rlx patch: PATCHES.md §29. Guards against QU replies with no limit:
    /// 247 forged QU queries in 5 s drew 247 unicast replies from each agent.
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
