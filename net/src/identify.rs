//! **What listens on the worker port** — telling an RLX worker from the
//! other daemons that sit on port 9100 and near it: a subnet scan's check
//! of a box no agent vouched for, and the agent's own check of its box's
//! worker port (node_exporter's default is 9100 too, so "something
//! listens" is not "the worker listens"). One definition for both, here
//! because the agent depends on rlx-net and not on the rlx-discover
//! library.
//!
//! ```text
//! 10.0.0.7:9100  HTTP (Node Exporter, serves /metrics)   reported, not written
//! 10.0.0.8:9100  a printer (PJL: "HP LaserJet 4250")      reported, not written
//! 10.0.0.9:9100  said nothing                             written, "nothing vouched for it"
//! ```
//!
//! Port 9100 is node_exporter's default, and JetDirect's (9100-9102), so
//! on a real LAN most listeners there are not workers. The scan asks each
//! in the order that is safe for all of them:
//!
//! 1. **Listen** ([`BANNER_WAIT`]): SSH, FTP/SMTP, POP3, IMAP, MySQL and
//!    Redis-style servers speak first and are named by their greeting.
//! 2. **A PJL status query** ([`PJL_PROBE`]) to a listener that said
//!    nothing. A raw printer port prints whatever it gets that is not a
//!    printer command, so the first bytes sent anywhere must be ones a
//!    printer takes as a command and never prints: PJL's "universal exit
//!    language" and `@PJL INFO ID` (nmap leaves 9100-9107 out of version
//!    detection for the same reason). A printer answers with its model;
//!    an HTTP server answers the unknown request line with an error (or,
//!    Python's, an HTML page); a TLS server with an alert.
//! 3. **One more request, only for what step 2 already named**: `GET /` to
//!    an HTTP server (its `Server` header and page title say which, e.g.
//!    node_exporter's landing page), and a TLS ClientHello to a listener
//!    that closed on the PJL bytes (a TLS server does; a printer does not).
//!
//! Everything runs within the caller's one deadline. A listener that stays
//! silent, or greets in a way no rule knows, is what an RLX worker looks
//! like from outside: it is written, with a warning that nothing vouched
//! for it.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a scan waits for a listener to speak first. Servers that do
/// (sshd, SMTP, FTP) send their greeting at once; 100 ms covers a loaded
/// box and still leaves most of the default 300 ms `timeout_ms` for the
/// probe that follows.
pub const BANNER_WAIT: Duration = Duration::from_millis(100);

/// The bytes sent to a listener that said nothing: PJL's universal exit
/// language (UEL) around `@PJL INFO ID`. A printer on a raw port takes it
/// as a job-control command and answers with its model, printing nothing.
pub const PJL_PROBE: &[u8] = b"\x1b%-12345X@PJL INFO ID\r\n\x1b%-12345X\r\n";

/// Most bytes read of any reply: the first line or page head is enough to
/// name a service, and a hostile listener cannot make the scan buffer more.
const MAX_READ: usize = 16 * 1024;

/// What a scan made of a listener on the worker port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Named as another service: never written as a node.
    Other {
        /// The protocol, as people say it (`HTTP`, `SSH`, `TLS`, `a printer (PJL)`).
        protocol: &'static str,
        /// What it said of itself, escaped for one line (`Node Exporter,
        /// serves /metrics`, `SSH-2.0-OpenSSH_9.2p1`).
        detail: String,
    },
    /// Not named: silent, or a greeting no rule knows. An RLX worker looks
    /// like this; so does anything else that waits for its client.
    Unknown {
        /// The first line it sent, escaped, if it sent one.
        greeting: Option<String>,
    },
}

impl Identity {
    /// The report's words for it: `HTTP (Node Exporter, serves /metrics)`.
    pub fn describe(&self) -> String {
        match self {
            Identity::Other { protocol, detail } if detail.is_empty() => (*protocol).to_string(),
            Identity::Other { protocol, detail } => format!("{protocol} ({detail})"),
            Identity::Unknown { greeting: None } => "a listener that said nothing".into(),
            Identity::Unknown { greeting: Some(g) } => format!("a listener that greeted with {g}"),
        }
    }

    /// Who holds the port, product first where the page names one
    /// people know by its program name: `node_exporter (HTTP)`, else as
    /// [`Identity::describe`] says it (`SSH (SSH-2.0-OpenSSH_9.2p1)`).
    /// `None` for a listener not named ([`Identity::Unknown`]), which may
    /// be the RLX worker.
    pub fn held_by(&self) -> Option<String> {
        let Identity::Other { protocol, detail } = self else {
            return None;
        };
        // node_exporter's landing page is titled "Node Exporter"; people
        // (and its systemd unit, its package) call it node_exporter.
        if *protocol == "HTTP" && detail.to_ascii_lowercase().contains("node exporter") {
            return Some("node_exporter (HTTP)".into());
        }
        Some(self.describe())
    }
}

