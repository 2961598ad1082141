//! **Link measurement, the agent's side** — answers a coordinator's
//! `{"rlx":"measure",...}` request on the handshake port: a challenge, the
//! coordinator's proof when this agent holds a cluster key, then the round
//! trips, the upload it receives and the download it sends
//! ([`rlx_proto::handshake::measure`] has the messages and why).
//!
//! Who may measure is the operator's choice ([`Policy`], `--measure`): by
//! default only coordinators that prove the cluster key, so an agent
//! without a key measures for no one; `any` lets anyone measure a keyless
//! agent; `off` refuses everyone. Every refusal is sent back with its
//! reason, which the coordinator reports for that link.
//!
//! The bounds hold whatever the request says: the agent grants at most its
//! hard limits (bytes and milliseconds per direction), refuses an upload
//! longer or larger than granted, runs one measurement at a time (a second
//! is refused as busy, so two coordinators' tests do not measure each
//! other), grants each source a few a minute ([`limit`]), and aborts a
//! measurement that holds the lock longer than [`MAX_HOLD`]. The lock is
//! taken only after the proof verified, so a stranger cannot hold it on a
//! keyed agent, and freed before any notice is sent: every write on the
//! connection is bounded in time ([`NOTICE_WAIT`] for a notice), because a
//! client that stops reading fills the socket and would otherwise hold the
//! lock for as long as it keeps the connection open. A transfer that ends
//! without its end mark was cut short and is refused, never reported as
//! figures.

pub mod limit;

use limit::Limiter;
use rlx_proto::handshake::measure::{
    error_line, parse_request, receive, send_for, verify_request, AgentLimits, Challenge, End,
    Prove, Ready, Request, MEASURE_VERSION,
};
use rlx_proto::handshake::measure_sense::check_transfer;
use rlx_proto::handshake::measure_udp::{
    bind_beside, got_line, parse_sent, sent_line, Dir, Probe, Tagger,
};
use rlx_proto::handshake::{endpoint_text, Binding, Nonce, DRAIN_GRACE, MAX_HELLO_BYTES};
use rlx_proto::keys::Key;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::{timeout_at, Instant};

/// Who may make this agent measure its link (`rlx-agent --measure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Policy {
    /// Nobody: every request is refused.
    Off,
    /// Only coordinators that prove the cluster key; an agent without a
    /// key measures for no one. The default: without a key, anyone who
    /// reaches the port could make the agent move 64 MiB each way on
    /// demand.
    #[default]
    Keyed,
    /// Anyone, when the agent has no key (with a key the proof is still
    /// required: a key always decides).
    Any,
}

/// The longest one measurement may hold the one-at-a-time lock: 10 s, then
/// it is aborted, the connection closed and the lock freed.
///
/// A measurement at the agent's hard limits takes 9 round trips (well under
/// 2 s on any link a cluster spans), two windows of 1 s, and the drain of
/// each sender's socket buffer (a few MB, about 3 s at 10 Mbit/s); the
/// default request ends in well under a second on a steady link. Without
/// this bound, one client pausing just under the per-step timeout held the
/// lock about 28 s, again and again.
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// The longest a refusal or abort notice may wait to be written: 1 s, then
/// it is dropped and the connection closed.
///
/// A notice is one short line; a client reading its connection takes it at
/// once. One that stopped reading (a download it started and no longer
/// reads fills the socket) would otherwise block the write for as long as
/// it keeps the connection open: that once held the one-at-a-time lock past
/// [`MAX_HOLD`], so every other coordinator got `busy` for as long as the
/// client liked. The lock is freed before the notice anyway; this bound is
/// what frees the connection.
pub const NOTICE_WAIT: Duration = Duration::from_secs(1);

/// What this agent allows, for a flag or a test to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Who may measure.
    pub policy: Policy,
    /// Measurements a minute per source ([`limit::DEFAULT_PER_MINUTE`]).
    pub per_minute: u32,
    /// See [`MAX_HOLD`].
    pub max_hold: Duration,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            policy: Policy::default(),
            per_minute: limit::DEFAULT_PER_MINUTE,
            max_hold: MAX_HOLD,
        }
    }
}

