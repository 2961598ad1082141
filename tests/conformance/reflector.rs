//! **Agents are not UDP reflectors** (docs/security.md, "Agents as UDP
//! reflectors"): an agent's mDNS responder answers only queriers on its
//! own link (RFC 6762 §11, §5.5).
//!
//! A legacy one-shot query (source port other than 5353, RFC 6762 §6.7) is
//! answered by unicast to its source address and port. Before the fix
//! (`vendor/mdns-sd/PATCHES.md`), mdns-sd answered it from any source: a
//! 40-byte query with a forged source made every agent send 0.4-1.5 KB to the
//! forged address, anywhere, and a query to the group made every agent on the
//! link do it at once.
//!
//! The lab is routed: two subnets joined by a router namespace, so a querier
//! on the other subnet is genuinely off-link and its queries (and any
//! replies) cross the router.
//!
//! ```text
//!   subnet 0: h0 agent, h1 on-link querier        subnet 1: h2 off-link host
//! ```
//!
//! QU queries (RFC 6762 §5.4) forged with a victim's address on the link are
//! answered by unicast only when the answer is no bigger than the query,
//! unless the victim proved its address to the agent, and at most 2 a second
//! per destination (`forged_qu_queries_...`, PATCHES.md §36).
//!
//! The querier is a small python3 script of plain sockets (no packages), run
//! inside the host's namespace; the forged-source case uses a raw socket
//! (the lab runs as root).

use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{agent_bin, require_lab_with, run_ok, Proc, PYTHON};
use rlx_lab::{Lab, RoutedOptions};
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce (mdns-sd probes its name for about
/// 0.75 s first; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(20);

/// How long a querier keeps asking, one query every 250 ms. A reply takes
/// about 1 ms on this lab, so a querier that hears nothing in this window
/// was not answered, not answered late.
const ASK_SECS: &str = "3";

/// A port nobody uses on the lab hosts, where a forged query says replies go.
const VICTIM_PORT: &str = "40123";

/// The querier. `legacy DEST SECS`: send a legacy PTR query for `_rlx._tcp`
/// from an ephemeral port to DEST:5353 every 250 ms for SECS seconds, and
/// count what comes back. `forge SRC SPORT SECS [GAP]`: send the same query
/// to the mDNS group 224.0.0.251 in a hand-built IPv4 packet whose source is
/// SRC:SPORT, every GAP seconds (0.25), and print `SENT n BYTES b` (UDP
/// payload bytes); `forge-qu` the same with the QU bit set. `burst DEST N SECS`: send N legacy queries to DEST:5353 back to
/// back, then count replies for SECS seconds. `listen PORT SECS`: count what arrives on PORT for SECS
/// seconds. Each prints `READY` once its socket is open and
/// `REPLIES <count> BYTES <total> FROM <sources>` at the end, then `PER
/// <source>=<count> ...`.
const QUERIER: &str = r#"
import socket, struct, sys, time

def query(qu=False):
    qname = b"".join(bytes([len(l)]) + l for l in [b"_rlx", b"_tcp", b"local"]) + b"\0"
    # id 0x5a5a, flags 0 (a query), one question: PTR (12), class IN (with
    # the unicast-response bit when qu).
    qclass = 1 | (0x8000 if qu else 0)
    return struct.pack("!HHHHHH", 0x5A5A, 0, 1, 0, 0, 0) + qname + struct.pack("!HH", 12, qclass)

def collect(sock, deadline, send=None):
    sock.settimeout(0.05)
    count, total, sources, next_send = 0, 0, {}, 0.0
    while time.monotonic() < deadline:
        if send and time.monotonic() >= next_send:
            send()
            next_send = time.monotonic() + 0.25
        try:
            data, src = sock.recvfrom(65535)
        except socket.timeout:
            continue
        count, total = count + 1, total + len(data)
        sources[src[0]] = sources.get(src[0], 0) + 1
    print("REPLIES %d BYTES %d FROM %s" % (count, total, ",".join(sorted(sources)) or "-"), flush=True)
    print("PER %s" % " ".join("%s=%d" % kv for kv in sorted(sources.items())), flush=True)

def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF

mode = sys.argv[1]
if mode == "legacy":
    dest, secs = sys.argv[2], float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    print("READY", flush=True)
    collect(s, time.monotonic() + secs, lambda: s.sendto(query(), (dest, 5353)))
elif mode in ("forge", "forge-qu"):
    src, sport, secs = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    gap = float(sys.argv[5]) if len(sys.argv) > 5 else 0.25
    payload = query(qu=(mode == "forge-qu"))
    udp = struct.pack("!HHHH", sport, 5353, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 255, 17, 0,
                     socket.inet_aton(src), socket.inet_aton("224.0.0.251"))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    end = time.monotonic() + secs
    sent = 0
    while time.monotonic() < end:
        r.sendto(ip + udp, ("224.0.0.251", 0))
        sent += 1
        time.sleep(gap)
    print("SENT %d BYTES %d" % (sent, sent * len(payload)), flush=True)
elif mode == "burst":
    dest, n, secs = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    for _ in range(n):
        s.sendto(query(), (dest, 5353))
    collect(s, time.monotonic() + secs)
elif mode == "listen":
    port, secs = int(sys.argv[2]), float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    print("READY", flush=True)
    collect(s, time.monotonic() + secs)
"#;

/// What a querier heard: datagrams and bytes, and the line they came from.
#[derive(Debug)]
struct Heard {
    replies: u64,
    bytes: u64,
    line: String,
}

/// Parses the querier's `REPLIES n BYTES b FROM ...` line.
fn heard(stdout: &str) -> Heard {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("REPLIES "))
        .unwrap_or_else(|| panic!("the querier printed no REPLIES line: {stdout:?}"))
        .to_string();
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| -> u64 {
        words
            .get(i)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("malformed querier line {line:?}"))
    };
    Heard {
        replies: num(1),
        bytes: num(3),
        line,
    }
}

