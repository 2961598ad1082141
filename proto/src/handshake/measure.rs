//! **Link measurement on the agent's port** — a message type of its own
//! beside the hello, so an agent of this version tells the two apart by the
//! first line's `"rlx"` and an older agent refuses it with its usual error
//! line (which the client reports as "not supported by agent version X").
//!
//! ```text
//! coordinator -> agent  {"rlx":"measure","v":1,"pings":7,"up_bytes":N,"up_ms":250,"down_bytes":N,"down_ms":250,"end_mark":true}\n
//! agent -> coordinator  {"rlx":"challenge","v":1,"nonce":"<64 hex>","local":"..","peer":"..","keyed":true,
//!                        "limits":{"pings":9,"bytes":67108864,"ms":1000}}\n
//! coordinator -> agent  {"rlx":"prove","proof":"<64 hex>"}\n          (no "proof" without a key)
//! agent -> coordinator  {"rlx":"ready","pings":7,"up_bytes":..,"up_ms":..,"down_bytes":..,"down_ms":..}\n
//! pings                 1 byte each way, `pings` times (the coordinator times them)
//! upload                zeros, coordinator -> agent, then END_MARK, then the coordinator half-closes
//! agent -> coordinator  {"rlx":"up","bytes":..,"window_bytes":..,"window_us":..}\n
//! download              zeros, agent -> coordinator, then END_MARK, then the agent closes
//! ```
//!
//! (`END_MARK` only when the request asks for it with `"end_mark":true`;
//! see [`END_MARK`] for why.)
//!
//! Every refusal (malformed request, no or wrong proof, a test already
//! running) is the handshake's error line, `{"rlx":"error","v":2,"error":
//! "..."}`, naming the reason.
//!
//! **Authentication.** The proof goes the other way from the handshake's: the
//! coordinator proves it holds the cluster key, over the agent's fresh nonce
//! and the connection as the agent sees it:
//!
//! ```text
//! proof = HMAC-SHA256(key, "rlx-measure-v1" || nonce (32 raw bytes)
//!                          || u32be(len local) || local || u32be(len peer) || peer
//!                          || u32be(len request) || request line as sent, without "\n")
//! ```
//!
//! The nonce makes a captured proof worthless on another connection; the
//! endpoints let the coordinator refuse a relay (which would also measure
//! the wrong path); the request under the MAC stops anyone in between from
//! enlarging the transfer. Whether an agent without a key measures at all
//! is its operator's choice (`rlx-agent --measure`: by default it refuses,
//! since anyone could otherwise make it move 64 MiB each way on demand).
//!
//! **Sense.** Figures are checked against physical limits before they
//! count ([`super::measure_sense`]).
//!
//! **Bounds.** The agent grants the smaller of what was asked and its own
//! hard limits ([`MAX_PINGS`], [`MAX_BYTES`], [`MAX_MS`] per direction), and
//! runs one measurement at a time: a second one is refused as busy.
//!
//! **Rate.** The receiving end times every read and reports the rate over the
//! transfer's last three quarters ([`Meter`]): the first quarter (TCP slow
//! start, a token bucket's initial burst) is the warm-up, left out.

use super::measure_udp::UdpAsk;
use super::proof::{check, field, sign, Nonce};
use crate::keys::Key;
use hmac::Mac;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// An agent's refusal of a measurement while another runs on it (one at a
/// time, so that two tests do not measure each other). It is the only
/// refusal worth retrying at once: the other measurement ends within the
/// agent's hold limit, usually within a second.
pub const BUSY: &str = "busy: a link measurement is already running on this agent (one at a \
                        time, so that two tests do not measure each other); try again when it ends";

/// Whether a refusal (as an agent sent it, or quoted inside another
/// agent's) says the agent was busy.
pub fn is_busy(why: &str) -> bool {
    why.contains(BUSY)
}

/// The version of the measurement messages (`"v"` of a request).
pub const MEASURE_VERSION: u64 = 1;