/// The state one server's measurements share: the rules, the
/// one-at-a-time lock and the rate limits.
#[derive(Debug)]
pub struct Gate {
    pub(crate) rules: Rules,
    busy: Arc<Mutex<()>>,
    limiter: std::sync::Mutex<Limiter>,
    /// The budget of measurements whose request proved the cluster key:
    /// [`limit::KEYED_FACTOR`] times the plain one.
    keyed: std::sync::Mutex<Limiter>,
    /// The budget of measurements without transfers
    /// ([`limit::QUIET_PER_MINUTE`] per source).
    quiet: std::sync::Mutex<Limiter>,
    /// The budget of peer measurements ([`crate::peer_measure`]), which only a
    /// coordinator proving the cluster key can ask for, one per pair this
    /// agent leads in a link map: [`PEER_PER_MINUTE`] per source.
    pub(crate) peers: std::sync::Mutex<Limiter>,
    /// The budget of pre-launch path checks ([`crate::path_check`]), key
    /// holders only: [`PATHS_PER_MINUTE`] per source.
    paths: std::sync::Mutex<Limiter>,
}

/// Path checks a coordinator may ask this agent for a minute: a check of
/// `n` boxes asks a box for one stand-in, at most `n - 1` probes and as
/// many bare connects back, so 1024 covers a check of about 500 boxes a
/// minute. Only key holders can ask at all.
pub const PATHS_PER_MINUTE: u32 = 1024;

/// Peer measurements a coordinator may ask this agent for a minute: a link
/// map of `n` boxes asks one box for at most `n - 1` pairs, each over one
/// path per address of the other box, so 128 covers a map of about 64 boxes
/// on two networks each minute. Only key holders can ask at all.
pub const PEER_PER_MINUTE: u32 = 128;

impl Gate {
    /// A gate for `rules`, nothing running.
    pub fn new(rules: Rules) -> Gate {
        Gate {
            rules,
            busy: Arc::default(),
            limiter: std::sync::Mutex::new(Limiter::new(rules.per_minute)),
            keyed: std::sync::Mutex::new(Limiter::new(
                rules.per_minute.saturating_mul(limit::KEYED_FACTOR),
            )),
            quiet: std::sync::Mutex::new(Limiter::new(limit::QUIET_PER_MINUTE)),
            peers: std::sync::Mutex::new(Limiter::new(PEER_PER_MINUTE)),
            paths: std::sync::Mutex::new(Limiter::new(PATHS_PER_MINUTE)),
        }
    }

    /// One path check charged to the asker `on.peer`, or the refusal's
    /// words. Path checks take no lock: they move a few hundred KiB.
    pub(crate) fn charge_path(&self, on: &Binding) -> Result<(), String> {
        self.paths
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take(on.peer.ip(), std::time::Instant::now())
            .map_err(|limited| limited.reason(on.peer.ip().to_canonical()))
    }
}

impl Gate {
    /// The one-at-a-time lock, and one measurement charged to `budget`
    /// (the plain measurements' or the peer measurements') for the asker
    /// `on.peer`, or the refusal's words. Charged only for a measurement
    /// that runs: a refusal costs the asker nothing and the agent a line.
    pub(crate) fn hold<'a>(
        &self,
        budget: &std::sync::Mutex<Limiter>,
        on: &Binding,
        held: &'a AtomicBool,
    ) -> Result<Holding<'a>, String> {
        let Ok(lock) = Arc::clone(&self.busy).try_lock_owned() else {
            return Err(BUSY.into());
        };
        let holding = Holding::new(lock, held);
        budget
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take(on.peer.ip(), std::time::Instant::now())
            .map_err(|limited| limited.reason(on.peer.ip().to_canonical()))?;
        Ok(holding)
    }
}

/// The refusal of a second measurement while one runs (the protocol's
/// words: a coordinator tells it from other refusals, and tries again).
pub use rlx_proto::handshake::measure::BUSY;

/// The refusal when `--measure off`.
pub const OFF: &str = "link measurement is turned off on this agent (rlx-agent --measure off); \
                       its operator can allow it with --measure keyed (key holders) or any";

/// The refusal of a keyless agent under the default policy.
pub const NO_KEY: &str = "this agent has no cluster key, so it measures links for no one \
                          (rlx-agent --measure keyed, the default, measures only for holders of \
                          the cluster key): give the agent --key-file and the coordinator the \
                          same key_file, or start the agent with --measure any to let anyone who \
                          reaches its port make it move up to 64 MiB each way";

/// Why `policy` refuses every request to an agent with (`keyed`) or
/// without a key; `None` when requests go on to the challenge.
pub fn refusal(policy: Policy, keyed: bool) -> Option<&'static str> {
    match (policy, keyed) {
        (Policy::Off, _) => Some(OFF),
        (Policy::Keyed, false) => Some(NO_KEY),
        (Policy::Keyed | Policy::Any, _) => None,
    }
}

