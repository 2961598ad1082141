//! **Nothing leaves on a stranger's word**: a stranger on the LAN, holding
//! no key, forges mDNS goodbyes (a PTR `_rlx._tcp.local. -> <instance>`
//! with TTL 0 from port 5353, RFC 6762 §10.1) for two live members of a
//! `watch --json`: by multicast, by unicast to the coordinator only (so that
//! the agents never hear it), and as a burst. Neither member is ever
//! reported `left`. Then one agent is stopped for real (SIGTERM, a real
//! goodbye, after a forged one was refuted) and is reported `left` within
//! 2 s; the other crashes (SIGKILL) and is reported `left` within 5 s.
//! With and without a cluster key.
//!
//! Guards against `watch` taking a goodbye at its word (docs/security.md, "The
//! membership feed"): one forged goodbye made it report a live, answering
//! member `left`, and mdns-sd, which had dropped the instance from its cache,
//! never brought it back.
//!
//! The forged packets come from `lab/py/mdns_wire.py goodbye`.
//! Everything runs inside namespaces built by [`rlx_lab`].

use nix::sys::signal::Signal;
use rlx_lab::kit::peer::Peer;
use rlx_lab::kit::{self, agent_bin, discover_bin, require_lab_with, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long agents may take to join (mDNS probing, a loaded CI box).
const UP: Duration = Duration::from_secs(30);

/// A real goodbye is reported within this (the promise of `watch`).
const GOODBYE_BOUND: Duration = rlx_lab::kit::promise::GOODBYE_LEFT.every;

/// A crash is reported within this (the promise of `watch`, for a member
/// followed over its liveness connection).
const CRASH_BOUND: Duration = rlx_lab::kit::promise::CRASH_LEFT.every;

/// How long after a forgery the members are watched for a wrong `left`:
/// past mdns-sd's removal (1 s after the goodbye) and the checks it starts.
const SETTLE: Duration = Duration::from_secs(4);

/// What `watch` logs at debug level when mdns-sd drops box1.
const MDNS_SD_REMOVED: &str = "mdns-sd removed box1";

/// The mDNS port, a forged goodbye's usual source port.
const MDNS: u16 = 5353;

/// Host roles in the lab.
const WATCH: usize = 0;
const STRANGER: usize = 3;

/// The raw-packet helper.
fn wire_script() -> PathBuf {
    kit::script("mdns_wire.py")
}

/// `box{i}`'s agent on host `i`, with the cluster key when there is one.
fn agent(lab: &Lab, i: usize, key: Option<&Path>, dir: &Path) -> Proc {
    let caps = format!(
        r#"{{"id":"f{i:015x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    );
    let caps_file = dir.join(format!("box{i}.json"));
    std::fs::write(&caps_file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", &format!("box{i}")]);
    if let Some(k) = key {
        cmd.arg("--key-file").arg(k);
    }
    Proc::spawn(lab, i, cmd)
}

/// How long after its start an agent's announcements are over (mdns-sd
/// probes for 0.75 s and announces twice, 1 s apart): a goodbye forged
/// before then is rescued by the second announcement (RFC 6762 §10.1 gives
/// a record one second to be refreshed), which would hide what `watch`
/// does with it.
const ANNOUNCED: Duration = Duration::from_secs(3);

/// The stranger forges `count` goodbyes for `instance`, `gap_ms` apart,
/// from port 5353 (or `sport`: 0 for an ephemeral one): to the mDNS group,
/// or by unicast to `to` only.
fn forge(lab: &Lab, instance: &str, to: Option<&str>, sport: u16, count: usize, gap_ms: u64) {
    let src = lab.host(STRANGER).ip.to_string();
    let mut cmd = lab.command(STRANGER, PYTHON);
    cmd.arg(wire_script()).args([
        "goodbye",
        "--src",
        &src,
        "--instance",
        instance,
        "--count",
        &count.to_string(),
        "--gap-ms",
        &gap_ms.to_string(),
        "--sport",
        &sport.to_string(),
    ]);
    if let Some(ip) = to {
        cmd.args(["--to", ip]);
    }
    kit::run_ok(&mut cmd);
}

/// The events `watch --json` printed so far ([`Proc::json_lines`]).
fn events(w: &Proc) -> Vec<Value> {
    w.json_lines()
}

/// The `left` events printed so far, one line each.
fn lefts(w: &Proc) -> Vec<String> {
    events(w)
        .iter()
        .filter(|e| e["event"] == "left")
        .map(|e| e.to_string())
        .collect()
}

/// Watches for `d`, failing at once if any member is reported left
/// meanwhile: `what` says which forgery it would have believed.
fn no_left_for(w: &Proc, d: Duration, what: &str) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        let l = lefts(w);
        assert!(
            l.is_empty(),
            "a live member was reported left after {what}: {l:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long after `since` the first `left` of `who` was seen printed.
fn left_after(w: &Proc, who: &str, since: Instant, within: Duration) -> Duration {
    kit::eventually(within * 3, &format!("{who} reported left"), || {
        let seen = events(w)
            .iter()
            .any(|e| e["event"] == "left" && e["instance"] == who);
        if seen {
            Ok(since.elapsed())
        } else {
            Err(format!("events: {:?}", events(w)))
        }
    })
}

/// A live `watch --json` (debug log) in host 0 with box1 and box2 joined
/// (keyed or not), past their announcements.
struct Scene {
    lab: Lab,
    w: Proc,
    box1: Proc,
    box2: Proc,
    _dir: tempfile::TempDir,
}

fn scene(keyed: bool) -> Option<Scene> {
    scene_on(keyed, false)
}

/// [`scene`] on a dual-stack LAN when `ipv6`.
fn scene_on(keyed: bool, ipv6: bool) -> Option<Scene> {
    let labs = require_lab_with(&[Peer::Python])?;
    let lab = labs.with(rlx_lab::LabOptions { hosts: 4, ipv6 });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0"])
        .env("RUST_LOG", "warn,rlx_discover=debug");
    if keyed {
        kit::run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
        let cfg = d.join("cluster.toml");
        std::fs::write(
            &cfg,
            format!("[discover]\nkey_file = {:?}\n", key.display().to_string()),
        )
        .unwrap();
        cmd.arg("--config").arg(&cfg);
    }
    let w = Proc::spawn(&lab, WATCH, cmd);
    let key = keyed.then_some(key.as_path());
    let box1 = agent(&lab, 1, key, d);
    let box2 = agent(&lab, 2, key, d);
    kit::eventually(UP, "both agents joined", || {
        let evs = events(&w);
        let joined = |who: &str| {
            evs.iter()
                .any(|e| e["event"] == "joined" && e["instance"] == who)
        };
        if joined("box1") && joined("box2") {
            Ok(())
        } else {
            Err(format!("{evs:?}"))
        }
    });
    if keyed {
        for e in events(&w).iter().filter(|e| e["event"] == "joined") {
            assert_eq!(e["node"]["evidence"], "authenticated", "{e}");
        }
    }
    std::thread::sleep(ANNOUNCED);
    Some(Scene {
        lab,
        w,
        box1,
        box2,
        _dir: dir,
    })
}

/// The whole scenario, keyed or not: see the module doc.
fn forged_goodbyes_are_refuted_and_real_leaves_keep_their_bounds(keyed: bool) {
    let Some(Scene {
        lab,
        w,
        box1,
        box2,
        _dir,
    }) = scene(keyed)
    else {
        return;
    };

    // The forgery this file guards against: two goodbyes 0.25 s apart, to
    // the group.
    for who in ["box1", "box2"] {
        forge(&lab, who, None, MDNS, 2, 250);
    }
    no_left_for(&w, SETTLE, "multicast goodbyes");
    // By unicast to the coordinator only: the agents never hear it. The
    // kernel hands a unicast datagram to one of the sockets sharing port
    // 5353 (mdns-sd's, the browse's own), chosen by its addresses and
    // ports, so it is sent from port 5353 and from a few ephemeral ports
    // too (mdns-sd does not look at a response's source port).
    let coordinator = lab.host(WATCH).ip.to_string();
    for who in ["box1", "box2"] {
        forge(&lab, who, Some(&coordinator), MDNS, 2, 250);
        for _ in 0..6 {
            forge(&lab, who, Some(&coordinator), 0, 2, 250);
        }
    }
    no_left_for(&w, SETTLE, "unicast goodbyes");
    // A burst, both ways: 40 a second for a second.
    forge(&lab, "box1", None, MDNS, 40, 25);
    forge(&lab, "box1", Some(&coordinator), MDNS, 40, 25);
    no_left_for(&w, SETTLE, "a burst of goodbyes");
    let evs = events(&w);
    let joins = evs.iter().filter(|e| e["event"] == "joined").count();
    assert_eq!(joins, 2, "each member joined once, never again: {evs:?}");
    let log = w.0.stderr();
    assert!(
        log.contains("goodbye refuted"),
        "the refuted goodbyes are logged at debug level"
    );

    // A real goodbye right after a forged one was refuted (mdns-sd has
    // dropped box1 from its cache again by then).
    forge(&lab, "box1", None, MDNS, 2, 250);
    no_left_for(&w, Duration::from_millis(1500), "a last forged goodbye");
    let removed = |w: &Proc| w.0.stderr().matches(MDNS_SD_REMOVED).count();
    let removed_before = removed(&w);
    let stopped = Instant::now();
    assert!(box1.signal(Signal::SIGTERM), "box1 signalled");
    let goodbye = left_after(&w, "box1", stopped, GOODBYE_BOUND);
    // And a crash: no goodbye, the health check finds it.
    let crashed = Instant::now();
    box2.kill();
    let crash = left_after(&w, "box2", crashed, CRASH_BOUND);
    let reasons: Vec<String> = events(&w)
        .iter()
        .filter(|e| e["event"] == "left")
        .map(|e| format!("{} {}", e["instance"], e["reason"]))
        .collect();
    // mdns-sd, which dropped box1 with each forgery, re-learnt it (the
    // browse asked the LAN again) and reports its real goodbye too.
    kit::eventually(
        Duration::from_secs(5),
        "mdns-sd reporting the real goodbye",
        || {
            if removed(&w) > removed_before {
                Ok(())
            } else {
                Err(format!(
                    "{removed_before} removals of box1 before the SIGTERM, none since"
                ))
            }
        },
    );
    let refuted = log.matches("goodbye refuted").count();
    eprintln!(
        "forged goodbyes ({}): {refuted} refutations logged; real goodbye -> left seen after \
         {} ms, crash -> left after {} ms; {reasons:?}",
        if keyed { "keyed" } else { "no key" },
        goodbye.as_millis(),
        crash.as_millis()
    );
    assert!(
        goodbye <= GOODBYE_BOUND,
        "a real goodbye after a refuted forgery: left after {goodbye:?}, over {GOODBYE_BOUND:?}"
    );
    assert!(
        crash <= CRASH_BOUND,
        "a crash: left after {crash:?}, over {CRASH_BOUND:?}"
    );
    drop((box1, box2));
}

#[test]
fn forged_goodbyes_never_make_watch_report_a_live_member_left_without_a_key() {
    forged_goodbyes_are_refuted_and_real_leaves_keep_their_bounds(false);
}

#[test]
fn forged_goodbyes_never_make_watch_report_a_live_member_left_with_a_key() {
    forged_goodbyes_are_refuted_and_real_leaves_keep_their_bounds(true);
}

/// The stranger forges `box1`'s records pointing at box2's machine (box2's
/// TXT, port and address, read from box2 itself), and phantom instances
/// `ghost`, `ghost-p0` .. at box2's machine: by multicast, then by
/// unicast to the coordinator only.
fn forge_records(lab: &Lab, instance: &str, phantoms: usize, to: Option<&str>) -> Value {
    forge_records_at(lab, instance, phantoms, to, 4)
}

/// [`forge_records`] at box2's address of `family` (6: its routable IPv6
/// address, which its IPv4 answers carry, RFC 6762 §6.2).
fn forge_records_at(
    lab: &Lab,
    instance: &str,
    phantoms: usize,
    to: Option<&str>,
    family: u8,
) -> Value {
    let src = lab.host(STRANGER).ip.to_string();
    let mut cmd = lab.command(STRANGER, PYTHON);
    cmd.arg(wire_script()).args([
        "records",
        "--src",
        &src,
        "--instance",
        instance,
        "--copy",
        "box2",
        "--phantoms",
        &phantoms.to_string(),
        "--at-family",
        &family.to_string(),
    ]);
    if let Some(ip) = to {
        cmd.args(["--to", ip]);
    }
    let out = String::from_utf8_lossy(&kit::run_ok(&mut cmd).stdout).into_owned();
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Forged records and phantoms, then a real goodbye and a crash.
fn forged_records_move_and_duplicate_nothing(keyed: bool) {
    let Some(Scene {
        lab,
        w,
        box1,
        box2,
        _dir,
    }) = scene(keyed)
    else {
        return;
    };
    let coordinator = lab.host(WATCH).ip.to_string();
    let copied = forge_records(&lab, "box1", 0, None);
    forge_records(&lab, "box1", 0, Some(&coordinator));
    forge_records(&lab, "ghost", 5, None);
    forge_records(&lab, "ghost", 5, Some(&coordinator));
    std::thread::sleep(SETTLE);
    let evs = events(&w);
    let news: Vec<&Value> = evs.iter().filter(|e| e["event"] != "refused").collect();
    assert_eq!(
        news.len(),
        2,
        "the two joins and nothing else (no restarted, updated, left, nor a phantom's join); \
         forged: {copied}; events: {evs:#?}"
    );
    for e in &news {
        let who = e["instance"].as_str().unwrap();
        let want = lab.host(if who == "box1" { 1 } else { 2 }).ip.to_string();
        assert!(
            e["node"]["addr"].as_str().unwrap().starts_with(&want),
            "{who} is where it runs: {e}"
        );
    }
    let stopped = Instant::now();
    assert!(box1.signal(Signal::SIGTERM), "box1 signalled");
    let goodbye = left_after(&w, "box1", stopped, GOODBYE_BOUND);
    let crashed = Instant::now();
    box2.kill();
    let crash = left_after(&w, "box2", crashed, CRASH_BOUND);
    std::thread::sleep(SETTLE);
    let l = lefts(&w);
    eprintln!(
        "forged records ({}): real goodbye -> left after {} ms, crash -> left after {} ms; \
         lefts: {l:?}",
        if keyed { "keyed" } else { "no key" },
        goodbye.as_millis(),
        crash.as_millis()
    );
    assert_eq!(
        l.len(),
        2,
        "one left per machine, none for a phantom: {l:?}"
    );
    assert!(goodbye <= GOODBYE_BOUND, "goodbye: left after {goodbye:?}");
    assert!(crash <= CRASH_BOUND, "crash: left after {crash:?}");
}

#[test]
fn forged_records_and_phantom_instances_never_move_or_duplicate_a_live_member_without_a_key() {
    forged_records_move_and_duplicate_nothing(false);
}

#[test]
fn forged_records_and_phantom_instances_never_move_or_duplicate_a_live_member_with_a_key() {
    forged_records_move_and_duplicate_nothing(true);
}

/// Guards against a phantom instance at a member's IPv6 address becoming a
/// member of its own: every answer of an agent carries both its address
/// families (RFC 6762 §6.2), so a stranger can copy the IPv6 one and
/// announce `ghost` there. `watch` dials it and reaches the member itself,
/// which proves its node key with its incarnation: one running agent, so
/// the phantom joins nothing, and the member's crash is one `left`.
#[test]
fn phantoms_forged_at_a_members_ipv6_address_join_nothing_and_leave_nothing() {
    let Some(Scene {
        lab,
        w,
        box1: _box1,
        box2,
        _dir,
    }) = scene_on(false, true)
    else {
        return;
    };
    let coordinator = lab.host(WATCH).ip.to_string();
    let copied = forge_records_at(&lab, "ghost", 3, None, 6);
    forge_records_at(&lab, "ghost", 3, Some(&coordinator), 6);
    assert!(
        copied["copied"]["addr"]
            .as_str()
            .unwrap_or("")
            .contains(':'),
        "an IPv6 address was copied: {copied}"
    );
    std::thread::sleep(SETTLE);
    let evs = events(&w);
    let joins: Vec<&Value> = evs.iter().filter(|e| e["event"] == "joined").collect();
    assert_eq!(
        joins.len(),
        2,
        "box1 and box2 joined, no phantom: forged {copied}; events: {evs:#?}"
    );
    let crashed = Instant::now();
    box2.kill();
    let crash = left_after(&w, "box2", crashed, CRASH_BOUND);
    std::thread::sleep(SETTLE);
    let l = lefts(&w);
    assert!(
        l.len() == 1 && l[0].contains(r#""instance":"box2""#),
        "one left, box2's, none for a phantom: {l:?}"
    );
    assert!(crash <= CRASH_BOUND, "crash: left after {crash:?}");
}
