//! **The agent's mDNS announcement, from outside**: announcers run as
//! children inside lab namespaces (this test binary re-run for one helper
//! test, [`rlx_lab::kit::rerun`]), watched by python-zeroconf and by raw
//! queriers. Without root these tests say `SKIP` (under `CI=true` they fail
//! instead).
//!
//! - `announce`: the TXT record, goodbyes, renames, re-announcements and
//!   interface selection as a third-party browser sees them.
//! - `conformance_state`: a TXT update never silences the agent.
//! - `system`: the announcement handed to the system's responder
//!   (avahi-daemon through its libdns_sd, as mDNSResponder on a Mac).

mod announce;
mod conformance_state;
mod system;