/// Serves one measurement whose request `line` was read from `conn`.
/// `step` bounds every wait for the coordinator's next line or byte; the
/// transfers are bounded by the granted windows plus [`DRAIN_GRACE`], and
/// the whole of it by the gate's hold limit ([`MAX_HOLD`]). `held` is true
/// exactly while this measurement holds the lock (the server keeps that
/// connection from being evicted). Returns what happened, for the debug
/// log; every refusal is also sent, unless the client does not read it
/// within [`NOTICE_WAIT`].
pub async fn serve(
    mut conn: BufReader<TcpStream>,
    line: &[u8],
    key: Option<&Key>,
    gate: &Gate,
    on: &Binding,
    step: Duration,
    held: &AtomicBool,
) -> Result<String, String> {
    if let Some(why) = refusal(gate.rules.policy, key.is_some()) {
        return refuse(&mut conn, why.into()).await;
    }
    let req = match parse_request(line) {
        Ok(r) => r,
        Err(why) => return refuse(&mut conn, why).await,
    };
    let nonce = match authenticate(&mut conn, line, key, on, step).await {
        Ok(nonce) => nonce,
        Err(refused) => return refused,
    };
    // What the request costs: a quiet one moves no transfer; a key holder
    // (a coordinator, or another agent of a link map) gets more than a
    // stranger under `--measure any`.
    let budget = if !req.transfers {
        &gate.quiet
    } else if key.is_some() {
        &gate.keyed
    } else {
        &gate.limiter
    };
    let holding = match gate.hold(budget, on, held) {
        Ok(h) => h,
        Err(why) => return refuse(&mut conn, why).await,
    };
    let g = req.granted();
    let hold = gate.rules.max_hold;
    let probe = Udp { key, nonce, on };
    let outcome = tokio::time::timeout(hold, measure(&mut conn, &g, step, probe)).await;
    // Free before any notice: its write may wait on a client that stopped
    // reading, and the next coordinator must not wait with it.
    drop(holding);
    match outcome {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(Stop::Broken(why))) => Err(why),
        Ok(Err(Stop::Refuse(why))) => refuse(&mut conn, why).await,
        Err(_) => {
            refuse(
                &mut conn,
                format!(
                    "aborted: the measurement held this agent longer than its {} ms limit; \
                     nothing is counted",
                    hold.as_millis()
                ),
            )
            .await
        }
    }
}

/// The challenge, then the coordinator's proof when this agent holds a
/// key (over the nonce, the connection's ends and the request `line`):
/// the nonce when the request may go on, else the outcome of the refusal
/// sent.
pub(crate) async fn authenticate(
    conn: &mut BufReader<TcpStream>,
    line: &[u8],
    key: Option<&Key>,
    on: &Binding,
    step: Duration,
) -> Result<Nonce, Result<String, String>> {
    let nonce = match Nonce::random() {
        Ok(n) => n,
        Err(why) => return Err(refuse(conn, why).await),
    };
    let challenge = Challenge {
        rlx: "challenge".into(),
        v: MEASURE_VERSION,
        nonce: nonce.to_hex(),
        local: endpoint_text(on.local),
        peer: endpoint_text(on.peer),
        keyed: key.is_some(),
        limits: AgentLimits::default(),
    };
    send(conn, challenge.line().as_bytes(), step)
        .await
        .map_err(Err)?;
    let prove_line = read_line(conn, Instant::now() + step).await.map_err(Err)?;
    let prove: Prove = match serde_json::from_slice::<Prove>(prove_line.trim_ascii_end()) {
        Ok(p) if p.rlx == "prove" => p,
        _ => {
            let why = "expected {\"rlx\":\"prove\",\"proof\":\"<64 hex>\"} after the challenge";
            return Err(refuse(conn, why.into()).await);
        }
    };
    if let Some(k) = key {
        let why = match prove.proof.as_deref() {
            None => Some(
                "this agent holds a cluster key and measures links only for key holders: \
                 the request carries no proof (give the coordinator the cluster's key_file)",
            ),
            Some(p) if !verify_request(k, &nonce, &challenge.local, &challenge.peer, line, p) => {
                Some(
                    "the proof does not verify under this agent's cluster key (the \
                     coordinator holds another key, or something in between changed the request)",
                )
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            return Err(refuse(conn, why.into()).await);
        }
    }
    Ok(nonce)
}

/// The one-at-a-time lock, held, and the flag that keeps the server from
/// evicting its connection: both end together, when this is dropped.
pub(crate) struct Holding<'a> {
    _lock: OwnedMutexGuard<()>,
    held: &'a AtomicBool,
}

