//! **Two browsers on one LAN ask once** (RFC 6762 §7.3, duplicate
//! question suppression, vendor/mdns-sd/PATCHES.md §35): two `watch`es on
//! two machines browse `_rlx._tcp`; a bystander on the LAN counts their
//! questions. A browser that hears the other ask the same question less
//! than a second before its own (with no known answer it lacks) treats it
//! as its own and stays quiet, so the two take turns where each asked.

use super::wire::{start_agent, UP};
use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{discover_bin, require_lab_with, script, Proc, PYTHON};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// How long the bystander listens: mdns-sd's browse asks at about 0.1,
/// 1.1, 3.1 and 7.1 s (RFC 6762 §5.2 doubling), so four questions each.
const LISTEN_SECS: &str = "8";

#[test]
fn a_second_watch_on_the_lan_keeps_quiet_while_the_first_asks_the_same_question() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&lab, 2, "asked", dir.path(), &[]);
    agent.expect_output("mDNS: announced on", UP);
    let mut listen = lab.command(3, PYTHON);
    listen.arg(script("mdns_wire.py")).args([
        "listen",
        "--iface",
        "eth0",
        "--seconds",
        LISTEN_SECS,
    ]);
    let bystander = Proc::spawn(&lab, 3, listen);
    bystander.expect_output("listening", UP);
    let watch = |host: usize| {
        let mut c = Command::new(discover_bin());
        c.args(["watch", "--json", "--interface", "eth0"])
            .env("RUST_LOG", "mdns_sd=debug");
        Proc::spawn(&lab, host, c)
    };
    let first = watch(0);
    std::thread::sleep(Duration::from_millis(300));
    let second = watch(1);
    bystander
        .wait_timeout(Duration::from_secs(30))
        .expect("the bystander stops listening");
    let mut asked: BTreeMap<String, usize> = BTreeMap::new();
    for line in bystander.stdout().lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let msg = &v["msg"];
        let question = msg["qd"].as_array().into_iter().flatten().any(|q| {
            q["type"] == "PTR"
                && q["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case("_rlx._tcp.local."))
        });
        if msg["response"] == false && question {
            *asked
                .entry(v["src"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
        }
    }
    let (a, b) = (lab.host(0).ip.to_string(), lab.host(1).ip.to_string());
    let (n0, n1) = (
        asked.get(&a).copied().unwrap_or(0),
        asked.get(&b).copied().unwrap_or(0),
    );
    println!("MEASURED: PTR questions in {LISTEN_SECS} s: first watch {n0}, second watch {n1}");
    // Alone, each asks 4 times in the window (8 in all). Beside each other,
    // each question stands for the other's next one within a second, so
    // the two take turns: about 5 in all.
    assert!(n0 >= 1 && n1 >= 1, "both watches ask: {asked:?}");
    assert!(
        n0 + n1 <= 6,
        "{n0} + {n1} questions where one browser alone asks 4: the second \
         browser's duplicated the first's ({asked:?})"
    );
    assert!(
        second.stderr().contains("another host just asked it"),
        "the suppression is logged"
    );
    drop((first, second, agent));
}

/// Host `host`'s address and [`EXTRA_SOURCES`] more it adds on its link,
/// comma-separated. `watch` shares port 5353 between mdns-sd's socket and
/// its own listening one, and the kernel hands a unicast datagram to one
/// of them by its source address: from a single address the questions
/// could all land on the socket that never counts them.
fn stranger_sources(lab: &rlx_lab::Lab, host: usize) -> String {
    let ip = lab.host(host).ip.to_string();
    let cidr = lab
        .exec(host, "ip", &["-4", "-o", "addr", "show", "dev", "eth0"])
        .unwrap();
    let prefix = cidr
        .split_whitespace()
        .nth(3)
        .and_then(|c| c.split('/').nth(1))
        .unwrap_or("24")
        .to_string();
    let octets: Vec<&str> = ip.split('.').collect();
    let mut all = vec![ip.clone()];
    for k in 0..EXTRA_SOURCES {
        let extra = format!("{}.{}.{}.{}", octets[0], octets[1], octets[2], 200 + k);
        lab.exec(
            host,
            "ip",
            &["addr", "add", &format!("{extra}/{prefix}"), "dev", "eth0"],
        )
        .unwrap_or_else(|e| panic!("adding {extra} to host {host}: {e}"));
        all.push(extra);
    }
    all.join(",")
}

/// Addresses the stranger adds to its own ([`stranger_sources`]).
const EXTRA_SOURCES: usize = 7;

/// How long the stranger keeps its unicast questions coming: longer than a
/// fresh browse's first four queries (0.1, 1.1, 3.1, 7.1 s).
const FLOOD_SECS: u64 = 12;

/// Guards against issue 37, item 2 (PATCHES.md §35): the §7.3 rule counted
/// a QM question sent to the coordinator's unicast address as if the link
/// had heard it, so a stranger's 100 small unicast questions a second kept
/// every query of a freshly started `watch` from being sent, and it found
/// none of the idle agents already running. Only questions sent to the
/// group count now: the flood changes nothing.
#[test]
fn a_browser_flooded_with_unicast_questions_still_asks_the_link_and_finds_idle_agents() {
    let Some(labs) = require_lab_with(&[Peer::Python]) else {
        return;
    };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let agents = [
        start_agent(&lab, 2, "idle2", dir.path(), &[]),
        start_agent(&lab, 3, "idle3", dir.path(), &[]),
    ];
    for a in &agents {
        a.expect_output("mDNS: announced on", UP);
    }
    // Idle: past their two announcements, so only a query finds them.
    std::thread::sleep(Duration::from_secs(3));
    let (stranger, coordinator) = (stranger_sources(&lab, 1), lab.host(0).ip.to_string());
    let count = (FLOOD_SECS * 100).to_string();
    let mut flood = lab.command(1, PYTHON);
    flood.arg(script("mdns_wire.py")).args([
        "questions",
        "--src",
        &stranger,
        "--to",
        &coordinator,
        "--count",
        &count,
        "--gap-ms",
        "10",
    ]);
    let flood = Proc::spawn(&lab, 1, flood);
    std::thread::sleep(Duration::from_millis(500));
    let mut watch = Command::new(discover_bin());
    watch
        .args(["watch", "--json", "--interface", "eth0"])
        .env("RUST_LOG", "mdns_sd=debug");
    let watch = Proc::spawn(&lab, 0, watch);
    let joined = |w: &Proc| -> Vec<String> {
        w.json_lines()
            .iter()
            .filter(|e| e["event"] == "joined")
            .filter_map(|e| e["instance"].as_str().map(str::to_string))
            .collect()
    };
    let found = rlx_lab::kit::eventually(
        Duration::from_secs(FLOOD_SECS - 2),
        "watch finding both idle agents under the flood",
        || {
            let j = joined(&watch);
            if j.len() >= 2 {
                Ok(j)
            } else {
                Err(format!("joined so far: {j:?}"))
            }
        },
    );
    assert!(
        flood.wait_timeout(Duration::from_millis(1)).is_none(),
        "the flood was still running when watch found {found:?}"
    );
    println!("MEASURED: under 100 unicast questions/s, watch found {found:?}");
    assert!(
        !watch.stderr().contains("another host just asked it"),
        "a question sent to the coordinator alone stood for its own"
    );
    drop((watch, flood, agents));
}
