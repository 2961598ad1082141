//! **The expanded config** — the user's file with the discovered `[[node]]`
//! entries appended, each with a comment saying how and when it was found.
//!
//! The user's text is edited with `toml_edit`, never re-serialized from our
//! structs, so every comment, blank line and key order they wrote comes out
//! byte for byte; only the appended nodes are new. Printing (`expand`) and
//! writing back (`expand --write`) render through this one function.

use crate::config::NodeConfig;
use crate::report::{gib, AddedNode};
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};

/// The comment line written above a discovered node.
pub fn provenance_comment(a: &AddedNode, when: &str) -> String {
    let sources: Vec<String> = a.sources.iter().map(|s| s.to_string()).collect();
    let name = if a.hostname.is_empty() {
        &a.host
    } else {
        &a.hostname
    };
    let mut c = format!(
        "# found by {} ({}) {when}: {name}, {} {}",
        sources.join("+"),
        a.evidence,
        a.device,
        gib(a.mem_bytes)
    );
    if a.cores > 0 {
        c.push_str(&format!(", {} cores", a.cores));
    }
    if let Some(i) = &a.heard_on {
        c.push_str(&format!(", heard on {i}"));
    }
    c
}

/// Converts a node to a TOML table in the seed's key order.
pub fn node_table(n: &NodeConfig) -> Table {
    let mut t = Table::new();
    t["addr"] = value(&n.addr);
    if let Some(s) = &n.ssh {
        t["ssh"] = value(s);
    }
    t["ckpt_dir"] = value(&n.ckpt_dir);
    t["device"] = value(n.device.as_str());
    t["precision"] = value(n.precision.as_str());
    if !n.kv_cache.is_default() {
        let mut kv = InlineTable::new();
        if let Some(p) = n.kv_cache.precision {
            kv.insert("precision", p.as_str().into());
        }
        if let Some(m) = n.kv_cache.max_tokens {
            kv.insert("max_tokens", (m as i64).into());
        }
        t["kv_cache"] = value(kv);
    }
    if let Some(s) = n.rng_seed {
        t["rng_seed"] = value(s as i64);
    }
    if let Some(g) = n.max_ram_gb {
        t["max_ram_gb"] = value(g);
    }
    if let Some([a, b]) = n.layers {
        let mut arr = Array::new();
        arr.push(a as i64);
        arr.push(b as i64);
        t["layers"] = value(arr);
    }
    if !n.role.is_default() {
        t["role"] = value("standby");
    }
    if let Some(s) = &n.standby_for {
        t["standby_for"] = value(s);
    }
    t
}

/// Renders `text` (the user's file) with `added` nodes appended after the
/// existing ones. `when` is written into each provenance comment.
pub fn render_expanded(
    text: &str,
    added: &[(NodeConfig, AddedNode)],
    when: &str,
) -> Result<String, toml_edit::TomlError> {
    let mut doc: DocumentMut = text.parse()?;
    if added.is_empty() {
        return Ok(doc.to_string());
    }
    let mut out = doc.to_string();
    // Appending text rather than pushing into the document keeps the user's
    // bytes untouched even where toml_edit would re-place a moved table.
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for (node, prov) in added {
        let mut aot = ArrayOfTables::new();
        aot.push(node_table(node));
        let mut one = DocumentMut::new();
        one.insert("node", Item::ArrayOfTables(aot));
        out.push('\n');
        out.push_str(&provenance_comment(prov, when));
        out.push('\n');
        out.push_str(&one.to_string());
    }
    // Parse once more so we never print or write a file we could not read.
    doc = out.parse()?;
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sighting::{Evidence, Source};

    fn prov() -> AddedNode {
        AddedNode {
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
        }
    }

    #[test]
    fn the_users_text_is_kept_byte_for_byte_and_nodes_are_appended() {
        let text =
            "# my cluster\n[discover]   # find them\n\n[[node]]\naddr = 'pinned:9100' # keep\n";
        let mut n = NodeConfig::new("10.0.0.5:9100");
        n.device = "cuda".parse().unwrap();
        let out = render_expanded(text, &[(n, prov())], "2026-11-30").unwrap();
        assert!(out.starts_with(text), "{out}");
        assert!(out.contains("# found by mdns (handshake) 2026-11-30: gpu-a, cuda 24.0 GiB"));
        let reparsed =
            crate::config::ClusterConfig::parse(std::path::Path::new("x"), &out).unwrap();
        assert_eq!(reparsed.nodes.len(), 2);
        assert_eq!(reparsed.nodes[1].device.as_str(), "cuda");
    }

    #[test]
    fn nothing_added_means_the_text_is_unchanged() {
        let text = "[discover]\nsubnet = \"10.0.0.0/24\"  # lab\n";
        assert_eq!(render_expanded(text, &[], "t").unwrap(), text);
    }
}
