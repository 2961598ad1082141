//! **DNS-SD records to a [`Sighting`]** — the one resolver behind both DNS-SD
//! sources: the mDNS browse ([`super::mdns`]) and the unicast zone browse
//! ([`super::dns`]) gather an instance's `SRV`, `TXT` and addresses their own
//! way, then hand them here to be decoded and addressed by the same rules,
//! with the limits defined once.
//!
//! ```text
//! instance label + SRV port + TXT strings + chosen address + path  ->  Sighting
//! ```
//!
//! The two paths differ in three details, each an explicit [`Path`]:
//! a TXT error names the mDNS instance *and host* ("announcement ignored")
//! or the DNS-SD instance name ("registration ignored"); an mDNS sighting
//! names the interface it was heard on, writes a link-local IPv6 address
//! with that interface's scope, and fills in the caps' `hostname` and `addr`
//! from what was announced, while a zone's is taken as registered.

use crate::addr::NodeAddr;
use crate::sighting::{Evidence, Sighting, Source};
use hickory_proto::rr::Name;
use rlx_net::iface::Iface;
use rlx_proto::caps::NodeCaps;
use rlx_proto::txt;
use std::net::IpAddr;

pub(crate) use rlx_proto::dnssd::{add_addr, instance_label, MAX_INSTANCES};

/// Largest announced TXT record accepted, counting each string's length
/// byte. The schema caps records at 1300 bytes (one Ethernet frame,
/// [`txt::MAX_RECORD_BYTES`]); anything larger was not written by a schema
/// v1 announcer. (A registration in a zone may be a little larger:
/// [`MAX_REGISTERED_TXT_BYTES`] leaves room for its lease.)
pub(crate) const MAX_TXT_BYTES: usize = txt::MAX_RECORD_BYTES;

/// How an instance's records reached us.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path<'a> {
    /// Multicast DNS, heard on `iface`; `host` is the SRV target as
    /// announced (`box.local.`).
    Link {
        /// The interface it was heard on.
        iface: &'a Iface,
        /// The SRV target.
        host: &'a str,
    },
    /// A unicast DNS zone; `instance` is the full instance name.
    Zone {
        /// `box._rlx._tcp.<domain>.`
        instance: &'a Name,
    },
}

/// One DNS-SD instance, as far as the sighting needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Records<'a> {
    /// The instance label (`box`): the sighting's host.
    pub label: &'a str,
    /// The SRV port.
    pub port: u16,
    /// The TXT strings (already within the path's size limit).
    pub txt: &'a [Vec<u8>],
    /// Where they came from.
    pub path: Path<'a>,
}

impl Records<'_> {
    /// The capabilities the TXT record announces, or why it is malformed:
    /// the TXT error (which names the key) plus the instance (and host), so
    /// the user knows which machine to fix.
    pub(crate) fn caps(&self) -> Result<NodeCaps, String> {
        self.named(txt::decode(self.txt))
    }

    /// [`Records::caps`] of a TXT record already decoded (the mDNS table
    /// decodes each record once, when it arrives).
    pub(crate) fn named(
        &self,
        decoded: Result<NodeCaps, txt::TxtError>,
    ) -> Result<NodeCaps, String> {
        decoded.map_err(|e| match self.path {
            Path::Link { host, .. } => format!(
                "{e} (instance `{}` on host {host}); announcement ignored",
                self.label
            ),
            Path::Zone { instance } => {
                format!("{e} (DNS-SD instance {instance}); registration ignored")
            }
        })
    }

    /// The sighting of the instance at `ip`, with `caps` from
    /// [`Records::caps`], completed `found_ms` after discovery started.
    ///
    /// The SRV port is the worker's (what `addr` names); the TXT `agent`
    /// key, when present, is the agent's port, where the handshake goes. A
    /// record without it is an agent whose one port serves both.
    pub(crate) fn sighting(&self, mut caps: NodeCaps, ip: IpAddr, found_ms: u64) -> Sighting {
        caps.agent_port = caps.agent_port.filter(|&p| p != self.port);
        let agent_port = caps.agent_port.unwrap_or(self.port);
        if caps.agent_port.is_some() {
            caps.worker_port = Some(self.port);
        }
        let (source, addr, heard_on) = match self.path {
            Path::Link { iface, host } => {
                let addr = match ip {
                    IpAddr::V6(v6) if v6.is_unicast_link_local() => {
                        format!("[{v6}%{}]:{}", iface.name, self.port)
                    }
                    ip => NodeAddr::new(ip, self.port).to_string(),
                };
                let host = host.trim_end_matches('.');
                let label = host.strip_suffix(".local").unwrap_or(host);
                // Agents announce `<host>-<id digits>.local.` (`-<n>` after
                // it when renamed on a conflict): the host name is the label
                // without the suffix of its own id, nor that counter.
                caps.hostname = rlx_proto::service::host_of_label(label, &caps.id).to_string();
                caps.addr = addr.clone();
                (Source::Mdns, addr, Some(iface.name.clone()))
            }
            Path::Zone { .. } => (Source::Dns, NodeAddr::new(ip, self.port).to_string(), None),
        };
        Sighting {
            identity: crate::sighting::Pinning::Unpinned,
            source,
            host: self.label.to_string(),
            addr,
            ip: Some(ip),
            port: self.port,
            agent_port: Some(agent_port),
            worker_reachable: None,
            ssh: None,
            caps: Some(caps),
            evidence: Evidence::Txt,
            heard_on,
            found_ms,
        }
    }
}

