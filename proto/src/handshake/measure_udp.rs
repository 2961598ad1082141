//! **Loss and path MTU: the link measurement's UDP probe** — an optional
//! phase of a measurement ([`super::measure`]), between the round trips
//! and the upload, that the request asks for with `"udp"`:
//!
//! ```text
//! request   ..."udp":{"packets":2000,"ms":250,"port":P}...   (P: the client's UDP port)
//! ready     ..."udp":{...granted...},"udp_port":Q...           (Q: the agent's, 6184 when free)
//! both      UDP datagrams P -> Q (up) and Q -> P (down), at once:
//!           the MTU ladder first (each size MTU_COPIES times, don't-fragment),
//!           then `packets` small ones spread evenly over `ms`
//! both      {"rlx":"udp_sent","packets":N,"mtu":M,"failed":F}\n   (TCP, each to the other)
//! agent     {"rlx":"udp_got","got":K,"mtu":M,"rejected":R}\n      (TCP, what arrived up)
//! ```
//!
//! **Why UDP.** TCP hides loss (it resends) and the path MTU (it segments
//! to the interface's MTU and, in a black hole, stalls). A datagram either
//! arrives or does not: `packets` numbered datagrams give the loss each
//! way, and don't-fragment datagrams of rising size the largest that
//! passes. A size the sender's interface could send that never arrived,
//! while smaller ones did, is a hop with a smaller MTU: a tunnel, or a
//! black hole if nothing told the sender.
//!
//! **When it ends.** Each side, after its last datagram, sends `udp_sent`
//! on the connection; the other keeps counting until that line arrives and
//! [`DRAIN`] more. The line travels the same path behind the datagrams, so
//! a queue that holds them (a standing queue, a box that answers late)
//! holds it too: no datagram still in flight is counted as lost.
//!
//! **Firewalls.** The agent answers from its agent port (UDP 6184, beside
//! the TCP port, when free) and starts its datagrams only once the
//! client's first arrived (or after [`FIRST_WAIT`]): a stateful firewall at
//! the client then lets them in as replies. A direction in which nothing
//! at all arrived is reported as blocked, never as 100% loss: TCP works
//! over that path, so it is a filter, not the link.
//!
//! **Forgery.** Every datagram carries an 8-byte tag, HMAC-SHA256 under the
//! cluster key (the nonce as key without one) over the measurement's nonce,
//! direction, kind, number and size: a neighbour cannot add datagrams to
//! hide loss, nor replay a tag under another number. Datagrams from any
//! other address, with a bad tag or a number out of range are counted as
//! rejected and reported, and count for nothing.
//!
//! **Bounds.** The agent grants at most [`MAX_UDP_PACKETS`] over
//! [`MAX_UDP_MS`], sends only to the address the connection
//! came from, and the phase runs under the measurement's hold limit.

use super::proof::Nonce;
use crate::keys::Key;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::time::Instant;

/// What a request asks of the UDP probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpAsk {
    /// Numbered datagrams each way, for the loss.
    pub packets: u32,
    /// Over how many milliseconds they are spread.
    pub ms: u64,
    /// The client's UDP port, where the agent sends its datagrams (to the
    /// address the connection came from, never another). 0 in a request
    /// that is not sent yet (a peer request: the measuring agent fills it).
    #[serde(default)]
    pub port: u16,
}

impl Default for UdpAsk {
    /// 2,000 datagrams each way over 250 ms: 8,000 a second of 100 bytes,
    /// 6.4 Mbit/s, a small share of any link a cluster runs on. With 2,000
    /// the loss is known to about ±0.6 points (95%) at 2% loss; more
    /// packets narrow it (the agent grants up to [`MAX_UDP_PACKETS`]).
    fn default() -> UdpAsk {
        UdpAsk {
            packets: 2000,
            ms: 250,
            port: 0,
        }
    }
}

