// rlx patch: RFC 6762 §7.3 duplicate question suppression (PATCHES.md §35).
//! Questions other hosts asked that this daemon was about to ask itself.
//!
//! RFC 6762 §7.3: "If a host is planning to transmit (or retransmit) a
//! query, and it sees another host on the network send a query containing
//! the same 'QM' question, and the Known-Answer Section of that query does
//! not contain any records that this host would not also put in its own
//! Known-Answer Section, then this host SHOULD treat its own query as
//! having been sent." Two coordinators browsing one LAN (two `watch`es, a
//! `watch` and a Bonjour browser) then put one question on the link where
//! they put two, and every responder answers once.
//!
//! Bounded: at most [`MAX_HEARD`] questions are remembered (a flood of
//! forged questions evicts the oldest; the worst it does is make this
//! daemon skip one query per interface and name it would have sent, which
//! the other host's question already asked), and each is good for one
//! suppression within [`WINDOW`].

use crate::dns_parser::RRType;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long before our own query another host's may be: our browse
/// retransmissions are at least 1 s apart (RFC 6762 §5.2), so one heard
/// within the last second stands for the one we are about to send.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// How many (interface, name, type) questions are remembered at most.
pub(crate) const MAX_HEARD: usize = 256;

/// The questions heard, by (interface index, lower-case name, type).
#[derive(Debug, Default)]
pub(crate) struct HeardQuestions {
    heard: HashMap<(u32, String, u16), Instant>,
}

impl HeardQuestions {
    /// Another host asked `name`/`qtype` on `if_index` as a QM question
    /// with no known answer we lack.
    pub(crate) fn heard(&mut self, if_index: u32, name: &str, qtype: RRType, now: Instant) {
        if self.heard.len() >= MAX_HEARD {
            if let Some(oldest) = self
                .heard
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
            {
                self.heard.remove(&oldest);
            }
        }
        self.heard
            .insert((if_index, name.to_lowercase(), qtype as u16), now);
    }

    /// Whether our own `name`/`qtype` query on `if_index` counts as sent:
    /// another host asked it within [`WINDOW`]. Consumes the entry, so one
    /// question of theirs stands for at most one of ours.
    pub(crate) fn take(&mut self, if_index: u32, name: &str, qtype: RRType, now: Instant) -> bool {
        let key = (if_index, name.to_lowercase(), qtype as u16);
        match self.heard.remove(&key) {
            Some(t) => now.saturating_duration_since(t) <= WINDOW,
            None => false,
        }
    }

    /// How many questions are remembered (for tests and metrics).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heard.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_heard_within_the_window_stands_for_ours_once() {
        let mut h = HeardQuestions::default();
        let t0 = Instant::now();
        h.heard(2, "_RLX._tcp.local.", RRType::PTR, t0);
        assert!(
            !h.take(3, "_rlx._tcp.local.", RRType::PTR, t0),
            "another interface"
        );
        assert!(h.take(
            2,
            "_rlx._tcp.local.",
            RRType::PTR,
            t0 + Duration::from_millis(400)
        ));
        assert!(
            !h.take(
                2,
                "_rlx._tcp.local.",
                RRType::PTR,
                t0 + Duration::from_millis(500)
            ),
            "used once"
        );
        h.heard(2, "_rlx._tcp.local.", RRType::PTR, t0);
        assert!(
            !h.take(
                2,
                "_rlx._tcp.local.",
                RRType::PTR,
                t0 + WINDOW + Duration::from_millis(1)
            ),
            "too old"
        );
    }

    #[test]
    fn a_flood_of_questions_keeps_at_most_max_heard() {
        let mut h = HeardQuestions::default();
        let t0 = Instant::now();
        for i in 0..(MAX_HEARD * 4) {
            h.heard(
                2,
                &format!("_s{i}._tcp.local."),
                RRType::PTR,
                t0 + Duration::from_micros(i as u64),
            );
        }
        assert_eq!(h.len(), MAX_HEARD);
    }
}
