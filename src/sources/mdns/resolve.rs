//! **The instance table read out as sightings** — what each instance
//! amounts to: a [`Sighting`] (through the shared DNS-SD resolver,
//! [`crate::sources::dnssd`]), a [`Problem`] saying which record is missing
//! or malformed, or still pending.

use super::options::BrowseOptions;
use super::options::DialPolicy;
use super::schedule::ms;
use super::table::{Table, Txt};
use super::wire::{host_key, on_link};
use crate::sighting::{Problem, Sighting, Source};
use crate::sources::dnssd::{Path, Records, MAX_TXT_BYTES};
use std::time::Instant;

impl Table {
    /// Turns the table into sightings and problems, in the order heard.
    pub(super) fn finish(
        &self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
    ) -> (Vec<Sighting>, Vec<Problem>) {
        self.snapshot(opts, started, deadline, true)
    }

    /// [`Table::finish`]; with `settled = false` (a continuous browse),
    /// instances still missing a record are pending, not problems.
    pub(super) fn snapshot(
        &self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
        settled: bool,
    ) -> (Vec<Sighting>, Vec<Problem>) {
        let mut sightings = Vec::new();
        let mut problems = Vec::new();
        for i in 0..self.instances.len() {
            match self.entry(i, opts, started, deadline, settled) {
                Entry::Found(s) => sightings.push(*s),
                Entry::Problem(p) => problems.push(p),
                Entry::Pending => {}
            }
        }
        (sightings, problems)
    }