/// Whether a node can be dialled at `ip` from beyond its link: neither
/// loopback nor link-local (nor unspecified).
pub(crate) fn routable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified(),
        IpAddr::V6(v6) => !v6.is_loopback() && !v6.is_unicast_link_local() && !v6.is_unspecified(),
    }
}

/// The address a wide-area coordinator dials among `addrs`: a routable
/// IPv4 one, else a routable IPv6 one (the first of each, in record order).
pub(crate) fn pick_routable(addrs: &[IpAddr]) -> Option<IpAddr> {
    addrs
        .iter()
        .copied()
        .filter(routable)
        .min_by_key(|ip| ip.is_ipv6())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::net::if_::InterfaceFlags;

    fn sighting_of(txt: &[&str]) -> Sighting {
        let iface = Iface {
            name: "eth0".into(),
            index: 2,
            flags: InterfaceFlags::IFF_UP | InterfaceFlags::IFF_MULTICAST,
            addrs: vec!["10.9.1.1/16".parse().unwrap()],
        };
        let txt: Vec<Vec<u8>> = txt.iter().map(|s| s.as_bytes().to_vec()).collect();
        let r = Records {
            label: "box",
            port: 9100,
            txt: &txt,
            path: Path::Link {
                iface: &iface,
                host: "box.local.",
            },
        };
        r.sighting(r.caps().unwrap(), "10.9.1.2".parse().unwrap(), 1)
    }

    /// The SRV port is the worker's, in `addr`; the handshake goes to the
    /// port TXT `agent` names.
    #[test]
    fn an_agent_port_in_txt_is_where_the_handshake_goes_and_addr_keeps_the_srv_port() {
        let s = sighting_of(&["txtvers=1", "agent=6184", "worker=1", "cores=4"]);
        assert_eq!(s.addr, "10.9.1.2:9100");
        assert_eq!(s.agent_endpoint(), Some("10.9.1.2:6184".parse().unwrap()));
        assert_eq!(s.agent_addr().as_deref(), Some("10.9.1.2:6184"));
        let caps = s.caps.as_ref().unwrap();
        assert_eq!(
            (caps.worker_port, caps.worker_listening),
            (Some(9100), Some(true))
        );
    }

    /// Guards against breaking agents that predate the split: no `agent`
    /// key (or one equal to the SRV port) means one port for both.
    #[test]
    fn a_record_without_an_agent_port_is_an_older_agent_whose_handshake_is_on_the_srv_port() {
        for txt in [
            &["txtvers=1", "cores=4"][..],
            &["txtvers=1", "agent=9100", "cores=4"],
        ] {
            let s = sighting_of(txt);
            assert_eq!(s.addr, "10.9.1.2:9100");
            assert_eq!(s.agent_endpoint(), Some("10.9.1.2:9100".parse().unwrap()));
            assert_eq!(s.caps.as_ref().unwrap().worker_port, None);
        }
    }
}