impl UdpAsk {
    /// What an agent grants: each field clamped to its hard limits.
    pub fn granted(&self) -> UdpAsk {
        UdpAsk {
            packets: self.packets.clamp(1, MAX_UDP_PACKETS),
            ms: self.ms.clamp(1, MAX_UDP_MS),
            port: self.port,
        }
    }
}

/// Most datagrams an agent sends or counts per direction: 4,000 give the
/// loss within about ±0.45 points (95%) at 2%; more would only load the
/// link.
pub const MAX_UDP_PACKETS: u32 = 4000;

/// Longest an agent spreads its datagrams over, ms: as long as a
/// transfer window may run (`measure::MAX_MS`).
pub const MAX_UDP_MS: u64 = 1000;

/// How long a side keeps counting after the other's `udp_sent` line
/// arrived: the line left after the last datagram on the same path, so
/// only a datagram reordered behind it arrives later.
pub const DRAIN: Duration = Duration::from_millis(25);

/// How long the agent waits for the client's first datagram before it
/// sends its own anyway (the up direction may be filtered).
pub const FIRST_WAIT: Duration = Duration::from_millis(100);

/// The IP packet sizes tried for the path MTU, don't-fragment: the common
/// path MTUs (IPv4's minimum, IPv6's minimum, tunnels and VPNs at 1360 to
/// 1492, Ethernet's 1500) and jumbo frames up to 9000. A sender skips
/// sizes its own interface cannot send.
pub const MTU_LADDER: &[u16] = &[
    576, 1280, 1360, 1400, 1420, 1440, 1460, 1472, 1480, 1492, 1500, 2000, 4000, 8000, 9000,
];

/// How far behind its schedule a sender may catch up at once: 2 ms, 16
/// datagrams at the default rate. A sender held up longer goes on at the
/// rate from where it is (the window stretches) instead of bursting.
const CATCH_UP: Duration = Duration::from_millis(2);

/// Datagrams per ladder size: one lost datagram must not read as a
/// smaller MTU.
pub const MTU_COPIES: u32 = 3;

/// The IP size of a loss datagram.
const LOSS_SIZE: u16 = 100;

/// Domain-separation tag of the datagram tags.
const UDP_TAG: &[u8] = b"rlx-measure-udp-v1";

/// `RLXU` | direction | kind | number (u32) | size (u16) | tag (8 bytes).
const HEADER: usize = 20;
const MAGIC: &[u8; 4] = b"RLXU";
const KIND_LOSS: u8 = b'l';
const KIND_MTU: u8 = b'm';

/// Which way a datagram goes: up is client -> agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client -> agent.
    Up,
    /// Agent -> client.
    Down,
}

impl Dir {
    fn byte(self) -> u8 {
        match self {
            Dir::Up => b'u',
            Dir::Down => b'd',
        }
    }
}

/// IP and UDP header bytes for the family of `a`.
fn overhead(a: SocketAddr) -> u16 {
    if a.ip().to_canonical().is_ipv4() {
        28
    } else {
        48
    }
}

/// Makes and checks the datagrams' tags.
#[derive(Clone)]
pub struct Tagger {
    base: Hmac<Sha256>,
}

impl Tagger {
    /// Tags under `key` (the nonce as key without one), bound to `nonce`.
    pub fn new(key: Option<&Key>, nonce: &Nonce) -> Tagger {
        let mut base = match key {
            Some(k) => k.mac(),
            None => Key::from_bytes(*nonce.as_bytes()).mac(),
        };
        base.update(UDP_TAG);
        base.update(nonce.as_bytes());
        Tagger { base }
    }

    fn tag(&self, head: &[u8]) -> [u8; 8] {
        let mut m = self.base.clone();
        m.update(head);
        let full = m.finalize().into_bytes();
        let mut t = [0u8; 8];
        t.copy_from_slice(&full[..8]);
        t
    }

