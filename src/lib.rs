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
//! - [`caps`]: the capabilities model and its JSON (the `--probe` contract).
//! - [`config`]: `cluster.toml`, `[discover]` and `[[node]]`, with line-numbered errors.
//! - [`sighting`]: what a source saw; [`sources`]: ssh, subnet, mdns and dns
//!   (unicast DNS-SD, `[discover] dns_sd`: nodes beyond the LAN).
//! - [`discover`]: runs the configured sources concurrently, then [`admit`]:
//!   the handshake check every network-found node passes (fresh caps, the
//!   cluster key, the cluster filter).
//! - [`pipeline`]: the one pipeline; [`select`]: device selection;
//!   [`report`]: what was added, dropped, refused and why.
//! - [`txt`], [`handshake`], [`keys`]: the wire contracts (TXT schema v1, the
//!   handshake and its proof) and cluster key files, shared with `rlx-agent`.
//! - [`iface`]: which interfaces mDNS uses and which address a node gets.
//! - [`netguard`]: refuses multicast and scans from the host's own network
//!   namespace under `RLX_NETNS_GUARD=1`; [`lab`]: private networks of
//!   namespaces for tests, `demo` and the benchmarks.
//! - [`render`], [`reconcile`], [`writeback`]: `expand --write` — the
//!   user's text with found nodes appended, what changed or went missing,
//!   and the atomic write that never clobbers a concurrent edit.
//! - [`progress`]: progress bars on a terminal, and nowhere else.
//! - [`cli`]: the `rlx-discover` command line, one module per subcommand.

pub use rlx_net as net;
pub use rlx_proto as proto;

pub mod addr;
pub mod admit;
pub mod config;
pub mod discover;
pub mod pipeline;
pub mod progress;
pub mod reconcile;
pub mod render;
pub mod report;
pub mod select;
pub mod sighting;
pub mod sources;
pub mod watch;
pub mod writeback;
