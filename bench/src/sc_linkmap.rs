//! **Scenario 12: the all-pairs link map** — `rlx-discover links` on the
//! lab of issue 40, beside iperf3 and ping on each pair alone:
//!
//! - 16 boxes (8 in quick mode) on two bridges joined by a trunk shaped to
//!   200 Mbit/s each way; every box's access link shaped to 100 Mbit/s
//!   both ways (its `eth0` and its switch port), except box 2 at 10, box 3
//!   asymmetric (100 up, 20 down), box 4 dropping 2% each way (nftables),
//!   and box 5 behind a standing queue (tbf with room for 200 ms of queue
//!   towards it, and a bulk flow into it from the coordinator's host; the
//!   flow keeps the queue only partly full: ping reads 3.5-15 ms through
//!   it, 2026-12-07); boxes 1
//!   and 6 are also joined by a direct veth shaped to 1 Gbit/s, which
//!   their agents call Thunderbolt.
//! - Per rep: a whole map (`links --json`): its wall time, how many
//!   directions are within 5% of iperf3 on that pair alone, the worst
//!   deviation, RTT order against ping (pairs whose delays differ by 2 ms
//!   or more), the loss of box 4's directions against a 2,000-datagram
//!   iperf3 UDP probe, the bottleneck groups and their capacity.
//! - A box that joins: the map kept in a file without box 16, then box 16's
//!   agent started and `links --map` run again: its wall time and the pairs
//!   it measured.

use crate::ctx::Ctx;
use crate::peers::{node_name, sim_caps, STARTUP};
use crate::proc::run_timed;
use anyhow::{Context, Result};
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) const OURS: &str = "rlx-discover links";
pub(crate) const IPERF: &str = "iperf3 -t 2, pair alone";
pub(crate) const UDP: &str = "iperf3 -u, 2000 datagrams, pair alone";
pub(crate) const PING: &str = "ping -c 20, pair alone";
const SCENARIO: &str = "linkmap";

/// The direct cable's addresses on boxes 1 and 6.
const CABLE: [&str; 2] = ["10.99.7.1", "10.99.7.2"];

/// The token bucket of a `tbf` at `rate` (`10mbit`, `1gbit`): a
/// millisecond of the rate, at least 16 KB. A real link never sends above
/// its rate; a bigger bucket lets a fresh flow burst above it, which reads
/// as a faster link in a short window and in iperf3's two seconds alike
/// (a 256 KB bucket made a 10 Mbit/s link read 10.24 in iperf3 -t 2, a
/// 16 KB one 9.62, the rate less the headers; measured here, 2026-12-07).
fn burst(rate: &str) -> String {
    let (num, unit) = rate.split_at(
        rate.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rate.len()),
    );
    let per_s: u64 = num.parse::<u64>().unwrap_or(0)
        * match unit {
            "gbit" => 1_000_000_000,
            "mbit" => 1_000_000,
            _ => 1_000,
        };
    format!("{}kb", (per_s / 8 / 1000 / 1000).max(16))
}

