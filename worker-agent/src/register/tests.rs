//! Unit tests of the registration messages and the sweep rules.

use super::tsig::tests::KEYGEN;
use super::*;

#[test]
fn registration_urls_name_a_server_and_a_zone() {
    let t: RegisterTarget = "dns://10.0.0.53:5300/rlx.example.org".parse().unwrap();
    assert_eq!(
        (t.server.as_str(), t.zone.to_string().as_str()),
        ("10.0.0.53:5300", "rlx.example.org.")
    );
    let t: RegisterTarget = "dns://[fd00::53]:53/lab.test.".parse().unwrap();
    assert_eq!(t.server, "[fd00::53]:53");
    assert!("http://x/y"
        .parse::<RegisterTarget>()
        .unwrap_err()
        .contains("dns://SERVER/ZONE"));
    assert!("dns://10.0.0.53"
        .parse::<RegisterTarget>()
        .unwrap_err()
        .contains("no zone"));
    assert!("dns://10.0.0.53/".parse::<RegisterTarget>().is_err());
}

fn reg() -> Registration {
    let zone = parse_domain("lab.test").unwrap();
    Registration {
        target: RegisterTarget {
            server: "10.0.0.53".into(),
            zone: zone.clone(),
        },
        server: "10.0.0.53:53".parse().unwrap(),
        key: parse_key_file(KEYGEN).unwrap(),
        instance: service_name(&zone)
            .prepend_label("box 1".as_bytes())
            .unwrap(),
        base: "box 1".into(),
        claim: None,
        host: zone.prepend_label("box-1").unwrap(),
        port: 9100,
        addrs: vec!["10.1.0.5".parse().unwrap()],
        lease: Duration::from_secs(180),
    }
}

/// A browse of `lab.test` holding `live` (instance label, TXT strings)
/// and `expired` (label, TXT strings).
fn zone_with(live: &[(&str, Vec<Vec<u8>>)], expired: &[(&str, Vec<Vec<u8>>)]) -> ZoneBrowse {
    let zone = parse_domain("lab.test").unwrap();
    let svc = service_name(&zone);
    let name = |l: &str| svc.prepend_label(l.as_bytes()).unwrap();
    ZoneBrowse {
        began: std::time::Instant::now(),
        service: svc.clone(),
        server: "10.0.0.53:53".parse().unwrap(),
        instances: live
            .iter()
            .map(|(l, t)| rlx_proto::dnssd::ZoneInstance {
                name: name(l).to_lowercase(),
                registration: Ok(rlx_proto::dnssd::Registration {
                    target: zone.prepend_label("h").unwrap(),
                    port: 9100,
                    txt: t.clone(),
                    addrs: vec![],
                }),
                query_error: None,
            })
            .collect(),
        strays: vec![],
        expired: expired
            .iter()
            .map(|(l, t)| Expired {
                instance: name(l),
                targets: vec![],
                txt: t.clone(),
                expires: 1,
            })
            .collect(),
        stats: Default::default(),
    }
}

/// The TXT strings of a registration by node `id`.
fn txt_of(id: &str) -> Vec<Vec<u8>> {
    let caps = NodeCaps {
        id: id.into(),
        hostname: "twin".into(),
        ..Default::default()
    };
    reg()
        .txt(&caps, 99)
        .unwrap()
        .txt_data()
        .iter()
        .map(|s| s.to_vec())
        .collect()
}

