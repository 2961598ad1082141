//! **The liveness stream** — one long-lived connection from a coordinator
//! to each agent it watches, so that a crashed agent is seen in a round
//! trip and a silent one within about a second (docs/protocol.md, "The
//! liveness stream"; docs/membership.md for what the coordinator makes of
//! it).
//!
//! ```text
//! coordinator -> agent   {"rlx":"hello","v":2,"nonce":"<64 hex>","follow":true}\n
//! agent -> coordinator   {"rlx":"caps","v":2,...}\n            the handshake's reply, proof and all
//! agent -> coordinator   {"rlx":"pulse","seq":0,"every_ms":300}\n   at once, then every 300 ms
//! coordinator -> agent   {"rlx":"ping"}\n                       every 5 s
//! agent -> coordinator   {"rlx":"bye"}\n                        when the agent stops
//! ```
//!
//! The hello is the handshake's with `"follow":true`, so an agent that
//! predates the stream ignores the field, answers and closes: the
//! coordinator, seeing the connection end where a pulse should be, checks
//! that agent by handshakes only. The reply is exactly the handshake's (its
//! proof binds this connection), so the stream is as authenticated as a
//! handshake: its later lines carry no MAC, and forging one takes an
//! on-path attacker, who could drop the packets anyway.
//!
//! Why each side writes: the agent's pulses tell the coordinator that its
//! process runs (a crash closes the socket at once: its kernel sends a FIN
//! or a reset; a stalled process or a vanished host sends nothing); the
//! coordinator's pings tell the agent that someone still reads, so a
//! coordinator that vanished does not leave the agent queueing pulses into
//! a dead connection for the quarter of an hour TCP takes to give up
//! ([`FOLLOWER_IDLE`]).
//!
//! **A keyed agent gives a stream only to a coordinator that proves the
//! key.** The reply proves the agent to the coordinator, not the other
//! way round, and the agent holds at most [`MAX_FOLLOWERS`] streams: were
//! they free for the asking, sixteen strangers' addresses would close a
//! coordinator's stream. So after its reply a keyed agent asks once, and
//! the coordinator answers with an HMAC of the hello's nonce and the reply
//! line exactly as sent (which the agent's own proof binds to this
//! connection's endpoints), within the handshake's time bound:
//!
//! ```text
//! agent -> coordinator   {"rlx":"prove"}\n
//! coordinator -> agent   {"rlx":"proof","proof":"<64 hex>"}\n
//! ```
//!
//! Only then does the stream take a slot and pulse. An agent without a key
//! pulses at once, as before; a coordinator that predates the question
//! takes it for garbage and checks the agent by handshakes only.

use super::client::{exchange, preview, Connection, HandshakeError, HandshakeReply};
use super::messages::follow_hello_line;
use super::proof::{check, field, sign, Nonce};
use crate::keys::{Key, KeyRing};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

/// How often an agent pulses. Three pulses fit in the second after which a
/// coordinator dials a silent member, so one pulse lost and retransmitted
/// by TCP (its minimum RTO is 200 ms) never looks like silence; and at 200
/// members the coordinator reads 667 small packets a second, about 30 KB/s.
pub const PULSE_INTERVAL: Duration = Duration::from_millis(300);

/// The slowest pace an agent takes when a coordinator asks for fewer
/// pulses ([`pace_of`]): a stall is then seen within about three of them
/// (docs/membership.md), so no more than this is ever asked of a member.
pub const MAX_PULSE_INTERVAL: Duration = Duration::from_secs(2);

/// The pace an agent takes when a ping asks for `asked`: within
/// [`PULSE_INTERVAL`] (an agent is never made to pulse faster than it
/// would) and [`MAX_PULSE_INTERVAL`].
pub fn pace_of(asked: Duration) -> Duration {
    asked.clamp(PULSE_INTERVAL, MAX_PULSE_INTERVAL)
}

/// How often the coordinator pings each stream: all the agent needs is to
/// hear something well within [`FOLLOWER_IDLE`] (four pings fit in it, so
/// one delayed by a busy coordinator or a retransmission never closes a
/// stream), and at 200 agents it costs the coordinator 40 small writes a
/// second.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// How long an agent keeps a stream from which it has read nothing: four
/// pings. A coordinator paused or starved for seconds keeps its streams; one
/// that vanished frees its slot well before TCP would give up.
pub const FOLLOWER_IDLE: Duration = Duration::from_secs(20);