fn querier(lab: &Lab, host: usize, args: &[&str]) -> Command {
    let mut cmd = lab.command(host, PYTHON);
    cmd.args(["-c", QUERIER]).args(args);
    cmd
}

/// A legacy query from host `from` to the agent's unicast address.
fn ask_legacy(lab: &Lab, from: usize, agent: usize) -> Heard {
    let dest = lab.host(agent).ip.to_string();
    let out = run_ok(&mut querier(lab, from, &["legacy", &dest, ASK_SECS]));
    heard(&String::from_utf8_lossy(&out.stdout))
}

/// A legacy query sent to the mDNS group by host `from`, forged to come from
/// `victim`'s address and [`VICTIM_PORT`]; what `victim` receives there.
fn forge_to_group(lab: &Lab, from: usize, victim: usize) -> Heard {
    let listen_secs = (ASK_SECS.parse::<u64>().unwrap() + 2).to_string();
    let listener = Proc::spawn(
        lab,
        victim,
        querier(lab, victim, &["listen", VICTIM_PORT, &listen_secs]),
    );
    listener.expect_output("READY", Duration::from_secs(10));
    let src = lab.host(victim).ip.to_string();
    run_ok(&mut querier(
        lab,
        from,
        &["forge", &src, VICTIM_PORT, ASK_SECS],
    ));
    listener.expect_exit(Duration::from_secs(20));
    heard(&listener.stdout())
}