    /// Sightings of the instances resolved since the last call, for
    /// [`BrowseOptions::on_resolved`]. (An address that changes later is
    /// not passed on again: the sighting at the end of the browse carries
    /// the final one, and admission checks that.)
    pub(super) fn take_resolved(
        &mut self,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
    ) -> Vec<Sighting> {
        std::mem::take(&mut self.newly_resolved)
            .into_iter()
            .filter_map(|i| match self.entry(i, opts, started, deadline, false) {
                Entry::Found(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// What instance `i` amounts to now: a sighting, a problem, or (when
    /// not `settled`) still pending.
    fn entry(
        &self,
        i: usize,
        opts: &BrowseOptions,
        started: Instant,
        deadline: Instant,
        settled: bool,
    ) -> Entry {
        let window = opts.browse.as_millis();
        let inst = &self.instances[i];
        // A goodbye is a claim anyone can send (RFC 6762 §10.1 records with
        // TTL 0, forged or not): a continuous browse passes it on for
        // `watch` to check, and a one-shot browse, once settled, still
        // hands the instance to admission, whose handshake tells a stopped
        // agent (refused, with its reason) from a live one a stranger said
        // goodbye for. Never silently dropped: that made a live node
        // missing, and `--prune` cut it from the file.
        if inst.removed && !settled {
            return Entry::Pending;
        }
        let problem = |reason: String| {
            Entry::Problem(Problem::stranger(Source::Mdns, inst.label.clone(), reason))
        };
        let on = inst
            .heard_on
            .map(|k| self.ifaces[k].name.as_str())
            .unwrap_or("?");
        let Some(srv) = &inst.srv else {
            if !settled {
                return Entry::Pending;
            }
            return problem(format!(
                "announced on {on}, but its SRV record (port and host) did not arrive \
                 within the {window} ms browse; a longer browse_ms may help"
            ));
        };
        let Some((ip, k)) = self.chosen(i) else {
            if !settled {
                return Entry::Pending;
            }
            let heard: Vec<String> = self
                .hosts
                .get(&host_key(&srv.host))
                .map(|a| a.iter().map(|(ip, _)| ip.to_string()).collect())
                .unwrap_or_default();
            return problem(if heard.is_empty() {
                format!(
                    "host {} (port {}) announced on {on}, but no address for it arrived \
                     within the {window} ms browse",
                    srv.host, srv.port
                )
            } else {
                format!(
                    "host {} (port {}) announced only unusable addresses ({}) on {on}",
                    srv.host,
                    srv.port,
                    heard.join(", ")
                )
            });
        };
        if opts.dial == DialPolicy::OnLinkOrSource
            && !self.vouched(i)
            && !self.ifaces.iter().any(|f| on_link(&ip, f))
        {
            return problem(format!(
                "announced address {ip} is not on the subnet of a browsed interface and did \
                 not send the announcement; with a cluster key only those are dialled (a \
                 relay or a stranger may be pointing discovery elsewhere; [discover] \
                 dial_off_link = true allows it)"
            ));
        }
        let (strings, decoded) = match &inst.txt {
            None if !settled => return Entry::Pending,
            None => {
                return problem(format!(
                    "host {} announced no TXT record within the {window} ms browse; \
                     TXT schema v1 needs at least `txtvers=1`",
                    srv.host
                ));
            }
            Some(Txt::TooBig(n)) => {
                return problem(format!(
                    "host {}: TXT record of {n} bytes is over the {MAX_TXT_BYTES}-byte \
                     limit of TXT schema v1; announcement ignored",
                    srv.host
                ));
            }
            Some(Txt::Strings(s, decoded)) => (s, decoded),
        };
        let records = Records {
            label: &inst.label,
            port: srv.port,
            txt: strings,
            path: Path::Link {
                iface: &self.ifaces[k],
                host: &srv.host,
            },
        };
        let caps = match records.named((**decoded).clone()) {
            Ok(c) => c,
            Err(reason) => return problem(reason),
        };
        let at = inst.routable_at.or(inst.complete_at).unwrap_or(deadline);
        let found_ms = ms(at.saturating_duration_since(started));
        Entry::Found(Box::new(records.sighting(caps, ip, found_ms)))
    }
}

/// What one instance of the table amounts to.
pub(super) enum Entry {
    Found(Box<Sighting>),
    Problem(Problem),
    /// Not resolved yet (a continuous browse), or gone.
    Pending,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sighting::Evidence;
    use crate::sources::mdns::browser::BrowserEvent;
    use crate::sources::mdns::fixtures::{eth0, opts, reply, GOOD};
    use crate::sources::mdns::wire::lenient_message;
    use hickory_proto::op::Message;
    use std::time::Duration;

    /// Guards against a prune from a forged goodbye: a goodbye (anyone's)
    /// during a one-shot browse made a live node missing, and `--prune` cut
    /// it. The instance still goes to admission at the end (its handshake
    /// tells), while a continuous browse leaves it to `watch`'s own check.
    #[test]
    fn an_instance_said_goodbye_for_during_a_one_shot_browse_still_goes_to_admission() {
        let mut t = Table::new(vec![eth0()]);
        let m = reply(7, "box", "box.local.", 9100, GOOD, &["10.9.1.5"]);
        let t0 = Instant::now();
        assert!(t.apply_reply(&m, 0, 0, t0));
        t.apply_event(&BrowserEvent::Removed("box._rlx._tcp.local.".into()), t0);
        let (s, p) = t.finish(&opts(), t0, t0 + Duration::from_secs(2));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(s.len(), 1, "handed to admission, not dropped");
        let (s, _) = t.snapshot(&opts(), t0, t0 + Duration::from_secs(2), false);
        assert!(
            s.is_empty(),
            "a continuous browse passes the goodbye on instead"
        );
    }

    #[test]
    fn one_legacy_reply_resolves_an_instance_with_caps_port_and_the_address_on_the_heard_subnet() {
        let mut t = Table::new(vec![eth0()]);
        let m = reply(
            7,
            "box",
            "box.local.",
            9100,
            GOOD,
            &["fe80::2", "192.168.7.7", "10.9.1.5"],
        );
        let t0 = Instant::now();
        assert!(t.apply_reply(&m, 0, 0, t0));
        let (s, p) = t.finish(&opts(), t0, t0 + Duration::from_secs(2));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(s.len(), 1);
        let s = &s[0];
        assert_eq!(s.host, "box");
        assert_eq!(s.addr, "10.9.1.5:9100", "the address on eth0's subnet wins");
        assert_eq!(s.port, 9100);
        assert_eq!(s.heard_on.as_deref(), Some("eth0"));
        assert_eq!(s.evidence, Evidence::Txt);
        let caps = s.caps.as_ref().unwrap();
        assert_eq!(caps.cores, 16);
        assert_eq!(caps.hostname, "box");
        assert_eq!(caps.devices[0].mem_bytes, 25769803776);
    }

    /// Guards against a stranger pointing a keyed `expand` at an address
    /// of its choosing: with a key only on-link addresses, or the
    /// announcer's own, are dialled (the rule is the library's, for every entry point).
    #[test]
    fn with_the_on_link_policy_an_off_link_address_is_refused_unless_it_announced_itself() {
        let on_link = BrowseOptions {
            dial: DialPolicy::OnLinkOrSource,
            ..opts()
        };
        let t0 = Instant::now();
        let far = reply(7, "far", "far.local.", 9100, GOOD, &["203.0.113.5"]);
        let mut t = Table::new(vec![eth0()]);
        t.apply_reply_from(&far, Some("10.9.1.7".parse().unwrap()), 0, 0, t0);
        let (s, p) = t.finish(&on_link, t0, t0);
        assert!(s.is_empty(), "{s:?}");
        assert!(p[0].reason.contains("not on the subnet"), "{p:?}");
        let (s, _) = t.finish(&opts(), t0, t0);
        assert_eq!(s.len(), 1, "without a key (Any) it is dialled");
        let mut t = Table::new(vec![eth0()]);
        t.apply_reply_from(&far, Some("203.0.113.5".parse().unwrap()), 0, 0, t0);
        let (s, p) = t.finish(&on_link, t0, t0);
        assert_eq!(
            (s.len(), p.len()),
            (1, 0),
            "it sent the announcement itself: {p:?}"
        );
    }

    #[test]
    fn an_ipv6_only_instance_gets_a_bracketed_routable_address() {
        let mut t = Table::new(vec![eth0()]);
        let m = reply(
            7,
            "v6box",
            "v6box.local.",
            9100,
            GOOD,
            &["fe80::9", "fd52::9"],
        );
        let t0 = Instant::now();
        t.apply_reply(&m, 0, 0, t0);
        let (s, _) = t.finish(&opts(), t0, t0);
        assert_eq!(s[0].addr, "[fd52::9]:9100");
    }

    #[test]
    fn a_malformed_announcement_is_a_problem_naming_the_key_and_instance_and_spares_the_others() {
        let mut t = Table::new(vec![eth0()]);
        let t0 = Instant::now();
        t.apply_reply(
            &reply(7, "good", "good.local.", 9100, GOOD, &["10.9.1.5"]),
            0,
            0,
            t0,
        );
        t.apply_reply(
            &reply(
                7,
                "bad",
                "bad.local.",
                9100,
                &["txtvers=1", "cores=abc"],
                &["10.9.1.6"],
            ),
            0,
            0,
            t0,
        );
        let (s, p) = t.finish(&opts(), t0, t0);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].host, "good");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].host, "bad");
        for needle in ["`cores`", "bad", "bad.local."] {
            assert!(
                p[0].reason.contains(needle),
                "{needle:?} missing: {}",
                p[0].reason
            );
        }
    }