/// Guards against clones sharing one instance name: two machines with one host
/// name and no `--name` wrote one instance, and the second replaced the first.
/// The name another node id holds is skipped; ours, an expired one and a free
/// one are taken, each on its own condition.
#[test]
fn an_instance_name_another_machine_holds_is_not_taken() {
    let svc = service_name(&parse_domain("lab.test").unwrap());
    let name = |l: &str| svc.prepend_label(l.as_bytes()).unwrap();
    let b = zone_with(
        &[
            ("twin", txt_of("aa00000000000001")),
            ("mine", txt_of("bb00000000000002")),
        ],
        &[("old", txt_of("cc00000000000003"))],
    );
    let id = "bb00000000000002";
    assert_eq!(
        claim::holder(&b, &name("twin"), id),
        claim::Holder::Other("aa00000000000001".into())
    );
    assert_eq!(
        claim::holder(&b, &name("TWIN"), id),
        claim::Holder::Other("aa00000000000001".into()),
        "names compare without case"
    );
    assert!(matches!(
        claim::holder(&b, &name("mine"), id),
        claim::Holder::Ours(_)
    ));
    assert!(matches!(
        claim::holder(&b, &name("old"), id),
        claim::Holder::Expired(_)
    ));
    assert_eq!(
        claim::holder(&b, &name("twin (2)"), id),
        claim::Holder::Free
    );
    assert_eq!(claim::candidate("twin", 1), "twin");
    assert_eq!(claim::candidate("twin", 2), "twin (2)");
    let long = "é".repeat(40);
    let c = claim::candidate(&long, 12);
    assert!(c.len() <= 63 && c.ends_with(" (12)"), "{c}");
}

/// Every update is sent on a condition: a free name must still be free,
/// a held one must still hold what was seen (or last written); and the
/// next update's condition is what this one wrote.
#[test]
fn updates_carry_the_prerequisite_of_what_the_agent_saw_at_its_name() {
    let caps = NodeCaps {
        id: "bb00000000000002".into(),
        ..Default::default()
    };
    let mut r = reg();
    r.claim = Some(claim::Claim::Free);
    let m = r.register_message(&caps).unwrap();
    let pre: Vec<(RecordType, DNSClass)> = m
        .prerequisites()
        .iter()
        .map(|p| (p.record_type(), p.dns_class()))
        .collect();
    assert_eq!(
        pre,
        vec![(RecordType::ANY, DNSClass::NONE)],
        "name not in use"
    );
    let written = claim::written_txt(&m, &r.instance).expect("the TXT written");
    r.claim = Some(claim::Claim::Txt(written.clone()));
    let m = r.register_message(&caps).unwrap();
    let txt = m.prerequisites().iter().find_map(|p| match p.data() {
        RData::TXT(t) if p.dns_class() == DNSClass::IN => {
            Some(t.txt_data().iter().map(|s| s.to_vec()).collect::<Vec<_>>())
        }
        _ => None,
    });
    assert_eq!(txt, Some(written), "the TXT RRset as last written");
    let d = r.delete_message();
    assert_eq!(d.prerequisites().len(), 1, "a delete only of what is ours");
}

#[test]
fn a_registration_replaces_srv_txt_and_addresses_adds_the_ptr_and_asks_for_a_lease() {
    let caps = NodeCaps {
        cores: 4,
        ram_total: 1000,
        ..Default::default()
    };
    let m = reg().register_message(&caps).unwrap();
    let ups: Vec<(String, RecordType, DNSClass)> = m
        .updates()
        .iter()
        .map(|r| (r.name().to_string(), r.record_type(), r.dns_class()))
        .collect();
    assert!(ups.contains(&("_rlx._tcp.lab.test.".into(), RecordType::PTR, DNSClass::IN)));
    assert!(
        ups.contains(&(
            "box\\0401._rlx._tcp.lab.test.".into(),
            RecordType::SRV,
            DNSClass::ANY
        )),
        "{ups:?}"
    );
    assert!(ups.contains(&("box-1.lab.test.".into(), RecordType::A, DNSClass::IN)));
    let txt = m.updates().iter().find_map(|r| match r.data() {
        RData::TXT(t) => Some(t.to_string()),
        _ => None,
    });
    assert!(txt.unwrap().contains("expires="));
    let opt = m.extensions().as_ref().unwrap().options();
    assert!(opt
        .as_ref()
        .iter()
        .any(|(c, _)| u16::from(*c) == UPDATE_LEASE_OPTION));
    assert!(m
        .updates()
        .iter()
        .all(|r| r.ttl() == RECORD_TTL || r.dns_class() == DNSClass::ANY));
}

