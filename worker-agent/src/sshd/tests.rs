//! The SSH check against stand-in servers on loopback (ephemeral ports):
//! one that greets as OpenSSH does, one that answers as a web server, one
//! that says nothing; and the ports read from sshd's configuration.

use super::*;
use std::net::TcpListener;
use std::sync::mpsc;

/// What a stand-in server does with each connection.
#[derive(Clone, Copy)]
enum Greets {
    /// Sends these bytes at once.
    With(&'static [u8]),
    /// Sends nothing and waits for the client to hang up.
    Nothing,
}

/// A server on `bind` (port 0: an ephemeral one) that answers one
/// connection as `greets` says, then reports what the client sent before
/// it hung up.
fn stand_in(bind: &str, greets: Greets) -> (SocketAddr, mpsc::Receiver<Vec<u8>>) {
    let l = TcpListener::bind(bind).unwrap();
    let at = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        if let Greets::With(bytes) = greets {
            let _ = s.write_all(bytes);
        }
        // The client hangs up within its budget; the timeout only keeps a
        // broken test from leaving this thread behind for long.
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut said = Vec::new();
        let _ = s.read_to_end(&mut said);
        let _ = tx.send(said);
    });
    (at, rx)
}

const OPENSSH: &[u8] = b"SSH-2.0-OpenSSH_9.2\r\n";

#[test]
fn a_server_that_greets_as_openssh_is_found_on_its_port() {
    let (at, said) = stand_in("127.0.0.1:0", Greets::With(OPENSSH));
    let r = detect(&[at.port()], Some(&[at]), BUDGET);
    assert_eq!(r.port, Some(at.port()), "{}", r.describe());
    assert_eq!(r.tried, [(at.port(), Seen::Ssh)]);
    assert!(r.is_definite());
    let said = said.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        said.starts_with(b"SSH-2.0-"),
        "the check identifies itself before it hangs up, as an SSH client does: {said:?}"
    );
}

