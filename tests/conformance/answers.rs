//! **What `dns-sd -Q` or a conformance test asks, answered**: raw
//! questions from `lab/py/mdns_wire.py ask` (multicast from port 5353, and
//! legacy from an ephemeral port) against a running `rlx-agent`: ANY for the
//! service type, names in other letter cases, the DNS-SD meta-query, query
//! ids and IP TTLs, both address families in an answer, QU replies
//! bounded per source, and duplicate answers suppressed by the link's own
//! traffic only. The patches they check are vendor/mdns-sd/PATCHES.md §29,
//! §30, §34 and §36.

use super::wire::{prove_from, records, run_wire, start_agent, UP};
use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{agent_bin, require_lab_with, script, Proc, PYTHON};
use rlx_lab::LabOptions;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Between two multicast questions for one record: past the 1 s in which
/// the agent multicasts a record at most once (RFC 6762 §6).
const RATE_GAP: Duration = Duration::from_millis(1100);

/// After an agent says it announced: its second announcement (1 s after
/// the first) is over, so the first question is not rate-limited.
const ANNOUNCED: Duration = Duration::from_secs(3);

/// The replies of one `ask` from host 1, as JSON.
fn ask(lab: &rlx_lab::Lab, name: &str, qtype: &str, extra: &[&str]) -> Vec<Value> {
    let src = lab.host(1).ip.to_string();
    let mut args = vec!["ask", "--src", &src, "--name", name, "--qtype", qtype];
    args.extend_from_slice(extra);
    let v = run_wire(lab, 1, &args);
    v["replies"].as_array().cloned().unwrap_or_default()
}

/// Whether a reply from `agent` carries a PTR record naming `target`.
fn has_ptr_to(replies: &[Value], agent: &str, target: &str) -> bool {
    replies.iter().any(|r| {
        r["src"] == agent
            && records(&r["msg"]).any(|rr| {
                rr["type"] == "PTR"
                    && rr["target"]
                        .as_str()
                        .is_some_and(|t| t.eq_ignore_ascii_case(target))
            })
    })
}

/// Guards against PATCHES.md §30: an ANY question for `_rlx._tcp.local.`
/// got nothing, and so did a PTR question for `_RLX._TCP.local.` and the
/// meta-query in capitals; multicast and legacy alike.
#[test]
fn any_queries_meta_queries_and_names_in_other_letter_cases_are_answered_multicast_and_legacy() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "case0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(ANNOUNCED);
    let me = lab.host(0).ip.to_string();
    let instance = "case0._rlx._tcp.local.";
    let cases = [
        ("_rlx._tcp.local.", "ANY", instance),
        ("_RLX._TCP.local.", "PTR", instance),
        ("_Rlx._Tcp.Local.", "ANY", instance),
        ("_services._dns-sd._udp.local.", "PTR", "_rlx._tcp.local."),
        ("_SERVICES._DNS-SD._UDP.LOCAL.", "PTR", "_rlx._tcp.local."),
    ];
    let mut missed = Vec::new();
    for (name, qtype, target) in cases {
        for legacy in [false, true] {
            std::thread::sleep(RATE_GAP);
            let extra: &[&str] = if legacy { &["--legacy"] } else { &[] };
            let replies = ask(&lab, name, qtype, extra);
            if !has_ptr_to(&replies, &me, target) {
                missed.push(format!(
                    "{qtype} {name} ({}): {replies:?}",
                    if legacy { "legacy" } else { "multicast" }
                ));
            }
        }
    }
    assert!(missed.is_empty(), "unanswered: {missed:#?}");
}

/// Guards against PATCHES.md §29 and §30: multicast replies echoed the
/// query id (RFC 6762 §18.1 wants zero), and unicast replies left with IP
/// TTL 64 (§11 wants 255). A legacy reply echoes the id, as §6.7 asks. The
/// querier proved its address first, so that its QU question is answered
/// by unicast (PATCHES.md §36).
#[test]
fn multicast_replies_carry_id_zero_legacy_ones_the_querys_and_every_reply_ip_ttl_255() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "ids0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(ANNOUNCED);
    let me = lab.host(0).ip.to_string();
    prove_from(&lab, 1, &me);
    std::thread::sleep(RATE_GAP);
    for (extra, want_id, want_unicast) in [
        (&["--id", "4242"][..], 0, false),
        (&["--id", "4242", "--legacy"][..], 4242, true),
        (&["--id", "4242", "--qu"][..], 0, true),
    ] {
        let replies = ask(&lab, "_rlx._tcp.local.", "PTR", extra);
        let ours: Vec<&Value> = replies.iter().filter(|r| r["src"] == me.as_str()).collect();
        assert!(!ours.is_empty(), "{extra:?}: no reply: {replies:?}");
        for r in &ours {
            assert_eq!(r["msg"]["id"], want_id, "{extra:?}: {r}");
            assert_eq!(r["ttl"], 255, "{extra:?}: IP TTL of {r}");
        }
        assert!(
            ours.iter().any(|r| r["unicast"] == want_unicast),
            "{extra:?}: wanted unicast {want_unicast}: {ours:?}"
        );
        std::thread::sleep(RATE_GAP);
    }
}