impl<'a> Holding<'a> {
    fn new(lock: OwnedMutexGuard<()>, held: &'a AtomicBool) -> Holding<'a> {
        held.store(true, Ordering::Relaxed);
        Holding { _lock: lock, held }
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.held.store(false, Ordering::Relaxed);
    }
}

/// Why [`measure`] stopped.
enum Stop {
    /// The connection broke (or the coordinator went quiet): nobody to
    /// tell; the reason goes to the log.
    Broken(String),
    /// A refusal to send to the coordinator.
    Refuse(String),
}

/// What the UDP probe needs of the measurement: the key and nonce its
/// datagrams are tagged under, and the connection's ends (the agent binds
/// beside its own, and sends only to the client's address).
struct Udp<'a> {
    key: Option<&'a Key>,
    nonce: Nonce,
    on: &'a Binding,
}

/// The granted measurement, after the go-ahead: round trips, the UDP
/// probe when asked for, upload and download unless asked not to.
async fn measure(
    conn: &mut BufReader<TcpStream>,
    g: &Request,
    step: Duration,
    udp: Udp<'_>,
) -> Result<String, Stop> {
    // The probe's socket, bound before the go-ahead names its port; a
    // probe asked without the client's port, or a socket that cannot be
    // bound, is not granted (the client reports it).
    let probe = match g.udp.filter(|u| u.port != 0) {
        Some(ask) => match bind_beside(udp.on.local).await {
            Ok(sock) => {
                let mut to = udp.on.peer;
                to.set_port(ask.port);
                let tagger = Tagger::new(udp.key, &udp.nonce);
                Some(Probe::new(sock, to, tagger, ask, Dir::Down))
            }
            Err(e) => {
                tracing::debug!("no UDP socket for the loss probe: {e}");
                None
            }
        },
        None => None,
    };
    let granted = Request {
        udp: probe.as_ref().and(g.udp),
        ..*g
    };
    let port = probe
        .as_ref()
        .and_then(|p| p.local_port())
        .filter(|_| granted.udp.is_some());
    send(conn, Ready::line(granted, port).as_bytes(), step)
        .await
        .map_err(Stop::Broken)?;
    for i in 0..g.pings {
        let mut b = [0u8; 1];
        match timeout_at(Instant::now() + step, conn.read_exact(&mut b)).await {
            Ok(Ok(_)) => send(conn, &b, step).await.map_err(Stop::Broken)?,
            _ => {
                return Err(Stop::Broken(format!(
                    "round trip {} of {} did not come",
                    i + 1,
                    g.pings
                )))
            }
        }
    }
    let udp_said = match probe {
        Some(p) => {
            let window = g.udp.map_or(0, |u| u.ms);
            format!(", {}", udp_probe(conn, p, step, window).await?)
        }
        None => String::new(),
    };
    if !g.transfers {
        let _ = conn.get_mut().shutdown().await;
        return Ok(format!(
            "measured: {} round trips{udp_said}, no transfers asked for",
            g.pings
        ));
    }
    let up_deadline = Instant::now() + step + Duration::from_millis(g.up_ms) + DRAIN_GRACE;
    // Ends the upload as soon as its rate is steady: the figures line is
    // the coordinator's signal to stop sending; what it had in flight is
    // read and dropped below.
    let got = receive(conn, g.up_bytes, up_deadline, g.early_stop, g.end_mark)
        .await
        .map_err(|why| Stop::Refuse(format!("upload refused: {why}")))?;
    if got.end == End::Closed && g.end_mark {
        return Err(Stop::Refuse(format!(
            "upload refused: the connection closed after {} bytes without the end mark of a \
             complete upload (cut short); nothing is counted",
            got.meter.total()
        )));
    }
    let up = got.meter.result();
    check_transfer("upload", &up, up.bytes, got.meter.lasted_us())
        .map_err(|why| Stop::Refuse(format!("upload refused: {why}")))?;
    let up_line = format!(
        "{{\"rlx\":\"up\",{}\n",
        &serde_json::to_string(&up).expect("serializes")[1..]
    );
    send(conn, up_line.as_bytes(), step)
        .await
        .map_err(Stop::Broken)?;
    if got.end == End::Steady {
        // The figures are out; the rest is dropped, and an end mark split
        // across the two reads is no reason to fail.
        let rest = g.up_bytes.saturating_sub(got.meter.total());
        if let Err(why) = receive(conn, rest, up_deadline, false, g.end_mark).await {
            return Err(Stop::Refuse(format!("upload refused: {why}")));
        }
    }
    let down_deadline = Instant::now() + Duration::from_millis(g.down_ms) + DRAIN_GRACE;
    // The coordinator closes the connection once the download's rate is
    // steady: a failed write after that is the end, not an error.
    let sent = match send_for(
        conn.get_mut(),
        g.down_bytes,
        g.down_ms,
        down_deadline,
        g.end_mark,
    )
    .await
    {
        Ok(n) => n.to_string(),
        Err(why) => format!("some (the coordinator ended it: {why})"),
    };
    let _ = conn.get_mut().shutdown().await;
    Ok(format!(
        "measured: {} round trips{udp_said}, {} bytes up ({:.0} Mbit/s), {sent} bytes down",
        g.pings,
        up.bytes,
        up.mbps()
    ))
}

