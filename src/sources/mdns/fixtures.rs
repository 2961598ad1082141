//! **Test fixtures of the mDNS browse** — an interface, a legacy reply as
//! an mdns-sd responder sends it, a good TXT record, and browse options:
//! shared by the unit tests of the wire, table, stop and resolve modules.

use super::options::BrowseOptions;
use super::wire::{instance_name, service_name};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, AAAA, PTR, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use nix::net::if_::InterfaceFlags;
use rlx_net::iface::Iface;
use std::net::IpAddr;
use std::time::Duration;

pub(super) fn eth0() -> Iface {
    Iface {
        name: "eth0".into(),
        index: 2,
        flags: InterfaceFlags::IFF_UP | InterfaceFlags::IFF_MULTICAST,
        addrs: vec![
            "10.9.1.1/16".parse().unwrap(),
            "fd52::1/64".parse().unwrap(),
            "fe80::1/64".parse().unwrap(),
        ],
    }
}

fn txt_rec(label: &str, strings: &[&str]) -> Record {
    Record::from_rdata(
        instance_name(label.as_bytes()).unwrap(),
        10,
        RData::TXT(TXT::new(strings.iter().map(|s| s.to_string()).collect())),
    )
}

/// A legacy reply as an mdns-sd responder sends it: PTR answer, SRV,
/// TXT and address records as additionals.
pub(super) fn reply(
    id: u16,
    label: &str,
    host: &str,
    port: u16,
    txt: &[&str],
    ips: &[&str],
) -> Message {
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_authoritative(true);
    m.add_query(Query::query(service_name(), RecordType::PTR));
    let inst = instance_name(label.as_bytes()).unwrap();
    let host_name = Name::from_ascii(host).unwrap();
    m.add_answer(Record::from_rdata(
        service_name(),
        10,
        RData::PTR(PTR(inst.clone())),
    ));
    m.add_additional(Record::from_rdata(
        inst,
        10,
        RData::SRV(SRV::new(0, 0, port, host_name.clone())),
    ));
    m.add_additional(txt_rec(label, txt));
    for ip in ips {
        let rd = match ip.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => RData::A(A(a)),
            IpAddr::V6(a) => RData::AAAA(AAAA(a)),
        };
        m.add_additional(Record::from_rdata(host_name.clone(), 10, rd));
    }
    // Through the wire form, as the browse sees it.
    Message::from_vec(&m.to_vec().unwrap()).unwrap()
}

pub(super) const GOOD: &[&str] = &[
    "txtvers=1",
    "id=5f0c1d2e3a4b5c6d",
    "cores=16",
    "ram=68719476736",
    "dev0=cuda,25769803776,0,1,0,RTX 4090",
];

pub(super) fn opts() -> BrowseOptions {
    BrowseOptions {
        browse: Duration::from_millis(2000),
        ..Default::default()
    }
}
