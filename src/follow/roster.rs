//! **The cluster file's nodes beside the live members**
//! ([`crate::LiveWatch::with_file`]): each `[[node]]` of the file is down
//! until a member is recognised as it, by the one identity rule
//! `expand` uses ([`crate::pipeline::identity`]: the node id its comments
//! name, when the member proves it, then its address); a member that is
//! none of them is a newcomer. Every event about a member says which node
//! it is ([`crate::Event::in_file`]), so an embedding learns which of its
//! nodes went down without reading the file itself.

use crate::clusterfile::FileNode;
use crate::config::{ClusterConfig, NodeConfig};
use crate::pipeline::identity::{self, Claim, Known, Seen};
use crate::watch::{Event, InFile, Kind};

/// The file's nodes and which member is each now.
#[derive(Debug, Clone)]
pub(crate) struct Roster {
    nodes: Vec<NodeConfig>,
    file: Vec<FileNode>,
    /// The instance that is each node now, while it is up.
    up: Vec<Option<String>>,
    /// The watch is keyed: a member's id proves who it is only with the
    /// cluster key.
    keyed: bool,
}

impl Roster {
    /// The nodes of `cfg`, all down.
    pub(crate) fn new(cfg: &ClusterConfig, keyed: bool) -> Roster {
        Roster {
            up: vec![None; cfg.nodes.len()],
            nodes: cfg.nodes.clone(),
            file: cfg.file_nodes.clone().unwrap_or_default(),
            keyed,
        }
    }

    /// The file's nodes, with their lines (for a first listing).
    pub(crate) fn listed(&self) -> Vec<InFile> {
        (0..self.nodes.len()).map(|i| self.in_file(i)).collect()
    }

    fn in_file(&self, i: usize) -> InFile {
        InFile {
            node: i,
            addr: self.nodes[i].addr.clone(),
            line: self
                .file
                .iter()
                .find(|f| f.index == i)
                .map_or(0, |f| f.line),
            up: self.up[i].is_some(),
        }
    }

    /// Which node `e` is about (none for a newcomer, a refusal or the
    /// partition), with its state after `e`.
    pub(crate) fn apply(&mut self, e: &Event) -> Option<InFile> {
        let k = match self.up.iter().position(|u| u.as_ref() == Some(&e.instance)) {
            Some(k) => k,
            None => self.recognise(e)?,
        };
        match e.event {
            Kind::Joined => self.up[k] = Some(e.instance.clone()),
            Kind::Left if self.up[k].as_ref() == Some(&e.instance) => self.up[k] = None,
            _ => {}
        }
        Some(self.in_file(k))
    }

