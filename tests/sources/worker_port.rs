//! The worker, not the agent: every `[[node]] addr` that discovery writes
//! reaches the box's RLX worker (here a stand-in that holds the worker port
//! and greets), while the agent answers on its own port beside it; and a
//! scan never writes the other daemons that sit on port 9100.

use rlx_lab::kit::discover;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, discover_bin, eventually, require_lab, run_ok, Proc, PYTHON};
use rlx_lab::Lab;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long an agent or a stand-in worker may take to start.
const UP: Duration = Duration::from_secs(20);

fn caps_json(i: usize) -> String {
    format!(
        r#"{{"id":"{i:016x}","hostname":"box{i}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000,
           "devices":[{{"device":"cuda","name":"gpu","mem_bytes":25769803776}}]}}"#
    )
}

/// `rlx-agent` for machine `host`, with `extra` flags.
fn start_agent(lab: &Lab, host: usize, dir: &Path, extra: &[&str]) -> Proc {
    let caps = dir.join(format!("box{host}.json"));
    std::fs::write(&caps, caps_json(host)).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file")
        .arg(&caps)
        .args(["--name", &format!("box{host}")])
        .args(extra)
        .env("RUST_LOG", "info");
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("mDNS: announced on", UP);
    p
}

/// The stand-in RLX worker of machine `host` on `port`.
fn start_worker(lab: &Lab, host: usize, port: u16) -> Proc {
    let mut cmd = Command::new(discover_bin());
    cmd.args(["lab-worker", "--port", &port.to_string()])
        .args(["--name", &format!("box{host}")]);
    let p = Proc::spawn(lab, host, cmd);
    p.expect_output("listening on", UP);
    p
}

/// The node_exporter stand-in ([`NODE_EXPORTER`]) on 9100 of `host`.
fn start_exporter(lab: &Lab, host: usize, dir: &Path) -> Proc {
    let exporter = dir.join("exporter.py");
    std::fs::write(&exporter, NODE_EXPORTER).unwrap();
    let mut c = Command::new(PYTHON);
    c.arg(&exporter).arg("9100");
    let http = Proc::spawn(lab, host, c);
    http.expect_output("serving", UP);
    http
}

/// `rlx-discover expand --format json` of `toml` in host 0: (exit code, JSON).
fn expand(lab: &Lab, dir: &Path, toml: &str) -> (i32, Value) {
    let cfg = dir.join("cluster.toml");
    std::fs::write(&cfg, toml).unwrap();
    let e = discover::expand(lab, &cfg, &[]);
    (e.code.unwrap_or(-1), e.json)
}

