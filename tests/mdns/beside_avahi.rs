//! The agent beside another mDNS responder on the same machine: the Linux
//! analogue of rlx-agent with `responder = "builtin"` beside mDNSResponder on a Mac
//! (docs/protocol.md, "Responders").
//! Both bind UDP 5353 with `SO_REUSEPORT`; both must keep working. And
//! avahi-daemon on a browsing coordinator's machine, or on the LAN, must take
//! nothing the coordinator sends for a bad packet.

use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::discover;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, eventually, require_lab, run_ok, Proc};
use std::process::Command;
use std::time::Duration;

/// What avahi-daemon logs when it takes a packet for a bad one ("Invalid
/// legacy unicast query packet.", "Received invalid packet.", "... with
/// invalid source port ...", "Packet too short or invalid ...") or refuses
/// one; matched without regard to case.
const AVAHI_COMPLAINTS: [&str; 6] = ["invalid", "warn", "fail", "refus", "too short", "ignor"];

/// The lines of `log` with any of [`AVAHI_COMPLAINTS`], from its startup on
/// (before it, avahi warns about its own set-up: no nss-mdns, and the like).
fn complaints(log: &str) -> Vec<String> {
    log.lines()
        .skip_while(|l| !l.contains("Server startup complete"))
        .filter(|l| {
            let l = l.to_lowercase();
            AVAHI_COMPLAINTS.iter().any(|w| l.contains(w))
        })
        .map(str::to_string)
        .collect()
}

/// How long a responder may take to come up on a loaded 2-core box.
const READY: Duration = Duration::from_secs(20);

/// avahi-daemon and rlx-agent run in the same network namespace, both on
/// UDP 5353: a coordinator on the LAN still finds the agent, avahi (asked
/// through `avahi-browse` on the agent's own machine) resolves the agent's
/// `_rlx._tcp` service while it keeps publishing one of its own: neither
/// responder took the port from the other.
#[test]
fn an_agent_beside_avahi_daemon_is_found_and_avahi_keeps_working_on_the_same_machine() {
    let test = "an_agent_beside_avahi_daemon_is_found_and_avahi_keeps_working_on_the_same_machine";
    if !peer::require(test, &[Peer::Avahi]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let avahi = Avahi::start(&lab, 1, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let publish = avahi
        .publish(&lab, &["webbox", "_http._tcp", "8080"])
        .unwrap_or_else(|e| panic!("{e}"));

    let mut agent = Command::new(agent_bin());
    agent
        .args(["--no-bench", "--name", "box1"])
        .env("RUST_LOG", "info");
    let agent = Proc::spawn(&lab, 1, agent);
    agent.expect_output("mDNS: announced on", READY);

    // The coordinator, on another machine of the LAN, finds the agent.
    eventually(READY, "the agent found from host 0", || {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "1000"]);
        if discover::sightings_by_host(&v).contains_key("box1") {
            Ok(())
        } else {
            Err(format!("{v:#}"))
        }
    });

    // avahi on the agent's machine hears the agent and resolves it.
    eventually(READY, "avahi-browse resolving the agent beside it", || {
        let out = run_ok(
            avahi
                .client(&lab, "avahi-browse")
                .args(["-rpt", "_rlx._tcp"]),
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let resolved = text
            .lines()
            .any(|l| l.starts_with("=;") && l.contains(";box1;") && l.contains(";9100;"));
        if resolved {
            Ok(())
        } else {
            Err(text)
        }
    });

    drop(publish);
    drop(agent);
}

/// Guards against the browser's packets being bad ones to avahi (every avahi
/// host logged "Invalid legacy unicast query packet" when the legacy
/// queries carried known answers): avahi-daemon on the coordinator's own
/// machine and on another host of the LAN hear browses and an `expand` of
/// two agents, and log no complaint, while the agents are all found.
#[test]
fn avahi_daemon_beside_a_browsing_coordinator_and_on_the_lan_logs_no_complaint() {
    let test = "avahi_daemon_beside_a_browsing_coordinator_and_on_the_lan_logs_no_complaint";
    if !peer::require(test, &[Peer::Avahi]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let beside = Avahi::start(&lab, 0, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let on_lan = Avahi::start(&lab, 3, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let agents: Vec<Proc> = [1, 2]
        .iter()
        .map(|&i| {
            let mut c = Command::new(agent_bin());
            c.args(["--no-bench", "--name", &format!("box{i}")])
                .env("RUST_LOG", "info");
            let p = Proc::spawn(&lab, i, c);
            p.expect_output("mDNS: announced on", READY);
            p
        })
        .collect();
    for _ in 0..3 {
        let v = discover::browse_once(&lab, 0, &["--browse-ms", "1500"]);
        let found = discover::sightings_by_host(&v);
        assert!(
            found.contains_key("box1") && found.contains_key("box2"),
            "{v:#}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\n").unwrap();
    let e = discover::expand(&lab, &cfg, &[]);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    // avahi logs a bad packet as it reads it; give it a moment.
    std::thread::sleep(Duration::from_millis(500));
    for (where_, avahi) in [("beside the coordinator", &beside), ("on the LAN", &on_lan)] {
        let log = avahi.log();
        assert!(log.contains("Server startup complete"), "{log}");
        let bad = complaints(&log);
        assert!(
            bad.is_empty(),
            "avahi-daemon {where_} complained: {bad:#?}\n{log}"
        );
    }
    drop(agents);
}

#[test]
fn avahis_complaints_are_told_from_its_ordinary_lines() {
    let log = "WARNING: No NSS support for mDNS detected, consider installing nss-mdns!\n\
               Server startup complete. Host name is h0.local. Local service cookie is 1.\n\
               Joining mDNS multicast group on interface eth0.IPv4 with address 10.1.0.1.\n\
               Invalid legacy unicast query packet.\n\
               Received response from host 10.1.0.9 with invalid source port 40000 on interface 'eth0.0'";
    assert_eq!(complaints(log).len(), 2);
}
