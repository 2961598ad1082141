//! The agent beside another mDNS responder on the same machine: the Linux
//! analogue of rlx-agent beside mDNSResponder on a Mac (README, "On a Mac").
//! Both bind UDP 5353 with `SO_REUSEPORT`; both must keep working.

use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::discover;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, eventually, require_lab, run_ok, Proc};
use std::process::Command;
use std::time::Duration;

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