/// Domain-separation tag of the coordinator's proof: never the same input
/// as a handshake proof under the same key.
pub const MEASURE_TAG: &[u8] = b"rlx-measure-v1";

/// Most round trips an agent grants: 9 give a stable median; more only
/// lengthen the test.
pub const MAX_PINGS: u32 = 9;

/// Most bytes an agent moves per direction: 64 MiB is 50 ms at 10 Gbit/s,
/// so faster links are measured over a shorter window, and no coordinator
/// (or key holder gone wrong) can make one test cost more.
pub const MAX_BYTES: u64 = 64 << 20;

/// Longest an agent sends (or waits to receive) per direction, ms.
pub const MAX_MS: u64 = 1000;

/// The last bytes of a transfer its sender completed, when the request
/// asked for them ([`Request::end_mark`]). The payload before it is zeros,
/// so the mark cannot occur by chance; a connection that closes without it
/// was cut short (evicted by a flood, aborted at a time limit, the sender
/// gone), and its bytes are not a measurement. The mark's 16 bytes are
/// counted like payload at both ends (both ends agree on the total, and 16
/// bytes move no rate).
pub const END_MARK: &[u8; 16] = b"rlx-measure-end\n";

/// What the coordinator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Round trips for the RTT.
    pub pings: u32,
    /// Most bytes coordinator -> agent.
    pub up_bytes: u64,
    /// Most milliseconds coordinator -> agent.
    pub up_ms: u64,
    /// Most bytes agent -> coordinator.
    pub down_bytes: u64,
    /// Most milliseconds agent -> coordinator.
    pub down_ms: u64,
    /// Whether each sender ends a transfer it completed with [`END_MARK`]
    /// (`"end_mark":true`; absent, false, from coordinators and agents that
    /// predate it). With it, a receiver tells a transfer its sender
    /// finished from one cut short (a connection evicted or aborted
    /// mid-transfer closes the same way), and counts only the former.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_mark: bool,
    /// The UDP probe for loss and path MTU, between the round trips and
    /// the upload ([`super::measure_udp`]); absent, none. An agent that
    /// predates it ignores the field and grants none (its go-ahead has no
    /// `"udp"`), which the client reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpAsk>,
    /// Whether the upload and download follow (absent: true). False asks
    /// for the round trips and the UDP probe alone: the link map takes
    /// them in a quiet phase of their own, while no transfer of its own
    /// fills a queue. An agent that predates the field echoes no
    /// `"transfers"` in its go-ahead (read as true), and the client then
    /// makes the transfers it expects.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub transfers: bool,
    /// Whether a receiver ends a transfer as soon as its rate is steady
    /// (absent: true). False runs each transfer for its whole window (or
    /// its bytes): the link map's capacity batches need flows across one
    /// link that run at the same moments, and a flow that stops early
    /// leaves the link to the others. An agent that predates the field
    /// still stops early; the figures then only read less exactly.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub early_stop: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl Default for Request {
    /// 7 round trips and at most 250 ms each way (the receivers end a
    /// transfer early once its rate is steady): at most about 0.6 s per
    /// node. What it takes on a steady link, and how close it comes to
    /// iperf3, is in BENCHMARKS.md ("Link measurement").
    fn default() -> Request {
        Request {
            pings: 7,
            up_bytes: MAX_BYTES,
            up_ms: 250,
            down_bytes: MAX_BYTES,
            down_ms: 250,
            end_mark: true,
            udp: None,
            transfers: true,
            early_stop: true,
        }
    }
}

impl Request {
    /// What an agent grants: each field clamped to its hard limits (and at
    /// least 1, so a zero asks for the least, not for nothing).
    pub fn granted(&self) -> Request {
        Request {
            pings: self.pings.clamp(1, MAX_PINGS),
            up_bytes: self.up_bytes.clamp(1, MAX_BYTES),
            up_ms: self.up_ms.clamp(1, MAX_MS),
            down_bytes: self.down_bytes.clamp(1, MAX_BYTES),
            down_ms: self.down_ms.clamp(1, MAX_MS),
            end_mark: self.end_mark,
            udp: self.udp.map(|u| u.granted()),
            transfers: self.transfers,
            early_stop: self.early_stop,
        }
    }

