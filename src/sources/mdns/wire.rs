//! **mDNS on the wire** — the names, the legacy query we send (RFC 6762
//! §6.7, with known answers, §7.1) and the lenient reading of the replies:
//! what a datagram must be to count as an answer to one of our queries.

use crate::sources::dnssd::instance_label;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::PTR;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use rlx_net::iface::Iface;
use rlx_proto::service::MDNS_SERVICE_TYPE as SERVICE_TYPE;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The mDNS port (RFC 6762 §3). Replies to legacy queries come from it.
pub(crate) const MDNS_PORT: u16 = 5353;

/// The IPv4 mDNS group.
pub(super) const MDNS_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 251);

/// The IPv6 link-local mDNS group.
pub(super) const MDNS_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb);

/// TTL given to known answers. RFC 6762 §7.1: a responder stays silent only
/// if the listed TTL is above half the record's true TTL; PTR records live
/// 4500 s (RFC 6762 §10), and the replies to legacy queries carry a capped
/// 10 s TTL that must not be echoed back.
pub(crate) const KNOWN_ANSWER_TTL: u32 = 4500;

/// Largest query sent: known answers are added until the next would make
/// the message outgrow one 1500-byte Ethernet frame with the larger of the
/// two families' headers (IPv6 40 + UDP 8 bytes), so a query is never
/// fragmented on either family. About 60 known answers with short instance
/// names fit; a legacy query rotates the list across rounds when more are
/// known, a standard query continues it in further packets
/// ([`standard_queries`]).
pub(super) const MAX_QUERY_BYTES: usize = 1500 - 40 - 8;

/// Largest mDNS datagram (RFC 6762 §17); anything larger is dropped.
pub(super) const MAX_PACKET: usize = 9000;

/// `_rlx._tcp.local.` as a DNS name.
pub(super) fn service_name() -> Name {
    let [service, proto] = rlx_proto::service::SERVICE_LABELS;
    Name::from_labels([service, proto, "local"]).expect("valid service name")
}

/// `<label>._rlx._tcp.local.`; the label is raw bytes (DNS-SD instance names
/// are UTF-8 with spaces, dots and punctuation, never IDNA-encoded).
pub(super) fn instance_name(label: &[u8]) -> Option<Name> {
    let [service, proto] = rlx_proto::service::SERVICE_LABELS;
    Name::from_labels([label, service.as_bytes(), proto.as_bytes(), b"local"]).ok()
}

/// A host name as a map key: labels joined by dots, lowercase, no final dot
/// (the form mdns-sd's strings reduce to as well).
pub(super) fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS name as text, labels joined by dots with no escaping and a final
/// dot (how mdns-sd writes names, so both paths meet in one key).
pub(super) fn name_text(name: &Name) -> String {
    let mut s = String::new();
    for l in name.iter() {
        s.push_str(&String::from_utf8_lossy(l));
        s.push('.');
    }
    s
}

/// A legacy one-shot query (RFC 6762 §6.7): one `PTR` question for
/// [`SERVICE_TYPE`], QU bit clear (the source port already asks for a
/// unicast reply), and `known` instances as known answers (RFC 6762 §7.1)
/// until the message would exceed [`MAX_QUERY_BYTES`]. One packet: a
/// responder answers every legacy packet it gets by unicast, so follow-up
/// packets would only draw more replies (the list rotates across rounds).
pub(super) fn legacy_query(id: u16, known: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let (first, _) = query_packet(id, true, known);
    first.to_vec().map_err(|e| e.to_string())
}

/// A standard query for [`SERVICE_TYPE`] (ID 0, RFC 6762 §18.1) carrying
/// every one of `known` as a known answer: as many as fit in the first
/// packet, the rest in follow-up packets without a question, the TC bit set
/// on all but the last (RFC 6762 §7.2), so that a responder listed in any
/// of them stays silent. (Responders that answer a truncated query at once,
/// as mdns-sd 0.21.7 does, ignore the follow-ups: they answer as if only
/// the first packet's list had been sent, never more.)
pub(super) fn standard_queries(known: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut rest = known;
    let mut question = true;
    loop {
        let (mut msg, used) = query_packet(0, question, rest);
        rest = &rest[used..];
        if !rest.is_empty() {
            msg.set_truncated(true);
        }
        out.push(msg.to_vec().map_err(|e| e.to_string())?);
        // An answer too big for a packet of its own is dropped rather than
        // looping (an instance label is at most 63 bytes, so it never is).
        if rest.is_empty() || used == 0 {
            return Ok(out);
        }
        question = false;
    }
}