/// Starts an agent on `host`, with mdns-sd's daemon at `debug` so that the
/// packets it drops show in its log with their reason.
fn start_agent(lab: &Lab, host: usize, dir: &std::path::Path) -> Proc {
    let caps = dir.join("box0.json");
    std::fs::write(
        &caps,
        r#"{"id":"00000000000000b0","hostname":"box0","os":"linux","arch":"x86_64",
           "cores":8,"ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{"device":"cpu","name":"cpu","mem_bytes":0}]}"#,
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box0"])
        .env("RUST_LOG", "info,mdns_sd::service_daemon=debug");
    let agent = Proc::spawn(lab, host, cmd);
    agent.expect_output("mDNS: announced on", UP);
    agent
}

/// Guards against the agent's responder reflecting legacy unicast queries
/// to off-link addresses (RFC 6762 §11 / §5.5), which made every agent a
/// UDP amplifier: before the fix the off-link querier got the same replies
/// as the on-link one, and the forged group query made the agent send them
/// across the router to the victim.
#[test]
fn an_agent_answers_legacy_queries_from_its_own_link_only_and_never_reflects_to_an_off_link_source()
{
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.routed(RoutedOptions {
        subnets: vec![2, 1],
    });
    assert_eq!(lab.subnet_of(1), lab.subnet_of(0));
    assert_ne!(lab.subnet_of(2), lab.subnet_of(0));
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, dir.path());

    // On the agent's link: answered, by unicast, from the agent's address.
    let on_link = ask_legacy(&lab, 1, 0);
    println!("on-link legacy query: {on_link:?}");
    assert!(
        on_link.replies > 0 && on_link.line.contains(&lab.host(0).ip.to_string()),
        "an on-link legacy query must be answered by the agent: {on_link:?}"
    );

    // From the other subnet, through the router: silence.
    let off_link = ask_legacy(&lab, 2, 0);
    println!("off-link legacy query: {off_link:?}");
    assert_eq!(
        off_link.replies, 0,
        "an off-link legacy query must not be answered (RFC 6762 §11, §5.5): {off_link:?}"
    );
    // Not silently: the agent's debug log names the drop and why.
    agent.expect_output(&format!("from {}:", lab.host(2).ip), Duration::from_secs(5));
    agent.expect_output(
        "unicast query from an off-link source (RFC 6762 §5.5, §11)",
        Duration::from_secs(5),
    );

    // Forged to the group from an on-link host: the control first (the
    // forger's own address, so the raw packet path is shown to work)...
    let own = forge_to_group(&lab, 1, 1);
    println!("group query with the sender's own source: {own:?}");
    assert!(
        own.replies > 0,
        "a group legacy query with an on-link source must be answered: {own:?}"
    );
    // ...then with the off-link victim's address: nothing reaches it.
    let victim = forge_to_group(&lab, 1, 2);
    println!("group query forged from the off-link host: {victim:?}");
    assert_eq!(
        victim.replies, 0,
        "a group query forged from an off-link address must not be reflected to it: {victim:?}"
    );
    assert_eq!(victim.bytes, 0);
    agent.expect_output(
        "legacy query to the group from an off-link source (RFC 6762 §11)",
        Duration::from_secs(5),
    );
}

/// Queries in one burst of [`an_on_link_source_flooding_legacy_queries_is_answered_at_a_bounded_rate`].
const FLOOD: u64 = 200;

/// Guards against unbounded legacy unicast replies (RFC 6762 §6.7 answers
/// bypass the §6 once-a-second multicast limit): an on-link host that forges
/// a neighbour's address could make the agent send it one reply per query,
/// as fast as it can send queries. Before the fix all [`FLOOD`] queries were
/// answered; now a source gets a burst of 32, then 16 a second
/// (`vendor/mdns-sd/PATCHES.md`), and is answered again once it slows down.
#[test]
fn an_on_link_source_flooding_legacy_queries_is_answered_at_a_bounded_rate() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.routed(RoutedOptions { subnets: vec![2] });
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 0, dir.path());
    // Up and answering first, so that silence below is the limit.
    let first = ask_legacy(&lab, 1, 0);
    assert!(first.replies > 0, "the agent must answer at all: {first:?}");
    // Let the burst refill (32 tokens at 16/s) after those queries.
    std::thread::sleep(Duration::from_secs(3));

    let dest = lab.host(0).ip.to_string();
    let n = FLOOD.to_string();
    let out = run_ok(&mut querier(&lab, 1, &["burst", &dest, &n, "2"]));
    let flood = heard(&String::from_utf8_lossy(&out.stdout));
    println!("{FLOOD} legacy queries back to back: {flood:?}");
    // 32 at once, plus 16/s for however long the daemon takes to read the
    // queries (well under the 2 s window even on a loaded box): the bound
    // leaves room for that without being near FLOOD.
    assert!(
        flood.replies >= 1 && flood.replies <= 32 + 16 * 3,
        "a source flooding legacy queries must get a burst of 32, then 16/s: {flood:?}"
    );

    // After a pause, the same source is answered again.
    std::thread::sleep(Duration::from_secs(3));
    let again = ask_legacy(&lab, 1, 0);
    assert!(
        again.replies > 0,
        "a source that slowed down must be answered again: {again:?}"
    );
}

/// Agents in [`forged_qu_queries_naming_a_victim_draw_no_more_bytes_toward_it_than_they_carry`].
const AGENTS: usize = 5;

/// How long the stranger forges QU queries, 50 a second.
const FORGE_SECS: u64 = 5;