    /// The datagram (its UDP payload) for an IP packet of `size` bytes to
    /// `to`.
    fn datagram(&self, dir: Dir, kind: u8, seq: u32, size: u16, to: SocketAddr) -> Vec<u8> {
        let len = usize::from(size.saturating_sub(overhead(to))).max(HEADER);
        let mut d = vec![0u8; len];
        d[..4].copy_from_slice(MAGIC);
        d[4] = dir.byte();
        d[5] = kind;
        d[6..10].copy_from_slice(&seq.to_be_bytes());
        d[10..12].copy_from_slice(&size.to_be_bytes());
        let tag = self.tag(&d[..12]);
        d[12..20].copy_from_slice(&tag);
        d
    }

    /// A received datagram's kind, number and size, when it is one of
    /// ours going `dir` and its length matches its size from `from`.
    fn open(&self, d: &[u8], dir: Dir, from: SocketAddr) -> Option<(u8, u32, u16)> {
        if d.len() < HEADER || &d[..4] != MAGIC || d[4] != dir.byte() {
            return None;
        }
        let seq = u32::from_be_bytes(d[6..10].try_into().ok()?);
        let size = u16::from_be_bytes(d[10..12].try_into().ok()?);
        let want = usize::from(size.saturating_sub(overhead(from))).max(HEADER);
        let tag = self.tag(&d[..12]);
        // Constant time is not needed: a tag guards one datagram's count.
        (d.len() == want && d[12..20] == tag).then_some((d[5], seq, size))
    }
}

/// What one side sent, told to the other in its `udp_sent` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sent {
    /// Loss datagrams sent.
    pub packets: u32,
    /// The largest ladder size the sender's interface took (0: the
    /// sender cannot set don't-fragment on this platform, so no MTU).
    pub mtu: u16,
    /// Datagrams the sender's own stack refused (not sizes too large for
    /// its interface): they are not counted as sent.
    pub failed: u32,
}

/// What arrived at one side, from the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Got {
    /// Distinct loss datagrams that arrived.
    pub got: u32,
    /// The largest ladder size that arrived (0: none).
    pub mtu: u16,
    /// Datagrams rejected: another source, a bad tag, a number out of
    /// range or repeated.
    pub rejected: u32,
    /// Datagrams that reached this box but that its kernel dropped because
    /// the probe's receive buffer was full (a busy box reading late): they
    /// crossed the link, so they are not the link's loss.
    #[serde(default)]
    pub dropped_here: u32,
}

/// The figures of one direction: what was sent and what arrived.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UdpDirection {
    /// Loss datagrams sent.
    pub sent: u32,
    /// Of those, arrived.
    pub got: u32,
    /// `100 * (sent - got) / sent`.
    pub loss_pct: f64,
    /// The largest don't-fragment IP packet that arrived, bytes (none
    /// when the sender could not set don't-fragment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
    /// Whether the sender's interface sent larger packets that never
    /// arrived: a hop with a smaller MTU (a tunnel; a black hole for TCP
    /// when nothing tells the sender).
    #[serde(default)]
    pub mtu_limited: bool,
    /// Datagrams rejected by the receiver (forged, replayed, strangers).
    #[serde(default)]
    pub rejected: u32,
    /// Datagrams that crossed the link but that the receiving box dropped
    /// itself, its probe's buffer full (counted as arrived, not lost).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub receiver_drops: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl UdpDirection {
    /// The figures of a direction from the sender's and the receiver's
    /// counts, or why there are none: nothing arrived at all (a filter,
    /// since TCP works on the same path), or the receiver claims more
    /// than was sent.
    pub fn from_counts(sent: Sent, got: Got) -> Result<UdpDirection, String> {
        if got.got > sent.packets {
            return Err(format!(
                "the receiver counted {} datagrams of {} sent",
                got.got, sent.packets
            ));
        }
        if sent.packets == 0 {
            return Err(format!(
                "no datagram could be sent ({} refused by the sender's own stack)",
                sent.failed
            ));
        }
        if got.got == 0 && got.mtu == 0 {
            return Err(format!(
                "none of {} UDP datagrams arrived while TCP works on the same path: UDP to \
                 the agent port is filtered (open UDP 6184 beside TCP 6184 to measure loss \
                 and MTU)",
                sent.packets
            ));
        }
        // What the receiving box dropped itself crossed the link; its own
        // count cannot make more arrive than were sent.
        let arrived = got.got.saturating_add(got.dropped_here).min(sent.packets);
        let lost = sent.packets - arrived;
        Ok(UdpDirection {
            sent: sent.packets,
            got: arrived,
            loss_pct: 100.0 * f64::from(lost) / f64::from(sent.packets),
            mtu: (sent.mtu > 0).then_some(got.mtu),
            mtu_limited: sent.mtu > 0 && got.mtu < sent.mtu,
            rejected: got.rejected,
            receiver_drops: arrived - got.got,
        })
    }

    /// `0.5% loss`, with `, MTU 1400 (less than the interface's)` when the
    /// path's MTU is below what the sender could send.
    pub fn summary(&self) -> String {
        let mut s = format!("{:.1}% loss", self.loss_pct);
        if let (Some(m), true) = (self.mtu, self.mtu_limited) {
            s.push_str(&format!(", MTU {m} (packets above it vanish)"));
        }
        s
    }
}

