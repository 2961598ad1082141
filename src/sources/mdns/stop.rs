//! **The stop rules, read off the instance table** — which instances a
//! query lists as known answers (and which it leaves out as sentinels), the
//! clean-network test, the measured answer rate and the number of agents
//! still expected unheard (see "When it stops early" in [`super`]'s docs).

use super::schedule::{expected_unheard, EARLY_ROUNDS};
use super::table::{Instance, Table, V4_LEGACY, V6_LEGACY};

impl Table {
    /// Instance labels to list as known answers in query `round`: those
    /// resolved, rotated by the round so that, past what fits in one query,
    /// each gets its turn; the first `sentinels` of the rotation are left
    /// out, so that they answer and show the query went out.
    pub(super) fn known_answers(&self, round: usize, sentinels: usize) -> Vec<Vec<u8>> {
        let done: Vec<&Instance> = self
            .instances
            .iter()
            .filter(|i| !i.removed && i.complete_at.is_some())
            .collect();
        if done.is_empty() {
            return Vec::new();
        }
        let n = done.len();
        let left_out = |k: usize| (0..sentinels.min(n)).any(|j| (round * sentinels + j) % n == k);
        let start = (round * 50) % n;
        (start..n)
            .chain(0..start)
            .filter(|&k| !left_out(k))
            .map(|k| done[k].label.as_bytes().to_vec())
            .collect()
    }

    /// Whether legacy queries over IPv6 (`v6`) or IPv4 add nothing that the
    /// other family's do not bring: that family's queries were answered
    /// (its path works), and every live instance, from either path, has
    /// answered a legacy query over the other family. Then the browse stops
    /// sending that family's legacy queries, halving the replies on a
    /// dual-stack LAN (each agent answers each query on each family). An
    /// instance heard only over this family (an IPv6-only agent), or only by
    /// multicast (its family unknown), keeps both going, and so does an
    /// empty table: nothing tells yet that the other family reaches every
    /// agent.
    pub(super) fn family_adds_nothing(&self, v6: bool) -> bool {
        let (this, other) = if v6 {
            (V6_LEGACY, V4_LEGACY)
        } else {
            (V4_LEGACY, V6_LEGACY)
        };
        let mut live = self.instances.iter().filter(|i| !i.removed).peekable();
        live.peek().is_some()
            && self.instances.iter().any(|i| i.families & this != 0)
            && live.all(|i| i.families & other != 0)
    }

    /// Whether no responder has answered at all: no instance, live or gone.
    pub(super) fn heard_nothing(&self) -> bool {
        self.instances.is_empty()
    }

    /// The early-stop test (see the [`mdns`](super) docs): at least one instance, and
    /// every instance answered every early round, on every interface it
    /// answered on at all, and is resolved. An agent on two of this host's
    /// links whose answers on the second are still on their way (a loaded
    /// box answers one socket after the other) would otherwise be written
    /// at the first link's address in one run and by the address rule over
    /// both links in the next.
    pub(super) fn clean(&self) -> bool {
        let mut live = self.instances.iter().filter(|i| !i.removed).peekable();
        live.peek().is_some() && live.all(|i| answered_all(i) && i.complete_at.is_some())
    }

    /// (early queries answered, early queries asked) over the live
    /// instances, counting only the early rounds that reached the network,
    /// when any instance is live: the measured answer rate. Instances heard
    /// only by multicast count as answering none.
    pub(super) fn answer_rate(&self) -> Option<(usize, usize)> {
        let live: Vec<&Instance> = self.instances.iter().filter(|i| !i.removed).collect();
        if live.is_empty() {
            return None;
        }
        let out = (self.delivered as u32) & ((1 << EARLY_ROUNDS) - 1);
        let answered = live
            .iter()
            .map(|i| (i.early & out).count_ones() as usize)
            .sum();
        Some((answered, live.len() * out.count_ones() as usize))
    }

