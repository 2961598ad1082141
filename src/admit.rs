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
//!   wrong key, replay, a proof bound to another connection (a relay or NAT
//!   in between), an older agent whose proof binds none, id mismatch).
//!
//! Then who is who: an agent that proved its own node key (caps
//! `node_key`, the reply's `node_sig`) is judged against the pins
//! ([`crate::pins`]): a node id seen for the first time is pinned to that
//! key, the pinned key is the same machine (also at a new address: a move),
//! and another key for a known id is another machine claiming it, refused
//! loudly with both fingerprints and the command that re-pins it. An agent
//! without a node key (an older agent) is admitted as before, marked
//! [`Pinning::Unpinned`], unless its id is pinned: a pinned id is admitted
//! only with a signature by its pinned key, so leaving the key out of a
//! reply cannot downgrade a pin. This is the one admission path, so `expand`,
//! `browse`, `watch` and every source (mDNS, DNS-SD, a scan) use the pins.
//!
//! SSH-found nodes are trusted by SSH itself and pass through untouched.
//! `cluster` filtering is applied to every source; it is a filter for
//! keeping neighbouring clusters apart, not security.

use crate::pins::{Pins, PinsError};
use crate::sighting::{Discovery, Evidence, OnSighting, Pinning, Problem, Sighting, Source};
use futures::stream::{self, StreamExt};
use rlx_net::neighbour::Nudger;
use rlx_proto::handshake::{query_in_cluster, HandshakeError, HandshakeReply};
use rlx_proto::keys::KeyRing;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Most nodes checked at once. Each check is up to [`ATTEMPTS`] short TCP
/// exchanges, and a hostile peer can make each hold a reply buffer of up to
/// [`rlx_proto::handshake::MAX_REPLY_BYTES`]; 64 nodes keep that under about
/// 32 MiB in the worst case (measured: 256 let a flood of bogus announcements
/// push the coordinator to 160 MiB) while a rack of real agents, answering
/// in milliseconds, still clears in one or two rounds.
pub(crate) const DEFAULT_HANDSHAKE_CONCURRENCY: usize = 64;

/// Handshake attempts per node, started [`STAGGER`] apart while earlier
/// ones are still waiting. A lost SYN costs Linux a whole second before it
/// retransmits (the initial RTO, RFC 6298), so on a lossy LAN a single
/// connect fails about as often as a packet is lost; a fresh connect 200 ms
/// later sends a fresh SYN instead. Five attempts, each long enough for one
/// kernel retransmission ([`MIN_ATTEMPT`]), give a dead node up after about
/// 2.3 s. (Four, 250 ms apart, lost one agent in a hundred handshakes
/// at 20% loss each way, the IPv6-only lab of `tests/heavy/ipv6_loss.rs`,
/// about what ten SYN chances of 0.64 each predict; five, with ten SYNs and
/// their retransmissions, cut that about tenfold for 0.05 s more on a dead
/// address.)
pub(crate) const ATTEMPTS: usize = 5;

/// Shortest deadline of one handshake attempt: past the kernel's first SYN
/// retransmission at 1 s. `timeout_ms` is used when longer.
pub(crate) const MIN_ATTEMPT: Duration = Duration::from_millis(1500);

/// Delay between handshake attempts (see [`ATTEMPTS`]).
pub(crate) const STAGGER: Duration = Duration::from_millis(200);

/// Whether an error settles the question (the node answered, or refused),
/// as opposed to a packet that may just have been lost.
fn is_final(e: &HandshakeError) -> bool {
    use rlx_proto::handshake::ConnectFailure;
    match e {
        HandshakeError::Unreachable { why, .. } => matches!(why, ConnectFailure::Refused),
        HandshakeError::NotRlx { why, .. } => !why.contains("within"),
        _ => true,
    }
}

/// Runs up to [`ATTEMPTS`] handshakes [`STAGGER`] apart and returns the first
/// answer that settles the question; if none does, the last attempt's error.
async fn query_staggered(addr: SocketAddr, rules: &Rules, expect_id: Option<&str>) -> Outcome {
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
pub(crate) struct Rules {
    /// With a key ring, nodes must prove one of its keys.
    pub keys: Option<KeyRing>,
    /// Only nodes announcing this cluster name.
    pub cluster: Option<String>,
    /// Deadline for one whole handshake.
    pub timeout: Duration,
    /// Most handshakes in flight.
    pub concurrency: usize,
    /// Node id -> node key, shared by every admission of the run (and of a
    /// `watch`'s lifetime): a file's, or in memory.
    pub pins: Arc<Mutex<Pins>>,
    /// For a coordinator that never stops (`watch`, `LiveWatch`): new pins
    /// held a few seconds ([`hold`]); `None` for a run, which judges all
    /// its handshakes at once.
    pub pin_hold: Option<Arc<Mutex<hold::PinHold>>>,
}

/// Why `[discover]`'s admission rules cannot be had: its key file or its
/// pins file. The caller can tell it from a browse that cannot start, and
/// the message names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The key file cannot be used. The cause is in the message, not a
    /// `source()`, so that `{:#}` says it once.
    #[error("{by}: {error}")]
    Key {
        /// The key file named.
        path: std::path::PathBuf,
        /// Who named it: `--key-file` or `[discover] key_file`, so the user
        /// fixes the right one.
        by: &'static str,
        /// What is wrong with it (missing, readable by others, malformed).
        error: rlx_proto::keys::KeyError,
    },
    /// The pins file cannot be read (admitting without it would pin
    /// whoever answers first, again).
    #[error("[discover] pins_file: {0}")]
    Pins(PinsError),
}

