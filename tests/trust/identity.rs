//! **A member cannot pose as another member** (per-node identity:
//! docs/security.md, "Who is who: node keys and pins"): member x is written by
//! `expand --write`, x stops, and member y, which holds the cluster key, starts
//! at its own address with x's node id and caps (given through `--caps-file`),
//! under x's instance name, but with its own state directory and so its own
//! node key. Before node keys the next `expand --write` reported `moved` and
//! rewrote x's node to y's address. Now the coordinator pinned x's node key on
//! first sight, so y's claim is refused, naming the id, both fingerprints and
//! the command that re-pins it; x's node is not rewritten. After `rlx-discover
//! pins forget` (what a real reinstall of x calls for) the next run pins y's
//! key and the node moves.
//!
//! Everything runs inside namespaces built by [`rlx_lab`]; the test skips
//! (or fails under `CI=true`) where no lab can be built.

use rlx_lab::kit::discover::expand;
use rlx_lab::kit::{agent_bin, discover_bin, eventually, require_lab, run_ok, Proc};
use rlx_lab::Lab;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent may take to announce (mDNS probing takes about
/// 0.75 s; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(30);

const PORT: u16 = 9100;

/// x's node id, which y claims.
const X_ID: &str = "1de0000000000001";

/// The caps of a simulated CPU machine `x-host` with node id `id` (x's,
/// which y is given as its own; the downgrade tests' claimant's too).
pub(crate) fn caps_of(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","hostname":"x-host","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}}]}}"#
    )
}

/// x's caps.
fn x_caps() -> String {
    caps_of(X_ID)
}

