//! **Only your machines join**: strangers on a private namespace LAN try to
//! get into a keyed cluster, and none does.
//!
//! Three real `rlx-agent`s share a key made by `rlx-discover keygen`. Around
//! them, impostors (python-zeroconf publishers, hand-made handshake servers
//! and an `rlx-agent` holding another key) announce a real agent's exact TXT
//! record from other addresses, replay a captured proof, point an
//! announcement at another member, or just announce. With `[discover]
//! key_file` the coordinator admits exactly the three real agents, each with
//! evidence `authenticated`, and refuses every stranger with its own reason.
//! The key never shows up in any output or in the written config.
//!
//! A flood of thousands of bogus `_rlx._tcp` instances from a third-party
//! stack must not hide the real agents nor grow the coordinator without
//! bound.
//!
//! Everything runs inside namespaces built by [`rlx_lab`]; the
//! tests skip (or fail under `CI=true`) where no lab can be built.

use rlx_lab::kit::discover::{admitted, refusals};
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{self, agent_bin, discover, discover_bin, require_lab, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long an agent or a python publisher may take to announce (mDNS
/// probing takes about 0.75 s; a loaded CI box is slower).
const UP: Duration = Duration::from_secs(30);

/// The worker port everyone uses.
const PORT: u16 = 9100;

/// Caps of real machine `i`; ids `a0000000000000i`.
fn caps_json(i: usize, id: &str) -> String {
    format!(
        r#"{{"id":"{id}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":{cores},
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cpu","name":"cpu","mem_bytes":0}},
                      {{"device":"cuda","name":"gpu {i}","mem_bytes":{mem}}}]}}"#,
        cores = 8 + i,
        mem = (8 + i as u64) << 30,
    )
}

fn real_id(i: usize) -> String {
    format!("a{i:015x}")
}

