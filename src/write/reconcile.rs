//! **What `expand --write` would change** — the user's file, the discovery
//! result, and the flags in; the new text and an account of every node out.
//!
//! ```text
//! file [[node]]s ──┐
//!                  ├─► seen this run? ──► missing (reported; --prune cuts ours)
//! Expansion ───────┘                  └─► added   (appended with provenance)
//! ```
//!
//! Merge is additive (see [`crate::pipeline`]): a machine already in the file
//! — including one an earlier `--write` appended — is a duplicate, not a new
//! node, so running `--write` again with the same cluster appends nothing and
//! the file is not touched at all.
//!
//! A node whose machine answers at a new address (recognised by the node
//! id its comments name, see [`crate::pipeline::expand_file`]) is *moved*:
//! a discovered one gets its new `addr` spliced in place of the old string,
//! a hand-written one is only reported.
//!
//! A node in the file that no source saw this run is *missing*. It is never
//! dropped silently: it is reported, and removed only with `--prune`, and
//! only if it carries the `# found by` comment that says rlx-discover
//! appended it. Hand-written nodes are reported but never removed, whatever
//! the flags. Pruning is also skipped when discovery saw no machine at all,
//! because then the likeliest cause is the network, not the cluster.

use crate::absence::Absences;
use crate::addr::NodeAddr;
use crate::clusterfile::FileNode;
use crate::config::{ClusterConfig, NodeConfig};
use crate::pipeline::Expansion;
use crate::write::render::{addr_string, render_expanded, splice, RenderError};
use serde::Serialize;
use std::fmt::Write as _;

/// Who wrote a node into the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Appended by `rlx-discover` (it has the `# found by` comment).
    Discovered,
    /// Written by a person (no provenance comment).
    HandWritten,
}

/// What happened to a missing node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Left in the file.
    Kept,
    /// Cut out of the file (`--prune`).
    Removed,
}

/// A node of the file that no discovery source saw this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingNode {
    /// Its `addr`.
    pub addr: String,
    /// Its `ssh` alias, if any.
    pub ssh: Option<String>,
    /// Who wrote it.
    pub origin: Origin,
    /// Its provenance comment (without `# `), for discovered nodes.
    pub found_by: Option<String>,
    /// 1-based line of its `[[node]]` header in the file as read.
    pub line: usize,
    /// What a source reported about that host this run, if anything.
    pub failure: Option<String>,
    /// Kept or removed.
    pub action: Action,
    /// Why it was kept, when `--prune` was given but did not remove it.
    pub kept_because: Option<String>,
}

/// The new file and what changed.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The new text of the file.
    pub text: String,
    /// Its node list, parsed back from `text`.
    pub nodes: Vec<NodeConfig>,
    /// Addresses of the nodes appended.
    pub appended: Vec<String>,
    /// Addresses of the nodes removed by `--prune`.
    pub removed: Vec<String>,
    /// `old -> new` for each node whose `addr` was updated in place (its
    /// machine moved, see [`crate::pipeline::report::Moved`]).
    pub moved: Vec<String>,
    /// Nodes no source saw this run.
    pub missing: Vec<MissingNode>,
    /// Other things the user should know (e.g. why nothing was pruned).
    pub notes: Vec<String>,
}

impl Plan {
    /// True when the new text differs from the file.
    pub fn changes(&self, old: &str) -> bool {
        self.text != old
    }

    /// True when a node rlx-discover appended has vanished and is still in
    /// the file: something a user should look at (exit code 1).
    pub fn has_vanished_nodes(&self) -> bool {
        self.missing
            .iter()
            .any(|m| m.origin == Origin::Discovered && m.action == Action::Kept)
    }

    /// The human-readable lines for the report on stderr, each through
    /// [`crate::escape::escape_line`] (a file's `addr` may hold anything).
    pub fn render_text(&self) -> String {
        self.render_raw()
            .lines()
            .map(|l| format!("{}\n", crate::escape::escape_line(l)))
            .collect()
    }