/// Both directions of a UDP probe: the figures of each, or why a
/// direction has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct UdpFigures {
    /// Client -> agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<UdpDirection>,
    /// Agent -> client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<UdpDirection>,
    /// Why a direction has no figures (`up: ...`, `down: ...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl UdpFigures {
    /// Both directions from the four counts.
    pub fn from_counts(up: (Sent, Got), down: (Sent, Got)) -> UdpFigures {
        let mut f = UdpFigures::default();
        match UdpDirection::from_counts(up.0, up.1) {
            Ok(d) => f.up = Some(d),
            Err(why) => f.notes.push(format!("up: {why}")),
        }
        match UdpDirection::from_counts(down.0, down.1) {
            Ok(d) => f.down = Some(d),
            Err(why) => f.notes.push(format!("down: {why}")),
        }
        f
    }
}

/// Sets don't-fragment on `sock` and makes the kernel send at the size
/// asked whatever path MTU it has cached (so a size is sent, and either
/// arrives or not, rather than refused from an earlier ICMP message).
/// False where the platform gives no such control: then no MTU is
/// reported.
pub fn dont_fragment(sock: &UdpSocket, v6: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (level, name, value) = if v6 {
            (
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                libc::IPV6_PMTUDISC_PROBE,
            )
        } else {
            (
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_PROBE,
            )
        };
        // SAFETY: a valid socket descriptor, an int option of the size
        // given, read by the kernel during the call only.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (sock, v6);
        false
    }
}

/// The receive buffer the probe asks for: 2 MiB hold about 2,500 of its
/// datagrams (a kernel charges about 800 bytes each), 300 ms of the default
/// rate, so a box that reads late loses none. The kernel caps it at
/// `net.core.rmem_max`; what it still drops is counted ([`socket_drops`]).
const RECV_BUFFER: usize = 2 << 20;

/// Datagrams the kernel dropped at `sock` because its receive buffer was
/// full: the `drops` column of its line in `/proc/net/udp` (or `udp6`),
/// found by the socket's inode. 0 where there is no such file.
pub fn socket_drops(sock: &UdpSocket) -> u64 {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(format!("/proc/self/fd/{}", sock.as_raw_fd())) else {
            return 0;
        };
        let inode = meta.ino().to_string();
        for table in ["/proc/self/net/udp", "/proc/self/net/udp6"] {
            let Ok(text) = std::fs::read_to_string(table) else {
                continue;
            };
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() >= 13 && f[9] == inode {
                    return f[12].parse().unwrap_or(0);
                }
            }
        }
        0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = sock;
        0
    }
}

