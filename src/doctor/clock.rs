//! **The `clock` check**: how far each agent heard is from this machine's
//! clock, read off one handshake each ([`rlx_proto::handshake::ClockOffset`]).
//!
//! Discovery itself does not need agreeing clocks. What does: TSIG-signed
//! DNS-SD registrations (`rlx-agent --register` with a key), which a DNS
//! server refuses when the signer's clock is further off than the fudge
//! the agents sign with (RFC 8945 §5.2.3; [`TSIG_FUDGE`]), and every log line and trace the runtime puts
//! side by side across machines. So a clock more than [`WARN_AFTER`] off
//! is a warning with the fix, and one past the TSIG fudge fails when this
//! cluster registers in DNS. The comparison is with this machine, which may
//! itself be the one that is off: the fix says to check both.

use crate::admit::Rules;
use crate::escape::untrusted;
use futures::stream::{self, StreamExt};
use rlx_net::check::{Check, Status};
use rlx_proto::handshake::{query_in_cluster, ClockOffset};
use std::net::SocketAddr;
use std::time::Duration;

/// An offset (beyond the reading's own uncertainty) worth a warning.
pub(super) const WARN_AFTER: Duration = Duration::from_secs(1);

/// The TSIG fudge agents sign with: past this a signed DNS update is
/// refused (BADTIME).
pub(super) const TSIG_FUDGE: Duration = Duration::from_secs(rlx_proto::dnssd::TSIG_FUDGE as u64);

/// Clock readings asked for at once (one short handshake each).
const CONCURRENCY: usize = 16;

/// What one agent's handshake said of its clock.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reading {
    /// The offset, read.
    Offset(ClockOffset),
    /// The agent answered without a time (it predates `time_ms`).
    NoTime,
    /// The second handshake failed (it answered the first moments ago).
    Failed(String),
}

