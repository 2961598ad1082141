//! **What the file's comments say about its nodes** — for each `[[node]]`,
//! whether rlx-discover appended it and the node id its `# found by`
//! comment names, read once when the file is loaded, so the pipeline can
//! recognise a machine that moved without reading the file itself.

use super::render::file_nodes;
use crate::config::ClusterConfig;

/// What the file's comments say about one of its nodes (see
/// [`super::provenance`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileMark {
    /// The node id its comments name.
    pub id: Option<String>,
    /// True when it carries the `# found by` comment (rlx-discover
    /// appended it, so a move may rewrite its `addr`).
    pub discovered: bool,
}

/// The marks of `cfg`'s nodes, in node order. A file whose `node` is not
/// `[[node]]` tables gives none: its write-back is refused later, with the
/// reason.
pub(crate) fn file_marks(cfg: &ClusterConfig) -> Vec<FileMark> {
    let mut marks = vec![FileMark::default(); cfg.nodes.len()];
    for n in file_nodes(&cfg.text).unwrap_or_default() {
        if let Some(m) = marks.get_mut(n.index) {
            *m = FileMark {
                discovered: n.is_discovered(),
                id: n.id,
            };
        }
    }
    marks
}
