//! **Who gets in** — the handshake check every network-found sighting passes
//! before it can become a node, applying the trust rules of DESIGN.md.
//!
//! mDNS caches outlive dead machines and anyone on a LAN can announce
//! `_rlx._tcp` or listen on port 9100, so a sighting from mDNS or a subnet
//! scan is only a claim. Here each claim is checked against the machine
//! itself, concurrently:
//!
//! - **no key**: the handshake's fresh caps replace the announced ones; a port
//!   that accepts TCP but does not speak the handshake keeps what it had (TXT
//!   caps, or none); an unreachable one is reported and left out.
//! - **key**: only a node that proves the key over our fresh nonce is
//!   admitted, with the caps from that authenticated reply, never from TXT.
//!   Everything else is refused with the reason (no handshake, no proof,
//!   wrong key, replay, id mismatch).
//!
//! SSH-found nodes are trusted by SSH itself and pass through untouched.
//! `cluster` filtering is applied to every source; it is a filter for
//! keeping neighbouring clusters apart, not security.

use crate::handshake::{query_in_cluster, HandshakeError};
use crate::keys::KeyRing;
use crate::sighting::{Discovery, Evidence, Problem, Sighting, Source};
use futures::stream::{self, StreamExt};
use std::net::SocketAddr;
use std::time::Duration;

/// Most nodes checked at once. Each check is up to [`ATTEMPTS`] short TCP
/// exchanges, and a hostile peer can make each hold a reply buffer of up to
/// [`crate::handshake::MAX_REPLY_BYTES`]; 64 nodes keep that under about
/// 32 MiB in the worst case (measured: 256 let a flood of bogus announcements
/// push the coordinator to 160 MiB) while a rack of real agents, answering
/// in milliseconds, still clears in one or two rounds.
pub const DEFAULT_HANDSHAKE_CONCURRENCY: usize = 64;

/// Handshake attempts per node, started [`STAGGER`] apart while earlier
/// ones are still waiting. A lost SYN costs Linux a whole second before it
/// retransmits (the initial RTO, RFC 6298), so on a lossy LAN a single
/// connect fails about as often as a packet is lost; a fresh connect 250 ms
/// later sends a fresh SYN instead. Eight attempts, each long enough for one
/// kernel retransmission ([`MIN_ATTEMPT`]), leave a live node at 20% loss
/// each way about one chance in ten million of looking dead (measured with
/// four 1 s attempts: 1-2 of 50 live nodes refused per run), while a dead
/// one is given up after about 3.3 s.
pub const ATTEMPTS: usize = 4;

/// Shortest deadline of one handshake attempt: past the kernel's first SYN
/// retransmission at 1 s. `timeout_ms` is used when longer.
pub const MIN_ATTEMPT: Duration = Duration::from_millis(1500);

/// Delay between handshake attempts (see [`ATTEMPTS`]).
pub const STAGGER: Duration = Duration::from_millis(250);

/// Whether an error settles the question (the node answered, or refused),
/// as opposed to a packet that may just have been lost.
fn is_final(e: &HandshakeError) -> bool {
    use crate::handshake::ConnectFailure;
    match e {
        HandshakeError::Unreachable { why, .. } => matches!(why, ConnectFailure::Refused),
        HandshakeError::NotRlx { why, .. } => !why.contains("within"),
        _ => true,
    }
}

