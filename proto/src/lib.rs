//! **rlx-proto** — the wire contracts that `rlx-agent` and `rlx-discover`
//! share, each defined once: what one side encodes, the other decodes with
//! the same code.
//!
//! ```
//! use rlx_proto::service::{DEFAULT_AGENT_PORT, DEFAULT_WORKER_PORT, MDNS_SERVICE_TYPE};
//! assert_eq!(
//!     (MDNS_SERVICE_TYPE, DEFAULT_WORKER_PORT, DEFAULT_AGENT_PORT),
//!     ("_rlx._tcp.local.", 9100, 6184)
//! );
//! ```
//!
//! # Layout
//! - [`service`]: the DNS-SD service type, the default port, instance and
//!   domain naming, and the DNS-SD lease key: the names both sides agree on.
//! - [`caps`]: a node's capabilities and their JSON (`rlx-agent --probe`,
//!   the handshake reply, the SSH probe).
//! - [`txt`]: TXT schema v1, the capabilities as mDNS/DNS-SD TXT strings.
//! - [`handshake`]: the hello/reply on the agent's port and its proof.
//! - [`keys`]: cluster key files and the HMAC under them.
//! - [`identity`]: each agent's own Ed25519 key pair (its node key), kept
//!   beside its node id; its public half travels in the caps.
//! - [`dnssd`]: DNS-SD over unicast DNS, the zone client (browse, leases,
//!   the server to ask) that the coordinator's DNS source and the agent's
//!   registration sweep share.
//! - [`configfile`]: the size cap and bounded read of both programs'
//!   config files, and the one renderer of a place in one (line, column,
//!   caret, nearest key).
//! - [`exit`]: the exit codes both programs exit by, and their `--help`
//!   table.
//!
//! `docs/protocol.md` is the prose version of these modules.

// Every public item is documented, and nothing is `pub` that the crate
// root does not export: what is public is the contract.
#![deny(missing_docs, unreachable_pub)]

pub mod caps;
pub mod configfile;
pub mod dnssd;
pub mod exit;
pub mod handshake;
pub mod identity;
pub mod keys;
pub mod manpage;
pub mod service;
pub mod txt;