/// One side's half of the probe: its socket, where the other side is, and
/// what it has sent and received so far.
pub struct Probe {
    drops_before: u64,
    sock: UdpSocket,
    to: SocketAddr,
    tagger: Tagger,
    ask: UdpAsk,
    out: Dir,
    mtu_ok: bool,
    sent: Sent,
    seen: Vec<bool>,
    got: Got,
    buf: Vec<u8>,
}

impl Probe {
    /// A probe that sends `out` datagrams to `to` (and counts the other
    /// direction's from `to`'s address), on `sock`.
    pub fn new(sock: UdpSocket, to: SocketAddr, tagger: Tagger, ask: UdpAsk, out: Dir) -> Probe {
        let mtu_ok = dont_fragment(&sock, !to.ip().to_canonical().is_ipv4());
        let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(RECV_BUFFER);
        let drops_before = socket_drops(&sock);
        Probe {
            drops_before,
            sock,
            to,
            tagger,
            ask,
            out,
            mtu_ok,
            sent: Sent::default(),
            seen: vec![false; ask.packets as usize],
            got: Got::default(),
            buf: vec![0u8; 65536],
        }
    }

    fn incoming(&self) -> Dir {
        match self.out {
            Dir::Up => Dir::Down,
            Dir::Down => Dir::Up,
        }
    }

    /// Counts one received datagram.
    fn count(&mut self, n: usize, from: SocketAddr) {
        let ours = from.ip().to_canonical() == self.to.ip().to_canonical();
        let opened = ours
            .then(|| self.tagger.open(&self.buf[..n], self.incoming(), from))
            .flatten();
        match opened {
            Some((KIND_LOSS, seq, _)) if (seq as usize) < self.seen.len() => {
                if std::mem::replace(&mut self.seen[seq as usize], true) {
                    self.got.rejected += 1;
                } else {
                    self.got.got += 1;
                }
            }
            Some((KIND_MTU, _, size)) if MTU_LADDER.contains(&size) => {
                self.got.mtu = self.got.mtu.max(size);
            }
            _ => self.got.rejected += 1,
        }
    }

    /// Receives until `until` resolves, counting; returns its output.
    pub async fn receive_until<T>(&mut self, until: impl Future<Output = T>) -> T {
        tokio::pin!(until);
        loop {
            // `until` first: a stream of datagrams always ready to read
            // must not keep a deadline or the next send from its turn (on
            // a busy box both sides once starved each other's sending).
            tokio::select! {
                biased;
                out = &mut until => {
                    self.take_ready();
                    return out;
                }
                r = self.sock.recv_from(&mut self.buf) => {
                    if let Ok((n, from)) = r {
                        self.count(n, from);
                    }
                }
            }
        }
    }

    /// Counts every datagram already waiting, without waiting for more:
    /// what arrived before a deadline counts even if it was not read yet.
    fn take_ready(&mut self) {
        while let Ok((n, from)) = self.sock.try_recv_from(&mut self.buf) {
            self.count(n, from);
        }
    }

    /// Whether a valid datagram arrived yet.
    fn heard(&self) -> bool {
        self.got.got > 0 || self.got.mtu > 0
    }

    /// The agent's wait for the client's first datagram, at most
    /// [`FIRST_WAIT`], counting what arrives.
    pub async fn await_first(&mut self) {
        let by = Instant::now() + FIRST_WAIT;
        while !self.heard() && Instant::now() < by {
            self.receive_until(tokio::time::sleep(Duration::from_millis(1)))
                .await;
        }
    }

