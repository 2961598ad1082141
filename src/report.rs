//! **What discovery did** — the report printed beside every expanded node
//! list: what was added, what was dropped and why, which hosts failed, which
//! devices were skipped. Nothing that discovery leaves out goes unsaid.
//!
//! The JSON field names here are a documented, stable interface for scripts
//! (see README): add fields, never rename them.

use crate::select::SkipReason;
use crate::sighting::{Attempt, Evidence, Problem, Source};
use serde::Serialize;
use std::fmt::Write as _;

/// A node discovery added, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddedNode {
    /// The node's `addr`.
    pub addr: String,
    /// Host as first seen (ssh alias, IP or mDNS instance).
    pub host: String,
    /// Host name the node reported.
    pub hostname: String,
    /// Node id, when known.
    pub id: String,
    /// Every source that saw it.
    pub sources: Vec<Source>,
    /// Evidence behind the caps used.
    pub evidence: Evidence,
    /// Device written into the node.
    pub device: String,
    /// Usable memory of that device, bytes.
    pub mem_bytes: u64,
    /// Logical cores, 0 when unknown.
    pub cores: u32,
    /// Cluster name announced, if any.
    pub cluster: Option<String>,
    /// Interface it was heard on (mDNS).
    pub heard_on: Option<String>,
    /// Milliseconds after start when it was first found.
    pub found_ms: u64,
}

/// A sighting dropped because the node was already in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Duplicate {
    /// Which source saw it.
    pub source: Source,
    /// The host as that source names it.
    pub host: String,
    /// The address it would have had.
    pub addr: String,
    /// The `addr` of the node it duplicates.
    pub same_as: String,
    /// How the match was made (`addr`, `id`, `ssh alias`, `host name`).
    pub matched_by: String,
}

/// A device passed over during selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedDevice {
    /// The node's `addr`.
    pub addr: String,
    /// The device label.
    pub device: String,
    /// The device's name.
    pub name: String,
    /// Why.
    pub reason: SkipReason,
    /// The same, in words.
    pub why: String,
}

/// Two live hosts claiming one node id (usually a cloned disk image that
/// carried the agent's state along).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clash {
    /// The id both claim.
    pub id: String,
    /// The addresses claiming it; each is kept as its own node.
    pub addrs: Vec<String>,
}

/// Everything one expansion did.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Report {
    /// What each source tried.
    pub tried: Vec<Attempt>,
    /// Hand-written nodes kept as they were.
    pub kept: usize,
    /// Nodes added by discovery.
    pub added: Vec<AddedNode>,
    /// Sightings dropped as duplicates.
    pub duplicates: Vec<Duplicate>,
    /// Hosts that failed or were refused, with reasons.
    pub failed: Vec<Problem>,
    /// Devices skipped during selection, with reasons.
    pub skipped_devices: Vec<SkippedDevice>,
    /// Id clashes.
    pub clashes: Vec<Clash>,
    /// Things a user should look at (a hand-written node that disagrees with
    /// what its machine reports, a node with no caps).
    pub warnings: Vec<String>,
}

/// Formats bytes as GiB with one decimal, for humans.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl Report {
    /// True when some host failed or was refused.
    pub fn has_failures(&self) -> bool {
        !self.failed.is_empty()
    }

    /// What to print when discovery found nothing: what was tried, for how
    /// long, the usual causes, and how to see more.
    pub fn empty_hint(&self) -> String {
        let mut s = String::from("no node was found.\n");
        for t in &self.tried {
            let _ = writeln!(s, "  tried {}: {} ({} ms)", t.source, t.what, t.elapsed_ms);
        }
        if self.tried.is_empty() {
            s.push_str(
                "  nothing was tried: [discover] has no ssh_hosts, no subnet, and mdns = false\n",
            );
        }
        s.push_str(
            "Usual causes:\n  \
             - multicast is blocked on this network (Wi-Fi client isolation, Docker bridge \
             networks, VPNs such as Tailscale): list the machines in [discover] ssh_hosts, or \
             scan them with subnet = \"10.0.0.0/24\"\n  \
             - the agents are on another subnet: mDNS does not cross routers; use ssh_hosts, \
             subnet, or register them in DNS (rlx-agent --register) and set dns_sd\n  \
             - the agents announce another cluster name (rlx-agent --cluster) or hold another \
             key (--key-file): see the refusals above, if any\n  \
             - no rlx-agent runs on the workers, or it listens on another interface (--interface)\n\
             See more with RUST_LOG=debug.\n",
        );
        s
    }

    /// The human-readable report (stderr of `expand`).
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        for t in &self.tried {
            let _ = writeln!(
                s,
                "tried {}: {} ({} answered, {} ms)",
                t.source, t.what, t.answered, t.elapsed_ms
            );
        }
        let _ = writeln!(
            s,
            "{} node(s) added, {} hand-written kept, {} duplicate(s) dropped, {} host(s) failed",
            self.added.len(),
            self.kept,
            self.duplicates.len(),
            self.failed.len()
        );
        for a in &self.added {
            let srcs: Vec<String> = a.sources.iter().map(|s| s.to_string()).collect();
            let _ = writeln!(
                s,
                "  + {:<24} {:<8} {:>10}  {:>3} cores  via {} ({})",
                a.addr,
                a.device,
                gib(a.mem_bytes),
                a.cores,
                srcs.join("+"),
                a.evidence
            );
        }
        for d in &self.duplicates {
            let _ = writeln!(
                s,
                "  = {} ({}) is already in the list as {} (same {})",
                d.host, d.source, d.same_as, d.matched_by
            );
        }
        for f in &self.failed {
            let _ = writeln!(s, "  ! {f}");
        }
        for d in &self.skipped_devices {
            let _ = writeln!(s, "  - {}: skipped device {}", d.addr, d.why);
        }
        for c in &self.clashes {
            let _ = writeln!(
                s,
                "  ! node id {} is claimed by {}: each is kept by address; give the clones \
                 their own identity (rlx-agent derives it from the hardware unless --node-id \
                 pins it)",
                c.id,
                c.addrs.join(" and ")
            );
        }
        for w in &self.warnings {
            let _ = writeln!(s, "  ? {w}");
        }
        s
    }
}
