//! The agent's mDNS responder against RFC 6762, seen on the wire: raw
//! packets sent and parsed by `lab/py/mdns_wire.py` (hand-built with
//! `struct`, no mDNS library in between) in a lab host, against a running
//! `rlx-agent` in another. These are the "Answering" rows of docs/protocol.md
//! "Conformance to RFC 6762"; the patches they check are in
//! vendor/mdns-sd/PATCHES.md §20-26.

use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{agent_bin, eventually, require_lab_with, script, Proc, PYTHON};
use rlx_lab::{Lab, LabOptions};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce (it probes for about 0.75 s
/// first; a loaded CI box is slower).
pub(crate) const UP: Duration = Duration::from_secs(20);

/// Starts an agent named `name` in host `host`, announcing on `ifaces`
/// (its default choice when empty).
pub(crate) fn start_agent(lab: &Lab, host: usize, name: &str, dir: &Path, ifaces: &[&str]) -> Proc {
    let caps = dir.join(format!("{name}.json"));
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{:016x}","hostname":"{name}","os":"linux","arch":"x86_64","cores":8,
               "ram_total":68719476736,"ram_avail":60000000000}}"#,
            host + 1
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", name, "--no-bench"])
        .env("RUST_LOG", "info");
    for i in ifaces {
        cmd.args(["--interface", i]);
    }
    Proc::spawn(lab, host, cmd)
}

/// Connects from host `from` to the agent's handshake port at `agent_addr`
/// (an IPv6 link-local address with its `%eth0`), and closes: the accepted
/// TCP connection proves `from`'s address to the agent, whose QU answers to
/// it may then be bigger than its questions (vendor/mdns-sd/PATCHES.md §36).
pub(crate) fn prove_from(lab: &Lab, from: usize, agent_addr: &str) {
    const CONNECT: &str = r#"
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("cannot connect to the agent at %s" % sys.argv[1])
"#;
    let port = rlx_proto::service::DEFAULT_AGENT_PORT.to_string();
    let out = lab
        .command(from, PYTHON)
        .args(["-c", CONNECT, agent_addr, &port])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The responder hears of it through its command queue.
    std::thread::sleep(Duration::from_millis(200));
}

/// Starts `mdns_wire.py listen ARGS` in host `host` and waits until it has
/// joined the group.
fn start_listener(lab: &Lab, host: usize, args: &[&str]) -> Proc {
    let mut cmd = Command::new(PYTHON);
    cmd.arg(script("mdns_wire.py")).arg("listen").args(args);
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("\"listening\"", UP);
    p
}

/// Runs `mdns_wire.py ARGS` in host `host` to completion: its JSON.
pub(crate) fn run_wire(lab: &Lab, host: usize, args: &[&str]) -> Value {
    let out = lab
        .command(host, PYTHON)
        .arg(script("mdns_wire.py"))
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "mdns_wire.py {args:?} printed no JSON ({e}); stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The packets a listener printed so far, one JSON object each.
fn packets(p: &Proc) -> Vec<Value> {
    p.stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("msg").is_some())
        .collect()
}

/// The records of the answer and additional sections of `msg`.
pub(crate) fn records(msg: &Value) -> impl Iterator<Item = &Value> {
    ["an", "ar"]
        .into_iter()
        .flat_map(move |s| msg[s].as_array().into_iter().flatten())
}

/// The addresses of `iface` in host `host` of family `family` (`-4`/`-6`).
fn addrs_of(lab: &Lab, host: usize, family: &str, iface: &str) -> BTreeSet<String> {
    let out = lab
        .exec(host, "ip", &[family, "-o", "addr", "show", "dev", iface])
        .unwrap();
    out.lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|cidr| cidr.split('/').next())
        .map(str::to_string)
        .collect()
}

/// Runs `ip ARGS` in the lab's host `host`, panicking with its error.
fn ip(lab: &Lab, host: usize, args: &[&str]) {
    lab.exec(host, "ip", args)
        .unwrap_or_else(|e| panic!("ip {args:?} in host {host}: {e}"));
}

