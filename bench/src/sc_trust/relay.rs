//! **A relay is not a node**, measured: the lab case of
//! `tests/trust/relay.rs`, repeated. A stranger that holds no key relays
//! its own worker port to a real keyed agent and announces that agent's TXT
//! under another instance name at its own address (`bench/py/relay.py`);
//! the coordinator runs `expand` with `key_file`.
//!
//! Per run, the counts that say whether the endpoint binding holds:
//! relays admitted (must be 0) with the agent's own mDNS unheard and heard;
//! whether the refusal says a relay or NAT is in between; the real agent
//! admitted at its own address when it is heard (1); and, with the agent
//! started with `--advertise RELAY:PORT` (a port-forward its operator
//! declares), the forward admitted at that endpoint (1).
//!
//! Lab: h0 the coordinator, h1 the keyed agent, h2 the stranger.

use super::key::keygen;
use crate::ctx::Ctx;
use crate::peers::{self, AGENT_PORT, PORT};
use crate::proc::{run_timed, Timed};
use anyhow::{Context, Result};
use rlx_lab::kit::PYTHON;
use rlx_lab::{Lab, LabOptions, LabProcess};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const TOOL: &str = "rlx-discover expand (key_file, mDNS)";
/// The stranger's instance name.
const RELAY: &str = "imp-relay";
/// What a refusal of a relayed proof must say (`proto/src/handshake/client.rs`).
const WORDING: &str = "relay or NAT is in between";
const CASE_DEAF: &str = "relay of a keyed agent, the agent's own mDNS not heard";
const CASE_HEARD: &str = "relay of a keyed agent, both heard";
const CASE_FORWARD: &str = "port-forward declared with rlx-agent --advertise";

/// How long an agent or the stranger may take to announce.
const UP: Duration = Duration::from_secs(60);

/// One `expand`, read: who was admitted and at which address, and why the
/// others were refused.
struct Expand {
    t: Timed,
    /// `addr` of every node of the finished list.
    nodes: Vec<String>,
    /// instance -> (addr, evidence) of every admitted node.
    admitted: BTreeMap<String, (String, String)>,
    /// host -> reason of every refusal.
    refused: BTreeMap<String, String>,
}

impl Expand {
    /// The relay among the admitted (by its instance or its address) or
    /// in the node list (by its address): 1 when it got in at all.
    fn relays_admitted(&self, relay_at: &str) -> usize {
        let added = self
            .admitted
            .iter()
            .any(|(h, (a, _))| h.as_str() == RELAY || a == relay_at);
        usize::from(added || self.nodes.iter().any(|a| a == relay_at))
    }

    /// 1 when the relay's refusal says why and names both endpoints.
    fn refusal_says_relay(&self, relay_at: &str, agent_at: &str) -> u64 {
        u64::from(
            self.refused.get(RELAY).is_some_and(|r| {
                r.contains(WORDING) && r.contains(relay_at) && r.contains(agent_at)
            }),
        )
    }

    /// What it did, for the notes: exit status, admitted, refused.
    fn describe(&self) -> String {
        let adm: Vec<String> = self
            .admitted
            .iter()
            .map(|(h, (a, e))| format!("{h} at {a} ({e})"))
            .collect();
        let why = self
            .refused
            .get(RELAY)
            .map(|r| r.chars().take(220).collect::<String>())
            .unwrap_or_else(|| "not refused".into());
        format!(
            "{}; admitted: {}; {RELAY} refused: {why}",
            self.t.describe_status(),
            if adm.is_empty() {
                "none".into()
            } else {
                adm.join(", ")
            }
        )
    }
}

fn expand(ctx: &Ctx, lab: &Lab, cfg: &Path) -> Result<Expand> {
    let mut c = lab.command(0, &ctx.bins.discover);
    c.args(["expand", "--format", "json"])
        .arg(cfg)
        .env("RUST_LOG", "warn");
    Expand::read(run_timed(&mut c, Duration::from_secs(120))?)
}

