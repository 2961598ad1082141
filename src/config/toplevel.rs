//! **The file's top level** — the tables and keys outside `[discover]` and
//! `[[node]]`: the RLX runtime's own (`model`, `seq`, `[placement]` ...),
//! which are not typos, and near-misses of ours, which are.
//!
//! ```toml
//! model = "m"
//! [discovr]            # warned: did you mean [discover]? (nothing reads [discovr])
//! ssh_hosts = ["a"]
//! [[nodes]]            # warned: did you mean [[node]]?
//! ```
//!
//! The runtime ignores a top-level key it does not read, and so does
//! this, unless the key is a near-miss of a table or key we read: then
//! `expand` would say "0 node(s) added" and exit 0 while the user's
//! `[discovr]` or `[[nodes]]` does nothing, so each is a warning with its
//! line and the name meant. A table written with the wrong brackets
//! (`[[discover]]`, `[node]`) is an error: serde's own words for it
//! ("invalid type: ...") do not say which brackets to write.

use super::keypath::{Invalid, KeyRef};
use super::node::NODE_KEYS;
use rlx_proto::configfile::nearest;

/// The top-level keys the RLX runtime reads (`rlx-distributed`'s
/// `ClusterConfig`: `model`, `seq`, `rng_seed`, `reserve_ram_gb`,
/// `[placement]`, `[discover]`, `[[node]]`; `cluster/config.rs` of
/// rlx-distributed 0.2.16 to 0.2.19), the fields of `RawFile` beside it.
pub(crate) const TOP_LEVEL_KEYS: &[&str] = &[
    "model",
    "seq",
    "rng_seed",
    "reserve_ram_gb",
    "placement",
    "discover",
    "node",
];

/// The keys `[discover]` takes (`DiscoverSection`, whose serde list a test
/// holds this to).
pub(crate) const DISCOVER_KEYS: &[&str] = &[
    "ssh_hosts",
    "subnet",
    "port",
    "agent_port",
    "ckpt_dir",
    "device",
    "device_policy",
    "precision",
    "timeout_ms",
    "mdns",
    "browse_ms",
    "cluster",
    "dial_off_link",
    "early_stop",
    "measure_links",
    "hosts_port",
    "link_window_ms",
    "link_probe_packets",
    "key_file",
    "pins_file",
    "remote_bin",
    "ssh_timeout_ms",
    "ssh_config",
    "ssh_fast_kex",
    "interfaces",
    "scan_concurrency",
    "dns_sd",
];

/// `[[discover]]` or `[node]`: our two tables with the wrong brackets. An
/// error, checked before serde reads the file.
pub(crate) fn wrong_brackets(doc: &toml_edit::ImDocument<&str>) -> Option<Invalid> {
    let at = vec![KeyRef::Key("discover".into())];
    if let Some(toml_edit::Item::ArrayOfTables(_)) = doc.get("discover") {
        return Some(Invalid(
            at,
            "[[discover]] makes a list of tables, but the stanza is a single [discover] table \
             (one pair of brackets, written once): write [discover]"
                .into(),
        ));
    }
    let at = vec![KeyRef::Key("node".into())];
    match doc.get("node") {
        Some(toml_edit::Item::Table(_)) => Some(Invalid(
            at,
            "[node] is a single table, but the nodes are a list: write [[node]] (two pairs of \
             brackets), once per node"
                .into(),
        )),
        _ => None,
    }
}

/// The warnings of the top level: a table or key that is a near-miss of
/// one we read (`[discovr]`, `[[nodes]]`, `Discover`), and a key of
/// `[discover]` or `[[node]]` written above any header, where nothing
/// reads it.
pub(crate) fn warnings(doc: &toml_edit::ImDocument<&str>) -> Vec<Invalid> {
    let mut out = Vec::new();
    for (key, item) in doc.iter() {
        if TOP_LEVEL_KEYS.contains(&key) {
            continue;
        }
        let shown = crate::escape::untrusted(key);
        let at = vec![KeyRef::Key(key.to_string())];
        let table = matches!(
            item,
            toml_edit::Item::Table(_) | toml_edit::Item::ArrayOfTables(_)
        );
        if !table && DISCOVER_KEYS.contains(&key) {
            out.push(Invalid(
                at,
                format!(
                    "`{shown}` is a [discover] key written at the top level, where nothing \
                     reads it: move it under the [discover] header"
                ),
            ));
        } else if !table && NODE_KEYS.contains(&key) {
            out.push(Invalid(
                at,
                format!(
                    "`{shown}` is a [[node]] key written at the top level, where nothing reads \
                     it: move it under a [[node]] header"
                ),
            ));
        } else if let Some(meant) = nearest(key, TOP_LEVEL_KEYS) {
            let (written, meant) = match (item, meant) {
                (toml_edit::Item::ArrayOfTables(_), _) => {
                    (format!("[[{shown}]]"), bracketed(meant))
                }
                (toml_edit::Item::Table(_), _) => (format!("[{shown}]"), bracketed(meant)),
                _ => (format!("`{shown}`"), bracketed(meant)),
            };
            out.push(Invalid(
                at,
                format!(
                    "{written} is not read by rlx-discover or the RLX runtime, which ignore \
                     it: did you mean {meant}?"
                ),
            ));
        }
    }
    out
}

/// A top-level name as it is written: `[discover]`, `[[node]]`,
/// `[placement]`, `` `model` ``.
fn bracketed(name: &str) -> String {
    match name {
        "node" => "[[node]]".into(),
        "discover" | "placement" => format!("[{name}]"),
        _ => format!("`{name}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warned(text: &str) -> Vec<String> {
        let doc = toml_edit::ImDocument::parse(text).unwrap();
        warnings(&doc).into_iter().map(|Invalid(_, m)| m).collect()
    }

    #[test]
    fn a_misspelt_discover_or_node_table_is_a_warning_naming_the_table_meant() {
        let w = warned("model = \"m\"\n[discovr]\nssh_hosts = [\"a\"]\n");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("[discovr]") && w[0].contains("did you mean [discover]?"),
            "{w:?}"
        );
        let w = warned("model = \"m\"\n[[nodes]]\naddr = \"a:9100\"\n");
        assert!(
            w[0].contains("[[nodes]]") && w[0].contains("did you mean [[node]]?"),
            "{w:?}"
        );
    }

    #[test]
    fn a_discover_key_above_every_header_is_a_warning_saying_where_it_belongs() {
        let w = warned("model = \"m\"\nssh_hosts = [\"a\"]\nbrowse_ms = 100\n");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("`ssh_hosts` is a [discover] key"), "{w:?}");
    }

    #[test]
    fn the_runtimes_own_top_level_keys_and_unrelated_ones_get_no_warning() {
        let w = warned(
            "model = \"m\"\nseq = 8\nrng_seed = 1\nreserve_ram_gb = 2.0\n\
             [placement]\npolicy = \"auto\"\n[discover]\n[[node]]\naddr = \"a:1\"\n\
             [my_own_tool]\nx = 1\n",
        );
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn the_list_of_discover_keys_is_the_one_serde_reads() {
        let e = toml::from_str::<super::super::DiscoverSection>("zzzz = 1")
            .unwrap_err()
            .to_string();
        let expected: Vec<&str> = e
            .split("expected one of ")
            .nth(1)
            .unwrap()
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        assert_eq!(expected, DISCOVER_KEYS, "{e}");
    }
}
