//! **How often a source may measure** — token buckets by the peer's real
//! address (the TCP connection's, which a stranger cannot forge without
//! being on the path), and one for all sources together.
//!
//! A coordinator measures a node once per `browse --links` or `expand
//! --links`, so a few a minute is plenty; a stranger allowed to measure
//! (`--measure any`) is held to the same few, so that it cannot keep the
//! agent's link full.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Measurements granted per source a minute by default: 4 in a burst, then
/// one every 15 s. A coordinator measures each node once per run, so that is
/// a few runs in a row; at the agent's hard limits (64 MiB each way) one
/// source can then make it move at most about 0.5 GiB a minute.
pub const DEFAULT_PER_MINUTE: u32 = 4;

/// How many times the per-source budget a source that proved the cluster
/// key gets (64 a minute by default): a link map has every box measured by
/// every other box, once for its rates and again where a shared bottleneck
/// held it down, and a box of a 64-box map is measured about 70 times, by
/// 63 sources. A stranger (`--measure any`) keeps the plain budget.
pub const KEYED_FACTOR: u32 = 16;

/// Measurements without transfers (round trips and the UDP probe: the
/// link map's quiet phase) granted per source a minute: they move at most
/// the probe's datagrams, and a map asks each box for one per pair.
pub const QUIET_PER_MINUTE: u32 = 128;

/// How many sources' worth all sources together may measure: 8, so a
/// cluster with several coordinators is not held back, while a stranger who
/// owns many addresses (an IPv6 host can use a whole /64) gets at most 8
/// sources' worth, not one per address.
pub const SOURCES_AT_ONCE: u32 = 8;

/// Sources kept before the table is pruned of the ones that are fully
/// refilled (which are the same as absent). The table cannot grow past the
/// sources granted within a minute, which the shared bucket bounds.
const PRUNE_AT: usize = 64;

/// A token bucket: `capacity` tokens, refilled at `capacity` a minute.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: u32, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(capacity),
            at: now,
        }
    }

    fn refill(&mut self, capacity: u32, now: Instant) {
        let per_sec = f64::from(capacity) / 60.0;
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * per_sec).min(f64::from(capacity));
        self.at = now;
    }

    /// How long until one token is there (zero when it is).
    fn wait(&self, capacity: u32) -> Duration {
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing * 60.0 / f64::from(capacity))
    }
}

/// Why a measurement was not granted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limited {
    /// This source used its share.
    Source {
        /// Its share a minute.
        per_minute: u32,
        /// When the next is allowed.
        wait: Duration,
    },
    /// All sources together used theirs.
    All {
        /// The shared limit a minute.
        per_minute: u32,
        /// When the next is allowed.
        wait: Duration,
    },
}

impl Limited {
    /// The refusal, for the coordinator and the log.
    pub fn reason(&self, ip: IpAddr) -> String {
        match self {
            Limited::Source { per_minute, wait } => format!(
                "rate limit: {ip} may measure this agent's link {per_minute} times a minute \
                 (rlx-agent --measure-per-minute) and used them; try again in {} s",
                wait.as_secs() + 1
            ),
            Limited::All { per_minute, wait } => format!(
                "rate limit: this agent measures at most {per_minute} links a minute from all \
                 sources together, and did; try again in {} s",
                wait.as_secs() + 1
            ),
        }
    }
}

/// The buckets of one agent.
#[derive(Debug)]
pub struct Limiter {
    per_minute: u32,
    sources: HashMap<IpAddr, Bucket>,
    all: Bucket,
}

impl Limiter {
    /// Buckets for `per_minute` measurements a minute per source (at least
    /// one), and [`SOURCES_AT_ONCE`] times that for all sources.
    pub fn new(per_minute: u32) -> Limiter {
        let per_minute = per_minute.max(1);
        Limiter {
            per_minute,
            sources: HashMap::new(),
            all: Bucket::full(per_minute * SOURCES_AT_ONCE, Instant::now()),
        }
    }

