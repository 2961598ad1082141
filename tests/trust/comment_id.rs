//! **A host name cannot lend a node another machine's id** (issue 37, item
//! 6; docs/security.md, "Untrusted text in human output"): a stranger in a
//! keyless cluster answers the handshake with no node id and the host name
//! `id:<x's id>`. `expand --write` appends it with a `# found by` comment,
//! and that comment is read back on every later run for the node's id.
//! Before the fix the name was written unquoted (its characters are those
//! of a plain host name) and read back as the id, so when the real machine
//! x came up at another address, the next `expand --write` "moved" the
//! stranger's node onto it. Now a name that reads as an id is quoted, and
//! x is added as the new machine it is.
//!
//! Found by a subnet scan of the lab (mDNS off); the stranger is the
//! handshake responder of [`crate::downgrade`]. Everything runs inside
//! namespaces built by [`rlx_lab`].

use crate::downgrade::responder;
use rlx_lab::kit::discover::expand;
use rlx_lab::kit::{agent_bin, require_lab, Proc};
use std::process::Command;
use std::time::Duration;

const X_ID: &str = "c0ffee0000000001";

#[test]
fn a_strangers_host_name_naming_an_id_never_moves_its_node_onto_that_machine() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "model = \"m\"\n[discover]\nckpt_dir = \"/m\"\nsubnet = \"{}\"\nmdns = false\n",
            lab.hosts_block()
        ),
    )
    .unwrap();
    let stranger_caps = format!(
        r#"{{"id":"","hostname":"id:{X_ID}","os":"linux","arch":"x86_64","cores":4,
           "ram_total":8589934592,"devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    );
    let stranger = responder(&lab, 2, None, &stranger_caps);
    let first = expand(&lab, &cfg, &["--write"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    drop(stranger);
    let written = std::fs::read_to_string(&cfg).unwrap();
    let stranger_addr = format!("{}:9100", lab.host(2).ip);
    assert!(written.contains(&stranger_addr), "{written}");
    assert!(
        written.contains(&format!("\"id:{X_ID}\"")),
        "the name is quoted: {written}"
    );

    // The real x comes up at another address.
    let mut cmd = Command::new(agent_bin());
    cmd.args(["--name", "x-host", "--node-id", X_ID])
        .arg("--state-dir")
        .arg(dir.path().join("x-state"))
        .env("RUST_LOG", "info");
    let x = Proc::spawn(&lab, 1, cmd);
    x.expect_output("mDNS: announced on", Duration::from_secs(30));
    let second = expand(&lab, &cfg, &["--write"]);
    let report = &second.json["report"];
    assert!(
        report["moved"].as_array().is_none_or(|m| m.is_empty()),
        "the stranger's node is not moved onto x: {report:#}"
    );
    let now = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        now.contains(&stranger_addr),
        "the stranger's node keeps its address: {now}"
    );
    assert!(
        now.contains(&format!("{}:9100", lab.host(1).ip)),
        "x is added as its own node: {now}"
    );
}
