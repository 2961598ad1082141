//! **A relay is not a node** (docs/security.md, "Relays, NATs and
//! port-forwards"): a stranger who holds no key relays its own worker port to a
//! real keyed agent and announces that agent's TXT at its own address. The
//! agent's proof binds the connection it was made on, so a coordinator with
//! `key_file` refuses the relay, saying a relay or NAT is in between and naming
//! both endpoints, and admits the real agent at its own address when it hears
//! it. A port-forward the agent's operator declares with `rlx-agent
//! --advertise` is admitted at the declared endpoint.
//!
//! Lab: h0 the coordinator, h1 the keyed agent, h2 the stranger (a python
//! relay plus a python-zeroconf announcement). Everything runs inside
//! namespaces built by [`rlx_lab`]; the tests skip (or fail under
//! `CI=true`) where no lab or no python-zeroconf is available.

use rlx_lab::kit::discover::{admitted, refusals};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, agent_bin, discover, discover_bin, require_lab, Proc, PYTHON};
use rlx_lab::Lab;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long an agent or a python publisher may take to announce (mDNS
/// probing takes about 0.75 s; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(30);

/// The worker port everyone uses.
const PORT: u16 = 9100;
/// The agent's own port, the handshake's.
const AGENT_PORT: u16 = 6184;

const AGENT_ID: &str = "a000000000000001";

/// The stranger (`bench/py/relay.py`, which the benchmark suite runs too):
/// learns the real agent's TXT over mDNS, relays its own
/// worker port to the agent's byte for byte, and announces INSTANCE with
/// that TXT at its own address.
///
/// usage: relay.py MY_IP AGENT_INSTANCE AGENT_IP INSTANCE
///
/// python-zeroconf 0.47 (Debian 12) writes the NSEC records it adds to its
/// answers with a 2-byte window number and length (RFC 4034 §4.1.2 has one
/// byte each), which a strict DNS parser refuses along with the whole reply;
/// the script writes them correctly (as `tests/trust/admission.rs` does).
const RELAY_PY: &str = include_str!("../../bench/py/relay.py");

fn caps_json() -> String {
    format!(
        r#"{{"id":"{AGENT_ID}","hostname":"box1","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}},
                      {{"device":"cuda","name":"gpu 1","mem_bytes":8589934592}}]}}"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `rlx-discover keygen PATH`.
fn keygen(path: &Path) {
    kit::run_ok(Command::new(discover_bin()).arg("keygen").arg(path));
}

