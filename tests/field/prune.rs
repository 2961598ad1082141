//! **`--prune` cuts only a machine that is really gone** (issue 37 item 11,
//! issue 38 item 8; [`rlx_discover::absence`]): one quiet run is not a
//! retirement. End to end in the namespace lab, six agents written by one
//! `expand --write`, then three of them made unseen in three ways.

use rlx_lab::kit::discover::expand;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UP: Duration = Duration::from_secs(30);

/// An agent for simulated machine `i` on lab host `i`, with its own id.
fn agent(lab: &Lab, i: usize, dir: &Path) -> Proc {
    let caps = dir.join(format!("m{i}.json"));
    std::fs::write(
        &caps,
        format!(
            r#"{{"id":"{i:016x}","hostname":"m{i}","os":"linux","arch":"x86_64","cores":8,
               "ram_total":68719476736,"ram_avail":60000000000,
               "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", &format!("m{i}")])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, i, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// The `missing` entry of the node at `addr`.
fn missing<'a>(out: &'a Value, addr: &str) -> &'a Value {
    out["missing"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["addr"] == addr))
        .unwrap_or_else(|| panic!("{addr} is not reported missing: {out:#}"))
}

/// Guards against pruning a live node: before, a node unheard for one run
/// (here: its mDNS answers dropped, as a neighbour's forged conflict or a
/// late answer does) was cut by `--prune` as long as fewer than half were
/// unseen, and so was a machine merely cut off from the coordinator. Now
/// only the machine whose host answers and whose agent port refuses (its
/// agent stopped) is cut; the others are kept, each with its reason.
#[test]
fn prune_cuts_only_a_node_whose_agent_port_refuses_and_keeps_an_unheard_live_one_and_a_silent_one()
{
    if !peer::require(
        "prune_cuts_only_a_node_whose_agent_port_refuses_and_keeps_an_unheard_live_one_and_a_silent_one",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(7);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(&cfg, "model = \"m\"\n[discover]\nckpt_dir = \"/m\"\n").unwrap();
    let mut agents: Vec<Option<Proc>> = (1..=6).map(|i| Some(agent(&lab, i, dir.path()))).collect();
    let first = expand(&lab, &cfg, &["--write"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let written = std::fs::read_to_string(&cfg).unwrap();
    let addr = |i: usize| format!("{}:9100", lab.host(i).ip);
    for i in 1..=6 {
        assert!(written.contains(&addr(i)), "m{i} written: {written}");
    }

    // m4 lives but is unheard: its mDNS is dropped, its agent port is up.
    lab.nft(
        4,
        "table inet rlx_mute {\n\tchain output { type filter hook output priority 0; policy accept; \
         udp sport 5353 drop; udp dport 5353 drop; }\n}\n",
    )
    .unwrap();
    // m5's agent stopped: its host is up and its agent port refuses.
    let m5 = agents[4].take().unwrap();
    m5.kill();
    drop(m5);
    // m6 is cut off from everyone (off, or a partition: the same here).
    lab.set_loss(6, 100).unwrap();

    let out = expand(&lab, &cfg, &["--write", "--prune"]);
    let removed: Vec<&str> = out.json["file"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        removed,
        [addr(5).as_str()],
        "only m5 is cut: {}",
        out.stderr
    );
    let after = std::fs::read_to_string(&cfg).unwrap();
    assert!(!after.contains(&addr(5)), "{after}");
    for i in [1, 2, 3, 4, 6] {
        assert!(after.contains(&addr(i)), "m{i} stays: {after}");
    }
    let m4 = missing(&out.json, &addr(4));
    assert_eq!(m4["action"], "kept", "{m4:#}");
    let why = m4["kept_because"].as_str().unwrap();
    assert!(why.contains("alive") && why.contains(":6184"), "{why}");
    let m6 = missing(&out.json, &addr(6));
    assert_eq!(m6["action"], "kept", "{m6:#}");
    let why = m6["kept_because"].as_str().unwrap();
    let line = m6["line"].as_u64().unwrap();
    assert!(
        why.contains("did not answer") && why.contains(&format!("line {line}")),
        "{why}"
    );
    assert!(
        out.stderr.contains("early stop disabled"),
        "--prune listens the whole window: {}",
        out.stderr
    );
    drop(agents);
}
