//! **Where nodes come from** — each source turns its own kind of evidence
//! into [`crate::sighting::Sighting`]s for the one pipeline; none of them
//! chooses devices or merges (that is [`crate::pipeline`]'s job alone).
//!
//! - [`ssh`]: hosts of `~/.ssh/config`, probed over ssh;
//! - [`subnet`]: a scan of a block for agents and workers, with
//!   [`identify`] naming the other daemons found on the worker port;
//! - [`mdns`]: the one-shot mDNS browse of `_rlx._tcp.local.` (and the
//!   continuous one of `watch`);
//! - [`dns`]: unicast DNS-SD, `_rlx._tcp.<domain>` on a DNS server, for
//!   nodes beyond the LAN (the zone client is [`rlx_proto::dnssd`]);
//! - [`dnssd`]: the DNS-SD resolver `mdns` and `dns` share: an instance's
//!   records to a sighting, with the limits defined once.

pub mod dns;
pub mod dnssd;
pub mod identify;
pub mod mdns;
pub mod ssh;
pub mod subnet;