    /// Sends this side's datagrams (the MTU ladder, then the loss
    /// datagrams spread over the granted window), counting what arrives
    /// meanwhile.
    pub async fn send_all(&mut self) {
        if self.mtu_ok {
            for (i, &size) in MTU_LADDER.iter().enumerate() {
                for c in 0..MTU_COPIES {
                    let d = self.tagger.datagram(
                        self.out,
                        KIND_MTU,
                        i as u32 * MTU_COPIES + c,
                        size,
                        self.to,
                    );
                    match self.sock.send_to(&d, self.to).await {
                        Ok(_) => self.sent.mtu = self.sent.mtu.max(size),
                        // Larger than this side's interface: not a path fact.
                        Err(e) if e.raw_os_error() == Some(EMSGSIZE) => break,
                        Err(_) => self.sent.failed += 1,
                    }
                }
            }
        }
        let n = self.ask.packets;
        let gap = Duration::from_millis(self.ask.ms) / n.max(1);
        let mut due = Instant::now();
        for i in 0..n {
            let now = Instant::now();
            if due > now {
                self.receive_until(tokio::time::sleep_until(due)).await;
            } else if now - due > CATCH_UP {
                // Late (a busy box): go on at the rate from here rather than
                // send the backlog at once, which a receiving box's queues
                // would drop and the link be blamed for.
                due = now - CATCH_UP;
            }
            let d = self
                .tagger
                .datagram(self.out, KIND_LOSS, i, LOSS_SIZE, self.to);
            match self.sock.send_to(&d, self.to).await {
                Ok(_) => self.sent.packets += 1,
                Err(_) => self.sent.failed += 1,
            }
            due += gap;
        }
    }

    /// Counts for [`DRAIN`] more (after the other side's `udp_sent`).
    pub async fn drain(&mut self) {
        self.receive_until(tokio::time::sleep(DRAIN)).await;
    }

    /// The port this side's datagrams leave from.
    pub fn local_port(&self) -> Option<u16> {
        self.sock.local_addr().ok().map(|a| a.port())
    }

    /// What this side sent.
    pub fn sent(&self) -> Sent {
        self.sent
    }

    /// What arrived here, with what this box's kernel dropped at the
    /// probe's socket meanwhile.
    pub fn got(&self) -> Got {
        Got {
            dropped_here: socket_drops(&self.sock)
                .saturating_sub(self.drops_before)
                .min(u64::from(u32::MAX)) as u32,
            ..self.got
        }
    }
}

/// The error a send of a datagram larger than the interface's MTU fails
/// with under don't-fragment.
#[cfg(unix)]
const EMSGSIZE: i32 = libc::EMSGSIZE;
#[cfg(not(unix))]
const EMSGSIZE: i32 = -1;

/// Reads a `udp_sent` line (the agent's reading of the client's).
pub fn parse_sent(line: &[u8]) -> Result<Sent, String> {
    #[derive(Deserialize)]
    struct In {
        rlx: String,
        #[serde(flatten)]
        sent: Sent,
    }
    match serde_json::from_slice::<In>(line.trim_ascii_end()) {
        Ok(i) if i.rlx == "udp_sent" => Ok(i.sent),
        _ => Err(
            "expected {\"rlx\":\"udp_sent\",\"packets\":N,\"mtu\":N,\"failed\":N} after \
             the UDP probe"
                .into(),
        ),
    }
}

/// The `udp_sent` line.
pub fn sent_line(s: &Sent) -> String {
    line("udp_sent", s)
}

/// The `udp_got` line.
pub fn got_line(g: &Got) -> String {
    line("udp_got", g)
}

fn line<T: Serialize>(rlx: &'static str, body: &T) -> String {
    #[derive(Serialize)]
    struct Out<'a, T> {
        rlx: &'static str,
        #[serde(flatten)]
        body: &'a T,
    }
    format!(
        "{}\n",
        serde_json::to_string(&Out { rlx, body }).expect("serializes")
    )
}

/// Binds the agent's side of a probe next to its connection's `local`
/// end: UDP on the same port when free (so a firewall opens one port number
/// for both), else any port.
pub async fn bind_beside(local: SocketAddr) -> std::io::Result<UdpSocket> {
    match UdpSocket::bind(local).await {
        Ok(s) => Ok(s),
        Err(_) => {
            let mut any = local;
            any.set_port(0);
            UdpSocket::bind(any).await
        }
    }
}

#[cfg(test)]
mod tests;
