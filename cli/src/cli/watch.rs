//! `rlx-discover watch`: live membership of the cluster, printed.
//!
//! The engine (membership, health checks, DNS polling, what counts as a
//! material change) and its wiring from `[discover]` (the browse, the zone,
//! the rules, the dial policy) are the library's
//! [`rlx_discover::follow::LiveWatch`]; this module parses the command line
//! and prints the events, as aligned lines or (`--json`) one JSON object
//! per line.

use crate::cli::duration::Millis;
use anyhow::Result;
use clap::Args;
use rlx_discover::{escape_line, untrusted, Event, Kind, LiveWatch, WatchOptions};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover watch                       # joined / updated / left, as lines
  rlx-discover watch --json                # one JSON object per event
  rlx-discover watch --suspect-timeout 30s # re-plan a silent box sooner
  rlx-discover watch --for 10m --json      # ten minutes of events, then exit
  rlx-discover watch --config cluster.toml --interface eth1
  rlx-discover watch --domain rlx.example.org --dns-server 10.0.0.53

{}",
        crate::cli::runtime::exit_status("never: watch runs until interrupted or --for ends")
    )
}

/// Arguments of `watch`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct WatchArgs {
    /// Where to look and whom to admit.
    #[command(flatten)]
    pub lan: crate::cli::lan::LanArgs,
    /// Print one JSON object per event.
    #[arg(long)]
    pub json: bool,
    /// Stop after this long (30s, 10m; a bare number is ms) [default: until
    /// interrupted].
    #[arg(long = "for", visible_alias = "for-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub for_ms: Option<u64>,
    /// How long a member may stay `suspect` (its host answers, its agent
    /// does not: loading a checkpoint, swapping, stopped) before it is
    /// reported `left`. A refused port, a reset liveness connection or a
    /// vanished host is `left` at once whatever this is.
    /// (2m, 30s; a bare number is ms.)
    #[arg(long = "suspect-timeout", visible_alias = "suspect-timeout-ms", value_name = "DURATION",
          default_value_t = Millis(LiveWatch::SUSPECT_TIMEOUT.as_millis() as u64),
          value_parser = Millis::parse)]
    pub suspect_timeout_ms: Millis,
}

/// Prints one event: a JSON object per line with `--json`, else an aligned
/// line (`   1.234s joined    box1 10.0.0.1:9100 cuda 24.0 GiB 16 cores`, and
/// `2x cuda 24.0 GiB` for a box with two, as `browse` shows it).
/// With a cluster file (`file`, its name), the library says which of its
/// nodes the event is (`"in_file"` in JSON, `[cluster.toml line 12: up]`
/// in text) or, for a member in none of them, `[new]`.
fn print(json: bool, e: &Event, file: Option<&str>) {
    if json {
        println!("{}", serde_json::to_value(e).unwrap_or_default());
    } else {
        let what = e.node.as_ref().map_or_else(String::new, |n| {
            let worker = n
                .worker_text()
                .map_or_else(String::new, |w| format!(", {w}"));
            format!(
                " {} {} {} cores{worker}",
                n.addr,
                n.device_summary(),
                n.cores
            )
        });
        let why = e
            .reason
            .as_ref()
            .map_or_else(String::new, |r| format!(" ({r})"));
        // A partition names both sides (each name a stranger's choice).
        let sides = match (&e.unreachable, &e.reachable) {
            (Some(u), Some(r)) => {
                let names = |v: &Vec<String>| {
                    let v: Vec<String> = v.iter().map(|n| untrusted(n).to_string()).collect();
                    if v.is_empty() {
                        "none".to_string()
                    } else {
                        v.join(", ")
                    }
                };
                format!(" unreachable: {}; reachable: {}", names(u), names(r))
            }
            _ => String::new(),
        };
        let listed = match (file, &e.in_file) {
            (Some(name), Some(f)) => {
                let state = if f.up { "up" } else { "down" };
                format!(" [{name} line {}: {state}]", f.line)
            }
            (Some(_), None) if e.event == Kind::Joined => " [new]".to_string(),
            _ => String::new(),
        };
        // The instance label is a stranger's choice: one escaped line.
        let line = format!(
            "{:>8.3}s {:<9} {}{what}{sides}{why}{listed}",
            e.at_ms as f64 / 1000.0,
            e.event.as_str(),
            untrusted(&e.instance)
        );
        println!("{}", escape_line(&line));
    }
}

/// Runs the watch until interrupted (or `--for-ms`): the library's
/// [`LiveWatch`], printed.
pub fn run(a: WatchArgs) -> Result<ExitCode> {
    let cfg = a.lan.load()?;
    let d = a.lan.section_of(cfg.as_ref(), None, "watch")?;
    // The file's name, for the lines that say which of its nodes a member is.
    let name = a.lan.config.as_ref().map(|p| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        )
    });
    let rt = crate::cli::runtime::runtime()?;
    rt.block_on(async {
        let started = Instant::now();
        let opts = WatchOptions::default().suspect_timeout(a.suspect_timeout_ms.duration());
        // No interface up yet (a coordinator booting, a laptop undocked):
        // wait for one, as the agent does, rather than exit.
        let live = LiveWatch::start_when_up(&d, opts, |available| {
            eprintln!(
                "no network interface is up to browse on yet (available: {available}); waiting \
                 for one, checking every {} s",
                LiveWatch::INTERFACE_POLL.as_secs()
            )
        })
        .await?;
        // The file's nodes, down until a member is recognised as one; the
        // file's node count is what "more than half of the cluster went
        // dark" is a half of.
        let live = match &cfg {
            Some(c) => live.with_file(c),
            None => live,
        };
        if !a.json {
            let mut on = Vec::new();
            let ifaces = live.interfaces();
            if !ifaces.is_empty() {
                on.push(format!("mDNS on {}", ifaces.join(", ")));
            }
            if let Some(z) = live.zone() {
                on.push(format!(
                    "DNS-SD in {z} every {} s",
                    LiveWatch::DNS_POLL_INTERVAL.as_secs()
                ));
            }
            eprintln!(
                "watching {}: {} (each member followed over a liveness connection, and its \
                 handshake checked when its facts change, or every {:.1} s at most for an agent \
                 that does not tell them; suspect members left after {:.1} s; Ctrl-C to stop)",
                rlx_proto::service::SERVICE,
                on.join("; "),
                LiveWatch::HEALTH_INTERVAL.as_secs_f64(),
                a.suspect_timeout_ms.duration().as_secs_f64()
            );
        }
        let stop_at = a.for_ms.map(|ms| started + Duration::from_millis(ms));
        let stop = async {
            match stop_at {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        };
        let json = a.json;
        if let (Some(name), false) = (&name, json) {
            for n in live.file_nodes() {
                eprintln!(
                    "{:>8.3}s {:<9} {} [{name} line {}: not seen yet]",
                    0.0,
                    "down",
                    untrusted(&n.addr),
                    n.line
                );
            }
        }
        live.run(stop, |e| print(json, &e, name.as_deref())).await?;
        Ok(ExitCode::SUCCESS)
    })
}
