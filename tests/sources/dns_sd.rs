//! Wide-area discovery end to end: a real authoritative DNS server (BIND 9's
//! `named`, started by the test inside a lab namespace, with a dynamic zone
//! and a TSIG key), two subnets joined by a router so that mDNS cannot cross
//! but DNS can, agents registering by TSIG-signed DNS UPDATE, and the
//! coordinator finding them all through the one admission and pipeline.
//!
//! Needs `named` and `tsig-keygen` (Debian: bind9, bind9-utils); nothing
//! here touches the host's /etc/bind or /var/cache/bind: the server's
//! directory, pid file, session key and trust anchors all live in a temp dir.

use rlx_lab::kit::bind::{start_named, Named, UP, ZONE};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, discover_bin, eventually_every, require_lab, Labs, Proc};
use rlx_lab::{Lab, RoutedOptions};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Lease the test agents ask for: short, so that expiry is seen within
/// seconds (the coordinator adds [`rlx_proto::service::CLOCK_SKEW`]).
const LEASE_SECS: u64 = 3;

/// Caps of simulated machine `i`.
fn caps_json(i: usize) -> String {
    format!(
        r#"{{"id":"{i:016x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":{c},
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cuda","name":"gpu {i}","mem_bytes":25769803776}}]}}"#,
        c = 8 + i
    )
}

/// Starts an agent for machine `i` in host `host`, registering with `key`.
fn start_agent(lab: &Lab, host: usize, i: usize, named: &Named, key: &Path, dir: &Path) -> Proc {
    start_agent_ahead(lab, host, i, named, key, dir, 0)
}

/// [`start_agent`] with the agent's wall clock `ahead` seconds fast
/// (libfaketime; its timers, on the monotonic clock, are not).
fn start_agent_ahead(
    lab: &Lab,
    host: usize,
    i: usize,
    named: &Named,
    key: &Path,
    dir: &Path,
    ahead: u64,
) -> Proc {
    let caps = dir.join(format!("box{i}.json"));
    std::fs::write(&caps, caps_json(i)).unwrap();
    let mut cmd = if ahead == 0 {
        Command::new(agent_bin())
    } else {
        let mut c = Command::new("faketime");
        c.args(["-f", &format!("+{ahead}s")])
            .arg(agent_bin())
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        c
    };
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", &format!("box{i}")])
        .args(["--register", &format!("dns://{}/{ZONE}", named.ip)])
        .arg("--tsig-key")
        .arg(key)
        .args(["--lease-secs", &LEASE_SECS.to_string()])
        .env("RUST_LOG", "info");
    Proc::spawn(lab, host, cmd)
}

