//! **The file's `[[node]]` tables as written** — each node's position,
//! line, `addr` and `ssh` strings with their byte spans, the `# found by`
//! comment above it and the node id its comments name: read once, when the
//! file is loaded ([`crate::config::ClusterConfig::file_nodes`]), and used
//! by every reader that asks which node is which machine, and by the writer
//! that splices the file.

use super::provenance::{self, PROVENANCE_PREFIX};
use std::ops::Range;
use toml_edit::{ImDocument, Item};

/// Why a file's nodes cannot be read as `[[node]]` tables (so nothing can
/// be appended to, moved in or cut from it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodesError {
    /// The text is not TOML.
    #[error("{0}")]
    Toml(#[from] toml_edit::TomlError),
    /// `node` exists but is not an array of `[[node]]` tables.
    #[error(
        "the file defines `node` as {0}, so [[node]] tables cannot be appended to it; \
         write each node as its own [[node]] table (see docs/guide.md, \"Writing the file back\"), then run again"
    )]
    NodeNotTables(&'static str),
}

/// One `[[node]]` of the user's file, as far as write-back cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNode {
    /// Position among the file's `[[node]]` tables (0-based).
    pub index: usize,
    /// Its `addr` (empty if missing: the config check reports that).
    pub addr: String,
    /// Its `ssh` alias.
    pub ssh: Option<String>,
    /// The provenance comment above its header (without `# `), when
    /// `rlx-discover` appended it.
    pub found_by: Option<String>,
    /// The node id its comments name (its `# found by` comment): the key that
    /// recognises its machine at a new address.
    pub id: Option<String>,
    /// The bytes of its `addr` string as written (quotes included), which a
    /// move replaces.
    pub addr_span: Option<Range<usize>>,
    /// The bytes of its `ssh` string, which a move replaces when the `ssh`
    /// was written from the old address.
    pub ssh_span: Option<Range<usize>>,
    /// 1-based line of its `[[node]]` header.
    pub line: usize,
    /// The bytes `--prune` would cut (comment, header, keys), or why it
    /// cannot be cut automatically.
    pub cut: Result<Range<usize>, String>,
}

impl FileNode {
    /// True when `rlx-discover` appended this node (it carries the comment).
    pub fn is_discovered(&self) -> bool {
        self.found_by.is_some()
    }
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

fn line_end(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

/// The `[[node]]` tables of `text`, with their provenance and spans.
pub fn file_nodes(text: &str) -> Result<Vec<FileNode>, NodesError> {
    let doc = ImDocument::parse(text)?;
    let aot = match doc.get("node") {
        None => return Ok(Vec::new()),
        Some(Item::ArrayOfTables(a)) => a,
        Some(Item::Value(toml_edit::Value::Array(_))) => {
            return Err(NodesError::NodeNotTables("an inline array (node = [...])"))
        }
        Some(_) => return Err(NodesError::NodeNotTables("a single table or value")),
    };
    let mut out = Vec::new();
    for (index, t) in aot.iter().enumerate() {
        let addr = t
            .get("addr")
            .and_then(Item::as_str)
            .unwrap_or("")
            .to_string();
        let ssh = t.get("ssh").and_then(Item::as_str).map(str::to_string);
        let Some(span) = t.span() else {
            continue;
        };
        let header = line_start(text, span.start);
        let line = text[..header].matches('\n').count() + 1;
        // The comment lines directly above the header (no blank line in
        // between), and the comment on the header line itself.
        let mut block_start = header;
        while block_start > 0 {
            let s = line_start(text, block_start - 1);
            if provenance::comment_text(&text[s..block_start]).is_none() {
                break;
            }
            block_start = s;
        }
        let header_line = &text[header..line_end(text, header)];
        let header_comment = header_line
            .split_once('#')
            .map(|(_, c)| c.trim_end_matches(['\r', '\n']));
        let prov = provenance::read(&text[block_start..header], header_comment);
        let found_by = prov.found_by.clone();
        let above_start = block_start + prov.found_by_at.unwrap_or(0);
        let addr_span = t
            .get("addr")
            .and_then(Item::as_value)
            .filter(|v| v.is_str())
            .and_then(|v| v.span());
        let ssh_span = t
            .get("ssh")
            .and_then(Item::as_value)
            .filter(|v| v.is_str())
            .and_then(|v| v.span());
        let nested = t
            .iter()
            .any(|(_, v)| matches!(v, Item::Table(_) | Item::ArrayOfTables(_)));
        let cut = if nested {
            Err(format!(
                "[[node]] {addr:?} (line {line}) has sub-tables written as [node.*] headers; \
                 remove it by hand"
            ))
        } else if found_by.is_none() {
            Err(format!(
                "[[node]] {addr:?} (line {line}) has no `{}` comment above it, so it is \
                 yours, not rlx-discover's",
                PROVENANCE_PREFIX.trim_end()
            ))
        } else {
            // The comment, and the blank line written before it, go too:
            // the exact inverse of what render_expanded appends.
            let mut start = above_start;
            if start > 0 {
                let prev = line_start(text, start - 1);
                if text[prev..start].trim().is_empty() {
                    start = prev;
                }
            }
            Ok(start..line_end(text, span.end))
        };
        out.push(FileNode {
            index,
            addr,
            ssh,
            found_by,
            id: prov.id,
            addr_span,
            ssh_span,
            line,
            cut,
        });
    }
    Ok(out)
}
