//! The private network itself: hosts reach each other, multicast floods to
//! every host, loss and silence work, the guard passes inside, and nothing is
//! left behind. Every other network test stands on these.
//!
//! Run: `cargo test --test lab network` (as root; without root these tests
//! say `SKIP`, see `rlx_lab::kit`).

use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, require_lab, Proc, PYTHON};
use rlx_lab::{Lab, LabOptions};
use std::process::Command;
use std::time::Duration;

/// Generous bound for a helper process to get ready on a loaded 2-core box.
const READY: Duration = Duration::from_secs(10);

/// A TCP server: answers every connection with `hello from NAME`.
const TCP_SERVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
print('ready', flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b'hello from ' + sys.argv[3].encode())
    c.close()
"#;

/// A TCP client: prints `ok <reply>`, `refused` or `timeout`, then the
/// elapsed milliseconds.
const TCP_CLIENT: &str = r#"
import socket, sys, time
t = time.monotonic()
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    out = 'ok ' + c.recv(100).decode()
except ConnectionRefusedError:
    out = 'refused'
except (socket.timeout, TimeoutError):
    out = 'timeout'
print(out, int((time.monotonic() - t) * 1000))
"#;

/// A multicast receiver on GROUP:PORT joined through LOCAL_IP: prints `ready`,
/// then every datagram, and exits after IDLE seconds without one (or 10 s
/// without any), printing `count N`.
const MCAST_RECEIVER: &str = r#"
import socket, struct, sys
group, port, local, idle = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(('', port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             socket.inet_aton(group) + socket.inet_aton(local))
print('ready', flush=True)
n = 0
s.settimeout(10)
while True:
    try:
        data, addr = s.recvfrom(2000)
    except socket.timeout:
        break
    n += 1
    print('got', data.decode(errors='replace'), 'from', addr[0], flush=True)
    s.settimeout(idle)
print('count', n, flush=True)
"#;

/// A multicast sender: COUNT datagrams `TAG-i` to GROUP:PORT through
/// LOCAL_IP, PACE_MS apart.
const MCAST_SENDER: &str = r#"
import socket, sys, time
group, port, local, tag, count, pace = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
for i in range(count):
    s.sendto(('%s-%d' % (tag, i)).encode(), (group, port))
    time.sleep(pace / 1000)
"#;

const MDNS_GROUP: &str = "224.0.0.251";

fn py(script: &str) -> Command {
    let mut cmd = Command::new(PYTHON);
    cmd.args(["-c", script]);
    cmd
}

/// Start a TCP server in host `i` on `bind:port` and wait until it listens.
fn tcp_server(lab: &Lab, i: usize, bind: &str, port: u16) -> Proc {
    let mut cmd = py(TCP_SERVER);
    cmd.args([bind, &port.to_string(), &format!("h{i}")]);
    let server = Proc::spawn(lab, i, cmd);
    server.expect_output("ready", READY);
    server
}

/// Connect from host `i` to `ip:port` with `timeout_s`; the client's
/// `(outcome, elapsed_ms)`.
fn tcp_connect(lab: &Lab, i: usize, ip: &str, port: u16, timeout_s: f64) -> (String, u64) {
    let out = lab
        .exec(
            i,
            PYTHON,
            &[
                "-c",
                TCP_CLIENT,
                ip,
                &port.to_string(),
                &timeout_s.to_string(),
            ],
        )
        .unwrap_or_else(|e| panic!("client in h{i}: {e}"));
    let (outcome, ms) = out
        .trim()
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("client printed {out:?}"));
    (outcome.to_string(), ms.parse().expect("elapsed ms"))
}

/// Start a multicast receiver in host `i` and wait until it has joined.
fn mcast_receiver(lab: &Lab, i: usize, group: &str, port: u16, idle_s: f64) -> Proc {
    let mut cmd = py(MCAST_RECEIVER);
    cmd.args([
        group,
        &port.to_string(),
        &lab.host(i).ip.to_string(),
        &idle_s.to_string(),
    ]);
    let rx = Proc::spawn(lab, i, cmd);
    rx.expect_output("ready", READY);
    rx
}