/// Connects to `addr` and names what listens there, by `deadline`; `None`
/// when nothing accepted the connection (refused, or no answer in time).
pub async fn identify_at(addr: SocketAddr, deadline: Instant) -> Option<Identity> {
    let stream = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    Some(identify(addr, stream, deadline).await)
}

/// Names the listener at `addr`, on the connection `stream` the caller
/// already has, by `deadline`.
pub async fn identify(addr: SocketAddr, mut stream: TcpStream, deadline: Instant) -> Identity {
    let mut buf = Vec::new();
    let banner_until = deadline.min(Instant::now() + BANNER_WAIT);
    let closed = read_some(&mut stream, &mut buf, banner_until).await;
    if !buf.is_empty() {
        return from_greeting(&buf);
    }
    if closed {
        return Identity::Unknown { greeting: None };
    }
    if write_by(&mut stream, PJL_PROBE, deadline).await.is_err() {
        return Identity::Unknown { greeting: None };
    }
    let closed = read_some(&mut stream, &mut buf, deadline).await;
    drop(stream);
    match from_reply(&buf) {
        Some(Reply::Http) => Identity::Other {
            protocol: "HTTP",
            detail: http_detail(addr, deadline).await.unwrap_or_default(),
        },
        Some(Reply::Known(id)) => id,
        None if buf.is_empty() && closed && tls_answers(addr, deadline).await => Identity::Other {
            protocol: "TLS",
            detail: "closed on plain bytes, answered a ClientHello".into(),
        },
        None => Identity::Unknown {
            greeting: (!buf.is_empty()).then(|| first_line(&buf)),
        },
    }
}

/// Reads what arrives until `until`, at most [`MAX_READ`] bytes in all;
/// true when the peer closed (or reset) the connection.
async fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>, until: Instant) -> bool {
    let mut chunk = [0u8; 2048];
    while buf.len() < MAX_READ {
        match tokio::time::timeout_at(until, stream.read(&mut chunk)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(n)) => {
                buf.extend_from_slice(&chunk[..n.min(MAX_READ - buf.len())]);
                // A greeting or status line is complete at its line end;
                // waiting on would only spend the deadline.
                if buf.contains(&b'\n') && !looks_like_http(buf) {
                    return false;
                }
                if looks_like_http(buf) && head_complete(buf) {
                    return false;
                }
            }
        }
    }
    false
}

async fn write_by(stream: &mut TcpStream, bytes: &[u8], until: Instant) -> std::io::Result<()> {
    match tokio::time::timeout_at(until, stream.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

fn looks_like_http(b: &[u8]) -> bool {
    b.starts_with(b"HTTP/")
}

/// Whether an HTTP response's head has arrived, and enough of its body to
/// find a title in (or all of it).
fn head_complete(b: &[u8]) -> bool {
    let Some(end) = find(b, b"\r\n\r\n") else {
        return false;
    };
    let body = &b[end + 4..];
    find_ci(body, b"</title>").is_some() || body.len() >= 4096
}

/// What a listener's own greeting names.
fn from_greeting(b: &[u8]) -> Identity {
    let other = |protocol, detail| Identity::Other { protocol, detail };
    if b.starts_with(b"SSH-") {
        return other("SSH", first_line(b));
    }
    if b.starts_with(b"220 ") || b.starts_with(b"220-") {
        return other("FTP or SMTP", first_line(b));
    }
    if b.starts_with(b"+OK") {
        return other("POP3", first_line(b));
    }
    if b.starts_with(b"* OK") {
        return other("IMAP", first_line(b));
    }
    if b.starts_with(b"RFB ") {
        return other("VNC", first_line(b));
    }
    if b.starts_with(b"@PJL") {
        return other("a printer (PJL)", pjl_detail(b));
    }
    if looks_like_http(b) {
        return other("HTTP", first_line(b));
    }
    if is_tls_record(b) {
        return other("TLS", String::new());
    }
    // MySQL and MariaDB greet with a handshake packet: a 3-byte length, a
    // sequence number 0, protocol version 10, then the server version.
    if b.len() > 6 && b[3] == 0 && b[4] == 10 && b[5].is_ascii_digit() {
        let version: Vec<u8> = b[5..].iter().copied().take_while(|&c| c != 0).collect();
        return other("MySQL", first_line(&version));
    }
    Identity::Unknown {
        greeting: Some(first_line(b)),
    }
}

enum Reply {
    Http,
    Known(Identity),
}

/// What a silent listener's answer to [`PJL_PROBE`] names.
fn from_reply(b: &[u8]) -> Option<Reply> {
    if b.starts_with(b"@PJL") || find(b, b"@PJL INFO ID").is_some() {
        return Some(Reply::Known(Identity::Other {
            protocol: "a printer (PJL)",
            detail: pjl_detail(b),
        }));
    }
    // Python's http.server answers a request line it cannot read as
    // HTTP/0.9 would: the HTML error page, with no status line.
    let html = {
        let head = &b[..b.len().min(64)];
        find_ci(head, b"<!doctype html").is_some() || find_ci(head, b"<html").is_some()
    };
    if looks_like_http(b) || html {
        return Some(Reply::Http);
    }
    if is_tls_record(b) {
        return Some(Reply::Known(Identity::Other {
            protocol: "TLS",
            detail: String::new(),
        }));
    }
    None
}

/// A TLS record header: handshake (22) or alert (21), major version 3.
fn is_tls_record(b: &[u8]) -> bool {
    b.len() >= 3 && matches!(b[0], 0x15 | 0x16) && b[1] == 3 && b[2] <= 4
}

/// The model a printer's `@PJL INFO ID` reply names (its second line).
fn pjl_detail(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(b);
    let model = text
        .lines()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '\x0c'))
        .find(|l| !l.is_empty() && !l.starts_with("@PJL"))
        .unwrap_or("");
    escape(model)
}

