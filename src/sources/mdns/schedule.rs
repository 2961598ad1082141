//! **When queries go out, and how much loss is left to fear** — the legacy
//! and standard query schedules, the ARP announcements, the early-stop
//! thresholds, and the loss estimate (see "Schedule" and "When it stops
//! early" in [`super`]'s docs). Pure timing and arithmetic: no sockets.

use std::time::Duration;

/// When the legacy queries of the first second go out, ms after the start:
/// ten queries, the first three 50 ms apart (a responder answers within
/// about 10 ms, measured) so that a clean network is recognised by 200 ms,
/// then every 100-150 ms. Measured: a query every 100 ms at 20% loss found
/// 50/50 agents with a median of 204 ms when ARP caches were warm.
pub(crate) const LEGACY_BURST_MS: [u64; 10] = [0, 50, 100, 200, 300, 400, 500, 600, 750, 900];

/// After the burst, the gap before the next legacy query; each later gap
/// doubles (RFC 6762 §5.2: at least one second, increasing by a factor of two).
pub(crate) const LEGACY_BACKOFF_START: Duration = Duration::from_secs(1);

/// When the extra standard queries go out, ms after the start, each sent
/// once (a lost one is covered by the legacy rounds). mdns-sd's browse queries once at about 30 ms, then at 1030 ms
/// and 3030 ms; a responder multicasts a record at most once a second,
/// counted from its previous answer (sent 10 to 50 ms after a query), so
/// about half the responders refuse the 1030 ms query (measured: 28 of 50
/// answered a query at exactly 1.0 s, 50 of 50 at 1.1 s). These give every
/// responder a multicast answer near 0, 1.2 and 2.3 s: multicast answers need
/// no ARP, which is what delays the unicast replies to legacy queries under
/// loss. Sent from port 5353 (the source port is what makes a query standard,
/// RFC 6762 §6.7), with known answers (RFC 6762 §7.1).
pub(crate) const EXTRA_QM_MS: [u64; 3] = [0, 1150, 2300];

/// When a one-shot browse decides whether it needs its multicast path
/// (mdns-sd's browse and the extra standard queries), counted from the
/// start: once the early legacy rounds' answers are due. Until then it
/// sends only legacy queries, which every responder answers by unicast to
/// this host alone; a LAN that answered them cleanly by then never draws a
/// multicast answer from this browse (see "A light browse" in the
/// [`mdns`](super) docs), so the devices beside it (Wi-Fi clients,
/// printers) receive only the three small queries.
pub(crate) const MULTICAST_DECISION: Duration =
    Duration::from_millis(LEGACY_BURST_MS[EARLY_ROUNDS - 1] + ROUND_WAIT.as_millis() as u64);

/// When a browse that has not stopped early re-announces this host's own
/// IPv4-to-MAC mapping (a gratuitous ARP, RFC 5227 §2.3), ms after the start.
/// The first three fall before the earliest early stop
/// ([`EARLY_FLOOR_WITH_ARP`]), so a responder whose ARP exchange was lost
/// is heard before the browse decides the network is clean.
///
/// Why: a responder replies to a legacy query by unicast, so it needs this
/// host's MAC. Under loss its ARP request or our ARP reply is lost, and Linux
/// retries only after a second (giving up after three), so the reply waits a
/// second or more in its queue. Any ARP packet from this host fills in the
/// responder's pending entry and releases the queued replies at once (RFC 826's
/// merge rule; Linux does the same for a pending entry). Nine small broadcasts
/// in 2.8 s, only on a network that did not look clean at 200 ms, only where
/// this process may open a packet socket (`CAP_NET_RAW`: root, as in the lab);
/// elsewhere the browse just waits for the responders' ARP retries.
pub(crate) const ARP_ANNOUNCE_MS: [u64; 12] = [
    20, 60, 120, 250, 400, 600, 800, 1000, 1300, 1700, 2200, 2800,
];

