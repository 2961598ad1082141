//! **What discovery did** — the report printed beside every expanded node
//! list: what was added, what was dropped and why, which hosts failed, which
//! devices were skipped. Nothing that discovery leaves out goes unsaid.
//!
//! The JSON field names here are a documented, stable interface for scripts
//! (docs/json.md): add fields, never rename them.

use super::select::SkipReason;
use crate::escape::{escape_line, untrusted};
use crate::sighting::{Attempt, Concern, Evidence, Pinning, Problem, Source};
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
    /// Who it is by its node key: `pinned` (the key pinned for its id),
    /// `new` (first sight: pinned now) or `unpinned` (no node key proved:
    /// an older agent, or caps from no handshake).
    pub identity: Pinning,
    /// The fingerprint (`SHA256:...`) of its node key, when it proved one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_key: Option<String>,
    /// Device written into the node.
    pub device: String,
    /// Usable memory of that device, bytes (the largest, when several).
    pub mem_bytes: u64,
    /// Usable memory of each device of the chosen kind when the node has
    /// several (`[24 GiB, 24 GiB]` for two RTX 4090s); empty for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_mems: Vec<u64>,
    /// Every accelerator the node reported, with its details (the caps'
    /// `devices` less the CPU); empty when it sent no caps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<rlx_proto::caps::DeviceInfo>,
    /// What the node's agent says of the link holding the chosen address
    /// (kind, speed, MTU, RDMA), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<rlx_proto::caps::LinkInfo>,
    /// Logical cores, 0 when unknown.
    pub cores: u32,
    /// Cluster name announced, if any.
    pub cluster: Option<String>,
    /// Interface it was heard on (mDNS).
    pub heard_on: Option<String>,
    /// Milliseconds after start when it was first found.
    pub found_ms: u64,
    /// Other addresses the same machine answered at (one agent on two
    /// networks, or an ssh alias and an IP), folded into this node. Shown so
    /// that a member posing as this one with a perfect copy of its caps
    /// (which a shared key cannot tell apart, see docs/security.md) is at
    /// least visible.
    pub also_at: Vec<String>,
    /// The link measured to it (`--links`, `measure_links`): absent when
    /// not asked for or not measured (the reason is in the report's
    /// `link_problems`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_link: Option<rlx_proto::handshake::LinkMeasurement>,
    /// Where its agent answers (handshake, link measurement, health
    /// checks): `addr`'s host with the agent's port. Absent when no agent
    /// answered (a bare listener a scan found).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Whether something listened on its worker port (the one in `addr`)
    /// when its agent last looked; absent when no agent said (an older
    /// agent, a bare listener). A node whose worker is not running is
    /// written all the same: the runtime may start it over ssh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_listening: Option<bool>,
    /// What holds its worker port when that is not an RLX worker, as its
    /// agent named it (`node_exporter (HTTP)`); `worker_listening` is then
    /// false. Absent otherwise, and from agents that do not name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_held_by: Option<String>,
}

/// A node whose link was not measured, and why (an agent too old, a
/// refusal, a failed transfer). The node is added all the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkProblem {
    /// The node's `addr`.
    pub addr: String,
    /// Why, naming what to do.
    pub why: String,
}

impl AddedNode {
    /// The device cell: `cuda` for one device, `2x cuda` for two (the
    /// kind, also when `device_policy = "all"` wrote `cuda:0,cuda:1`).
    pub fn device_cell(&self) -> String {
        if self.device_mems.len() < 2 {
            return self.device.clone();
        }
        let kind = self.device.split([':', ',']).next().unwrap_or_default();
        format!("{}x {kind}", self.device_mems.len())
    }

    /// The memory cell: `24.0 GiB`, or `24.0+12.0 GiB` for a box whose
    /// devices of that kind differ.
    pub fn memory_cell(&self) -> String {
        let first = self.device_mems.first().copied();
        if first.is_none() || self.device_mems.iter().all(|m| Some(*m) == first) {
            return gib(first.unwrap_or(self.mem_bytes));
        }
        let each: Vec<String> = self
            .device_mems
            .iter()
            .map(|m| format!("{:.1}", *m as f64 / (1u64 << 30) as f64))
            .collect();
        format!("{} GiB", each.join("+"))
    }

