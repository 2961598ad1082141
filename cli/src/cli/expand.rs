//! `rlx-discover expand`: the cluster file with its discovered nodes —
//! printed, shown as a diff (`--dry-run`), or written back (`--write`).

use crate::cli::progress::Bars;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use rlx_discover::absence;
use rlx_discover::clusterfile as writeback;
use rlx_discover::write::{plan, prune_candidates, Plan};
use rlx_discover::{expand_config, ClusterConfig, Overrides};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The cluster file with the discovered nodes appended.
    Toml,
    /// `{"nodes": [...], "report": {...}, "missing": [...], "file": {...}}`
    /// (field names documented in docs/json.md).
    Json,
}

const EXAMPLES: &str = "\
Examples:
  rlx-discover expand cluster.toml                 # print the expanded config
  rlx-discover expand cluster.toml --dry-run       # the diff --write would apply
  rlx-discover expand cluster.toml --write         # update the file in place
  rlx-discover expand cluster.toml --write --prune # ...and drop vanished found nodes
  rlx-discover expand cluster.toml --json          # nodes and report for scripts

--write keeps every byte you wrote (comments, blank lines, key order, CRLF)
and appends each new node under a `# found by ...` comment. Running it again
with the same cluster changes nothing. A found node whose machine moved
(recognised by the node id in that comment) gets its new addr in place. A node no source sees any more is
reported as missing and kept; --prune removes it only if it carries that
comment (delete the comment to make a found node yours) and, for one found
on the network, only once it is confirmed gone: --prune listens the whole
browse window, then dials the node's agent port, and cuts it only when its
host refuses (up, no agent). An unheard agent that still answers, or a
host that is off or cut off, is kept, with the line to delete by hand. Hand-written nodes
are never removed. The file is replaced atomically, keeps its mode, and is
not overwritten if someone changed it while discovery ran.";

fn after_help() -> String {
    use crate::cli::runtime::{exit_status, EXPAND_ONE};
    format!("{EXAMPLES}\n\n{}", exit_status(EXPAND_ONE))
}

/// Arguments of `expand`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct ExpandArgs {
    /// The cluster file (cluster.toml).
    pub config: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "toml")]
    pub format: Format,
    /// Print JSON for scripts (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Update CONFIG in place (atomically) instead of printing it; prints
    /// nothing on stdout unless --json.
    #[arg(short, long)]
    pub write: bool,
    /// Print the unified diff that --write would apply, and change nothing.
    /// Not with --write: one shows the change, the other makes it.
    #[arg(long, conflicts_with = "write")]
    pub dry_run: bool,
    /// With --write or --dry-run: remove nodes that rlx-discover appended
    /// earlier and that are confirmed gone (a full browse did not hear
    /// them and their host refuses the agent port). Never removes a
    /// hand-written node.
    #[arg(long)]
    pub prune: bool,
    /// Use only these network interfaces for mDNS (repeatable).
    #[arg(long = "interface", value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// Admit only agents announcing this cluster name (overrides [discover]
    /// cluster).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Also look at _rlx._tcp.DOMAIN on a unicast DNS server, where agents
    /// beyond the LAN register (rlx-agent --register); replaces
    /// dns_sd.domain.
    #[arg(long, value_name = "DOMAIN")]
    pub domain: Option<String>,
    /// The DNS server for --domain: HOST, HOST:PORT or [IPv6]:PORT
    /// [default: dns_sd.server, else the first nameserver of /etc/resolv.conf].
    #[arg(long, value_name = "HOST:PORT")]
    pub dns_server: Option<String>,
    /// Cluster key file (overrides [discover] key_file).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// The most to listen for mDNS answers (3s, 800ms; a bare number is
    /// ms; overrides browse_ms).
    #[arg(long = "browse", visible_alias = "browse-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub browse_ms: Option<u64>,
    /// Do not browse mDNS even when [discover] would.
    #[arg(long)]
    pub no_mdns: bool,
    /// With a cluster key, also dial announced addresses off the browsed
    /// interfaces' subnets that did not send the announcement themselves
    /// (as [discover] dial_off_link = true; see docs/security.md).
    #[arg(long)]
    pub dial_off_link: bool,
    /// Measure the RTT and throughput to every added node (as [discover]
    /// measure_links = true): 0.1-0.6 s per node, one at a time per
    /// interface; shown in the report, the JSON and the `# found by` comment.
    #[arg(long)]
    pub links: bool,
    /// With --links: the most each transfer runs, each way (10ms-1s; a bare
    /// number is ms; default 250ms, or link_window_ms); a steady one ends
    /// after 40-60 ms.
    #[arg(long = "link-window", visible_alias = "link-window-ms", value_name = "DURATION",
          value_parser = crate::cli::duration::millis)]
    pub link_window_ms: Option<u64>,
    /// Exit 1 for every refused announcement too, strangers' included (a
    /// neighbour's broken record, another cluster's agent).
    #[arg(long)]
    pub strict: bool,
    /// After discovery, run `ssh -o BatchMode=yes HOST true` to every node
    /// with an `ssh` (hand-written ones too), as the RLX runtime will reach
    /// it to probe and launch, and name each that fails and why (host key,
    /// authentication, timeout, no sshd); exit 1 when one does.
    #[arg(long)]
    pub check_ssh: bool,
}