impl Expand {
    /// Reads what `expand --format json` printed.
    fn read(t: Timed) -> Result<Expand> {
        let v: Value = serde_json::from_str(t.stdout.trim()).unwrap_or_default();
        // The finished node list: an address here is what would be written.
        let nodes = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some(n["addr"].as_str()?.to_string()))
            .collect();
        let admitted = v["report"]["added"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let host = a["host"].as_str()?.to_string();
                let addr = a["addr"].as_str().unwrap_or_default().to_string();
                let evidence = a["evidence"].as_str().unwrap_or_default().to_string();
                Some((host, (addr, evidence)))
            })
            .collect();
        let refused = v["report"]["failed"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| Some((f["host"].as_str()?.into(), f["reason"].as_str()?.into())))
            .collect();
        anyhow::ensure!(
            !v.is_null(),
            "expand printed no JSON ({}): {}",
            t.describe_status(),
            t.stderr_tail(3)
        );
        Ok(Expand {
            t,
            nodes,
            admitted,
            refused,
        })
    }
}

/// The keyed agent `node-1` on h1, with `extra` flags, once it announced.
fn agent(ctx: &Ctx, lab: &Lab, dir: &Path, key: &Path, extra: &[String]) -> Result<LabProcess> {
    let (caps, _) = peers::write_caps(dir, 1)?;
    let mut c = peers::agent_command(lab, 1, &ctx.bins.agent, &caps, 1);
    c.arg("--key-file").arg(key).args(extra);
    let p = lab.spawn(1, c)?;
    p.wait_for_output("mDNS: announced on", UP)
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(p)
}

/// The stranger on h2, relaying to h1 and announcing [`RELAY`].
fn stranger(lab: &Lab, script: &Path) -> Result<LabProcess> {
    let mut c = lab.command(2, PYTHON);
    c.arg(script)
        .arg(lab.host(2).ip.to_string())
        .arg(peers::node_name(1))
        .arg(lab.host(1).ip.to_string())
        .arg(RELAY);
    let p = lab.spawn(2, c)?;
    p.wait_for_output("relaying", UP)
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(p)
}

/// Drops, in the coordinator's namespace, every mDNS packet from the real
/// agent (h1): the coordinator hears only the stranger's announcement.
fn deafen(lab: &Lab, deaf: bool) -> Result<()> {
    let script = if deaf {
        format!(
            "table inet rlx_deaf {{\n chain in {{\n  type filter hook input priority 0;\n  \
             ip saddr {} udp sport 5353 drop\n }}\n}}\n",
            lab.host(1).ip
        )
    } else {
        "delete table inet rlx_deaf\n".to_string()
    };
    Ok(lab.nft(0, &script)?)
}