/// The longest line either side accepts on a stream: the lines are a few
/// dozen bytes, and anything longer is garbage, dropped with the stream.
pub const MAX_FOLLOW_LINE: usize = 256;

/// Most streams an agent holds at once. A cluster has a handful of
/// coordinators, each holding one; 16 idle streams cost nothing. At the
/// limit a new one closes the oldest stream of the source address that
/// holds the most, so a stranger opening streams from one address only
/// ever closes its own.
pub const MAX_FOLLOWERS: usize = 16;

/// How long one write on a stream may take before the stream is given up.
/// Its lines are a few dozen bytes: a socket that has not taken one in 2 s
/// has a full send buffer, so the other end stopped reading and is as good
/// as gone (and, for the agent, holding its slot).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// The lines of a stream, each side's.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "rlx", rename_all = "lowercase")]
enum Line {
    Pulse {
        seq: u64,
        every_ms: u64,
        /// A digest of the agent's facts ([`facts_of`]): the
        /// coordinator checks the agent by handshake when it changes, and
        /// otherwise only now and then. Absent from agents that predate it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        facts: Option<String>,
    },
    Bye,
    Ping {
        /// How often the coordinator asks the agent to pulse, in ms: a
        /// coordinator of a large cluster asks for fewer pulses
        /// ([`pace_of`] is what an agent makes of it). Absent: the agent
        /// keeps its pace. An agent that predates it ignores the field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pulse_ms: Option<u64>,
    },
    /// A keyed agent's question, before its first pulse.
    Prove,
    /// The coordinator's answer to it.
    Proof {
        proof: String,
    },
}

/// A pulse line's fields, borrowed from the line ([`judge_line`]'s fast
/// reading); fields it does not know are ignored, as in [`Line::Pulse`].
#[derive(Deserialize)]
struct PulseView<'a> {
    rlx: &'a str,
    seq: Option<u64>,
    every_ms: Option<u64>,
    facts: Option<&'a str>,
}

/// What the coordinator's stream proof is a MAC of begins with this, so it
/// can never be taken for any other proof of the protocol.
pub const FOLLOW_TAG: &[u8] = b"rlx-follow-v1";

fn follow_input(mac: &mut impl hmac::Mac, nonce: &Nonce, reply: &[u8]) {
    mac.update(FOLLOW_TAG);
    mac.update(nonce.as_bytes());
    field(mac, reply.trim_ascii_end());
}

/// The coordinator's proof that it holds `key`, for the stream whose hello
/// carried `nonce` and whose reply was `reply` (the line as sent; the
/// newline does not count).
pub fn prove_follow(key: &Key, nonce: &Nonce, reply: &[u8]) -> String {
    sign(key, |mac| follow_input(mac, nonce, reply))
}

/// The agent's check of a line that should be the coordinator's
/// `{"rlx":"proof"}`: whether it proves `key` for this stream.
pub fn is_follow_proof(key: &Key, nonce: &Nonce, reply: &[u8], l: &[u8]) -> bool {
    match serde_json::from_slice(l.trim_ascii_end()) {
        Ok(Line::Proof { proof }) => check(key, &proof, |mac| follow_input(mac, nonce, reply)),
        _ => false,
    }
}

/// A keyed agent's question after its reply.
pub fn prove_line() -> String {
    line(&Line::Prove)
}

/// The coordinator's answer to [`prove_line`].
pub fn proof_line(key: &Key, nonce: &Nonce, reply: &[u8]) -> String {
    line(&Line::Proof {
        proof: prove_follow(key, nonce, reply),
    })
}

fn line(l: &Line) -> String {
    // Tags and integers always serialize.
    format!(
        "{}\n",
        serde_json::to_string(l).expect("a stream line serializes")
    )
}

/// The agent's pulse number `seq`.
pub fn pulse_line(seq: u64) -> String {
    pulse_line_with(seq, None)
}

/// The agent's pulse number `seq`, carrying the digest of its facts
/// ([`facts_of`]).
pub fn pulse_line_with(seq: u64, facts: Option<&str>) -> String {
    pulse_line_paced(seq, facts, PULSE_INTERVAL)
}

