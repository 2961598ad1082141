//! **The expanded config** — the user's file with the discovered `[[node]]`
//! entries appended, each with a comment saying how and when it was found,
//! and (for `--prune`) with previously appended entries cut out again.
//!
//! ```toml
//! [discover]            # the user's text, byte for byte
//! ssh_hosts = ["gpu-a"]
//! ckpt_dir = "/data/m"
//!
//! # found by ssh (ssh probe) 2026-11-30 06:58 UTC: gpu-a, 2x cuda 24.0 GiB, 32 cores, 10 GbE, id 0123456789abcdef
//! [[node]]
//! addr = "gpu-a:9100"
//! ssh = "gpu-a"
//! ckpt_dir = "/data/m"
//! device = "cuda"
//! precision = "f32"
//! ```
//!
//! Every edit here is a splice of the user's text: bytes are appended, a
//! byte range is cut, or (for a node whose machine moved) the span of one
//! `addr` string, found by `toml_edit`, is replaced; nothing else the user
//! wrote is ever re-serialized.
//! (`toml_edit` keeps comments and key order, but it writes `\n` where the
//! file had `\r\n`, so even its faithful round trip is not byte for byte.)
//! `toml_edit` is used to *find* things — the nodes, their spans, and the
//! provenance comment above each header — and to render the new tables.
//!
//! The provenance comment is also the mark that says "rlx-discover appended
//! this node": `--prune` removes only nodes that carry it, and a move
//! rewrites only their `addr`, so deleting the comment is how a user adopts
//! a discovered node as their own. Its node id is the key that recognises
//! the node's machine at a new address ([`crate::write::provenance`]).

use crate::clusterfile::provenance::node_id_in;
use crate::clusterfile::NodesError;
use crate::config::{KvPolicy, NodeConfig, Role};
use crate::escape::{escape_line, untrusted};
use crate::pipeline::report::AddedNode;
use std::ops::Range;
use toml_edit::{value, ArrayOfTables, DocumentMut, ImDocument, Item, Table};

/// The comment line written above a discovered node. The agent reports its
/// own host name (and an mDNS stranger picks its instance label), so the
/// name goes through [`untrusted`] and the whole line through
/// [`escape_line`]: a newline in it must not be able to write TOML into the
/// user's file, nor an escape sequence reach the terminal of whoever cats it.
///
/// The comment is also read back: the id in it recognises the node's
/// machine later ([`node_id_in`]). A name is the
/// stranger's choice, and `id:0123456789abcdef` is a plain host name by
/// the characters it uses, so a name that would read as an id is quoted
/// (quoted text is never read for one); the line is checked to read back
/// as exactly the id written, or none.
pub(super) fn provenance_comment(a: &AddedNode, when: &str) -> String {
    let name = if a.hostname.is_empty() {
        &a.host
    } else {
        &a.hostname
    };
    let plain = untrusted(name);
    let shown = if node_id_in(&plain).is_some() {
        crate::escape::quoted(name)
    } else {
        plain
    };
    let line = provenance_line(a, when, &shown);
    let wrote = Some(a.id.as_str()).filter(|i| !i.is_empty());
    if node_id_in(&line).as_deref() == wrote {
        return line;
    }
    // Some other field reads as an id: leave the name out rather than
    // write a comment that names another machine.
    tracing::warn!(
        host = %crate::escape::escape_line(name),
        "the found-by comment leaves out a name that reads as a node id"
    );
    provenance_line(a, when, "\"(name withheld)\"")
}

