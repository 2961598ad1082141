//! **The system responder** (`responder = "system"`): the agent hands its
//! service to the box's own mDNS responder through the DNS-SD client API
//! instead of answering on UDP 5353 itself. On a Mac that is mDNSResponder;
//! here it is avahi-daemon through avahi's `libdns_sd.so.1`, the same API,
//! so the backend's calls (register, TXT update, deallocate) run for real.

use super::announce::{
    announcer, caps, fullname, resolved_as, sigterm_and_wait_for_removal, update_to_a_second_gpu,
    write_caps, INTERVAL_ENV, RESPONDER_ENV, SEEN_WITHIN,
};
use rlx_lab::kit::avahi::{Avahi, AvahiOptions};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::zeroconf::{monotonic, Browser};
use rlx_lab::kit::{require_lab, run_ok, Proc};
use rlx_proto::txt;
use std::process::Command;
use std::time::Duration;

/// The UDP sockets on port 5353 in host `i`, with their owners (`ss -uanp`).
fn mdns_sockets(lab: &rlx_lab::Lab, i: usize) -> String {
    let out = run_ok(lab.command(i, "ss").args(["-uanp", "sport = :5353"]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn through_avahi_daemon_the_agent_is_announced_updated_and_withdrawn_without_a_socket_of_its_own() {
    let test = "through_avahi_daemon_the_agent_is_announced_updated_and_withdrawn_without_a_socket_of_its_own";
    if !peer::require(test, &[Peer::Avahi, Peer::AvahiDnsSd, Peer::PythonZeroconf]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let avahi = Avahi::start(&lab, 1, &AvahiOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let caps = caps();
    let file = write_caps(&lab, "caps.json", &caps);
    let browser = Browser::start(&lab, 0);
    let mut cmd = announcer(&file, Some("sysbox"), &[]);
    cmd.env(INTERVAL_ENV, "0")
        .env(RESPONDER_ENV, "system")
        .env("DBUS_SYSTEM_BUS_ADDRESS", avahi.bus());
    let t0 = monotonic();
    let agent = Proc::spawn(&lab, 1, cmd);
    agent.expect_output("HELPER-STARTED", SEEN_WITHIN);

    // Seen from another machine with exactly the TXT record the built-in
    // responder would send, at the worker port, at the box's address.
    let name = fullname("sysbox");
    let seen = browser.wait_for(
        SEEN_WITHIN,
        "the node announced by avahi",
        resolved_as(&name),
    );
    println!(
        "MEASURED: start -> seen through avahi-daemon: {:.0} ms",
        (seen.t() - t0) * 1000.0
    );
    let expected = txt::to_strings(&txt::encode(&caps).expect("test caps encode"));
    assert_eq!(
        seen.txt(),
        expected,
        "the TXT record is txt::encode's, in order"
    );
    assert_eq!(seen.port(), 9177, "the SRV port asked for");
    assert!(
        seen.server().ends_with(".local.") && !seen.server().starts_with("itest-host-5f0c1d"),
        "the SRV target is the system's host name, not the agent's own: {}",
        seen.server()
    );
    let ip = lab.host(1).ip.to_string();
    assert!(seen.addrs().contains(&ip), "{ip} in {:?}", seen.addrs());
    agent.expect_output("announced through avahi-daemon", SEEN_WITHIN);

    // One responder on the box: avahi holds 5353, the agent nothing.
    let sockets = mdns_sockets(&lab, 1);
    assert!(
        sockets.contains("avahi-daemon") && !sockets.contains(&format!("pid={},", agent.pid())),
        "only avahi-daemon on UDP 5353:\n{sockets}"
    );

    // A material change goes out as a TXT update (DNSServiceUpdateRecord).
    update_to_a_second_gpu(&lab, &agent, &browser, &name);
    assert!(
        !browser.saw(|e| e.kind() == "removed"),
        "an update must not look like a leave"
    );

    // SIGTERM: deallocating the registration makes avahi say goodbye.
    sigterm_and_wait_for_removal(&browser, &agent, &name);
    let status = agent
        .wait_timeout(Duration::from_secs(5))
        .expect("the helper exits");
    assert!(status.success(), "{status}\n{}", agent.stderr());
}

#[test]
fn asking_for_the_system_responder_without_one_running_fails_naming_the_daemon() {
    let test = "asking_for_the_system_responder_without_one_running_fails_naming_the_daemon";
    if !peer::require(test, &[Peer::AvahiDnsSd]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(1);
    let file = write_caps(&lab, "caps.json", &caps());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rlx-agent"));
    cmd.arg("--caps-file")
        .arg(&file)
        .args(["--responder", "system", "--port", "9178"])
        // A bus nobody listens on: no avahi-daemon to reach.
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .env("RUST_LOG", "info");
    let agent = Proc::spawn(&lab, 0, cmd);
    let status = agent
        .wait_timeout(Duration::from_secs(10))
        .expect("the agent gives up at once");
    let err = agent.stderr();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("avahi-daemon") && err.contains("builtin"),
        "the error names the daemon and the way out:\n{err}"
    );
    assert!(
        !err.contains("announced on"),
        "no fallback to the built-in responder when `system` is asked:\n{err}"
    );
}