    /// The request line, newline included.
    pub fn line(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            rlx: &'static str,
            v: u64,
            #[serde(flatten)]
            r: &'a Request,
        }
        let out = Out {
            rlx: "measure",
            v: MEASURE_VERSION,
            r: self,
        };
        format!(
            "{}\n",
            serde_json::to_string(&out).expect("request serializes")
        )
    }
}

/// Whether a first line asks for a measurement rather than a handshake
/// (`"rlx":"measure"`), so the agent can hand it to [`parse_request`].
pub fn is_request(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Tag {
        rlx: String,
    }
    serde_json::from_slice::<Tag>(line.trim_ascii_end()).is_ok_and(|t| t.rlx == "measure")
}

/// Parses a request line (agent side). Every field is required, so a typo
/// is refused rather than measured with a default the sender did not mean;
/// only `end_mark`, which older coordinators do not send, defaults (to
/// false).
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    #[derive(Deserialize)]
    struct In {
        rlx: String,
        v: u64,
        #[serde(flatten)]
        r: Request,
    }
    let msg: In = serde_json::from_slice(line.trim_ascii_end()).map_err(|e| {
        format!(
            "a measure request is {{\"rlx\":\"measure\",\"v\":1,\"pings\":N,\"up_bytes\":N,\
             \"up_ms\":N,\"down_bytes\":N,\"down_ms\":N}}: {e}"
        )
    })?;
    if msg.rlx != "measure" {
        return Err(format!("expected \"rlx\":\"measure\", got {:?}", msg.rlx));
    }
    if msg.v != MEASURE_VERSION {
        return Err(format!(
            "measure version {} is not spoken here; this agent speaks {MEASURE_VERSION}",
            msg.v
        ));
    }
    Ok(msg.r)
}

/// The agent's hard limits, sent in the challenge so a coordinator can say
/// why it got less than it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLimits {
    /// [`MAX_PINGS`].
    pub pings: u32,
    /// [`MAX_BYTES`].
    pub bytes: u64,
    /// [`MAX_MS`].
    pub ms: u64,
}

impl Default for AgentLimits {
    fn default() -> AgentLimits {
        AgentLimits {
            pings: MAX_PINGS,
            bytes: MAX_BYTES,
            ms: MAX_MS,
        }
    }
}

/// The agent's challenge: a fresh nonce and the connection as it sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Always `"challenge"`.
    pub rlx: String,
    /// [`MEASURE_VERSION`].
    pub v: u64,
    /// 64 hex characters.
    pub nonce: String,
    /// Where the agent accepted the connection.
    pub local: String,
    /// Where it saw the connection come from.
    pub peer: String,
    /// Whether the agent holds a key (and so needs a proof).
    pub keyed: bool,
    /// Its hard limits.
    pub limits: AgentLimits,
}

impl Challenge {
    /// The challenge line, newline included.
    pub fn line(&self) -> String {
        format!(
            "{}\n",
            serde_json::to_string(self).expect("challenge serializes")
        )
    }
}

/// The coordinator's answer to the challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prove {
    /// Always `"prove"`.
    pub rlx: String,
    /// The proof, absent without a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
}

/// The agent's go-ahead: what it grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// Always `"ready"`.
    pub rlx: String,
    /// The granted request.
    #[serde(flatten)]
    pub granted: Request,
    /// The agent's UDP port for the probe, when it granted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_port: Option<u16>,
}

impl Ready {
    /// The go-ahead line for `granted` (with the agent's UDP port when it
    /// grants the probe), newline included.
    pub fn line(granted: Request, udp_port: Option<u16>) -> String {
        let r = Ready {
            rlx: "ready".into(),
            granted,
            udp_port,
        };
        format!("{}\n", serde_json::to_string(&r).expect("ready serializes"))
    }
}

