//! **The lab, and what a user runs on a LAN to look at it**: the private
//! network of namespaces every other network test stands on, the `demo`
//! that builds one for a newcomer, and `doctor`, which checks a host's mDNS
//! health. Without root the lab tests say `SKIP` and pass (under `CI=true`
//! they fail instead; see `rlx_lab::kit`).
//!
//! - `network`: hosts reach each other, multicast floods, loss and silence
//!   work, the guard passes inside, nothing is left behind.
//! - `demo`: `rlx-discover demo` end to end.
//! - `doctor`: `rlx-discover doctor`, healthy and not.
//! - `runtime_probe`: the RLX runtime probes and plans the boxes `expand`
//!   found over mDNS, over the `ssh` written for each, against real sshd.

mod demo;
mod doctor;
mod network;
mod runtime_probe;