    /// `2x cuda 24.0 GiB`: the two cells as one phrase.
    pub fn device_summary(&self) -> String {
        format!("{} {}", self.device_cell(), self.memory_cell())
    }

    /// Its worker as people say it: `worker listening`, `worker not
    /// listening`, `worker port held by node_exporter (HTTP)` (escaped: the
    /// agent's text), or `None` when no agent said.
    pub fn worker_text(&self) -> Option<String> {
        if let Some(h) = &self.worker_held_by {
            return Some(format!("worker port held by {}", escape_line(h)));
        }
        self.worker_listening.map(|up| {
            if up {
                "worker listening".to_string()
            } else {
                "worker not listening".to_string()
            }
        })
    }

    /// What its report line says of its node key: nothing when pinned,
    /// `key pinned now` on first sight, and that it has none when an
    /// agent answered without one (an older agent).
    pub fn identity_text(&self) -> Option<&'static str> {
        match self.identity {
            Pinning::Pinned => None,
            Pinning::New => Some("node key pinned now"),
            Pinning::Unpinned if self.evidence.is_fresh() && self.evidence != Evidence::Ssh => {
                Some("no node key (an older agent, or one without a state directory): identity not pinned")
            }
            Pinning::Unpinned => None,
        }
    }

    /// The link behind the chosen address as people say it (`10 GbE`).
    pub fn link_text(&self) -> Option<String> {
        self.link.as_ref().and_then(|l| l.describe())
    }
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
    /// That node's index among the file's `[[node]]` tables (0-based), when
    /// it is one (not for a second sighting of a machine found this run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<usize>,
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

/// Two live hosts claiming one node id: a cloned disk image that carried
/// the agent's state along, or (with a cluster key) a member posing as
/// another member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clash {
    /// The id both claim.
    pub id: String,
    /// Every address claiming it.
    pub addrs: Vec<String>,
    /// True when a claimant proved the cluster key: then neither is
    /// preferred (see `kept` and `refused`). Without a key an id proves
    /// nothing, and each claimant is kept as its own node.
    pub authenticated: bool,
    /// The claimants that keep their place: with a key, the one already in
    /// the file (none if neither is); without a key, all of them.
    pub kept: Vec<String>,
    /// The claimants refused (each also listed in `failed` with its reason).
    pub refused: Vec<String>,
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
    /// Running agents on a link the mDNS browse listened on, found by another
    /// source but never heard over mDNS.
    pub unheard_by_mdns: Vec<Unheard>,
    /// Nodes of the file whose machine (recognised by the node id in their
    /// comments) answers at a new address.
    pub moved: Vec<Moved>,
    /// Nodes whose link measurement was asked for and failed, with the
    /// reason (absent from the JSON when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub link_problems: Vec<LinkProblem>,
    /// When discovery started, in microseconds of Unix time: the zero of
    /// every `found_ms`, so that a script (the benchmark suite, which times
    /// every tool from its spawn) can put them on its own clock. Absent
    /// from a report not made by a discovery run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_unix_us: Option<u64>,
}

/// A node of the file whose machine now answers at another address: a new
/// DHCP lease, or a box moved to another port of the switch. It is
/// recognised by the node id its `# found by` comment names (see
/// docs/security.md, "A node that moved"), from fresh caps (a handshake or SSH; with a
/// cluster key, an authenticated handshake).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    /// The node's index among the file's `[[node]]` tables (0-based).
    pub node: usize,
    /// The node id that matched.
    pub id: String,
    /// The node's `addr` in the file.
    pub from: String,
    /// The address its machine answers at now.
    pub to: String,
    /// The host name the machine reports.
    pub hostname: String,
    /// Who wrote the node: `discovered` (it carries the `# found by`
    /// comment) or `hand-written`.
    pub origin: &'static str,
    /// True when `expand --write` updates the node's `addr` in place (a
    /// discovered node); false for a hand-written node, which is never
    /// rewritten: the report says where its machine is now.
    pub rewritten: bool,
}