/// The keyed agent on h1, announcing as `box1`, with `extra` flags.
fn agent(lab: &Lab, key: &Path, dir: &Path, extra: &[String]) -> Proc {
    let caps = write(dir, "box1.json", &caps_json());
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box1"])
        .arg("--key-file")
        .arg(key)
        .args(extra)
        .env("RUST_LOG", "debug");
    let p = Proc::spawn(lab, 1, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// The stranger on h2: a relay to the agent, announced as `imp-relay`.
fn stranger(lab: &Lab, dir: &Path) -> Proc {
    let script = write(dir, "relay.py", RELAY_PY);
    let mut cmd = Command::new(PYTHON);
    cmd.arg(&script).args([
        &lab.host(2).ip.to_string(),
        "box1",
        &lab.host(1).ip.to_string(),
        "imp-relay",
    ]);
    let p = Proc::spawn(lab, 2, cmd);
    p.expect_output("relaying", UP);
    p
}

/// Drops, in the coordinator's namespace, every mDNS packet from the real
/// agent: the coordinator hears only the stranger's announcement (the case
/// where the relay always got in before the fix).
fn deafen_to_agent(lab: &Lab) {
    lab.nft(
        0,
        &format!(
            "table inet rlx_deaf {{\n chain in {{\n  type filter hook input priority 0;\n  \
             ip saddr {} udp sport 5353 drop\n }}\n}}\n",
            lab.host(1).ip
        ),
    )
    .unwrap();
}

fn hear_agent_again(lab: &Lab) {
    lab.nft(0, "delete table inet rlx_deaf\n").unwrap();
}

/// A config with the cluster key.
fn keyed_config(dir: &Path, key: &Path) -> PathBuf {
    write(
        dir,
        "cluster.toml",
        &format!(
            "# keyed cluster\n[discover]\nkey_file = {:?}\n",
            key.display().to_string()
        ),
    )
}

fn require(test: &str) -> Option<Lab> {
    if !peer::require(test, &[Peer::PythonZeroconf, Peer::Nftables]) {
        return None;
    }
    Some(require_lab()?.hosts(3))
}

/// Guards against the relay attack: before the proof
/// bound its endpoint, `expand` with `key_file` wrote the stranger's
/// address as the agent's node, "authenticated", whenever the agent's own
/// mDNS was not heard (and sometimes when it was). Now the relay is refused
/// for that reason, naming both endpoints, whether or not the agent is
/// heard, and the agent is admitted at its own address when it is.
#[test]
fn a_relay_of_a_keyed_agent_is_refused_and_the_agent_is_admitted_at_its_own_address() {
    let Some(lab) =
        require("a_relay_of_a_keyed_agent_is_refused_and_the_agent_is_admitted_at_its_own_address")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    keygen(&key);
    let _agent = agent(&lab, &key, d, &[]);
    let _stranger = stranger(&lab, d);
    let cfg = keyed_config(d, &key);
    // The node's addr is the worker's; the handshake a relay passes on,
    // which the refusal names, is on the agent's port.
    let agent_at = format!("{}:{PORT}", lab.host(1).ip);
    let relay_at = format!("{}:{PORT}", lab.host(2).ip);
    let agent_hs = format!("{}:{AGENT_PORT}", lab.host(1).ip);
    let relay_hs = format!("{}:{AGENT_PORT}", lab.host(2).ip);

    // Only the stranger's announcement reaches the coordinator.
    deafen_to_agent(&lab);
    let v = discover::expand(&lab, &cfg, &["--write"]).json;
    let written = std::fs::read_to_string(&cfg).unwrap();
    eprintln!("agent not heard: {:#}", v["report"]);
    assert!(
        admitted(&v).is_empty(),
        "nothing admitted, the relay least of all: {v:#}"
    );
    assert!(
        !written.contains(&relay_at),
        "the relay's address is not written as a node:\n{written}"
    );
    let refused = refusals(&v);
    let why = refused
        .get("imp-relay")
        .unwrap_or_else(|| panic!("the relay is reported as refused: {v:#}"));
    for needle in ["relay or NAT is in between", &relay_hs, &agent_hs] {
        assert!(why.contains(needle), "{needle:?} in the reason: {why}");
    }

    // Both heard: the agent at its own address, the relay still refused.
    hear_agent_again(&lab);
    let v = discover::expand(&lab, &cfg, &["--write"]).json;
    let written = std::fs::read_to_string(&cfg).unwrap();
    eprintln!("both heard: {:#}", v["report"]);
    let got = admitted(&v);
    assert_eq!(
        got.get("box1"),
        Some(&(AGENT_ID.to_string(), "authenticated".to_string())),
        "the real agent is admitted: {v:#}"
    );
    assert!(!got.contains_key("imp-relay"), "{v:#}");
    assert!(
        refusals(&v)
            .get("imp-relay")
            .is_some_and(|r| r.contains("relay or NAT is in between")),
        "{v:#}"
    );
    assert!(
        written.contains(&agent_at) && !written.contains(&relay_at),
        "the agent's own address is written, the relay's is not:\n{written}"
    );
}

/// A port-forward is declared, not guessed: the same relay, declared by the
/// agent's operator with `--advertise RELAY:PORT`, is a legitimate
/// forwarder, and the coordinator admits the agent at that endpoint
/// (authenticated), though the agent saw the forwarder as its peer.
#[test]
fn an_endpoint_the_agent_advertises_is_admitted_through_its_port_forward() {
    let Some(lab) =
        require("an_endpoint_the_agent_advertises_is_admitted_through_its_port_forward")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("cluster.key");
    keygen(&key);
    // The forward of the agent's port is what --advertise declares; the
    // node is written at the forwarder's worker port (its operator forwards
    // that one too).
    let forward_hs = format!("{}:{AGENT_PORT}", lab.host(2).ip);
    let forward_at = format!("{}:{PORT}", lab.host(2).ip);
    let agent = agent(
        &lab,
        &key,
        d,
        &["--advertise".to_string(), forward_hs.clone()],
    );
    let _forwarder = stranger(&lab, d);
    let cfg = keyed_config(d, &key);
    // The coordinator reaches the agent only through the forward.
    deafen_to_agent(&lab);
    let v = discover::expand(&lab, &cfg, &["--write"]).json;
    eprintln!("through the forward: {:#}", v["report"]);
    assert_eq!(
        admitted(&v).get("imp-relay"),
        Some(&(AGENT_ID.to_string(), "authenticated".to_string())),
        "admitted at the advertised endpoint: {v:#}"
    );
    let written = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        written.contains(&forward_at),
        "the advertised endpoint is the node's address:\n{written}"
    );
    assert!(
        agent.stderr().contains(&forward_hs),
        "the agent logs what it advertises:\n{}",
        agent.stderr()
    );
}
