//! **Reading the `# found by` comment back** — the provenance rlx-discover
//! writes above every node it appends is also the key that recognises the
//! node later (docs/security.md, "A node that moved"): a node whose machine moved to a new
//! address is found again by the node id in that comment.
//!
//! ```text
//! # found by mdns (handshake) 2026-11-30 06:58 UTC: gpu-a, cuda 24.0 GiB, id 0123456789abcdef
//! # rack 3, the one with the loud fan          <- a user's note: still the same block
//! [[node]]
//! addr = "10.0.0.5:9100"
//! ```
//!
//! People edit files, so the reading is lenient where that costs nothing:
//! the comment may be indented, written `#found by` or `# Found By`, have
//! other comment lines between it and the header, lose or reorder its
//! middle part, and name the id as `id X`, `id: X` or `id=X` in either
//! case. What it must keep is the words "found by" at the start of one
//! comment line of the block directly above the header (no blank line in
//! between): deleting them is how a user adopts a node as their own.

use rlx_proto::caps::is_valid_id;

/// How every provenance comment starts; a `[[node]]` whose header has such a
/// line directly above it was appended by `rlx-discover`.
pub(crate) const PROVENANCE_PREFIX: &str = "# found by ";

/// The text of a comment line (`# ...`) without its `#` and surrounding
/// blanks, or `None` for a line that is not only a comment.
pub(super) fn comment_text(line: &str) -> Option<&str> {
    line.trim().strip_prefix('#').map(str::trim)
}

/// True when the comment line says rlx-discover appended the node below.
pub(super) fn is_found_by(line: &str) -> bool {
    comment_text(line).is_some_and(|t| {
        t.get(..8)
            .is_some_and(|head| head.eq_ignore_ascii_case("found by"))
    })
}

/// The node id a comment names as `id <16 hex>` (or `id: …`, `id=…`, any
/// case), normalised to lowercase; the last one when it names several
/// (the writer puts it last). `None` when there is none.
///
/// Only the writer's own words count: a name the writer quoted (anything
/// but the characters of host names and addresses, see
/// [`crate::escape::untrusted`]) is skipped, and `id` must be a word of its
/// own, so a stranger's host name (`id.0123…`, `x, id 0123…`) never lends
/// a node the id of another machine.
pub(crate) fn node_id_in(comment: &str) -> Option<String> {
    let text = unquoted(comment);
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';'))
        .map(|w| {
            w.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | '.'))
                .to_ascii_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let id = match w.as_str() {
            "id" | "id:" | "id=" => words.get(i + 1).cloned(),
            _ => w
                .strip_prefix("id=")
                .or_else(|| w.strip_prefix("id:"))
                .map(str::to_string),
        };
        if let Some(id) = id.filter(|id| is_valid_id(id)) {
            found = Some(id);
        }
    }
    found
}

/// `text` without its double-quoted parts (quotes escaped inside them as
/// `\"` included): what [`crate::escape::untrusted`] quoted came from the
/// network.
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        out.push(' ');
        while let Some(q) = chars.next() {
            match q {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                _ => {}
            }
        }
    }
    out
}

/// What the comments attached to one `[[node]]` header say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Provenance {
    /// Byte offset (into the block given) of the `found by` line, when the
    /// node was appended by rlx-discover.
    pub found_by_at: Option<usize>,
    /// The `found by` line's text, starting at "found by".
    pub found_by: Option<String>,
    /// The node id named by the `found by` line, or else by any other
    /// comment of the block (a user who adopted a node may keep its id in
    /// a comment of their own, so its machine is still recognised).
    pub id: Option<String>,
}

