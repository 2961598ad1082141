//! **A pinned id cannot be taken by leaving the key out** (issue 37, item
//! 1; docs/security.md, "Who is who: node keys and pins"): member x, with
//! its node key, is written by `expand --write` and pinned. x stops, and a
//! claimant that holds the cluster key answers the handshake with x's id
//! and caps but without `node_key` and `node_sig`, as an agent older than
//! node keys would. Before the fix admission took it as "unpinned", never
//! consulted the pins, and `expand --write` printed `moved` and rewrote x's
//! node to the claimant's address, exit 0. Now the claim is refused naming
//! the pin, the run fails, and the file is not touched; `watch` never
//! takes the claimant for x either.
//!
//! The claimant is a handshake responder inside host 2's namespace (the
//! protocol's own `answer`, so exactly what an older agent sends), found by
//! a subnet scan of the lab (mDNS off). Everything runs inside namespaces
//! built by [`rlx_lab`]; the tests skip (or fail under `CI=true`) where no
//! lab can be built.

use rlx_lab::kit::discover::expand;
use rlx_lab::kit::netns::in_netns;
use rlx_lab::kit::{discover_bin, eventually, require_lab, run_ok, Proc};
use rlx_lab::Lab;
use rlx_proto::caps::NodeCaps;
use rlx_proto::keys::KeyRing;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long an agent may take to start (a loaded CI box is slow).
const UP: Duration = Duration::from_secs(30);

/// x's node id, which the claimant takes.
const X_ID: &str = "d0000000000000a1";

fn x_caps() -> String {
    crate::identity::caps_of(X_ID)
}

/// The real keyed agent x on `host`, with its own node key in `state`.
fn agent_x(lab: &Lab, host: usize, key: &Path, caps: &Path, state: &Path) -> Proc {
    crate::identity::keyed_agent(lab, host, X_ID, key, caps, state)
}

/// Starts the claimant on host `host`'s agent port: it proves the cluster
/// key (it is a member) and answers with x's caps, no node key.
fn claimant(lab: &Lab, host: usize, key: &Path) {
    let ring = KeyRing::load(key).unwrap();
    responder(lab, host, Some(ring), &x_caps()).forget();
}

/// A handshake responder on host `host`'s agent port (6184) answering
/// every hello with `caps` and no node key (exactly what an agent older
/// than node keys sends), proving `ring`'s first key when given. Serves
/// until the returned guard is dropped.
pub(crate) fn responder(lab: &Lab, host: usize, ring: Option<KeyRing>, caps: &str) -> Responder {
    let caps = NodeCaps::from_json(caps).unwrap();
    assert!(caps.node_key.is_none());
    let ip = lab.host(host).ip;
    let l = in_netns(&lab.host(host).ns, move || {
        TcpListener::bind((ip, 6184)).expect("the responder's port")
    })
    .unwrap();
    l.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        while !stopped.load(Ordering::SeqCst) {
            let Ok((s, peer)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let on = rlx_proto::handshake::Binding {
                local: s.local_addr().unwrap(),
                peer,
                advertised: vec![],
            };
            let mut line = Vec::new();
            let _ = BufReader::new(&s).read_until(b'\n', &mut line);
            let key = ring.as_ref().map(KeyRing::first);
            if let Ok(out) = rlx_proto::handshake::answer(&line, &caps, key, &on) {
                let _ = (&s).write_all(out.as_bytes());
            }
        }
    });
    Responder {
        stop,
        thread: Some(thread),
    }
}

/// A running [`responder`]; dropping it closes its port.
pub(crate) struct Responder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Responder {
    /// Leaves it serving until the test process ends.
    fn forget(mut self) {
        self.thread.take();
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
    }
}

/// Guards against the downgrade: a reply without `node_key` for a pinned
/// id was admitted as an older agent, and `expand --write` moved the
/// pinned node to the claimant.
#[test]
fn a_member_answering_with_a_pinned_id_and_no_node_key_is_refused_and_nothing_moves() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    run_ok(Command::new(discover_bin()).arg("keygen").arg(&key));
    let caps = d.join("x.json");
    std::fs::write(&caps, x_caps()).unwrap();
    let cfg = d.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "model = \"m\"\n[discover]\nkey_file = {:?}\nckpt_dir = \"/m\"\nsubnet = \"{}\"\nmdns = false\n",
            key.display().to_string(),
            lab.hosts_block()
        ),
    )
    .unwrap();
    let x = agent_x(&lab, 1, &key, &caps, &d.join("x-state"));
    let first = expand(&lab, &cfg, &["--write"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(
        first.json["report"]["added"][0]["identity"], "new",
        "{:#}",
        first.json
    );
    let written = std::fs::read_to_string(&cfg).unwrap();
    x.kill();
    drop(x);

    claimant(&lab, 2, &key);
    let claim = expand(&lab, &cfg, &["--write"]);
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        written,
        "x's node is not moved to the claimant: {}",
        claim.stderr
    );
    assert_eq!(
        claim.code,
        Some(1),
        "a refused claim on a pinned node fails the run: {}",
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
        .find(|f| f["id"] == X_ID)
        .unwrap_or_else(|| panic!("no refusal of the claim: {report:#}"));
    assert_eq!(refusal["pin_clash"]["shown"], "none", "{refusal:#}");
    let reason = refusal["reason"].as_str().unwrap();
    assert!(reason.contains("proves no node key"), "{reason}");
    assert!(
        claim.stderr.contains("proves no node key"),
        "the report says so: {}",
        claim.stderr
    );
}

/// The same claim against a live keyed `watch`: x crashes (no goodbye)
/// and the claimant takes its handshake port at the same address at once,
/// as a member that took over x's IP would. watch checks the member there
/// and must not take the keyless answer for x.
#[test]
fn watch_does_not_take_a_keyless_answer_at_a_crashed_members_address_for_it() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
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
    let x = agent_x(&lab, 1, &key, &caps, &d.join("x-state"));
    eventually(UP, "x joined", || {
        let evs = w.json_lines();
        evs.iter()
            .any(|e| e["event"] == "joined" && e["node"]["identity"] == "new")
            .then_some(())
            .ok_or(format!("{evs:?}"))
    });
    // watch holds a new pin until the key has claimed the id alone for
    // a few seconds (no second key answering a moment later).
    w.expect_output("pinned node key", Duration::from_secs(15));
    x.kill();
    drop(x);
    claimant(&lab, 1, &key);
    let said = eventually(Duration::from_secs(20), "the claim refused", || {
        let evs = w.json_lines();
        evs.iter()
            .find(|e| e.to_string().contains("proves no node key"))
            .cloned()
            .ok_or(format!("{evs:?}"))
    });
    assert!(said.to_string().contains(X_ID), "{said}");
    let evs = w.json_lines();
    assert!(
        !evs.iter().any(|e| e["node"]["identity"] == "unpinned"),
        "the claimant never stands for x: {evs:?}"
    );
}
