//! **The coordinator's side of a link measurement** ([`measure_link`]):
//! the request, the proof, the round trips and both transfers on one
//! connection, under one deadline. The messages are in [`super::measure`].

use super::measure::{
    prove_request, receive, Challenge, End, Prove, Ready, Received, Request, UpResult, END_MARK,
    MEASURE_VERSION,
};
use super::measure_sense::{check_rtts, check_transfer};
use super::measure_udp::{sent_line, Dir, Got, Probe, Sent, Tagger, UdpFigures};
use super::proof::Nonce;
use super::wire::MAX_HELLO_BYTES;
use crate::keys::Key;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{timeout_at, Instant};

/// Extra time a measurement gets beyond its transfer windows: the data
/// still queued in the sender's socket buffer when its window closes
/// drains at the link's rate (a few MB: well under a second at 100 Mbit/s).
pub const DRAIN_GRACE: Duration = Duration::from_secs(3);

/// What one measurement found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkMeasurement {
    /// Median round trip, ms.
    pub rtt_ms: f64,
    /// Every round trip, ms, in order.
    pub rtt_samples_ms: Vec<f64>,
    /// Coordinator -> agent, Mbit/s, as the agent received it (0 when the
    /// request asked for no transfers, [`Request::transfers`]).
    pub up_mbps: f64,
    /// Agent -> coordinator, Mbit/s, as the coordinator received it (0
    /// without transfers).
    pub down_mbps: f64,
    /// Bytes moved coordinator -> agent.
    pub up_bytes: u64,
    /// Bytes moved agent -> coordinator.
    pub down_bytes: u64,
    /// Wall time of the whole measurement, connect to close, ms.
    pub took_ms: u64,
    /// Loss and path MTU each way, when the request asked for the UDP
    /// probe ([`super::measure_udp`]); with the reason for a direction
    /// without figures, or for no probe at all (an agent that predates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpFigures>,
}

impl LinkMeasurement {
    /// `0.21 ms, 9.3 Gbit/s up, 9.1 down` (the `# found by` comment and the
    /// report).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} ms, {} up, {} down",
            round_sig(self.rtt_ms),
            rate_text(self.up_mbps),
            rate_number(self.down_mbps, self.up_mbps)
        );
        if let Some(u) = &self.udp {
            for (way, d) in [("up", &u.up), ("down", &u.down)] {
                if let Some(d) = d {
                    s.push_str(&format!(", {} {way}", d.summary()));
                }
            }
        }
        s
    }
}

/// Two significant digits, at least two decimals below 1 (`0.21`, `1.4`, `23`).
fn round_sig(x: f64) -> String {
    if x < 1.0 {
        format!("{x:.2}")
    } else if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// `9.3 Gbit/s`, `940 Mbit/s`.
pub fn rate_text(mbps: f64) -> String {
    if mbps >= 1000.0 {
        format!("{} Gbit/s", round_sig(mbps / 1000.0))
    } else {
        format!("{} Mbit/s", round_sig(mbps))
    }
}

/// The second rate in the unit of the first, number only (`9.1`), or with
/// its unit when that differs.
fn rate_number(mbps: f64, like: f64) -> String {
    match (mbps >= 1000.0, like >= 1000.0) {
        (true, true) => round_sig(mbps / 1000.0),
        (false, false) => round_sig(mbps),
        _ => rate_text(mbps),
    }
}

/// Why a link was not measured. The report shows it and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeasureError {
    /// The agent predates link measurement: it answered our request as a
    /// malformed hello.
    #[error("{addr}: link measurement not supported by agent version {version} (upgrade rlx-agent on that machine to measure its link)")]
    Unsupported {
        /// The address dialled.
        addr: SocketAddr,
        /// The agent's version from its caps.
        version: String,
    },
    /// The agent refused a measurement or a path check, saying why (busy,
    /// no proof, wrong key, limits, the port taken).
    #[error("{addr}: the agent refused the request: {why}")]
    Refused {
        /// The address dialled.
        addr: SocketAddr,
        /// Its reason.
        why: String,
    },
    /// The connection is not the one we made (a relay or NAT between us):
    /// a proof would be bound to another connection, and the rate would be
    /// another path's.
    #[error("{addr}: the agent accepted {local} from {peer}, but we dialled {addr} from {from}: something in between carries the connection on, so its link cannot be measured (and a proof would not be bound to our connection)")]
    Relayed {
        /// The address dialled.
        addr: SocketAddr,
        /// Our end of the connection.
        from: SocketAddr,
        /// What the agent says it accepted on.
        local: String,
        /// What the agent says the connection came from.
        peer: String,
    },
    /// The figures make no physical sense (a window too short for a rate,
    /// a rate above 1 Tbit/s, a round trip of no time): refused, never
    /// written ([`super::measure_sense`] has the limits and why).
    #[error("{addr}: the link measurement's figures are refused as impossible: {why}")]
    Implausible {
        /// The address dialled.
        addr: SocketAddr,
        /// Which figure, and the limit it broke.
        why: String,
    },
    /// Anything else: cannot connect, closed, cut short, timed out,
    /// garbled.
    #[error("{addr}: link measurement failed: {why}")]
    Failed {
        /// The address dialled.
        addr: SocketAddr,
        /// What happened.
        why: String,
    },
}

