//! **The cluster file's nodes beside the live ones** (`watch --config`):
//! each `[[node]]` of the file is down until a member matches it, by the
//! node id its comments name (read by the library's one reader,
//! [`rlx_discover::write::file_nodes`], as `expand` reads it), else by its
//! `addr`; members that match none are newcomers.

use anyhow::{Context, Result};
use rlx_discover::write::file_nodes;
use rlx_discover::{AddedNode, Event, Kind};
use serde::Serialize;
use std::path::Path;

/// One node of the file, and which member is it now (if any).
#[derive(Debug)]
struct Listed {
    addr: String,
    /// The node id its comments name, as `expand` reads it.
    id: Option<String>,
    line: usize,
    /// The instance that is this node now, while it is up.
    up: Option<String>,
}

/// What an event says about the file, printed beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InFile {
    /// The node's `addr` in the file.
    pub addr: String,
    /// The 1-based line of its `[[node]]` header.
    pub line: usize,
    /// Whether it is up after this event.
    pub up: bool,
}

/// The file's nodes and their state.
#[derive(Debug)]
pub struct Roster {
    nodes: Vec<Listed>,
}

impl Roster {
    /// The `[[node]]` tables of `path`, all down.
    pub fn load(path: &Path) -> Result<Roster> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading {} for its [[node]] list", path.display()))?;
        Roster::from_text(&text).with_context(|| format!("{}: the [[node]] list", path.display()))
    }

    /// The `[[node]]` tables of a cluster file's text, all down.
    fn from_text(text: &str) -> Result<Roster> {
        let nodes = file_nodes(text)?
            .into_iter()
            .map(|n| Listed {
                id: n.id,
                addr: n.addr,
                line: n.line,
                up: None,
            })
            .collect();
        Ok(Roster { nodes })
    }

    /// How many nodes the file lists.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The file's nodes as (addr, line), for the first lines of `watch`.
    pub fn listed(&self) -> impl Iterator<Item = (&str, usize)> {
        self.nodes.iter().map(|n| (n.addr.as_str(), n.line))
    }

    /// Which file node `node` is: the same id (from provenance), else the
    /// same address.
    fn find(&self, node: &AddedNode) -> Option<usize> {
        self.find_by(&node.id, &node.addr)
    }

    fn find_by(&self, id: &str, addr: &str) -> Option<usize> {
        let by_id = (!id.is_empty())
            .then(|| self.nodes.iter().position(|n| n.id.as_deref() == Some(id)))
            .flatten();
        by_id.or_else(|| self.nodes.iter().position(|n| n.addr == addr))
    }

    /// Applies `e`: the file node it is (up or down after it), or `None`
    /// for a newcomer (or a refusal).
    pub fn apply(&mut self, e: &Event) -> Option<InFile> {
        let node = e.node.as_ref()?;
        let k = match self
            .nodes
            .iter()
            .position(|n| n.up.as_deref() == Some(&e.instance))
        {
            Some(k) => k,
            None => self.find(node)?,
        };
        let n = &mut self.nodes[k];
        match e.event {
            Kind::Joined => n.up = Some(e.instance.clone()),
            Kind::Left if n.up.as_deref() == Some(&e.instance) => n.up = None,
            _ => {}
        }
        Some(InFile {
            addr: n.addr.clone(),
            line: n.line,
            up: n.up.is_some(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards against the roster reading ids its own way: comments the
    /// library accepts (`id=`, `id:`, an adopted node's own comment) made
    /// a move for `expand` and an unknown node for `watch --config`. Each
    /// spelling must name the node here exactly as `expand` reads it, and
    /// a quoted host name (a stranger's) names none.
    #[test]
    fn every_comment_spelling_expand_reads_names_the_same_node_in_watch() {
        let id = "0123456789abcdef";
        let table = [
            (
                format!("# found by mdns (handshake) 2026-11-30: gpu-a, 32 cores, id {id}"),
                true,
            ),
            (format!("# found by mdns: gpu-a, id={id}"), true),
            (format!("# found by mdns: gpu-a, id: {id}"), true),
            (format!("# my box, id {id}"), true),
            (format!("# ID {}", id.to_uppercase()), true),
            (format!("# found by mdns: \"gpu id {id}\", 8 cores"), false),
            (format!("# found by mdns: gpu-a.id.{id}"), false),
        ];
        for (comment, names) in table {
            let text = format!("{comment}\n[[node]]\naddr = \"10.0.0.9:9100\"\n");
            let expand_reads = file_nodes(&text).unwrap()[0].id.clone();
            let roster = Roster::from_text(&text).unwrap();
            assert_eq!(roster.nodes[0].id, expand_reads, "{comment}");
            // A member with that id at another address is this node.
            let found = roster.find_by(id, "10.0.0.50:9100");
            assert_eq!(found.is_some(), names, "{comment}: {expand_reads:?}");
        }
    }
}
