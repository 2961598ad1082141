//! **The agent's mDNS responder against RFC 6762**, seen on the wire from
//! raw packets (`lab/py/mdns_wire.py`, `lab/py/mdns_raw.py`) in lab hosts:
//! the "Answering" and "Probing" rows of docs/protocol.md's conformance
//! table, and the rule that makes agents no UDP reflectors.
//!
//! - `wire`: QU bits, unicast replies, answer delays, goodbyes, per-link
//!   addresses.
//! - `state`: probing again, renames, link flaps.
//! - `addr`: a new address announced without silence.
//! - `reflector`: only on-link queriers are answered, at a bounded rate;
//!   forged QU queries draw no more bytes toward their victim than they carry.
//! - `answers`: ANY, letter cases, the meta-query, ids and IP TTLs, both
//!   address families, QU replies bounded per source, pending answers
//!   cancelled only by the link's own responses from port 5353.
//! - `two_nics`: a box with two NICs on one LAN never conflicts with itself.
//! - `questions`: two browsers on one LAN ask each question once; questions
//!   sent to a browser alone never silence it.

mod addr;
mod answers;
mod questions;
mod reflector;
mod state;
mod two_nics;
mod wire;