/// Guards against the QU bit being ignored (RFC 6762 §5.4): the answer to a
/// QU question was multicast, and a second QU question within a second got
/// nothing at all (the 1 s multicast rate limit dropped it), so a Mac's
/// first queries after waking could go unanswered. Each must get a unicast
/// reply to the querier's address and port 5353, once the querier proved
/// its address (a coordinator that connected to the agent; others get the
/// answers by multicast, PATCHES.md §36).
#[test]
fn every_qu_question_gets_a_unicast_reply_even_two_within_a_second() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "qu0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    prove_from(&lab, 1, &lab.host(0).ip.to_string());

    let src = lab.host(1).ip.to_string();
    let v = run_wire(
        &lab,
        1,
        &["qu", "--src", &src, "--count", "2", "--gap-ms", "300"],
    );
    assert_two_unicast_ptr_answers(&v, &lab.host(0).ip.to_string(), "qu0");
}

/// Asserts that both QU questions of `mdns_wire.py qu` output `v` got a
/// unicast PTR answer for instance `name` from `agent_ip`.
fn assert_two_unicast_ptr_answers(v: &Value, agent_ip: &str, name: &str) {
    let instance = format!("{name}._rlx._tcp.local.");
    let sent = v["sent"].as_array().unwrap();
    let latencies: Vec<String> = v["replies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let q = r["query"].as_u64().unwrap() as usize;
            let ms = (r["t"].as_f64().unwrap() - sent[q].as_f64().unwrap()) * 1000.0;
            format!("question {q}: {ms:.1} ms")
        })
        .collect();
    eprintln!("unicast replies to QU questions: {latencies:?}");
    for query in 0..2 {
        let answered = v["replies"].as_array().unwrap().iter().any(|r| {
            r["query"] == query
                && r["src"] == agent_ip
                && r["msg"]["an"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|rr| rr["type"] == "PTR" && rr["target"] == instance.as_str())
        });
        assert!(
            answered,
            "QU question {query} got no unicast PTR answer from the agent; saw: {v:#}"
        );
    }
}

/// The same over IPv6, from the querier's link-local address: the unicast
/// reply must reach a scoped address (guards against the QU bit being
/// ignored there too).
#[test]
fn a_qu_question_over_ipv6_from_a_link_local_address_gets_a_unicast_reply() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: true,
    });
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "qu6", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);

    let link_local = |host| {
        addrs_of(&lab, host, "-6", "eth0")
            .into_iter()
            .find(|a| a.starts_with("fe80:"))
            .unwrap_or_else(|| panic!("host {host} has no link-local address on eth0"))
    };
    let src = link_local(1);
    prove_from(&lab, 1, &format!("{}%eth0", link_local(0)));
    let v = run_wire(
        &lab,
        1,
        &[
            "qu", "--src", &src, "--iface", "eth0", "--count", "2", "--gap-ms", "300",
        ],
    );
    // The agent answers from its own link-local address (the reply's
    // source as Python prints it carries no scope).
    assert_two_unicast_ptr_answers(&v, &link_local(0), "qu6");
}

/// Guards against probes sent as QM questions (RFC 6762 §8.1 asks for the
/// QU bit in probes).
#[test]
fn the_agents_probes_carry_the_qu_bit() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let listener = start_listener(
        &lab,
        1,
        &["--iface", "eth0", "--seconds", "30", "--until", "probe"],
    );
    let _agent = start_agent(&lab, 0, "probe0", dir.path(), &[]);
    listener.expect_exit(Duration::from_secs(40));

    let agent_ip = lab.host(0).ip.to_string();
    let probes: Vec<Value> = packets(&listener)
        .into_iter()
        .filter(|p| {
            p["src"] == agent_ip.as_str()
                && p["msg"]["response"] == false
                && !p["msg"]["ns"].as_array().unwrap().is_empty()
        })
        .collect();
    assert!(!probes.is_empty(), "no probe seen: {}", listener.stdout());
    for p in &probes {
        for q in p["msg"]["qd"].as_array().unwrap() {
            assert_eq!(q["qu"], true, "a probe question without the QU bit: {p:#}");
        }
    }
}