    fn render_raw(&self) -> String {
        let mut s = String::new();
        for m in &self.missing {
            // The failure itself is already listed with `!` in the report.
            let why = match (&m.failure, &m.ssh) {
                (Some(_), Some(alias)) => format!(" ({alias} failed, see above)"),
                (Some(_), None) => " (its host failed, see above)".to_string(),
                _ => String::new(),
            };
            let _ = match (m.origin, m.action) {
                (Origin::Discovered, Action::Removed) => writeln!(
                    s,
                    "  - {} (line {}) was not found this run{why}; removed (--prune)",
                    m.addr, m.line
                ),
                (Origin::Discovered, Action::Kept) => writeln!(
                    s,
                    "  ~ {} (line {}, appended by rlx-discover) was not found this run{why}; \
                     kept: {}",
                    m.addr,
                    m.line,
                    m.kept_because
                        .as_deref()
                        .unwrap_or("run with --write --prune to remove it")
                ),
                (Origin::HandWritten, _) => writeln!(
                    s,
                    "  ~ {} (line {}, hand-written) was not seen by discovery{why}; kept \
                     (hand-written nodes are never removed)",
                    m.addr, m.line
                ),
            };
        }
        for n in &self.notes {
            let _ = writeln!(s, "  ? {n}");
        }
        s
    }
}

/// Sort key for node addresses: names alphabetically, then IPs numerically
/// (10.0.0.9 before 10.0.0.10).
fn addr_order(addr: &str) -> (Option<std::net::IpAddr>, String) {
    (NodeAddr::split(addr).0.parse().ok(), addr.to_string())
}

/// Whether the file's node `node` (its index among the `[[node]]`
/// tables) was seen this run: the identity rule recognised a machine as it,
/// at its address (a duplicate of it) or at a new one (a move).
pub fn seen_this_run(exp: &Expansion, node: usize) -> bool {
    exp.report.duplicates.iter().any(|d| d.node == Some(node))
        || exp.report.moved.iter().any(|m| m.node == node)
}

/// Whether a file node needs its absence confirmed before a prune
/// ([`crate::absence`]): one found by the network. One found over SSH is
/// judged by its source, which reached it or said why not.
fn needs_confirming(n: &FileNode) -> bool {
    n.found_by
        .as_deref()
        .is_some_and(|f| !f.starts_with("found by ssh"))
}

/// The `addr` of every node of `cfg`'s file that `--prune` could cut only
/// after confirming its absence: appended by rlx-discover from the network
/// and not seen this run. (A file the writer cannot read back has none; the
/// plan then fails on it.)
pub fn prune_candidates(cfg: &ClusterConfig, exp: &Expansion) -> Vec<String> {
    let Ok(file) = &cfg.file_nodes else {
        return Vec::new();
    };
    file.iter()
        .filter(|n| needs_confirming(n) && !seen_this_run(exp, n.index))
        .map(|n| n.addr.clone())
        .collect()
}

