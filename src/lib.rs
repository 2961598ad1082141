//! **rlx-discover** — find the machines of an RLX cluster and write their
//! `[[node]]` list, so nobody has to type addresses and devices by hand.
//!
//! ```toml
//! [discover]          # empty: browse the LAN for rlx-agents over mDNS
//! ckpt_dir = "/data/models/GLM-5.3-Flash"
//! ```
//!
//! Every source (SSH probes, a subnet scan, mDNS, unicast DNS-SD) produces the same
//! [`Sighting`]; one pipeline turns sightings into
//! nodes: device selection, node config, merge with the
//! hand-written nodes, and a report of everything that was dropped or refused.
//!
//! ```text
//! sources ──► Sighting ──► admit (handshake, trust) ──► pipeline ──► [[node]] + report
//! ssh, subnet, mdns, dns    one rule set                select, merge
//! ```
//!
//! # Embedding
//! A runtime calls [`expand_config`] at start-up and follows the cluster
//! with a [`LiveWatch`] while it runs; `examples/runtime.rs` does both:
//!
//! ```no_run
//! use rlx_discover::{expand_config, ClusterConfig, Kind, LiveWatch, Overrides, Silent, WatchOptions};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = ClusterConfig::load("cluster.toml".as_ref())?;
//! let exp = expand_config(&cfg, &Overrides::default(), &Silent).await?;
//! for n in &exp.nodes {
//!     println!("{} on {}", n.addr, n.device);
//! }
//! if let Some(d) = &cfg.discover {
//!     let stop = async { let _ = tokio::signal::ctrl_c().await; };
//!     LiveWatch::start(d, WatchOptions::default())?
//!         .run(stop, |e| {
//!             if e.event == Kind::Left {
//!                 println!("re-plan without {}", e.instance);
//!             }
//!         })
//!         .await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # The face
//! Everything a caller names is listed here; the modules behind it are
//! private, so their items can change without breaking anyone.
//!
//! - **Expand** a cluster file into its node list: [`ClusterConfig`] (with
//!   [`DiscoverSection`] and [`NodeConfig`], and [`ConfigError`] naming the
//!   key and line), [`expand_config`] (or [`expand_section`] without a
//!   file) with [`Overrides`], giving an [`Expansion`] or an
//!   [`ExpandError`]; [`Progress`], [`Task`] and [`Silent`] for the slow
//!   steps.
//! - **What was found**: [`Sighting`] (one source's view of one node,
//!   [`Source`], [`Evidence`]), [`Problem`] (a host that failed or a
//!   stranger refused), [`AddedNode`] and [`Report`]; the report's entries
//!   are in [`report`].
//! - **Watch** the membership live: [`LiveWatch`] from `[discover]`, with
//!   [`WatchOptions`] and [`StartError`]; it hands out [`Event`]s of a
//!   [`Kind`], and ends with a [`WatchError`] if it cannot go on.
//! - **Print** what strangers can write (instance names, host names,
//!   reasons quoting them): [`untrusted`] and [`escape_line`].
//! - Namespaces for the tools beside: [`config`] (the file's value types
//!   and defaults), [`write`](mod@write) (`expand --write`: the plan and the atomic
//!   write), [`mdns`] (a one-shot browse), [`scan`] (a subnet scan),
//!   [`doctor`] (this box's checks), [`pins`] (who is who: the pins file
//!   and `rlx-discover pins`).
//!
//! The wire contracts shared with `rlx-agent` (caps JSON, the TXT schema,
//! the handshake, cluster keys) are the `rlx-proto` crate, and the
//! network-namespace guard is `rlx-net`: depend on them directly when you
//! need them.
//!
//! # Layout
//! - `config`: `cluster.toml`, `[discover]` and `[[node]]`, each section
//!   checked beside its type, errors with key and line; `addr`: a node's
//!   address (`host:port`, `[v6]:port`), parsed once.
//! - `sighting`: what a source saw; `sources`: ssh, subnet, mdns and dns
//!   (unicast DNS-SD), in one list, and the DNS-SD resolver the last two
//!   share.
//! - `discover`: runs the configured sources concurrently, then `admit`:
//!   the handshake check every network-found node passes (fresh caps, the
//!   cluster key, the cluster filter, the node key against the pins);
//!   `pins`: node id -> node key, pinned on first sight in a file beside
//!   the cluster file (or in memory for the run).
//! - `pipeline`: the one pipeline (coalesce, merge with the file, node
//!   building, device selection, the address rule, the report).
//! - `write`: `expand --write` (render, reconcile, the atomic write-back,
//!   the `# found by` comments read back); [`absence`]: whether a node
//!   `--prune` would cut is really gone (its agent port dialled).
//! - [`sshtarget`]: the `ssh` written for each node (the user's alias for
//!   its address, else the address; none for this machine), and
//!   `expand --check-ssh`.
//! - `links`: link measurement (`--links`).
//! - `watch`: the live membership engine; `follow`: [`LiveWatch`], its
//!   inputs built from `[discover]` with the secure defaults.
//! - `doctor`: `rlx-discover doctor`'s checks of this box.
//! - `escape`, `progress`: terminal-safe text, and the hook slow sources
//!   report steps to (the CLI draws bars).
//!
//! The `rlx-discover` command line is another package (`cli/`,
//! `rlx-discover-cli`), so a runtime that depends on this library pulls in
//! none of its crates (clap, completions, man pages, progress bars, the
//! namespace lab its `demo`, the tests and the benchmarks run on).