/// How many of the first legacy queries are sent without known answers and
/// must be answered by every instance for an early stop. Three: with one or
/// two, a single lucky round trip per responder at 20% loss (0.64 chance
/// each) would too often look lossless.
pub(crate) const EARLY_ROUNDS: usize = 3;

/// The latest a live responder is taken to answer a query it was sent,
/// lossless: what a browse waits for before it may stop early.
///
/// A responder on a quiet wired LAN answers in about 10 ms, but two kinds
/// of box answer much later, and a stop tuned to the fast ones left them
/// out without a word (in the lab, 1 run in 5 wrote 5 of 6 nodes; see
/// docs/protocol.md, "When a browse stops early, and what it waits for"):
///
/// - a Wi-Fi client in power save hears multicast only after a DTIM
///   beacon: beacons come every 102.4 ms and access points send DTIM every
///   1 to 3 of them, so a query waits up to about 307 ms before the client
///   even receives it;
/// - a loaded box (a checkpoint loading, swapping, every core busy) runs
///   its agent in slices: in the lab, an agent given the CPU 100 ms of
///   every 400 ms answered up to 300 ms late.
///
/// 400 ms covers both with a margin; a deeper power save or a longer stall
/// needs `[discover] early_stop = false`, and the report says so whenever
/// it stopped early.
pub(crate) const LATE_ANSWER: Duration = Duration::from_millis(400);

/// Earliest early stop when this process can send gratuitous ARP (see
/// [`ARP_ANNOUNCE_MS`]): [`LATE_ANSWER`] after the first query, plus
/// [`QUIET`], so that an agent answering that late is heard, and its
/// answer given the same quiet time as everyone's. (The first three ARP
/// announcements, which release a unicast reply stuck behind a lost ARP
/// exchange, are long out by then.) On a lossless LAN of 50 agents a
/// browse therefore ends at about 500 ms, where it ended at 250 ms before.
pub(crate) const EARLY_FLOOR_WITH_ARP: Duration =
    Duration::from_millis(LATE_ANSWER.as_millis() as u64 + QUIET.as_millis() as u64);

/// How long past [`LATE_ANSWER`] a browse that heard nothing at all waits
/// before the `dns_sd` rule may stop it: an answer sent that late to the
/// first query still has its way through a loaded switch and the kernel.
/// [`QUIET`], which gives a stream of answers time to settle, has nothing
/// to wait out when nothing was heard.
pub(crate) const SILENT_SLACK: Duration = Duration::from_millis(25);

/// Earliest stop by the `dns_sd` rule (nothing heard on this link, DNS
/// answered): [`LATE_ANSWER`] after the first query plus [`SILENT_SLACK`]
/// where lost neighbour exchanges are repaired (the short floor applies),
/// else the long floor, as for every early stop.
pub(crate) fn silent_floor(short_floor: bool) -> Duration {
    if short_floor {
        LATE_ANSWER + SILENT_SLACK
    } else {
        EARLY_FLOOR_WITHOUT_ARP
    }
}

/// Earliest early stop without `CAP_NET_RAW`. A responder whose ARP request
/// for us was lost is silent on the legacy path until Linux retries ARP one
/// second later, and on a small network the other responders may all look
/// clean meanwhile: stopping before the retry would report a partial list as
/// complete (measured: 4 of 5 agents at 10% loss). So a browse that cannot
/// announce its own MAC waits past the first retry.
pub(crate) const EARLY_FLOOR_WITHOUT_ARP: Duration = Duration::from_millis(1100);

/// How long nothing new must arrive before an early stop: ten times the
/// slowest reply latency measured (10 ms).
pub(crate) const QUIET: Duration = Duration::from_millis(100);

/// The most agents a browse may expect to have missed when it stops on a
/// lossy network (see "When it stops early" in the [`mdns`](super) docs): one run in
/// a hundred, at worst, would lack an agent that listening to the end of the
/// window would have found.
pub(crate) const STOP_RISK: f64 = 0.01;

