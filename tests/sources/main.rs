//! **The sources besides mDNS, and the ports they reach**: SSH to real
//! OpenSSH servers, the subnet scan, wide-area DNS-SD against a real BIND,
//! and the worker port every written `addr` must reach.
//!
//! - `ssh`: `[discover] ssh_hosts` against sshd on loopback.
//! - `subnet`: the scan, with silent hosts costing one timeout.
//! - `dns_sd`: agents registering by DNS UPDATE, one browse finding LAN and
//!   wide-area nodes once each.
//! - `dns_edges`: racing sweeps, one host name on two machines.
//! - `worker_port`: the worker, not the agent; the other daemons on 9100.

mod dns_edges;
mod dns_sd;
mod ssh;
mod subnet;
mod worker_port;