/// Guards against PATCHES.md §30 (RFC 6762 §6.2): an answer over IPv4 held
/// only A records, so an IPv4 querier never learnt the agent's IPv6
/// addresses from it.
#[test]
fn an_answer_over_ipv4_carries_the_agents_ipv6_addresses_too() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.with(LabOptions {
        hosts: 2,
        ipv6: true,
    });
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "fam0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(ANNOUNCED);
    let me = lab.host(0).ip.to_string();
    std::thread::sleep(RATE_GAP);
    let replies = ask(&lab, "_rlx._tcp.local.", "PTR", &["--legacy"]);
    let families: Vec<&str> = replies
        .iter()
        .filter(|r| r["src"] == me.as_str())
        .flat_map(|r| records(&r["msg"]))
        .filter_map(|rr| rr["type"].as_str())
        .filter(|t| *t == "A" || *t == "AAAA")
        .collect();
    assert!(families.contains(&"A"), "no A record: {replies:?}");
    assert!(
        families.contains(&"AAAA"),
        "no AAAA record in the IPv4 answer: {replies:?}"
    );
}

/// Guards against PATCHES.md §29 and §36: QU questions were answered by
/// unicast to any source with no limit, so forged ones naming a victim's
/// address made every agent unicast at it. 40 QU questions in 2 s from one
/// address, even a proved one, draw at most the burst (2) and the rate (2
/// a second) in unicast replies.
#[test]
fn forty_qu_questions_from_one_address_draw_at_most_a_small_burst_of_unicast_replies() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 0, "qul0", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(ANNOUNCED);
    let src = lab.host(1).ip.to_string();
    prove_from(&lab, 1, &lab.host(0).ip.to_string());
    let v = run_wire(
        &lab,
        1,
        &["qu", "--src", &src, "--count", "40", "--gap-ms", "50"],
    );
    let me = lab.host(0).ip.to_string();
    let unicast = v["replies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["src"] == me.as_str())
        .count();
    eprintln!("40 QU questions in 2 s: {unicast} unicast replies");
    assert!(
        unicast >= 1,
        "the first QU question gets a unicast reply: {v}"
    );
    // The burst, 2 s of the rate, and one of slack for the timing.
    assert!(
        unicast <= 2 + 4 + 1,
        "{unicast} unicast replies to one source"
    );
}

/// Guards against PATCHES.md §34: every agent answered a meta-query
/// (`_services._dns-sd._udp.local.` PTR, what `avahi-browse -a`, Bonjour
/// browsers and `dns-sd -B` send) with the same record, so one meta-query
/// drew one identical multicast packet per agent, 8 here and 200 on a big
/// LAN, for every device on the segment. With RFC 6762 §7.4 duplicate
/// answer suppression, the first answer on the link cancels the copies
/// still waiting out their 20-120 ms delay. Two timers that fire within the
/// few milliseconds an answer takes to arrive still both send, so the bound
/// is three per query on average, not one.
#[test]
fn a_meta_query_to_eight_agents_draws_about_one_multicast_answer_not_eight() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(9);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<_> = (1..9)
        .map(|i| start_agent(&lab, i, &format!("meta{i}"), dir.path(), &[]))
        .collect();
    for a in &agents {
        a.expect_output("mDNS: announced on", UP);
    }
    std::thread::sleep(ANNOUNCED);
    let src = lab.host(0).ip.to_string();
    let mut counts = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(RATE_GAP);
        let v = run_wire(
            &lab,
            0,
            &[
                "ask",
                "--src",
                &src,
                "--name",
                "_services._dns-sd._udp.local.",
                "--qtype",
                "PTR",
            ],
        );
        let replies = v["replies"].as_array().cloned().unwrap_or_default();
        let answering: Vec<&str> = replies
            .iter()
            .filter(|r| {
                records(&r["msg"]).any(|rr| {
                    rr["type"] == "PTR"
                        && rr["target"]
                            .as_str()
                            .is_some_and(|t| t.eq_ignore_ascii_case("_rlx._tcp.local."))
                })
            })
            .filter_map(|r| r["src"].as_str())
            .collect();
        counts.push(answering.len());
    }
    println!("MEASURED: a meta-query to 8 agents drew {counts:?} identical multicast answers");
    assert!(
        counts.iter().all(|&n| n >= 1),
        "a meta-query went unanswered: {counts:?}"
    );
    assert!(
        counts.iter().sum::<usize>() <= 9,
        "duplicate answers were not suppressed: {counts:?} of 8 agents per query"
    );
    drop(agents);
}

