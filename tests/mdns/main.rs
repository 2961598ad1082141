//! **Discovery over mDNS on a LAN of namespaces**: the one-shot browse
//! against real responders (python-zeroconf, avahi, mdns-sd, real agents),
//! `expand` and `watch` end to end, the agent beside avahi-daemon, the
//! link facts a probing agent reports, and the coordinator's own load on
//! the LAN.
//!
//! - `browse`: the browse against every kind of responder, loss, IPv6.
//! - `lan`: an empty `[discover]` finds every agent; loss; ssh and mDNS
//!   merged; `watch` joins, goodbyes and crashes.
//! - `beside_avahi`: an agent and avahi-daemon on one machine.
//! - `link_facts`: the announced link attached to its node.
//! - `load`: a dual-stack browse stops querying the family that adds
//!   nothing.

mod beside_avahi;
mod browse;
mod lan;
mod link_facts;
mod load;