/// The agent's receive-side figures for the upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UpResult {
    /// Bytes received in all.
    pub bytes: u64,
    /// Bytes received in the measured window (warm-up excluded).
    pub window_bytes: u64,
    /// Length of that window, microseconds.
    pub window_us: u64,
}

impl UpResult {
    /// The rate, Mbit/s (10^6 bit/s, as iperf3 counts); 0 for an empty window.
    pub fn mbps(&self) -> f64 {
        mbps(self.window_bytes, self.window_us)
    }
}

/// `bytes` over `us` microseconds in Mbit/s.
pub fn mbps(bytes: u64, us: u64) -> f64 {
    if us == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / us as f64
    }
}

fn mac_input(mac: &mut impl Mac, nonce: &Nonce, local: &str, peer: &str, request: &[u8]) {
    mac.update(MEASURE_TAG);
    mac.update(nonce.as_bytes());
    field(mac, local.as_bytes());
    field(mac, peer.as_bytes());
    field(mac, request.trim_ascii_end());
}

/// The coordinator's proof for a challenge (hex).
pub fn prove_request(key: &Key, nonce: &Nonce, local: &str, peer: &str, request: &[u8]) -> String {
    sign(key, |mac| mac_input(mac, nonce, local, peer, request))
}

/// Whether `proof` is the proof under `key` (constant-time comparison).
pub fn verify_request(
    key: &Key,
    nonce: &Nonce,
    local: &str,
    peer: &str,
    request: &[u8],
    proof: &str,
) -> bool {
    check(key, proof, |mac| {
        mac_input(mac, nonce, local, peer, request)
    })
}

/// The receive side of a transfer: when each read arrived and how much had
/// arrived by then.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// When the receiver began to wait for the transfer (before its first
    /// byte), if it said so ([`Meter::open_at`]).
    opened: Option<Instant>,
    start: Option<Instant>,
    /// (microseconds since the first byte, bytes so far), one per read.
    samples: Vec<(u64, u64)>,
    total: u64,
}

impl Meter {
    /// An empty meter.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Records that the receiver begins to wait for the transfer at `at`:
    /// a transfer whose bytes all arrive in one burst after a stall (its
    /// first segment lost, resent after TCP's retransmission timeout, the
    /// rest held behind it) is then timed from here ([`Meter::result`]).
    pub fn open_at(&mut self, at: Instant) {
        self.opened = Some(at);
    }

    /// From the receiver's opening (or, without one, the first read) to the
    /// last read, microseconds: the longest the transfer can have lasted.
    pub fn lasted_us(&self) -> u64 {
        match (self.opened, self.start) {
            (Some(o), Some(s)) => {
                s.saturating_duration_since(o).as_micros() as u64 + self.span_us()
            }
            _ => self.span_us(),
        }
    }

    /// Records that `n` bytes arrived now.
    pub fn add(&mut self, n: usize) {
        self.add_at(Instant::now(), n)
    }

    /// Records that `n` bytes arrived at `at` (tests give the times).
    pub fn add_at(&mut self, at: Instant, n: usize) {
        let start = *self.start.get_or_insert(at);
        self.total += n as u64;
        let us = at.saturating_duration_since(start).as_micros() as u64;
        self.samples.push((us, self.total));
    }

    /// Bytes received in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// From the first read to the last, microseconds.
    pub fn span_us(&self) -> u64 {
        self.samples.last().map_or(0, |s| s.0)
    }

    /// Whether the rate has settled: at least [`STEADY_MIN`] in, and the
    /// two halves of the measured window (the last three quarters) within
    /// [`STEADY_TOLERANCE`] of each other. A receiver that sees this ends
    /// the transfer early: more of the same rate would only cost time.
    pub fn steady(&self) -> bool {
        let s = &self.samples;
        let Some(&(t_last, b_last)) = s.last() else {
            return false;
        };
        if t_last < STEADY_MIN.as_micros() as u64 || s.len() < 8 {
            return false;
        }
        let open_t = t_last / 4;
        let mid_t = open_t + (t_last - open_t) / 2;
        let (t_open, b_open) = s[s.partition_point(|x| x.0 < open_t)];
        let (t_mid, b_mid) = s[s.partition_point(|x| x.0 < mid_t)];
        if t_mid <= t_open || t_last <= t_mid {
            return false;
        }
        let first = (b_mid - b_open) as f64 / (t_mid - t_open) as f64;
        let second = (b_last - b_mid) as f64 / (t_last - t_mid) as f64;
        (first - second).abs() <= STEADY_TOLERANCE * first.max(second)
    }