/// A connection to an agent, split, and our end's address (which the
/// proof binds).
pub(crate) type Dialled = (BufReader<OwnedReadHalf>, OwnedWriteHalf, SocketAddr);

/// Connects to the agent at `addr` by `by`, for a measurement or a path
/// check: no delay (every request and answer is a short line).
pub(crate) async fn dial(addr: SocketAddr, by: Instant) -> Result<Dialled, MeasureError> {
    let failed = |why: String| MeasureError::Failed { addr, why };
    let stream = match timeout_at(by, TcpStream::connect(addr)).await {
        Err(_) => return Err(failed("no connection in time".into())),
        Ok(Err(e)) => return Err(failed(format!("cannot connect: {e}"))),
        Ok(Ok(s)) => s,
    };
    let _ = stream.set_nodelay(true);
    let from = stream
        .local_addr()
        .map_err(|e| failed(format!("no local address: {e}")))?;
    let (rd, wr) = stream.into_split();
    Ok((BufReader::new(rd), wr, from))
}

/// Measures the link to the agent at `addr`: the median of the granted
/// round trips, then the upload and the download (see [`super::measure`]).
///
/// `key` is the cluster key to prove (the agent refuses without it when it
/// holds one); `version` is the agent's version from its caps, named when
/// the agent is too old to measure. `timeout` bounds each step that waits
/// for a line; the whole measurement is bounded by `timeout`, the requested
/// windows and [`DRAIN_GRACE`].
pub async fn measure_link(
    addr: SocketAddr,
    key: Option<&Key>,
    req: &Request,
    timeout: Duration,
    version: &str,
) -> Result<LinkMeasurement, MeasureError> {
    let started = std::time::Instant::now();
    let g = req.granted();
    let udp_ms = g.udp.map_or(0, |u| u.ms + UDP_EXTRA_MS);
    let deadline = Instant::now()
        + timeout
        + Duration::from_millis(g.up_ms + g.down_ms + udp_ms)
        + DRAIN_GRACE;
    let failed = |why: String| MeasureError::Failed { addr, why };
    let (mut rd, mut wr, from) = dial(addr, deadline).await?;
    // Each wait for a line gets `timeout`, within the whole deadline.
    let step = || (Instant::now() + timeout).min(deadline);

    // The probe's socket beside our end of the connection: its port goes
    // in the request (under the proof), where the agent sends its datagrams.
    let mut req = *req;
    let mut sock = None;
    if let Some(u) = req.udp.as_mut() {
        let mut here = from;
        here.set_port(0);
        match UdpSocket::bind(here).await {
            Ok(s) => {
                u.port = s.local_addr().map_or(0, |a| a.port());
                sock = Some(s);
            }
            Err(e) => {
                return Err(failed(format!(
                    "no UDP socket on {here} for the loss probe: {e}"
                )))
            }
        }
    }
    let request = req.line();
    let nonce = open(
        (&mut rd, &mut wr),
        (addr, from),
        &request,
        key,
        (timeout, deadline),
        version,
    )
    .await?;
    let line = read_line(&mut rd, step())
        .await
        .map_err(|e| failed(format!("waiting for the go-ahead: {e}")))?;
    let ready = parse_reply::<Ready>(&line, "ready").into_result(addr)?;
    let granted = ready.granted;
    if granted.granted() != granted {
        return Err(failed(format!(
            "the agent granted more than its own limits allow: {granted:?}"
        )));
    }

    let mut rtts = Vec::with_capacity(granted.pings as usize);
    for i in 0..granted.pings {
        let t = std::time::Instant::now();
        write(&mut wr, b"p", deadline)
            .await
            .map_err(|e| failed(format!("round trip {}: {e}", i + 1)))?;
        let mut b = [0u8; 1];
        match timeout_at(step(), rd.read_exact(&mut b)).await {
            Ok(Ok(_)) => rtts.push(t.elapsed().as_secs_f64() * 1000.0),
            Ok(Err(e)) => return Err(failed(format!("round trip {}: {e}", i + 1))),
            Err(_) => return Err(failed(format!("round trip {} got no answer", i + 1))),
        }
    }

    let udp = match (sock, granted.udp, ready.udp_port) {
        (Some(sock), Some(ask), Some(port)) => {
            let mut to = addr;
            to.set_port(port);
            let p = Probe::new(sock, to, Tagger::new(key, &nonce), ask, Dir::Up);
            Some(
                udp_probe(&mut rd, &mut wr, p, (timeout, deadline))
                    .await
                    .map_err(|e| failed(format!("UDP probe: {e}")))?,
            )
        }
        (Some(_), _, _) => Some(UdpFigures {
            notes: vec![format!(
                "the agent (version {version}) did not grant the UDP probe: it predates it, or \
                 could not open a UDP socket; loss and MTU not measured"
            )],
            ..UdpFigures::default()
        }),
        (None, _, _) => None,
    };

    // A transfer that fails after the probe found a smaller MTU on the
    // way is most likely TCP stalled in that black hole: say so.
    let hint = udp.as_ref().and_then(mtu_hint);
    let failed = |why: String| MeasureError::Failed {
        addr,
        why: match &hint {
            Some(h) => format!("{why} ({h})"),
            None => why,
        },
    };
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    if !granted.transfers {
        check_rtts(&rtts).map_err(|why| MeasureError::Implausible { addr, why })?;
        return Ok(LinkMeasurement {
            rtt_ms: sorted[sorted.len() / 2],
            rtt_samples_ms: rtts,
            up_mbps: 0.0,
            down_mbps: 0.0,
            up_bytes: 0,
            down_bytes: 0,
            took_ms: started.elapsed().as_millis() as u64,
            udp,
        });
    }
    let up_started = Instant::now();
    let (up_bytes, line) = upload(&mut wr, &mut rd, &granted, deadline)
        .await
        .map_err(|e| failed(format!("upload: {e}")))?;
    let up_lasted = up_started.elapsed().as_micros() as u64;
    let up: UpResult = parse_reply(&line, "up").into_result(addr)?;
    if up.bytes > up_bytes {
        return Err(failed(format!(
            "we sent {up_bytes} bytes, the agent counted {}",
            up.bytes
        )));
    }
    // Ends the download as soon as its rate is steady: dropping the
    // connection (below) is the agent's signal to stop.
    let down = receive(
        &mut rd,
        granted.down_bytes,
        deadline,
        granted.early_stop,
        granted.end_mark,
    )
    .await
    .map_err(|e| failed(format!("download: {e}")))?;
    complete(&down, &granted).map_err(failed)?;
    let implausible = |why: String| MeasureError::Implausible { addr, why };
    check_rtts(&rtts).map_err(implausible)?;
    // The agent may begin to wait for the upload up to a round trip
    // before our first byte leaves (its last line had to reach us).
    let longest_rtt_us = rtts.iter().fold(0.0f64, |m, &r| m.max(r)) * 1000.0;
    let up_mbps = check_transfer("upload", &up, up_bytes, up_lasted + longest_rtt_us as u64)
        .map_err(implausible)?;
    let down_figures = down.meter.result();
    let down_mbps = check_transfer(
        "download",
        &down_figures,
        down_figures.bytes,
        down.meter.lasted_us(),
    )
    .map_err(implausible)?;
    Ok(LinkMeasurement {
        rtt_ms: sorted[sorted.len() / 2],
        rtt_samples_ms: rtts,
        up_mbps,
        down_mbps,
        up_bytes,
        down_bytes: down_figures.bytes,
        took_ms: started.elapsed().as_millis() as u64,
        udp,
    })
}