impl Rules {
    /// The rules `[discover]` asks for: its key file loaded (a key file that
    /// cannot be used is an error: discovering without it would admit
    /// strangers), its cluster filter, its timeout (at least
    /// [`MIN_ATTEMPT`]) and the default concurrency.
    pub(crate) fn from_section(d: &crate::config::DiscoverSection) -> Result<Rules, RulesError> {
        let keys = match &d.key_file {
            Some(p) => Some(KeyRing::load(p).map_err(|error| RulesError::Key {
                path: p.clone(),
                by: if d.key_file_from_flag {
                    "--key-file"
                } else {
                    "[discover] key_file"
                },
                error,
            })?),
            None => None,
        };
        let pins = match &d.pins_file {
            Some(p) if d.pins_read_only => Pins::load(p).map_err(RulesError::Pins)?.read_only(),
            Some(p) => Pins::load(p).map_err(RulesError::Pins)?,
            None => Pins::in_memory(),
        };
        Ok(Rules {
            keys,
            cluster: d.cluster.clone(),
            timeout: Duration::from_millis(d.timeout_ms).max(MIN_ATTEMPT),
            concurrency: DEFAULT_HANDSHAKE_CONCURRENCY,
            pins: Arc::new(Mutex::new(pins)),
            pin_hold: None,
        })
    }
}

/// What a handshake is started for: the address, and the node id the
/// sighting announced (the reply must carry the same one).
type Key = (SocketAddr, Option<String>);

type Outcome = Result<HandshakeReply, HandshakeError>;

/// The admission stage of one discovery run: the [`Rules`], and the
/// handshakes already started for sightings that sources passed on early
/// ([`Admission::early`]), so that a node's check overlaps the rest of the
/// browse instead of starting after its window. At most
/// [`Rules::concurrency`] handshakes run at once, early or not; the ones
/// still running when the admission is dropped are cancelled.
pub(crate) struct Admission {
    rules: Rules,
    nudger: Arc<Nudger>,
    permits: Arc<Semaphore>,
    started: Mutex<HashMap<Key, JoinHandle<Outcome>>>,
}

impl Admission {
    /// An admission under `rules`, with nothing started yet.
    pub(crate) fn new(rules: Rules) -> Arc<Admission> {
        Arc::new(Admission {
            permits: Arc::new(Semaphore::new(rules.concurrency.max(1))),
            nudger: Nudger::new(),
            rules,
            started: Mutex::new(HashMap::new()),
        })
    }

    /// A hook for sources ([`OnSighting`]) that starts each sighting's
    /// handshake at once, in the background. Must be called inside a tokio
    /// runtime.
    pub(crate) fn early(self: &Arc<Self>) -> OnSighting {
        let me = Arc::downgrade(self);
        OnSighting(Arc::new(move |s: &Sighting| {
            if let Some(me) = me.upgrade() {
                me.start(s);
            }
        }))
    }

    /// Starts the handshake `s` will need, unless it needs none (SSH, no
    /// address, refused by cluster name) or one is already running.
    fn start(self: &Arc<Self>, s: &Sighting) {
        let Some(key) = handshake_key(s, &self.rules) else {
            return;
        };
        let mut started = self.started.lock().expect("admission lock");
        if started.contains_key(&key) {
            return;
        }
        // The task holds what it needs, not the admission, so that dropping
        // the admission really cancels it.
        let (rules, permits, nudger) = (
            self.rules.clone(),
            Arc::clone(&self.permits),
            Arc::clone(&self.nudger),
        );
        let k = key.clone();
        started.insert(
            key,
            tokio::spawn(async move { handshake_now(&rules, &permits, &nudger, &k).await }),
        );
    }