    /// Responders expected to be still unheard after the first `matured`
    /// legacy rounds ([`expected_unheard`]; each round that reached the
    /// network is a chance); `None` while nothing was heard or an instance
    /// heard is not yet resolved (it is not done either way).
    pub(super) fn expected_missing(&self, matured: usize) -> Option<f64> {
        let (answered, asked) = self.answer_rate()?;
        let mut live = self.instances.iter().filter(|i| !i.removed);
        if !live.all(|i| i.complete_at.is_some()) {
            return None;
        }
        let mask = if matured >= 64 {
            u64::MAX
        } else {
            (1u64 << matured) - 1
        };
        Some(expected_unheard(
            self.heard(),
            answered,
            asked,
            (self.delivered & mask).count_ones(),
        ))
    }

    /// Why [`Table::clean`] is false, in words for the report.
    pub(super) fn why_not_clean(&self) -> String {
        let all_rounds = (1u32 << EARLY_ROUNDS) - 1;
        let live: Vec<&Instance> = self.instances.iter().filter(|i| !i.removed).collect();
        if live.is_empty() {
            return "nothing answered, so it listened the whole window".into();
        }
        let missed = live.iter().filter(|i| i.early != all_rounds).count();
        let one_link = live
            .iter()
            .filter(|i| i.early == all_rounds && !answered_all(i))
            .count();
        let unresolved = live.iter().filter(|i| i.complete_at.is_none()).count();
        let mut parts = Vec::new();
        if missed > 0 {
            parts.push(format!(
                "{missed} of {} missed an early query (packet loss, or a responder that ignores legacy queries)",
                live.len()
            ));
        }
        if one_link > 0 {
            parts.push(format!(
                "{one_link} of {} missed an early query on one of its links",
                live.len()
            ));
        }
        if unresolved > 0 {
            parts.push(format!("{unresolved} not fully resolved"));
        }
        if parts.is_empty() {
            "answers were still arriving".into()
        } else {
            parts.join("; ")
        }
    }
}