/// The first line a connection to `addr` (`IP:PORT`) gets, dialled from
/// host 0 the way the runtime would dial a node's `addr`.
fn greeting_at(lab: &Lab, addr: &str) -> String {
    let (ip, port) = addr.rsplit_once(':').expect("IP:PORT");
    let out = run_ok(lab.command(0, "timeout").args([
        "5",
        "bash",
        "-c",
        "exec 3<>/dev/tcp/$0/$1 && IFS= read -r line <&3 && printf '%s\\n' \"$line\"",
        ip,
        port,
    ]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn added(v: &Value) -> Vec<Value> {
    v["report"]["added"].as_array().cloned().unwrap_or_default()
}

fn addrs(v: &Value) -> Vec<String> {
    let mut a: Vec<String> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["addr"].as_str().unwrap().to_string())
        .collect();
    a.sort();
    a
}

/// Every written addr must greet as the stand-in worker of its own box.
fn assert_each_addr_reaches_its_worker(lab: &Lab, v: &Value, hosts: &[usize], port: u16) {
    let mut want: Vec<String> = hosts
        .iter()
        .map(|&h| format!("{}:{port}", lab.host(h).ip))
        .collect();
    want.sort();
    assert_eq!(
        addrs(v),
        want,
        "one node per box, at its worker port: {v:#}"
    );
    for &h in hosts {
        let addr = format!("{}:{port}", lab.host(h).ip);
        let hello = greeting_at(lab, &addr);
        assert_eq!(
            hello,
            rlx_lab::worker::greeting(&format!("box{h}")).trim_end(),
            "{addr} must reach box{h}'s worker, not its agent"
        );
    }
}

/// The worker first on box 1, the agent first on box 2: both orders run
/// side by side with the defaults (worker 9100, agent 6184), `expand`
/// writes each box at its worker, and the agent beside it answered on its
/// own port.
#[test]
fn the_worker_and_the_agent_run_side_by_side_in_either_order_and_each_addr_greets_as_the_worker() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let _w1 = start_worker(&lab, 1, 9100);
    let a1 = start_agent(&lab, 1, dir.path(), &[]);
    let a2 = start_agent(&lab, 2, dir.path(), &[]);
    // Box 2's worker is not running yet: written all the same, and said.
    let (code, v) = expand(&lab, dir.path(), "[discover]\n");
    assert_eq!(code, 0, "{v:#}");
    let by_host = |v: &Value, h: usize| {
        added(v)
            .into_iter()
            .find(|n| n["hostname"] == format!("box{h}"))
            .unwrap_or_else(|| panic!("box{h} not added: {v:#}"))
    };
    assert_eq!(by_host(&v, 1)["worker_listening"], true, "{v:#}");
    assert_eq!(by_host(&v, 2)["worker_listening"], false, "{v:#}");
    assert_eq!(
        by_host(&v, 2)["agent"],
        format!("{}:6184", lab.host(2).ip),
        "the agent answered on its own port"
    );
    let warned = v["report"]["warnings"].to_string();
    assert!(
        warned.contains(&format!("{}:9100", lab.host(2).ip))
            && warned.contains("nothing listens on its worker port"),
        "a node whose worker is down is written with a warning: {warned}"
    );
    let _w2 = start_worker(&lab, 2, 9100);
    // The agent looks again at each handshake (its last look at most
    // rlx_agent::worker::MAX_AGE old).
    let v = eventually(Duration::from_secs(5), "box2's worker seen up", || {
        let (_, v) = expand(&lab, dir.path(), "[discover]\n");
        (by_host(&v, 2)["worker_listening"] == true)
            .then_some(v.clone())
            .ok_or_else(|| v.to_string())
    });
    assert_each_addr_reaches_its_worker(&lab, &v, &[1, 2], 9100);
    for a in [&a1, &a2] {
        assert!(a.try_wait().is_none(), "the agent runs beside its worker");
    }
}

/// A worker on another port: the agent is told with `--worker-port`, the
/// coordinator with `[discover] port`, and both mDNS and a subnet scan
/// write the same one node per box, at that port.
#[test]
fn a_non_default_worker_port_is_written_by_mdns_and_by_a_scan() {
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let _agents: Vec<Proc> = [1, 2]
        .iter()
        .map(|&h| start_agent(&lab, h, dir.path(), &["--worker-port", "9300"]))
        .collect();
    let _workers: Vec<Proc> = [1, 2]
        .iter()
        .map(|&h| start_worker(&lab, h, 9300))
        .collect();
    let (code, v) = expand(&lab, dir.path(), "[discover]\nport = 9300\n");
    assert_eq!(code, 0, "{v:#}");
    assert_each_addr_reaches_its_worker(&lab, &v, &[1, 2], 9300);
    let net = format!("{}/24", lab.host(1).ip);
    let (code, v) = expand(
        &lab,
        dir.path(),
        &format!("[discover]\nmdns = false\nsubnet = {net:?}\nport = 9300\n"),
    );
    assert_eq!(code, 0, "{v:#}");
    assert_each_addr_reaches_its_worker(&lab, &v, &[1, 2], 9300);
    for n in added(&v) {
        assert_eq!(n["evidence"], "handshake", "the scan found the agents: {n}");
    }
}

/// A firewall on the box that lets the agent's port through but not the
/// worker's: the node is written (its agent says the worker listens), and
/// the scan, whose connect to the worker port failed, says why the runtime
/// will not get through.
#[test]
fn a_worker_port_blocked_by_a_firewall_is_warned_of_by_a_scan() {
    if !peer::require(
        "a_worker_port_blocked_by_a_firewall_is_warned_of_by_a_scan",
        &[Peer::Nftables],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _agent = start_agent(&lab, 1, dir.path(), &[]);
    let _worker = start_worker(&lab, 1, 9100);
    lab.nft(
        1,
        "add table inet fw\n\
         add chain inet fw input { type filter hook input priority 0; policy accept; }\n\
         add rule inet fw input tcp dport 9100 drop\n",
    )
    .unwrap();
    let net = format!("{}/24", lab.host(1).ip);
    let (code, v) = expand(
        &lab,
        dir.path(),
        &format!("[discover]\nmdns = false\nsubnet = {net:?}\n"),
    );
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(addrs(&v), [format!("{}:9100", lab.host(1).ip)]);
    let warned = v["report"]["warnings"].to_string();
    assert!(warned.contains("a firewall between"), "{warned}");
}

/// A page like node_exporter's on 9100 of a box with no agent is named by
/// the scan and never written; a box with an agent and its worker beside
/// it, in the same block, is.
#[test]
fn a_scan_reports_node_exporter_on_the_worker_port_as_http_and_does_not_write_it() {
    if !peer::require(
        "a_scan_reports_node_exporter_on_the_worker_port_as_http_and_does_not_write_it",
        &[Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let dir = tempfile::tempdir().unwrap();
    let http = start_exporter(&lab, 2, dir.path());
    let _agent = start_agent(&lab, 1, dir.path(), &[]);
    let _worker = start_worker(&lab, 1, 9100);
    let net = format!("{}/24", lab.host(1).ip);
    let (code, v) = expand(
        &lab,
        dir.path(),
        &format!("[discover]\nmdns = false\nsubnet = {net:?}\n"),
    );
    assert_eq!(code, 0, "a stranger's service does not fail the run: {v:#}");
    assert_each_addr_reaches_its_worker(&lab, &v, &[1], 9100);
    let failed = v["report"]["failed"].as_array().unwrap();
    let exporter_at = format!("{}:9100", lab.host(2).ip);
    let p = failed
        .iter()
        .find(|p| p["addr"] == exporter_at.as_str())
        .unwrap_or_else(|| panic!("node_exporter not reported: {v:#}"));
    let why = p["reason"].as_str().unwrap();
    assert!(
        why.contains("is HTTP (Node Exporter") && why.contains("serves /metrics"),
        "{why}"
    );
    assert_eq!(p["concern"], "stranger");
    assert!(
        http.stderr().contains("\"GET / HTTP/1.0\" 200"),
        "named from its landing page: {}",
        http.stderr()
    );
}

/// Issue 38, item 3: node_exporter on the worker port beside an agent
/// was taken for the RLX worker: `rlx-agent check` said "the RLX worker
/// listens on TCP 9100" and coordinators showed the worker up. The agent
/// names it by the scan's rules, says so at start, `check` fails with the
/// fix, and the coordinator's report and JSON show the port held by it.
#[test]
fn node_exporter_on_an_agents_worker_port_is_reported_as_holding_it_not_as_the_worker() {
    let name = "node_exporter_on_an_agents_worker_port_is_reported_as_holding_it_not_as_the_worker";
    if !peer::require(name, &[Peer::Python]) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let dir = tempfile::tempdir().unwrap();
    let _http = start_exporter(&lab, 1, dir.path());
    let agent = start_agent(&lab, 1, dir.path(), &[]);
    agent.expect_output(
        "9100 is held by node_exporter (HTTP), not an RLX worker",
        UP,
    );

    let check = lab
        .command(1, agent_bin())
        .arg("check")
        .env("RLX_AGENT_CONFIG", "/dev/null")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(!check.status.success(), "check fails: {said}");
    assert!(
        said.contains("9100 is held by node_exporter (HTTP), not an RLX worker")
            && said.contains("move the worker"),
        "check names the holder and the fix: {said}"
    );
    assert!(
        !said.contains("the RLX worker listens on TCP 9100"),
        "{said}"
    );

    let (code, v) = expand(&lab, dir.path(), "[discover]\n");
    assert_eq!(code, 0, "{v:#}");
    let node = added(&v)
        .into_iter()
        .find(|n| n["addr"].as_str().is_some_and(|a| a.ends_with(":9100")))
        .unwrap_or_else(|| panic!("the agent's node is written: {v:#}"));
    assert_eq!(node["worker_listening"], false, "not the worker: {node:#}");
    assert_eq!(node["worker_held_by"], "node_exporter (HTTP)", "{node:#}");
    let warned = v["report"]["warnings"].to_string();
    assert!(
        warned.contains("9100 is held by node_exporter (HTTP), not an RLX worker"),
        "the report says who holds the port: {warned}"
    );
}

/// The same identification through `rlx-discover scan`, with a silent
/// listener beside it: the silent one is listed as nothing vouching for it.
#[test]
fn scan_names_each_listener_on_the_worker_port() {
    if !peer::require(
        "scan_names_each_listener_on_the_worker_port",
        &[Peer::Python],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let dir = tempfile::tempdir().unwrap();
    let _http = start_exporter(&lab, 2, dir.path());
    let _worker = start_worker(&lab, 3, 9100);
    let _agent = start_agent(&lab, 1, dir.path(), &[]);
    let net = format!("{}/24", lab.host(1).ip);
    let out = run_ok(
        lab.command(0, discover_bin())
            .args(["scan", &net, "--json"])
            .env("RUST_LOG", "warn"),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = |h: usize| {
        let at = format!("{}:9100", lab.host(h).ip);
        v["found"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["addr"] == at.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{at} not found: {v:#}"))
    };
    assert_eq!(found(1)["agent"], true);
    assert_eq!(found(1)["worker_open"], false, "box 1 runs no worker");
    assert_eq!(found(2)["identity"], "HTTP");
    assert_eq!(found(3)["identity"], "unknown", "{v:#}");
    assert_eq!(v["found"].as_array().unwrap().len(), 3, "{v:#}");
}

/// A stand-in for node_exporter: its landing page at `/`, metrics at
/// `/metrics`, Python's answer to anything else; logs each request line.
const NODE_EXPORTER: &str = r#"
import http.server, sys
PAGE = b'<html><head><title>Node Exporter</title></head><body><h1>Node Exporter</h1><p><a href="/metrics">Metrics</a></p></body></html>'
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGE if self.path == "/" else b"node_cpu_seconds_total 1\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
print("serving", file=sys.stderr, flush=True)
s.serve_forever()
"#;