/// Runs up to [`ATTEMPTS`] handshakes [`STAGGER`] apart and returns the first
/// answer that settles the question; if none does, the last attempt's error.
async fn query_staggered(
    addr: SocketAddr,
    rules: &Rules,
    expect_id: Option<&str>,
) -> Result<crate::handshake::HandshakeReply, HandshakeError> {
    use futures::stream::FuturesUnordered;
    let mut running = FuturesUnordered::new();
    for k in 0..ATTEMPTS {
        let keys = rules.keys.as_ref();
        let cluster = rules.cluster.as_deref();
        running.push(async move {
            tokio::time::sleep(STAGGER * k as u32).await;
            query_in_cluster(addr, rules.timeout, keys, expect_id, cluster).await
        });
    }
    let mut last = None;
    while let Some(r) = running.next().await {
        match r {
            Ok(reply) => return Ok(reply),
            Err(e) if is_final(&e) => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

/// The rules a sighting is admitted under.
#[derive(Debug, Clone)]
pub struct Rules {
    /// With a key ring, nodes must prove one of its keys.
    pub keys: Option<KeyRing>,
    /// Only nodes announcing this cluster name.
    pub cluster: Option<String>,
    /// Deadline for one whole handshake.
    pub timeout: Duration,
    /// Most handshakes in flight.
    pub concurrency: usize,
}

/// Outcome for one sighting.
enum Verdict {
    Admit(Box<Sighting>),
    Refuse(Problem),
}

fn refuse(s: &Sighting, reason: String) -> Verdict {
    Verdict::Refuse(Problem {
        source: s.source,
        host: s.host.clone(),
        reason,
    })
}

/// Checks one sighting.
async fn check(mut s: Sighting, rules: &Rules) -> Verdict {
    // A node announcing another cluster in TXT is refused before we spend a
    // handshake on it (and reported as what it is, not as a key mismatch).
    if let (Some(want), Some(caps)) = (&rules.cluster, &s.caps) {
        if let Some(why) = cluster_mismatch(caps.cluster.as_deref(), want) {
            return refuse(&s, why);
        }
    }
    if s.source != Source::Ssh {
        let Some(ip) = s.ip else {
            return refuse(&s, "no address to check it at".into());
        };
        let addr = SocketAddr::new(ip, s.port);
        let announced_id = s.id().map(str::to_string);
        match query_staggered(addr, rules, announced_id.as_deref()).await {
            Ok(reply) => {
                s.caps = Some(reply.caps);
                s.evidence = if rules.keys.is_some() {
                    Evidence::Authenticated
                } else {
                    Evidence::Handshake
                };
                if let Some(i) = reply.key_index.filter(|&i| i > 0) {
                    tracing::warn!(
                        host = %s.host,
                        "{} proves an older cluster key (#{} in the key file): finish the key rotation",
                        s.host,
                        i + 1
                    );
                }
            }
            // Without a key, something that listens but does not speak the
            // handshake keeps what its source knew (TXT caps, or nothing).
            Err(HandshakeError::NotRlx { why, .. } | HandshakeError::Incompatible { why, .. })
                if rules.keys.is_none() =>
            {
                tracing::debug!(host = %s.host, %why, "no handshake; keeping the source's caps");
            }
            Err(e @ HandshakeError::Unreachable { .. }) => {
                let what = match s.source {
                    Source::Mdns => "announced, but its port is unreachable (a stale mDNS record of a stopped or crashed agent?)",
                    Source::Dns => "registered in DNS, but its port is unreachable (the registration of a crashed agent, before its lease runs out?)",
                    _ => "unreachable",
                };
                return refuse(&s, format!("{what}: {e}"));
            }
            Err(e) => {
                let reason = match (&e, rules.keys.is_some()) {
                    (HandshakeError::NotRlx { .. }, true) => {
                        format!("refused: no handshake, so it cannot prove the cluster key: {e}")
                    }
                    _ => format!("refused: {e}"),
                };
                return refuse(&s, reason);
            }
        }
    }
    if let Some(want) = &rules.cluster {
        let has = s.caps.as_ref().and_then(|c| c.cluster.as_deref());
        if let Some(why) = cluster_mismatch(has, want) {
            return refuse(&s, why);
        }
    }
    Verdict::Admit(Box::new(s))
}

/// Why a node announcing cluster `has` is not admitted to cluster `want`.
fn cluster_mismatch(has: Option<&str>, want: &str) -> Option<String> {
    if has == Some(want) {
        return None;
    }
    let said = match has {
        Some(c) => format!("announces cluster {c:?}"),
        None => "announces no cluster name".to_string(),
    };
    Some(format!(
        "{said}, not {want:?} (start its agent with --cluster {want})"
    ))
}

/// Applies the rules to every sighting of `d`, concurrently; refused ones
/// move to `d.problems` with their reasons.
pub async fn admit(d: Discovery, rules: &Rules) -> Discovery {
    let Discovery {
        sightings,
        mut problems,
        attempts,
    } = d;
    let verdicts: Vec<Verdict> = stream::iter(sightings)
        .map(|s| check(s, rules))
        .buffered(rules.concurrency.max(1))
        .collect()
        .await;
    let mut admitted = Vec::new();
    for v in verdicts {
        match v {
            Verdict::Admit(s) => admitted.push(*s),
            Verdict::Refuse(p) => problems.push(p),
        }
    }
    Discovery {
        sightings: admitted,
        problems,
        attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::NodeCaps;

    fn txt_sighting(cluster: Option<&str>) -> Sighting {
        Sighting {
            source: Source::Mdns,
            host: "box".into(),
            // Port 9 on TEST-NET-1: never dialled, since the cluster check
            // refuses before any handshake.
            addr: "192.0.2.1:9".into(),
            ip: Some("192.0.2.1".parse().unwrap()),
            port: 9,
            ssh: None,
            caps: Some(NodeCaps {
                cores: 4,
                cluster: cluster.map(str::to_string),
                ..Default::default()
            }),
            evidence: Evidence::Txt,
            heard_on: Some("eth0".into()),
            found_ms: 1,
        }
    }

    fn rules(cluster: &str) -> Rules {
        Rules {
            keys: None,
            cluster: Some(cluster.into()),
            timeout: Duration::from_millis(10),
            concurrency: 1,
        }
    }

    /// `cluster` is a filter: an agent announcing another cluster (or none)
    /// is refused with the reason, before a handshake is spent on it.
    #[tokio::test]
    async fn an_agent_of_another_cluster_is_refused_by_name_without_a_handshake() {
        let d = Discovery {
            sightings: vec![txt_sighting(Some("prod")), txt_sighting(None)],
            ..Default::default()
        };
        let out = admit(d, &rules("lab")).await;
        assert!(out.sightings.is_empty());
        assert_eq!(out.problems.len(), 2);
        assert!(
            out.problems[0].reason.contains("\"prod\", not \"lab\""),
            "{}",
            out.problems[0].reason
        );
        assert!(
            out.problems[1].reason.contains("no cluster name"),
            "{}",
            out.problems[1].reason
        );
        assert!(out.problems[1].reason.contains("--cluster lab"));
    }

    #[test]
    fn only_timeouts_leave_the_handshake_question_open() {
        use crate::handshake::ConnectFailure;
        let addr: SocketAddr = "192.0.2.1:9".parse().unwrap();
        let timed_out = HandshakeError::Unreachable {
            addr,
            why: ConnectFailure::TimedOut(Duration::from_secs(1)),
        };
        let refused = HandshakeError::Unreachable {
            addr,
            why: ConnectFailure::Refused,
        };
        let no_reply = HandshakeError::NotRlx {
            addr,
            why: "no reply within 1000 ms".into(),
        };
        let closed = HandshakeError::NotRlx {
            addr,
            why: "closed the connection without replying".into(),
        };
        assert!(
            !is_final(&timed_out) && !is_final(&no_reply),
            "a lost packet: try again"
        );
        assert!(
            is_final(&refused) && is_final(&closed),
            "an answer: no retry"
        );
        assert!(is_final(&HandshakeError::WrongKey { addr, keys: 1 }));
    }
}