/// [`pulse_line_with`] from an agent that pulses every `every` (a pace a
/// coordinator asked for, [`pace_of`]).
pub fn pulse_line_paced(seq: u64, facts: Option<&str>, every: Duration) -> String {
    line(&Line::Pulse {
        seq,
        every_ms: every.as_millis() as u64,
        facts: facts.map(str::to_string),
    })
}

/// The digest of the facts a coordinator takes for news about an agent:
/// the first 8 bytes, in hex, of the SHA-256 of its id, incarnation, node
/// key, cores, total RAM, devices (each one's kind, name, memory,
/// availability, without its free memory) and its worker's state. Free RAM,
/// free disk and a device's free memory change all the time and are no
/// news, so they are left out: the digest changes only with news.
pub fn facts_of(caps: &crate::caps::NodeCaps) -> String {
    use sha2::{Digest, Sha256};
    let devices: Vec<(&str, &str, u64, bool)> = caps
        .devices
        .iter()
        .map(|d| (d.device.as_str(), d.name.as_str(), d.mem_bytes, d.available))
        .collect();
    let facts = serde_json::json!([
        caps.id,
        caps.incarnation,
        caps.node_key,
        caps.cores,
        caps.ram_total,
        devices,
        caps.worker_listening,
        caps.worker_held_by,
    ]);
    let digest = Sha256::digest(facts.to_string().as_bytes());
    hex::encode(&digest[..8])
}

/// The agent's last line on a stream, as it stops.
pub fn bye_line() -> String {
    line(&Line::Bye)
}

/// The coordinator's ping.
pub fn ping_line() -> String {
    ping_line_pacing(None)
}

/// The coordinator's ping, asking the agent to pulse every `every` when
/// given (byte for byte [`ping_line`] when not).
pub fn ping_line_pacing(every: Option<Duration>) -> String {
    line(&Line::Ping {
        pulse_ms: every.map(|e| e.as_millis() as u64),
    })
}

/// Whether a line from the coordinator is its ping (agent side): anything
/// else is garbage.
pub fn is_ping(l: &[u8]) -> bool {
    ping_pace(l).is_some()
}

/// What a line from the coordinator is (agent side): `None` when it is no
/// ping (garbage), else the pace the ping asks for, if it asks one.
pub fn ping_pace(l: &[u8]) -> Option<Option<Duration>> {
    match serde_json::from_slice(l.trim_ascii_end()) {
        Ok(Line::Ping { pulse_ms }) => Some(pulse_ms.map(Duration::from_millis)),
        _ => None,
    }
}

/// What a stream told the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Heard {
    /// A pulse: the agent's process runs.
    Pulse {
        /// Its number, from 0.
        seq: u64,
    },
    /// The agent is stopping.
    Bye,
    /// A keyed agent asks the coordinator to prove the key before it
    /// pulses; only [`follow_in_cluster`] answers it, a later one is
    /// garbage.
    Prove,
    /// The connection ended cleanly (a FIN: the agent's process exited or
    /// closed it).
    Closed,
    /// The connection failed, and how (a reset, a write that timed out).
    Reset(String),
    /// A line that is no pulse nor bye, or longer than [`MAX_FOLLOW_LINE`].
    Garbage(String),
}

/// The coordinator's end of a stream: reads the agent's lines and pings it
/// meanwhile.
///
/// It keeps what it has read of a line, and what it has not yet written of
/// a ping, in its own buffers, so dropping a [`Follower::next`] future (a
/// `select!` that took another branch) loses nothing and never leaves half
/// a ping on the wire, which the agent would take for garbage.
#[derive(Debug)]
pub struct Follower {
    pub(super) conn: Connection,
    pub(super) s: StreamState<Instant>,
}

/// What the coordinator's end of a stream keeps between reads and writes,
/// on the clock of whoever reads it: tokio's for [`Follower`] (so that
/// tests in paused time hold), the system's for
/// [`super::follow_polled::Polled`], read by a thread of its own.
#[derive(Debug)]
pub(super) struct StreamState<I> {
    /// What was read of a line not yet whole.
    pub(super) buf: Vec<u8>,
    /// Ping bytes not yet taken by the socket, and since when.
    pub(super) unsent: Vec<u8>,
    pub(super) unsent_since: Option<I>,
    pub(super) every: Duration,
    pub(super) ping_every: Duration,
    pub(super) next_ping: I,
    /// The facts digest of the agent's last pulse ([`facts_of`]).
    pub(super) facts: Option<String>,
    /// The pace the last ping asked for (`None`: none asked).
    pub(super) asked: Option<Duration>,
}