/// Reads `block`: the comment lines directly above a header (each ending
/// in a line break), plus `header_comment`, the comment on the header line
/// itself, if any. The `found by` line nearest the header counts.
pub(crate) fn read(block: &str, header_comment: Option<&str>) -> Provenance {
    let mut p = Provenance::default();
    let mut other_id = header_comment.and_then(node_id_in);
    let mut at = 0;
    for line in block.split_inclusive('\n') {
        if is_found_by(line) {
            let text = comment_text(line).unwrap_or_default();
            p.found_by_at = Some(at);
            p.found_by = Some(format!("found by{}", &text[8..]));
            p.id = node_id_in(text);
        } else if let Some(id) = comment_text(line).and_then(node_id_in) {
            other_id = Some(id);
        }
        at += line.len();
    }
    if p.id.is_none() {
        p.id = other_id;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef";

    #[test]
    fn the_comment_rlx_discover_writes_is_read_back_with_its_id() {
        let c = format!("# found by mdns (handshake) 2026-11-30 06:58 UTC: gpu-a, cuda 24.0 GiB, 32 cores, heard on eth0, id {ID}\n");
        let p = read(&c, None);
        assert_eq!(p.found_by_at, Some(0));
        assert!(p.found_by.unwrap().starts_with("found by mdns (handshake)"));
        assert_eq!(p.id.as_deref(), Some(ID));
    }

    #[test]
    fn a_comment_a_user_edited_is_still_read() {
        for c in [
            format!("   #found by mdns, id {ID}\n"),
            format!("# Found By hand-check: id: {}\n", ID.to_uppercase()),
            format!("# found by mdns: gpu-a (id={ID}) moved to rack 3\n"),
            format!("# section\n# found by ssh, id {ID}\n# rack 3, loud fan\n"),
        ] {
            let p = read(&c, None);
            assert!(p.found_by.is_some(), "{c:?}");
            assert_eq!(p.id.as_deref(), Some(ID), "{c:?}");
        }
        let p = read(&format!("# section\r\n# found by ssh, id {ID}\r\n"), None);
        assert_eq!(p.found_by_at, Some("# section\r\n".len()));
    }

    #[test]
    fn a_comment_without_found_by_is_the_users_but_its_id_is_still_known() {
        let p = read(&format!("# mine now (was found by mdns), id {ID}\n"), None);
        assert_eq!((p.found_by, p.id.as_deref()), (None, Some(ID)));
        let p = read("", Some(&format!("gpu-a id {ID}")));
        assert_eq!((p.found_by, p.id.as_deref()), (None, Some(ID)));
        assert_eq!(read("# just a note\n", None), Provenance::default());
    }

    #[test]
    fn something_that_is_not_a_node_id_is_not_taken_for_one() {
        for c in [
            "# found by mdns, id 0123\n",
            "# found by mdns, id 0123456789abcdefff\n",
            "# found by mdns, id 0123456789abcdeg\n",
            "# found by mdns, valid 0123456789abcdef\n",
        ] {
            assert_eq!(read(c, None).id, None, "{c:?}");
        }
        assert!(!is_found_by("# founder by"));
        assert!(!is_found_by("addr = 1 # found by"));
    }

    /// Guards against a stranger's host name lending a node another
    /// machine's id when the writer wrote none (an agent that reports no id).
    #[test]
    fn an_id_inside_a_quoted_or_plain_host_name_is_not_the_nodes() {
        for c in [
            format!("# found by mdns (tcp only) 2026-12-02 10:00 UTC: \"x, id {ID}\", cpu\n"),
            format!("# found by mdns (tcp only) 2026-12-02 10:00 UTC: \"a\\\" id {ID}\", cpu\n"),
            format!("# found by mdns (tcp only) 2026-12-02 10:00 UTC: id.{ID}, cpu\n"),
            format!("# found by mdns (tcp only) 2026-12-02 10:00 UTC: id-{ID}, cpu\n"),
        ] {
            assert_eq!(read(&c, None).id, None, "{c:?}");
        }
        let ours = format!("# found by mdns (handshake) 2026-12-02 10:00 UTC: \"x, id 1111111111111111\", cpu, id {ID}\n");
        assert_eq!(read(&ours, None).id.as_deref(), Some(ID));
    }
}