/// Guards against the 10-50 ms delay of shared-record (PTR) answers: RFC
/// 6762 §6 asks for 20-120 ms, uniform. Every measured delay must be at
/// least 20 ms, and some must go past the old 50 ms cap (only the lower
/// bound is strict: load only makes replies later).
#[test]
fn ptr_answers_to_a_multicast_question_wait_20_to_120_ms() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "delay0", dir.path(), &[]);
    // Both announcements out first, so that no answer is mistaken for one.
    eventually(UP, "the agent's second announcement", || {
        let n = agent.stderr().matches("mDNS: announced on").count();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} announcements"))
        }
    });

    let (src, agent_ip) = (lab.host(1).ip.to_string(), lab.host(0).ip.to_string());
    let v = run_wire(
        &lab,
        1,
        &[
            "delay", "--src", &src, "--agent", &agent_ip, "--count", "14",
        ],
    );
    let delays: Vec<f64> = v["delays_ms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    eprintln!("PTR answer delays (ms): {delays:?}");
    // A question within 1 s of the last announcement gets nothing (§6 rate
    // limit), nor does one whose answer takes over 1 s (the next question
    // is then sent): those are left out, the rest must be answered.
    assert!(delays.len() >= 11, "too few answers: {v}");
    let min = delays.iter().cloned().fold(f64::MAX, f64::min);
    let max = delays.iter().cloned().fold(0.0, f64::max);
    assert!(
        min >= 20.0,
        "a PTR answer came after {min:.1} ms (< 20 ms): {delays:?}"
    );
    assert!(
        max > 60.0,
        "no PTR answer after 60 ms, as if capped at 50 ms: {delays:?}"
    );
}

/// Guards against the per-interface address filter matching by prefix
/// (RFC 6762 §6.2): every NIC has fe80::/64, so an agent with two links put
/// both links' link-local addresses on each. Each link must see only the
/// addresses of the interface the packet went out of.
#[test]
fn a_two_nic_agent_puts_only_each_links_own_ipv6_addresses_on_it() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.with(LabOptions {
        hosts: 3,
        ipv6: true,
    });
    // A second link, eth1, straight from host 0 to host 2 (host 2 is on the
    // switch too, but listens only on eth1).
    let ns2 = lab.host(2).ns.clone();
    ip(
        &lab,
        0,
        &[
            "link", "add", "eth1", "type", "veth", "peer", "name", "eth1", "netns", &ns2,
        ],
    );
    ip(
        &lab,
        0,
        &["addr", "add", "fd53::1/64", "dev", "eth1", "nodad"],
    );
    ip(
        &lab,
        2,
        &["addr", "add", "fd53::2/64", "dev", "eth1", "nodad"],
    );
    ip(&lab, 0, &["link", "set", "eth1", "up"]);
    ip(&lab, 2, &["link", "set", "eth1", "up"]);
    let link_b = eventually(UP, "host 0's eth1 has a link-local address", || {
        let a = addrs_of(&lab, 0, "-6", "eth1");
        if a.iter().any(|x| x.starts_with("fe80:")) {
            Ok(a)
        } else {
            Err(format!("{a:?}"))
        }
    });
    let link_a = addrs_of(&lab, 0, "-6", "eth0");

    let on_a = start_listener(
        &lab,
        1,
        &[
            "--family",
            "6",
            "--iface",
            "eth0",
            "--seconds",
            "30",
            "--until",
            "aaaa:2",
        ],
    );
    let on_b = start_listener(
        &lab,
        2,
        &[
            "--family",
            "6",
            "--iface",
            "eth1",
            "--seconds",
            "30",
            "--until",
            "aaaa:2",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 0, "nic0", dir.path(), &["eth0", "eth1"]);
    on_a.expect_exit(Duration::from_secs(40));
    on_b.expect_exit(Duration::from_secs(40));

    for (listener, own, link) in [(&on_a, &link_a, "eth0"), (&on_b, &link_b, "eth1")] {
        let seen: BTreeSet<String> = packets(listener)
            .iter()
            .filter(|p| p["msg"]["response"] == true)
            .flat_map(|p| records(&p["msg"]).cloned().collect::<Vec<_>>())
            // Only host 0 runs a responder: every AAAA is the agent's.
            .filter(|r| r["type"] == "AAAA")
            .filter_map(|r| r["addr"].as_str().map(str::to_string))
            .collect();
        assert!(
            !seen.is_empty(),
            "no AAAA of the agent on {link}: {}",
            listener.stdout()
        );
        let foreign: Vec<&String> = seen.difference(own).collect();
        assert!(
            foreign.is_empty(),
            "on {link} the agent announced {foreign:?}, not addresses of {link} ({own:?})"
        );
    }
}

