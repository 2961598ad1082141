//! **A private network made of network namespaces** — the LAN that the
//! tests, `rlx-discover demo` and the benchmark suite run on, so that no mDNS
//! packet or scan ever reaches the machine's real network.
//!
//! ```no_run
//! use rlx_lab::{Lab, LabOptions};
//! let lab = Lab::new(LabOptions { hosts: 3, ..Default::default() })?;
//! let agent = lab.spawn(0, std::process::Command::new("rlx-agent"))?;
//! let out = lab.command(1, "rlx-discover").args(["browse", "--json"]).output()?;
//! lab.set_loss(1, 10)?; // 10% random loss on host 1's link, both ways
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Shape
//!
//! ```text
//!   rlx-<pid>-<n>-h0        rlx-<pid>-<n>-sw         rlx-<pid>-<n>-h1
//!  ┌───────────────┐       ┌────────────────┐       ┌───────────────┐
//!  │ lo            │       │      br0       │       │ lo            │
//!  │ eth0 10.X.1.1 ├─veth──┤ p0 ───┴─── p1  ├──veth─┤ eth0 10.X.1.2 │ ...
//!  └───────────────┘       └────────────────┘       └───────────────┘
//! ```
//!
//! - The switch is a bridge with `mcast_snooping 0`, so mDNS (224.0.0.251)
//!   floods to every port like on a dumb switch.
//! - Each veth is created inside the namespaces (`ip -n H link add eth0 type
//!   veth peer name pI netns SW`): nothing is ever added to the root
//!   namespace. The host side is called `eth0`, as on a real machine, because
//!   `veth*` names are skipped by the default interface rule ([`rlx_net::iface`]).
//! - Hosts get `10.X.(1 + i/250).(1 + i%250)/16`, X random per lab (labs are
//!   isolated from each other anyway; distinct X keeps logs unambiguous), the
//!   `224.0.0.0/4` route on `eth0`, `lo` up, and IPv6 disabled unless
//!   [`LabOptions::ipv6`] (then also `fd52:0:0:X::(i+1)/64`, without DAD).
//! - [`Lab::loopback`] is a single namespace with only `lo` (up, multicast
//!   on, the `224.0.0.0/4` route): many agents on one host.
//!
//! Every command run through the lab gets `RLX_NETNS_GUARD=1`
//! ([`rlx_net::netguard`]). Dropping the lab kills the processes it started and
//! anything else still running in its namespaces (by PID, from `ip netns
//! pids`), then deletes the namespaces. Set `RLX_LAB_KEEP=1` to keep them for
//! inspection.
//!
//! # Privileges
//!
//! Root can do all of this directly. A non-root user can, where the kernel
//! allows unprivileged user namespaces, re-run itself under
//! [`unshare_command`] (`unshare --user --map-root-user --net --mount`) and
//! build the lab there; [`Lab::new`] then mounts a private tmpfs on
//! `/run/netns` so that `ip netns add` works. [`lab_support`] says which
//! applies.
//!
//! # Impairments
//!
//! This kernel has no netem, so [`Lab::set_loss`] uses an nftables `netdev`
//! table (`numgen random mod 100 < PCT drop`) on the host's `eth0`, ingress
//! and egress; delay cannot be emulated. [`Lab::silence_tcp`] drops outgoing
//! TCP SYNs in one host so that `connect()` waits for its timeout, like a
//! scan of addresses where nobody lives.
//!
//! # Layout
//! - `topology`: [`Lab`] itself: building the switch, the hosts and the
//!   router, running commands in them, tearing it all down.
//! - `process`: [`LabProcess`], a tracked process and its output.
//! - `impair`: loss and silenced TCP on a host's link ([`Lab::set_loss`]).
//! - `neigh`: room in the kernel's one neighbour (ARP) table for a lab of
//!   hundreds of hosts, raised while the lab lives.
//! - `privilege`: whether and how this machine can build a lab
//!   ([`lab_support`], [`unshare_command`]).
//! - `cmd`: running the helper commands (`ip`, `nft`) with errors that name
//!   them.
//! - `error`: [`LabError`].
//! - [`worker`]: a stand-in RLX worker (holds the worker port, greets).
//! - `kit` (feature `kit`): what the tests and the benchmark share on top of
//!   the lab: the skip policy (`SKIP` without root or a peer, a failure under
//!   `CI=true`), deadline loops, processes that dump their output when a test
//!   fails, where the built programs are, and the real peers (avahi, BIND,
//!   OpenSSH, python-zeroconf) started in a lab host.

mod cmd;
mod error;
mod impair;
#[cfg(feature = "kit")]
pub mod kit;
mod neigh;
mod privilege;
mod process;
#[cfg(test)]
mod tests;
mod topology;
pub mod worker;

pub use error::{LabError, Result};
pub use privilege::{in_user_namespace, lab_support, unshare_command, LabMode};
pub use process::LabProcess;
pub use topology::{sweep_stale, Host, Lab, LabOptions, RoutedOptions, HOSTS_PER_BRIDGE};

/// Set to `1` to keep a lab's namespaces and processes after drop (debugging).
pub const KEEP_ENV: &str = "RLX_LAB_KEEP";

/// Name of the host-side link in every host namespace.
pub const HOST_IFACE: &str = "eth0";
