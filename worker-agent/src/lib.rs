//! **rlx-agent** — the small program that runs on every machine of an RLX
//! cluster: it probes the box, announces it as `_rlx._tcp` over mDNS and
//! answers the coordinator's handshake with the box's capabilities.
//!
//! ```text
//! rlx-agent --probe --no-bench          # print this box's caps JSON
//! rlx-agent --ckpt-dir /data/models/GLM-5.3-Flash --cluster lab
//! ```
//!
//! The capabilities model and its JSON are [`rlx_proto::caps`]: one type
//! on both ends of the wire.
//!
//! # Layout
//! - [`cli`]: the command line ([`cli::AgentArgs`]), shared by `main` and run mode.
//! - [`probe`]: what this machine has (cores, RAM, disk, every accelerator, node id).
//! - [`announce`]: `_rlx._tcp` over mDNS, re-announced when the caps change, goodbye on exit.
//! - [`links`]: the kernel's notifications of interfaces coming and going, so that nothing polls.
//! - [`server`]: the handshake on the advertised port.
//! - [`register`]: the same records in a unicast DNS zone (`--register`), by TSIG-signed DNS UPDATE, for coordinators beyond the LAN.

pub mod announce;
pub mod cli;
pub mod links;
pub mod probe;
pub mod register;
pub mod run;
pub mod server;