    /// The figures over the measured window: from the first read a quarter
    /// of the way into the transfer to the last read. Bytes of the read
    /// that opens the window arrived before it, so they are not counted.
    /// A transfer too short to window (fewer than 3 reads) is measured
    /// from its first read to its last.
    ///
    /// A window under [`MIN_WINDOW_US`] on a
    /// transfer that lasted longer since the receiver's opening is a stall:
    /// on a lossy link the first segments were lost and resent after TCP's
    /// retransmission timeout, and everything behind them arrived in one
    /// burst. The rate is then every byte over the whole time from the
    /// opening, what the link delivered (iperf3 counts the same way), rather
    /// than a refusal.
    pub fn result(&self) -> UpResult {
        let windowed = self.windowed();
        let lasted = self.lasted_us();
        if self.opened.is_some() && windowed.window_us < MIN_WINDOW_US && lasted >= MIN_WINDOW_US {
            return UpResult {
                bytes: self.total,
                window_bytes: self.total,
                window_us: lasted,
            };
        }
        windowed
    }

    fn windowed(&self) -> UpResult {
        let (Some(first), Some(last)) = (self.samples.first(), self.samples.last()) else {
            return UpResult::default();
        };
        let warm = last.0 / 4;
        let open = self
            .samples
            .iter()
            .find(|s| s.0 >= warm && s.0 < last.0)
            .filter(|_| self.samples.len() >= 3)
            .unwrap_or(first);
        UpResult {
            bytes: self.total,
            window_bytes: last.1 - open.1,
            window_us: last.0 - open.0,
        }
    }
}

/// Time left before `deadline`, zero once it passed.
pub(crate) fn left(deadline: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(tokio::time::Instant::now())
}

/// Shortest window a rate may be computed over, microseconds: 5 ms.
///
/// A rate is bytes over the time between two reads, and on a loaded box a
/// read returns up to about a millisecond after its bytes arrived; over
/// 5 ms that jitter is at most a fifth of the window. A complete transfer
/// of the default request (64 MiB, the agent's limit) has a window that
/// short only above about 80 Gbit/s (its measured three quarters, 48 MiB,
/// take 5 ms at 80 Gbit/s), and a transfer bound by time runs at least the
/// 40 ms of the steadiness rule; a request for fewer bytes gets a shorter
/// window, and must ask for enough to be measured.
pub const MIN_WINDOW_US: u64 = 5_000;

/// The shortest a transfer runs before its receiver may end it as steady
/// ([`Meter::steady`]): its first quarter, 10 ms, is the warm-up, well past
/// TCP slow start on a LAN (a few round trips of a fraction of a ms).
pub const STEADY_MIN: Duration = Duration::from_millis(40);

/// How far apart the rates of the two halves of the measured window may be
/// for the transfer to count as steady: 3%, well inside the 10% the
/// measurement is held to against iperf3.
pub const STEADY_TOLERANCE: f64 = 0.03;

/// The block one write sends: large enough that a 10 Gbit/s sender makes
/// few system calls, small enough that the time check after each write
/// stops the sender within a fraction of a millisecond at 1 Gbit/s.
const BLOCK: usize = 128 * 1024;