/// Whether `i` answered every early round on every interface it answered on.
fn answered_all(i: &Instance) -> bool {
    let all_rounds = (1u32 << EARLY_ROUNDS) - 1;
    i.early == all_rounds && i.early_on.iter().all(|&(_, mask)| mask == all_rounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::mdns::browser::BrowserEvent;
    use crate::sources::mdns::fixtures::{eth0, reply, GOOD};
    use std::time::Instant;

    /// Builds a table of `n` resolved agents that answered the early rounds
    /// in `early` (bit per round), with `delivered` rounds marked as having
    /// reached the network.
    fn table_of(n: usize, early: &[u32], delivered: u64) -> Table {
        let mut t = Table::new(vec![eth0()]);
        for k in 0..n {
            let i = t.instance(&format!("a{k}"), None).unwrap();
            t.instances[i].early = early[k % early.len()];
            t.instances[i].complete_at = Some(Instant::now());
        }
        t.delivered = delivered;
        t
    }

    #[test]
    fn an_early_stop_needs_every_instance_to_answer_every_early_round() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        assert!(!t.clean(), "an empty browse never stops early");
        for r in 0..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                r,
                t0,
            );
        }
        assert!(t.clean());
        // A second instance that missed round 1.
        for r in [0, 2] {
            t.apply_reply(
                &reply(7, "b", "b.local.", 9100, GOOD, &["10.9.1.6"]),
                0,
                r,
                t0,
            );
        }
        assert!(!t.clean());
        assert!(
            t.why_not_clean().contains("1 of 2 missed"),
            "{}",
            t.why_not_clean()
        );
    }

    #[test]
    fn an_agent_on_two_links_must_answer_every_early_round_on_both_before_an_early_stop() {
        let mut eth1 = eth0();
        eth1.name = "eth1".into();
        eth1.index = 3;
        eth1.addrs = vec!["10.77.0.1/24".parse().unwrap()];
        let mut t = Table::new(vec![eth0(), eth1]);
        let t0 = Instant::now();
        for r in 0..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                r,
                t0,
            );
        }
        // Its first answer on the second link is in, the rest still late.
        t.apply_reply(
            &reply(7, "a", "a.local.", 9100, GOOD, &["10.77.0.5"]),
            1,
            0,
            t0,
        );
        assert!(!t.clean(), "the second link's answers are still due");
        assert!(
            t.why_not_clean().contains("on one of its links"),
            "{}",
            t.why_not_clean()
        );
        for r in 1..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.77.0.5"]),
                1,
                r,
                t0,
            );
        }
        assert!(t.clean());
    }

    #[test]
    fn an_instance_known_only_from_multicast_prevents_an_early_stop() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        for r in 0..EARLY_ROUNDS {
            t.apply_reply(
                &reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]),
                0,
                r,
                t0,
            );
        }
        t.apply_event(&BrowserEvent::Found("quiet._rlx._tcp.local.".into()), t0);
        assert!(!t.clean());
    }

    #[test]
    fn only_queries_that_someone_answered_count_as_chances() {
        // 20 agents, every one answered the early rounds 0 and 2; round 1
        // was lost on our own link (nobody answered it).
        let t = table_of(20, &[0b101], 0b101);
        assert_eq!(t.answer_rate(), Some((40, 40)));
        // Rounds 3..=9 matured, none answered: only two chances.
        let two = t.expected_missing(10).unwrap();
        assert_eq!(two, expected_unheard(20, 40, 40, 2));
        let mut more = t;
        more.delivered |= 0b11_1111_1000;
        assert!(more.expected_missing(10).unwrap() < two);
    }

    #[test]
    fn an_unresolved_instance_leaves_nothing_to_estimate() {
        let mut t = table_of(5, &[0b111], 0b111);
        t.instances[2].complete_at = None;
        assert_eq!(t.expected_missing(3), None);
        assert_eq!(table_of(0, &[0], 0).expected_missing(3), None);
    }

    /// Guards against querying both families on a dual-stack LAN for the
    /// whole browse when one of them reaches every agent,
    /// and against dropping the family an IPv6-only agent needs.
    #[test]
    fn a_family_is_dropped_only_when_the_other_reaches_every_instance() {
        let mut t = table_of(4, &[0b111], 0b111);
        assert!(!t.family_adds_nothing(true), "nothing heard by family yet");
        for i in &mut t.instances {
            i.families = V4_LEGACY | V6_LEGACY;
        }
        assert!(t.family_adds_nothing(true), "IPv6 adds nothing");
        assert!(t.family_adds_nothing(false), "nor does IPv4");
        // An IPv6-only agent: IPv6 is needed, IPv4 still adds nothing.
        t.instances[3].families = V6_LEGACY;
        assert!(!t.family_adds_nothing(true));
        assert!(t.family_adds_nothing(false));
        // An agent heard only by multicast: its family is unknown.
        t.instances[3].families = 0;
        assert!(!t.family_adds_nothing(true));
        assert!(!t.family_adds_nothing(false));
        // An IPv4-only LAN with an IPv6 socket that nobody answers: the
        // IPv6 queries cost no replies, and nothing says they add nothing.
        for i in &mut t.instances {
            i.families = V4_LEGACY;
        }
        assert!(!t.family_adds_nothing(true));
    }

    #[test]
    fn later_queries_leave_sentinels_out_of_their_known_answers() {
        const SENTINELS: usize = 2;
        let t = table_of(5, &[0b111], 0b111);
        assert_eq!(t.known_answers(4, 0).len(), 5);
        assert_eq!(t.known_answers(4, SENTINELS).len(), 5 - SENTINELS);
        // The sentinels rotate: over rounds, every agent takes a turn.
        let mut left_out = std::collections::BTreeSet::new();
        let all: Vec<Vec<u8>> = t.known_answers(0, 0);
        for r in 0..10 {
            let listed = t.known_answers(r, SENTINELS);
            left_out.extend(all.iter().filter(|l| !listed.contains(l)).cloned());
        }
        assert_eq!(left_out.len(), 5);
    }
}
