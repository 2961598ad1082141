//! **Addresses that proved they receive what is sent to them**: each peer
//! whose TCP connection the handshake server accepted (the three-way
//! handshake needs the SYN-ACK sent to that address), told to the mDNS
//! responder.
//!
//! Why: a QU question's source address is whatever its sender wrote, so a
//! stranger on the link can put a victim's there and make every responder
//! unicast its answers at the victim. The built-in responder answers an
//! unproved source by unicast only when the answer is no bigger than the
//! question (vendor/mdns-sd/PATCHES.md §36); a coordinator that connected
//! to this agent is proved and keeps getting full unicast answers.
//!
//! The server starts before the responder, so the link between them is set
//! once the responder runs ([`ProvedPeers::connect`]); until then, and with
//! the system responder (which has no such rule to relax), peers are noted
//! nowhere.

use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

/// What a proved address is handed to: the responder's `prove_source`.
type Sink = Box<dyn Fn(IpAddr) + Send + Sync>;

/// Where the server tells whom it accepted a connection from: a cheap
/// clone, shared between the server and the responder.
#[derive(Clone, Default)]
pub struct ProvedPeers(Arc<OnceLock<Sink>>);

impl fmt::Debug for ProvedPeers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProvedPeers")
            .field("connected", &self.0.get().is_some())
            .finish()
    }
}

impl ProvedPeers {
    /// Sends every proved address to `to` from now on (the first call wins).
    pub fn connect(&self, to: impl Fn(IpAddr) + Send + Sync + 'static) {
        let _ = self.0.set(Box::new(to));
    }

    /// `peer` completed a TCP connection with the agent. An IPv4 peer seen
    /// on a dual-stack socket (`::ffff:10.0.0.1`) is its IPv4 address, as
    /// its mDNS packets carry it.
    pub fn proved(&self, peer: IpAddr) {
        if let Some(to) = self.0.get() {
            to(peer.to_canonical());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn proved_peers_reach_the_responder_once_connected_as_their_ipv4_address() {
        let p = ProvedPeers::default();
        p.proved("10.0.0.1".parse().unwrap()); // nobody listens yet: dropped
        let seen = Arc::new(Mutex::new(Vec::new()));
        let to = Arc::clone(&seen);
        p.clone()
            .connect(move |ip| to.lock().unwrap().push(ip.to_string()));
        p.proved("::ffff:10.0.0.2".parse().unwrap());
        assert_eq!(*seen.lock().unwrap(), vec!["10.0.0.2".to_string()]);
    }
}
