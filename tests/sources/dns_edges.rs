//! Edges of the DNS registration (`rlx-agent --register`) against a real
//! BIND (`named`, started in a lab namespace, [`kit::bind`]):
//!
//! - two machines with one host name both stay resolvable (the host label
//!   carries the node id: `rlx_agent::naming::unique_host_label`);
//! - a sweep that raced a re-registration deletes nothing (its UPDATE has
//!   an RFC 2136 prerequisite on the expired TXT record);
//! - two machines with one host name and no `--name` register one instance
//!   each (`twin`, `twin (2)`: `rlx_agent::register::claim`), and the one
//!   that stops deletes only its own.
//!
//! The second test sends the agent's own messages
//! (`rlx_agent::register::Registration`) from a thread of this process that
//! entered a lab host's network namespace (`setns`), so that the browse,
//! the re-registration and the delete happen in the racing order on demand.
//!
//! Needs `named` and `tsig-keygen` (Debian: bind9, bind9-utils).
// Joins a lab namespace with setns(2): Linux only, like the lab itself.
#![cfg(target_os = "linux")]

use hickory_proto::op::ResponseCode;
use rlx_agent::register::{
    live_targets, RegisterOptions, RegisterTarget, Registration, UpdateError, SWEEP_GRACE,
};
use rlx_lab::kit::bind::{start_named, Named, UP, ZONE};
use rlx_lab::kit::netns::in_netns;
use rlx_lab::kit::peer::{self, Peer};
use rlx_lab::kit::{agent_bin, discover_bin, require_lab, Proc};
use rlx_lab::Lab;
use rlx_proto::caps::NodeCaps;
use rlx_proto::dnssd::{self, ZoneBrowse, ZoneOptions};
use rlx_proto::service::unix_now;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Caps of a machine called `hostname` with node id `id`.
fn caps_json(id: &str, hostname: &str) -> String {
    format!(
        r#"{{"id":"{id}","hostname":"{hostname}","os":"linux","arch":"x86_64","cores":8,
           "ram_total":68719476736,"ram_avail":60000000000}}"#
    )
}

/// An agent in host `host` with caps `caps`, instance `name`, registering.
fn start_agent(lab: &Lab, host: usize, caps: &str, name: &str, named: &Named, dir: &Path) -> Proc {
    registering_agent(lab, host, caps, Some(name), named, dir)
}

/// An agent in host `host` with caps `caps`, registering as `name`, or as
/// its host name when `None` (no `--name`).
fn registering_agent(
    lab: &Lab,
    host: usize,
    caps: &str,
    name: Option<&str>,
    named: &Named,
    dir: &Path,
) -> Proc {
    let file = dir.join(format!("{}-{host}.json", name.unwrap_or("unnamed")));
    std::fs::write(&file, caps).unwrap();
    let mut cmd = Command::new(agent_bin());
    cmd.arg("--caps-file").arg(&file);
    if let Some(n) = name {
        cmd.args(["--name", n]);
    }
    cmd.args(["--register", &format!("dns://{}/{ZONE}", named.ip)])
        .arg("--tsig-key")
        .arg(&named.key)
        .env("RUST_LOG", "info");
    Proc::spawn(lab, host, cmd)
}

