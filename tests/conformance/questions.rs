//! **Two browsers on one LAN ask once** (RFC 6762 §7.3, duplicate
//! question suppression, vendor/mdns-sd/PATCHES.md §35): two `watch`es on
//! two machines browse `_rlx._tcp`; a bystander on the LAN counts their
//! questions. A browser that hears the other ask the same question less
//! than a second before its own (with no known answer it lacks) treats it
//! as its own and stays quiet, so the two take turns where each asked.

use super::wire::{start_agent, UP};
use rlx_lab::kit::{discover_bin, require_lab, script, Proc, PYTHON};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

/// How long the bystander listens: mdns-sd's browse asks at about 0.1,
/// 1.1, 3.1 and 7.1 s (RFC 6762 §5.2 doubling), so four questions each.
const LISTEN_SECS: &str = "8";

#[test]
fn a_second_watch_on_the_lan_keeps_quiet_while_the_first_asks_the_same_question() {
    let Some(labs) = require_lab() else { return };
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