    /// The outcome of the handshake for `key`: the one started early if
    /// there is one, else a new one.
    async fn handshake(&self, key: &Key) -> Outcome {
        let early = self.started.lock().expect("admission lock").remove(key);
        if let Some(task) = early {
            if let Ok(out) = task.await {
                return out;
            }
        }
        handshake_now(&self.rules, &self.permits, &self.nudger, key).await
    }

    /// Applies the rules to every sighting of `d`, concurrently; refused ones
    /// move to `d.problems` with their reasons.
    pub(crate) async fn admit(&self, d: Discovery) -> Discovery {
        let Discovery {
            sightings,
            mut problems,
            attempts,
            mdns_links,
        } = d;
        let verdicts: Vec<Verdict> = stream::iter(sightings)
            .map(|s| check(s, self))
            .buffered(self.rules.concurrency.max(1))
            .collect()
            .await;
        // Handshakes started for sightings that did not reach the end (an
        // address that changed, an instance the browse refused) are not
        // needed any more.
        for (_, task) in self.started.lock().expect("admission lock").drain() {
            task.abort();
        }
        let mut admitted = Vec::new();
        for v in judge_identities(verdicts, &self.rules.pins, self.rules.pin_hold.as_deref()) {
            match v {
                Verdict::Admit(s, _) => admitted.push(*s),
                Verdict::Refuse(p) => problems.push(p),
            }
        }
        Discovery {
            sightings: admitted,
            problems,
            attempts,
            mdns_links,
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Ok(started) = self.started.get_mut() {
            for (_, task) in started.drain() {
                task.abort();
            }
        }
    }
}

/// Runs the handshake for `key` now, within the concurrency limit, with
/// the target's neighbour resolution nudged, ARP for IPv4 and Neighbor
/// Solicitations for IPv6 ([`rlx_net::neighbour`]).
async fn handshake_now(
    rules: &Rules,
    permits: &Semaphore,
    nudger: &Arc<Nudger>,
    key: &Key,
) -> Outcome {
    let _permit = permits.acquire().await.expect("never closed");
    // Keep a lost ARP or neighbour-discovery exchange from costing the
    // handshake a second.
    let _nudged = nudger.watch(key.0.ip());
    query_staggered(key.0, rules, key.1.as_deref()).await
}

/// The handshake sighting `s` needs under `rules`, if any: none for SSH
/// (trusted by SSH itself), for a sighting without an address, or for one
/// whose announced cluster is refused by name.
fn handshake_key(s: &Sighting, rules: &Rules) -> Option<Key> {
    if s.source == Source::Ssh {
        return None;
    }
    if let (Some(want), Some(caps)) = (&rules.cluster, &s.caps) {
        if cluster_mismatch(caps.cluster.as_deref(), want).is_some() {
            return None;
        }
    }
    Some((s.agent_endpoint()?, s.id().map(str::to_string)))
}

fn refuse(s: &Sighting, reason: String) -> Verdict {
    // Every network source's refusals start as strangers'; the pipeline
    // makes one the user's when it claims a node of the file.
    let p = match s.source {
        Source::Ssh => Problem::new(s.source, s.host.clone(), reason),
        _ => Problem::stranger(s.source, s.host.clone(), reason),
    };
    Verdict::Refuse(p.claiming(Some(s.addr.clone()), s.id().map(str::to_string)))
}

/// Checks one sighting.
async fn check(mut s: Sighting, admission: &Admission) -> Verdict {
    let rules = &admission.rules;
    // A node announcing another cluster in TXT is refused before we spend a
    // handshake on it (and reported as what it is, not as a key mismatch).
    if let (Some(want), Some(caps)) = (&rules.cluster, &s.caps) {
        if let Some(why) = cluster_mismatch(caps.cluster.as_deref(), want) {
            return refuse(&s, why);
        }
    }
    // A bare listener a scan found on the worker port, with no agent
    // beside it: nothing to ask. Without a key it is the seed's case, a
    // worker already listening, and goes on with no caps (the report says
    // nothing vouched for it); with a key it cannot prove it.
    let bare = s.agent_port.is_none() && s.source == Source::Subnet;
    // Only a handshake proves a node key: caps from anywhere else are
    // unpinned, whatever they say.
    let mut node_key = None;
    s.identity = Pinning::Unpinned;
    if bare && rules.keys.is_some() {
        return refuse(
            &s,
            "refused: something listens on the worker port, but no rlx-agent answered \
             beside it, so it cannot prove the cluster key (start rlx-agent there)"
                .into(),
        );
    }
    if s.source != Source::Ssh && !bare {
        let Some(agent) = s.agent_endpoint() else {
            return refuse(&s, "no address to check it at".into());
        };
        let key = (agent, s.id().map(str::to_string));
        match admission.handshake(&key).await {
            Ok(reply) => {
                node_key = reply.node_key;
                // The agent's word on its worker's port wins over the SRV
                // record's: with a key it is proved, and either way it is
                // fresh.
                if let Some(port) = reply.caps.worker_port {
                    s.use_worker_port(port);
                }
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
    Verdict::Admit(Box::new(s), node_key)
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
/// move to `d.problems` with their reasons. (An [`Admission`] with nothing
/// started early.)
pub(crate) async fn admit(d: Discovery, rules: &Rules) -> Discovery {
    Admission::new(rules.clone()).admit(d).await
}

pub(crate) mod hold;
mod identities;
use identities::{judge_identities, Verdict};

#[cfg(test)]
mod pin_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::caps::NodeCaps;

    fn txt_sighting(cluster: Option<&str>) -> Sighting {
        Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source: Source::Mdns,
            host: "box".into(),
            // Port 9 on TEST-NET-1: never dialled, since the cluster check
            // refuses before any handshake.
            addr: "192.0.2.1:9".into(),
            ip: Some("192.0.2.1".parse().unwrap()),
            port: 9,
            agent_port: Some(9),
            worker_reachable: None,
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
            pins: Default::default(),
            pin_hold: None,
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

    /// A loopback agent that answers every handshake with `caps` and
    /// counts the connections it accepted.
    async fn counting_agent(caps: NodeCaps) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((s, peer)) = l.accept().await {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let caps = caps.clone();
                tokio::spawn(async move {
                    let on = rlx_proto::handshake::Binding {
                        local: s.local_addr().unwrap(),
                        peer,
                        advertised: vec![],
                    };
                    let (rd, mut wr) = s.into_split();
                    let mut line = Vec::new();
                    let _ = BufReader::new(rd).read_until(b'\n', &mut line).await;
                    if let Ok(out) = rlx_proto::handshake::answer(&line, &caps, None, &on) {
                        let _ = wr.write_all(out.as_bytes()).await;
                    }
                });
            }
        });
        (a, count)
    }

    /// A sighting passed on early (while its source still runs) has its
    /// handshake started then; admitting it afterwards uses that result
    /// instead of connecting again, and takes the caps from it.
    #[tokio::test]
    async fn a_handshake_started_early_is_the_one_admission_uses() {
        let fresh = NodeCaps {
            id: "00000000000000aa".into(),
            cores: 32,
            ..Default::default()
        };
        let (addr, connections) = counting_agent(fresh).await;
        let mut s = txt_sighting(None);
        s.ip = Some(addr.ip());
        s.port = addr.port();
        s.agent_port = Some(addr.port());
        s.addr = addr.to_string();
        s.caps.as_mut().unwrap().id = "00000000000000aa".into();
        let admission = Admission::new(Rules {
            pins: Default::default(),
            pin_hold: None,
            keys: None,
            cluster: None,
            timeout: Duration::from_secs(2),
            concurrency: 4,
        });
        (admission.early().0)(&s);
        // Let the early handshake finish before the source is done.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
        let out = admission
            .admit(Discovery {
                sightings: vec![s],
                ..Default::default()
            })
            .await;
        assert_eq!(out.sightings.len(), 1, "{:?}", out.problems);
        assert_eq!(out.sightings[0].caps.as_ref().unwrap().cores, 32);
        assert_eq!(out.sightings[0].evidence, Evidence::Handshake);
        assert_eq!(
            connections.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "admission reused the early handshake"
        );
    }

    /// Guards against the early handshake's cluster filter being inverted
    /// (it once started handshakes for other clusters' agents and skipped
    /// the cluster's own): with `cluster = "lab"`, an agent announcing
    /// `lab` is dialled as soon as it is heard, one announcing `prod` never.
    #[tokio::test]
    async fn the_early_handshake_starts_for_the_clusters_own_agents_only() {
        let mine = NodeCaps {
            id: "00000000000000bb".into(),
            cluster: Some("lab".into()),
            cores: 8,
            ..Default::default()
        };
        let (addr, connections) = counting_agent(mine.clone()).await;
        let admission = Admission::new(Rules {
            timeout: Duration::from_secs(2),
            concurrency: 4,
            ..rules("lab")
        });
        let at = |cluster: &str| {
            let mut s = txt_sighting(Some(cluster));
            s.ip = Some(addr.ip());
            s.agent_port = Some(addr.port());
            s.caps.as_mut().unwrap().id = "00000000000000bb".into();
            s
        };
        (admission.early().0)(&at("prod"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            connections.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "another cluster's agent is not dialled"
        );
        (admission.early().0)(&at("lab"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            connections.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the cluster's own agent is dialled at once"
        );
    }

    #[test]
    fn only_timeouts_leave_the_handshake_question_open() {
        use rlx_proto::handshake::ConnectFailure;
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
