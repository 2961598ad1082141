//! **DNS-SD over unicast DNS** — the zone client both sides use: the
//! coordinator browses `_rlx._tcp.<domain>` on an ordinary DNS server
//! (RFC 6763 over unicast DNS) to find agents beyond the LAN, and an agent
//! that registers itself there (`rlx-agent --register`) sweeps the same
//! zone for the registrations of crashed agents.
//!
//! ```no_run
//! # async fn f() -> Result<(), rlx_proto::dnssd::DnsError> {
//! use rlx_proto::dnssd::{browse, ZoneOptions};
//! let opts = ZoneOptions {
//!     domain: rlx_proto::service::parse_domain("rlx.example.org").unwrap(),
//!     server: Some("10.0.0.53:53".into()),
//!     zone_transfer: false,
//!     deadline: std::time::Duration::from_secs(2),
//! };
//! let zone = browse(&opts).await?;
//! println!("{} instances, {} expired", zone.stats.instances, zone.expired.len());
//! # Ok(()) }
//! ```
//!
//! The records are the mDNS ones under another domain: `PTR
//! _rlx._tcp.<domain>` names each instance, the instance has `SRV` (port,
//! host) and `TXT` (schema v1, [`crate::txt`]), and the host `A`/`AAAA`.
//! This client returns each instance with its raw records; turning them
//! into nodes is the caller's business.
//!
//! # Queries
//!
//! Everything goes over one TCP connection, with queries pipelined
//! (RFC 7766 §6.2.1.1) at most [`MAX_IN_FLIGHT`] at once: a `PTR` answer for
//! a thousand nodes is ~30 KB, past any UDP size, and one connection costs
//! one round trip more than UDP, once.
//!
//! 1. `PTR _rlx._tcp.<domain>`: the instance names. Every record of the
//!    answer *and of the additional section* goes into one record pool
//!    ([`Pool`]): a server that does RFC 6763 §12.1 additional-record
//!    processing returns the instances' `SRV`, `TXT` and addresses right
//!    there, and then no further query is needed for them.
//! 2. For each instance still missing its `SRV` or its `TXT`: one query for
//!    each. Servers add the target's `A`/`AAAA` to a `SRV` answer (RFC 2782;
//!    BIND does), so
//! 3. an address query is sent only for a `SRV` target still without one
//!    (`A`, then `AAAA` if there is no `A`).
//!
//! With [`ZoneOptions::zone_transfer`] the browse asks for the whole zone
//! first (`AXFR` of `<domain>`, one query, when the server allows it to this
//! host) and falls back to the queries above when it is refused.
//!
//! # Leases
//!
//! A registered TXT record carries `expires=<unix seconds>`
//! ([`EXPIRES_KEY`](crate::service::EXPIRES_KEY)). An instance whose lease
//! ran out more than [`CLOCK_SKEW`](crate::service::CLOCK_SKEW) ago belongs
//! to an agent that crashed without deleting its records: it is listed in
//! [`ZoneBrowse::expired`], not among the instances.
//!
//! # Bounds
//!
//! At most [`MAX_INSTANCES`] instances are read (the rest are counted), a
//! TXT record over [`MAX_REGISTERED_TXT_BYTES`] is refused, a host keeps at
//! most [`MAX_ADDRS_PER_HOST`] addresses, each query has [`QUERY_TIMEOUT`]
//! and the whole browse one deadline.

mod conn;
mod rules;
mod server;
mod zone;

/// Allowed clock difference between agent and server for TSIG: the server
/// refuses (BADTIME) an update signed further than this from its clock
/// (RFC 8945 §5.2.3: the window is the Fudge field of the request itself).
///
/// 60 s, not the 300 s RFC 8945 §10 suggests, for two reasons:
///
/// - **The sweep.** Every agent that can write the zone is within the fudge
///   of the server, so two of them disagree by up to twice the fudge, and an
///   agent sweeping expired registrations must wait that long past a
///   lease's end (the agent's sweep grace) before it may delete: with 300 s a
///   crashed agent's records would stay over ten minutes; with 60 s, just
///   over two.
/// - **Replays.** TSIG has no replay cache: a captured update verifies for
///   as long as its time is within the fudge, so a smaller fudge is a
///   smaller window for replaying a deletion or an old registration.
///
/// NTP keeps hosts within milliseconds; an agent a minute off is told
/// BADTIME with "run NTP".
pub const TSIG_FUDGE: u16 = 60;

pub use conn::{DnsError, Pool};
pub use rules::{
    add_addr, instance_label, MAX_ADDRS_PER_HOST, MAX_INSTANCES, MAX_IN_FLIGHT, MAX_POOL_BYTES,
    MAX_POOL_RECORDS, MAX_REGISTERED_TXT_BYTES, QUERY_TIMEOUT,
};
pub use server::{check_server, resolve_server, system_server};
pub use zone::{
    browse, label_of, registration, BrowseStats, Expired, Registration, Stray, ZoneBrowse,
    ZoneInstance, ZoneOptions,
};