/// `tc qdisc replace ... tbf` on `dev` in `ns`.
fn tbf(ns: &str, dev: &str, rate: &str, latency: &str) -> Result<()> {
    let st = Command::new("ip")
        .args(["netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev])
        .args([
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            &burst(rate),
            "latency",
            latency,
        ])
        .status()?;
    anyhow::ensure!(st.success(), "tc qdisc replace dev {dev} in {ns}: {st}");
    Ok(())
}

/// The lab: hosts `0..=n` (host 0 the coordinator), two bridges, the
/// shapes of the module docs, the cable.
fn build(n: usize) -> Result<Lab> {
    let per_bridge = n / 2 + 1;
    let lab = Lab::chained(
        LabOptions {
            hosts: n + 1,
            ipv6: false,
        },
        per_bridge,
    )?;
    let sw = lab.switch_ns().context("a switched lab")?.to_string();
    for end in ["tk0", "tb0"] {
        tbf(&sw, end, "200mbit", "20ms")?;
    }
    for i in 1..=n {
        let h = lab.host(i);
        let port = h.switch_port.clone().context("a switch port")?;
        let (up, down) = match i {
            2 => ("10mbit", "10mbit"),
            3 => ("100mbit", "20mbit"),
            _ => ("100mbit", "100mbit"),
        };
        tbf(&h.ns, &h.iface, up, "20ms")?;
        tbf(&sw, &port, down, if i == 5 { "200ms" } else { "20ms" })?;
    }
    lab.set_loss(4, 2)?;
    let (a, b) = (lab.host(1).ns.clone(), lab.host(6).ns.clone());
    let ok = |c: &mut Command| -> Result<()> {
        let st = c.status()?;
        anyhow::ensure!(st.success(), "{c:?}: {st}");
        Ok(())
    };
    ok(Command::new("ip").args([
        "-n", &a, "link", "add", "tbolt0", "type", "veth", "peer", "name", "tbolt0", "netns", &b,
    ]))?;
    for (ns, ip) in [(&a, CABLE[0]), (&b, CABLE[1])] {
        ok(Command::new("ip").args([
            "-n",
            ns,
            "addr",
            "add",
            &format!("{ip}/30"),
            "dev",
            "tbolt0",
        ]))?;
        ok(Command::new("ip").args(["-n", ns, "link", "set", "tbolt0", "up"]))?;
        tbf(ns, "tbolt0", "1gbit", "20ms")?;
    }
    Ok(lab)
}

/// Box `i`'s agent, keyed, its caps naming its LAN link (and the cable).
fn agent(ctx: &Ctx, lab: &Lab, i: usize, key: &Path) -> Result<LabProcess> {
    let mut caps = sim_caps(i);
    let link = |name: &str, kind: &str, ip: String| rlx_proto::caps::LinkInfo {
        name: name.into(),
        kind: kind.into(),
        speed_mbps: None,
        mtu: 1500,
        addrs: vec![ip.parse().expect("an address")],
        rdma: false,
    };
    caps.links = vec![link("eth0", "ethernet", lab.host(i).ip.to_string())];
    match i {
        1 => caps
            .links
            .push(link("tbolt0", "thunderbolt", CABLE[0].into())),
        6 => caps
            .links
            .push(link("tbolt0", "thunderbolt", CABLE[1].into())),
        _ => {}
    }
    let path = ctx.work.path().join(format!("linkmap-caps-{i}.json"));
    std::fs::write(&path, caps.to_json())?;
    let mut c = lab.command(i, &ctx.bins.agent);
    c.arg("--caps-file")
        .arg(&path)
        .args(["--name", &node_name(i)])
        .arg("--key-file")
        .arg(key)
        .env("RUST_LOG", "info");
    let p = lab.spawn(i, c)?;
    p.wait_for_output("mDNS: announced on", STARTUP)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(p)
}

/// `rlx-discover links --json` (with `--map FILE`) from host 0: the map
/// and the run's wall time and log.
fn links(ctx: &Ctx, lab: &Lab, cfg: &Path, map: Option<&Path>) -> Result<(Value, f64, String)> {
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["links", "--json"]);
    if let Some(m) = map {
        c.arg("--map").arg(m);
    }
    // Tuning (see [`dump_dir`]) wants the rounds and batches in the log.
    let level = if dump_dir().is_some() {
        "debug"
    } else {
        "info"
    };
    c.arg(cfg).env("RUST_LOG", level);
    let t = run_timed(&mut c, Duration::from_secs(900))?;
    let v: Value = serde_json::from_str(t.stdout.trim())
        .with_context(|| format!("links printed no map: {}", t.stderr_tail(5)))?;
    Ok((v, t.wall_ms(), t.stderr.clone()))
}

/// The map's LAN figures per ordered pair of hosts: (rate, RTT ms, loss %).
fn figures(lab: &Lab, map: &Value) -> BTreeMap<(usize, usize), (f64, f64, Option<f64>)> {
    let host_of = |b: &Value| {
        let name = b["hostname"].as_str().unwrap_or_default();
        (1..lab.hosts().len()).find(|&i| node_name(i) == name)
    };
    let boxes: Vec<Option<usize>> = map["boxes"]
        .as_array()
        .map(|a| a.iter().map(host_of).collect())
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for p in map["pairs"].as_array().into_iter().flatten() {
        let (Some(Some(a)), Some(Some(b))) = (
            p["a"].as_u64().and_then(|i| boxes.get(i as usize)),
            p["b"].as_u64().and_then(|i| boxes.get(i as usize)),
        ) else {
            continue;
        };
        let lan = lab.host(*b).ip.to_string();
        let Some(path) = p["paths"]
            .as_array()
            .and_then(|ps| ps.iter().find(|x| x["b_addr"] == lan.as_str()))
        else {
            continue;
        };
        let rtt = path["rtt_ms"].as_f64().unwrap_or(f64::NAN);
        for (from, to, rate, udp) in [(*a, *b, "ab_mbps", "ab_udp"), (*b, *a, "ba_mbps", "ba_udp")]
        {
            let r = path[rate].as_f64().unwrap_or(f64::NAN);
            out.insert((from, to), (r, rtt, path[udp]["loss_pct"].as_f64()));
        }
    }
    out
}

/// iperf3's receiver-side rate from host `a` to host `b`, alone.
fn iperf3(lab: &Lab, a: usize, b: usize) -> Option<f64> {
    let mut c = lab.command(a, "iperf3");
    c.args(["-c", &lab.host(b).ip.to_string(), "-t", "2", "-J"]);
    let t = run_timed(&mut c, Duration::from_secs(30)).ok()?;
    let v: Value = serde_json::from_str(&t.stdout).ok()?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e6)
}

