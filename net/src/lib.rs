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
//!   (unsolicited Neighbor Advertisements); [`neighbour6`]: the IPv6
//!   neighbour table (netlink) and Neighbor Solicitations the nudger sends
//!   for IPv6 handshakes.
//! - [`links`]: the kernel's notifications that an interface or address
//!   changed, so the agent need not poll for them.
//! - [`linkfacts`]: what each link is (kind, speed, MTU, RDMA), as the
//!   system says.
//! - [`firewall`]: the host firewall's rules (nftables, legacy iptables)
//!   that would stop mDNS or a TCP port; [`check`]: one self-check's
//!   outcome, for `rlx-discover doctor` and `rlx-agent check`.
//! - [`identify`]: what listens on a TCP port (HTTP, SSH, TLS, a printer
//!   ...), for the subnet scan and for the agent's check of its worker port.
//!
//! # Platforms
//! Each module says what it does where:
//!
//! | module | Linux | macOS |
//! | --- | --- | --- |
//! | [`iface`] | `getifaddrs` | `getifaddrs` (the same) |
//! | [`netguard`] | network-namespace evidence from `/proc` | `RLX_NETNS_GUARD=1` refuses outright (no namespaces) |
//! | [`neighbour`] | packet sockets, `/proc/net/arp` | not available (debug log once) |
//! | [`ndp`] | raw ICMPv6 socket (`CAP_NET_RAW`) | raw ICMPv6 socket (root) |
//! | [`neighbour6`] | netlink `RTM_GETNEIGH`, raw ICMPv6 socket | not available (the table is not read; nothing sent) |
//! | [`links`] | netlink route socket | `PF_ROUTE` route socket |
//! | [`listening`] | netlink `sock_diag` (listening TCP sockets and the addresses they are bound to) | not available (the agent connects to loopback instead) |
//! | [`linkfacts`] | `/sys/class/net`, `/sys/class/infiniband` | `getifaddrs` `if_data` (no Wi-Fi/Thunderbolt kinds yet) |
//! | [`firewall`] | `nft -j list ruleset`, `iptables-legacy-save` | not read (the caller says so: pf's rules are not parsed) |

// Every public item is documented, and nothing is `pub` that the crate
// root does not export: what is public is the contract.
#![deny(missing_docs, unreachable_pub)]

pub mod check;
pub mod firewall;
pub mod identify;
pub mod iface;
pub mod linkfacts;
pub mod links;
pub mod listening;
pub mod ndp;
pub mod neighbour;
pub mod neighbour6;
pub mod netguard;
mod netlink;
