//! **The JSON view of a browse** — what `--json` prints and the benchmark
//! reads: the discovery, and the browse's statistics beside it.

use super::stats::Browse;
use crate::sighting::Discovery;

/// The JSON form of a [`Discovery`]: `{"sightings": [...], "problems": [...],
/// "attempts": [...]}`, each sighting with its `found_ms`.
pub(crate) fn discovery_json(d: &Discovery) -> serde_json::Value {
    serde_json::json!({
        "sightings": d.sightings,
        "problems": d.problems,
        "attempts": d.attempts,
    })
}

/// The discovery as JSON (sightings, problems, attempts) plus a `"stats"` object ([`BrowseStats`](super::BrowseStats)).
pub fn browse_json(b: &Browse) -> serde_json::Value {
    let mut v = discovery_json(&b.discovery);
    v["stats"] = serde_json::to_value(&b.stats).unwrap_or_default();
    v
}