impl<I: std::ops::Add<Duration, Output = I>> StreamState<I> {
    /// A stream just opened at `now`, its first ping due `ping_every` later.
    pub(super) fn new(ping_every: Duration, now: I) -> Self {
        StreamState {
            buf: Vec::with_capacity(MAX_FOLLOW_LINE + 1),
            unsent: Vec::new(),
            unsent_since: None,
            every: PULSE_INTERVAL,
            ping_every,
            next_ping: now + ping_every,
            facts: None,
            asked: None,
        }
    }
}

impl Follower {
    fn new(conn: Connection, ping_every: Duration) -> Self {
        Follower {
            conn,
            s: StreamState::new(ping_every, Instant::now()),
        }
    }

    /// How often the agent said it pulses (`every_ms` of its last pulse,
    /// within 50 ms..=10 s, so that a confused or hostile agent can make a
    /// caller neither spin nor wait minutes before calling it silent).
    pub fn every(&self) -> Duration {
        self.s.every
    }

    /// The digest of the agent's facts its last pulse carried
    /// ([`facts_of`]), if its agent sends one.
    pub fn facts(&self) -> Option<&str> {
        self.s.facts.as_deref()
    }

    /// The agent's next line, writing the ping every [`PING_INTERVAL`] while
    /// it waits. Cancel-safe: bytes read stay in the follower's buffer, and
    /// a ping is written in pieces the socket takes, never twice.
    pub async fn next(&mut self) -> Heard {
        loop {
            if let Some(end) = self.s.buf.iter().position(|&b| b == b'\n') {
                let l: Vec<u8> = self.s.buf.drain(..=end).collect();
                return self.judge(&l);
            }
            if self.s.buf.len() > MAX_FOLLOW_LINE {
                return Heard::Garbage(format!(
                    "a line longer than {MAX_FOLLOW_LINE} bytes (starts {})",
                    preview(&self.s.buf)
                ));
            }
            let Follower {
                conn: (rd, wr),
                s:
                    StreamState {
                        buf,
                        unsent,
                        unsent_since,
                        ping_every,
                        next_ping,
                        ..
                    },
            } = self;
            // Never more than one line's worth: a stream of garbage costs
            // this buffer, not memory without end.
            let want = (MAX_FOLLOW_LINE + 1 - buf.len()) as u64;
            let mut limited = rd.take(want);
            let writing = !unsent.is_empty();
            let give_up = unsent_since.map_or(*next_ping, |t| t + WRITE_TIMEOUT);
            tokio::select! {
                biased;
                r = limited.read_buf(buf) => match r {
                    Ok(0) => return Heard::Closed,
                    Ok(_) => {}
                    Err(e) => return Heard::Reset(e.to_string()),
                },
                r = wr.write(unsent), if writing => match r {
                    Ok(0) => return Heard::Reset("the connection takes no more bytes".into()),
                    Ok(n) => {
                        unsent.drain(..n);
                        if unsent.is_empty() {
                            *unsent_since = None;
                        }
                    }
                    Err(e) => return Heard::Reset(e.to_string()),
                },
                () = tokio::time::sleep_until(give_up), if writing => {
                    return Heard::Reset(format!(
                        "the agent took no ping for {} ms",
                        WRITE_TIMEOUT.as_millis()
                    ))
                }
                () = tokio::time::sleep_until(*next_ping), if !writing => {
                    // From now, not from when it was due: a caller that did
                    // not call for a while gets one ping, not a burst.
                    *next_ping = Instant::now() + *ping_every;
                    unsent.extend_from_slice(ping_line().as_bytes());
                    *unsent_since = Some(Instant::now());
                }
            }
        }
    }

    fn judge(&mut self, l: &[u8]) -> Heard {
        judge_line(l, &mut self.s.every, &mut self.s.facts)
    }
}