    /// Takes one measurement for `ip` at `now`, or says why not. IPv4
    /// addresses mapped into IPv6 (`::ffff:10.0.0.1`, what a dual-stack
    /// listener reports) count as the IPv4 address.
    pub fn take(&mut self, ip: IpAddr, now: Instant) -> Result<(), Limited> {
        let ip = ip.to_canonical();
        let (one, all) = (self.per_minute, self.per_minute * SOURCES_AT_ONCE);
        if self.sources.len() >= PRUNE_AT {
            self.sources.retain(|_, b| {
                b.refill(one, now);
                b.tokens < f64::from(one)
            });
        }
        let mut source = self
            .sources
            .get(&ip)
            .copied()
            .unwrap_or_else(|| Bucket::full(one, now));
        source.refill(one, now);
        self.all.refill(all, now);
        if source.tokens < 1.0 {
            return Err(Limited::Source {
                per_minute: one,
                wait: source.wait(one),
            });
        }
        if self.all.tokens < 1.0 {
            return Err(Limited::All {
                per_minute: all,
                wait: self.all.wait(all),
            });
        }
        source.tokens -= 1.0;
        self.all.tokens -= 1.0;
        self.sources.insert(ip, source);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Guards the per-source limit: a source gets its burst, is then
    /// refused with the time to wait, and gets one more after that time;
    /// another source is not held back by it.
    #[test]
    fn a_source_gets_its_burst_then_waits_while_another_source_is_served() {
        let t0 = Instant::now();
        let mut l = Limiter::new(4);
        for i in 0..4 {
            assert_eq!(l.take(ip("10.0.0.1"), t0), Ok(()), "measurement {i}");
        }
        let Err(refused) = l.take(ip("10.0.0.1"), t0) else {
            panic!("a fifth at once is refused");
        };
        assert!(
            matches!(refused, Limited::Source { per_minute: 4, wait } if wait == Duration::from_secs(15)),
            "{refused:?}"
        );
        let why = refused.reason(ip("10.0.0.1"));
        assert!(
            why.contains("10.0.0.1") && why.contains("try again in 16 s"),
            "{why}"
        );
        assert_eq!(l.take(ip("10.0.0.2"), t0), Ok(()), "another source");
        assert_eq!(
            l.take(ip("10.0.0.1"), t0 + Duration::from_secs(15)),
            Ok(()),
            "one more after 15 s"
        );
        assert!(l
            .take(ip("10.0.0.1"), t0 + Duration::from_secs(16))
            .is_err());
    }

    /// Guards the mapped-address loophole: `::ffff:10.0.0.1` (how a
    /// dual-stack listener sees an IPv4 peer) is the same source.
    #[test]
    fn an_ipv4_address_mapped_into_ipv6_is_the_same_source() {
        let t0 = Instant::now();
        let mut l = Limiter::new(1);
        assert_eq!(l.take(ip("10.0.0.1"), t0), Ok(()));
        assert!(l.take(ip("::ffff:10.0.0.1"), t0).is_err());
    }

    /// Guards against a stranger with many addresses: all sources together
    /// get [`SOURCES_AT_ONCE`] sources' worth.
    #[test]
    fn many_sources_together_get_only_the_shared_limit() {
        let t0 = Instant::now();
        let mut l = Limiter::new(2);
        let granted = (0..1000u16)
            .filter(|&i| {
                l.take(IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, i]), t0)
                    .is_ok()
            })
            .count();
        assert_eq!(granted, 2 * SOURCES_AT_ONCE as usize);
    }

    /// Guards the table's size: sources that refilled are dropped, so it
    /// holds only those granted within the last minute.
    #[test]
    fn the_table_forgets_sources_that_refilled() {
        let t0 = Instant::now();
        let mut l = Limiter::new(600);
        for i in 0..1000u16 {
            assert!(l
                .take(IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, i]), t0)
                .is_ok());
        }
        assert_eq!(l.sources.len(), 1000);
        assert!(l.take(ip("10.9.9.9"), t0 + Duration::from_secs(61)).is_ok());
        assert_eq!(l.sources.len(), 1, "only the newcomer is left");
    }
}