/// `rlx-discover browse --no-mdns` of the zone from host `host`: the JSON.
fn browse(lab: &Lab, host: usize, named: &Named) -> Value {
    let out = lab
        .command(host, discover_bin())
        .args(["browse", "--json", "--no-mdns", "--domain", ZONE])
        .args(["--dns-server", &named.ip])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "rlx-discover browse printed no JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// (id, addr) of each node a browse admitted, sorted.
fn ids_and_addrs(v: &Value) -> Vec<(String, String)> {
    let mut n: Vec<(String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap_or_default().to_string(),
                n["addr"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    n.sort();
    n
}

/// Two machines called `twin` (same short host name, different node ids)
/// register in one zone. Guards against the host label being the host name
/// alone: then each agent replaced the other's `A` record at
/// `twin.lab.test.`, and both instances led to one machine.
#[test]
fn two_agents_with_one_host_name_both_stay_resolvable() {
    if !peer::require(
        "two_agents_with_one_host_name_both_stay_resolvable",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    // h0 named, h1 coordinator, h2 and h3 the twins.
    let lab = labs.hosts(4);
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let (id_a, id_b) = ("aa00000000000001", "bb00000000000002");
    let a = start_agent(
        &lab,
        2,
        &caps_json(id_a, "twin"),
        "twin-a",
        &named,
        dir.path(),
    );
    a.expect_output("registered in DNS", UP);
    let b = start_agent(
        &lab,
        3,
        &caps_json(id_b, "twin"),
        "twin-b",
        &named,
        dir.path(),
    );
    b.expect_output("registered in DNS", UP);
    // b registered after a: with one host label, b's address replaced a's.
    let want = vec![
        (id_a.to_string(), format!("{}:9100", lab.host(2).ip)),
        (id_b.to_string(), format!("{}:9100", lab.host(3).ip)),
    ];
    let v = browse(&lab, 1, &named);
    assert_eq!(ids_and_addrs(&v), want, "{v:#}");
}

/// Two machines cloned from one image (host name `twin`, no `--name`, two node
/// ids) register in one zone. Guards against clones sharing one instance: both
/// wrote the instance `twin`, the second replaced the first, and coordinators
/// found one machine where two ran.
#[test]
fn two_machines_with_one_host_name_and_no_name_register_one_instance_each() {
    if !peer::require(
        "two_machines_with_one_host_name_and_no_name_register_one_instance_each",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(4);
    let named = start_named(&lab, 0);
    let dir = tempfile::tempdir().unwrap();
    let (id_a, id_b) = ("aa00000000000001", "bb00000000000002");
    let a = registering_agent(&lab, 2, &caps_json(id_a, "twin"), None, &named, dir.path());
    a.expect_output("registered in DNS", UP);
    let b = registering_agent(&lab, 3, &caps_json(id_b, "twin"), None, &named, dir.path());
    b.expect_output("registered in DNS", UP);
    b.expect_output("registering in DNS as \"twin (2)\"", UP);
    let both = vec![
        (id_a.to_string(), format!("{}:9100", lab.host(2).ip)),
        (id_b.to_string(), format!("{}:9100", lab.host(3).ip)),
    ];
    let v = browse(&lab, 1, &named);
    assert_eq!(ids_and_addrs(&v), both, "one instance each: {v:#}");
    // The second stops: it deletes its own instance, never the first's.
    assert!(b.signal(nix::sys::signal::Signal::SIGTERM));
    b.expect_output("DNS registration deleted", UP);
    let v = browse(&lab, 1, &named);
    assert_eq!(ids_and_addrs(&v), both[..1].to_vec(), "{v:#}");
}

fn caps(id: &str, hostname: &str) -> NodeCaps {
    NodeCaps::from_json(&caps_json(id, hostname)).unwrap()
}

async fn prepare(named_ip: &str, key: &Path, name: &str, caps: &NodeCaps) -> Registration {
    let target: RegisterTarget = format!("dns://{named_ip}/{ZONE}").parse().unwrap();
    Registration::prepare(
        &RegisterOptions {
            target,
            key_file: key.to_path_buf(),
            name: Some(name.into()),
            port: 9100,
            lease: Duration::from_secs(180),
            addrs: vec![],
        },
        caps,
    )
    .await
    .unwrap()
}

async fn zone(named_ip: &str) -> ZoneBrowse {
    dnssd::browse(&ZoneOptions {
        domain: rlx_proto::service::parse_domain(ZONE).unwrap(),
        server: Some(named_ip.to_string()),
        zone_transfer: false,
        deadline: Duration::from_secs(10),
    })
    .await
    .unwrap()
}

/// Whether a browse holds `name` as a live instance.
fn live(b: &ZoneBrowse, name: &str) -> bool {
    b.instances
        .iter()
        .any(|i| i.registration.is_ok() && dnssd::label_of(&i.name) == name)
}

/// A sweeper browses and finds `racer` expired; `racer` re-registers; the
/// sweeper's delete arrives. Guards against sweep deletes without a
/// prerequisite: the delete then removed the fresh registration, and the
/// racer vanished from the zone until its next refresh. The control at the
/// end: with nobody racing, the same kind of delete does apply.
#[test]
fn a_racing_sweep_does_not_delete_a_re_registered_agent() {
    if !peer::require(
        "a_racing_sweep_does_not_delete_a_re_registered_agent",
        &[Peer::Bind],
    ) {
        return;
    }
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(3);
    let named = start_named(&lab, 0);
    let (ip, key) = (named.ip.clone(), named.key.clone());
    // On a thread inside host 1's namespace, so that this process's own
    // sockets live in the lab, as a lab process's would.
    in_netns(&lab.host(1).ns, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let racer_caps = caps("cc00000000000003", "racer");
            let racer = prepare(&ip, &key, "racer", &racer_caps).await;
            let sweeper = prepare(&ip, &key, "sweeper", &caps("dd00000000000004", "sweeper")).await;
            let long_ago = unix_now() - SWEEP_GRACE.as_secs() - 100;
            let expired_registration =
                || racer.register_message_until(&racer_caps, long_ago).unwrap();
            racer.send(expired_registration()).await.unwrap();
            sweeper
                .send(
                    sweeper
                        .register_message(&caps("dd00000000000004", "sweeper"))
                        .unwrap(),
                )
                .await
                .unwrap();

            // The sweeper's browse: racer is expired, long enough to delete.
            let seen = zone(&ip).await;
            let gone = seen
                .expired
                .iter()
                .find(|e| dnssd::label_of(&e.instance) == "racer")
                .unwrap_or_else(|| panic!("racer not expired in {:?}", seen.expired))
                .clone();
            assert!(rlx_agent::register::sweep_due(gone.expires, unix_now()));
            let delete = sweeper.sweep_message(&gone, &live_targets(&seen));

            // The racer comes back before the delete arrives.
            racer
                .send(racer.register_message(&racer_caps).unwrap())
                .await
                .unwrap();
            match sweeper.send(delete).await {
                Err(UpdateError::Refused {
                    rcode: ResponseCode::NXRRSet,
                    ..
                }) => {}
                other => {
                    panic!("the stale delete must fail its prerequisite (NXRRSET), got {other:?}")
                }
            }
            let after = zone(&ip).await;
            assert!(
                live(&after, "racer"),
                "the re-registered racer must survive the racing sweep: {:?}",
                after.instances
            );
            assert!(live(&after, "sweeper"));

            // Control: nobody races, the delete applies.
            racer.send(expired_registration()).await.unwrap();
            let seen = zone(&ip).await;
            let gone = seen
                .expired
                .iter()
                .find(|e| dnssd::label_of(&e.instance) == "racer")
                .unwrap()
                .clone();
            sweeper
                .send(sweeper.sweep_message(&gone, &live_targets(&seen)))
                .await
                .unwrap();
            let after = zone(&ip).await;
            assert!(
                !after
                    .instances
                    .iter()
                    .any(|i| dnssd::label_of(&i.name) == "racer")
                    && after.expired.is_empty(),
                "an unchanged expired registration is deleted: {:?} {:?}",
                after.instances,
                after.expired
            );
            assert!(live(&after, "sweeper"), "the sweeper's own records stay");
        });
    })
    .unwrap_or_else(|e| panic!("{e}"));
    drop(named);
}
