//! What the scale scenario and its join storm both read: the names they
//! record under, and watch's events as it printed them.

use crate::ctx::Ctx;
use anyhow::Result;
use rlx_lab::{Lab, LabOptions};
use serde_json::Value;
use std::path::PathBuf;

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

/// A work directory `what-<n>` and a lab of `n` agents' hosts plus watch's
/// (h0), IPv4 only.
pub(super) fn fleet(ctx: &Ctx, what: &str, n: usize) -> Result<(PathBuf, Lab)> {
    let dir = ctx.work.path().join(format!("{what}-{n}"));
    std::fs::create_dir_all(&dir)?;
    let lab = Lab::new(LabOptions {
        hosts: n + 1,
        ipv6: false,
    })?;
    Ok((dir, lab))
}
