//! What the scale scenario and its join storm both read: the names they
//! record under, and watch's events as it printed them.

use serde_json::Value;

pub(super) const SCENARIO: &str = "scale";
pub(super) const WATCH: &str = "rlx-discover watch --json";
pub(super) const AGENT: &str = "rlx-agent";

/// The `event` of each JSON line of `lines`.
pub(super) fn events(lines: &[(f64, String)]) -> Vec<(f64, String)> {
    lines
        .iter()
        .filter_map(|(t, l)| {
            let v: Value = serde_json::from_str(l).ok()?;
            Some((*t, v["event"].as_str()?.to_string()))
        })
        .collect()
}

/// Whether `instance` (as watch prints it) is node `name`'s.
pub(super) fn is_node(instance: &str, name: &str) -> bool {
    instance == name || instance.starts_with(&format!("{name} ("))
}
