//! **Scenario 6: link measurement** — `rlx-discover browse --links`
//! beside iperf3 on the same tbf-shaped links in the same run:
//!
//! - accuracy: two agents behind links shaped to 100 Mbit/s and 1 Gbit/s
//!   (both directions: the host's `eth0` and its switch port), ours at the
//!   default 250 ms window and at 50 ms against `iperf3 -t 2`, up
//!   (coordinator to agent) and down;
//! - cost: each node's measurement (`link.took_ms`), and a whole browse of
//!   50 agents (10 in quick mode) behind 1 Gbit/s links with `--links`
//!   against the same browse without it;
//! - discovery with `--links` off: the browse of the two agents without
//!   `--links`, and, when `RLX_BENCH_BASELINE_DISCOVER` names the binary
//!   of the commit before link measurement, that binary's same browse.

use crate::ctx::Ctx;
use crate::peers::{agent_command, write_caps, STARTUP};
use crate::proc::run_timed;
use anyhow::{Context, Result};
use rlx_lab::{Lab, LabOptions, LabProcess};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub(crate) const OURS: &str = "rlx-discover browse --links";
/// Ours with short windows: the accuracy-for-time trade.
pub(crate) const SHORT: &str = "rlx-discover browse --links --link-window-ms 50";
/// Distinct from the mdns scenario's "rlx-discover browse", whose command
/// differs (the commands table is keyed by tool).
const PLAIN: &str = "rlx-discover browse, links off";
const BASELINE: &str = "rlx-discover browse, commit before links";
pub(crate) const IPERF: &str = "iperf3 -t 2";

/// The shaped links of the accuracy case: case name, tbf rate and burst.
pub(crate) const SHAPES: [(&str, &str, &str); 2] = [
    ("100 Mbit/s", "100mbit", "128kb"),
    ("1 Gbit/s", "1gbit", "1mb"),
];

fn tc(ns: &str, dev: &str, rate: &str, burst: &str) -> Result<()> {
    let st = Command::new("ip")
        .args([
            "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
        ])
        .args(["rate", rate, "burst", burst, "latency", "20ms"])
        .status()?;
    anyhow::ensure!(st.success(), "tc qdisc add dev {dev} in {ns}: {st}");
    Ok(())
}

/// Shapes host `i`'s link to `rate` both ways.
fn shape(lab: &Lab, i: usize, rate: &str, burst: &str) -> Result<()> {
    let h = lab.host(i);
    tc(&h.ns, &h.iface, rate, burst)?;
    let sw = lab.switch_ns().context("a switched lab")?;
    tc(
        sw,
        h.switch_port.as_deref().context("a switch port")?,
        rate,
        burst,
    )
}

/// Starts one agent per host `1..=n` and waits until each announced.
fn agents(ctx: &Ctx, lab: &Lab, n: usize) -> Result<Vec<LabProcess>> {
    let mut procs = Vec::new();
    for i in 1..=n {
        let (caps, _) = write_caps(ctx.work.path(), i)?;
        let mut c = agent_command(lab, i, &ctx.bins.agent, &caps, i);
        // Keyless agents measure only when told to, a few times a minute
        // per address; the benchmark measures each many times.
        c.args(["--measure", "any", "--measure-per-minute", "600"]);
        procs.push(lab.spawn(i, c)?);
    }
    for p in &procs {
        p.wait_for_output("mDNS: announced on", STARTUP)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(procs)
}

/// One browse from host 0 with `bin`; its wall time and JSON. `links`:
/// `--links` with that window, ms.
fn browse(
    lab: &Lab,
    bin: &PathBuf,
    links: Option<u64>,
    browse_ms: u64,
) -> Result<(f64, serde_json::Value)> {
    let mut c = lab.command(0, bin);
    c.args(["browse", "--json", "--browse-ms", &browse_ms.to_string()]);
    if let Some(w) = links {
        c.args(["--links", "--link-window-ms", &w.to_string()]);
    }
    let t = run_timed(&mut c, Duration::from_secs(300))?;
    let v: serde_json::Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
    Ok((t.wall_ms(), v))
}

fn nodes(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["nodes"].as_array().cloned().unwrap_or_default()
}

/// A browse node's measured link (`AddedNode::measured_link`; `link` is
/// the agent's link facts, which carry no rates). Null when not measured.
fn measured(node: &serde_json::Value) -> &serde_json::Value {
    &node["measured_link"]
}

/// iperf3's receiver-side rate from host 0 to host `i` (`reverse`: back).
fn iperf3(lab: &Lab, i: usize, reverse: bool) -> Result<f64> {
    let mut c = lab.command(0, "iperf3");
    c.args(["-c", &lab.host(i).ip.to_string(), "-t", "2", "-J"]);
    if reverse {
        c.arg("-R");
    }
    let t = run_timed(&mut c, Duration::from_secs(30))?;
    let v: serde_json::Value = serde_json::from_str(&t.stdout).context("iperf3 -J output")?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e6)
        .with_context(|| {
            format!(
                "no end.sum_received in iperf3's output: {}",
                t.stderr_tail(3)
            )
        })
}

