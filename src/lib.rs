//! **rlx-discover** — find the machines of an RLX cluster and write their
//! `[[node]]` list, so nobody has to type addresses and devices by hand.
//!
//! ```toml
//! [discover]          # empty: browse the LAN for rlx-agents over mDNS
//! ckpt_dir = "/data/models/GLM-5.3-Flash"
//! ```
//!
//! Every source (SSH probes, a subnet scan, mDNS, unicast DNS-SD) produces the same
//! [`sighting::Sighting`]; one pipeline ([`pipeline`]) turns sightings into
//! nodes: device selection ([`select`]), node config, merge with the
//! hand-written nodes, and a report of everything that was dropped or refused.
//!
//! ```text
//! sources ──► Sighting ──► admit (handshake, trust) ──► pipeline ──► [[node]] + report
//! ssh, subnet, mdns, dns    one rule set                select, merge
//! ```
//!
//! # Layout
//! The contracts shared with `rlx-agent` live in their own crates, re-exported
//! here: [`proto`] (caps JSON, TXT schema v1, the handshake, cluster keys,
//! the service's names, the unicast DNS-SD client) and [`net`] (interfaces,
//! the network-namespace guard, ARP help). This crate is the coordinator:
//!
//! - [`config`]: `cluster.toml`, `[discover]` and `[[node]]`, each section
//!   checked beside its type, errors with key and line.
//! - [`addr`]: a node's address (`host:port`, `[v6]:port`), parsed once.
//! - [`sighting`]: what a source saw; [`sources`]: ssh, subnet, mdns and dns
//!   (unicast DNS-SD, `[discover] dns_sd`: nodes beyond the LAN), and the
//!   DNS-SD resolver the last two share.
//! - [`discover`]: runs the configured sources concurrently, then [`admit`]:
//!   the handshake check every network-found node passes (fresh caps, the
//!   cluster key, the cluster filter).
//! - [`pipeline`]: the one pipeline; [`select`]: device selection;
//!   [`report`]: what was added, dropped, refused and why.
//! - [`links`]: link measurement (`--links`): RTT and throughput to each
//!   added node, one at a time per coordinator interface.
//! - [`prefer`]: the one rule for the address of a machine seen at several.
//! - [`provenance`]: the `# found by` comment read back (the node id that
//!   recognises a moved machine).
//! - [`render`], [`reconcile`], [`writeback`]: `expand --write` — the
//!   user's text with found nodes appended, what changed or went missing,
//!   and the atomic write that never clobbers a concurrent edit.
//! - [`watch`]: the live membership engine behind `rlx-discover watch`, and a
//!   library for a runtime: joined, updated, restarted and left events from
//!   the continuous browse, the agents' incarnations and health checks.
//! - [`follow`]: [`follow::LiveWatch`], the watch a runtime embeds, built
//!   from `[discover]` with the CLI's secure defaults.
//! - [`doctor`]: `rlx-discover doctor`'s checks of this box (interfaces,
//!   multicast route, firewall, group joins, a test query, handshakes).
//! - [`progress`]: the hook slow sources report steps to (the CLI draws bars).
//!
//! The `rlx-discover` command line is another package (`cli/`,
//! `rlx-discover-cli`), so a runtime that depends on this library pulls in
//! none of its crates (clap, completions, man pages, progress bars, the
//! namespace lab its `demo`, the tests and the benchmarks run on).

pub use rlx_net as net;
pub use rlx_proto as proto;

pub mod addr;
pub mod admit;
pub mod config;
pub mod discover;
pub mod doctor;
pub mod follow;
pub mod links;
pub mod pipeline;
pub mod prefer;
pub mod progress;
pub mod provenance;
pub mod reconcile;
pub mod render;
pub mod report;
pub mod select;
pub mod sighting;
pub mod sources;
pub mod watch;
pub mod writeback;