/// The loss of 2,000 UDP datagrams from host `a` to host `b`, percent.
fn udp_loss(lab: &Lab, a: usize, b: usize) -> Option<f64> {
    let mut c = lab.command(a, "iperf3");
    c.args([
        "-c",
        &lab.host(b).ip.to_string(),
        "-u",
        "-b",
        "6M",
        "-l",
        "72",
    ])
    .args(["-k", "2000", "-J"]);
    let t = run_timed(&mut c, Duration::from_secs(30)).ok()?;
    let v: Value = serde_json::from_str(&t.stdout).ok()?;
    v["end"]["sum"]["lost_percent"].as_f64()
}

/// ping's average round trip from host `a` to host `b`, ms.
fn ping(lab: &Lab, a: usize, b: usize) -> Option<f64> {
    let mut c = lab.command(a, "ping");
    c.args(["-c", "20", "-i", "0.05", "-q", &lab.host(b).ip.to_string()]);
    let t = run_timed(&mut c, Duration::from_secs(30)).ok()?;
    // rtt min/avg/max/mdev = 0.041/0.052/0.071/0.008 ms
    let line = t.stdout.lines().find(|l| l.contains("min/avg/max"))?;
    line.split('=')
        .nth(1)?
        .trim()
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// The ground truth: every ordered pair's iperf3 rate and ping RTT, box 4's
/// directions' UDP loss.
#[derive(serde::Serialize, serde::Deserialize)]
struct Truth {
    #[serde(with = "pairs")]
    rate: BTreeMap<(usize, usize), f64>,
    #[serde(with = "pairs")]
    rtt: BTreeMap<(usize, usize), f64>,
    #[serde(with = "pairs")]
    loss: BTreeMap<(usize, usize), f64>,
}

/// A map keyed by ordered pairs, in JSON as `[[a, b, x], ...]`.
mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<(usize, usize), f64>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let v: Vec<(usize, usize, f64)> = m.iter().map(|(&(a, b), &x)| (a, b, x)).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<(usize, usize), f64>, D::Error> {
        let v = Vec::<(usize, usize, f64)>::deserialize(d)?;
        Ok(v.into_iter().map(|(a, b, x)| ((a, b), x)).collect())
    }
}

/// For tuning the map, `RLX_BENCH_LINKMAP_DUMP=DIR` keeps each map
/// (`map-REP.json`) and the ground truth (`truth-N.json`) there, and takes
/// the truth from that file when it is already there: the lab is built
/// the same every time, and the truth takes ten minutes at 16 boxes. A
/// run that publishes figures must not set it (the truth of another
/// machine's run would be compared). With it, `RLX_BENCH_LINKMAP_BOXES`
/// (an even number, 4 to 16) sizes the lab of a quick run.
fn dump_dir() -> Option<PathBuf> {
    std::env::var_os("RLX_BENCH_LINKMAP_DUMP").map(PathBuf::from)
}

/// [`truth`], or the one kept in [`dump_dir`].
fn truth_kept(lab: &Lab, n: usize) -> Result<Truth> {
    let Some(dir) = dump_dir() else {
        return Ok(truth(lab, n));
    };
    let file = dir.join(format!("truth-{n}.json"));
    if let Ok(text) = std::fs::read_to_string(&file) {
        return serde_json::from_str(&text).with_context(|| format!("{}", file.display()));
    }
    let t = truth(lab, n);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(&file, serde_json::to_string(&t)?)?;
    Ok(t)
}