#[test]
fn a_deletion_removes_only_this_instances_ptr() {
    let m = reg().delete_message();
    let ptr = m
        .updates()
        .iter()
        .find(|r| r.record_type() == RecordType::PTR)
        .unwrap();
    assert_eq!(
        ptr.dns_class(),
        DNSClass::NONE,
        "delete one PTR rdata, not the shared RRset"
    );
}

/// Guards against a fast clock deleting live registrations: with the
/// old rule (lease over by more than [`CLOCK_SKEW`]) and a 300 s fudge,
/// an agent a few minutes fast swept agents that were alive.
#[test]
fn a_sweeper_as_fast_as_the_server_allows_never_deletes_a_live_registration() {
    let lease = DEFAULT_LEASE.as_secs();
    let fudge = u64::from(TSIG_FUDGE);
    let t = 1_000_000;
    // The other agent's clock is as slow as the server accepts; its last
    // refresh, at true time t, is almost a whole lease old.
    let expires = t - fudge + lease;
    // The sweeper's clock is as fast as the server accepts.
    let sweeper_now = t + lease - 1 + fudge;
    assert!(
        !sweep_due(expires, sweeper_now),
        "a live registration was due for deletion"
    );
    // A registration a clock difference plus the grace past its end is.
    assert!(sweep_due(expires, expires + SWEEP_GRACE.as_secs() + 1));
    assert!(
        fudge < lease,
        "the TSIG fudge ({fudge} s) must stay below the default lease ({lease} s)"
    );
}

fn expired() -> Expired {
    let zone = parse_domain("lab.test").unwrap();
    Expired {
        instance: service_name(&zone).prepend_label("gone").unwrap(),
        targets: vec![
            zone.prepend_label("gone-00aa11").unwrap(),
            zone.prepend_label("Shared").unwrap(),
        ],
        txt: vec![b"txtvers=1".to_vec(), b"expires=12345".to_vec()],
        expires: 12345,
    }
}

/// Guards against a racing sweep deleting a re-registered agent: the
/// sweep's deletes had no prerequisite, so they applied to whatever the
/// instance held by then.
#[test]
fn a_sweep_deletes_only_on_condition_that_the_expired_txt_is_unchanged() {
    let gone = expired();
    let m = reg().sweep_message(&gone, &HashSet::new());
    let pre = m.prerequisites();
    assert_eq!(pre.len(), 1, "{pre:?}");
    assert_eq!(
        (
            pre[0].name(),
            pre[0].record_type(),
            pre[0].dns_class(),
            pre[0].ttl()
        ),
        (&gone.instance, RecordType::TXT, DNSClass::IN, 0),
        "RFC 2136 §2.4.2: RRset exists (value dependent) is class IN, TTL 0"
    );
    let RData::TXT(t) = pre[0].data() else {
        panic!("{:?}", pre[0])
    };
    let strings: Vec<Vec<u8>> = t.txt_data().iter().map(|s| s.to_vec()).collect();
    assert_eq!(
        strings, gone.txt,
        "the exact expired TXT, expires= included"
    );
    let ptr = m
        .updates()
        .iter()
        .find(|r| r.record_type() == RecordType::PTR)
        .unwrap();
    assert_eq!(ptr.dns_class(), DNSClass::NONE);
}

#[test]
fn a_sweep_keeps_the_addresses_a_live_instance_points_to() {
    let gone = expired();
    let live: HashSet<Name> = [parse_domain("shared.lab.test").unwrap()].into();
    let m = reg().sweep_message(&gone, &live);
    let owners: HashSet<String> = m
        .updates()
        .iter()
        .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
        .map(|r| r.name().to_string())
        .collect();
    assert_eq!(owners, ["gone-00aa11.lab.test.".to_string()].into());
}