/// Works out the new text of `cfg`'s file from the discovery result:
/// appends the added nodes, reports the missing ones and, with `prune`
/// (`--prune`: the absences [`crate::absence::confirm`] dialled), cuts the
/// missing ones that rlx-discover appended and whose absence is confirmed.
pub fn plan(
    cfg: &ClusterConfig,
    exp: &Expansion,
    prune: Option<&Absences>,
    when: &str,
) -> Result<Plan, RenderError> {
    let file = cfg.file_nodes.clone()?;
    let mut missing = Vec::new();
    let mut notes = Vec::new();
    if cfg.discover.is_some() {
        let seen = |node: usize| seen_this_run(exp, node);
        let saw_anything = !exp.added().is_empty()
            || !exp.report.duplicates.is_empty()
            || !exp.report.moved.is_empty();
        let mut prune_refused = false;
        // More than half of the file unseen at once (and at least two) is
        // a minority view: a partition, or this machine's own link, far
        // more often than half a cluster retired in one go. Pruning from it
        // would shrink the file to the side this run could see.
        // Counted over the nodes discovery found before (hand-written ones
        // may be nothing it can see).
        let found_before = file.iter().filter(|n| n.is_discovered()).count();
        let unseen = file
            .iter()
            .filter(|n| n.is_discovered() && !seen(n.index))
            .count();
        let minority = saw_anything && unseen >= 2 && unseen * 2 > found_before;
        let mut minority_refused = false;
        for n in file.iter().filter(|n| !seen(n.index)) {
            let host = NodeAddr::split(&n.addr).0;
            let failure = exp
                .report
                .failed
                .iter()
                .find(|p| Some(&p.host) == n.ssh.as_ref() || p.host == host)
                .map(|p| format!("{} ({})", p.reason, p.source));
            // Something answered for it or claimed it this run, refused: a
            // stranger's forged reply can do that to a live node, so it is
            // not vanished, and `--prune` leaves it.
            let claimed = exp.report.failed.iter().find(|p| {
                p.addr
                    .as_deref()
                    .is_some_and(|a| NodeAddr::split(a).0 == host)
                    || (n.id.is_some() && p.id == n.id)
            });
            let origin = if n.is_discovered() {
                Origin::Discovered
            } else {
                Origin::HandWritten
            };
            let (action, kept_because) = match (&n.cut, origin, prune.is_some()) {
                (_, Origin::HandWritten, _) | (_, _, false) => (Action::Kept, None),
                (Ok(_), _, true) if claimed.is_some() => {
                    let p = claimed.expect("checked");
                    (
                        Action::Kept,
                        Some(format!(
                            "an announcement of it was refused this run ({}: {}), so it is not \
                             vanished",
                            p.source, p.reason
                        )),
                    )
                }
                (Ok(_), _, true) if minority => {
                    minority_refused = true;
                    (
                        Action::Kept,
                        Some(format!(
                            "{unseen} of the {found_before} nodes discovery wrote were not \
                             seen, more than half: a partition, not a retirement, so nothing \
                             was pruned"
                        )),
                    )
                }
                (Ok(_), _, true) if saw_anything && needs_confirming(n) => {
                    let absence = prune.and_then(|a| a.get(&n.addr));
                    match absence.map(|a| a.kept_because(n.line)) {
                        Some(None) => (Action::Removed, None),
                        Some(Some(why)) => (Action::Kept, Some(why)),
                        None => (
                            Action::Kept,
                            Some("its absence was not confirmed (its agent port was not dialled), so it is not pruned".into()),
                        ),
                    }
                }
                (Ok(_), _, true) if saw_anything => (Action::Removed, None),
                (Ok(_), _, true) => {
                    prune_refused = true;
                    (
                        Action::Kept,
                        Some("discovery saw no machine at all, so nothing was pruned".into()),
                    )
                }
                (Err(why), _, true) => (Action::Kept, Some(why.clone())),
            };
            missing.push(MissingNode {
                addr: n.addr.clone(),
                ssh: n.ssh.clone(),
                origin,
                found_by: n.found_by.clone(),
                line: n.line,
                failure,
                action,
                kept_because,
            });
        }
        if minority_refused {
            notes.push(format!(
                "--prune removed nothing: {unseen} of the {found_before} nodes discovery wrote \
                 were not seen this run, more than half of them, which is what a network \
                 partition (or this machine's own link) looks like; a pruned file would keep \
                 only the side this run could reach. Check the network, or remove the nodes \
                 by hand if they are really gone"
            ));
        }
        if prune_refused {
            notes.push(
                "--prune removed nothing: discovery saw no machine at all this run, which \
                 usually means a network or configuration problem rather than an empty \
                 cluster (a pruned file would lose every node); fix discovery and run again"
                    .into(),
            );
        }
    }

    let cuts: Vec<_> = missing
        .iter()
        .filter(|m| m.action == Action::Removed)
        .filter_map(|m| {
            file.iter()
                .find(|n| n.addr == m.addr && n.line == m.line)
                .and_then(|n| n.cut.clone().ok())
        })
        .collect();
    let removed: Vec<String> = missing
        .iter()
        .filter(|m| m.action == Action::Removed)
        .map(|m| m.addr.clone())
        .collect();
    // A moved node's `addr` string is replaced where it stands; every
    // other byte of the file stays.
    let mut edits: Vec<(std::ops::Range<usize>, String)> =
        cuts.into_iter().map(|r| (r, String::new())).collect();
    let mut moved = Vec::new();
    for m in exp.report.moved.iter().filter(|m| m.rewritten) {
        let n = file.iter().find(|n| n.index == m.node).ok_or_else(|| {
            RenderError::Invariant(format!("moved node {} is not in the file", m.from))
        })?;
        let span = n.addr_span.clone().ok_or_else(|| {
            RenderError::Invariant(format!("moved node {} has no addr string", m.from))
        })?;
        let with = addr_string(&cfg.text[span.clone()], &m.to);
        edits.push((span, with));
        // An `ssh` written from the old address follows it; an alias the
        // user chose is left as it is.
        let new_ssh = n
            .ssh
            .as_deref()
            .and_then(|s| crate::sshtarget::follow(s, &m.from, &m.to));
        if let (Some(new), Some(span)) = (new_ssh, n.ssh_span.clone()) {
            let with = addr_string(&cfg.text[span.clone()], &new);
            edits.push((span, with));
        }
        moved.push(format!("{} -> {}", m.from, m.to));
    }
    let kept = splice(&cfg.text, &edits)?;

    let hand = cfg.nodes.len();
    let mut pairs: Vec<_> = exp.nodes[hand..]
        .iter()
        .cloned()
        .zip(exp.added().iter().cloned())
        .collect();
    // Discovery order depends on which host answered first; the file gets
    // a stable order, so --dry-run shows exactly what --write then writes.
    pairs.sort_by_key(|(n, _)| addr_order(&n.addr));
    let text = render_expanded(&kept, &pairs, when)?;

    // The new file must load, and hold exactly the old nodes minus the
    // removed plus the added: anything else is a bug, and is never written.
    let reparsed = ClusterConfig::parse(&cfg.path, &text)
        .map_err(|e| RenderError::Invariant(format!("the updated file would not load: {e}")))?;
    let mut want: Vec<NodeConfig> = cfg
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !removed.contains(&n.addr))
        .map(|(i, n)| {
            let mut n = n.clone();
            if let Some(m) = exp.report.moved.iter().find(|m| m.rewritten && m.node == i) {
                if let Some(ssh) = n
                    .ssh
                    .as_deref()
                    .and_then(|s| crate::sshtarget::follow(s, &m.from, &m.to))
                {
                    n.ssh = Some(ssh);
                }
                n.addr = m.to.clone();
            }
            n
        })
        .collect();
    want.extend(pairs.iter().map(|(n, _)| n.clone()));
    if reparsed.nodes != want {
        return Err(RenderError::Invariant(
            "the updated file's [[node]] list is not the old list minus the removed plus the \
             added nodes"
                .into(),
        ));
    }
    Ok(Plan {
        text,
        nodes: reparsed.nodes,
        appended: pairs.iter().map(|(n, _)| n.addr.clone()).collect(),
        removed,
        moved,
        missing,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{expand, Expansion, NodeDefaults};
    use crate::sighting::{Discovery, Evidence, Problem, Sighting, Source};
    use rlx_proto::caps::{DeviceInfo, NodeCaps};
    use std::path::Path;

    fn ssh_seen(host: &str) -> Sighting {
        Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source: Source::Ssh,
            host: host.into(),
            addr: format!("{host}:9100"),
            ip: None,
            port: 9100,
            agent_port: Some(9100),
            worker_reachable: None,
            ssh: Some(host.into()),
            caps: Some(NodeCaps {
                hostname: host.into(),
                cores: 8,
                ram_total: 16 << 30,
                devices: vec![DeviceInfo {
                    device: "cuda".into(),
                    name: "g".into(),
                    mem_bytes: 8 << 30,
                    unified: false,
                    gflops: 0.0,
                    available: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            evidence: Evidence::Ssh,
            heard_on: None,
            found_ms: 1,
        }
    }

    fn run(text: &str, hosts: &[&str], failed: &[&str], prune: bool) -> Plan {
        let cfg = ClusterConfig::parse(Path::new("c.toml"), text).unwrap();
        let d = cfg.discover.clone().unwrap();
        let found = Discovery {
            sightings: hosts.iter().map(|h| ssh_seen(h)).collect(),
            problems: failed
                .iter()
                .map(|h| Problem::new(Source::Ssh, *h, "unreachable: no route"))
                .collect(),
            attempts: vec![],
            mdns_links: Vec::new(),
        };
        let exp = expand(&cfg.nodes, &NodeDefaults::from(&d), found);
        plan(&cfg, &exp, prune.then_some(&Absences::default()), "T").unwrap()
    }

    const BASE: &str =
        "[discover]\nssh_hosts = [\"a\", \"b\"]\nckpt_dir = \"/m\"\nmdns = false\n\n\
                        [[node]]\naddr = \"pinned:9100\"\nckpt_dir = \"/m\"\n";

    #[test]
    fn a_second_run_with_the_same_cluster_changes_nothing() {
        let first = run(BASE, &["a", "b"], &[], false);
        assert_eq!(first.appended, vec!["a:9100", "b:9100"]);
        let second = run(&first.text, &["a", "b"], &[], false);
        assert!(!second.changes(&first.text), "{}", second.text);
        assert!(second.appended.is_empty());
        assert!(second
            .missing
            .iter()
            .all(|m| m.origin == Origin::HandWritten));
    }

    #[test]
    fn a_vanished_node_is_reported_and_kept_without_prune() {
        let first = run(BASE, &["a", "b"], &[], false);
        let p = run(&first.text, &["a"], &["b"], false);
        let b = p.missing.iter().find(|m| m.addr == "b:9100").unwrap();
        assert_eq!((b.origin, b.action), (Origin::Discovered, Action::Kept));
        assert!(b.failure.as_deref().unwrap().contains("unreachable"));
        assert!(b.found_by.as_deref().unwrap().starts_with("found by ssh"));
        assert!(p.has_vanished_nodes());
        assert!(!p.changes(&first.text));
    }

    #[test]
    fn prune_removes_only_vanished_nodes_that_rlx_discover_appended() {
        let first = run(BASE, &["a", "b"], &[], false);
        let p = run(&first.text, &["a"], &[], true);
        assert_eq!(p.removed, vec!["b:9100"]);
        let addrs: Vec<_> = p.nodes.iter().map(|n| n.addr.as_str()).collect();
        assert_eq!(addrs, ["pinned:9100", "a:9100"], "pinned survives");
        let pinned = p.missing.iter().find(|m| m.addr == "pinned:9100").unwrap();
        assert_eq!(pinned.action, Action::Kept);
        assert!(!p.has_vanished_nodes());
        // Pruning everything discovered gives back the original bytes
        // (one node: two or more unseen at once would be a partition).
        let one = run(BASE, &["a"], &[], false);
        let p2 = run(&one.text, &["x"], &[], true);
        assert!(p2.text.starts_with(BASE));
        assert_eq!(p2.removed, vec!["a:9100"]);
    }

    /// Guards against a prune from forged replies: a stranger's forged reply
    /// got a live node refused, and `--prune` cut it as vanished.
    #[test]
    fn prune_keeps_a_node_whose_announcement_was_refused_this_run() {
        let first = run(BASE, &["a", "b"], &[], false);
        let cfg = ClusterConfig::parse(Path::new("c.toml"), &first.text).unwrap();
        let d = cfg.discover.clone().unwrap();
        let forged = Problem::stranger(Source::Mdns, "b-box", "TXT: no proof of the cluster key")
            .claiming(Some("b:9100".into()), None);
        let found = Discovery {
            sightings: vec![ssh_seen("a")],
            problems: vec![forged],
            attempts: vec![],
            mdns_links: Vec::new(),
        };
        let exp = expand(&cfg.nodes, &NodeDefaults::from(&d), found);
        let p = plan(&cfg, &exp, Some(&Absences::default()), "T").unwrap();
        assert!(p.removed.is_empty(), "{:?}", p.removed);
        let b = p.missing.iter().find(|m| m.addr == "b:9100").unwrap();
        assert_eq!(b.action, Action::Kept);
        let why = b.kept_because.as_deref().unwrap();
        assert!(
            why.contains("refused this run") && why.contains("no proof"),
            "{why}"
        );
    }

    /// Guards against a network outage emptying the file under --prune.
    #[test]
    fn prune_does_nothing_when_discovery_saw_no_machine_at_all() {
        let first = run(BASE, &["a", "b"], &[], false);
        let p = run(&first.text, &[], &["a", "b"], true);
        assert!(p.removed.is_empty());
        assert!(!p.changes(&first.text));
        assert!(p.notes[0].contains("removed nothing"), "{:?}", p.notes);
    }

    /// Guards against a partition shrinking the file: three of five nodes
    /// out of sight at once is a minority view, not three retirements.
    #[test]
    fn prune_does_nothing_when_more_than_half_of_the_file_was_not_seen() {
        let first = run(BASE, &["a", "b", "c", "d", "e"], &[], false);
        let p = run(&first.text, &["a", "b"], &[], true);
        assert!(p.removed.is_empty(), "{:?}", p.removed);
        assert!(!p.changes(&first.text));
        assert!(
            p.notes.iter().any(|n| n.contains("partition")),
            "{:?}",
            p.notes
        );
        // Two of five is no majority: those two are pruned.
        let p = run(&first.text, &["a", "b", "c"], &[], true);
        assert_eq!(p.removed.len(), 2, "{:?}", p.removed);
    }

    #[test]
    fn a_file_without_discover_reports_nothing_missing() {
        let p = run_plain("[[node]]\naddr = \"h:1\"\nckpt_dir = \"/m\"\n");
        assert!(p.missing.is_empty());
    }

    const ID: &str = "0123456789abcdef";

    /// An agent answering a handshake at `ip`:9100 with node id `ID`.
    fn agent_at(ip: &str) -> Sighting {
        let mut s = ssh_seen("gpu-a");
        s.source = Source::Mdns;
        s.host = "gpu-a".into();
        s.addr = format!("{ip}:9100");
        s.ip = ip.parse().ok();
        s.ssh = None;
        s.evidence = Evidence::Handshake;
        s.caps.as_mut().unwrap().id = ID.into();
        s
    }

    fn run_found(text: &str, found: Vec<Sighting>) -> (Expansion, Plan) {
        let cfg = ClusterConfig::parse(Path::new("c.toml"), text).unwrap();
        let d = cfg.discover.clone().unwrap();
        let found = Discovery {
            sightings: found,
            ..Default::default()
        };
        let file = cfg.file_nodes.clone().unwrap();
        let exp = crate::pipeline::expand_file(&cfg.nodes, &file, &NodeDefaults::from(&d), found);
        let p = plan(&cfg, &exp, None, "T").unwrap();
        (exp, p)
    }

    /// Guards against a moved machine written twice: a found node whose machine got a new
    /// lease was appended again at the new address and the old entry kept
    /// as missing (exit 1, one machine listed twice).
    #[test]
    fn a_found_node_whose_machine_moved_gets_its_new_addr_in_place_and_nothing_else_changes() {
        let text = format!(
            "[discover]\r\n\r\n# found by mdns (handshake) T: gpu-a, cuda 8.0 GiB, id {ID}\r\n\
             # rack 3\r\n[[node]]\r\nckpt_dir = \"/m\"   # mine\r\naddr = '10.0.0.5:9100' # dhcp\r\n\
             device = \"cuda\"\r\n"
        );
        let (exp, p) = run_found(&text, vec![agent_at("10.0.0.7")]);
        assert_eq!(
            p.text,
            text.replace("'10.0.0.5:9100'", "'10.0.0.7:9100'"),
            "only the addr string changed"
        );
        assert!(p.appended.is_empty() && p.missing.is_empty(), "{p:?}");
        assert_eq!(p.moved, ["10.0.0.5:9100 -> 10.0.0.7:9100"]);
        assert_eq!(p.nodes[0].addr, "10.0.0.7:9100");
        assert!(!p.has_vanished_nodes());
        let m = &exp.report.moved[0];
        assert!(m.rewritten && m.origin == "discovered");
        assert!(exp
            .report
            .render_text()
            .contains("  > moved 10.0.0.5:9100 -> 10.0.0.7:9100 (gpu-a, id 0123456789abcdef)"));
        // The next run sees it at its new address: nothing to do.
        let (_, again) = run_found(&p.text, vec![agent_at("10.0.0.7")]);
        assert!(!again.changes(&p.text));
    }

    #[test]
    fn a_hand_written_node_whose_machine_moved_is_reported_not_rewritten_nor_duplicated() {
        let text = format!(
            "[discover]\n\n# gpu-a, mine, id {ID}\n[[node]]\naddr = \"10.0.0.5:9100\"\n\
             ckpt_dir = \"/m\"\n"
        );
        let (exp, p) = run_found(&text, vec![agent_at("10.0.0.7")]);
        assert!(!p.changes(&text), "{}", p.text);
        assert!(p.appended.is_empty() && p.moved.is_empty());
        let m = &exp.report.moved[0];
        assert!(!m.rewritten && m.origin == "hand-written");
        let r = exp.report.render_text();
        assert!(
            r.contains("hand-written [[node]] 10.0.0.5:9100: its machine (gpu-a, id 0123456789abcdef) now answers at 10.0.0.7:9100")
                && r.contains("set addr = \"10.0.0.7:9100\""),
            "{r}"
        );
    }

    /// Guards against anyone on the LAN redirecting a node: an id read from
    /// a TXT record alone (no handshake) moves nothing.
    #[test]
    fn an_id_only_announced_in_txt_does_not_move_a_node() {
        let text =
            format!("[discover]\n\n# found by mdns, id {ID}\n[[node]]\naddr = \"10.0.0.5:9100\"\nckpt_dir = \"/m\"\n");
        let mut s = agent_at("10.0.0.7");
        s.evidence = Evidence::Txt;
        let (exp, p) = run_found(&text, vec![s]);
        assert!(exp.report.moved.is_empty());
        assert_eq!(
            p.appended,
            ["10.0.0.7:9100"],
            "added as a new machine, as before"
        );
    }

    fn run_plain(text: &str) -> Plan {
        let cfg = ClusterConfig::parse(Path::new("c.toml"), text).unwrap();
        let exp = expand(&cfg.nodes, &NodeDefaults::default(), Discovery::default());
        plan(&cfg, &exp, Some(&Absences::default()), "T").unwrap()
    }
}