/// Runs the relay case.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !ctx.features.agent_run {
        ctx.not_measured(
            "trust: relay of a keyed agent",
            "needs rlx-agent's run mode, which does not work in this build",
        );
        return Ok(());
    }
    let dir = ctx.work.path().join("relay");
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("cluster.key");
    keygen(ctx, &key)?;
    let cfg = dir.join("cluster.toml");
    std::fs::write(
        &cfg,
        format!("[discover]\nkey_file = {:?}\n", key.display().to_string()),
    )?;
    let script = dir.join("relay.py");
    std::fs::write(&script, include_str!("../../py/relay.py"))
        .with_context(|| format!("writing {}", script.display()))?;
    let lab = Lab::new(LabOptions {
        hosts: 3,
        ipv6: false,
    })?;
    // The node's addr is the worker's; the handshake a relay passes on,
    // which the refusal names and `--advertise` declares, is on the
    // agent's port.
    let agent_at = format!("{}:{PORT}", lab.host(1).ip);
    let relay_at = format!("{}:{PORT}", lab.host(2).ip);
    let agent_hs = format!("{}:{AGENT_PORT}", lab.host(1).ip);
    let relay_hs = format!("{}:{AGENT_PORT}", lab.host(2).ip);
    ctx.command(
        TOOL,
        "rlx-discover expand --format json cluster.toml   # [discover] key_file only: mDNS",
    );
    ctx.command(
        "relay (stranger)",
        format!(
            "/usr/bin/python3 bench/py/relay.py RELAY_IP {} AGENT_IP {RELAY}   # relays :6184 \
             to the agent, announces its TXT at RELAY_IP",
            peers::node_name(1)
        ),
    );
    ctx.notes.push(format!(
        "trust: relay (the lab case of tests/trust/relay.rs): a keyed rlx-agent \
         `{}` on h1, a stranger on h2 holding no key that relays its own :{AGENT_PORT} to the agent and \
         announces the agent's TXT as `{RELAY}` at its own address (bench/py/relay.py), and \
         `expand` with `key_file` on h0: first with the agent's own mDNS dropped at h0 (nft), \
         then with both heard; then the agent restarted with `--advertise RELAY_IP:{AGENT_PORT}` \
         (the relay as a port-forward of both ports, which its operator declares), its mDNS dropped again. \
         `relays_admitted` must be 0, `refusal_says_relay` 1 (the reason says \"{WORDING}\" and \
         names both endpoints), `agent_admitted_at_own_address` and `forward_admitted` 1.",
        peers::node_name(1)
    ));
    let reps = ctx.reps;
    {
        let _agent = agent(ctx, &lab, &dir, &key, &[])?;
        let _relay = stranger(&lab, &script)?;
        for rep in 0..reps {
            deafen(&lab, true)?;
            let deaf = expand(ctx, &lab, &cfg);
            deafen(&lab, false)?;
            let deaf = deaf?;
            let note = deaf.describe();
            ctx.record(
                "trust",
                CASE_DEAF,
                TOOL,
                "relays_admitted",
                rep,
                Some(deaf.relays_admitted(&relay_at) as f64),
                None,
                None,
                note,
            );
            let says = deaf.refusal_says_relay(&relay_hs, &agent_hs);
            ctx.record(
                "trust",
                CASE_DEAF,
                TOOL,
                "refusal_says_relay",
                rep,
                Some(says as f64),
                Some(says),
                Some(1),
                "",
            );
            ctx.record(
                "trust",
                CASE_DEAF,
                TOOL,
                "wall_ms",
                rep,
                deaf.t.status.map(|_| deaf.t.wall_ms()),
                None,
                None,
                "",
            );

            let heard = expand(ctx, &lab, &cfg)?;
            let note = heard.describe();
            ctx.record(
                "trust",
                CASE_HEARD,
                TOOL,
                "relays_admitted",
                rep,
                Some(heard.relays_admitted(&relay_at) as f64),
                None,
                None,
                note,
            );
            let own = u64::from(
                heard
                    .admitted
                    .get(&peers::node_name(1))
                    .is_some_and(|(a, e)| *a == agent_at && e == "authenticated"),
            );
            ctx.record(
                "trust",
                CASE_HEARD,
                TOOL,
                "agent_admitted_at_own_address",
                rep,
                Some(own as f64),
                Some(own),
                Some(1),
                "",
            );
            let says = heard.refusal_says_relay(&relay_hs, &agent_hs);
            ctx.record(
                "trust",
                CASE_HEARD,
                TOOL,
                "refusal_says_relay",
                rep,
                Some(says as f64),
                Some(says),
                Some(1),
                "",
            );
            ctx.record(
                "trust",
                CASE_HEARD,
                TOOL,
                "wall_ms",
                rep,
                heard.t.status.map(|_| heard.t.wall_ms()),
                None,
                None,
                "",
            );
        }
    }
    // The same relay, declared by the agent's operator as its port-forward.
    let _agent = agent(
        ctx,
        &lab,
        &dir,
        &key,
        &["--advertise".to_string(), relay_hs.clone()],
    )?;
    let _forward = stranger(&lab, &script)?;
    for rep in 0..reps {
        deafen(&lab, true)?;
        let fwd = expand(ctx, &lab, &cfg);
        deafen(&lab, false)?;
        let fwd = fwd?;
        let ok = u64::from(
            fwd.admitted
                .get(RELAY)
                .is_some_and(|(a, e)| *a == relay_at && e == "authenticated"),
        );
        let note = fwd.describe();
        ctx.record(
            "trust",
            CASE_FORWARD,
            TOOL,
            "forward_admitted",
            rep,
            Some(ok as f64),
            Some(ok),
            Some(1),
            note,
        );
        ctx.record(
            "trust",
            CASE_FORWARD,
            TOOL,
            "wall_ms",
            rep,
            fwd.t.status.map(|_| fwd.t.wall_ms()),
            None,
            None,
            "",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(json: &str) -> Expand {
        Expand::read(Timed {
            status: None,
            stdout: json.into(),
            stderr: String::new(),
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            maxrss_kb: 0,
            spawned: std::time::SystemTime::UNIX_EPOCH,
        })
        .unwrap()
    }

    const AGENT: &str = "10.9.1.2:9100";
    const AT: &str = "10.9.1.3:9100";

    #[test]
    fn a_relay_refused_for_a_relay_with_both_endpoints_named_counts_as_such() {
        let e = printed(&format!(
            r#"{{"nodes": [{{"addr": "{AGENT}"}}], "report": {{
                "added": [{{"host": "node-1", "addr": "{AGENT}", "evidence": "authenticated"}}],
                "failed": [{{"host": "imp-relay",
                  "reason": "{AT}: the agent accepted {AGENT}; a relay or NAT is in between"}}]}}}}"#
        ));
        assert_eq!(e.relays_admitted(AT), 0);
        assert_eq!(e.refusal_says_relay(AT, AGENT), 1);
        assert_eq!(e.admitted["node-1"], (AGENT.into(), "authenticated".into()));
    }

    #[test]
    fn a_refusal_for_another_reason_or_naming_one_endpoint_does_not_count() {
        let e = printed(&format!(
            r#"{{"nodes": [], "report": {{"added": [], "failed": [
                {{"host": "imp-relay", "reason": "refused: {AT}: a relay or NAT is in between"}}]}}}}"#
        ));
        assert_eq!(e.refusal_says_relay(AT, AGENT), 0);
        let e = printed(&format!(
            r#"{{"nodes": [], "report": {{"added": [], "failed": [
                {{"host": "imp-relay", "reason": "{AT} {AGENT}: no proof of the cluster key"}}]}}}}"#
        ));
        assert_eq!(e.refusal_says_relay(AT, AGENT), 0);
    }

    #[test]
    fn a_relay_is_counted_admitted_by_its_instance_or_by_its_address_in_the_node_list() {
        let by_name = printed(&format!(
            r#"{{"nodes": [], "report": {{"added": [
                {{"host": "imp-relay", "addr": "{AT}", "evidence": "authenticated"}}], "failed": []}}}}"#
        ));
        assert_eq!(by_name.relays_admitted(AT), 1);
        let by_addr = printed(&format!(
            r#"{{"nodes": [{{"addr": "{AT}"}}], "report": {{"added": [], "failed": []}}}}"#
        ));
        assert_eq!(by_addr.relays_admitted(AT), 1);
    }

    #[test]
    fn an_expand_that_printed_no_json_is_an_error_naming_its_status() {
        let e = Expand::read(Timed {
            status: None,
            stdout: "not json".into(),
            stderr: "rlx-discover: error: boom".into(),
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            maxrss_kb: 0,
            spawned: std::time::SystemTime::UNIX_EPOCH,
        });
        let msg = format!("{:#}", e.err().unwrap());
        assert!(msg.contains("no JSON") && msg.contains("boom"), "{msg}");
    }
}