/// `GET /` on a fresh connection, for an HTTP server: its `Server` header
/// and page title, and whether it serves Prometheus metrics.
async fn http_detail(addr: SocketAddr, deadline: Instant) -> Option<String> {
    let mut s = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let req = format!(
        "GET / HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: rlx-discover\r\nAccept: text/html\r\n\r\n"
    );
    write_by(&mut s, req.as_bytes(), deadline).await.ok()?;
    let mut buf = Vec::new();
    read_some(&mut s, &mut buf, deadline).await;
    Some(describe_http(&buf))
}

/// `Node Exporter, serves /metrics` from an HTTP response.
fn describe_http(b: &[u8]) -> String {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let mut parts = Vec::new();
    let body = match resp.parse(b) {
        Ok(httparse::Status::Complete(n)) => {
            if let Some(server) = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("server"))
            {
                parts.push(format!(
                    "Server: {}",
                    escape(&String::from_utf8_lossy(server.value))
                ));
            }
            &b[n..]
        }
        _ => b,
    };
    if let Some(title) = title_of(body) {
        parts.insert(0, title);
    }
    if find(body, b"/metrics").is_some() {
        parts.push("serves /metrics".into());
    }
    parts.join(", ")
}

fn title_of(body: &[u8]) -> Option<String> {
    let start = find_ci(body, b"<title>")? + "<title>".len();
    let len = find_ci(&body[start..], b"</title>")?;
    let t = String::from_utf8_lossy(&body[start..start + len]);
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then(|| escape(&t))
}

/// Whether `addr` answers a TLS ClientHello with a TLS record.
async fn tls_answers(addr: SocketAddr, deadline: Instant) -> bool {
    let Ok(Ok(mut s)) = tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await else {
        return false;
    };
    if write_by(&mut s, &client_hello(), deadline).await.is_err() {
        return false;
    }
    let mut buf = Vec::new();
    read_some(&mut s, &mut buf, deadline).await;
    is_tls_record(&buf)
}

/// A minimal TLS 1.2 ClientHello (RFC 5246 §7.4.1.2) offering common
/// ECDHE suites: enough for any TLS server to answer with a ServerHello or
/// an alert, both of which name it TLS. Never completed.
fn client_hello() -> Vec<u8> {
    let suites: [u16; 6] = [0xc02f, 0xc02b, 0xc030, 0xc02c, 0x009c, 0x002f];
    // supported_groups (x25519, P-256), ec_point_formats (uncompressed),
    // signature_algorithms (rsa_pss_rsae_sha256, ecdsa_p256_sha256, rsa_pkcs1_sha256).
    let extensions: Vec<u8> = [
        &[0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17][..],
        &[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00][..],
        &[
            0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x08, 0x04, 0x04, 0x03, 0x04, 0x01,
        ][..],
    ]
    .concat();
    let mut body = vec![0x03, 0x03];
    body.extend((0..32u8).map(|i| i.wrapping_mul(37)));
    body.push(0); // no session id
    body.extend(((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend(s.to_be_bytes());
    }
    body.extend([1, 0]); // the null compression method
    body.extend((extensions.len() as u16).to_be_bytes());
    body.extend(extensions);
    let mut hs = vec![0x01];
    hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend(body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend((hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}

/// The first line of `b`, escaped and cut to 80 characters.
fn first_line(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(b);
    let line = text.split(['\r', '\n']).next().unwrap_or("");
    escape(line)
}

/// Text a stranger sent, made safe for one terminal line (escaped) and
/// short: at most 80 characters of the escaped text.
fn escape(s: &str) -> String {
    // Control and invisible format characters escaped as Rust escapes
    // them (`\n`, `\u{1b}`): a listener cannot start a fake report line.
    let escaped: String = s
        .chars()
        .flat_map(|c| {
            let plain = matches!(c, '"' | '\'' | '\\');
            plain
                .then_some(c)
                .into_iter()
                .chain((!plain).then(|| c.escape_debug()).into_iter().flatten())
        })
        .collect();
    let mut out: String = escaped.chars().take(80).collect();
    if out.len() < escaped.len() {
        out.push('…');
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests;