/// `rlx-discover ARGS --json` in host `host`: the parsed JSON.
fn discover_json(lab: &Lab, host: usize, args: &[&str]) -> Value {
    let out = lab
        .command(host, discover_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "rlx-discover {args:?} printed no JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn browse(lab: &Lab, host: usize, named: &Named, mdns: bool) -> Value {
    let mut args = vec![
        "browse",
        "--json",
        "--domain",
        ZONE,
        "--dns-server",
        &named.ip,
    ];
    if !mdns {
        args.push("--no-mdns");
    }
    discover_json(lab, host, &args)
}

/// host name -> sources of the nodes a browse found.
fn nodes(v: &Value) -> Vec<(String, Vec<String>, String)> {
    let mut n: Vec<(String, Vec<String>, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let sources = n["sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            (
                n["hostname"].as_str().unwrap().to_string(),
                sources,
                n["addr"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    n.sort();
    n
}

/// The DNS attempt's description (`... N instance(s), M queries ...`).
fn dns_attempt(v: &Value) -> String {
    v["report"]["tried"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["source"] == "dns")
        .map(|t| t["what"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no DNS attempt in {v:#}"))
}

fn failed_hosts(v: &Value) -> Vec<String> {
    v["report"]["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}: {}",
                f["host"].as_str().unwrap(),
                f["reason"].as_str().unwrap()
            )
        })
        .collect()
}

/// Subnet 0: h0 named, h1 coordinator, h2 box2. Subnet 1: h3 box3, h4 box4.
fn routed_lab(labs: Labs) -> Lab {
    labs.routed(RoutedOptions {
        subnets: vec![3, 2],
    })
}

#[test]
fn agents_on_both_subnets_register_and_one_browse_finds_lan_and_wide_area_nodes_once_each() {
    if !peer::require(
        "agents_on_both_subnets_register_and_one_browse_finds_lan_and_wide_area_nodes_once_each",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = routed_lab(labs);
    assert_ne!(lab.subnet_of(2), lab.subnet_of(3));
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (2..=4)
        .map(|h| start_agent(&lab, h, h, &named, &named.key, dir.path()))
        .collect();
    for a in &agents {
        a.expect_output("registered in DNS", UP);
        a.expect_output("mDNS: announced on", UP);
    }

    // mDNS alone stops at the router: only box2 is on the coordinator's LAN.
    let lan = discover_json(&lab, 1, &["browse", "--json"]);
    let lan_hosts: Vec<String> = nodes(&lan).into_iter().map(|n| n.0).collect();
    assert_eq!(
        lan_hosts,
        ["box2"],
        "mDNS must not cross the router: {lan:#}"
    );

    // With the domain, all three; box2 seen both ways is one node.
    let v = browse(&lab, 1, &named, true);
    let want = vec![
        (
            "box2".to_string(),
            vec!["mdns".to_string(), "dns".to_string()],
            format!("{}:9100", lab.host(2).ip),
        ),
        (
            "box3".to_string(),
            vec!["dns".to_string()],
            format!("{}:9100", lab.host(3).ip),
        ),
        (
            "box4".to_string(),
            vec!["dns".to_string()],
            format!("{}:9100", lab.host(4).ip),
        ),
    ];
    assert_eq!(nodes(&v), want, "{v:#}");
    assert!(failed_hosts(&v).is_empty(), "{:?}", failed_hosts(&v));
    for n in v["nodes"].as_array().unwrap() {
        assert_eq!(
            n["evidence"], "handshake",
            "caps come from the handshake: {n}"
        );
    }
    // 1 PTR + SRV and TXT per instance (BIND adds the SRV target's A).
    assert!(
        dns_attempt(&v).contains("3 instance(s), 7 queries"),
        "{}",
        dns_attempt(&v)
    );

    // expand with [discover] dns_sd: the same nodes, in the same pipeline.
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "[discover]\nmdns = false\ndns_sd = {{ domain = \"{ZONE}\", server = \"{}:53\" }}\n",
            named.ip
        ),
    )
    .unwrap();
    let e = discover_json(
        &lab,
        1,
        &["expand", "--format", "json", cfg.to_str().unwrap()],
    );
    let mut addrs: Vec<String> = e["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["addr"].as_str().unwrap().to_string())
        .collect();
    addrs.sort();
    let mut want_addrs: Vec<String> = want.iter().map(|w| w.2.clone()).collect();
    want_addrs.sort();
    assert_eq!(addrs, want_addrs, "{e:#}");
    drop(named.proc);
}

/// An update signed with the wrong secret is refused by the server
/// (NOTAUTH, BADSIG); the agent says so in its log and keeps serving.
#[test]
fn an_update_with_a_wrong_tsig_key_is_refused_and_the_agent_reports_it_and_keeps_running() {
    if !peer::require(
        "an_update_with_a_wrong_tsig_key_is_refused_and_the_agent_reports_it_and_keeps_running",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = routed_lab(labs);
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(&named.key).unwrap();
    let start = good.find("secret \"").unwrap() + 8;
    let end = start + good[start..].find('"').unwrap();
    let wrong = format!("{}{}{}", &good[..start], "A".repeat(43) + "=", &good[end..]);
    let bad_key = dir.path().join("wrong.key");
    std::fs::write(&bad_key, wrong).unwrap();
    std::fs::set_permissions(&bad_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let agent = start_agent(&lab, 3, 3, &named, &bad_key, dir.path());
    agent.expect_output("BADSIG", UP);
    let log = agent.stderr();
    assert!(
        log.contains("refused the update") && log.contains("NOTAUTH") && log.contains("--tsig-key"),
        "the refusal must say what to check:\n{log}"
    );
    assert!(
        agent.try_wait().is_none(),
        "a refused update must not stop the agent"
    );
    let v = browse(&lab, 1, &named, false);
    assert!(
        v["nodes"].as_array().unwrap().is_empty(),
        "nothing registered: {v:#}"
    );
    assert!(
        dns_attempt(&v).contains("0 instance(s)"),
        "{}",
        dns_attempt(&v)
    );
}

/// SIGTERM deletes the agent's records at once. A SIGKILLed agent's records
/// stay until its lease runs out, but the handshake keeps it out meanwhile;
/// after the lease the coordinator skips it, and a live agent's sweep
/// deletes its records.
#[test]
fn clean_shutdown_deletes_the_records_and_a_crashed_agents_expire_with_the_lease() {
    if !peer::require(
        "clean_shutdown_deletes_the_records_and_a_crashed_agents_expire_with_the_lease",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = routed_lab(labs);
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    // box4, the sweeper, runs 45 s fast when libfaketime is here: within
    // the server's TSIG fudge (60 s), so its updates are accepted, and it
    // sees box3's lease run out 45 s sooner, which shortens the test by as
    // much. It also shows that a fast clock within the fudge deletes only
    // the crashed agent's records, never a live one's. Without faketime that
    // part says SKIP (a failure under CI) and the rest runs at true time.
    let fast_clock = peer::require(
        "clean_shutdown_deletes_the_records_and_a_crashed_agents_expire_with_the_lease \
         (the sweeper's fast clock)",
        &[Peer::Faketime],
    );
    let ahead = if fast_clock { 45 } else { 0 };
    let agents: Vec<Proc> = (2..=4)
        .map(|h| {
            let fast = if h == 4 { ahead } else { 0 };
            start_agent_ahead(&lab, h, h, &named, &named.key, dir.path(), fast)
        })
        .collect();
    for a in &agents {
        a.expect_output("registered in DNS", UP);
    }
    let v = browse(&lab, 1, &named, false);
    assert_eq!(nodes(&v).len(), 3, "{v:#}");

    // Clean shutdown: deleted before the agent exits.
    assert!(agents[0].signal(nix::sys::signal::Signal::SIGTERM));
    agents[0].expect_exit(Duration::from_secs(10));
    assert!(
        agents[0].stderr().contains("DNS registration deleted"),
        "{}",
        agents[0].stderr()
    );
    let v = browse(&lab, 1, &named, false);
    assert!(
        dns_attempt(&v).contains("2 instance(s)"),
        "box2's records must be gone: {}",
        dns_attempt(&v)
    );

    // Crash: records stay, the handshake refuses the dead node.
    agents[1].kill();
    let v = browse(&lab, 1, &named, false);
    let hosts: Vec<String> = nodes(&v).into_iter().map(|n| n.0).collect();
    assert_eq!(hosts, ["box4"], "{v:#}");
    let failed = failed_hosts(&v);
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with("box3: registered in DNS, but its port is unreachable")),
        "{failed:?}"
    );

    // After the lease (plus the allowed clock skew) the coordinator skips it
    // without dialling, and box4's sweep deletes its records once the lease
    // is over by the sweep's grace (twice the TSIG fudge, for clocks).
    let swept = (Duration::from_secs(LEASE_SECS) + rlx_agent::register::SWEEP_GRACE)
        .saturating_sub(Duration::from_secs(ahead));
    // A browse a check: 200 ms apart, not to load the box for minutes.
    eventually_every(
        Duration::from_millis(200),
        swept + Duration::from_secs(60),
        "box3's records deleted by a sweep",
        || {
            let v = browse(&lab, 1, &named, false);
            let what = dns_attempt(&v);
            let hosts: Vec<String> = nodes(&v).into_iter().map(|n| n.0).collect();
            if hosts != ["box4"] {
                return Err(format!("nodes {hosts:?}"));
            }
            if what.contains("1 instance(s)") {
                return Ok(());
            }
            if what.contains("expired lease") && !failed_hosts(&v).is_empty() {
                return Err(format!(
                    "an expired lease must not be dialled: {:?}",
                    failed_hosts(&v)
                ));
            }
            Err(what)
        },
    );
    assert!(
        agents[2]
            .stderr()
            .contains("deleted an expired DNS registration"),
        "{}",
        agents[2].stderr()
    );
}

/// `watch --domain` follows registrations: a join through the handshake, and
/// a leave when the agent deletes its records on SIGTERM.
#[test]
fn watch_with_a_domain_reports_a_registered_agent_joining_and_leaving() {
    if !peer::require(
        "watch_with_a_domain_reports_a_registered_agent_joining_and_leaving",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = routed_lab(labs);
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(discover_bin());
    cmd.args([
        "watch",
        "--json",
        "--no-mdns",
        "--domain",
        ZONE,
        "--dns-server",
        &named.ip,
    ])
    .args(["--for-ms", "60000"]);
    let watch = Proc::spawn(&lab, 1, cmd);
    let agent = start_agent(&lab, 3, 3, &named, &named.key, dir.path());
    agent.expect_output("registered in DNS", UP);
    watch.expect_output("\"event\":\"joined\",", UP);
    assert!(watch.stdout().contains("box3 (dns)"), "{}", watch.stdout());
    assert!(agent.signal(nix::sys::signal::Signal::SIGTERM));
    watch.expect_output("\"event\":\"left\",", UP);
    let out = watch.stdout();
    let left = out.lines().find(|l| l.contains("\"left\"")).unwrap();
    assert!(
        left.contains("DNS registration missing from the zone")
            || left.contains("health check failed")
            || left.contains("goodbye on its liveness connection"),
        "{left}"
    );
}

/// The `elapsed_ms` of the report's attempt of `source`.
fn attempt_ms(v: &Value, source: &str) -> (u64, String) {
    let t = v["report"]["tried"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["source"] == source)
        .unwrap_or_else(|| panic!("no {source} attempt in {v:#}"));
    (
        t["elapsed_ms"].as_u64().unwrap(),
        t["what"].as_str().unwrap().to_string(),
    )
}

/// Guards against a DNS-SD-only cluster waiting for mDNS (issue: `expand`
/// took 3.0 s with agents on a routed subnet, the mDNS browse hearing
/// nothing and listening its whole window): once `dns_sd` has answered and
/// no mDNS responder has, the browse stops within 0.5 s of the DNS answer,
/// and says why.
#[test]
fn a_cluster_found_only_through_dns_sd_is_not_held_by_an_mdns_browse_that_hears_nothing() {
    if !peer::require(
        "a_cluster_found_only_through_dns_sd_is_not_held_by_an_mdns_browse_that_hears_nothing",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    // Subnet 0: h0 named, h1 box1, h2 box2. Subnet 1: h3 the coordinator,
    // alone: its mDNS browse hears nobody.
    let lab = labs.routed(RoutedOptions {
        subnets: vec![3, 1],
    });
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=2)
        .map(|h| start_agent(&lab, h, h, &named, &named.key, dir.path()))
        .collect();
    for a in &agents {
        a.expect_output("registered in DNS", UP);
    }
    let v = browse(&lab, 3, &named, true);
    let hosts: Vec<String> = nodes(&v).into_iter().map(|n| n.0).collect();
    assert_eq!(hosts, ["box1", "box2"], "{v:#}");
    let (dns_ms, _) = attempt_ms(&v, "dns");
    let (mdns_ms, what) = attempt_ms(&v, "mdns");
    eprintln!("dns_sd answered at {dns_ms} ms; the mDNS browse ended at {mdns_ms} ms: {what}");
    assert!(
        what.contains("no mDNS responder answered, and dns_sd did"),
        "the browse says why it stopped: {what}"
    );
    assert!(
        mdns_ms <= dns_ms.max(500) + 500,
        "the mDNS browse ended {mdns_ms} ms in, the DNS answer came at {dns_ms} ms: {what}"
    );
}