/// The agent's half of the UDP probe ([`rlx_proto::handshake::measure_udp`]):
/// waits for the client's first datagram, sends its own, says so, counts
/// until the client's `udp_sent` line and a drain more, then reports what
/// arrived. Returns what happened, for the log.
async fn udp_probe(
    conn: &mut BufReader<TcpStream>,
    mut p: Probe,
    step: Duration,
    window_ms: u64,
) -> Result<String, Stop> {
    p.await_first().await;
    p.send_all().await;
    send(conn, sent_line(&p.sent()).as_bytes(), step)
        .await
        .map_err(Stop::Broken)?;
    // The client sends over the same window, and may have begun later
    // (or been slowed by a busy box): its line gets the window on top.
    let wait = step + Duration::from_millis(window_ms);
    let theirs = p
        .receive_until(read_line(conn, Instant::now() + wait))
        .await;
    let theirs = theirs.map_err(|why| Stop::Broken(format!("the client's udp_sent: {why}")))?;
    parse_sent(&theirs).map_err(Stop::Refuse)?;
    p.drain().await;
    let got = p.got();
    send(conn, got_line(&got).as_bytes(), step)
        .await
        .map_err(Stop::Broken)?;
    Ok(format!(
        "UDP probe: {} of the client's datagrams arrived ({} rejected), largest {} bytes",
        got.got, got.rejected, got.mtu
    ))
}

/// Writes `b`, waiting at most `within` for the client to take it: a
/// client that stops reading fills the socket, and no write on this
/// connection may wait on it without end.
pub(crate) async fn send(
    conn: &mut BufReader<TcpStream>,
    b: &[u8],
    within: Duration,
) -> Result<(), String> {
    match tokio::time::timeout(within, conn.get_mut().write_all(b)).await {
        Ok(r) => r.map_err(|e| format!("write failed: {e}")),
        Err(_) => Err(format!(
            "write stalled: the client read nothing for {} ms",
            within.as_millis()
        )),
    }
}

/// Sends the refusal (within [`NOTICE_WAIT`]) and closes; the reason goes
/// to the log too, and so does a notice the client did not take.
pub(crate) async fn refuse(conn: &mut BufReader<TcpStream>, why: String) -> Result<String, String> {
    let sent = send(conn, error_line(&why).as_bytes(), NOTICE_WAIT).await;
    // Closes our side at once (no wait on the client).
    let _ = conn.get_mut().shutdown().await;
    match sent {
        Ok(()) => Err(format!("refused a link measurement: {why}")),
        Err(unsent) => Err(format!(
            "refused a link measurement: {why} (the notice was not sent: {unsent})"
        )),
    }
}

async fn read_line(conn: &mut BufReader<TcpStream>, by: Instant) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    let mut limited = conn.take(MAX_HELLO_BYTES as u64 + 1);
    match timeout_at(by, limited.read_until(b'\n', &mut line)).await {
        Err(_) => Err("no answer to the challenge in time".into()),
        Ok(Err(e)) => Err(format!("read failed: {e}")),
        Ok(Ok(_)) if line.len() > MAX_HELLO_BYTES => Err(format!(
            "a line longer than {MAX_HELLO_BYTES} bytes; dropped"
        )),
        Ok(Ok(_)) => Ok(line),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod udp_tests;