/// How many standard deviations below the measured answer rate the loss
/// estimate assumes (a Wilson lower bound): with few agents the measured
/// rate is uncertain, and a browse must not stop on a lucky guess.
pub(crate) const RATE_MARGIN: f64 = 2.0;

/// How long after a query went out it counts as a chance every responder
/// had to answer: ten times the slowest reply latency measured, and after
/// the next ARP announcement ([`ARP_ANNOUNCE_MS`]) has released replies
/// stuck behind a lost ARP exchange.
pub(crate) const ROUND_WAIT: Duration = Duration::from_millis(100);

/// Whether legacy round `round` is worth sending. The early rounds always
/// are: the clean test needs every instance to answer each of them. A later
/// round only while the answers are not clean: once every instance heard
/// answered every early query and is resolved, the browse only waits out
/// [`QUIET`] before it stops, and a later round would draw a unicast reply
/// again from every agent its known-answer list cannot hold (measured at
/// 200 agents: round 3 drew 150 replies, about 40 KB, that changed
/// nothing). If something new arrives meanwhile, the answers are no longer
/// clean and the rounds resume.
pub(super) fn legacy_round_wanted(round: usize, clean: bool) -> bool {
    round < EARLY_ROUNDS || !clean
}

/// How many of the `sent` legacy rounds are older than [`ROUND_WAIT`]
/// `elapsed` after the start (their answers are in), and when the next one
/// matures, if one is pending.
pub(super) fn matured(elapsed: Duration, sent: usize) -> (usize, Option<Duration>) {
    let k = (0..sent)
        .take_while(|&r| legacy_offset(r) + ROUND_WAIT <= elapsed)
        .count();
    (k, (k < sent).then(|| legacy_offset(k) + ROUND_WAIT))
}

/// The number of responders expected to be still unheard after `chances`
/// queries that reached the network, when `heard` were heard and answered
/// `answered` of the `asked` such early queries put to them (see "When it
/// stops early" in the [`mdns`](super) docs). Infinite when nothing can be
/// inferred.
pub(crate) fn expected_unheard(heard: usize, answered: usize, asked: usize, chances: u32) -> f64 {
    if heard == 0 || asked == 0 || chances == 0 {
        return f64::INFINITY;
    }
    // Wilson score lower bound of the answer rate.
    let n = asked as f64;
    let p = (answered as f64 / n).clamp(0.0, 1.0);
    let z2 = RATE_MARGIN * RATE_MARGIN;
    let centre = p + z2 / (2.0 * n);
    let spread = RATE_MARGIN * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let q = ((centre - spread) / (1.0 + z2 / n)).max(0.0);
    let miss_all = (1.0 - q).powi(chances as i32);
    if miss_all >= 1.0 {
        return f64::INFINITY;
    }
    heard as f64 * miss_all / (1.0 - miss_all)
}

/// When legacy query `round` goes out, counted from the start.
pub(super) fn legacy_offset(round: usize) -> Duration {
    match LEGACY_BURST_MS.get(round) {
        Some(&at) => Duration::from_millis(at),
        None => {
            let last = Duration::from_millis(LEGACY_BURST_MS[LEGACY_BURST_MS.len() - 1]);
            let after = (round - LEGACY_BURST_MS.len()) as u32;
            // Gaps of 1, 2, 4, ... s: the sum of the first n+1 is 2^(n+1) - 1.
            let gaps = (1u64 << (after + 1).min(30)) - 1;
            last + LEGACY_BACKOFF_START * gaps as u32
        }
    }
}

pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards against a DNS-SD-only cluster waiting out the floor of a
    /// stream of answers that never came (expand ended 480-530 ms after the
    /// DNS answer): with nothing heard the `dns_sd` rule waits only for an
    /// answer LATE_ANSWER late to the first query, and still the long floor
    /// where a lost ARP exchange cannot be repaired.
    #[test]
    fn the_dns_sd_rule_waits_for_a_late_answer_but_not_for_quiet_after_silence() {
        assert_eq!(silent_floor(true), Duration::from_millis(425));
        assert!(silent_floor(true) > LATE_ANSWER);
        assert!(silent_floor(true) < EARLY_FLOOR_WITH_ARP);
        assert_eq!(silent_floor(false), EARLY_FLOOR_WITHOUT_ARP);
    }

    #[test]
    fn a_round_counts_once_its_answers_are_due() {
        let at = |ms| Duration::from_millis(ms);
        assert_eq!(matured(at(0), 1), (0, Some(ROUND_WAIT)));
        // At 999 ms: ten rounds sent (the last at 900 ms), nine due.
        assert_eq!(matured(at(999), 10), (9, Some(at(1000))));
        assert_eq!(matured(at(1000), 10), (10, None));
        assert_eq!(matured(at(3000), 11), (11, None));
    }

    /// Guards against later legacy rounds on a network whose answers are
    /// already clean: they only draw replies again while the browse waits
    /// to stop.
    #[test]
    fn later_legacy_rounds_are_sent_only_while_the_answers_are_not_clean() {
        for r in 0..EARLY_ROUNDS {
            assert!(legacy_round_wanted(r, true), "early round {r}");
            assert!(legacy_round_wanted(r, false), "early round {r}");
        }
        for r in EARLY_ROUNDS..20 {
            assert!(!legacy_round_wanted(r, true), "round {r} on clean answers");
            assert!(legacy_round_wanted(r, false), "round {r}");
        }
    }

    #[test]
    fn a_lossless_network_leaves_no_agent_expected_unheard() {
        let e = expected_unheard(50, 150, 150, 3);
        assert!(e < STOP_RISK / 10.0, "{e}");
    }

    /// 20% loss each way on the coordinator's link: of the queries that go
    /// out, 80% of an agent's replies arrive. With 50 agents heard, eight
    /// chances are enough; four are not.
    #[test]
    fn at_twenty_percent_loss_fifty_agents_make_a_missed_one_unlikely_after_eight_chances() {
        let answered = 120; // 80% of 150
        assert!(expected_unheard(50, answered, 150, 8) < STOP_RISK);
        assert!(expected_unheard(50, answered, 150, 4) > STOP_RISK);
    }

    #[test]
    fn one_or_two_agents_heard_are_too_few_to_estimate_the_loss_within_a_window() {
        // 14 chances: everything a 3 s window sends.
        assert!(expected_unheard(1, 2, 3, 14) > STOP_RISK);
        assert!(expected_unheard(2, 4, 6, 14) > STOP_RISK);
    }

    #[test]
    fn agents_heard_only_by_multicast_keep_the_estimate_from_stopping() {
        // Ten agents that ignore legacy queries: no early answers at all.
        assert!(expected_unheard(10, 0, 30, 14).is_infinite());
        assert!(expected_unheard(0, 0, 0, 14).is_infinite());
    }

    #[test]
    fn more_chances_and_a_higher_answer_rate_only_lower_the_estimate() {
        for k in 1..20 {
            assert!(expected_unheard(20, 40, 60, k + 1) < expected_unheard(20, 40, 60, k));
        }
        for a in 1..60 {
            assert!(expected_unheard(20, a + 1, 60, 8) < expected_unheard(20, a, 60, 8));
        }
    }

    #[test]
    fn the_legacy_schedule_is_a_bounded_burst_then_doubling_gaps() {
        let in_first_second = (0..100)
            .filter(|&r| legacy_offset(r) < Duration::from_secs(1))
            .count();
        assert_eq!(in_first_second, 10);
        assert_eq!(legacy_offset(10), Duration::from_millis(1900));
        assert_eq!(legacy_offset(11), Duration::from_millis(3900));
        assert_eq!(legacy_offset(12), Duration::from_millis(7900));
        for r in 1..30 {
            assert!(legacy_offset(r) > legacy_offset(r - 1));
        }
    }
}
