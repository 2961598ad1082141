//! **What a node key costs a handshake**: the same handshake
//! timed against agents that answer with a node key (an Ed25519 signature
//! of every reply, which the coordinator verifies before it pins the key)
//! and against agents without one (an agent with no state directory, which
//! answers as agents before node keys did), with and without a cluster key.
//!
//! The coordinator's side is this process, entered into the lab's host 0
//! (`rlx_proto::handshake::query`, the call `expand` and `watch` make for
//! every node): one handshake at a time, so that the figure is the
//! handshake's own latency and not a queue's. The agents are real
//! `rlx-agent` processes, one per lab host, across the lab's veth bridge.
//!
//! Lab: h0 the coordinator; h1 no keys, h2 node key, h3 cluster key,
//! h4 cluster and node keys.

use super::key::keygen;
use crate::ctx::Ctx;
use crate::peers::{self, AGENT_PORT};
use crate::results::median;
use anyhow::{Context, Result};
use rlx_lab::{Lab, LabOptions, LabProcess};
use rlx_proto::keys::KeyRing;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const TOOL: &str = "rlx_proto::handshake::query (the coordinator's handshake)";

/// Handshakes timed per repetition and agent, after [`WARM_UP`] untimed ones.
const TIMED: usize = 300;
/// Handshakes before the timed ones (connections, caches, the CPU's clock).
const WARM_UP: usize = 30;
/// One handshake's deadline: a failure is counted, never waited out.
const DEADLINE: Duration = Duration::from_secs(2);

/// The four agents: (case, cluster key, node key).
pub(crate) const AGENTS: [(&str, bool, bool); 4] = [
    ("no cluster key, no node key", false, false),
    ("no cluster key, node key", false, true),
    ("cluster key, no node key", true, false),
    ("cluster key, node key", true, true),
];

/// One agent's timed round: handshake times (µs) and failures.
struct Round {
    micros: Vec<f64>,
    failed: usize,
    /// Whether every reply carried a verified node key.
    node_keyed: bool,
}

/// Times `n` handshakes with `addr`, one at a time (after the warm-up).
fn round(addr: SocketAddr, keys: Option<&KeyRing>, n: usize, warm: usize) -> Round {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let mut r = Round {
            micros: Vec::with_capacity(n),
            failed: 0,
            node_keyed: true,
        };
        for k in 0..warm + n {
            let t = Instant::now();
            let got = rlx_proto::handshake::query(addr, DEADLINE, keys, None).await;
            let us = t.elapsed().as_secs_f64() * 1e6;
            if k < warm {
                continue;
            }
            match got {
                Ok(reply) => {
                    r.node_keyed &= reply.node_key.is_some();
                    r.micros.push(us);
                }
                Err(_) => r.failed += 1,
            }
        }
        r
    })
}

/// The `q` quantile (0-1) of sorted `v`.
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() as f64 - 1.0) * q).round() as usize;
    s.get(i).copied()
}

/// Starts the agent of `AGENTS[i - 1]` on lab host `i`: with a state
/// directory (so a node key) or with an empty `--root` (so none).
fn agent(ctx: &Ctx, lab: &Lab, dir: &Path, i: usize, key: &Path) -> Result<LabProcess> {
    let (_, cluster, node) = AGENTS[i - 1];
    let (caps, _) = peers::write_caps(dir, i)?;
    let mut c = peers::agent_command(lab, i, &ctx.bins.agent, &caps, i);
    if node {
        let state = dir.join(format!("state-{i}"));
        std::fs::create_dir_all(&state)?;
        c.arg("--state-dir").arg(state);
    } else {
        let root = dir.join(format!("root-{i}"));
        std::fs::create_dir_all(&root)?;
        c.arg("--root").arg(root);
    }
    if cluster {
        c.arg("--key-file").arg(key);
    }
    let p = lab.spawn(i, c)?;
    p.wait_for_output("answering the handshake", peers::STARTUP)
        .map_err(|e| anyhow::anyhow!("agent on h{i}: {e}"))?;
    Ok(p)
}

/// Runs the node-key handshake case.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "trust: handshake with and without node keys",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let dir = ctx.work.path().join("identity");
    std::fs::create_dir_all(&dir)?;
    let key_path = dir.join("cluster.key");
    keygen(ctx, &key_path)?;
    let ring = KeyRing::load(&key_path).context("loading the bench's cluster key")?;
    let lab = Lab::new(LabOptions {
        hosts: AGENTS.len() + 1,
        ipv6: false,
    })?;
    let agents: Vec<LabProcess> = (1..=AGENTS.len())
        .map(|i| agent(ctx, &lab, &dir, i, &key_path))
        .collect::<Result<_>>()?;
    let (timed, warm) = if ctx.quick { (40, 5) } else { (TIMED, WARM_UP) };
    ctx.command(
        "rlx-agent (node key or none)",
        "rlx-agent --caps-file caps.json --name node-i --interface eth0 \
         (--state-dir DIR: node key | --root EMPTY_DIR: none) [--key-file cluster.key]",
    );
    ctx.command(
        TOOL,
        format!(
            "in lab host 0: {warm} untimed, then {timed} timed handshakes one at a time with \
             each agent, per repetition"
        ),
    );
    ctx.notes.push(format!(
        "trust: handshake with and without node keys (docs/security.md, \"Who is who: node keys and pins\"): {timed} handshakes one at a \
         time per agent and repetition, after {warm} untimed, from lab host 0 to real agents \
         on hosts 1-4 (`rlx_proto::handshake::query`, what `expand` and `watch` call for each \
         node: TCP connect, hello, reply, the cluster key's proof checked when there is one, \
         the node key's signature verified when there is one). `median_us`, `p95_us`: one \
         handshake, this 2-core machine's microseconds; `failed` must be 0. The ratio of the \
         node-key rows to the rows without is the cost."
    ));
    let addr = |i: usize| SocketAddr::new(lab.host(i).ip.into(), AGENT_PORT);
    for rep in 0..ctx.reps {
        // The order rotates, so that no agent is always timed first.
        for k in 0..AGENTS.len() {
            let i = (k + rep as usize) % AGENTS.len() + 1;
            let (case, cluster, node) = AGENTS[i - 1];
            let ns = lab.host(0).ns.clone();
            let keys = cluster.then(|| ring.clone());
            let a = addr(i);
            let r =
                rlx_lab::kit::netns::in_netns(&ns, move || round(a, keys.as_ref(), timed, warm))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            let note = format!(
                "{} of {timed} answered{}",
                r.micros.len(),
                if node && !r.node_keyed {
                    "; a reply without the node key"
                } else {
                    ""
                }
            );
            let n = r.micros.len() as u64;
            let want = Some(timed as u64);
            let figures = [
                ("median_us", median(&r.micros)),
                ("p95_us", quantile(&r.micros, 0.95)),
            ];
            for (metric, value) in figures {
                ctx.record(
                    "trust",
                    case,
                    TOOL,
                    metric,
                    rep,
                    value,
                    Some(n),
                    want,
                    &note,
                );
            }
            ctx.record(
                "trust",
                case,
                TOOL,
                "failed",
                rep,
                Some(r.failed as f64),
                None,
                None,
                "",
            );
        }
    }
    drop(agents);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_95th_percentile_of_one_to_a_hundred_is_95_and_of_nothing_is_none() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(quantile(&v, 0.95), Some(95.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