impl Moved {
    /// The report line (without the leading mark).
    pub fn render_text(&self) -> String {
        let who = format!("{}, id {}", untrusted(&self.hostname), self.id);
        if self.rewritten {
            format!(
                "moved {} -> {} ({who}): its addr is updated in place by --write",
                self.from, self.to
            )
        } else {
            format!(
                "hand-written [[node]] {}: its machine ({who}) now answers at {}; the node was \
                 not changed (hand-written nodes are never rewritten) and the machine was not \
                 added again: set addr = \"{}\" in that node if the move is for good",
                self.from, self.to, self.to
            )
        }
    }
}

/// A running agent another source found on a browsed link, that mDNS did
/// not hear: multicast between it and this host does not get through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unheard {
    /// Its address, as the source that found it has it.
    pub addr: String,
    /// The host as that source names it.
    pub host: String,
    /// The sources that found it.
    pub found_by: Vec<Source>,
}

impl Unheard {
    /// The report line (without the leading `  ? `).
    pub fn render_text(&self) -> String {
        let by: Vec<String> = self.found_by.iter().map(|s| s.to_string()).collect();
        format!(
            "{} ({}) was found by {} but not heard over mDNS, though it is on a link the browse \
             listened on: multicast between it and this host does not get through (Wi-Fi client \
             isolation, IGMP snooping, a firewall dropping UDP 5353 on either side); run \
             `rlx-discover doctor` here and on it",
            self.addr,
            untrusted(&self.host),
            by.join("+")
        )
    }
}

