//! **rlx-net** — the host's network as rlx sees it: which interfaces mDNS
//! may use, the guard that keeps tests off the real network, and ARP help
//! under packet loss. Whatever is specific to one operating system's
//! networking lives here, behind these modules.
//!
//! # Layout
//! - [`iface`]: the interface rule (up, multicast, not virtual) and which
//!   address a node gets.
//! - [`netguard`]: under `RLX_NETNS_GUARD=1`, refuses multicast and scans from
//!   the machine's initial network namespace.
//! - [`neighbour`]: gratuitous ARP and nudges, so a lost ARP packet does not
//!   cost a handshake a second; [`ndp`]: the same announcement for IPv6
//!   (unsolicited Neighbor Advertisements).

pub mod iface;
pub mod ndp;
pub mod neighbour;
pub mod netguard;
