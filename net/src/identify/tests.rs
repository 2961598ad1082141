//! Each kind of listener found on port 9100 in the field, played on
//! loopback (nothing leaves the machine): what it says, and what the scan
//! must make of it.

use super::*;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

/// How a stand-in server behaves on each connection: what it says first,
/// and what it answers to the first bytes it gets (`None`: say nothing;
/// close when `close_on_data`).
/// A stand-in's answer to the first bytes it gets.
type Answer = fn(&[u8]) -> Vec<u8>;

#[derive(Clone, Default)]
struct Plays {
    greeting: Option<&'static [u8]>,
    reply: Option<Answer>,
    close_on_data: bool,
}

/// Starts a loopback server that plays `p` on every connection and keeps
/// what each connection received.
async fn serve(p: Plays) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let (p, seen) = (p.clone(), seen.clone());
            tokio::spawn(async move {
                if let Some(g) = p.greeting {
                    let _ = s.write_all(g).await;
                }
                let mut buf = [0u8; 4096];
                let n = match s.read(&mut buf).await {
                    Ok(n) if n > 0 => n,
                    _ => return,
                };
                seen.lock().unwrap().push(buf[..n].to_vec());
                if p.close_on_data {
                    return;
                }
                if let Some(f) = p.reply {
                    let _ = s.write_all(&f(&buf[..n])).await;
                    return;
                }
                // Hold the connection open, saying nothing.
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    (addr, got)
}

async fn id_of(addr: SocketAddr) -> Identity {
    let s = TcpStream::connect(addr).await.unwrap();
    identify(addr, s, Instant::now() + Duration::from_millis(600)).await
}

/// node_exporter (Go's net/http): a 400 to a request line it cannot read,
/// and its landing page for `GET /`.
fn node_exporter(req: &[u8]) -> Vec<u8> {
    if req.starts_with(b"GET / ") {
        let body = "<html><head><title>Node Exporter</title></head><body><h1>Node Exporter</h1>\
                    <p><a href=\"/metrics\">Metrics</a></p></body></html>";
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    } else {
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request".to_vec()
    }
}

/// Guards against node_exporter on its default 9100 becoming a CPU node:
/// it is named HTTP, with its landing page's title and its metrics path.
#[tokio::test]
async fn node_exporter_is_named_http_with_its_page_title_and_metrics_path() {
    let (addr, got) = serve(Plays {
        reply: Some(node_exporter),
        ..Default::default()
    })
    .await;
    let id = id_of(addr).await;
    assert_eq!(
        id,
        Identity::Other {
            protocol: "HTTP",
            detail: "Node Exporter, serves /metrics".into()
        }
    );
    let got = got.lock().unwrap();
    assert_eq!(
        got[0], PJL_PROBE,
        "the first bytes sent are the printer-safe probe"
    );
    assert!(
        got[1].starts_with(b"GET / HTTP/1.0\r\n"),
        "GET only once it is known to be HTTP"
    );
}

/// Python's http.server answers the probe with an HTML page and no status
/// line (HTTP/0.9 style); that is HTTP too.
#[tokio::test]
async fn an_html_error_page_without_a_status_line_is_http() {
    fn python(req: &[u8]) -> Vec<u8> {
        if req.starts_with(b"GET / ") {
            b"HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6 Python/3.11.2\r\n\r\n<html><title>Directory listing for /</title>".to_vec()
        } else {
            b"<!DOCTYPE HTML>\n<html lang=\"en\">\n<head><title>Error response</title>".to_vec()
        }
    }
    let (addr, _) = serve(Plays {
        reply: Some(python),
        ..Default::default()
    })
    .await;
    match id_of(addr).await {
        Identity::Other { protocol, detail } => {
            assert_eq!(protocol, "HTTP");
            assert!(detail.contains("Server: SimpleHTTP/0.6"), "{detail}");
            assert!(detail.starts_with("Directory listing for /"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

/// Guards against printing junk on a JetDirect printer: it gets only the
/// PJL query, answers with its model, and is named a printer.
#[tokio::test]
async fn a_jetdirect_printer_gets_only_the_pjl_query_and_is_named_by_its_model() {
    fn printer(req: &[u8]) -> Vec<u8> {
        assert!(
            req.starts_with(b"\x1b%-12345X@PJL"),
            "anything else would be printed"
        );
        b"@PJL INFO ID\r\n\"HP LaserJet 4250\"\r\n\x0c".to_vec()
    }
    let (addr, got) = serve(Plays {
        reply: Some(printer),
        ..Default::default()
    })
    .await;
    assert_eq!(
        id_of(addr).await,
        Identity::Other {
            protocol: "a printer (PJL)",
            detail: "\"HP LaserJet 4250\"".into()
        }
    );
    assert_eq!(got.lock().unwrap().len(), 1, "one connection, one query");
}

#[tokio::test]
async fn an_sshd_is_named_by_its_greeting_and_sent_nothing() {
    let (addr, got) = serve(Plays {
        greeting: Some(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"),
        ..Default::default()
    })
    .await;
    assert_eq!(
        id_of(addr).await,
        Identity::Other {
            protocol: "SSH",
            detail: "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3".into()
        }
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(got.lock().unwrap().is_empty(), "a greeting is enough");
}

/// A TLS server that drops plain bytes (Go's does) is asked once more, with
/// a ClientHello, and named by its answer.
#[tokio::test]
async fn a_tls_server_that_closes_on_plain_bytes_is_named_by_its_answer_to_a_client_hello() {
    fn tls(req: &[u8]) -> Vec<u8> {
        if req.first() == Some(&0x16) {
            // A handshake_failure alert.
            vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]
        } else {
            Vec::new()
        }
    }
    let (addr, got) = serve(Plays {
        reply: Some(tls),
        ..Default::default()
    })
    .await;
    assert_eq!(
        id_of(addr).await,
        Identity::Other {
            protocol: "TLS",
            detail: "closed on plain bytes, answered a ClientHello".into()
        }
    );
    let got = got.lock().unwrap();
    assert_eq!(
        got[1][..3],
        [0x16, 0x03, 0x01],
        "the second connection sent a ClientHello"
    );
}

/// What an RLX worker looks like from outside: it greets in its own way,
/// or waits for its client. Neither is named, so the node is written.
#[tokio::test]
async fn a_worker_that_greets_or_waits_is_not_named() {
    let (greets, got) = serve(Plays {
        greeting: Some(b"RLX-WORKER 1\n"),
        ..Default::default()
    })
    .await;
    assert_eq!(
        id_of(greets).await,
        Identity::Unknown {
            greeting: Some("RLX-WORKER 1".into())
        }
    );
    assert!(
        got.lock().unwrap().is_empty(),
        "a greeting worker is sent nothing"
    );
    let (waits, _) = serve(Plays::default()).await;
    let t0 = Instant::now();
    assert_eq!(id_of(waits).await, Identity::Unknown { greeting: None });
    assert!(
        t0.elapsed() < Duration::from_millis(700),
        "bounded by the deadline"
    );
}

#[tokio::test]
async fn a_listener_that_closes_on_plain_bytes_and_on_a_client_hello_is_not_named() {
    let (addr, got) = serve(Plays {
        close_on_data: true,
        ..Default::default()
    })
    .await;
    assert_eq!(id_of(addr).await, Identity::Unknown { greeting: None });
    assert_eq!(got.lock().unwrap().len(), 2);
}

/// Guards against a stranger's greeting reaching the terminal raw.
#[test]
fn a_hostile_greeting_is_escaped_and_cut() {
    let id = from_greeting(b"\x1b[2J\x1b]0;owned\x07 hello");
    let Identity::Unknown { greeting: Some(g) } = id else {
        panic!("{id:?}")
    };
    assert!(!g.contains('\x1b') && !g.contains('\x07'), "{g}");
    let long = [b'a'; 500];
    let Identity::Unknown { greeting: Some(g) } = from_greeting(&long) else {
        panic!()
    };
    assert!(g.chars().count() <= 81, "{}", g.len());
}

#[test]
fn greetings_of_common_daemons_are_named() {
    let name = |b: &[u8]| match from_greeting(b) {
        Identity::Other { protocol, .. } => protocol,
        Identity::Unknown { .. } => "unknown",
    };
    assert_eq!(
        name(b"220 mail.example.org ESMTP Postfix\r\n"),
        "FTP or SMTP"
    );
    assert_eq!(name(b"+OK Dovecot ready.\r\n"), "POP3");
    assert_eq!(name(b"* OK [CAPABILITY IMAP4rev1] ready\r\n"), "IMAP");
    assert_eq!(name(b"RFB 003.008\n"), "VNC");
    assert_eq!(name(b"\x4a\x00\x00\x00\x0a8.0.36\x00rest"), "MySQL");
    assert_eq!(name(b"\x15\x03\x03\x00\x02\x02\x46"), "TLS");
    assert_eq!(name(b"hello\n"), "unknown");
}

#[test]
fn the_client_hello_is_one_well_formed_tls_record() {
    let h = client_hello();
    assert!(is_tls_record(&h));
    let len = u16::from_be_bytes([h[3], h[4]]) as usize;
    assert_eq!(len, h.len() - 5, "the record length covers the handshake");
    let hs_len = u32::from_be_bytes([0, h[6], h[7], h[8]]) as usize;
    assert_eq!(hs_len, len - 4, "the handshake length covers its body");
}

proptest::proptest! {
    /// Whatever a stranger's listener sends, naming it never panics and
    /// nothing it said reaches a report line with a control character.
    #[test]
    fn any_bytes_a_listener_sends_are_named_safely(b in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
        let texts = match from_greeting(&b) {
            Identity::Other { detail, .. } => vec![detail],
            Identity::Unknown { greeting } => greeting.into_iter().collect(),
        };
        let reply = match from_reply(&b) {
            Some(Reply::Known(Identity::Other { detail, .. })) => detail,
            _ => String::new(),
        };
        for t in texts.iter().chain([&reply, &describe_http(&b)]) {
            proptest::prop_assert!(!t.chars().any(char::is_control), "{t:?}");
            proptest::prop_assert!(t.chars().count() <= 200, "{}", t.len());
        }
    }
}

/// The agent's report says who holds its worker port in the words its
/// operator knows (node_exporter is a program name, not a page title), and
/// names no one for a listener that may be the RLX worker.
#[test]
fn node_exporter_holds_a_port_by_its_program_name_and_an_unnamed_listener_by_no_one() {
    let exporter = Identity::Other {
        protocol: "HTTP",
        detail: "Node Exporter, serves /metrics".into(),
    };
    assert_eq!(exporter.held_by().as_deref(), Some("node_exporter (HTTP)"));
    let sshd = Identity::Other {
        protocol: "SSH",
        detail: "SSH-2.0-OpenSSH_9.2p1".into(),
    };
    assert_eq!(
        sshd.held_by().as_deref(),
        Some("SSH (SSH-2.0-OpenSSH_9.2p1)")
    );
    assert_eq!(Identity::Unknown { greeting: None }.held_by(), None);
}