/// An impostor on the worker port and in mDNS, in one python process.
///
/// usage: impostor.py MODE BIND_IP INSTANCE TXT_HEX ADDR REPLY_FILE
///
/// Announces INSTANCE with the raw TXT rdata TXT_HEX and an A record for
/// ADDR (its own address, or another machine's), then serves the worker
/// port on BIND_IP according to MODE:
///   silent   accept and close: no handshake
///   noproof  the captured caps, answered to our nonce, without a proof
///   replay   the captured reply line, verbatim, to every hello
///   none     no listener at all
///
/// python-zeroconf 0.47 (Debian 12) writes the NSEC records it adds to its
/// answers with a 2-byte window number and length (RFC 4034 §4.1.2 has one
/// byte each), which a strict DNS parser refuses along with the whole reply;
/// the script writes them correctly, so that the impostors are heard as a
/// conforming stack would be.
const IMPOSTOR_PY: &str = r#"
import json, socket, sys, threading
import zeroconf._dns
from zeroconf import Zeroconf, ServiceInfo, IPVersion
def nsec_write(self, out):
    bitmap, octets = bytearray(32), 0
    for t in self.rdtypes:
        if t <= 255:
            bitmap[t // 8] |= 0x80 >> (t % 8)
            octets = max(octets, t // 8 + 1)
    out.write_name(self.next_name)
    out._write_byte(0)
    out._write_byte(octets)
    out.write_string(bytes(bitmap[:octets]))
zeroconf._dns.DNSNsec.write = nsec_write
mode, ip, instance, txt_hex, addr, reply_file = sys.argv[1:7]
captured = open(reply_file, "rb").read() if reply_file != "-" else b""
def caps_of(line):
    start = line.index(b'"caps":') + len(b'"caps":')
    _, end = json.JSONDecoder().raw_decode(line.decode(), start)
    return line[start:end]
def serve(c):
    with c:
        c.settimeout(5)
        if mode == "silent":
            return
        try:
            hello = json.loads(c.makefile("rb").readline(1024))
        except Exception:
            return
        if mode == "replay":
            c.sendall(captured)
        elif mode == "noproof":
            c.sendall(b'{"rlx":"caps","v":1,"nonce":"' + hello["nonce"].encode()
                      + b'","caps":' + caps_of(captured) + b'}\n')
if mode != "none":
    # The SRV port (the worker's, where a third party's handshake is tried)
    # and the agent port a copied TXT names (agent=).
    def accept(srv):
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    for port in (9100, 6184):
        srv = socket.create_server((ip, port), backlog=64)
        threading.Thread(target=accept, args=(srv,), daemon=True).start()
zc = Zeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
info = ServiceInfo("_rlx._tcp.local.", instance + "._rlx._tcp.local.", port=9100,
                   addresses=[socket.inet_aton(addr)], server=instance + ".local.",
                   properties=bytes.fromhex(txt_hex))
zc.register_service(info)
print("registered", flush=True)
threading.Event().wait()
"#;

/// What a stranger on the LAN learns by listening and asking: a real
/// agent's raw TXT record (python-zeroconf resolves it) and its reply to
/// one hello (a captured proof, for our nonce, not the coordinator's).
///
/// usage: spy.py MY_IP INSTANCE AGENT_IP OUT_DIR -> OUT_DIR/txt.hex, OUT_DIR/reply.line
const SPY_PY: &str = r#"
import os, socket, sys, json
from zeroconf import Zeroconf, IPVersion
ip, instance, agent_ip, out = sys.argv[1:5]
zc = Zeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
import time
deadline = time.monotonic() + 15
info = None
while time.monotonic() < deadline and not (info and info.text):
    info = zc.get_service_info("_rlx._tcp.local.", instance + "._rlx._tcp.local.", timeout=3000)
zc.close()
assert info is not None and info.text, "no TXT for " + instance
open(os.path.join(out, "txt.hex"), "w").write(info.text.hex())
nonce = os.urandom(32).hex()
with socket.create_connection((agent_ip, 6184), timeout=5) as s:
    s.sendall(json.dumps({"rlx": "hello", "v": 1, "nonce": nonce}).encode() + b"\n")
    line = s.makefile("rb").readline(70000)
assert line.startswith(b'{"rlx":"caps"') and b'"proof"' in line, line[:80]
open(os.path.join(out, "reply.line"), "wb").write(line)
print("spied", len(info.text), "bytes of TXT,", len(line), "bytes of reply", flush=True)
"#;

/// `rlx-discover keygen PATH`, returning the key's hex (to grep for leaks).
fn keygen(path: &Path) -> String {
    kit::run_ok(Command::new(discover_bin()).arg("keygen").arg(path));
    let text = std::fs::read_to_string(path).unwrap();
    let hex = text
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .find(|l| !l.is_empty())
        .expect("keygen wrote a key")
        .to_string();
    assert_eq!(hex.len(), 64, "a key is 64 hex characters: {hex:?}");
    hex
}

/// A real agent for machine `i` on host `host`, announcing as `name`.
fn agent(lab: &Lab, host: usize, name: &str, caps: &str, key: &Path, dir: &Path) -> Proc {
    let caps_file = dir.join(format!("{name}.json"));
    std::fs::write(&caps_file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps_file)
        .args(["--name", name])
        .arg("--key-file")
        .arg(key)
        .env("RUST_LOG", "debug");
    Proc::spawn(lab, host, cmd)
}

fn write_script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn expand(lab: &Lab, cfg: &Path, extra: &[&str]) -> kit::discover::Expanded {
    discover::expand(lab, cfg, extra)
}

/// One stranger and the reason it must be refused for.
struct Stranger {
    instance: &'static str,
    /// What the refusal must say (a substring of the report's reason).
    reason: &'static str,
    /// What a coordinator without a key does with it.
    without_key: NoKey,
}

/// What happens to a stranger when the coordinator has no key.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NoKey {
    /// Admitted as a node of its own.
    Admitted,
    /// Refused all the same (the check does not need a key).
    Refused,
    /// Refused without a key too, for this other reason: box1's caps name
    /// its node key, which only box1 can sign with (docs/security.md, "Who
    /// is who: node keys and pins").
    RefusedAs(&'static str),
    /// It claims a real agent's id and host name, so the pipeline takes it
    /// for the same machine: merged with the real agent (which address the
    /// node gets is not defined) or reported as an id clash.
    Impersonates,
}

/// The strangers, with the reason each is refused for when the
/// coordinator holds the key, and whether a coordinator without a key would
/// let it in (what `docs/security.md` tells).
const STRANGERS: [Stranger; 7] = [
    // (a) box1's exact TXT from another address, a port that does not speak
    // the handshake.
    Stranger {
        instance: "imp-copy-silent",
        reason: "no handshake",
        without_key: NoKey::Impersonates,
    },
    // (a') box1's exact TXT, a handshake with box1's caps but no proof
    // (and no signature by the node key those caps name).
    Stranger {
        instance: "imp-copy-noproof",
        reason: "no proof",
        without_key: NoKey::RefusedAs("carries no node_sig"),
    },
    // (b) a real rlx-agent claiming box1's id, holding another key.
    Stranger {
        instance: "imp-wrongkey",
        reason: "does not verify under any",
        without_key: NoKey::Admitted,
    },
    // (c) box1's TXT and a reply captured from box1, replayed to every
    // hello: its node signature is for the capturer's nonce.
    Stranger {
        instance: "imp-replay",
        reason: "replayed",
        without_key: NoKey::Refused,
    },
    // box1's TXT with an A record pointing at box2: a key holder answers,
    // but for another id.
    Stranger {
        instance: "imp-redirect",
        reason: "but announced id",
        without_key: NoKey::Refused,
    },
    // (d) a plain third-party announcer with a port that does not speak
    // the handshake...
    Stranger {
        instance: "thirdparty",
        reason: "no handshake",
        without_key: NoKey::Admitted,
    },
    // ...and one with nothing on its port.
    Stranger {
        instance: "thirdparty-noport",
        reason: "unreachable",
        without_key: NoKey::Refused,
    },
];

/// A third party's own TXT record (RFC 6763 wire form), valid schema v1.
fn third_party_txt_hex(id: &str) -> String {
    let strings = [
        "txtvers=1".to_string(),
        format!("id={id}"),
        "os=linux".into(),
        "cores=128".into(),
        "ram=1099511627776".into(),
        "dev0=cuda,85899345920,0,1,0,H100".into(),
    ];
    let mut raw = Vec::new();
    for s in &strings {
        raw.push(s.len() as u8);
        raw.extend_from_slice(s.as_bytes());
    }
    hex_encode(&raw)
}

fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every output that could carry the key, with where it came from.
fn assert_no_key_in(outputs: &[(String, String)], keys: &[&str]) {
    for (what, text) in outputs {
        for key in keys {
            assert!(
                !text.to_lowercase().contains(key),
                "the key appears in {what}"
            );
            // Not even half of it (a truncated print would still leak).
            assert!(
                !text.to_lowercase().contains(&key[..32]),
                "half the key appears in {what}"
            );
        }
    }
}

/// Impostors (a) to (d), plus a redirected announcement and a dead port,
/// against three real agents sharing a key. With `[discover] key_file`:
/// 3 admitted, all `authenticated`; 7 refused, each with its own reason;
/// the key in no log, report or written config. Without a key: what gets
/// in is what `docs/security.md` says.
#[test]
fn with_a_key_only_the_real_agents_are_admitted_and_each_impostor_is_refused_for_its_reason() {
    if !peer::require(
        "with_a_key_only_the_real_agents_are_admitted_and_each_impostor_is_refused_for_its_reason",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    // h0 coordinator; h1-h3 real agents; h4 wrong key; h5-h10 python strangers.
    let lab = labs.hosts(11);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key_file = d.join("cluster.key");
    let key = keygen(&key_file);
    let other_key_file = d.join("other.key");
    let other_key = keygen(&other_key_file);

    let mut procs: Vec<Proc> = Vec::new();
    for i in 1..=3 {
        procs.push(agent(
            &lab,
            i,
            &format!("box{i}"),
            &caps_json(i, &real_id(i)),
            &key_file,
            d,
        ));
    }
    // (b) The wrong-key impostor is a real rlx-agent claiming box1's id.
    procs.push(agent(
        &lab,
        4,
        "imp-wrongkey",
        &caps_json(1, &real_id(1)).replace("\"box1\"", "\"imp-wrongkey\""),
        &other_key_file,
        d,
    ));
    for p in &procs {
        p.expect_output("mDNS: announced on", UP);
    }

    // A stranger in the coordinator's namespace learns box1's TXT and
    // captures one of its proofs.
    let spy = write_script(d, "spy.py", SPY_PY);
    let out = kit::run_ok(lab.command(0, PYTHON).arg(&spy).args([
        &lab.host(0).ip.to_string(),
        "box1",
        &lab.host(1).ip.to_string(),
        &d.display().to_string(),
    ]));
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
    let box1_txt = std::fs::read_to_string(d.join("txt.hex")).unwrap();
    assert!(
        box1_txt.contains(&hex_encode(format!("id={}", real_id(1)).as_bytes())),
        "the copied TXT carries box1's id"
    );
    let reply = d.join("reply.line").display().to_string();
    let imp = write_script(d, "impostor.py", IMPOSTOR_PY);
    let third_txt = third_party_txt_hex("00000000000000ee");
    let third_txt2 = third_party_txt_hex("00000000000000ef");
    let box2_ip = lab.host(2).ip.to_string();
    // (host, mode, instance, txt, announced address or "" for its own)
    let plan: [(usize, &str, &str, &str, &str); 6] = [
        (5, "silent", "imp-copy-silent", &box1_txt, ""),
        (6, "noproof", "imp-copy-noproof", &box1_txt, ""),
        (7, "replay", "imp-replay", &box1_txt, ""),
        (8, "none", "imp-redirect", &box1_txt, &box2_ip),
        (9, "silent", "thirdparty", &third_txt, ""),
        (10, "none", "thirdparty-noport", &third_txt2, ""),
    ];
    for (host, mode, instance, txt, addr) in plan {
        let ip = lab.host(host).ip.to_string();
        let addr = if addr.is_empty() {
            ip.clone()
        } else {
            addr.to_string()
        };
        let mut cmd = Command::new(PYTHON);
        cmd.arg(&imp)
            .args([mode, &ip, instance, txt, &addr, &reply]);
        let p = Proc::spawn(&lab, host, cmd);
        p.expect_output("registered", UP);
        procs.push(p);
    }

    // With the key.
    let cfg = d.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "# keyed cluster\n[discover]\nkey_file = {:?}\n",
            key_file.display().to_string()
        ),
    )
    .unwrap();
    let keyed = expand(&lab, &cfg, &["--write"]);
    let v = &keyed.json;
    let got = admitted(v);
    let want: BTreeMap<String, (String, String)> = (1..=3)
        .map(|i| (format!("box{i}"), (real_id(i), "authenticated".to_string())))
        .collect();
    assert_eq!(got, want, "exactly the real agents, authenticated: {v:#}");
    let refused = refusals(v);
    let mut tried = 0;
    for s in &STRANGERS {
        tried += 1;
        let reason = refused
            .get(s.instance)
            .unwrap_or_else(|| panic!("{} was not refused: {v:#}", s.instance));
        assert!(
            reason.contains(s.reason),
            "{} refused for the wrong reason (want {:?}): {reason}",
            s.instance,
            s.reason
        );
    }
    eprintln!(
        "keyed: {tried} strangers tried, 0 admitted, {} real agents admitted",
        got.len()
    );
    for (host, reason) in &refused {
        eprintln!("  refused {host}: {reason}");
    }
    let written = std::fs::read_to_string(&cfg).unwrap();
    for i in 1..=3 {
        assert!(
            written.contains(&format!("{}:{PORT}", lab.host(i).ip)),
            "box{i} written to the config:\n{written}"
        );
    }
    for h in 4..=10 {
        assert!(
            !written.contains(&format!("\"{}:", lab.host(h).ip)),
            "no stranger's address in the config:\n{written}"
        );
    }

    // Without the key: what a keyless coordinator lets in (documented in
    // docs/security.md).
    let open_cfg = d.join("open.toml");
    std::fs::write(&open_cfg, "[discover]\n").unwrap();
    let open = expand(&lab, &open_cfg, &[]);
    let v = &open.json;
    let got = admitted(v);
    let refused_open = refusals(v);
    let mut admitted_open = 0;
    for s in &STRANGERS {
        let outcome = match (got.get(s.instance), refused_open.get(s.instance)) {
            (Some((_, ev)), _) => {
                admitted_open += 1;
                format!("admitted (evidence {ev})")
            }
            (None, Some(r)) => format!("refused: {r}"),
            (None, None) => "merged with the machine whose id it claims".into(),
        };
        eprintln!("no key: {}: {outcome}", s.instance);
        match s.without_key {
            NoKey::Admitted => assert!(
                got.contains_key(s.instance),
                "{} should be admitted without a key (docs/security.md): {v:#}",
                s.instance
            ),
            NoKey::Refused => assert!(
                refused_open
                    .get(s.instance)
                    .is_some_and(|r| r.contains(s.reason)),
                "{} should be refused for {:?} even without a key: {v:#}",
                s.instance,
                s.reason
            ),
            NoKey::RefusedAs(why) => assert!(
                refused_open
                    .get(s.instance)
                    .is_some_and(|r| r.contains(why)),
                "{} should be refused for {why:?} without a key: {v:#}",
                s.instance
            ),
            NoKey::Impersonates => assert!(
                !refused_open.contains_key(s.instance),
                "{} is refused without a key; docs/security.md says it is not: {v:#}",
                s.instance
            ),
        }
    }
    eprintln!("no key: {admitted_open} strangers admitted as nodes of their own");
    eprintln!(
        "no key: nodes {}\nduplicates {:#}\nclashes {:#}",
        v["nodes"], v["report"]["duplicates"], v["report"]["clashes"]
    );
    for i in 2..=3 {
        assert!(
            got.contains_key(&format!("box{i}")),
            "box{i} is admitted without a key too: {v:#}"
        );
    }

    // The key is nowhere: not in what the coordinator printed (debug logs
    // included), nor in the agents' debug logs, nor in the written config.
    let mut outputs = vec![
        ("keyed expand stdout".to_string(), keyed.stdout.clone()),
        ("keyed expand stderr".to_string(), keyed.stderr.clone()),
        ("keyless expand stdout".to_string(), open.stdout.clone()),
        ("keyless expand stderr".to_string(), open.stderr.clone()),
        ("written config".to_string(), written.clone()),
    ];
    for p in &procs {
        outputs.push((format!("{} stdout", p.label()), p.stdout()));
        outputs.push((format!("{} stderr", p.label()), p.stderr()));
    }
    assert!(
        keyed.stderr.contains("DEBUG") || keyed.stderr.contains("debug"),
        "the coordinator ran with debug logs, so the check covers them"
    );
    assert_no_key_in(&outputs, &[&key, &other_key]);
}

/// The agent side of the cluster filter, spoken by a script as a coordinator
/// of another cluster would: an agent started with `--cluster lab` answers a
/// hello for `prod` with an error line naming `lab`, and answers hellos for
/// `lab` or for no cluster with its caps.
#[test]
fn an_agent_in_a_cluster_refuses_a_hello_for_another_cluster_on_the_wire() {
    if !peer::require(
        "an_agent_in_a_cluster_refuses_a_hello_for_another_cluster_on_the_wire",
        &[Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps.json");
    std::fs::write(&caps, caps_json(1, &real_id(1))).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", "box1", "--cluster", "lab"])
        .env("RUST_LOG", "info");
    let agent = Proc::spawn(&lab, 1, cmd);
    agent.expect_output("mDNS: announced on", UP);
    let client = r#"
import json, socket, sys
ip = sys.argv[1]
for cluster in ["prod", "lab", None]:
    hello = {"rlx": "hello", "v": 1, "nonce": "11" * 32}
    if cluster:
        hello["cluster"] = cluster
    with socket.create_connection((ip, 6184), timeout=5) as s:
        s.sendall(json.dumps(hello).encode() + b"\n")
        print(s.makefile("r").readline().strip(), flush=True)
"#;
    let out = kit::run_ok(
        lab.command(0, PYTHON)
            .args(["-c", client, &lab.host(1).ip.to_string()]),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["rlx"], "error", "a hello for prod: {}", lines[0]);
    assert_eq!(lines[0]["cluster"], "lab", "{}", lines[0]);
    assert!(
        lines[0].get("caps").is_none(),
        "no caps for another cluster"
    );
    for l in &lines[1..] {
        assert_eq!(l["rlx"], "caps", "{l}");
        assert_eq!(l["caps"]["cluster"], "lab", "{l}");
    }
}

// ---------------------------------------------------------------- flood

/// Bogus instances in the flood that runs in CI: thousands, but fewer than
/// the coordinator's instance table holds
/// ([`rlx_discover::sources::mdns::MAX_INSTANCES`] = 4096), so the real
/// agents always have room.
const FLOOD_INSTANCES: usize = 3_000;

/// Bogus instances in the floods that overflow the table (the 10,000 of
/// docs/security.md, "Floods"): then the table's admission policy decides
/// whether the real agents keep a slot.
const BIG_FLOOD_INSTANCES: usize = 10_000;

/// Peak RSS the coordinator may reach while a flood runs, whatever its size
/// (documented in docs/security.md). The table holds at most 4096
/// instances of at most 1300 bytes of TXT each (about 5 MB), plus mdns-sd's
/// own cache and the handshakes in flight; a quiet browse of 3 agents peaks
/// around 15-20 MB.
const FLOOD_RSS_BOUND_KB: u64 = 96 * 1024;

/// Runs `cmd` to completion and returns its output and peak RSS in KiB
/// (`wait4`'s `ru_maxrss`: `ip netns exec` execs the program, so this is
/// the coordinator itself), killing it after `timeout`.
fn run_measured(mut cmd: Command, timeout: Duration) -> (std::process::Output, u64) {
    use std::os::unix::process::ExitStatusExt;
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let err_file = tempfile::NamedTempFile::new().unwrap();
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(out_file.reopen().unwrap())
        .stderr(err_file.reopen().unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let deadline = Instant::now() + timeout;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (we never call
        // `child.wait`); `status` and `usage` are valid for writes.
        let r = unsafe { nix::libc::wait4(pid, &mut status, nix::libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if Instant::now() >= deadline {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::mem::forget(child);
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: std::fs::read(out_file.path()).unwrap(),
        stderr: std::fs::read(err_file.path()).unwrap(),
    };
    (output, usage.ru_maxrss as u64)
}

/// What one coordinator run under a flood saw.
struct FloodRun {
    /// host -> (id, evidence) of the admitted nodes.
    admitted: BTreeMap<String, (String, String)>,
    /// Hosts refused.
    refused: usize,
    /// The browse's account of itself.
    tried: Value,
    /// Peak RSS of the coordinator, KiB.
    rss_kb: u64,
    took: Duration,
}

/// Three real agents sharing a key, a python-zeroconf flood of `instances`
/// bogus instances from host 4 in full swing, and
/// `rlx-discover expand` with the key in host 0, measured. Each real agent
/// drops `mdns_loss` percent of the mDNS packets it sends (its answers),
/// at random; the handshake is not touched.
fn run_under_flood(instances: usize, mdns_loss: u8) -> Option<FloodRun> {
    // One flood at a time: three python flooders and three coordinators at
    // once on a 2-core machine starve each other (answer order, handshake
    // deadlines), which measures the machine, not the coordinator.
    static ONE_FLOOD_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_FLOOD_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let labs = require_lab()?;
    let lab = labs.hosts(5);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key_file = d.join("cluster.key");
    keygen(&key_file);
    let agents: Vec<Proc> = (1..=3)
        .map(|i| {
            agent(
                &lab,
                i,
                &format!("box{i}"),
                &caps_json(i, &real_id(i)),
                &key_file,
                d,
            )
        })
        .collect();
    for a in &agents {
        a.expect_output("mDNS: announced on", UP);
    }
    let flood = kit::script("flood.py");
    let ip = lab.host(4).ip;
    let prefix = format!("{}.{}", ip.octets()[0], ip.octets()[1]);
    let mut cmd = Command::new(PYTHON);
    cmd.arg(&flood)
        .args([&ip.to_string(), &instances.to_string(), "120", &prefix]);
    let flooder = Proc::spawn(&lab, 4, cmd);
    // In full swing: two unasked rounds sent, answering every query.
    flooder.expect_output("round 2", UP);
    if mdns_loss > 0 {
        for i in 1..=3 {
            lab.nft(
                i,
                &format!(
                    "table inet rlx_mdns_loss {{\n chain out {{\n  type filter hook output priority 0;\n  \
                     udp sport 5353 numgen random mod 100 < {mdns_loss} drop\n }}\n}}\n"
                ),
            )
            .unwrap();
        }
    }

    let cfg = d.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!(
            "[discover]\nkey_file = {:?}\n",
            key_file.display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = lab.command(0, discover_bin());
    cmd.args(["expand", "--format", "json"])
        .arg(&cfg)
        .env("RUST_LOG", "warn");
    let t0 = Instant::now();
    let (out, rss_kb) = run_measured(cmd, Duration::from_secs(150));
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "expand printed no JSON ({e}, {}); stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    for (host, reason) in refusals(&v) {
        if host.starts_with("box") {
            eprintln!("real agent {host} refused: {reason}");
        }
    }
    let run = FloodRun {
        admitted: admitted(&v),
        refused: v["report"]["failed"].as_array().map_or(0, Vec::len),
        tried: v["report"]["tried"].clone(),
        rss_kb,
        took,
    };
    eprintln!(
        "flood of {instances} bogus instances, {mdns_loss}% of the agents' mDNS answers lost: \
         {} admitted ({:?}), {} refused, coordinator peak RSS {} KiB, expand took {:?}",
        run.admitted.len(),
        run.admitted.keys().collect::<Vec<_>>(),
        run.refused,
        run.rss_kb,
        run.took
    );
    drop(flooder);
    Some(run)
}

fn real_agents_authenticated() -> BTreeMap<String, (String, String)> {
    (1..=3)
        .map(|i| (format!("box{i}"), (real_id(i), "authenticated".to_string())))
        .collect()
}

/// Thousands of bogus `_rlx._tcp` instances from a third-party stack
/// (python-zeroconf) while 3 real agents run: all 3 are found and admitted,
/// nothing else is, and the coordinator's peak RSS stays under
/// [`FLOOD_RSS_BOUND_KB`].
#[test]
fn a_flood_of_thousands_of_bogus_announcements_neither_hides_the_real_agents_nor_grows_the_coordinator(
) {
    if !peer::require("a_flood_of_thousands_of_bogus_announcements_neither_hides_the_real_agents_nor_grows_the_coordinator", &[Peer::Nftables, Peer::PythonZeroconf]) {
        return;
    }
    let Some(run) = run_under_flood(FLOOD_INSTANCES, 0) else {
        return;
    };
    assert_eq!(
        run.admitted,
        real_agents_authenticated(),
        "the 3 real agents, and nothing else, under a flood; browse: {:#}",
        run.tried
    );
    assert!(
        run.rss_kb <= FLOOD_RSS_BOUND_KB,
        "coordinator peak RSS {} KiB over the documented bound {FLOOD_RSS_BOUND_KB} KiB",
        run.rss_kb
    );
}

/// A flood larger than the instance table, on a clean LAN: whichever
/// answers first, the real agents are found and memory stays bounded.
/// (Before the per-source cap, the flood's burst sometimes landed first and
/// filled the table: a real agent was left out once in eight runs.)
///
/// Guarded by the table's per-source cap
/// (`rlx_discover::sources::mdns::MAX_INSTANCES_PER_SOURCE`): one flooding
/// address gets 64 slots, the rest stay for everyone else.
#[test]
fn a_flood_larger_than_the_instance_table_does_not_hide_the_real_agents() {
    if !peer::require(
        "a_flood_larger_than_the_instance_table_does_not_hide_the_real_agents",
        &[Peer::Nftables, Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(run) = run_under_flood(BIG_FLOOD_INSTANCES, 0) else {
        return;
    };
    assert_eq!(
        run.admitted,
        real_agents_authenticated(),
        "the 3 real agents under a flood of {BIG_FLOOD_INSTANCES}; browse: {:#}",
        run.tried
    );
    assert!(run.rss_kb <= FLOOD_RSS_BOUND_KB, "{} KiB", run.rss_kb);
}

/// The flood of 10,000 while half of the real agents' mDNS answers are lost
/// (their handshakes are not): an agent whose first answer is lost answers
/// again only after the flood's burst, and must still find room in the
/// instance table.
///
/// Guarded by the table's per-source cap: a flood from one address cannot
/// take the slots the retried answers need.
#[test]
fn a_flood_does_not_hide_real_agents_whose_first_answers_are_lost() {
    if !peer::require(
        "a_flood_does_not_hide_real_agents_whose_first_answers_are_lost",
        &[Peer::Nftables, Peer::PythonZeroconf],
    ) {
        return;
    }
    let Some(run) = run_under_flood(BIG_FLOOD_INSTANCES, 50) else {
        return;
    };
    assert_eq!(
        run.admitted,
        real_agents_authenticated(),
        "the 3 real agents under a flood, half their mDNS answers lost; browse: {:#}",
        run.tried
    );
    assert!(run.rss_kb <= FLOOD_RSS_BOUND_KB, "{} KiB", run.rss_kb);
}