/// What `expand` did with the file (the `file` object of the JSON).
#[derive(Debug, Serialize)]
struct FileOutcome<'a> {
    path: String,
    mode: &'static str,
    changed: bool,
    written: bool,
    appended: &'a [String],
    removed: &'a [String],
    moved: &'a [String],
    diff: Option<String>,
    /// The whole file as `--write` leaves it (or would): what the runtime
    /// reads.
    text: &'a str,
}

/// Runs discovery for the file, then prints, diffs or writes the result,
/// with the report on stderr.
pub fn run(a: ExpandArgs, quiet: bool, bars: &Bars) -> Result<ExitCode> {
    if a.prune && !(a.write || a.dry_run) {
        bail!(
            "--prune removes nodes from the file, so it needs --write (or --dry-run to see \
             what it would remove)"
        );
    }
    let path = a.config.display().to_string();
    let (text, snap) = writeback::read(&a.config)?;
    let mut cfg = ClusterConfig::parse(&a.config, &text)?;
    // The same source flags as browse and watch: they change the run, never
    // the file's own [discover] text.
    if a.cluster.is_some() || a.domain.is_some() || a.dns_server.is_some() {
        let d = cfg.discover.get_or_insert_with(Default::default);
        if a.cluster.is_some() {
            d.cluster = a.cluster.clone();
        }
        crate::cli::lan::apply_dns_flags(d, &a.domain, &a.dns_server)?;
    }
    let mut overrides = Overrides::default();
    overrides.interfaces = a.interfaces;
    overrides.key_file = a.key_file;
    overrides.browse_ms = a.browse_ms;
    overrides.no_mdns = a.no_mdns;
    overrides.measure_links = a.links;
    overrides.link_window_ms = a.link_window_ms;
    overrides.dial_off_link = a.dial_off_link;
    // A dry run changes nothing, the pins file included.
    overrides.pins_read_only = a.dry_run;
    // A prune cuts only what is confirmed gone: the browse listens its whole
    // window (an agent answering late is still heard), and every node it
    // would cut is dialled first (rlx_discover::absence).
    overrides.full_window = a.prune;
    let rt = crate::cli::runtime::runtime()?;
    let exp = rt.block_on(expand_config(&cfg, &overrides, bars))?;
    let absences = if a.prune {
        let candidates = prune_candidates(&cfg, &exp);
        Some(match &cfg.discover {
            Some(d) => rt.block_on(absence::confirm(candidates, d.agent_port)),
            None => Default::default(),
        })
    } else {
        None
    };
    let plan = plan(&cfg, &exp, absences.as_ref(), &now_utc())
        .with_context(|| format!("updating the node list of {path}"))?;

    let mode = match (a.dry_run, a.write) {
        (true, _) => "dry-run",
        (false, true) => "write",
        (false, false) => "print",
    };
    let ssh_checks = if a.check_ssh {
        let nodes = plan
            .nodes
            .iter()
            .filter_map(|n| Some((n.addr.clone(), n.ssh.clone()?)))
            .collect();
        let ssh_config = cfg.discover.as_ref().and_then(|d| d.ssh_config.clone());
        Some(
            crate::cli::runtime::runtime()?.block_on(rlx_discover::sshtarget::check(
                nodes,
                ssh_config.as_deref(),
                std::time::Duration::from_secs(5),
            )),
        )
    } else {
        None
    };
    let ssh_failed = ssh_checks
        .as_ref()
        .is_some_and(|c| c.iter().any(|c| c.failure.is_some()));
    let changed = plan.changes(&text);
    let diff = (mode == "dry-run").then(|| unified_diff(&path, &text, &plan.text));
    let written = mode == "write" && changed;
    let kept = if written {
        Some(writeback::write_atomic(&snap, &plan.text)?)
    } else {
        None
    };

    if a.json || a.format == Format::Json {
        let file = FileOutcome {
            path: path.clone(),
            mode,
            changed,
            written,
            appended: &plan.appended,
            removed: &plan.removed,
            moved: &plan.moved,
            diff,
            text: &plan.text,
        };
        let v = serde_json::json!({
            "v": crate::cli::runtime::JSON_VERSION,
            "nodes": plan.nodes,
            "report": exp.report,
            "missing": plan.missing,
            "file": file,
            "ssh_check": ssh_checks,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match mode {
            "print" => print!("{}", plan.text),
            "dry-run" => print!("{}", diff.unwrap_or_default()),
            _ => {}
        }
    }

    let discovering = cfg.discover.is_some();
    let found_nothing =
        exp.added().is_empty() && exp.report.duplicates.is_empty() && exp.report.moved.is_empty();
    if !quiet {
        eprint!("{}", exp.report.render_text());
        eprint!("{}", plan.render_text());
        if let Some(line) = file_summary(&path, mode, changed, &plan) {
            match &kept {
                Some(kept) => eprintln!("{line} ({kept})"),
                None => eprintln!("{line}"),
            }
        }
        if discovering && found_nothing {
            eprint!("{}", exp.report.empty_hint());
        }
        if let Some(checks) = &ssh_checks {
            eprint!("{}", render_ssh_checks(checks));
        }
    }
    Ok(
        if exp.report.fails_run(a.strict)
            || exp.report.configured_source_found_nothing()
            || (discovering && found_nothing)
            || plan.has_vanished_nodes()
            || exp.report.hand_written_moved()
            || ssh_failed
        {
            ExitCode::from(rlx_proto::exit::NEEDS_A_LOOK)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// `--check-ssh`'s lines: each node the runtime can reach, and each it
/// cannot with the reason.
fn render_ssh_checks(checks: &[rlx_discover::sshtarget::SshCheck]) -> String {
    let failed = checks.iter().filter(|c| c.failure.is_some()).count();
    let mut out = format!(
        "ssh check: {} of {} node(s) answer `ssh -o BatchMode=yes HOST true`, as the RLX \
         runtime reaches them to probe and launch\n",
        checks.len() - failed,
        checks.len()
    );
    for c in checks {
        match &c.failure {
            None => out.push_str(&format!("  ok   {} (ssh {})\n", c.addr, c.ssh)),
            Some(why) => out.push_str(&format!("  FAIL {} (ssh {}): {why}\n", c.addr, c.ssh)),
        }
    }
    out
}

/// The line saying what happened to the file, for --write and --dry-run.
fn file_summary(path: &str, mode: &str, changed: bool, plan: &Plan) -> Option<String> {
    let mut what = format!(
        "{} node(s) appended, {} removed",
        plan.appended.len(),
        plan.removed.len()
    );
    if !plan.moved.is_empty() {
        what.push_str(&format!(", {} moved", plan.moved.len()));
    }
    match (mode, changed) {
        ("write", true) => Some(format!("wrote {path}: {what}")),
        ("write", false) => Some(format!("{path} is up to date: nothing to write")),
        ("dry-run", true) => Some(format!(
            "dry run: --write would change {path} ({what}); nothing was written"
        )),
        ("dry-run", false) => Some(format!(
            "dry run: {path} is up to date; --write would change nothing"
        )),
        _ => None,
    }
}

/// The unified diff from the file as read to the file `--write` would
/// leave, with the path in the headers.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, &format!("{path} (after --write)"))
        .to_string()
}

/// The current UTC time, to the minute, for provenance comments.
/// `SOURCE_DATE_EPOCH` (seconds), the reproducible-builds convention, pins
/// it for tests and reproducible files.
pub fn now_utc() -> String {
    let now = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s))
        .unwrap_or_else(std::time::SystemTime::now);
    let t = humantime::format_rfc3339_seconds(now).to_string();
    // 2026-11-30T06:58:12Z -> 2026-11-30 06:58 UTC
    format!("{} {} UTC", &t[..10], &t[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_shows_appended_lines_with_the_path() {
        let d = unified_diff("c.toml", "a\n", "a\nb\n");
        assert!(
            d.starts_with("--- c.toml\n+++ c.toml (after --write)\n"),
            "{d}"
        );
        assert!(d.contains("\n+b\n"), "{d}");
        assert_eq!(unified_diff("c.toml", "a\n", "a\n"), "");
    }
}