/// What one line of the agent's says; a pulse updates the interval it
/// announces and the digest of its facts it carries.
pub(super) fn judge_line(l: &[u8], every: &mut Duration, facts: &mut Option<String>) -> Heard {
    let l = l.trim_ascii_end();
    // The stream's usual line, read where it lies: at 200 members a
    // coordinator reads 667 of them a second, and the tagged enum below
    // buffers each line's fields before it looks at the tag. Anything
    // else (an escaped string, another line) takes the full reading.
    if let Ok(p) = serde_json::from_slice::<PulseView>(l) {
        if let (true, Some(seq), Some(every_ms)) = (p.rlx == "pulse", p.seq, p.every_ms) {
            *every = Duration::from_millis(every_ms.clamp(50, 10_000));
            // At most a digest's worth: a longer one is no digest.
            let told = p.facts.filter(|f| f.len() <= 64);
            if facts.as_deref() != told {
                *facts = told.map(str::to_string);
            }
            return Heard::Pulse { seq };
        }
    }
    match serde_json::from_slice::<Line>(l) {
        Ok(Line::Pulse {
            seq,
            every_ms,
            facts: f,
        }) => {
            *every = Duration::from_millis(every_ms.clamp(50, 10_000));
            // At most a digest's worth: a longer one is no digest.
            *facts = f.filter(|f| f.len() <= 64);
            Heard::Pulse { seq }
        }
        Ok(Line::Bye) => Heard::Bye,
        Ok(Line::Ping { .. }) => Heard::Garbage("a ping from the agent".into()),
        Ok(Line::Prove) => Heard::Prove,
        Ok(Line::Proof { .. }) => Heard::Garbage("a stream proof from the agent".into()),
        Err(e) => Heard::Garbage(format!("{} is not a pulse or a bye: {e}", preview(l))),
    }
}

/// Opens a liveness stream to the agent at `addr`: the handshake of
/// [`super::query_in_cluster`] (the same checks of the reply, under the
/// same `timeout`) with `"follow":true`, then the agent's first line.
/// `None` beside the reply when the agent does not pulse: it closed after
/// its reply (it predates the stream), or sent something else, or nothing
/// within what is left of `timeout` (at least 500 ms); the caller then
/// checks it by handshakes only.
pub async fn follow_in_cluster(
    addr: SocketAddr,
    timeout: Duration,
    keys: Option<&KeyRing>,
    expect_id: Option<&str>,
    cluster: Option<&str>,
) -> Result<(HandshakeReply, Option<Follower>), HandshakeError> {
    follow_pinging(addr, timeout, (keys, expect_id, cluster), PING_INTERVAL).await
}

/// [`follow_in_cluster`] with the ping interval given (tests shorten it).
pub(crate) async fn follow_pinging(
    addr: SocketAddr,
    timeout: Duration,
    (keys, expect_id, cluster): (Option<&KeyRing>, Option<&str>, Option<&str>),
    ping_every: Duration,
) -> Result<(HandshakeReply, Option<Follower>), HandshakeError> {
    let deadline = Instant::now() + timeout;
    let hello = |n: &Nonce| follow_hello_line(n, cluster);
    let (reply, conn, said) = exchange(addr, (deadline, timeout), hello, keys, expect_id).await?;
    let mut f = Follower::new(conn, ping_every);
    let first = deadline.max(Instant::now() + Duration::from_millis(500));
    let mut heard = timeout_at(first, f.next()).await;
    if let Ok(Heard::Prove) = heard {
        // The key the agent proved, so it is the one it checks.
        let key = keys.zip(reply.key_index).map(|(ring, i)| &ring.keys()[i]);
        let Some(key) = key else {
            tracing::debug!(%addr, "the agent asks for a stream proof and we hold no key: no liveness stream");
            return Ok((reply, None));
        };
        let proof = proof_line(key, &said.nonce, &said.line);
        match timeout_at(first, f.conn.1.write_all(proof.as_bytes())).await {
            Ok(Ok(())) => heard = timeout_at(first, f.next()).await,
            _ => {
                tracing::debug!(%addr, "the agent did not take our stream proof: no liveness stream");
                return Ok((reply, None));
            }
        }
    }
    match heard {
        Ok(Heard::Pulse { .. }) => Ok((reply, Some(f))),
        Ok(Heard::Closed) => Ok((reply, None)),
        Ok(other) => {
            tracing::debug!(%addr, "answered a follow hello, then {other:?}: no liveness stream");
            Ok((reply, None))
        }
        Err(_) => {
            tracing::debug!(%addr, "answered a follow hello, then no pulse in time: no liveness stream");
            Ok((reply, None))
        }
    }
}
