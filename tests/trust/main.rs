//! **Only your machines join**: strangers, impostors, relays and clashing
//! ids against a keyed cluster on a LAN of namespaces (docs/security.md's
//! threat table points here).
//!
//! - `admission`: impostors refused for their reasons, the cluster filter
//!   on the wire, floods of bogus announcements.
//! - `clash`: one id at two endpoints.
//! - `identity`: a member holding the cluster key cannot pose as another
//!   member: node keys are pinned per node id.
//! - `forgery`: forged goodbyes never make `watch` report a live member
//!   left; real leaves keep their bounds.
//! - `relay`: a relay of a keyed agent is refused, a declared port-forward
//!   admitted.

mod admission;
mod clash;
mod comment_id;
mod downgrade;
mod forgery;
mod identity;
mod relay;