/// Sends zeros on `w` until `ms` milliseconds passed or `bytes` were sent,
/// whichever comes first, then, with `mark`, the [`END_MARK`]; gives up at
/// `deadline`. Returns the bytes sent, the mark included.
pub async fn send_for<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    bytes: u64,
    ms: u64,
    deadline: tokio::time::Instant,
    mark: bool,
) -> Result<u64, String> {
    use tokio::io::AsyncWriteExt;
    let block = vec![0u8; BLOCK];
    let start = Instant::now();
    let stop = Duration::from_millis(ms);
    let mut sent = 0u64;
    while sent < bytes && start.elapsed() < stop {
        let n = (bytes - sent).min(BLOCK as u64) as usize;
        match tokio::time::timeout(left(deadline), w.write_all(&block[..n])).await {
            Err(_) => return Err(format!("sending stalled after {sent} bytes")),
            Ok(Err(e)) => return Err(format!("connection failed after {sent} bytes sent: {e}")),
            Ok(Ok(())) => sent += n as u64,
        }
    }
    if mark {
        match tokio::time::timeout(left(deadline), w.write_all(END_MARK)).await {
            Err(_) => return Err(format!("the end mark stalled after {sent} bytes")),
            Ok(Err(e)) => return Err(format!("connection failed after {sent} bytes sent: {e}")),
            Ok(Ok(())) => sent += END_MARK.len() as u64,
        }
    }
    Ok(sent)
}

/// How a received transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The receiver ended it: the rate was steady ([`Meter::steady`]).
    Steady,
    /// The sender closed after its [`END_MARK`]: it completed the transfer.
    Marked,
    /// The sender's side closed without the mark: cut short when a mark
    /// was expected, the only possible end when none was.
    Closed,
}

/// What a receiver got: the meter and how the transfer ended.
#[derive(Debug, Clone)]
pub struct Received {
    /// Every read, timed.
    pub meter: Meter,
    /// How it ended.
    pub end: End,
}

/// Reads `r` to its end, timing every read; refuses more than `max` bytes
/// (plus the [`END_MARK`] when `mark`) and anything still arriving at
/// `deadline`, so a peer cannot make the receiver read more or longer than
/// was granted. With `early`, returns as soon as the rate is steady
/// ([`Meter::steady`]), the rest unread. With `mark`, the end says whether
/// the sender closed after the mark ([`End::Marked`]) or without it.
pub async fn receive<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    max: u64,
    deadline: tokio::time::Instant,
    early: bool,
    mark: bool,
) -> Result<Received, String> {
    use tokio::io::AsyncReadExt;
    let granted = max;
    let max = max.saturating_add(if mark { END_MARK.len() as u64 } else { 0 });
    let mut buf = vec![0u8; BLOCK];
    let mut meter = Meter::new();
    meter.open_at(Instant::now());
    // The last bytes read, for the mark at the end.
    let mut tail: Vec<u8> = Vec::with_capacity(2 * END_MARK.len());
    loop {
        match tokio::time::timeout(left(deadline), r.read(&mut buf)).await {
            Err(_) => {
                return Err(format!(
                    "still sending at the deadline ({} bytes received)",
                    meter.total()
                ))
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "connection failed after {} bytes received: {e}",
                    meter.total()
                ))
            }
            Ok(Ok(0)) => {
                let end = if mark && tail.ends_with(END_MARK) {
                    End::Marked
                } else {
                    End::Closed
                };
                return Ok(Received { meter, end });
            }
            Ok(Ok(n)) => {
                meter.add(n);
                if meter.total() > max {
                    return Err(format!("sent more than the {granted} bytes granted"));
                }
                if mark {
                    tail.extend_from_slice(&buf[n.saturating_sub(END_MARK.len())..n]);
                    let cut = tail.len().saturating_sub(END_MARK.len());
                    tail.drain(..cut);
                }
                if early && meter.steady() {
                    return Ok(Received {
                        meter,
                        end: End::Steady,
                    });
                }
            }
        }
    }
}

/// The refusal line, the handshake's error line (`{"rlx":"error","v":2,
/// "error":"..."}`), so a person at the port with `nc` reads why.
pub fn error_line(why: &str) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        rlx: &'static str,
        v: u64,
        error: &'a str,
    }
    let out = Out {
        rlx: "error",
        v: super::wire::VERSION,
        error: why,
    };
    format!(
        "{}\n",
        serde_json::to_string(&out).expect("error line serializes")
    )
}