/// A keyed agent on `host` with node id `id` and the caps in `caps`,
/// announcing as `x-host`, keeping its node key in `state`; started and
/// announced.
pub(crate) fn keyed_agent(
    lab: &Lab,
    host: usize,
    id: &str,
    key: &Path,
    caps: &Path,
    state: &Path,
) -> Proc {
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(caps)
        .args(["--name", "x-host", "--node-id", id])
        .arg("--key-file")
        .arg(key)
        .arg("--state-dir")
        .arg(state)
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// A keyed agent on `host` with x's id and caps.
fn agent(lab: &Lab, host: usize, key: &Path, caps: &Path, state: &Path) -> Proc {
    keyed_agent(lab, host, X_ID, key, caps, state)
}

/// The fingerprint an agent logged for its node key.
fn fingerprint(p: &Proc) -> String {
    let out = p.0.stderr() + &p.0.stdout();
    let at = out
        .find("SHA256:")
        .unwrap_or_else(|| panic!("no node key fingerprint logged:\n{out}"));
    out[at..]
        .split(|c: char| c.is_whitespace() || c == '"')
        .next()
        .unwrap()
        .to_string()
}

/// Guards against what the shared key alone could not stop: a member
/// holding it that claimed a stopped member's id and caps was taken for
/// it, and `expand --write` moved that member's node to the claimant's
/// address.
#[test]
fn a_member_claiming_a_stopped_members_id_is_refused_until_its_pin_is_forgotten() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    let caps = d.join("x.json");
    std::fs::write(&caps, x_caps()).unwrap();
    let (x_state, y_state) = (d.join("x-state"), d.join("y-state"));
    let cfg = d.join("cluster.toml");
    let hand = format!(
        "[discover]\nkey_file = {:?}\nckpt_dir = \"/m\"\n",
        key.display().to_string()
    );
    std::fs::write(&cfg, &hand).unwrap();
    let (x_addr, y_addr) = (
        format!("{}:{PORT}", lab.host(1).ip),
        format!("{}:{PORT}", lab.host(2).ip),
    );

    // x joins, and its node key is pinned beside the cluster file.
    let x = agent(&lab, 1, &key, &caps, &x_state);
    let x_fp = fingerprint(&x);
    let pins = d.join("cluster.pins");
    let dry = expand(&lab, &cfg, &["--dry-run"]);
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert!(
        !pins.exists(),
        "a dry run changes nothing, the pins included"
    );
    let first = expand(&lab, &cfg, &["--write"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let written = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        written.contains(&format!("addr = \"{x_addr}\"")),
        "{written}"
    );
    assert_eq!(
        first.json["report"]["added"][0]["identity"], "new",
        "{:#}",
        first.json
    );
    assert_eq!(first.json["report"]["added"][0]["node_key"], x_fp.as_str());
    let pinned = std::fs::read_to_string(&pins).unwrap();
    assert!(pinned.contains(&format!("{X_ID} ed25519 ")), "{pinned}");

    // x stops; y, a member with the cluster key, claims x's id and caps.
    x.kill();
    drop(x);
    let y = agent(&lab, 2, &key, &caps, &y_state);
    let y_fp = fingerprint(&y);
    assert_ne!(x_fp, y_fp, "y has its own node key");

    let claim = expand(&lab, &cfg, &["--write"]);
    assert_eq!(
        claim.code,
        Some(1),
        "a refused claim on a node of the file fails the run: {}",
        claim.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        written,
        "x's node is not rewritten to y's address: {}",
        claim.stderr
    );
    let report = &claim.json["report"];
    assert!(
        report["moved"].as_array().is_none_or(|m| m.is_empty()),
        "{report:#}"
    );
    let refusal = report["failed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pin_clash"].is_object())
        .unwrap_or_else(|| panic!("no pin refusal: {report:#}"));
    assert_eq!(refusal["id"], X_ID);
    assert_eq!(refusal["pin_clash"]["pinned"], x_fp.as_str());
    assert_eq!(refusal["pin_clash"]["shown"], y_fp.as_str());
    let reason = refusal["reason"].as_str().unwrap();
    let fix = format!("rlx-discover pins forget {X_ID}");
    for needle in [X_ID, &x_fp, &y_fp, &fix] {
        assert!(reason.contains(needle), "{needle} in {reason}");
    }
    assert!(
        claim.stderr.contains(&y_fp),
        "the report names it: {}",
        claim.stderr
    );

    // A real reinstall: the pin is forgotten, the next run pins the key.
    let forgot = Command::new(discover_bin())
        .args(["pins", "forget", X_ID, "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(forgot.status.success(), "{forgot:?}");
    let again = expand(&lab, &cfg, &["--write"]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    let after = std::fs::read_to_string(&cfg).unwrap();
    assert_eq!(
        after,
        written.replace(&x_addr, &y_addr).replace(
            &format!("ssh = \"{}\"", ip_of(&x_addr)),
            &format!("ssh = \"{}\"", ip_of(&y_addr))
        ),
        "the claim now moves the node, and its ssh written from the address follows it: {}",
        again.stderr
    );
    assert_eq!(
        again.json["report"]["moved"][0]["rewritten"], true,
        "{:#}",
        again.json
    );
    let pin_line = |text: &str| {
        let l = text
            .lines()
            .find(|l| l.starts_with(X_ID))
            .unwrap_or_default();
        l.split(" # ").next().unwrap().to_string()
    };
    let now = std::fs::read_to_string(&pins).unwrap();
    assert!(!pin_line(&now).is_empty(), "y's key is pinned: {now}");
    assert_ne!(
        pin_line(&now),
        pin_line(&pinned),
        "to y's key, not x's: {now}"
    );
    drop(y);
}

/// The events `watch --json` printed so far.
fn watch_events(w: &Proc) -> Vec<serde_json::Value> {
    w.0.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The same attack against a live keyed `watch` without a cluster file:
/// its pins are kept in memory for its lifetime, so once x was seen, y
/// claiming x's id after x crashed is refused (a `refused` event naming
/// both fingerprints), never `joined` as x.
#[test]
fn watch_refuses_a_member_claiming_a_crashed_members_id_with_another_node_key() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    let caps = d.join("x.json");
    std::fs::write(&caps, x_caps()).unwrap();
    let mut cmd = Command::new(discover_bin());
    cmd.args(["watch", "--json", "--interface", "eth0", "--key-file"])
        .arg(&key)
        .env("RUST_LOG", "warn,rlx_discover::admit=info");
    let w = Proc::spawn(&lab, 0, cmd);
    let (x_addr, y_addr) = (
        format!("{}:{PORT}", lab.host(1).ip),
        format!("{}:{PORT}", lab.host(2).ip),
    );
    let x = agent(&lab, 1, &key, &caps, &d.join("x-state"));
    let x_fp = fingerprint(&x);
    let joined = eventually(UP, "x joined", || {
        let evs = watch_events(&w);
        evs.iter()
            .find(|e| e["event"] == "joined" && e["node"]["addr"] == x_addr.as_str())
            .cloned()
            .ok_or(format!("{evs:?}"))
    });
    assert_eq!(joined["node"]["identity"], "new", "{joined}");
    assert_eq!(joined["node"]["node_key"], x_fp.as_str(), "{joined}");
    // watch holds a new pin until the key has claimed the id alone for
    // a few seconds (no second key answering a moment later).
    w.expect_output("pinned node key", Duration::from_secs(15));

    // x crashes (no goodbye): watch's health check finds it gone.
    x.kill();
    drop(x);
    eventually(Duration::from_secs(15), "x left", || {
        let evs = watch_events(&w);
        evs.iter()
            .find(|e| e["event"] == "left")
            .map(|_| ())
            .ok_or(format!("{evs:?}"))
    });

    let y = agent(&lab, 2, &key, &caps, &d.join("y-state"));
    let y_fp = fingerprint(&y);
    let refused = eventually(Duration::from_secs(20), "y's claim refused", || {
        let evs = watch_events(&w);
        evs.iter()
            .find(|e| {
                e["event"] == "refused" && e["reason"].as_str().is_some_and(|r| r.contains(&y_fp))
            })
            .cloned()
            .ok_or(format!("{evs:?}"))
    });
    let reason = refused["reason"].as_str().unwrap();
    assert!(reason.contains(X_ID) && reason.contains(&x_fp), "{reason}");
    // Past a health check's bound: y never joined as x.
    std::thread::sleep(Duration::from_secs(6));
    let evs = watch_events(&w);
    assert!(
        !evs.iter()
            .any(|e| e["event"] == "joined" && e["node"]["addr"] == y_addr.as_str()),
        "y never joins: {evs:?}"
    );
    drop(y);
}

/// The IP of an `ip:port` address, as an ssh written from it names it.
fn ip_of(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(ip, _)| ip)
}