fn mcast_send(lab: &Lab, i: usize, group: &str, port: u16, tag: &str, count: u32, pace_ms: u32) {
    let ip = lab.host(i).ip.to_string();
    let args = [
        "-c",
        MCAST_SENDER,
        group,
        &port.to_string(),
        &ip,
        tag,
        &count.to_string(),
        &pace_ms.to_string(),
    ];
    lab.exec(i, PYTHON, &args)
        .unwrap_or_else(|e| panic!("sender in h{i}: {e}"));
}

/// The `count N` a finished receiver printed.
fn received(rx: &Proc) -> usize {
    rx.expect_exit(Duration::from_secs(30));
    let out = rx.stdout();
    out.lines()
        .find_map(|l| l.strip_prefix("count "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in receiver output:\n{}", rx.dump()))
}

#[test]
fn hosts_reach_each_other_over_tcp() {
    if !peer::require("hosts_reach_each_other_over_tcp", &[Peer::Python]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let _server = tcp_server(&lab, 1, "0.0.0.0", 7000);
    let target = lab.host(1).ip.to_string();
    for client in [0, 2] {
        let (outcome, _) = tcp_connect(&lab, client, &target, 7000, 5.0);
        assert_eq!(outcome, "ok hello from h1", "h{client} -> h1");
    }
}

#[test]
fn hosts_get_distinct_addresses_in_the_lab_subnet_and_only_eth0_and_lo() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let ips: Vec<_> = lab.hosts().iter().map(|h| h.ip).collect();
    assert!(
        ips.iter().all(|ip| lab.subnet().contains(ip)),
        "{ips:?} outside {}",
        lab.subnet()
    );
    assert!(ips[0] != ips[1] && ips[1] != ips[2]);
    let links = lab.exec(0, "ip", &["-br", "addr"]).unwrap();
    let names: Vec<&str> = links
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|n| n.split('@').next().unwrap_or(n))
        .collect();
    assert_eq!(
        names,
        ["lo", "eth0"],
        "a host has only lo and eth0:\n{links}"
    );
    assert!(links.contains(&format!("{}/16", ips[0])), "{links}");
    assert!(
        !links.contains("fe80"),
        "IPv6 must be off unless asked:\n{links}"
    );
    let routes = lab.exec(0, "ip", &["route"]).unwrap();
    assert!(routes.contains("224.0.0.0/4 dev eth0"), "{routes}");
}

#[test]
fn multicast_from_one_host_reaches_every_other_host() {
    if !peer::require(
        "multicast_from_one_host_reaches_every_other_host",
        &[Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let receivers: Vec<Proc> = (1..4)
        .map(|i| mcast_receiver(&lab, i, MDNS_GROUP, 5353, 0.5))
        .collect();
    mcast_send(&lab, 0, MDNS_GROUP, 5353, "probe", 1, 0);
    let sender = lab.host(0).ip.to_string();
    for rx in &receivers {
        assert_eq!(received(rx), 1, "{}", rx.dump());
        assert!(
            rx.stdout().contains(&format!("got probe-0 from {sender}")),
            "{}",
            rx.dump()
        );
    }
}

/// A lab larger than a bridge takes (the kernel stops at 1,024 ports) is
/// a chain of bridges: still one segment, for multicast and unicast.
#[test]
fn hosts_on_chained_bridges_are_one_segment() {
    if !peer::require("hosts_on_chained_bridges_are_one_segment", &[Peer::Python]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    // Three bridges: h0 h1 | h2 h3 | h4.
    let lab = labs.chained(5, 2);
    let sw = lab.switch_ns().expect("a switched lab");
    let out = Command::new("ip")
        .args(["-n", sw, "-br", "link", "show", "type", "bridge"])
        .output()
        .unwrap();
    let bridges = String::from_utf8_lossy(&out.stdout);
    assert_eq!(bridges.lines().count(), 3, "{bridges}");
    let receivers: Vec<Proc> = (1..5)
        .map(|i| mcast_receiver(&lab, i, MDNS_GROUP, 5353, 0.5))
        .collect();
    mcast_send(&lab, 0, MDNS_GROUP, 5353, "chain", 1, 0);
    for rx in &receivers {
        assert_eq!(received(rx), 1, "{}", rx.dump());
    }
    let _server = tcp_server(&lab, 4, "0.0.0.0", 7000);
    let (outcome, _) = tcp_connect(&lab, 0, &lab.host(4).ip.to_string(), 7000, 5.0);
    assert_eq!(outcome, "ok hello from h4", "h0 -> h4 across two trunks");
}

#[test]
fn set_loss_drops_about_that_share_and_zero_removes_it() {
    if !peer::require(
        "set_loss_drops_about_that_share_and_zero_removes_it",
        &[Peer::Nftables, Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    const SENT: u32 = 200;
    let round = |tag: &str| {
        let rx = mcast_receiver(&lab, 1, "239.255.0.1", 4000, 1.0);
        mcast_send(&lab, 0, "239.255.0.1", 4000, tag, SENT, 2);
        received(&rx)
    };
    assert_eq!(round("clean"), SENT as usize, "no loss configured yet");
    lab.set_loss(1, 50).unwrap();
    let lossy = round("lossy");
    // Binomial(200, 0.5): mean 100, sd 7; 60..140 is beyond 5 sd.
    assert!(
        (60..=140).contains(&lossy),
        "50% loss let {lossy}/{SENT} through"
    );
    lab.set_loss(1, 0).unwrap();
    assert_eq!(
        round("healed"),
        SENT as usize,
        "set_loss(0) must remove the loss"
    );
}

#[test]
fn silence_tcp_makes_connect_wait_for_its_timeout_except_to_live_hosts() {
    if !peer::require(
        "silence_tcp_makes_connect_wait_for_its_timeout_except_to_live_hosts",
        &[Peer::Nftables, Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let _server = tcp_server(&lab, 1, "0.0.0.0", 7000);
    let (live, dead) = (lab.host(1).ip, lab.host(2).ip);
    let (outcome, ms) = tcp_connect(&lab, 0, &dead.to_string(), 7000, 2.0);
    assert_eq!(
        outcome, "refused",
        "a host without a listener answers RST before silencing"
    );
    assert!(ms < 1000, "refusal took {ms} ms");

    lab.silence_tcp(0, lab.subnet(), 7000, &[live]).unwrap();
    let (outcome, ms) = tcp_connect(&lab, 0, &dead.to_string(), 7000, 0.5);
    assert_eq!(outcome, "timeout", "silenced address must not answer");
    assert!(ms >= 450, "timed out after only {ms} ms");
    let (outcome, _) = tcp_connect(&lab, 0, &live.to_string(), 7000, 2.0);
    assert_eq!(
        outcome, "ok hello from h1",
        "the live address stays reachable"
    );
    let (outcome, _) = tcp_connect(&lab, 0, &dead.to_string(), 7001, 2.0);
    assert_eq!(outcome, "refused", "other ports are not silenced");
}

#[test]
fn an_ipv6_lab_connects_hosts_over_their_ula_addresses() {
    if !peer::require(
        "an_ipv6_lab_connects_hosts_over_their_ula_addresses",
        &[Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: true,
    });
    let v6 = lab.host(1).ipv6.expect("IPv6 lab hosts have a ULA");
    assert_eq!(v6.segments()[0], 0xfd52);
    let _server = tcp_server(&lab, 1, "::", 7000);
    let (outcome, _) = tcp_connect(&lab, 0, &v6.to_string(), 7000, 5.0);
    assert_eq!(outcome, "ok hello from h1");
    let addrs = lab
        .exec(0, "ip", &["-6", "addr", "show", "dev", "eth0"])
        .unwrap();
    assert!(addrs.contains("fe80::"), "link-local present:\n{addrs}");
    assert!(!addrs.contains("tentative"), "DAD is off:\n{addrs}");
}

#[test]
fn a_loopback_lab_carries_multicast_on_lo() {
    if !peer::require("a_loopback_lab_carries_multicast_on_lo", &[Peer::Python]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    assert_eq!(lab.host(0).iface, "lo");
    let link = lab.exec(0, "ip", &["link", "show", "lo"]).unwrap();
    assert!(link.contains("MULTICAST") && link.contains(",UP"), "{link}");
    let rx = mcast_receiver(&lab, 0, MDNS_GROUP, 5353, 0.5);
    mcast_send(&lab, 0, MDNS_GROUP, 5353, "lo", 1, 0);
    assert_eq!(received(&rx), 1, "{}", rx.dump());
}

#[test]
fn dropping_the_lab_removes_its_namespaces_and_kills_what_runs_inside() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let name = lab.name().to_string();
    let mut sleeper = Command::new("sleep");
    sleeper.arg("1000");
    let tracked = Proc::spawn(&lab, 0, sleeper).pid();
    // A process that escaped its parent (a daemon): only `ip netns pids` finds it.
    let escaped: i32 = lab
        .exec(1, "sh", &["-c", "sleep 1000 >/dev/null 2>&1 & echo $!"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let before = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(
        before.matches(&format!("{name}-")).count(),
        3,
        "switch + 2 hosts:\n{before}"
    );
    drop(lab);
    let after = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let after = String::from_utf8_lossy(&after.stdout).into_owned();
    assert!(
        !after.contains(&format!("{name}-")),
        "namespaces left behind:\n{after}"
    );
    for pid in [tracked as i32, escaped] {
        kit::wait_until(Duration::from_secs(5), &format!("pid {pid} gone"), || {
            // Gone, or a zombie waiting for a reaper that is not us.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        });
    }
}

/// Environment variable that turns [`probe_helper`] into a probe.
const PROBE_ENV: &str = "RLX_LAB_PROBE";

/// Not a test on its own: run by the tests below inside a lab namespace
/// with `RLX_LAB_PROBE=guard|ifaces`, it prints what the library decides
/// there.
#[test]
fn probe_helper() {
    match std::env::var(PROBE_ENV).as_deref() {
        Ok("guard") => match rlx_net::netguard::ensure_private_netns("the lab probe") {
            Ok(()) => println!("GUARD pass"),
            Err(e) => println!("GUARD refused: {e}"),
        },
        Ok("ifaces") => {
            let default = rlx_net::iface::default_interfaces().unwrap();
            let names: Vec<String> = default
                .iter()
                .map(|i| {
                    format!(
                        "{}={}",
                        i.name,
                        rlx_net::iface::describe(std::slice::from_ref(i))
                    )
                })
                .collect();
            println!("DEFAULT [{}]", names.join(" | "));
            match rlx_net::iface::select(&["lo".to_string()]) {
                Ok(lo) => println!("LO ok {}", lo.len()),
                Err(e) => println!("LO error {e}"),
            }
        }
        _ => {}
    }
}

/// Run [`probe_helper`] in host `i` of `lab` and return what it printed.
fn probe(lab: &Lab, i: usize, what: &str) -> String {
    let mut helper = kit::rerun(module_path!(), "probe_helper");
    helper.env(PROBE_ENV, what);
    let helper = Proc::spawn(lab, i, helper);
    let status = helper.expect_exit(Duration::from_secs(30));
    assert!(status.success(), "{}", helper.dump());
    helper.stdout()
}

#[test]
fn the_netns_guard_passes_inside_a_lab_namespace() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let inside = lab.exec(0, "readlink", &["/proc/self/ns/net"]).unwrap();
    let outside = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(
        inside.trim(),
        outside.to_string_lossy(),
        "lab runs in its own namespace"
    );
    let out = probe(&lab, 0, "guard");
    assert!(
        out.contains("GUARD pass"),
        "the guard refused inside the lab:\n{out}"
    );
}

#[test]
fn a_lab_host_defaults_to_eth0_and_a_loopback_lab_to_nothing_but_lo_can_be_named() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(1);
    let out = probe(&lab, 0, "ifaces");
    let expected = format!("DEFAULT [eth0=eth0 [{}/16]]", lab.host(0).ip);
    assert!(out.contains(&expected), "expected {expected:?} in:\n{out}");
    let lo = labs.loopback();
    let out = probe(&lo, 0, "ifaces");
    assert!(
        out.contains("DEFAULT []") && out.contains("LO ok 1"),
        "{out}"
    );
}