/// Starts an agent like [`start_agent`], with mdns-sd's daemon logging at
/// `debug`, so that the packets it ignores show with their reason.
fn start_agent_logging(lab: &rlx_lab::Lab, host: usize, name: &str, dir: &Path) -> Proc {
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
        .env("RUST_LOG", "info,mdns_sd::service_daemon=debug");
    Proc::spawn(lab, host, cmd)
}

/// How many of three PTR questions for `_rlx._tcp.local.` from host 1 the
/// agent at `agent` answered by multicast while host 2 sends copies of that
/// answer every 5 ms: `to` a unicast address (or the group), from `sport`
/// (0: an ephemeral port).
fn answered_under_copies(
    lab: &rlx_lab::Lab,
    agent: &str,
    instance: &str,
    to: Option<&str>,
    sport: u16,
) -> usize {
    let src = lab.host(2).ip.to_string();
    let sport = sport.to_string();
    let mut copies = lab.command(2, PYTHON);
    copies.arg(script("mdns_wire.py")).args([
        "answer",
        "--src",
        &src,
        "--instance",
        instance,
        "--sport",
        &sport,
        "--count",
        "1000",
        "--gap-ms",
        "5",
    ]);
    if let Some(to) = to {
        copies.args(["--to", to]);
    }
    let copies = Proc::spawn(lab, 2, copies);
    let target = format!("{instance}._rlx._tcp.local.");
    let mut answered = 0;
    for _ in 0..3 {
        std::thread::sleep(RATE_GAP);
        let replies = ask(lab, "_rlx._tcp.local.", "PTR", &[]);
        let multicast: Vec<Value> = replies
            .into_iter()
            .filter(|r| r["unicast"] == false)
            .collect();
        if has_ptr_to(&multicast, agent, &target) {
            answered += 1;
        }
    }
    drop(copies);
    answered
}

/// Guards against issue 37, item 3 (PATCHES.md §34): the §7.4 rule dropped
/// an agent's pending multicast answer when any response carrying it
/// arrived, so a stranger sending copies of it to the agent alone, or from
/// a port other than 5353, kept the answer from every listener on the link.
/// Only a response sent to the group from port 5353 (the control here)
/// stands for it now; a response from another port is ignored altogether
/// (RFC 6762 §6), and says so in the agent's debug log.
#[test]
fn an_agents_pending_answer_survives_copies_sent_to_it_alone_or_from_another_port() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent_logging(&lab, 0, "dup0", dir.path());
    agent.expect_output("mDNS: announced on", UP);
    std::thread::sleep(ANNOUNCED);
    let me = lab.host(0).ip.to_string();

    let group_5353 = answered_under_copies(&lab, &me, "dup0", None, 5353);
    let unicast = answered_under_copies(&lab, &me, "dup0", Some(&me), 5353);
    let other_port = answered_under_copies(&lab, &me, "dup0", None, 0);
    println!(
        "MEASURED: multicast answers to 3 questions under copies of the answer: \
         to the group from 5353 {group_5353}, to the agent alone {unicast}, \
         to the group from another port {other_port}"
    );
    assert!(
        group_5353 < 3,
        "the control: copies the whole link heard stand for the agent's answer (RFC 6762 §7.4)"
    );
    assert_eq!(
        unicast, 3,
        "copies sent to the agent alone cancelled its answer"
    );
    assert_eq!(
        other_port, 3,
        "copies from another port cancelled its answer"
    );
    assert!(
        agent
            .stderr()
            .contains("its source port is not 5353 (RFC 6762 §6)"),
        "the responses from another port are ignored, and logged"
    );
}