/// What a victim received from each agent during a forgery: the listener's
/// `PER` line, as (source, datagrams).
fn per_source(stdout: &str) -> Vec<(String, u64)> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("PER"))
        .unwrap_or_else(|| panic!("the listener printed no PER line: {stdout:?}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// Host `stranger` forges QU queries from `victim`'s address (port 5353)
/// to the group, 50 a second for [`FORGE_SECS`]; `victim` counts the
/// unicast datagrams that reach its port 5353 (it joins no group, so
/// multicast answers do not count). Returns (the stranger's bytes, what
/// the victim heard, per agent).
fn forge_qu(lab: &Lab, stranger: usize, victim: usize) -> (u64, Heard, Vec<(String, u64)>) {
    let listen_secs = (FORGE_SECS + 2).to_string();
    let listener = Proc::spawn(
        lab,
        victim,
        querier(lab, victim, &["listen", "5353", &listen_secs]),
    );
    listener.expect_output("READY", Duration::from_secs(10));
    let src = lab.host(victim).ip.to_string();
    let secs = FORGE_SECS.to_string();
    let out = run_ok(&mut querier(
        lab,
        stranger,
        &["forge-qu", &src, "5353", &secs, "0.02"],
    ));
    let sent = String::from_utf8_lossy(&out.stdout).to_string();
    let sent_bytes: u64 = sent
        .split_whitespace()
        .skip_while(|w| *w != "BYTES")
        .nth(1)
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("the forger printed no SENT line: {sent:?}"));
    listener.expect_exit(Duration::from_secs(20));
    let stdout = listener.stdout();
    (sent_bytes, heard(&stdout), per_source(&stdout))
}

/// Guards against issue 37, item 10 (vendor/mdns-sd/PATCHES.md §36): a
/// stranger forging QU queries (50 a second for 5 s) with a victim's source
/// address made five agents send the victim 85 packets, 1.95 times the
/// bytes the stranger sent (26.6 times before §29). Now an answer bigger
/// than its question goes by unicast only to an address that proved itself
/// (a TCP connection the agent accepted), and any destination gets at most
/// 2 unicast answers at once, then 2 a second, from each agent. The victim
/// unproved: nothing. The victim proved (a coordinator that connected to
/// every agent, what a stranger may still aim at): at most 2 a second per
/// agent.
#[test]
fn forged_qu_queries_naming_a_victim_draw_no_more_bytes_toward_it_than_they_carry() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(AGENTS + 2);
    let (stranger, victim) = (AGENTS, AGENTS + 1);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (0..AGENTS)
        .map(|i| super::wire::start_agent(&lab, i, &format!("refl{i}"), dir.path(), &[]))
        .collect();
    for a in &agents {
        a.expect_output("mDNS: announced on", UP);
    }

    let (sent, unproved, _) = forge_qu(&lab, stranger, victim);
    println!(
        "MEASURED: forged QU queries ({sent} bytes), victim unproved: {} datagrams, {} bytes \
         ({:.2} times) from {AGENTS} agents",
        unproved.replies,
        unproved.bytes,
        unproved.bytes as f64 / sent as f64
    );
    assert!(sent > 0, "the stranger sent nothing");
    assert!(
        unproved.bytes <= sent,
        "the agents sent the victim more bytes than the stranger sent: {unproved:?}, {sent} bytes"
    );

    for i in 0..AGENTS {
        super::wire::prove_from(&lab, victim, &lab.host(i).ip.to_string());
    }
    let (sent, proved, per) = forge_qu(&lab, stranger, victim);
    println!(
        "MEASURED: forged QU queries ({sent} bytes), victim proved to every agent: {} datagrams, \
         {} bytes ({:.2} times), per agent {per:?}",
        proved.replies,
        proved.bytes,
        proved.bytes as f64 / sent as f64
    );
    // The burst (2) and 2 a second over the forgery, with one of slack for
    // the timing: the path is live, and bounded.
    let bound = 2 + 2 * FORGE_SECS + 1;
    assert!(
        proved.replies >= 1,
        "a proved address gets unicast answers at all: {proved:?}"
    );
    for (agent, n) in &per {
        assert!(
            *n <= bound,
            "{agent} sent the victim {n} unicast answers in {FORGE_SECS} s (at most {bound})"
        );
    }
    drop(agents);
}