#[test]
fn a_web_server_on_the_port_is_not_taken_for_ssh() {
    let (at, _said) = stand_in(
        "127.0.0.1:0",
        Greets::With(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
    );
    let r = detect(&[at.port()], Some(&[at]), BUDGET);
    assert_eq!(r.port, None, "{}", r.describe());
    assert_eq!(
        r.tried,
        [(
            at.port(),
            Seen::Other("\"HTTP/1.1 400 Bad Request\"".into())
        )]
    );
    assert!(r.is_definite(), "a clear no is kept");
}

#[test]
fn a_server_that_says_nothing_is_not_taken_for_ssh_and_the_check_ends_within_its_budget() {
    let (at, _said) = stand_in("127.0.0.1:0", Greets::Nothing);
    let start = Instant::now();
    let r = detect(&[at.port()], Some(&[at]), BUDGET);
    assert_eq!(r.port, None, "{}", r.describe());
    assert_eq!(r.tried, [(at.port(), Seen::Silent)]);
    assert!(
        !r.is_definite(),
        "a silent port is tried again at the next check"
    );
    assert!(
        start.elapsed() < BUDGET + Duration::from_millis(200),
        "took {:?}",
        start.elapsed()
    );
}

/// Guards the other candidates against a silent one: each gets the whole
/// budget, in parallel, so sshd on 2222 is found beside a mute port 22.
#[test]
fn sshd_is_found_on_a_later_candidate_beside_a_silent_one() {
    let (mute, _a) = stand_in("127.0.0.1:0", Greets::Nothing);
    let (sshd, _b) = stand_in("127.0.0.1:0", Greets::With(OPENSSH));
    let r = detect(&[mute.port(), sshd.port()], Some(&[mute, sshd]), BUDGET);
    assert_eq!(r.port, Some(sshd.port()), "{}", r.describe());
}

#[test]
fn a_port_without_a_listener_is_nothing_and_no_connection_is_made() {
    let (at, said) = stand_in("127.0.0.1:0", Greets::With(OPENSSH));
    // The kernel's list says nothing listens on the port: no connection.
    let r = detect(&[at.port()], Some(&[]), BUDGET);
    assert_eq!(r.tried, [(at.port(), Seen::Nothing)]);
    assert!(r.is_definite());
    assert!(
        said.recv_timeout(Duration::from_millis(50)).is_err(),
        "the server was not dialled"
    );
    // Lets the stand-in's thread end.
    drop(TcpStream::connect(at));
}

/// Where the kernel's list cannot be read (macOS), loopback is tried.
#[test]
fn without_the_kernels_list_the_candidates_are_tried_on_loopback() {
    let (at, _said) = stand_in("127.0.0.1:0", Greets::With(OPENSSH));
    let r = detect(&[at.port()], None, BUDGET);
    assert_eq!(r.port, Some(at.port()), "{}", r.describe());
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let r = detect(&[port], None, BUDGET);
    assert_eq!(r.port, None, "{}", r.describe());
}

/// sshd with one `ListenAddress` refuses loopback: the check dials the
/// address the listener is bound to, here 127.0.0.2 (Linux routes all of
/// 127/8 to `lo`), as the kernel's own list reports it.
#[cfg(target_os = "linux")]
#[test]
fn a_server_bound_to_one_address_is_dialled_there_not_on_127_0_0_1() {
    let (at, _said) = stand_in("127.0.0.2:0", Greets::With(OPENSSH));
    assert!(
        TcpStream::connect(("127.0.0.1", at.port())).is_err(),
        "nothing on 127.0.0.1:{}",
        at.port()
    );
    let listeners = rlx_net::listening::tcp_listeners().unwrap();
    assert!(listeners.contains(&at), "{listeners:?}");
    let r = detect(&[at.port()], Some(&listeners), BUDGET);
    assert_eq!(r.port, Some(at.port()), "{}", r.describe());
}

#[test]
fn a_listener_on_every_address_is_dialled_on_loopback_and_one_on_a_single_address_there() {
    for (bound, dialled) in [
        ("0.0.0.0:22", "127.0.0.1:22"),
        ("[::]:22", "[::1]:22"),
        ("10.0.0.5:2222", "10.0.0.5:2222"),
        ("[fd00::5]:22", "[fd00::5]:22"),
    ] {
        assert_eq!(
            dial_address(bound.parse().unwrap()),
            dialled.parse::<SocketAddr>().unwrap(),
            "{bound}"
        );
    }
}

#[test]
fn only_a_greeting_that_starts_with_ssh_dash_counts() {
    assert!(is_ssh_greeting(b"SSH-2.0-OpenSSH_9.2\r\n"));
    assert!(is_ssh_greeting(b"SSH-1.99-Cisco-1.25\r\n"));
    for other in [
        &b"HTTP/1.1 200 OK\r\n"[..],
        b"ssh-2.0-x",
        b"SSH",
        b"",
        b" SSH-2.0",
    ] {
        assert!(!is_ssh_greeting(other), "{other:?}");
    }
}

#[test]
fn ports_are_read_from_port_and_listen_address_lines_as_sshd_config_spells_them() {
    let text = "\
# Port 2022 is commented out
Port 2222
port=2200
PORT = \"2201\"
ListenAddress 10.0.0.5:2300
ListenAddress [fd00::5]:2301
ListenAddress 0.0.0.0
ListenAddress ::
ListenAddress fd00::7
Port 0
Port 65536
Port ssh
PortForwarding yes
  Port 2400   # trailing comment
";
    assert_eq!(config_ports(text), [2222, 2200, 2201, 2300, 2301, 2400]);
}

#[test]
fn candidates_are_22_then_the_configured_ports_of_sshd_config_and_its_conf_files() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(candidate_ports(dir.path()), [22], "no configuration: 22");
    std::fs::write(dir.path().join("sshd_config"), "Port 2222\nPort 22\n").unwrap();
    let d = dir.path().join("sshd_config.d");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("20-late.conf"), "Port 2300\n").unwrap();
    std::fs::write(d.join("10-early.conf"), "Port 2200\nPort 2222\n").unwrap();
    std::fs::write(d.join("README"), "Port 9999\n").unwrap();
    assert_eq!(candidate_ports(dir.path()), [22, 2222, 2200, 2300]);
    let many: String = (3000..3100).map(|p| format!("Port {p}\n")).collect();
    std::fs::write(dir.path().join("sshd_config"), many).unwrap();
    assert_eq!(candidate_ports(dir.path()).len(), MAX_CANDIDATES);
}

#[test]
fn the_report_says_what_each_port_showed() {
    let r = Report {
        port: None,
        tried: vec![
            (22, Seen::Nothing),
            (2222, Seen::Other("\"HTTP/1.1 400\"".into())),
        ],
    };
    assert_eq!(
        r.describe(),
        "TCP 22: nothing listens; TCP 2222: not SSH (\"HTTP/1.1 400\")"
    );
}