/// What the UDP probe found that explains a stalled transfer: packets
/// above some size vanishing in a direction. The link map adds it to a
/// failed transfer of its rates phase from its quiet phase's probe.
pub fn mtu_hint(f: &UdpFigures) -> Option<String> {
    let mut said = Vec::new();
    for (way, d) in [("up", &f.up), ("down", &f.down)] {
        if let Some(d) = d.as_ref().filter(|d| d.mtu_limited) {
            let m = d.mtu.unwrap_or(0);
            said.push(format!(
                "the UDP probe found packets above {m} bytes vanish {way} though the sender's \
                 interface sends them: an MTU black hole on the way stalls TCP"
            ));
        }
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// Time the UDP probe may take beyond its window, ms: the agent's wait for
/// the first datagram, the ladder, each side's drain and two lines.
pub(super) const UDP_EXTRA_MS: u64 = 500;

/// The client's half of the UDP probe ([`super::measure_udp`]): sends its
/// datagrams while counting the agent's, says so, counts until the agent's
/// `udp_sent` and a drain more, then reads what arrived at the agent.
async fn udp_probe(
    rd: &mut BufReader<OwnedReadHalf>,
    wr: &mut OwnedWriteHalf,
    mut p: Probe,
    (timeout, deadline): (Duration, Instant),
) -> Result<UdpFigures, String> {
    let step = || (Instant::now() + timeout).min(deadline);
    p.send_all().await;
    write(wr, sent_line(&p.sent()).as_bytes(), deadline).await?;
    let line = p.receive_until(read_line(rd, step())).await?;
    let theirs = match parse_reply::<Sent>(&line, "udp_sent") {
        Reply::Ok(s) => s,
        Reply::Refused(why) => return Err(format!("the agent refused: {why}")),
        Reply::Garbled(why) => return Err(why),
    };
    p.drain().await;
    let line = read_line(rd, step()).await?;
    let at_agent = match parse_reply::<Got>(&line, "udp_got") {
        Reply::Ok(g) => g,
        Reply::Refused(why) => return Err(format!("the agent refused: {why}")),
        Reply::Garbled(why) => return Err(why),
    };
    Ok(UdpFigures::from_counts(
        (p.sent(), at_agent),
        (theirs, p.got()),
    ))
}

/// Whether the download is one the agent completed (or we ended as
/// steady), not one cut short: the agent's connection evicted by a flood of
/// others, or aborted at its time limit, closes like a finished one. An
/// agent that marks its ends ([`Request::end_mark`]) must have sent the
/// mark; one that predates the mark must have sent every granted byte or
/// sent for (nearly) its whole window: three quarters of it, so that a
/// late first read on a loaded box does not fail a complete transfer.
fn complete(down: &Received, granted: &Request) -> Result<(), String> {
    let got = down.meter.total();
    let span_ms = down.meter.span_us() / 1000;
    match down.end {
        End::Steady | End::Marked => Ok(()),
        End::Closed if granted.end_mark => Err(format!(
            "the download was cut short: the agent's side closed after {got} bytes in \
             {span_ms} ms without the end mark it sends after a complete transfer \
             (its connection was evicted by a flood of connections at the agent, or \
             the agent aborted it at its time limit), so nothing is counted"
        )),
        End::Closed
            if got >= granted.down_bytes || down.meter.span_us() >= granted.down_ms * 750 =>
        {
            Ok(())
        }
        End::Closed => Err(format!(
            "the download was cut short: the agent closed after {got} of {} bytes in {span_ms} \
             of {} ms, so nothing is counted",
            granted.down_bytes, granted.down_ms
        )),
    }
}

/// Sends the upload until the granted time or bytes are used up, or the
/// agent's figures arrive first (it ends the upload once the rate is
/// steady); then half-closes. Returns the bytes sent and the figures line.
async fn upload(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    rd: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    g: &Request,
    deadline: Instant,
) -> Result<(u64, Vec<u8>), String> {
    let block = vec![0u8; 128 * 1024];
    let start = Instant::now();
    let stop = Duration::from_millis(g.up_ms);
    let mut sent = 0u64;
    let figures = read_line(rd, deadline);
    tokio::pin!(figures);
    let mut early = None;
    while sent < g.up_bytes && start.elapsed() < stop {
        let n = (g.up_bytes - sent).min(block.len() as u64) as usize;
        tokio::select! {
            biased;
            line = &mut figures => {
                early = Some(line.map_err(|e| format!("waiting for the agent's figures: {e}"))?);
                break;
            }
            // One write() at a time: cancelled by the figures, it has sent
            // nothing, so `sent` stays exact.
            w = timeout_at(deadline, wr.write(&block[..n])) => match w {
                Err(_) => return Err(format!("sending stalled after {sent} bytes")),
                Ok(Err(e)) => return Err(format!("connection failed after {sent} bytes sent: {e}")),
                Ok(Ok(k)) => sent += k as u64,
            },
        }
    }
    if g.end_mark {
        // After the figures too: the agent drains what was in flight to the
        // mark, and an upload that ends without one was cut short.
        match timeout_at(deadline, wr.write_all(END_MARK)).await {
            Err(_) => return Err(format!("the end mark stalled after {sent} bytes")),
            Ok(Err(e)) => return Err(format!("connection failed after {sent} bytes sent: {e}")),
            Ok(Ok(())) => sent += END_MARK.len() as u64,
        }
    }
    let _ = wr.shutdown().await;
    let line = match early {
        Some(l) => l,
        None => figures
            .await
            .map_err(|e| format!("waiting for the agent's figures: {e}"))?,
    };
    Ok((sent, line))
}

/// The opening a measurement and a peer measurement share: sends
/// `request`, reads the agent's challenge (of this measure version), and
/// answers it with the proof under `key` over the challenge's nonce and
/// ends (none without a key; refused here when the agent wants one).
/// `timeout` bounds each wait for a line, `deadline` the whole.
pub(super) async fn open(
    (rd, wr): (
        &mut (impl AsyncBufRead + Unpin),
        &mut (impl tokio::io::AsyncWrite + Unpin),
    ),
    (addr, from): (SocketAddr, SocketAddr),
    request: &str,
    key: Option<&Key>,
    (timeout, deadline): (Duration, Instant),
    version: &str,
) -> Result<Nonce, MeasureError> {
    let failed = |why: String| MeasureError::Failed { addr, why };
    let step = || (Instant::now() + timeout).min(deadline);
    write(wr, request.as_bytes(), deadline)
        .await
        .map_err(|e| failed(format!("sending the request: {e}")))?;
    let line = read_line(rd, step())
        .await
        .map_err(|e| failed(format!("waiting for the challenge: {e}")))?;
    let challenge: Challenge = match parse_reply(&line, "challenge") {
        Reply::Ok(c) => c,
        Reply::Refused(why) if why.contains("\"rlx\":\"hello\"") => {
            return Err(MeasureError::Unsupported {
                addr,
                version: version.to_string(),
            })
        }
        Reply::Refused(why) => return Err(MeasureError::Refused { addr, why }),
        Reply::Garbled(why) => return Err(failed(why)),
    };
    if challenge.v != MEASURE_VERSION {
        return Err(failed(format!(
            "the agent speaks measure version {}, this build {MEASURE_VERSION}",
            challenge.v
        )));
    }
    let nonce = Nonce::from_hex(&challenge.nonce)
        .ok_or_else(|| failed("the challenge's nonce is not 64 hex".into()))?;
    let proof = match key {
        Some(k) => {
            check_ends(addr, from, &challenge)?;
            Some(prove_request(
                k,
                &nonce,
                &challenge.local,
                &challenge.peer,
                request.as_bytes(),
            ))
        }
        None if challenge.keyed => {
            return Err(MeasureError::Refused {
                addr,
                why: "the agent holds a cluster key and measures only for key holders: \
                      give the coordinator the cluster's key_file"
                    .into(),
            })
        }
        None => None,
    };
    let prove = Prove {
        rlx: "prove".into(),
        proof,
    };
    let prove_line = format!("{}\n", serde_json::to_string(&prove).expect("serializes"));
    write(wr, prove_line.as_bytes(), deadline)
        .await
        .map_err(|e| failed(format!("sending the proof: {e}")))?;
    Ok(nonce)
}

/// With a key, the challenge's endpoints must be our connection's ends:
/// the proof binds them, and a relay's would be its own.
fn check_ends(addr: SocketAddr, from: SocketAddr, c: &Challenge) -> Result<(), MeasureError> {
    let same = |s: &str, want: SocketAddr| {
        s.parse::<SocketAddr>().is_ok_and(|a| {
            a.ip().to_canonical() == want.ip().to_canonical() && a.port() == want.port()
        })
    };
    if same(&c.local, addr) && same(&c.peer, from) {
        Ok(())
    } else {
        Err(MeasureError::Relayed {
            addr,
            from,
            local: super::messages::cut_chars(&c.local, 60),
            peer: super::messages::cut_chars(&c.peer, 60),
        })
    }
}

async fn write(
    w: &mut (impl tokio::io::AsyncWrite + Unpin),
    b: &[u8],
    deadline: Instant,
) -> Result<(), String> {
    match timeout_at(deadline, w.write_all(b)).await {
        Err(_) => Err("the agent did not take it in time".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(())) => Ok(()),
    }
}

/// One line of at most [`MAX_HELLO_BYTES`], by `deadline`.
pub(super) async fn read_line(
    r: &mut (impl AsyncBufRead + Unpin),
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    let mut limited = r.take(MAX_HELLO_BYTES as u64 + 1);
    match timeout_at(deadline, limited.read_until(b'\n', &mut line)).await {
        Err(_) => Err("no answer in time".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(0)) => Err("the agent closed the connection".into()),
        Ok(Ok(_)) if line.len() > MAX_HELLO_BYTES || !line.ends_with(b"\n") => Err(format!(
            "a line longer than {MAX_HELLO_BYTES} bytes, or cut off"
        )),
        Ok(Ok(_)) => Ok(line),
    }
}

pub(super) enum Reply<T> {
    Ok(T),
    Refused(String),
    Garbled(String),
}

impl<T> Reply<T> {
    /// The answer, or the agent at `addr` refused (its words) or garbled
    /// it: what every request but the first of a measurement makes of it.
    pub(super) fn into_result(self, addr: SocketAddr) -> Result<T, MeasureError> {
        match self {
            Reply::Ok(t) => Ok(t),
            Reply::Refused(why) => Err(MeasureError::Refused { addr, why }),
            Reply::Garbled(why) => Err(MeasureError::Failed { addr, why }),
        }
    }
}

/// A line that is either the `want` message or the handshake's error line.
pub(super) fn parse_reply<T: for<'de> Deserialize<'de>>(line: &[u8], want: &str) -> Reply<T> {
    #[derive(Deserialize)]
    struct Head {
        rlx: String,
        #[serde(default)]
        error: Option<String>,
    }
    let quoted = || String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
    let Ok(head) = serde_json::from_slice::<Head>(line.trim_ascii_end()) else {
        return Reply::Garbled(format!("expected a {want:?} line, got {:?}", quoted()));
    };
    if head.rlx == "error" {
        return Reply::Refused(head.error.unwrap_or_else(|| "(no reason given)".into()));
    }
    if head.rlx != want {
        return Reply::Garbled(format!("expected a {want:?} line, got {:?}", quoted()));
    }
    match serde_json::from_slice::<T>(line.trim_ascii_end()) {
        Ok(t) => Reply::Ok(t),
        Err(e) => Reply::Garbled(format!("a {want:?} line that does not parse ({e})")),
    }
}