#![warn(missing_docs, unreachable_pub)]

mod addr;
mod admit;
mod discover;
mod escape;
mod follow;
mod links;
mod pipeline;
mod progress;
mod sighting;
mod sources;
mod watch;

pub mod absence;
pub mod clusterfile;
pub mod config;
pub mod doctor;
pub mod linkmap;
pub mod pins;
pub mod prelaunch;
pub mod sshtarget;
pub mod write;

// Expand.
pub use admit::RulesError;
pub use config::{ClusterConfig, ConfigError, DiscoverSection, NodeConfig};
pub use discover::{expand_config, expand_section, ExpandError, Overrides};
pub use links::LinkSetupError;
pub use pipeline::Expansion;
pub use progress::{Progress, Silent, Task};

// What was found.
pub use addr::{AddrError, NodeAddr};
pub use pipeline::report::{AddedNode, Report};
pub use sighting::{Discovery, Evidence, PinClash, Pinning, Problem, Sighting, Source};

// Watch.
pub use follow::{LiveWatch, StartError, WatchOptions};
pub use watch::{Event, InFile, Kind, WatchError, PARTITION_INSTANCE};

// Print.
pub use escape::{escape_line, untrusted};

/// **The report's entries** — each kind of thing [`Report`] tells: a node
/// folded into another, a device skipped, an id two machines claim, a node
/// that moved, an agent mDNS did not hear, a link not measured. Their JSON
/// field names are a stable interface for scripts (docs/json.md).
pub mod report {
    pub use crate::pipeline::report::{
        Clash, Duplicate, LinkProblem, Moved, SkippedDevice, Unheard,
    };
    pub use crate::pipeline::select::SkipReason;
    pub use crate::sighting::{Attempt, Concern};
}

/// **A one-shot mDNS browse** — the agents announcing `_rlx._tcp` on this
/// host's links, as [`crate::Sighting`]s, without admission or the
/// pipeline (`examples/browse_once.rs`). [`crate::expand_section`] is the
/// same browse with both.
pub mod mdns {
    pub use crate::sources::mdns::{
        browse, browse_json, Browse, BrowseOptions, BrowseStats, MdnsError, StopRule,
    };
}

/// **A subnet scan** — which addresses of a block have an agent or
/// something else on the worker port, and what that something says it is
/// (`rlx-discover scan`). The `[discover] subnet` source is this scan
/// followed by the handshake.
pub mod scan {
    pub use crate::sources::identify::Identity;
    pub use crate::sources::subnet::{scan, Listener, Ports, ScanOptions, ScanResult};
}
