//! **What a member's change is to a scheduler** — which changes of the node
//! the pipeline makes of an admitted sighting
//! ([`crate::pipeline::node::node_of`]) are worth an `updated`.

use crate::pipeline::report::{gib, AddedNode};
use crate::sighting::{Discovery, Sighting};

/// What makes an update worth reporting, in words; `None` when nothing a
/// scheduler cares about changed (a fresher copy of the same caps).
pub(super) fn material(a: &AddedNode, b: &AddedNode) -> Option<String> {
    let mut why = Vec::new();
    if a.device != b.device {
        why.push(format!("device {} -> {}", a.device, b.device));
    }
    if a.mem_bytes != b.mem_bytes {
        why.push(format!(
            "memory {} -> {}",
            gib(a.mem_bytes),
            gib(b.mem_bytes)
        ));
    }
    if a.cores != b.cores {
        why.push(format!("cores {} -> {}", a.cores, b.cores));
    }
    if a.addr != b.addr {
        why.push(format!("address {} -> {}", a.addr, b.addr));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// A discovery of one sighting, for one check.
pub(super) fn one(s: Sighting) -> Discovery {
    Discovery {
        sightings: vec![s],
        ..Default::default()
    }
}

/// Member sighting `s` as a claim to check: its evidence back to what was
/// announced, so that what the check returns says whether the machine
/// answered (admission without a key passes a port that accepts TCP but
/// never answers on the evidence it was given: a stalled agent).
pub(super) fn claim(s: &Sighting) -> Sighting {
    let mut s = s.clone();
    if s.evidence.answered() {
        s.evidence = crate::sighting::Evidence::Txt;
    }
    s
}

/// The incarnation a sighting's caps carry.
pub(super) fn incarnation_of(s: &Sighting) -> Option<String> {
    s.caps.as_ref().and_then(|c| c.incarnation.clone())
}
