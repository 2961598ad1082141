//! **A TXT update never silences the agent** (RFC 6762 §8.4): while the
//! announcer changes its TXT record every 1.5 s, a one-shot querier asking
//! for the SRV and TXT records every 100 ms gets an answer to every round,
//! never a gap longer than a normal answer time allows, and sees the new
//! TXT values.
//!
//! The announcer is this test binary re-run inside a loopback lab with
//! `RLX_STATE_HELPER=1` ([`helper_updating_announcer`]); the querier is
//! `lab/py/mdns_raw.py ask` (python-zeroconf's wire codec).

use rlx_agent::announce::{AnnounceOptions, Announcer, Update};
use rlx_agent::shutdown::Shutdown;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{require_lab, rerun, script, Proc, PYTHON};
use rlx_proto::caps::NodeCaps;
use serde_json::Value;
use std::time::Duration;

const GIB: u64 = 1 << 30;
const HELPER_ENV: &str = "RLX_STATE_HELPER";
/// How often the helper changes its TXT record.
const UPDATE_EVERY: Duration = Duration::from_millis(1500);
/// The longest wait for a reply the test accepts. Replies take a few ms; a
/// re-probe kept the service silent for 0.75-1 s (mdns-sd 0.21.7).
const MAX_GAP_S: f64 = 0.5;

/// The caps announced in `round`: free RAM swings by most of total RAM, a
/// material change ([`rlx_agent::change::material_change`]), to a value no
/// earlier round announced (a TXT seen before would not be probed again).
fn caps(round: u64) -> NodeCaps {
    NodeCaps {
        id: "b2c3d4e5f6071829".into(),
        hostname: "upd".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cores: 8,
        ram_total: 1024 * GIB,
        ram_avail: if round % 2 == 0 {
            900 - round
        } else {
            100 + round
        } * GIB,
        ..NodeCaps::default()
    }
}

/// Not a test on its own: does nothing unless `RLX_STATE_HELPER=1`. Then it
/// announces `upd` on `lo` and changes its caps every [`UPDATE_EVERY`],
/// printing `HELPER-UPDATE <round> <outcome>`, until SIGTERM.
#[test]
fn helper_updating_announcer() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let stop = Shutdown::on_signals().expect("signal handlers");
        let opts = AnnounceOptions {
            name: Some("upd".into()),
            port: 9178,
            interfaces: vec!["lo".into()],
            min_interval: Duration::ZERO,
            ..AnnounceOptions::default()
        };
        let announcer = Announcer::start(&caps(0), opts).expect("announcer");
        eprintln!("HELPER-STARTED");
        let mut tick = tokio::time::interval(UPDATE_EVERY);
        tick.tick().await;
        for round in 1.. {
            tokio::select! {
                _ = stop.wait() => break,
                _ = tick.tick() => {
                    let outcome = announcer.update(&caps(round));
                    assert!(matches!(outcome, Ok(Update::Announced(_))), "{outcome:?}");
                    eprintln!("HELPER-UPDATE {round}");
                }
            }
        }
        announcer.shutdown().await.expect("goodbye");
    });
}

/// Guards against a TXT update re-probing the service, which left PTR, SRV,
/// TXT and A unanswered for about a second after every update: no reply
/// gap over [`MAX_GAP_S`] while the TXT changes.
#[test]
fn a_txt_update_during_a_browse_leaves_no_gap_in_the_answers() {
    if !peer::require(
        "a_txt_update_during_a_browse_leaves_no_gap_in_the_answers",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.loopback();
    let mut helper = rerun(module_path!(), "helper_updating_announcer");
    helper
        .env(HELPER_ENV, "1")
        .env("RUST_LOG", "info,mdns_sd=warn");
    let helper = Proc::spawn(&lab, 0, helper);
    helper.expect_output("HELPER-STARTED", Duration::from_secs(30));
    // Past the start-up probing, which is silent by design (RFC 6762 §8.1).
    helper.expect_output("HELPER-UPDATE 1", Duration::from_secs(30));

    let name = "upd._rlx._tcp.local.";
    let out = lab
        .command(0, PYTHON)
        .arg(script("mdns_raw.py"))
        .args(["ask", "127.0.0.1", name, "8", "100"])
        .output()
        .expect("run mdns_raw.py");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let replies: Vec<&Value> = lines.iter().filter(|l| l.get("srv").is_some()).collect();
    // From the first query to the last reply to the end: a silence at
    // either end counts too.
    let times: Vec<f64> = lines
        .iter()
        .filter(|l| l.get("srv").is_some() || l.get("started").is_some() || l.get("done").is_some())
        .map(|r| r["t"].as_f64().unwrap())
        .collect();
    let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    let ramfree: std::collections::BTreeSet<String> = replies
        .iter()
        .filter_map(|r| r["txt"].as_array())
        .flat_map(|t| t.iter().filter_map(|s| s.as_str()))
        .filter(|s| s.starts_with("ramfree="))
        .map(str::to_string)
        .collect();
    println!(
        "MEASURED: {} replies in 8 s across updates, longest gap {:.0} ms, TXT values {ramfree:?}",
        replies.len(),
        gap * 1000.0
    );
    assert!(
        gap < MAX_GAP_S,
        "a {:.0} ms gap in the answers during TXT updates",
        gap * 1000.0
    );
    assert!(
        replies.len() > 60,
        "about 80 queries in 8 s, {} replies\n{}",
        replies.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        ramfree.len() >= 3,
        "the TXT changed during the run: {ramfree:?}"
    );
    helper.signal(nix::sys::signal::Signal::SIGTERM);
}
