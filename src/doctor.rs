//! **`rlx-discover doctor`: why this box finds fewer agents than it
//! should** — a list of checks of the things discovery depends on, each
//! `ok`, `warn`, `fail` or `skip` with what was seen and what to do, the way
//! `brew doctor` or `flutter doctor` do it.
//!
//! ```text
//! ok    interfaces       eth0 (10.1.1.3/16) is used; docker0 skipped: virtual
//! ok    multicast route  224.0.0.251 goes out eth0 (224.0.0.0/4)
//! fail  firewall         nftables inet f input (hook input) drops udp 5353
//!                        fix: let mDNS in from the local link: ...
//! warn  mdns query       nobody answered a query for _rlx._tcp.local. on eth0 in 1100 ms
//! ```
//!
//! The checks, in order: the interfaces the browse would use (and why the
//! others are skipped); the route a query to 224.0.0.251 takes; host
//! firewall rules that drop UDP 5353 or the agent port;
//! whether this host can join the mDNS groups (224.0.0.251, ff02::fb) on
//! each interface; whether a query is answered, and by whom; whether the
//! agents heard answer the handshake; how far their clocks are from this
//! one's (one more handshake each).
//!
//! The query, the group joins and the handshakes send packets, so they pass
//! the network-namespace guard like every browse: under `RLX_NETNS_GUARD=1`
//! in the machine's own namespace they are skipped with the guard's reason,
//! and only the read-only checks run.

mod clock;
mod kernel;

pub use rlx_net::check::{Check, Status};
use rlx_net::firewall;

use crate::config::DiscoverSection;
use crate::discover::run_sources;
use crate::escape::{escape_line, untrusted};
use crate::progress::Silent;
use crate::sighting::Source;
use rlx_net::iface::{self, Iface};
use rlx_proto::service::MDNS_SERVICE_TYPE;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

/// Every check, in the order they ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    /// The checks.
    pub checks: Vec<Check>,
    /// No check failed.
    pub healthy: bool,
}

impl Diagnosis {
    fn of(checks: Vec<Check>) -> Diagnosis {
        let healthy = !checks.iter().any(|c| c.status == Status::Fail);
        Diagnosis { checks, healthy }
    }
}

/// Runs every check for the browse `d` describes (its interfaces, port,
/// cluster, key and `browse_ms`).
pub async fn diagnose(d: &DiscoverSection) -> Diagnosis {
    let mut checks = Vec::new();
    let chosen = match interfaces(d) {
        Ok((c, check)) => {
            checks.push(check);
            c
        }
        Err(check) => {
            checks.push(check);
            Vec::new()
        }
    };
    checks.push(multicast_route(&chosen));
    checks.push(firewall_check(d.agent_port, d.port).await);
    match rlx_net::netguard::ensure_private_netns("rlx-discover doctor's mDNS checks") {
        Err(e) => {
            checks.push(Check::new("groups", Status::Skip, format!("not run: {e}")));
            for check in ["mdns query", "handshake", "clock"] {
                checks.push(Check::new(
                    check,
                    Status::Skip,
                    "not run: the guard (see groups)",
                ));
            }
        }
        Ok(()) if chosen.is_empty() => {
            for check in ["groups", "mdns query", "handshake", "clock"] {
                checks.push(Check::new(
                    check,
                    Status::Skip,
                    "not run: no interface to use",
                ));
            }
        }
        Ok(()) => {
            checks.push(groups(&chosen));
            let (found, heard) = query(d, &chosen).await;
            checks.extend(found);
            checks.push(clock_check(d, &heard).await);
        }
    }
    Diagnosis::of(checks)
}