    /// The identity rule for the member of `e`; a node up as another
    /// member is not this one.
    fn recognise(&self, e: &Event) -> Option<usize> {
        let node = e.node.as_ref()?;
        let known = Known::all(&self.nodes, &self.file);
        let mut seen = vec![Seen {
            hostname: &node.hostname,
            ..Seen::addr(&node.addr)
        }];
        seen.extend(node.also_at.iter().map(|a| Seen {
            hostname: &node.hostname,
            ..Seen::addr(a)
        }));
        let claim = Claim {
            id: Some(node.id.as_str())
                .filter(|id| !id.is_empty() && identity::proves_id(node.evidence, self.keyed)),
            over_ssh: false,
            seen,
        };
        let taken = |i: usize| self.up[i].as_ref().is_some_and(|u| *u != e.instance);
        identity::recognise(&known, &claim, taken)
            .0
            .map(|hit| hit.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::NodeAddr;
    use crate::pipeline::{expand, expand_file, NodeDefaults};
    use crate::sighting::{Discovery, Evidence, Pinning, Sighting, Source};
    use rlx_proto::caps::NodeCaps;
    use std::path::Path;

    const ID: &str = "0123456789abcdef";

    /// An agent answering a handshake at `addr` with node id `id`.
    fn answering(addr: &str, id: &str, evidence: Evidence) -> Sighting {
        let (host, port) = NodeAddr::split(addr);
        Sighting {
            identity: Pinning::Unpinned,
            source: Source::Mdns,
            host: host.into(),
            addr: addr.into(),
            ip: host.parse().ok(),
            port: port.unwrap(),
            agent_port: Some(6184),
            worker_reachable: None,
            ssh: None,
            evidence,
            caps: Some(NodeCaps {
                id: id.into(),
                hostname: "gpu-a".into(),
                ..Default::default()
            }),
            heard_on: None,
            found_ms: 1,
        }
    }

    /// What `expand` makes of `s` against `cfg`: the index of the file
    /// node it is (moved or at its address), or none (added as new).
    fn expand_says(cfg: &ClusterConfig, s: Sighting) -> Option<usize> {
        let file = cfg.file_nodes.clone().unwrap();
        let found = Discovery {
            sightings: vec![s],
            ..Default::default()
        };
        let e = expand_file(&cfg.nodes, &file, &NodeDefaults::default(), found);
        let moved = e.report.moved.first().map(|m| m.node);
        let dup = e.report.duplicates.first().and_then(|d| d.node);
        assert!(moved.is_none() || dup.is_none());
        moved.or(dup)
    }

    /// What `watch --config` makes of the same machine joining: the node
    /// its event names.
    fn watch_says(cfg: &ClusterConfig, s: Sighting, keyed: bool) -> Option<usize> {
        let node = expand(
            &[],
            &NodeDefaults::default(),
            Discovery {
                sightings: vec![s],
                ..Default::default()
            },
        )
        .added()[0]
            .clone();
        let e = Event {
            v: 1,
            event: Kind::Joined,
            at_ms: 0,
            instance: "gpu-a".into(),
            node: Some(node),
            incarnation: None,
            reason: None,
            reachable: None,
            unreachable: None,
            in_file: None,
        };
        Roster::new(cfg, keyed).apply(&e).map(|f| f.node)
    }

    /// Guards against "which node is this machine?" having two answers:
    /// comments the library reads (`id=`, `id:`, an adopted node's own
    /// comment) made a move for `expand` and an unknown node for `watch
    /// --config`. For every spelling, and at the node's own address or a
    /// new one, both commands name the same node, or none; a quoted host
    /// name (a stranger's) names none.
    #[test]
    fn every_comment_spelling_names_the_same_node_in_expand_and_in_watch() {
        let table = [
            (
                format!("# found by mdns (handshake) 2026-11-30: gpu-a, 32 cores, id {ID}"),
                true,
            ),
            (format!("# found by mdns: gpu-a, id={ID}"), true),
            (format!("# found by mdns: gpu-a, id: {ID}"), true),
            (format!("# my box, id {ID}"), true),
            (format!("# ID {}", ID.to_uppercase()), true),
            (format!("# found by mdns: \"gpu id {ID}\", 8 cores"), false),
            (format!("# found by mdns: gpu-a.id.{ID}"), false),
            ("# found by mdns: gpu-a".to_string(), false),
        ];
        for (comment, names) in table {
            let text = format!(
                "[discover]\n\n[[node]]\naddr = \"10.0.0.1:9100\"\nckpt_dir = \"/m\"\n\n{comment}\n[[node]]\n\
                 addr = \"10.0.0.9:9100\"\nckpt_dir = \"/m\"\n"
            );
            let cfg = ClusterConfig::parse(Path::new("c.toml"), &text).unwrap();
            for (at, want) in [
                ("10.0.0.9:9100", Some(1)),
                ("10.0.0.50:9100", names.then_some(1)),
                ("10.0.0.1:9100", Some(0)),
            ] {
                let s = answering(at, ID, Evidence::Handshake);
                let expand = expand_says(&cfg, s.clone());
                let watch = watch_says(&cfg, s, false);
                assert_eq!(expand, want, "expand, {comment:?}, machine at {at}");
                assert_eq!(watch, want, "watch, {comment:?}, machine at {at}");
            }
        }
    }

    /// With a cluster key, a member's id names its node only when its
    /// handshake proved the key, in `watch` as in `expand`.
    #[test]
    fn under_a_key_only_an_authenticated_member_is_recognised_by_its_id() {
        let text = format!("[discover]\n\n# found by mdns: gpu-a, id {ID}\n[[node]]\naddr = \"10.0.0.9:9100\"\nckpt_dir = \"/m\"\n");
        let cfg = ClusterConfig::parse(Path::new("c.toml"), &text).unwrap();
        let plain = answering("10.0.0.50:9100", ID, Evidence::Handshake);
        let proven = answering("10.0.0.50:9100", ID, Evidence::Authenticated);
        assert_eq!(watch_says(&cfg, plain, true), None);
        assert_eq!(watch_says(&cfg, proven.clone(), true), Some(0));
        assert_eq!(expand_says(&cfg, proven), Some(0));
    }

    #[test]
    fn a_member_leaving_marks_its_node_down_and_a_newcomer_names_none() {
        let text = "[discover]\n\n[[node]]\naddr = \"10.0.0.9:9100\"\nckpt_dir = \"/m\"\n";
        let cfg = ClusterConfig::parse(Path::new("c.toml"), text).unwrap();
        let mut r = Roster::new(&cfg, false);
        let node = |addr: &str| {
            expand(
                &[],
                &NodeDefaults::default(),
                Discovery {
                    sightings: vec![answering(addr, ID, Evidence::Handshake)],
                    ..Default::default()
                },
            )
            .added()[0]
                .clone()
        };
        let event = |kind, instance: &str, addr: &str| Event {
            v: 1,
            event: kind,
            at_ms: 0,
            instance: instance.into(),
            node: Some(node(addr)),
            incarnation: None,
            reason: None,
            reachable: None,
            unreachable: None,
            in_file: None,
        };
        let up = r.apply(&event(Kind::Joined, "a", "10.0.0.9:9100")).unwrap();
        assert!(up.up && up.line == 3 && up.node == 0, "{up:?}");
        assert_eq!(r.apply(&event(Kind::Joined, "b", "10.0.0.77:9100")), None);
        let down = r.apply(&event(Kind::Left, "a", "10.0.0.9:9100")).unwrap();
        assert!(!down.up);
        assert_eq!(r.listed()[0].line, 3);
    }
}
