//! **The cluster file's nodes beside the live ones** (`watch --config`):
//! each `[[node]]` of the file is down until a member matches it, by the
//! node id its `# found by` provenance names, else by its `addr`; members
//! that match none are newcomers.

use anyhow::{Context, Result};
use rlx_discover::write::file_nodes;
use rlx_discover::{AddedNode, Event, Kind};
use serde::Serialize;
use std::path::Path;

/// One node of the file, and which member is it now (if any).
#[derive(Debug)]
struct Listed {
    addr: String,
    /// From `..., id <16 hex>` at the end of its provenance comment.
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
        let nodes = file_nodes(&text)
            .with_context(|| format!("{}: the [[node]] list", path.display()))?
            .into_iter()
            .map(|n| Listed {
                id: n.found_by.as_deref().and_then(id_of_provenance),
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
        let by_id = (!node.id.is_empty())
            .then(|| {
                self.nodes
                    .iter()
                    .position(|n| n.id.as_deref() == Some(node.id.as_str()))
            })
            .flatten();
        by_id.or_else(|| self.nodes.iter().position(|n| n.addr == node.addr))
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

/// The node id at the end of a provenance comment (`..., id 0123456789abcdef`).
fn id_of_provenance(found_by: &str) -> Option<String> {
    let (_, id) = found_by.rsplit_once(", id ")?;
    let id = id.trim();
    rlx_proto::caps::is_valid_id(id).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_read_from_the_provenance_comment() {
        assert_eq!(
            id_of_provenance(
                "found by mdns (handshake) 2026-11-30: gpu-a, cuda 24.0 GiB, 32 cores, id 0123456789abcdef"
            )
            .as_deref(),
            Some("0123456789abcdef")
        );
        assert_eq!(id_of_provenance("found by ssh: gpu-a, 8 cores"), None);
    }
}