/// The interfaces the browse would use, and why the others are left out.
fn interfaces(d: &DiscoverSection) -> Result<(Vec<Iface>, Check), Check> {
    let all = iface::all_interfaces().map_err(|e| {
        Check::new(
            "interfaces",
            Status::Fail,
            format!("cannot list interfaces: {e}"),
        )
    })?;
    let picked = if d.interfaces.is_empty() {
        Ok(iface::filter_default(all.clone()))
    } else {
        iface::select_from(all.clone(), &d.interfaces)
    };
    let chosen = picked.map_err(|e| {
        Check::new("interfaces", Status::Fail, e.to_string())
            .fix("name an interface that exists and is up: `--interface NAME` (see `ip -br addr`)")
    })?;
    let used: Vec<String> = chosen
        .iter()
        .map(|i| {
            let addrs: Vec<String> = i.addrs.iter().map(|a| a.to_string()).collect();
            format!("{} ({})", i.name, addrs.join(", "))
        })
        .collect();
    let skipped: Vec<String> = all
        .iter()
        .filter(|i| !chosen.iter().any(|c| c.name == i.name))
        .map(|i| match i.default_exclusion() {
            Some(why) => format!("{}: {why}", i.name),
            None => format!("{}: not named by --interface/interfaces", i.name),
        })
        .collect();
    let mut detail = if used.is_empty() {
        "no interface is used".to_string()
    } else {
        format!("used: {}", used.join("; "))
    };
    if !skipped.is_empty() {
        detail.push_str(&format!("; skipped: {}", skipped.join("; ")));
    }
    if chosen.is_empty() {
        return Err(Check::new("interfaces", Status::Fail, detail).fix(
            "bring an Ethernet or Wi-Fi interface up with an address, or name one: \
             `--interface NAME` / `interfaces = [\"NAME\"]`",
        ));
    }
    Ok((chosen.clone(), Check::new("interfaces", Status::Ok, detail)))
}

/// The route a query to 224.0.0.251 takes when the sender names no
/// interface (rlx-discover names each one; other tools, avahi-browse or
/// `dns-sd`, may not).
fn multicast_route(chosen: &[Iface]) -> Check {
    let Ok(text) = std::fs::read_to_string("/proc/net/route") else {
        return Check::new(
            "multicast route",
            Status::Skip,
            "not read: /proc/net/route is Linux's (on a Mac: `netstat -rn | grep 224`)",
        );
    };
    let routes = kernel::routes(&text);
    match kernel::route_for(&routes, kernel::MDNS_V4) {
        None => Check::new(
            "multicast route",
            Status::Warn,
            "no route covers 224.0.0.251: tools that do not name an interface cannot send mDNS",
        )
        .fix(format!(
            "add one on the LAN interface: `ip route add 224.0.0.0/4 dev {}`",
            chosen.first().map(|i| i.name.as_str()).unwrap_or("eth0")
        )),
        Some(r) if !chosen.is_empty() && !chosen.iter().any(|i| i.name == r.iface) => Check::new(
            "multicast route",
            Status::Warn,
            format!(
                "224.0.0.251 goes out {} ({}/{}), which discovery does not use",
                r.iface, r.dest, r.prefix
            ),
        )
        .fix(format!(
            "rlx-discover sends on each interface it uses, so it is not affected; for other \
                 mDNS tools: `ip route add 224.0.0.0/4 dev {}`",
            chosen[0].name
        )),
        Some(r) => Check::new(
            "multicast route",
            Status::Ok,
            format!("224.0.0.251 goes out {} ({}/{})", r.iface, r.dest, r.prefix),
        ),
    }
}

