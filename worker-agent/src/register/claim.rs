//! **Whose a DNS-SD instance name is** — the unicast-DNS side of what mDNS
//! probing does on the LAN (RFC 6762 §8-9): before an agent writes its
//! records at `I._rlx._tcp.Z.`, it looks at who holds `I` now, and every
//! UPDATE carries an RFC 2136 prerequisite on what it saw, so two agents
//! never overwrite each other's instance.
//!
//! Without it, two machines cloned from one image (one host name, no
//! `--name`) both registered as `box`: the second UPDATE replaced the
//! first's SRV and TXT, and coordinators saw one machine where two ran.
//! Now the second finds `box` held by another node id and takes
//! `box (2)`, as an mDNS responder renames on a conflict (RFC 6763 §13.1
//! names the same "(2)" convention).

use hickory_proto::op::{Message, UpdateMessage};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use rlx_proto::dnssd::ZoneBrowse;
use rlx_proto::txt;

/// How many names an agent tries (`box`, `box (2)` .. `box (32)`) before
/// it gives up until the next refresh: far more clones of one image than a
/// LAN holds, and a bound on what a zone full of strangers costs.
pub const MAX_NAMES: u32 = 32;

/// Who holds an instance name in the zone, as a browse saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Nobody: no records at that name.
    Free,
    /// This node (the same node id): a restart, or our last write, with
    /// the TXT strings the zone holds.
    Ours(Vec<Vec<u8>>),
    /// A registration whose lease ran out, with its TXT strings: ours to
    /// take (a crashed agent's, perhaps our own earlier life).
    Expired(Vec<Vec<u8>>),
    /// Another machine, by its node id (or why none could be read: an
    /// incomplete or unreadable registration is someone's all the same).
    Other(String),
}

/// The condition the next UPDATE of an instance is sent on: what the zone
/// must still hold there for the update to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The name is not in use (RFC 2136 §2.4.5).
    Free,
    /// Its TXT RRset is exactly these strings (§2.4.2): the registration
    /// seen, or the one this agent wrote last.
    Txt(Vec<Vec<u8>>),
}

/// The `n`th name an agent with instance label `base` tries: `base`, then
/// `base (2)`, `base (3)` .., with `base` cut (at a character boundary) so
/// the label stays within DNS's 63 bytes.
pub fn candidate(base: &str, n: u32) -> String {
    if n <= 1 {
        return base.to_string();
    }
    let suffix = format!(" ({n})");
    let mut cut = base.len().min(63 - suffix.len());
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &base[..cut])
}

/// Who holds `name` in browse `b`, for the node `our_id`.
pub fn holder(b: &ZoneBrowse, name: &Name, our_id: &str) -> Holder {
    let lower = name.to_lowercase();
    if let Some(i) = b.instances.iter().find(|i| i.name.to_lowercase() == lower) {
        return match &i.registration {
            Ok(r) => match txt::decode(&r.txt) {
                Ok(c) if c.id == our_id => Holder::Ours(r.txt.clone()),
                Ok(c) => Holder::Other(c.id),
                Err(e) => Holder::Other(format!("unreadable TXT: {e}")),
            },
            Err(why) => Holder::Other(format!("an incomplete registration: {why}")),
        };
    }
    match b
        .expired
        .iter()
        .find(|e| e.instance.to_lowercase() == lower)
    {
        Some(e) => Holder::Expired(e.txt.clone()),
        None => Holder::Free,
    }
}

/// Adds to update `m` the prerequisite of `claim` on `instance`.
pub fn require(m: &mut Message, instance: &Name, claim: &Claim) {
    let pre = match claim {
        Claim::Free => {
            let mut r = Record::update0(instance.clone(), 0, RecordType::ANY);
            r.set_dns_class(DNSClass::NONE);
            r
        }
        Claim::Txt(strings) => {
            let data = TXT::from_bytes(strings.iter().map(Vec::as_slice).collect());
            let mut r = Record::from_rdata(instance.clone(), 0, RData::TXT(data));
            r.set_dns_class(DNSClass::IN);
            r
        }
    };
    m.add_pre_requisite(pre);
}

/// The TXT strings update `m` writes at `instance`: the condition of the
/// next update once this one went through.
pub fn written_txt(m: &Message, instance: &Name) -> Option<Vec<Vec<u8>>> {
    m.updates().iter().find_map(|r| match r.data() {
        RData::TXT(t) if r.name() == instance && r.dns_class() == DNSClass::IN => {
            Some(t.txt_data().iter().map(|s| s.to_vec()).collect())
        }
        _ => None,
    })
}
