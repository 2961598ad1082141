//! **One id, two endpoints**: two real `rlx-agent`s on two hosts of a
//! namespace LAN hold the same cluster key and are given the same
//! `--node-id` and the same caps (the host name included), as a member
//! posing as another member would. The coordinator must not merge them into
//! one node whose address depends on who answered first: the report names
//! the clash and both addresses, neither is added, and `expand` exits 1;
//! with one of them already in the file, that one keeps its address and
//! the other is refused.
//!
//! Everything runs inside namespaces built by [`rlx_lab`]; the tests skip
//! (or fail under `CI=true`) where no lab can be built.

use rlx_lab::kit::{self, discover};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce (mDNS probing takes about
/// 0.75 s; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(30);

const PORT: u16 = 9100;

/// The id both agents claim.
const ID: &str = "c1a5000000000001";

/// The caps both agents announce: one box, copied.
fn caps() -> String {
    format!(
        r#"{{"id":"{ID}","hostname":"box1","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}},
                      {{"device":"cuda","name":"gpu","mem_bytes":8589934592}}]}}"#
    )
}

/// A keyed agent on `host` claiming [`ID`], announcing as `name`.
fn agent(lab: &Lab, host: usize, name: &str, key: &Path, dir: &Path) -> Proc {
    let caps_file = dir.join(format!("{name}.json"));
    std::fs::write(&caps_file, caps()).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", name, "--node-id", ID])
        .arg("--key-file")
        .arg(key)
        .env("RUST_LOG", "debug");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// [`kit::expand`], as (exit code, JSON, stderr).
fn expand(lab: &Lab, cfg: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let e = discover::expand(lab, cfg, extra);
    (e.code, e.json, e.stderr)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Guards against one id at two endpoints merged in silence (docs/security.md,
/// "Same id at two endpoints"): two authenticated agents with one id, one port
/// and one host name at two addresses were coalesced silently, and the node got
/// the address of whichever answered first. Then, with one of them in the file,
/// the other must be refused rather than folded in or added.
#[test]
fn two_keyed_agents_claiming_one_id_are_a_reported_clash_and_the_one_in_the_file_keeps_its_address()
{
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    kit::run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    // One after the other, so the second agent's mDNS probing meets the
    // first's records and renames itself rather than both answering for
    // one name.
    let _a = agent(&lab, 1, "box1", &key, d);
    let _b = agent(&lab, 2, "box1", &key, d);
    let (ip1, ip2) = (lab.host(1).ip, lab.host(2).ip);
    let (addr1, addr2) = (format!("{ip1}:{PORT}"), format!("{ip2}:{PORT}"));

    // Neither is in the file: both refused, the clash names both.
    let cfg = d.join("cluster.toml");
    let discover = format!("[discover]\nkey_file = {:?}\n", key.display().to_string());
    std::fs::write(&cfg, &discover).unwrap();
    let (code, v, stderr) = expand(&lab, &cfg, &[]);
    let report = &v["report"];
    assert_eq!(code, Some(1), "a clash is a failure: {v:#}\n{stderr}");
    assert_eq!(report["added"], serde_json::json!([]), "{v:#}");
    let clashes = report["clashes"].as_array().unwrap();
    assert_eq!(clashes.len(), 1, "{v:#}");
    let c = &clashes[0];
    assert_eq!(c["id"], ID);
    assert_eq!(c["authenticated"], true);
    let mut addrs = strings(&c["addrs"]);
    addrs.sort();
    assert_eq!(addrs, vec![addr1.clone(), addr2.clone()], "{v:#}");
    assert_eq!(strings(&c["kept"]), Vec::<String>::new());
    assert_eq!(report["failed"].as_array().unwrap().len(), 2, "{v:#}");
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("node id {ID} is claimed by")))
        .unwrap_or_else(|| panic!("no clash line:\n{stderr}"));
    assert!(line.contains(&addr1) && line.contains(&addr2), "{line}");

    // box1's address is in the file: it keeps it, the claimant is refused.
    let pinned = format!("{discover}\n[[node]]\naddr = \"{addr1}\"\nckpt_dir = \"/m\"\n");
    std::fs::write(&cfg, &pinned).unwrap();
    let (code, v, stderr) = expand(&lab, &cfg, &["--write"]);
    let report = &v["report"];
    assert_eq!(code, Some(1), "the refusal is a failure: {v:#}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        pinned,
        "nothing appended, the file's node untouched: {v:#}"
    );
    let c = &report["clashes"][0];
    assert_eq!(strings(&c["kept"]), vec![addr1.clone()], "{v:#}");
    assert_eq!(strings(&c["refused"]), vec![addr2.clone()], "{v:#}");
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{v:#}");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&addr2) && reason.contains(&addr1) && reason.contains(ID),
        "{reason}"
    );
    assert_eq!(report["duplicates"][0]["same_as"], addr1.as_str(), "{v:#}");
}