/// The provenance line with the name already made safe (`shown`).
fn provenance_line(a: &AddedNode, when: &str, shown: &str) -> String {
    let sources: Vec<String> = a.sources.iter().map(|s| s.to_string()).collect();
    let mut c = format!(
        "found by {} ({}) {when}: {}, {}",
        sources.join("+"),
        a.evidence,
        shown,
        a.device_summary()
    );
    if a.cores > 0 {
        c.push_str(&format!(", {} cores", a.cores));
    }
    if let Some(w) = a.worker_text() {
        c.push_str(&format!(", {w}"));
    }
    if let Some(link) = a.link_text() {
        c.push_str(&format!(", {link}"));
    }
    if let Some(l) = &a.measured_link {
        c.push_str(&format!(", {}", l.summary()));
    }
    if let Some(i) = &a.heard_on {
        c.push_str(&format!(", heard on {i}"));
    }
    if !a.id.is_empty() {
        c.push_str(&format!(", id {}", a.id));
    }
    format!("# {}", escape_line(&c))
}

/// Converts a node to a TOML table in the seed's key order.
pub(super) fn node_table(n: &NodeConfig) -> Table {
    let mut t = Table::new();
    t["addr"] = value(&n.addr);
    if let Some(s) = &n.ssh {
        t["ssh"] = value(s);
    }
    t["ckpt_dir"] = value(&n.ckpt_dir);
    t["device"] = value(n.device.as_str());
    t["precision"] = value(n.precision.as_str());
    if n.kv_cache != KvPolicy::default() {
        t["kv_cache"] = value(kv_label(n.kv_cache));
    }
    if let Some(s) = n.rng_seed {
        t["rng_seed"] = value(s as i64);
    }
    if let Some(g) = n.max_ram_gb {
        t["max_ram_gb"] = value(g);
    }
    if let Some(l) = &n.layers {
        t["layers"] = value(l);
    }
    if n.role != Role::default() {
        t["role"] = value(n.role.as_str());
    }
    if let Some(s) = &n.standby_for {
        t["standby_for"] = value(s);
    }
    t
}

/// The runtime's word for a KV-cache policy.
fn kv_label(k: KvPolicy) -> &'static str {
    match k {
        KvPolicy::None => "none",
        KvPolicy::Host => "host",
        KvPolicy::Device => "device",
    }
}

