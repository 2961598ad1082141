//! **Where nodes come from** — each source turns its own kind of evidence
//! into sightings for the one pipeline.

pub mod subnet;
