//! **Scenario 9: a DNS-SD-only cluster** — agents on a routed subnet
//! registered in BIND (`rlx-agent --register dns://...`), the coordinator
//! alone on another subnet, so that its mDNS browse hears nobody:
//! `rlx-discover expand` with `--domain`/`--dns-server` (mDNS left on, as
//! a user's config would), timed. What is measured is the rule of
//! docs/protocol.md ("Browsing: what a coordinator asks"): once `dns_sd`
//! has answered and no mDNS responder has, the browse stops, so `expand`
//! ends within 0.5 s of the DNS answers instead of listening out mDNS's
//! whole window. `dig` asking BIND for the same PTR records is the floor.

use crate::ctx::Ctx;
use crate::peers::write_caps;
use crate::proc::run_timed;
use anyhow::{ensure, Result};
use rlx_lab::kit::bind::{start_named, ZONE};
use rlx_lab::kit::Peer;
use rlx_lab::{Lab, LabProcess, RoutedOptions};
use std::time::Duration;

const OURS: &str = "rlx-discover expand (dns_sd, mDNS on)";
const DIG: &str = "dig PTR (the DNS answer alone)";

/// Runs the scenario.
pub fn run(ctx: &mut Ctx) -> Result<()> {
    if !Peer::Bind.present() {
        ctx.not_measured(
            "dns: a DNS-SD-only cluster",
            format!(
                "BIND not installed (apt-get install {})",
                Peer::Bind.packages()
            ),
        );
        return Ok(());
    }
    let agents = if ctx.quick { 3 } else { 10 };
    let dir = ctx.work.path().join("dns");
    std::fs::create_dir_all(&dir)?;
    // Subnet 0: h0 named, h1..hN the agents. Subnet 1: the coordinator.
    let lab = Lab::routed(RoutedOptions {
        subnets: vec![agents + 1, 1],
    })?;
    let coordinator = agents + 1;
    let named = start_named(&lab, 0);
    let mut procs: Vec<LabProcess> = Vec::new();
    for i in 1..=agents {
        let (caps, _) = write_caps(&dir, i)?;
        let mut c = std::process::Command::new(&ctx.bins.agent);
        c.arg("--caps-file")
            .arg(&caps)
            .args(["--name", &format!("dns{i}")])
            .args(["--register", &format!("dns://{}/{ZONE}", named.ip)])
            .arg("--tsig-key")
            .arg(&named.key)
            .args(["--lease-secs", "120"])
            .env("RUST_LOG", "info")
            .env("RLX_AGENT_CONFIG", "/dev/null");
        procs.push(lab.spawn(i, c)?);
    }
    for p in &procs {
        ensure!(
            p.wait_for_output("registered in DNS", Duration::from_secs(60))
                .is_ok(),
            "an agent never registered:\n{}",
            p.dump()
        );
    }
    ctx.command(
        OURS,
        "rlx-discover expand --format json --domain lab.test --dns-server NAMED_IP cluster.toml   # [discover] empty: mDNS on",
    );
    ctx.command(DIG, "dig +short @NAMED_IP _rlx._tcp.lab.test PTR");
    ctx.notes.push(format!(
        "dns: {agents} agents registered in BIND on a routed subnet (h1..h{agents}, `rlx-agent \
         --register dns://NAMED_IP/lab.test --tsig-key`), the coordinator alone on another \
         subnet: its mDNS browse hears nobody. Goal: `expand` ends within 0.5 s of the DNS \
         answers (`after_dns_ms`: its wall time minus the dns_sd attempt's elapsed time). \
         {}",
        if ctx.quick {
            "Quick mode uses 3 agents instead of 10."
        } else {
            ""
        }
    ));
    let cluster = dir.join("cluster.toml");
    std::fs::write(&cluster, "[discover]\n")?;
    let case = format!("{agents} agents, DNS-SD only");
    let expected = Some(agents as u64);
    for rep in 0..ctx.reps {
        let mut c = lab.command(coordinator, &ctx.bins.discover);
        c.args([
            "expand",
            "--format",
            "json",
            "--domain",
            ZONE,
            "--dns-server",
            &named.ip,
        ])
        .arg(&cluster)
        .env("RUST_LOG", "warn");
        let t = run_timed(&mut c, Duration::from_secs(60))?;
        let v: serde_json::Value = serde_json::from_str(&t.stdout).unwrap_or_default();
        let found = v["report"]["added"].as_array().map_or(0, |a| a.len()) as u64;
        let elapsed = |source: &str| {
            v["report"]["tried"].as_array().and_then(|a| {
                a.iter()
                    .find(|x| x["source"] == source)
                    .and_then(|x| x["elapsed_ms"].as_f64())
            })
        };
        let (dns_ms, mdns_ms) = (elapsed("dns"), elapsed("mdns"));
        let wall = t.status.map(|_| t.wall_ms());
        let note = format!(
            "{}; dns_sd answered at {}, the mDNS browse ended at {}",
            t.describe_status(),
            dns_ms.map_or("?".into(), |m| format!("{m:.0} ms")),
            mdns_ms.map_or("?".into(), |m| format!("{m:.0} ms")),
        );
        ctx.record(
            "dns",
            &case,
            OURS,
            "wall_ms",
            rep,
            wall,
            Some(found),
            expected,
            note,
        );
        ctx.record("dns", &case, OURS, "dns_ms", rep, dns_ms, None, None, "");
        let after = match (wall, dns_ms) {
            (Some(w), Some(d)) => Some((w - d).max(0.0)),
            _ => None,
        };
        ctx.record(
            "dns",
            &case,
            OURS,
            "after_dns_ms",
            rep,
            after,
            None,
            None,
            "",
        );

        let mut d = lab.command(coordinator, "dig");
        d.args(["+short", "+tries=1", "+time=2"])
            .arg(format!("@{}", named.ip))
            .arg(format!("_rlx._tcp.{ZONE}"))
            .arg("PTR");
        let t = run_timed(&mut d, Duration::from_secs(10))?;
        let found = t.stdout.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        ctx.record(
            "dns",
            &case,
            DIG,
            "wall_ms",
            rep,
            t.status.map(|_| t.wall_ms()),
            Some(found),
            expected,
            t.describe_status(),
        );
    }
    drop(procs);
    drop(named);
    drop(lab);
    Ok(())
}