fn truth(lab: &Lab, n: usize) -> Truth {
    let mut t = Truth {
        rate: BTreeMap::new(),
        rtt: BTreeMap::new(),
        loss: BTreeMap::new(),
    };
    for a in 1..=n {
        for b in 1..=n {
            if a == b {
                continue;
            }
            if let Some(r) = iperf3(lab, a, b) {
                t.rate.insert((a, b), r);
            }
            if a < b {
                if let Some(r) = ping(lab, a, b) {
                    t.rtt.insert((a, b), r);
                    t.rtt.insert((b, a), r);
                }
            }
            if a == 4 || b == 4 {
                if let Some(l) = udp_loss(lab, a, b) {
                    t.loss.insert((a, b), l);
                }
            }
        }
    }
    t
}

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    for tool in ["iperf3", "ping", "nft"] {
        if !rlx_lab::kit::peer::on_path(tool) {
            ctx.not_measured("linkmap", format!("{tool} is not installed"));
            return Ok(());
        }
    }
    // Tuning may ask for the full lab in a quick run (one map).
    let boxes = std::env::var("RLX_BENCH_LINKMAP_BOXES").ok();
    let n = match boxes.and_then(|b| b.parse::<usize>().ok()) {
        Some(b) if dump_dir().is_some() && (4..=16).contains(&b) && b % 2 == 0 => b,
        _ if ctx.quick => 8,
        _ => 16,
    };
    ctx.command(
        OURS,
        "rlx-discover links --json CLUSTER (a key_file, no nodes: found by mDNS)",
    );
    ctx.command(
        IPERF,
        "iperf3 -c B -t 2 -J from A (server: iperf3 -s in B), each ordered pair alone",
    );
    ctx.command(
        UDP,
        "iperf3 -c B -u -b 6M -l 72 -k 2000 -J from A, box 4's pairs alone",
    );
    ctx.command(PING, "ping -c 20 -i 0.05 -q B from A, each pair alone");
    ctx.notes.push(format!(
        "linkmap: {n} boxes on two bridges joined by a 200 Mbit/s trunk (tbf each way), access \
         links 100 Mbit/s both ways (tbf on eth0 and the switch port, a bucket of 1 ms of the \
         rate (at least 16 KB), latency 20ms) except box 2 at 10, box 3 at 100 up / 20 down, \
         box 4 with 2% drop each way (nftables), box 5 behind a tbf with room for 200 ms of queue towards it and a bulk \
         iperf3 flow from host 0 into it (the flow keeps the queue partly full: ping reads \
         3.5-15 ms through it); boxes 1 and 6 also on a direct veth at 1 Gbit/s (Thunderbolt in \
         their caps). The truth runs after the maps, each pair alone; within_5pct counts the \
         directions whose LAN-path rate is within 5% of iperf3's; rtt_order_wrong counts pairs \
         of pairs whose ping RTTs differ by 2 ms or more and whose map RTTs are in the other \
         order; loss_err_pts is the largest |ours - iperf3's| over box 4's directions."
    ));
    let lab = build(n)?;
    let key = ctx.work.path().join("linkmap.key");
    let st = Command::new(&ctx.bins.discover)
        .arg("keygen")
        .arg(&key)
        .status()?;
    anyhow::ensure!(st.success(), "rlx-discover keygen: {st}");
    let cfg = ctx.work.path().join("linkmap.toml");
    std::fs::write(
        &cfg,
        format!(
            "model = \"m\"\n[discover]\nkey_file = \"{}\"\nckpt_dir = \"/m\"\n",
            key.display()
        ),
    )?;
    let _servers = (1..=n)
        .flat_map(|i| [(i, "5201"), (i, "5202")])
        .filter(|&(i, port)| port == "5201" || i == 5)
        .map(|(i, port)| {
            let mut c = lab.command(i, "iperf3");
            c.args(["-s", "-p", port, "--forceflush"]);
            let p = lab.spawn(i, c)?;
            p.wait_for_output("Server listening", STARTUP)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(p)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut bulk = lab.command(0, "iperf3");
    bulk.args([
        "-c",
        &lab.host(5).ip.to_string(),
        "-p",
        "5202",
        "-t",
        "86400",
    ]);
    let _bulk = lab.spawn(0, bulk)?;
    let mut agents: Vec<LabProcess> = (1..=n)
        .map(|i| agent(ctx, &lab, i, &key))
        .collect::<Result<_>>()?;

    let case = format!("{n} boxes, two bridges");
    let mut maps = Vec::new();
    for rep in 0..ctx.reps {
        let (map, wall, log) = links(ctx, &lab, &cfg, None)?;
        let pairs = map["pairs"].as_array().map_or(0, Vec::len) as u64;
        let want = (n * (n - 1) / 2) as u64;
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "wall_ms",
            rep,
            Some(wall),
            Some(pairs),
            Some(want),
            "",
        );
        if let Some(dir) = dump_dir() {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join(format!("map-{rep}.json")), map.to_string())?;
            std::fs::write(dir.join(format!("map-{rep}.log")), &log)?;
        }
        maps.push(map);
    }
    let t = truth_kept(&lab, n)?;
    for (rep, map) in maps.iter().enumerate() {
        let rep = rep as u32;
        let f = figures(&lab, map);
        let (mut within, mut worst) = (0u64, 0.0f64);
        for (k, &truth_rate) in &t.rate {
            let Some(&(ours, ..)) = f.get(k) else {
                continue;
            };
            let dev = (ours / truth_rate - 1.0).abs() * 100.0;
            worst = worst.max(dev);
            if dev <= 5.0 {
                within += 1;
            }
        }
        let total = t.rate.len() as u64;
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "within_5pct",
            rep,
            Some(within as f64),
            Some(within),
            Some(total),
            "",
        );
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "worst_dev_pct",
            rep,
            Some(worst),
            None,
            None,
            "",
        );
        let rtts: Vec<((usize, usize), f64, f64)> = t
            .rtt
            .iter()
            .filter(|((a, b), _)| a < b)
            .filter_map(|(k, &truth_rtt)| f.get(k).map(|&(_, ours, _)| (*k, truth_rtt, ours)))
            .collect();
        let mut wrong = 0u64;
        for (i, x) in rtts.iter().enumerate() {
            for y in &rtts[i + 1..] {
                if (x.1 - y.1).abs() >= 2.0 && (x.1 < y.1) != (x.2 < y.2) {
                    wrong += 1;
                }
            }
        }
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "rtt_order_wrong",
            rep,
            Some(wrong as f64),
            None,
            None,
            "",
        );
        let err = t
            .loss
            .iter()
            .filter_map(|(k, &truth_loss)| {
                f.get(k)
                    .and_then(|x| x.2)
                    .map(|ours| (ours - truth_loss).abs())
            })
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "loss_err_pts",
            rep,
            err,
            None,
            None,
            "",
        );
        let groups = map["bottlenecks"].as_array().cloned().unwrap_or_default();
        ctx.record(
            SCENARIO,
            &case,
            OURS,
            "bottleneck_groups",
            rep,
            Some(groups.len() as f64),
            None,
            None,
            "",
        );
        // A way the trunk was never saturated has no figure: recorded only
        // where there is one.
        for (k, metric) in [("ab_mbps", "trunk_ab_mbps"), ("ba_mbps", "trunk_ba_mbps")] {
            if let Some(v) = groups.first().and_then(|g| g[k].as_f64()) {
                ctx.record(SCENARIO, &case, OURS, metric, rep, Some(v), None, None, "");
            }
        }
    }
    // The truth itself, summed up: what the 5% and the loss error are
    // measured against.
    let mut rates: Vec<f64> = t.rate.values().copied().collect();
    rates.sort_by(f64::total_cmp);
    for (metric, v) in [
        ("pairs_measured", Some(rates.len() as f64)),
        ("slowest_mbps", rates.first().copied()),
        ("fastest_mbps", rates.last().copied()),
        (
            "box4_loss_pct_max",
            t.loss
                .values()
                .copied()
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
        ),
    ] {
        ctx.record(SCENARIO, &case, IPERF, metric, 0, v, None, None, "");
    }

    // A box that joins a kept map.
    let file: PathBuf = ctx.work.path().join("linkmap-kept.json");
    let last = agents.pop().context("agents")?;
    drop(last);
    std::thread::sleep(Duration::from_secs(3));
    let _ = std::fs::remove_file(&file);
    links(ctx, &lab, &cfg, Some(&file))?;
    agents.push(agent(ctx, &lab, n, &key)?);
    let (_, wall, log) = links(ctx, &lab, &cfg, Some(&file))?;
    let measured = log
        .lines()
        .find(|l| l.contains("kept from before"))
        .and_then(|l| {
            l.split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse::<u64>().ok())
                .next_back()
        });
    ctx.record(
        SCENARIO,
        &format!("box {n} joins a kept map"),
        OURS,
        "wall_ms",
        0,
        Some(wall),
        measured,
        Some((n - 1) as u64),
        "",
    );
    Ok(())
}
