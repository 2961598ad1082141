//! **Every pair measured** — the all-pairs link map between the cluster's
//! boxes, and the launch files written from it (`hosts.json` for the RLX
//! runtime's process group, and the MLX and Open MPI hostfiles in the same
//! rank order).
//!
//! The runtime's pipeline runs through the coordinator, so `--links`
//! measures coordinator-to-node links (`--links`). Its process
//! group (collectives, tensor parallelism) runs between the workers
//! themselves, ring neighbour to ring neighbour, and there the link
//! between *two boxes* decides the speed. Here each pair is measured by
//! its own agents: the coordinator asks one agent of the pair to measure
//! the link to the other's agent port, with the link measurement the
//! coordinator itself uses ([`rlx_proto::handshake::measure`]), under the
//! cluster key at both ends.
//!
//! ```text
//! boxes ─► schedule (n-1 rounds of n/2 disjoint pairs) ─► per round, in parallel:
//!            coordinator ─measure_peer─► agent A ─measure─► agent B (each of B's addresses;
//!                                                          TCP both ways, UDP loss and MTU)
//!        ─► bottleneck: what a shared link held down, measured again apart; its groups
//!        ─► LinkMap (per pair, per address pair: up, down, RTT, loss, MTU) ─► hosts.json
//!                                                                         ─► MLX / Open MPI hostfiles
//! ```
//!
//! Each box takes part in one measurement per round, so the agents' own
//! one-at-a-time rule is never in the way, and the wall time grows with the
//! number of boxes, not the number of pairs.

mod ask;
mod bottleneck;
mod hosts;
mod launchers;
mod map;
mod refine;
mod run;
mod schedule;
mod setup;
mod update;

pub use bottleneck::{Bottleneck, Pair, Rates, Refiner};
pub use hosts::{hosts_json, Hop, HostsError, HostsFile, HostsOptions, RingOrder};
pub use launchers::{mlx_hostfile, mpi_hostfile, LaunchFileError, MlxHost, MlxHostfile};
pub use map::{BoxLinks, LinkMap, PairLinks, PathLink};
pub use run::{measure_map, measure_map_since, MapOptions, MapTarget};
pub use schedule::{rounds, tournament};
pub use setup::{targets, MapSetupError};
pub use update::{carry, Carried};