/// The windows measured: the default, and a short one for the trade of
/// accuracy against time.
const WINDOWS: [(&str, u64); 2] = [(OURS, 250), (SHORT, 50)];

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !rlx_lab::kit::peer::on_path("iperf3") {
        ctx.not_measured(
            "links: accuracy",
            "iperf3 is not installed (apt-get install iperf3)",
        );
        return Ok(());
    }
    ctx.command(
        OURS,
        "rlx-discover browse --links --json --browse-ms 1500 (3000 for 50 agents)",
    );
    ctx.command(SHORT, "rlx-discover browse --links --link-window-ms 50 --json --browse-ms 1500 (3000 for 50 agents)");
    ctx.command(
        PLAIN,
        "rlx-discover browse --json --browse-ms 1500 (3000 for 50 agents)",
    );
    ctx.command(
        IPERF,
        "iperf3 -c AGENT -t 2 -J [-R]  (server: iperf3 -s in the agent's namespace)",
    );
    ctx.notes.push(
        "links: coordinator in host 0; agents behind links shaped with tbf in both directions \
         (the host's eth0 and its switch port; latency 20ms; burst 128kb at 100mbit, 1mb at \
         1gbit). Ours: 7 round trips, then each way a transfer of at most 250 ms (the default) \
         or 50 ms (--link-window-ms 50), ended by its receiver as soon as the rate is steady \
         (after at least 40 ms, the two halves of the measured window within 3%), the first \
         quarter left out as warm-up; one node at a time per coordinator interface. node_ms is \
         one node's whole measurement; on the 100 Mbit/s link it includes the sender's socket \
         buffer draining after the receiver ended the transfer. iperf3 -t 2 runs in the same \
         namespaces between our runs; both rates are the receiver's. vs ours on an iperf3 row \
         is iperf3's rate / ours at the default window."
            .into(),
    );
    let reps = ctx.reps;
    {
        let lab = Lab::new(LabOptions {
            hosts: 3,
            ipv6: false,
        })?;
        for (i, (_, rate, burst)) in SHAPES.iter().enumerate() {
            shape(&lab, i + 1, rate, burst)?;
        }
        let _agents = agents(ctx, &lab, 2)?;
        let _servers = (1..=2)
            .map(|i| {
                let mut c = lab.command(i, "iperf3");
                c.args(["-s", "--forceflush"]);
                let p = lab.spawn(i, c)?;
                p.wait_for_output("Server listening", STARTUP)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                Ok(p)
            })
            .collect::<Result<Vec<_>>>()?;
        let baseline = std::env::var_os("RLX_BENCH_BASELINE_DISCOVER").map(PathBuf::from);
        if let Some(b) = &baseline {
            ctx.command(
                BASELINE,
                format!(
                    "rlx-discover browse --json --browse-ms 1500, the binary built from the commit \
                     before link measurement (RLX_BENCH_BASELINE_DISCOVER={})",
                    b.display()
                ),
            );
        } else {
            ctx.not_measured(
                "links: discovery before links",
                "RLX_BENCH_BASELINE_DISCOVER not set (the binary of the commit before links)",
            );
        }
        let two = "discovery, 2 agents";
        for rep in 0..reps {
            for (tool, window) in WINDOWS {
                let (wall, v) = browse(&lab, &ctx.bins.discover, Some(window), 1500)?;
                let found = nodes(&v);
                ctx.record(
                    "links",
                    two,
                    tool,
                    "wall_ms",
                    rep,
                    Some(wall),
                    Some(found.len() as u64),
                    Some(2),
                    "",
                );
                let why = v["report"]["link_problems"].to_string();
                for (k, (case, ..)) in SHAPES.iter().enumerate() {
                    let name = crate::peers::node_name(k + 1);
                    let link = found
                        .iter()
                        .find(|n| n["hostname"] == name.as_str())
                        .map(|n| measured(n).clone())
                        .unwrap_or_default();
                    let note = if link.is_null() {
                        why.clone()
                    } else {
                        String::new()
                    };
                    for (metric, key) in [
                        ("up_mbps", "up_mbps"),
                        ("down_mbps", "down_mbps"),
                        ("node_ms", "took_ms"),
                        // Microseconds: a LAN round trip is a fraction of a ms.
                        ("rtt_us", "rtt_ms"),
                    ] {
                        ctx.record(
                            "links",
                            case,
                            tool,
                            metric,
                            rep,
                            link[key]
                                .as_f64()
                                .map(|x| if key == "rtt_ms" { x * 1000.0 } else { x }),
                            None,
                            None,
                            note.clone(),
                        );
                    }
                }
            }
            for (k, (case, ..)) in SHAPES.iter().enumerate() {
                let up = iperf3(&lab, k + 1, false).ok();
                ctx.record("links", case, IPERF, "up_mbps", rep, up, None, None, "");
                let down = iperf3(&lab, k + 1, true).ok();
                ctx.record("links", case, IPERF, "down_mbps", rep, down, None, None, "");
            }
            let (wall, v) = browse(&lab, &ctx.bins.discover, None, 1500)?;
            ctx.record(
                "links",
                two,
                PLAIN,
                "wall_ms",
                rep,
                Some(wall),
                Some(nodes(&v).len() as u64),
                Some(2),
                "",
            );
            if let Some(b) = &baseline {
                let (wall, v) = browse(&lab, b, None, 1500)?;
                ctx.record(
                    "links",
                    two,
                    BASELINE,
                    "wall_ms",
                    rep,
                    Some(wall),
                    Some(nodes(&v).len() as u64),
                    Some(2),
                    "",
                );
            }
        }
    }

    let n = if ctx.quick { 10 } else { 50 };
    let lab = Lab::new(LabOptions {
        hosts: n + 1,
        ipv6: false,
    })?;
    for i in 1..=n {
        shape(&lab, i, "1gbit", "1mb")?;
    }
    let _agents = agents(ctx, &lab, n)?;
    let case = format!("{n} agents at 1 Gbit/s");
    for rep in 0..reps {
        for (tool, window) in WINDOWS {
            let (wall, v) = browse(&lab, &ctx.bins.discover, Some(window), 3000)?;
            let measured: Vec<f64> = nodes(&v)
                .iter()
                .filter_map(|n| measured(n)["took_ms"].as_f64())
                .collect();
            let count = Some(measured.len() as u64);
            ctx.record(
                "links",
                &case,
                tool,
                "wall_ms",
                rep,
                Some(wall),
                count,
                Some(n as u64),
                "",
            );
            ctx.record(
                "links",
                &case,
                tool,
                "measure_ms",
                rep,
                Some(measured.iter().sum()),
                count,
                Some(n as u64),
                "the nodes' took_ms summed: one at a time through the one interface",
            );
        }
        let (wall, v) = browse(&lab, &ctx.bins.discover, None, 3000)?;
        ctx.record(
            "links",
            &case,
            PLAIN,
            "wall_ms",
            rep,
            Some(wall),
            Some(nodes(&v).len() as u64),
            Some(n as u64),
            "",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_discover::AddedNode;

    /// The bench reads browse's JSON by key; a renamed field would turn
    /// every rate into "unfinished" with the scenario still passing, as it
    /// once did. So the key is checked against the real type's JSON.
    #[test]
    fn the_measured_rates_are_read_from_the_field_browse_writes_them_to() {
        let m = rlx_proto::handshake::LinkMeasurement {
            rtt_ms: 0.2,
            rtt_samples_ms: vec![0.2],
            up_mbps: 95.5,
            down_mbps: 96.0,
            up_bytes: 1,
            down_bytes: 1,
            took_ms: 190,
            udp: None,
        };
        let node = AddedNode {
            identity: rlx_discover::Pinning::Unpinned,
            node_key: None,
            addr: "10.0.0.2:9100".into(),
            host: "10.0.0.2".into(),
            hostname: "n1".into(),
            id: String::new(),
            sources: vec![],
            evidence: rlx_discover::Evidence::Authenticated,
            device: "cpu".into(),
            mem_bytes: 0,
            device_mems: vec![],
            accelerators: vec![],
            link: None,
            cores: 1,
            cluster: None,
            heard_on: None,
            found_ms: 0,
            also_at: vec![],
            measured_link: Some(m),
            agent: Some("10.0.0.2:6184".into()),
            worker_listening: None,
            worker_held_by: None,
        };
        let v = serde_json::json!({ "nodes": [node] });
        let n = &nodes(&v)[0];
        assert_eq!(measured(n)["up_mbps"].as_f64(), Some(95.5));
        assert_eq!(measured(n)["took_ms"].as_f64(), Some(190.0));
    }
}