/// One query message: the `PTR` question when `question`, then as many of
/// `known` as fit in [`MAX_QUERY_BYTES`]; and how many of `known` it used
/// (skipped labels that are not valid names count as used).
fn query_packet(id: u16, question: bool, known: &[Vec<u8>]) -> (Message, usize) {
    let service = service_name();
    let mut msg = Message::new();
    msg.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(false);
    // Header, question (name + type + class); each known answer is a
    // compressed owner (2), type/class/TTL/length (10), and the rdata: the
    // instance label plus a pointer to the service name (2). Without a
    // question, the first answer's owner is the name in full.
    let mut size = 12;
    let mut owner_full = !question;
    if question {
        msg.add_query(Query::query(service.clone(), RecordType::PTR));
        size += SERVICE_TYPE.len() + 1 + 4;
    }
    let mut used = 0;
    for label in known {
        let owner = if owner_full {
            SERVICE_TYPE.len() + 1
        } else {
            2
        };
        let rr = owner + 10 + 1 + label.len() + 2;
        if size + rr > MAX_QUERY_BYTES {
            break;
        }
        used += 1;
        let Some(name) = instance_name(label) else {
            continue;
        };
        msg.add_answer(Record::from_rdata(
            service.clone(),
            KNOWN_ANSWER_TTL,
            RData::PTR(PTR(name)),
        ));
        size += rr;
        owner_full = false;
    }
    (msg, used)
}

/// Accepts a datagram on a legacy socket as a reply to one of our queries:
/// from port 5353 (RFC 6762 §6.7), from an on-link address (§11), a
/// response to an ID we sent. Returns the message and the query round.
pub(super) fn parse_reply(
    bytes: &[u8],
    src: SocketAddr,
    on: &Iface,
    rounds: &HashMap<u16, usize>,
) -> Option<(Message, usize)> {
    if src.port() != MDNS_PORT || !on_link(&src.ip(), on) {
        return None;
    }
    let msg = Message::from_vec(bytes)
        .ok()
        .or_else(|| lenient_message(bytes))?;
    if msg.message_type() != MessageType::Response
        || msg.op_code() != OpCode::Query
        || msg.response_code() != ResponseCode::NoError
    {
        return None;
    }
    let round = *rounds.get(&msg.id())?;
    Some((msg, round))
}

/// Decodes a reply record by record, skipping the records whose data does
/// not decode instead of refusing the whole message (python-zeroconf 0.47
/// writes NSEC records that hickory-proto rejects, and one bad record would
/// otherwise hide the PTR, SRV, TXT and A beside it). Every record still
/// goes through hickory-proto; only the framing (RFC 1035 §4.1.3: name,
/// type, class, TTL, length, data) is walked here, to know where the next
/// record starts.
pub(super) fn lenient_message(bytes: &[u8]) -> Option<Message> {
    use hickory_proto::op::Header;
    use hickory_proto::rr::DNSClass;
    use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, Restrict};
    let mut d = BinDecoder::new(bytes);
    let header = Header::read(&mut d).ok()?;
    let mut msg = Message::new();
    msg.set_id(header.id())
        .set_message_type(header.message_type())
        .set_op_code(header.op_code())
        .set_response_code(header.response_code());
    for _ in 0..header.query_count() {
        msg.add_query(Query::read(&mut d).ok()?);
    }
    let sections = [
        header.answer_count(),
        header.name_server_count(),
        header.additional_count(),
    ];
    for (section, count) in sections.into_iter().enumerate() {
        for _ in 0..count {
            let name = Name::read(&mut d).ok()?;
            let rtype = RecordType::from(d.read_u16().ok()?.unverified());
            let class = d.read_u16().ok()?.unverified();
            let ttl = d.read_u32().ok()?.unverified();
            let len = d.read_u16().ok()?.unverified();
            let start = d.index();
            // Decode the data with a decoder over the whole message, so
            // compressed names in it resolve; then step over it either way.
            let mut at = BinDecoder::new(bytes);
            at.read_slice(start).ok()?;
            let data = RData::read(&mut at, rtype, Restrict::new(len));
            d.read_slice(usize::from(len)).ok()?;
            let Ok(data) = data else { continue };
            let mut rec = Record::from_rdata(name, ttl, data);
            // mDNS sets the top bit of the class for cache-flush (RFC 6762
            // §10.2); the class itself is the low 15 bits.
            rec.set_dns_class(DNSClass::from(class & 0x7fff));
            match section {
                0 => msg.add_answer(rec),
                1 => msg.add_name_server(rec),
                _ => msg.add_additional(rec),
            };
        }
    }
    Some(msg)
}