/// The firewall check for both TCP ports: the agents' (the handshake:
/// discovery needs it) and the workers' (the runtime needs it).
async fn firewall_check(port: u16, worker_port: u16) -> Check {
    let rules = firewall::rulesets().await;
    let f = firewall::read_both(&rules, port, worker_port);
    let full: Vec<&firewall::Blocker> = f.blockers.iter().filter(|b| !b.partial).collect();
    let partial: Vec<&firewall::Blocker> = f.blockers.iter().filter(|b| b.partial).collect();
    let describe = |bs: &[&firewall::Blocker]| {
        bs.iter()
            .map(|b| format!("{} stops {} ({})", b.chain, b.what, b.rule))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let fix = format!(
        "let mDNS through on the local link (UDP 5353, both ways), the handshake out to the \
         agents (TCP {port}) and the runtime out to the workers (TCP {worker_port}), e.g. `nft \
         insert rule inet filter input udp dport 5353 accept`; each worker box needs UDP 5353 \
         from the link and TCP {port} (its agent) and {worker_port} (its RLX worker) from the \
         coordinators"
    );
    if !full.is_empty() {
        return Check::new("firewall", Status::Fail, describe(&full)).fix(fix);
    }
    if !partial.is_empty() {
        return Check::new(
            "firewall",
            Status::Warn,
            format!("some traffic is stopped: {}", describe(&partial)),
        )
        .fix(fix);
    }
    if f.read.is_empty() {
        return Check::new(
            "firewall",
            Status::Skip,
            format!("could not read any ruleset: {}", f.unreadable.join("; ")),
        );
    }
    let mut detail = format!(
        "nothing in {} stops udp 5353, tcp {port} (agents) or tcp {worker_port} (workers)",
        f.read.join(" or ")
    );
    if !f.unreadable.is_empty() {
        detail.push_str(&format!(" (not read: {})", f.unreadable.join("; ")));
    }
    Check::new("firewall", Status::Ok, detail)
}

/// Joins 224.0.0.251 (and ff02::fb where the interface has IPv6) on each
/// interface and reads the kernel's membership tables back: what a browse
/// does first, checked on its own.
fn groups(chosen: &[Iface]) -> Check {
    let mut bad = Vec::new();
    let mut joined = Vec::new();
    let mut sockets = Vec::new();
    for i in chosen {
        let v4 = i.addrs.iter().find_map(|a| match a.addr() {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        });
        if let Some(v4) = v4 {
            match join_v4(v4) {
                Ok(s) => sockets.push(s),
                Err(e) => bad.push(format!("{}: cannot join 224.0.0.251 ({e})", i.name)),
            }
        }
        if i.addrs.iter().any(|a| a.addr().is_ipv6()) {
            match join_v6(i.index) {
                Ok(s) => sockets.push(s),
                Err(e) => bad.push(format!("{}: cannot join ff02::fb ({e})", i.name)),
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string("/proc/net/igmp") {
        let members = kernel::igmp_members(&text, kernel::MDNS_V4);
        let v6 = std::fs::read_to_string("/proc/net/igmp6")
            .map(|t| kernel::igmp6_members(&t))
            .unwrap_or_default();
        for i in chosen {
            let has_v4 = i.addrs.iter().any(|a| a.addr().is_ipv4());
            if has_v4 && !members.contains(&i.name) {
                bad.push(format!(
                    "{}: joined, but the kernel lists no 224.0.0.251 membership",
                    i.name
                ));
            } else if has_v4 {
                joined.push(format!("{} 224.0.0.251", i.name));
            }
            if v6.contains(&i.name) {
                joined.push(format!("{} ff02::fb", i.name));
            }
        }
    } else {
        joined.extend(
            chosen
                .iter()
                .map(|i| format!("{} (membership not readable here)", i.name)),
        );
    }
    drop(sockets);
    if bad.is_empty() {
        Check::new(
            "groups",
            Status::Ok,
            format!("joined: {}", joined.join(", ")),
        )
    } else {
        Check::new("groups", Status::Fail, bad.join("; ")).fix(
            "the interface must be up with the MULTICAST flag (`ip link set IF multicast on`); \
             in a container, use the host network",
        )
    }
}

fn join_v4(local: Ipv4Addr) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)).into())?;
    s.join_multicast_v4(&kernel::MDNS_V4, &local)?;
    Ok(s)
}

fn join_v6(index: u32) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_only_v6(true)?;
    s.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)).into())?;
    s.join_multicast_v6(&Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb), index)?;
    Ok(s)
}

/// An agent the test browse admitted: its name, address and id.
type Admitted = (String, SocketAddr, Option<String>);

/// The `clock` check of the agents the browse admitted.
async fn clock_check(d: &DiscoverSection, agents: &[Admitted]) -> Check {
    let rules = match crate::admit::Rules::from_section(d) {
        Ok(r) => r,
        Err(e) => return Check::new("clock", Status::Skip, format!("not read: {e:#}")),
    };
    let readings = clock::read(agents, &rules).await;
    clock::judge(&readings, d.dns_sd.is_some())
}