/// The line ending the file already uses (that of its first line), so
/// appended lines match: a Windows-edited file stays all `\r\n`.
pub(super) fn line_ending(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if i > 0 && text.as_bytes()[i - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

/// Why the user's file cannot take appended `[[node]]` tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The text (or the result) is not TOML, or its `node` is not
    /// `[[node]]` tables.
    #[error(transparent)]
    File(#[from] NodesError),
    /// A check of our own output failed; nothing is printed or written.
    #[error("refusing to write: {0} (a bug in rlx-discover: please report it with the file)")]
    Invariant(String),
}

impl From<toml_edit::TomlError> for RenderError {
    fn from(e: toml_edit::TomlError) -> Self {
        RenderError::File(NodesError::Toml(e))
    }
}

/// Renders `text` (the user's file) with `added` nodes appended after
/// everything else. `when` is written into each provenance comment. The
/// result starts with `text` byte for byte (plus one line ending if the file
/// did not end with one).
pub(super) fn render_expanded(
    text: &str,
    added: &[(NodeConfig, AddedNode)],
    when: &str,
) -> Result<String, RenderError> {
    let doc = ImDocument::parse(text)?;
    if added.is_empty() {
        return Ok(text.to_string());
    }
    match doc.get("node") {
        None | Some(Item::ArrayOfTables(_)) => {}
        Some(Item::Value(toml_edit::Value::Array(_))) => {
            return Err(NodesError::NodeNotTables("an inline array (node = [...])").into())
        }
        Some(_) => return Err(NodesError::NodeNotTables("a single table or value").into()),
    }
    let eol = line_ending(text);
    let mut out = text.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(eol);
    }
    for (node, prov) in added {
        out.push_str(eol);
        out.push_str(&provenance_comment(prov, when));
        out.push_str(eol);
        out.push_str(&table_text(node, eol));
    }
    // Parse once more so we never print or write a file we could not read.
    ImDocument::parse(out.as_str())?;
    Ok(out)
}

/// One `[[node]]` table as text, with the file's line ending.
fn table_text(node: &NodeConfig, eol: &str) -> String {
    let mut aot = ArrayOfTables::new();
    aot.push(node_table(node));
    let mut one = DocumentMut::new();
    one.insert("node", Item::ArrayOfTables(aot));
    // TOML strings escape their newlines, so every `\n` here ends a line.
    let s = one.to_string();
    if eol == "\n" {
        s
    } else {
        s.replace('\n', eol)
    }
}

/// `text` with the byte `ranges` removed (they must not overlap); the result
/// is parsed once more so a bad cut can never be written.
#[cfg(test)]
fn cut_ranges(text: &str, ranges: &[Range<usize>]) -> Result<String, RenderError> {
    let edits: Vec<(Range<usize>, String)> =
        ranges.iter().map(|r| (r.clone(), String::new())).collect();
    splice(text, &edits)
}

/// `text` with each byte range of `edits` replaced by its text (cut when
/// empty); overlapping ranges are cut once. Every byte outside the ranges
/// stays as it was, and the result is parsed once more so a bad edit can
/// never be written.
pub(super) fn splice(text: &str, edits: &[(Range<usize>, String)]) -> Result<String, RenderError> {
    let mut sorted = edits.to_vec();
    sorted.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (r, with) in sorted {
        let start = r.start.max(at);
        out.push_str(&text[at..start]);
        if r.end > at {
            out.push_str(&with);
        }
        at = r.end.max(at);
    }
    out.push_str(&text[at..]);
    ImDocument::parse(out.as_str())?;
    Ok(out)
}

/// The TOML string for a new `addr` replacing `old` (a string as written,
/// quotes included): in the same quote style when it can be, so a moved
/// node's line reads as the user wrote it.
pub(super) fn addr_string(old: &str, new: &str) -> String {
    let literal_ok = !new.contains(['\'', '\n', '\r']);
    if old.starts_with('\'') && !old.starts_with("'''") && literal_ok {
        format!("'{new}'")
    } else {
        toml_edit::Value::from(new).to_string().trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusterfile::file_nodes;
    use crate::sighting::{Evidence, Source};

    fn prov() -> AddedNode {
        AddedNode {
            identity: crate::sighting::Pinning::Unpinned,
            node_key: None,
            addr: "10.0.0.5:9100".into(),
            host: "gpu-a".into(),
            hostname: "gpu-a".into(),
            id: "0123456789abcdef".into(),
            sources: vec![Source::Mdns],
            evidence: Evidence::Handshake,
            device: "cuda".into(),
            mem_bytes: 24 << 30,
            cores: 32,
            cluster: None,
            heard_on: Some("eth0".into()),
            found_ms: 40,
            also_at: Vec::new(),
            device_mems: Vec::new(),
            accelerators: Vec::new(),
            measured_link: None,
            link: None,
            agent: Some("10.0.0.5:6184".into()),
            worker_listening: Some(true),
            worker_held_by: None,
        }
    }

    fn node() -> NodeConfig {
        let mut n = NodeConfig::new("10.0.0.5:9100");
        n.device = "cuda".parse().unwrap();
        n
    }

    #[test]
    fn the_users_text_is_kept_byte_for_byte_and_nodes_are_appended() {
        let text =
            "# my cluster\n[discover]   # find them\n\n[[node]]\naddr = 'pinned:9100' # keep\nckpt_dir = '/m'\n";
        let out = render_expanded(text, &[(node(), prov())], "2026-11-30").unwrap();
        assert!(out.starts_with(text), "{out}");
        assert!(out.contains(
            "# found by mdns (handshake) 2026-11-30: gpu-a, cuda 24.0 GiB, 32 cores, \
             worker listening, heard on eth0, id 0123456789abcdef\n"
        ));
        let reparsed =
            crate::config::ClusterConfig::parse(std::path::Path::new("x"), &out).unwrap();
        assert_eq!(reparsed.nodes.len(), 2);
        assert_eq!(reparsed.nodes[1].device.as_str(), "cuda");
    }

    /// Guards against a two-GPU box being written up as "cuda 24.0 GiB",
    /// as if it had one GPU.
    #[test]
    fn a_box_with_two_24_gib_gpus_is_commented_as_2x_cuda_with_its_link() {
        let mut two = prov();
        two.device_mems = vec![24 << 30, 24 << 30];
        two.link = Some(rlx_proto::caps::LinkInfo {
            name: "eth0".into(),
            kind: "ethernet".into(),
            speed_mbps: Some(10_000),
            mtu: 9000,
            addrs: vec!["10.0.0.5".parse().unwrap()],
            rdma: false,
        });
        assert_eq!(
            provenance_comment(&two, "2026-12-01"),
            "# found by mdns (handshake) 2026-12-01: gpu-a, 2x cuda 24.0 GiB, 32 cores, \
             worker listening, 10 GbE, heard on eth0, id 0123456789abcdef"
        );
        let mut mixed = prov();
        mixed.device = "cuda:0,cuda:1".into();
        mixed.device_mems = vec![24 << 30, 12 << 30];
        assert!(
            provenance_comment(&mixed, "x").contains(": gpu-a, 2x cuda 24.0+12.0 GiB, 32 cores,"),
            "{}",
            provenance_comment(&mixed, "x")
        );
        assert!(provenance_comment(&prov(), "x").contains(": gpu-a, cuda 24.0 GiB, 32 cores,"));
    }

    #[test]
    fn nothing_added_means_the_text_is_unchanged() {
        let text = "[discover]\nsubnet = \"10.0.0.0/24\"  # lab\n";
        assert_eq!(render_expanded(text, &[], "t").unwrap(), text);
    }

    /// Guards against toml_edit's round trip, which turns `\r\n` into `\n`.
    #[test]
    fn a_crlf_file_keeps_its_line_endings_and_gets_crlf_nodes() {
        let text = "# win\r\n[discover]\r\nmdns = false\r\n";
        let out = render_expanded(text, &[(node(), prov())], "t").unwrap();
        assert!(out.starts_with(text));
        assert_eq!(
            out.matches('\n').count(),
            out.matches("\r\n").count(),
            "every line ends in CRLF: {out:?}"
        );
    }

    #[test]
    fn a_file_without_a_final_newline_gets_one_before_the_nodes() {
        let out = render_expanded("[discover]", &[(node(), prov())], "t").unwrap();
        assert!(out.starts_with("[discover]\n\n# found by"), "{out:?}");
    }

    /// Guards against a host name that would write TOML into the file.
    #[test]
    fn a_host_name_with_a_newline_cannot_escape_the_comment() {
        let mut p = prov();
        p.hostname = "evil\n[[node]]\naddr = \"x:1\"".into();
        let out = render_expanded("", &[(node(), p)], "t").unwrap();
        let c = crate::config::ClusterConfig::parse(std::path::Path::new("x"), &out).unwrap();
        assert_eq!(c.nodes.len(), 1, "{out}");
    }

    /// The measured link goes into the comment before the id, and the id
    /// is still read back from it (a moved machine is recognised by it).
    #[test]
    fn a_measured_link_is_in_the_found_by_comment_and_the_id_still_reads_back() {
        let mut p = prov();
        p.measured_link = Some(rlx_proto::handshake::LinkMeasurement {
            rtt_ms: 0.21,
            rtt_samples_ms: vec![0.21],
            up_mbps: 9300.0,
            down_mbps: 9100.0,
            up_bytes: 1,
            down_bytes: 1,
            took_ms: 500,
            udp: None,
        });
        let c = provenance_comment(&p, "t");
        assert!(c.contains(", 0.21 ms, 9.3 Gbit/s up, 9.1 down"), "{c}");
        assert_eq!(
            crate::clusterfile::provenance::node_id_in(&c).as_deref(),
            Some(p.id.as_str()).filter(|id| !id.is_empty()),
            "{c}"
        );
    }

    /// Guards against issue 37's second id injection: a stranger's host
    /// name `id:<16 hex>` is plain by its characters, was written unquoted
    /// and read back as the node's id when the writer wrote none (an agent
    /// without one), so a later run "moved" that node onto the real
    /// machine. Whatever the name, the comment reads back as the id the
    /// writer wrote, or none.
    #[test]
    fn a_host_name_that_reads_as_a_node_id_never_becomes_the_nodes_id() {
        const OTHER: &str = "fedcba9876543210";
        for own in ["", "0123456789abcdef"] {
            for name in [
                format!("id:{OTHER}"),
                format!("id={OTHER}"),
                format!("ID:{}", OTHER.to_uppercase()),
                format!("x.id:{OTHER}"),
                "id".to_string(),
            ] {
                let mut p = prov();
                p.id = own.to_string();
                p.hostname = name.clone();
                let c = provenance_comment(&p, "t");
                assert_eq!(
                    crate::clusterfile::provenance::node_id_in(&c).as_deref(),
                    Some(own).filter(|i| !i.is_empty()),
                    "{name}: {c}"
                );
                let block = format!("{c}\n");
                assert_eq!(
                    crate::clusterfile::provenance::read(&block, None)
                        .id
                        .as_deref(),
                    Some(own).filter(|i| !i.is_empty()),
                    "{name}: {c}"
                );
            }
        }
        let mut p = prov();
        p.id.clear();
        p.hostname = "gpu-a".into();
        assert!(
            provenance_comment(&p, "t").contains(": gpu-a, "),
            "plain names stay plain"
        );
    }

    /// Guards against line and paragraph separators, C1 controls and bidi
    /// overrides in a host name reaching the file raw (TOML allows them in
    /// a comment, and an editor or terminal shows a line break or
    /// reversed text there).
    #[test]
    fn a_found_by_comment_never_contains_a_raw_line_break_or_control() {
        let mut p = prov();
        p.hostname = "a\nb\r\u{85}c\u{2028}d\u{2029}e\u{202e}f\x1b[2J".into();
        let c = provenance_comment(&p, "t");
        assert!(
            !c.chars()
                .any(|ch| ch.is_control() || matches!(ch, '\u{2028}' | '\u{2029}' | '\u{202e}')),
            "{c:?}"
        );
        assert!(
            c.contains(r#""a\nb\r\u{85}c\u{2028}d\u{2029}e\u{202e}f\u{1b}[2J""#),
            "{c}"
        );
        let out = render_expanded("", &[(node(), p)], "t").unwrap();
        assert_eq!(
            out.lines().filter(|l| l.starts_with("# found by")).count(),
            1
        );
    }

    #[test]
    fn an_inline_node_array_is_refused_with_what_to_do() {
        let e = render_expanded("node = [{ addr = \"a:1\" }]\n", &[(node(), prov())], "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[[node]] table"), "{e}");
    }

    #[test]
    fn appended_nodes_are_recognised_and_cut_back_out_exactly() {
        let text = "[discover]\r\n\r\n[[node]] # mine\r\naddr = \"h:1\"\r\n";
        let out = render_expanded(text, &[(node(), prov())], "t").unwrap();
        let nodes = file_nodes(&out).unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(!nodes[0].is_discovered());
        assert!(nodes[0].cut.is_err(), "hand-written nodes are never cut");
        assert!(nodes[1].is_discovered());
        assert_eq!(nodes[1].line, 7);
        let cut = nodes[1].cut.clone().unwrap();
        assert_eq!(cut_ranges(&out, &[cut]).unwrap(), text);
    }

    #[test]
    fn a_node_with_sub_tables_is_not_cut_automatically() {
        let text = "# found by ssh\n[[node]]\naddr = \"h:1\"\n[node.kv_cache]\nmax_tokens = 5\n";
        let n = file_nodes(text).unwrap();
        assert!(n[0].is_discovered());
        assert!(n[0].cut.as_ref().unwrap_err().contains("by hand"));
    }
}
