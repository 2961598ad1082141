//! **Live membership of the cluster** — who joined, restarted, changed,
//! went suspect or left, as a stream of typed [`Event`]s: the feed `rlx-discover watch`
//! prints, and that a runtime embeds to know which workers are up.
//!
//! A runtime starts one with [`crate::follow::LiveWatch::start`] from its
//! `[discover]` section (the browse, the zone, the rules and the secure
//! dial policy), and reads the events it hands to a closure:
//!
//! ```no_run
//! use rlx_discover::{Kind, LiveWatch, WatchOptions};
//! # async fn demo(d: rlx_discover::DiscoverSection) -> anyhow::Result<()> {
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! LiveWatch::start(&d, WatchOptions::default())?
//!     .run(stop, |e| match e.event {
//!         // A worker that restarted lost its state: reschedule its stage.
//!         Kind::Joined | Kind::Restarted => println!("up: {}", e.instance),
//!         Kind::Left => println!("down: {}", e.instance),
//!         // Busy or stalled, not dead: keep its stage unless it stays so.
//!         Kind::Suspect => println!("suspect: {}", e.instance),
//!         Kind::Up => println!("back: {}", e.instance),
//!         Kind::Partitioned => println!("cut off from {:?}", e.unreachable),
//!         // Its agent is there; its RLX worker started or stopped.
//!         Kind::Worker => println!("worker of {}: {:?}", e.instance,
//!             e.node.as_ref().and_then(|n| n.worker_listening)),
//!         _ => {} // updated, refused, and kinds a later version adds
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! `emit` is called in order, as each event happens; a runtime that wants a
//! `Stream` forwards it into a channel (`tokio::sync::mpsc::unbounded_channel`
//! and `UnboundedReceiverStream`), which keeps the order.
//!
//! # The stream
//!
//! Per instance the events follow one grammar ([`event`]): `joined`, then
//! (`updated` | `restarted` | `worker` | `suspect` `up`?)*, then `left`, and
//! so on. `refused` and `partitioned` stand outside it.
//!
//! Joins come from the mDNS browse ([`inputs::Announcements`], in
//! production [`ContinuousBrowse`]) and, with a DNS-SD zone
//! ([`inputs::Zone`], in production [`DnsZone`]: `--domain` or `[discover]
//! dns_sd`), from the zone, browsed every [`DNS_POLL_INTERVAL`]. Each
//! candidate passes the same admission ([`crate::admit`], behind
//! [`inputs::Check`]) and device selection (the one
//! pipeline) as in `expand`: a live agent is confirmed by its handshake
//! before it is reported, and a cached record of a dead one is refused
//! there. An agent's incarnation (64 random bits chosen at each start, in
//! its TXT `inc` and handshake caps) makes a restarted agent's
//! announcement differ from its predecessor's cached one.
//!
//! - **restarted**: a member's handshake (an admission of its new
//!   announcement, or a health check) tells another incarnation, even when
//!   it was never seen gone.
//! - **goodbye**: a goodbye, or mdns-sd's expiry of a record, is a claim
//!   anyone can make: the member is checked ([`farewell`]), and `left`
//!   follows only when the check fails (at once for a stopped agent, whose
//!   port is closed: within 2 s of its SIGTERM); a check unanswered by a
//!   host that accepts connections makes it a suspect instead. An instance
//!   that left is dialled again [`goodbyes::CONFIRM_AFTER_GOODBYE`] later,
//!   then less and less often for ten minutes ([`goodbyes::REVISIT_FOR`]), so
//!   a box that comes back joins again.
//! - **identity**: a confirmed sighting under a member's name at another
//!   address or with another node id is a claim too
//!   ([`member::Member::is_here`]):
//!   the member is checked where it is, and the sighting is taken only if
//!   the member is gone (a move with the same id is `updated` in place); a
//!   member's address that answers as another machine is the member gone.
//!   The same machine under several names (mDNS and DNS, or a stranger's
//!   phantom instance at a member's address) is one member, by
//!   [`crate::pipeline::same_machine`], and a goodbye for any of its names
//!   checks it.
//! - **liveness** ([`liveness`], [`suspicion`], docs/membership.md): each
//!   member is followed over one long-lived connection to its agent, which
//!   pulses every 300 ms. Its end with a refused dial is a crash (`left`
//!   within a round trip); silence with nothing answering is a vanished
//!   host (`left` within about 2.3 s); silence from a host that accepts
//!   connections is a stalled agent (`suspect`, `up` at its next pulse,
//!   `left` only after the suspicion timeout). More than half of the
//!   cluster dark at once is one `partitioned` event, and the engine's own
//!   stalls ([`local`]) accuse nobody.
//! - **health check**: each member is also checked over the handshake on
//!   its own jittered schedule ([`health`]), which refreshes its caps and
//!   its worker's state, and is all an agent that predates the liveness
//!   stream gets: refused twice is a crash (about 3.8 s), unanswered is
//!   dialled as above.
//! - **DNS-SD**: a registration gone from the zone is reported left.
//!   Members are keyed by source and instance ([`inputs::member_name`]): no
//!   announcement of one source speaks for a member of another.
//!
//! Under a flood, admission is rate-limited, queued and backed off per
//! refusal ([`admission`]); the browse's bounds are in [`ContinuousBrowse`].
//!
//! A member whose caps change materially (the device chosen, its memory, the
//! core count, or its address) is reported `updated`.
//!
//! Every input is an argument of [`Watch::new`] or [`Watch::run`] (the
//! announcements, the zone, the check, the liveness, the clock's origin and
//! the shutdown), so the engine runs in tests on synthetic sightings, fake
//! machines and paused time.
//!
//! # Layout
//! - `engine`: the engine ([`Watch`]): its state in owned parts, the
//!   runtime's knobs, and the one move between parts (a member gone).
//! - `run`: the loop, and the routing of what each job, dial or stream
//!   ends in between the parts.
//! - The parts, each with its fields private and a narrow interface, called
//!   one way (engine -> parts -> members, checked by `.ci/modgraph.py`):
//!   `members` (the member table, aliases, departures; joins and departs a
//!   member), `joins` (admission: queue, rate, refusals), `checks` (health
//!   checks), `goodbyes` (goodbye checks, revisits of departed instances),
//!   `suspicion` (streams, dials, suspects, partitions).
//! - `liveness`: the stream and the dial. `local`: the engine's own health.
//! - `event`, `admission`, `farewell`, `health`, `inputs`, `job`, `member`,
//!   `node`: the events and their grammar, the admission's bounds, the
//!   goodbye checks, the health schedule, the inputs as traits, the checks'
//!   jobs, a member and its news, what a node is made of.

mod admission;
mod checks;
mod engine;
mod event;
mod farewell;
mod goodbyes;
pub(crate) mod health;
mod inputs;
mod job;
mod joins;
pub(crate) mod liveness;
mod local;
mod member;
mod members;
mod node;
mod poller;
mod run;
pub(crate) mod suspicion;
#[cfg(test)]
mod tests;

pub use engine::WatchError;
pub(crate) use engine::{Watch, WatchTuning, SUSPECT_TIMEOUT};
pub use event::{Event, InFile, Kind, PARTITION_INSTANCE};
pub(crate) use inputs::{DnsZone, DNS_POLL_INTERVAL};
pub(crate) use liveness::Streams;