    #[test]
    fn a_txt_record_over_the_cap_is_refused() {
        let mut t = Table::new(vec![eth0()]);
        let big = format!("pad={}", "x".repeat(250));
        let mut strings: Vec<&str> = GOOD.to_vec();
        for _ in 0..6 {
            strings.push(&big);
        }
        let t0 = Instant::now();
        t.apply_reply(
            &reply(7, "fat", "fat.local.", 9100, &strings, &["10.9.1.5"]),
            0,
            0,
            t0,
        );
        let (s, p) = t.finish(&opts(), t0, t0);
        assert!(s.is_empty());
        assert!(p[0].reason.contains("1300-byte"), "{}", p[0].reason);
    }

    /// python-zeroconf 0.47 writes NSEC records hickory-proto refuses; the
    /// PTR, SRV, TXT and A beside one must still be read.
    #[test]
    fn a_reply_with_an_undecodable_record_keeps_the_records_beside_it() {
        use hickory_proto::serialize::binary::BinEncodable;
        let good = reply(7, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]);
        let mut bytes = good.to_bytes().unwrap();
        // One more additional record: root name, type NSEC (47), class IN,
        // TTL 10, and 3 bytes of data that are no valid NSEC.
        bytes.extend_from_slice(&[0, 0, 47, 0, 1, 0, 0, 0, 10, 0, 3, 0xff, 0xff, 0xff]);
        let adds = u16::from_be_bytes([bytes[10], bytes[11]]) + 1;
        bytes[10..12].copy_from_slice(&adds.to_be_bytes());
        assert!(
            Message::from_vec(&bytes).is_err(),
            "hickory refuses the whole message"
        );
        let m = lenient_message(&bytes).expect("the rest decodes");
        assert_eq!(m.answers().len(), good.answers().len());
        assert_eq!(m.additionals().len(), good.additionals().len());
        let mut t = Table::new(vec![eth0()]);
        t.apply_reply(&m, 0, 0, Instant::now());
        let (s, _) = t.finish(&opts(), Instant::now(), Instant::now());
        assert_eq!(s.len(), 1, "the instance resolves from the good records");
    }
}
