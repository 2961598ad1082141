//! **The bounds and naming rules of a DNS-SD browse** — defined once for
//! both paths: the unicast zone client here and the coordinator's mDNS
//! browse, so a zone full of junk and a flood of multicast announcements
//! are bounded alike.

use crate::txt;
use hickory_proto::rr::Name;
use std::time::Duration;

/// Most instances (and host names) one browse keeps. Far above any real
/// cluster, and at a TXT record's limit each it bounds a browse to a few MB
/// however many bogus instances a zone or a hostile host offers; the rest
/// are counted and reported.
pub const MAX_INSTANCES: usize = 4096;

/// Most records one browse keeps in all: a registration is a PTR, an SRV,
/// a TXT and at most [`MAX_ADDRS_PER_HOST`] addresses, so this is room for
/// every instance [`MAX_INSTANCES`] allows. Without it a hostile server,
/// answering every query with thousands of records of names never asked
/// for, would grow the coordinator without end; the rest are counted
/// ([`crate::dnssd::BrowseStats::over_budget`]) and reported.
pub const MAX_POOL_RECORDS: usize = 20 * MAX_INSTANCES;

/// Most bytes of record data one browse keeps (the records' wire form):
/// every instance at the TXT limit with its addresses, about 6 MB, fits.
pub const MAX_POOL_BYTES: usize = 8 << 20;

/// Most addresses kept per host name: a dual-stack host with a few
/// interfaces has well under this; more is noise or an attack.
pub const MAX_ADDRS_PER_HOST: usize = 16;

/// Largest registered TXT record accepted (each string plus its length
/// byte): the schema's 1300 bytes ([`txt::MAX_RECORD_BYTES`]) plus room for
/// [`EXPIRES_KEY`](crate::service::EXPIRES_KEY), which a DNS UPDATE
/// registration adds and an mDNS announcement does not carry.
pub const MAX_REGISTERED_TXT_BYTES: usize = txt::MAX_RECORD_BYTES + 64;

/// Most queries in flight on the connection. BIND serves pipelined TCP
/// queries concurrently; 64 keeps a thousand-node browse to a few dozen
/// round trips without flooding a small server.
pub const MAX_IN_FLIGHT: usize = 64;

/// Deadline for one query. A server that takes longer is overloaded or
/// gone; the browse's own deadline bounds the whole run.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// The instance label of `<label>.<service>` (raw bytes: DNS-SD instance
/// names are UTF-8 with spaces, dots and punctuation, never IDNA-encoded),
/// or `None` for any other name.
pub fn instance_label(name: &Name, service: &Name) -> Option<Vec<u8>> {
    if name.num_labels() != service.num_labels() + 1 || !service.zone_of(name) {
        return None;
    }
    name.iter().next().map(<[u8]>::to_vec)
}

/// Adds `a` to a host's addresses unless it is there already or the host
/// has [`MAX_ADDRS_PER_HOST`].
pub fn add_addr<T: PartialEq>(addrs: &mut Vec<T>, a: T) {
    if addrs.len() < MAX_ADDRS_PER_HOST && !addrs.contains(&a) {
        addrs.push(a);
    }
}