/// Formats bytes as GiB with one decimal, for humans.
pub(crate) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl Report {
    /// True when some host failed or was refused.
    pub fn has_failures(&self) -> bool {
        !self.failed.is_empty()
    }

    /// True when a problem should fail the run (exit 1): one of the user's
    /// (an `ssh_hosts` entry, a configured source, a node of the file or an
    /// announcement claiming one), a clash, or with `strict` any refusal at
    /// all. Strangers' announcements are reported but do not fail the run.
    pub fn fails_run(&self, strict: bool) -> bool {
        self.failed
            .iter()
            .any(|p| strict || p.concern == Concern::Yours)
    }

    /// True when a source the user configured by name (`subnet`, `dns_sd`)
    /// found nothing: a scan of the wrong block or an empty zone is the
    /// user's to look at, even when mDNS found machines.
    pub fn configured_source_found_nothing(&self) -> bool {
        self.tried
            .iter()
            .any(|t| matches!(t.source, Source::Subnet | Source::Dns) && t.answered == 0)
    }

    /// True when a hand-written node's machine answers at another address:
    /// the file names a dead address for a machine the user owns, which
    /// only the user may change (exit 1 until they do).
    pub fn hand_written_moved(&self) -> bool {
        self.moved.iter().any(|m| !m.rewritten)
    }

    /// How many of [`Report::failed`] are strangers' (not in the file,
    /// claiming nothing of it).
    pub fn strangers(&self) -> usize {
        self.failed
            .iter()
            .filter(|p| p.concern == Concern::Stranger)
            .count()
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

    /// The human-readable report (stderr of `expand`). Every line goes
    /// through [`escape_line`] and every network-supplied name through
    /// [`untrusted`], so each entry is exactly one line.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let mut line = |text: String| {
            s.push_str(&escape_line(&text));
            s.push('\n');
        };
        for t in &self.tried {
            line(format!(
                "tried {}: {} ({} answered, {} ms)",
                t.source, t.what, t.answered, t.elapsed_ms
            ));
        }
        let strangers = self.strangers();
        line(format!(
            "{} node(s) added, {} hand-written kept, {} duplicate(s) dropped, {} host(s) failed{}",
            self.added.len(),
            self.kept,
            self.duplicates.len(),
            self.failed.len() - strangers,
            if strangers > 0 {
                format!(
                    ", {strangers} stranger(s) refused (not in the file: they do not fail the run)"
                )
            } else {
                String::new()
            }
        ));
        for m in &self.moved {
            let mark = if m.rewritten { '>' } else { '~' };
            line(format!("  {mark} {}", m.render_text()));
        }
        for a in &self.added {
            let srcs: Vec<String> = a.sources.iter().map(|s| s.to_string()).collect();
            let also = if a.also_at.is_empty() {
                String::new()
            } else {
                format!(", also at {}", a.also_at.join(", "))
            };
            let link = a.link_text().map_or_else(String::new, |l| format!(", {l}"));
            let worker = a
                .worker_text()
                .map_or_else(String::new, |w| format!(", {w}"));
            let ident = a
                .identity_text()
                .map_or_else(String::new, |i| format!(", {i}"));
            let measured = a
                .measured_link
                .as_ref()
                .map_or_else(String::new, |l| format!(", link {}", l.summary()));
            line(format!(
                "  + {:<24} {:<8} {:>10}  {:>3} cores  via {} ({}){worker}{ident}{link}{also}{measured}",
                a.addr,
                a.device_cell(),
                a.memory_cell(),
                a.cores,
                srcs.join("+"),
                a.evidence
            ));
        }
        for d in &self.duplicates {
            line(format!(
                "  = {} ({}) is already in the list as {} (same {})",
                untrusted(&d.host),
                d.source,
                d.same_as,
                d.matched_by
            ));
        }
        for f in &self.failed {
            line(format!("  {} {}", f.mark(), f.line()));
        }
        for d in &self.skipped_devices {
            line(format!("  - {}: skipped device {}", d.addr, d.why));
        }
        for c in &self.clashes {
            line(format!("  ! {}", c.render_text()));
        }
        for w in &self.warnings {
            line(format!("  ? {w}"));
        }
        for u in &self.unheard_by_mdns {
            line(format!("  ? {}", u.render_text()));
        }
        for l in &self.link_problems {
            line(format!("  ? link to {} not measured: {}", l.addr, l.why));
        }
        s
    }
}

impl Clash {
    /// The report line for this clash (without the leading `  ! `).
    pub fn render_text(&self) -> String {
        let who = self.addrs.join(" and ");
        if !self.authenticated {
            return format!(
                "node id {} is claimed by {who}: each is kept by address; give the clones \
                 their own identity (rlx-agent derives it from the hardware unless --node-id \
                 pins it)",
                self.id
            );
        }
        let outcome = if self.kept.is_empty() {
            "neither is in the file, so neither was added".to_string()
        } else {
            format!(
                "{} is in the file and keeps its address; {} was refused",
                self.kept.join(" and "),
                self.refused.join(" and ")
            )
        };
        format!(
            "node id {} is claimed by {who}, each proving the cluster key: {outcome}. A member \
             holding the shared key can pose as another member (see docs/security.md); if these \
             are clones, give each its own id (rlx-agent --node-id, or delete the node-id file \
             in its state directory); if one box really answers at both, write its [[node]] by \
             hand",
            self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link that was not measured is a reported line with its reason,
    /// never silence; a measured one is on the node's line.
    #[test]
    fn link_figures_and_link_problems_are_in_the_report() {
        let r = Report {
            link_problems: vec![LinkProblem {
                addr: "10.0.0.9:9100".into(),
                why: "link measurement not supported by agent version 0.0.9".into(),
            }],
            ..Default::default()
        };
        let text = r.render_text();
        assert!(
            text.contains("? link to 10.0.0.9:9100 not measured: link measurement not supported by agent version 0.0.9"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["link_problems"][0]["addr"], "10.0.0.9:9100");
        let quiet = serde_json::to_value(Report::default()).unwrap();
        assert!(quiet.get("link_problems").is_none(), "absent when empty");
    }
}