/// Whether `ip` is on the local link of `on` (RFC 6762 §11 source check).
pub(super) fn on_link(ip: &IpAddr, on: &Iface) -> bool {
    match ip {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => true,
        ip if ip.is_loopback() => on.is_loopback(),
        ip => on.on_subnet(ip),
    }
}

/// The instances a response says goodbye for: each `PTR` answer of
/// [`SERVICE_TYPE`] with TTL 0 (RFC 6762 §10.1), by label. mdns-sd reports
/// such a goodbye only for an instance it still has in its cache, a second
/// later; read here from the packet itself, it is heard at once, whatever
/// the cache holds.
pub(super) fn goodbyes_in(msg: &Message) -> Vec<String> {
    let service = service_name();
    msg.answers()
        .iter()
        .filter(|r| r.ttl() == 0 && r.name().num_labels() == service.num_labels())
        .filter(|r| service.zone_of(r.name()))
        .filter_map(|r| match r.data() {
            RData::PTR(PTR(target)) => instance_label(target, &service),
            _ => None,
        })
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .collect()
}

/// `box._rlx._tcp.local.` -> `box` (case-insensitive suffix).
pub(super) fn strip_service(fullname: &str) -> Option<&str> {
    let suffix = format!(".{SERVICE_TYPE}");
    let cut = fullname.len().checked_sub(suffix.len())?;
    if cut == 0 || !fullname.is_char_boundary(cut) {
        return None;
    }
    fullname[cut..]
        .eq_ignore_ascii_case(&suffix)
        .then(|| &fullname[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::mdns::fixtures::{eth0, reply, GOOD};

    #[test]
    fn a_legacy_query_asks_for_rlx_ptr_records_and_lists_known_answers_with_a_long_ttl() {
        let known = vec![b"box a".to_vec(), b"gpu (2)".to_vec()];
        let bytes = legacy_query(0x1234, &known).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.id(), 0x1234);
        assert_eq!(m.message_type(), MessageType::Query);
        assert_eq!(m.queries().len(), 1);
        assert_eq!(m.queries()[0].query_type(), RecordType::PTR);
        assert_eq!(m.queries()[0].name(), &service_name());
        assert!(
            !m.queries()[0].mdns_unicast_response(),
            "QU bit must be clear"
        );
        assert_eq!(m.answers().len(), 2);
        for (rec, want) in m.answers().iter().zip(&known) {
            assert_eq!(rec.ttl(), KNOWN_ANSWER_TTL);
            let RData::PTR(PTR(t)) = rec.data() else {
                panic!("not a PTR: {rec:?}")
            };
            assert_eq!(instance_label(t, &service_name()).as_ref(), Some(want));
        }
    }

    #[test]
    fn the_known_answer_list_stops_before_a_query_outgrows_one_frame() {
        let known: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("node-{i:04}").into_bytes())
            .collect();
        let bytes = legacy_query(1, &known).unwrap();
        assert!(bytes.len() <= MAX_QUERY_BYTES, "{} bytes", bytes.len());
        let n = Message::from_vec(&bytes).unwrap().answers().len();
        assert!(n >= 50, "only {n} known answers fit");
    }

    /// Guards against the ~50-answer cap of a 1400-byte budget: a query is
    /// filled to the frame, so the next answer would not have fitted.
    #[test]
    fn a_query_is_filled_with_known_answers_to_within_one_answer_of_the_frame() {
        let known: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("node-{i:04}").into_bytes())
            .collect();
        let bytes = legacy_query(1, &known).unwrap();
        // A 1500-byte frame less the IPv6 and UDP headers.
        let frame = 1500 - 40 - 8;
        let one = 2 + 10 + 1 + known[0].len() + 2;
        assert!(bytes.len() <= frame, "{} bytes", bytes.len());
        assert!(
            bytes.len() + one > frame,
            "{} bytes: room for another answer of {one}",
            bytes.len()
        );
    }

    /// Guards against a standard query listing only the first ~50 of many
    /// known instances (RFC 6762 §7.2): the rest go in follow-up packets,
    /// TC set on all but the last, with no question after the first.
    #[test]
    fn a_standard_query_continues_its_known_answers_in_truncated_packets() {
        let known: Vec<Vec<u8>> = (0..200)
            .map(|i| format!("node-{i:03}").into_bytes())
            .collect();
        let packets = standard_queries(&known).unwrap();
        assert!(packets.len() >= 3, "{} packets", packets.len());
        let mut listed = Vec::new();
        for (k, bytes) in packets.iter().enumerate() {
            assert!(bytes.len() <= MAX_QUERY_BYTES, "{} bytes", bytes.len());
            let m = Message::from_vec(bytes).unwrap();
            assert_eq!(m.id(), 0, "multicast queries carry ID 0");
            assert_eq!(m.truncated(), k + 1 < packets.len(), "packet {k}");
            assert_eq!(m.queries().len(), usize::from(k == 0), "packet {k}");
            for rec in m.answers() {
                let RData::PTR(PTR(t)) = rec.data() else {
                    panic!("not a PTR: {rec:?}")
                };
                listed.push(instance_label(t, &service_name()).unwrap());
            }
        }
        assert_eq!(listed, known, "every known answer listed once, in order");
        // Few enough to fit one packet: one packet, TC clear.
        let one = standard_queries(&known[..3]).unwrap();
        assert_eq!(one.len(), 1);
        assert!(!Message::from_vec(&one[0]).unwrap().truncated());
    }

    #[test]
    fn replies_are_accepted_only_from_port_5353_on_link_to_a_query_we_sent() {
        let m = reply(42, "a", "a.local.", 9100, GOOD, &["10.9.1.5"]);
        let bytes = m.to_vec().unwrap();
        let rounds: HashMap<u16, usize> = [(42, 0)].into();
        let on = eth0();
        let ok: SocketAddr = "10.9.1.5:5353".parse().unwrap();
        assert!(parse_reply(&bytes, ok, &on, &rounds).is_some());
        assert!(parse_reply(&bytes, "10.9.1.5:5354".parse().unwrap(), &on, &rounds).is_none());
        assert!(parse_reply(&bytes, "8.8.8.8:5353".parse().unwrap(), &on, &rounds).is_none());
        assert!(parse_reply(&bytes, ok, &on, &[(43, 0)].into()).is_none());
        assert!(parse_reply(b"junk", ok, &on, &rounds).is_none());
    }

    #[test]
    fn instance_names_with_spaces_and_dots_survive_the_round_trip() {
        let n = instance_name("GPU box (2).lab".as_bytes()).unwrap();
        let bytes = {
            let mut m = Message::new();
            m.add_answer(Record::from_rdata(service_name(), 1, RData::PTR(PTR(n))));
            m.to_vec().unwrap()
        };
        let m = Message::from_vec(&bytes).unwrap();
        let RData::PTR(PTR(t)) = m.answers()[0].data() else {
            panic!()
        };
        assert_eq!(
            instance_label(t, &service_name()).unwrap(),
            b"GPU box (2).lab".to_vec()
        );
        assert_eq!(
            strip_service("GPU box (2).lab._rlx._tcp.local."),
            Some("GPU box (2).lab")
        );
        assert_eq!(strip_service("x._http._tcp.local."), None);
    }
}