/// Reads the clock of each `(name, address, id)` with one handshake under
/// `rules` (its key and cluster).
pub(super) async fn read(
    agents: &[(String, SocketAddr, Option<String>)],
    rules: &Rules,
) -> Vec<(String, Reading)> {
    stream::iter(agents.iter().cloned())
        .map(|(name, addr, id)| async move {
            let r = query_in_cluster(
                addr,
                rules.timeout,
                rules.keys.as_ref(),
                id.as_deref(),
                rules.cluster.as_deref(),
            )
            .await;
            let reading = match r {
                Ok(reply) => reply.clock.map_or(Reading::NoTime, Reading::Offset),
                Err(e) => Reading::Failed(e.to_string()),
            };
            (name, reading)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// `+1.234 s (± 2 ms)`.
fn offset_text(c: &ClockOffset) -> String {
    let sign = if c.offset_ms < 0 { '-' } else { '+' };
    let abs = c.offset_ms.unsigned_abs();
    let size = if abs >= 1000 {
        format!("{}.{:03} s", abs / 1000, abs % 1000)
    } else {
        format!("{abs} ms")
    };
    format!("{sign}{size} (± {} ms)", c.within_ms)
}

/// The `clock` check from the readings; `registers_in_dns` when the
/// cluster uses DNS-SD, where a clock past the TSIG fudge breaks it.
pub(super) fn judge(readings: &[(String, Reading)], registers_in_dns: bool) -> Check {
    let mut offsets: Vec<(String, &ClockOffset)> = Vec::new();
    let mut unread: Vec<String> = Vec::new();
    for (name, r) in readings {
        // The agent's instance label: anyone's text, printed on a terminal.
        let name = untrusted(name);
        match r {
            Reading::Offset(c) => offsets.push((name, c)),
            Reading::NoTime => unread.push(format!("{name}: its agent sends no time (upgrade it)")),
            Reading::Failed(e) => unread.push(format!("{name}: {e}")),
        }
    }
    if offsets.is_empty() {
        let detail = if unread.is_empty() {
            "no agent heard, none to compare with".to_string()
        } else {
            format!("not read: {}", unread.join("; "))
        };
        return Check::new("clock", Status::Skip, detail);
    }
    offsets.sort_by_key(|(_, c)| std::cmp::Reverse(c.at_least_ms()));
    let warn_ms = WARN_AFTER.as_millis() as u64;
    let fudge_ms = TSIG_FUDGE.as_millis() as u64;
    let off: Vec<String> = offsets
        .iter()
        .filter(|(_, c)| c.at_least_ms() > warn_ms)
        .map(|(n, c)| format!("{n} {}", offset_text(c)))
        .collect();
    let mut detail = if off.is_empty() {
        let (worst, c) = &offsets[0];
        format!(
            "{} agent(s) within {} s of this clock; the farthest: {worst} {}",
            offsets.len(),
            WARN_AFTER.as_secs(),
            offset_text(c)
        )
    } else {
        format!(
            "{} of {} agent(s) more than {} s off this clock: {}",
            off.len(),
            offsets.len(),
            WARN_AFTER.as_secs(),
            off.join(", ")
        )
    };
    if !unread.is_empty() {
        detail.push_str(&format!("; not read: {}", unread.join("; ")));
    }
    if off.is_empty() {
        return Check::new("clock", Status::Ok, detail);
    }
    let past_fudge = offsets[0].1.at_least_ms() > fudge_ms;
    let status = if past_fudge && registers_in_dns {
        Status::Fail
    } else {
        Status::Warn
    };
    let mut fix = String::from(
        "run NTP on both machines (`timedatectl set-ntp true`, or chrony: `chronyc tracking` \
         shows the offset); the comparison is with this machine, which may be the one that is off",
    );
    if past_fudge {
        fix.push_str(&format!(
            "; past {} s a DNS server refuses that agent's TSIG-signed registrations (BADTIME)",
            TSIG_FUDGE.as_secs()
        ));
    }
    Check::new("clock", status, detail).fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset_ms: i64, within_ms: u64) -> Reading {
        Reading::Offset(ClockOffset {
            offset_ms,
            within_ms,
        })
    }

    #[test]
    fn agents_within_a_second_are_ok_and_the_farthest_is_named() {
        let c = judge(&[("a".into(), at(3, 1)), ("b".into(), at(-420, 2))], false);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.detail.contains("b -420 ms (± 2 ms)"), "{}", c.detail);
    }

    #[test]
    fn an_agent_seconds_off_is_a_warning_with_the_ntp_fix() {
        let c = judge(
            &[("a".into(), at(0, 1)), ("b".into(), at(45_010, 2))],
            false,
        );
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.detail.contains("1 of 2") && c.detail.contains("b +45.010 s"),
            "{}",
            c.detail
        );
        assert!(c.fix.as_deref().unwrap().contains("timedatectl"), "{c:?}");
    }

    #[test]
    fn an_offset_the_round_trip_could_explain_is_no_warning() {
        let c = judge(&[("slow".into(), at(1_400, 600))], false);
        assert_eq!(c.status, Status::Ok, "{c:?}");
    }

    #[test]
    fn past_the_tsig_fudge_fails_only_where_the_cluster_registers_in_dns() {
        let r = [("a".into(), at(-400_000, 1))];
        assert_eq!(judge(&r, false).status, Status::Warn);
        let c = judge(&r, true);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.as_deref().unwrap().contains("BADTIME"), "{c:?}");
    }

    /// Guards against judging by RFC 8945's suggested 300 s: the agents
    /// sign with a 60 s fudge, so 90 s off already breaks registration.
    #[test]
    fn the_fudge_judged_against_is_the_one_agents_sign_with() {
        let c = judge(&[("a".into(), at(90_000, 1))], true);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        let c = judge(&[("a".into(), at(50_000, 1))], true);
        assert_eq!(c.status, Status::Warn, "{c:?}");
    }

    /// Guards against an instance label that forges a line of the report.
    #[test]
    fn an_agent_name_with_a_newline_stays_on_its_line() {
        let c = judge(&[("a\nok    clock  fine".into(), at(3, 1))], false);
        assert!(!c.detail.contains('\n'), "{}", c.detail);
        assert!(c.detail.contains("\"a\\nok"), "{}", c.detail);
    }

    #[test]
    fn agents_that_could_not_be_read_are_named_not_dropped() {
        let c = judge(
            &[
                ("a".into(), at(1, 1)),
                ("old".into(), Reading::NoTime),
                ("gone".into(), Reading::Failed("gone: refused".into())),
            ],
            false,
        );
        assert_eq!(c.status, Status::Ok);
        assert!(
            c.detail.contains("old: its agent sends no time"),
            "{}",
            c.detail
        );
        assert!(c.detail.contains("gone: refused"), "{}", c.detail);
        let none = judge(&[("old".into(), Reading::NoTime)], false);
        assert_eq!(none.status, Status::Skip);
    }
}
