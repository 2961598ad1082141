//! **Where nodes come from** — each source turns its own kind of evidence
//! into [`crate::sighting::Sighting`]s for the one pipeline; none of them
//! chooses devices or merges (that is [`crate::pipeline`]'s job alone).

pub mod dns;
pub mod dnssd;
pub mod mdns;
pub mod ssh;
pub mod subnet;
