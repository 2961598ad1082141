//! **An IPv6-only LAN under loss loses no machine at the handshake**: the
//! coordinator helps its kernel's neighbour discovery for handshake
//! targets the way it helps ARP on IPv4 ([`rlx_net::neighbour`],
//! [`rlx_net::neighbour6`]). End to end in a namespace lab: real agents,
//! IPv4 removed from every host, random loss on the coordinator's link
//! (nftables), cold neighbour caches before every run.

use rlx_lab::kit::discover::{expand, refusals};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, require_lab, run_ok, Proc};
use rlx_lab::{Lab, LabOptions};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce (mdns-sd probes its name for
/// about 0.75 s first; a loaded 2-core box with 20 agents is slower).
const UP: Duration = Duration::from_secs(60);

/// Caps of simulated machine `i`.
fn caps_json(i: usize) -> String {
    format!(
        r#"{{"id":"{i:016x}","hostname":"six{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    )
}

/// Starts an agent for simulated machine `i` on lab host `i`.
fn start_agent(lab: &Lab, i: usize, dir: &Path) -> Proc {
    let caps = dir.join(format!("six{i}.json"));
    std::fs::write(&caps, caps_json(i)).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", &format!("six{i}")])
        .env("RUST_LOG", "info");
    Proc::spawn(lab, i, cmd)
}

/// Guards against IPv6 handshakes going without neighbour help: at 20% loss
/// each way a lost Neighbor Solicitation or Advertisement cost the kernel's
/// one-second retransmit, the 1.5 s connect budget ran out, and agents mDNS had
/// heard were refused with "cannot connect: no answer within 1500 ms" (measured
/// before the fix: 1, 1, 2, 3 and 1 of the 20 refused in the five runs). Now
/// every agent is admitted in each of 5 runs. The handshake's own retries count
/// here too: with four attempts 250 ms apart, one CI run refused one agent of
/// the hundred (all its SYN exchanges lost); five 200 ms apart make that about
/// ten times rarer ([`rlx_discover`]'s `admit::ATTEMPTS`).
///
/// The browse listens its whole window here (`early_stop = false`): what is
/// under test is the handshake of every agent mDNS heard. With the early
/// stop on, its loss estimate accepts a 1% chance per run of leaving an
/// unheard agent out (`STOP_RISK`, said in the report), which over five runs
/// made this test fail about one CI run in twenty for a reason it does not
/// test (run 3 of one CI run: 18 of 20 heard, none refused); the browse's own
/// tests hold that promise.
#[test]
fn on_an_ipv6_only_lan_at_twenty_percent_loss_every_agent_heard_is_admitted_five_runs_of_five() {
    let _alone = crate::alone();
    if !peer::require(
        "on_an_ipv6_only_lan_at_twenty_percent_loss_every_agent_heard_is_admitted_five_runs_of_five",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let n = 20;
    let lab = labs.with(LabOptions {
        hosts: n + 1,
        ipv6: true,
    });
    for i in 0..=n {
        lab.exec(i, "ip", &["-4", "addr", "flush", "dev", "eth0"])
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let agents: Vec<Proc> = (1..=n).map(|i| start_agent(&lab, i, dir.path())).collect();
    for a in &agents {
        a.expect_output("mDNS: announced on", UP);
    }
    let want: BTreeSet<String> = (1..=n)
        .map(|i| format!("[{}]:9100", lab.host(i).ipv6.expect("lab host with IPv6")))
        .collect();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "[discover]\nearly_stop = false\n").unwrap();
    lab.set_loss(0, 20).unwrap();
    let mut missed = Vec::new();
    for run in 0..5 {
        for h in lab.hosts() {
            run_ok(Command::new("ip").args(["-n", &h.ns, "neigh", "flush", "all"]));
        }
        let out = expand(&lab, &cfg, &[]);
        let got: BTreeSet<String> = out.json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["addr"].as_str().unwrap().to_string())
            .collect();
        let refused = refusals(&out.json);
        let lost: Vec<&String> = want.difference(&got).collect();
        eprintln!(
            "run {run}: {} of {n} admitted, {} refused: {refused:?}",
            got.intersection(&want).count(),
            refused.len()
        );
        if !lost.is_empty() || !refused.is_empty() {
            missed.push(format!("run {run}: lost {lost:?}, refused {refused:?}"));
        }
    }
    assert!(
        missed.is_empty(),
        "agents lost on an IPv6-only LAN at 20% loss:\n{}",
        missed.join("\n")
    );
}
