//! **What machines do in the field**, and what discovery and `watch` make
//! of it: machines cloned from one image, strangers of other clusters,
//! addresses that change, machines on two networks, random churn, and a
//! runtime that embeds the library following it all.
//!
//! - `clones`: one node per cloned machine, every run.
//! - `exit`: strangers do not fail the run; a claimed address does.
//! - `moves`: a changed address, a machine on two networks.
//! - `interfaces`: an agent told its interfaces serves nowhere else.
//! - `prune`: `--prune` cuts only a machine confirmed gone.
//! - `watch_churn`: `watch` under random stops, crashes and restarts.
//! - `embed`: `examples/runtime.rs` follows a join, a restart and a leave.
//! - `linkmap`: `links` measures every pair both ways and finds a
//!   direct cable, and writes the MLX and MPI hostfiles and the heat map.
//! - `linkmap_loss`: each direction's loss, and an MTU black hole named
//!   with its size.
//! - `linkmap_trunk`: pairs across a shared trunk get their own rates, and
//!   the trunk is one bottleneck group.
//! - `prelaunch`: `check` passes a healthy cluster and names a closed
//!   worker port, a taken rank port, a one-way filter, an MTU black hole
//!   and an address only the coordinator reaches.
//! - `liveness`: a stalled agent suspect then up, crashes and cut links
//!   left in time, a paused coordinator accusing nobody, a partition.

mod clones;
mod embed;
mod exit;
mod interfaces;
mod linkmap;
mod linkmap_loss;
mod linkmap_trunk;
mod liveness;
mod moves;
mod prelaunch;
mod prune;
mod watch_churn;