/// One browse as `browse` runs it (mDNS only), read as two checks: who
/// answered the query, and whether those heard answered the handshake;
/// with the agents admitted, for the clock check.
async fn query(d: &DiscoverSection, chosen: &[Iface]) -> (Vec<Check>, Vec<Admitted>) {
    let mut s = d.clone();
    s.mdns = true;
    s.ssh_hosts.clear();
    s.subnet = None;
    s.dns_sd = None;
    s.interfaces = chosen.iter().map(|i| i.name.clone()).collect();
    let t0 = Instant::now();
    let found = match run_sources(&s, t0, &Silent).await {
        Ok(f) => f,
        Err(e) => {
            let not_run = |c| Check::new(c, Status::Skip, "not run: the browse did not start");
            let checks = vec![
                Check::new("mdns query", Status::Fail, format!("{e:#}")),
                not_run("handshake"),
            ];
            return (checks, Vec::new());
        }
    };
    let ms = t0.elapsed().as_millis();
    let names: Vec<String> = chosen.iter().map(|i| i.name.clone()).collect();
    let admitted: Vec<String> = found
        .sightings
        .iter()
        .filter(|x| x.source == Source::Mdns)
        .map(|x| format!("{} ({})", untrusted(&x.host), x.addr))
        .collect();
    let agents: Vec<Admitted> = found
        .sightings
        .iter()
        .filter(|x| x.source == Source::Mdns)
        .filter_map(|x| {
            Some((
                x.host.clone(),
                x.agent_endpoint()?,
                x.id().map(str::to_string),
            ))
        })
        .collect();
    let refused: Vec<String> = found
        .problems
        .iter()
        .filter(|p| p.source == Source::Mdns)
        .map(|p| format!("{}: {}", untrusted(&p.host), escape_line(&p.reason)))
        .collect();
    let heard = admitted.len() + refused.len();
    let q = if heard == 0 {
        Check::new(
            "mdns query",
            Status::Warn,
            format!(
                "nobody answered a query for {MDNS_SERVICE_TYPE} on {} in {ms} ms",
                names.join(", ")
            ),
        )
        .fix(
            "start rlx-agent on a worker of this LAN; if one runs, multicast does not get \
             through: Wi-Fi client isolation, IGMP snooping without a querier, or a firewall \
             on either side (see the firewall check here, and run `rlx-discover doctor` on the \
             worker too); otherwise use ssh_hosts or subnet",
        )
    } else {
        let mut who: Vec<String> = admitted.clone();
        who.extend(
            found
                .problems
                .iter()
                .filter(|p| p.source == Source::Mdns)
                .map(|p| p.host.clone()),
        );
        Check::new(
            "mdns query",
            Status::Ok,
            format!(
                "{heard} answered on {} in {ms} ms: {}",
                names.join(", "),
                who.join(", ")
            ),
        )
    };
    let h = if heard == 0 {
        Check::new("handshake", Status::Skip, "no agent heard, none to ask")
    } else if refused.is_empty() {
        Check::new(
            "handshake",
            Status::Ok,
            format!("every agent heard answered: {}", admitted.join(", ")),
        )
    } else {
        let status = if admitted.is_empty() {
            Status::Fail
        } else {
            Status::Warn
        };
        Check::new(
            "handshake",
            status,
            format!(
                "{} of {heard} refused or unreachable: {}",
                refused.len(),
                refused.join("; ")
            ),
        )
        .fix(format!(
            "an unreachable agent: open TCP {} (the agent's port; its worker's is {}) on it \
             (and between the two hosts); a refused one: the reason says which cluster name or \
             key it holds",
            d.agent_port, d.port
        ))
    };
    (vec![q, h], agents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_makes_the_diagnosis_unhealthy_and_a_warning_does_not() {
        let ok = Check::new("a", Status::Ok, "fine");
        let warn = Check::new("b", Status::Warn, "hm").fix("look");
        let fail = Check::new("c", Status::Fail, "broken").fix("mend");
        assert!(Diagnosis::of(vec![ok.clone(), warn.clone()]).healthy);
        assert!(!Diagnosis::of(vec![ok, warn, fail]).healthy);
    }

    #[test]
    fn checks_serialize_with_their_documented_fields() {
        let d = Diagnosis::of(vec![
            Check::new("firewall", Status::Fail, "x").fix("y"),
            Check::new("clock", Status::Skip, "z"),
        ]);
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["healthy"], false);
        assert_eq!(v["checks"][0]["status"], "fail");
        assert_eq!(v["checks"][0]["fix"], "y");
        assert!(v["checks"][1].get("fix").is_none());
    }
}