/// Guards against a removed address staying in every cache for up to its
/// 120 s TTL (RFC 6762 §10.1): when an address is deleted from an interface
/// that stays up, its record must be sent again with TTL 0 on that link.
/// And without the cache-flush bit: with it, receivers flush the host's
/// other addresses of that family with it (§10.2; python-zeroconf and
/// mdns-sd both did, after an IPv6 temporary address expired).
#[test]
fn a_removed_address_is_withdrawn_with_a_goodbye_that_flushes_nothing_else() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let o = lab.host(0).ip.octets();
    let extra = format!("{}.{}.200.200", o[0], o[1]);
    ip(
        &lab,
        0,
        &["addr", "add", &format!("{extra}/16"), "dev", "eth0"],
    );

    let listener = start_listener(
        &lab,
        1,
        &["--iface", "eth0", "--seconds", "60", "--until", "goodbye"],
    );
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "bye0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    let announced = |p: &Value, ttl_zero: bool| {
        p["msg"]["response"] == true
            && records(&p["msg"]).any(|r| {
                r["type"] == "A" && r["addr"] == extra.as_str() && (r["ttl"] == 0) == ttl_zero
            })
    };
    eventually(UP, "the extra address announced", || {
        if packets(&listener).iter().any(|p| announced(p, false)) {
            Ok(())
        } else {
            Err(listener.stdout())
        }
    });

    ip(
        &lab,
        0,
        &["addr", "del", &format!("{extra}/16"), "dev", "eth0"],
    );
    eventually(
        Duration::from_secs(20),
        "a goodbye for the removed address",
        || {
            if packets(&listener).iter().any(|p| announced(p, true)) {
                Ok(())
            } else {
                Err(listener.stdout())
            }
        },
    );
    let flushing: Vec<Value> = packets(&listener)
        .iter()
        .filter(|p| announced(p, true))
        .flat_map(|p| records(&p["msg"]).cloned().collect::<Vec<_>>())
        .filter(|r| r["ttl"] == 0 && r["flush"] == true)
        .collect();
    assert!(
        flushing.is_empty(),
        "the goodbye must not carry the cache-flush bit (RFC 6762 §10.2): {flushing:?}"
    );
}

/// Guards against answering a truncated query at once (RFC 6762 §7.2): the
/// known answers in the packets that follow it were ignored, so the agent
/// sent what the querier already had. It must wait 400-500 ms for them: a
/// known answer that follows 100 ms later suppresses the answer, and with
/// none the answer comes only after the wait.
#[test]
fn a_truncated_query_waits_for_its_known_answers() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "tc0", dir.path(), &[]);
    eventually(UP, "the agent's second announcement", || {
        let n = agent.stderr().matches("mDNS: announced on").count();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} announcements"))
        }
    });
    let (src, agent_ip) = (lab.host(1).ip.to_string(), lab.host(0).ip.to_string());
    let tc = |known: bool| {
        let mut args = vec![
            "tc",
            "--src",
            &src,
            "--agent",
            &agent_ip,
            "--instance",
            "tc0._rlx._tcp.local.",
        ];
        if known {
            args.push("--known");
        }
        // Past the 1 s multicast rate limit of the last answer (§6).
        std::thread::sleep(Duration::from_millis(1100));
        run_wire(&lab, 1, &args)["answers_ms"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect::<Vec<f64>>()
    };

    let suppressed = tc(true);
    assert!(
        suppressed.is_empty(),
        "the agent answered a truncated query whose known answer it then got: {suppressed:?} ms"
    );
    let answered = tc(false);
    assert_eq!(answered.len(), 1, "one answer expected: {answered:?} ms");
    assert!(
        answered[0] >= 400.0,
        "answered {:.1} ms after a truncated query, before the 400 ms wait",
        answered[0]
    );
}
