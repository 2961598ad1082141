//! What one failed dial means, in words that name the box, the address
//! and the fix: the probe's outcome read together with the two other
//! things the check tried (whether the coordinator reached the address,
//! and whether the dialled box reaches the dialling one).

use rlx_net::check::{Check, Status};
use rlx_proto::handshake::path_check::{Outcome, SMALL_MSS};
use std::net::SocketAddr;

/// One dial of rank `q` to rank `r`'s `hosts` entry, and what surrounds it.
#[derive(Debug, Clone)]
pub struct Dial<'a> {
    /// `rank q (box)`.
    pub from: &'a str,
    /// `rank r (box)`.
    pub to: &'a str,
    /// Rank `r`'s `hosts` entry.
    pub at: SocketAddr,
    /// Rank `q`'s address towards it, when known.
    pub from_addr: Option<std::net::IpAddr>,
    /// Whether the coordinator reached `at` (and the stand-in answered).
    pub coordinator: bool,
    /// Whether rank `r`'s box opened a connection to rank `q`'s agent
    /// (`None`: not tried).
    pub back: Option<bool>,
}

/// IP and TCP headers without options: 40 bytes over IPv4, 60 over IPv6.
fn headers(at: SocketAddr) -> u32 {
    if at.is_ipv4() {
        40
    } else {
        60
    }
}

/// Packet size of the path's full segments: the MSS the kernel reports
/// is net of the 12 bytes of TCP timestamps that every segment carries.
fn packet(at: SocketAddr, mss: u32) -> u32 {
    mss + 12 + headers(at)
}

/// Packet size of the second try's segments: a TCP_MAXSEG of
/// [`SMALL_MSS`] caps the segment, timestamps included.
fn small_packet(at: SocketAddr) -> u32 {
    SMALL_MSS + headers(at)
}

/// The check line for a dial that did not end `Ok`; `None` for one that did.
pub fn verdict(d: &Dial<'_>, outcome: &Outcome) -> Option<Check> {
    let (port, ip) = (d.at.port(), d.at.ip());
    let from_ip = d
        .from_addr
        .map_or_else(|| "its address".to_string(), |a| a.to_string());
    let head = format!("{} -> {} at {}", d.from, d.to, d.at);
    let share = "write hosts.json with an address both boxes share (rlx-discover links \
                 --hosts-json picks one every lower rank reached)";
    let check = match outcome {
        Outcome::Ok { .. } => return None,
        Outcome::Refused => Check::new(
            "path",
            Status::Fail,
            format!(
                "{head}: connection refused, while the check's stand-in listened there: a \
                 firewall on the way or on {} rejects TCP port {port}",
                d.to
            ),
        )
        .fix(format!(
            "let TCP port {port} in on {} from {from_ip}, or choose a [discover] hosts_port the \
             firewall allows and write hosts.json again",
            d.to
        )),
        Outcome::NoAnswer | Outcome::Unreachable { .. } => {
            let (no_route, unreachable) = match outcome {
                Outcome::Unreachable { why } => (format!("no route ({why})"), true),
                _ => (
                    "no answer: its packets are dropped on the way".into(),
                    false,
                ),
            };
            match (d.coordinator, d.back) {
                (true, Some(true)) if !unreachable => Check::new(
                    "path",
                    Status::Fail,
                    format!(
                        "{head}: {no_route}, while {} reaches {} from {ip} and the coordinator \
                         reaches {ip}: a one-way filter drops new connections from {from_ip} \
                         to port {port}",
                        d.to, d.from
                    ),
                )
                .fix(format!(
                    "find the rule that drops TCP port {port} from {from_ip} (the firewall of \
                     {} or a router between them) and let it through",
                    d.to
                )),
                (true, _) => Check::new(
                    "path",
                    Status::Fail,
                    format!(
                        "{head}: {no_route}; only the coordinator reaches {ip}: it is on a \
                         network {} is not on, or reached through a route {} lacks",
                        d.from, d.from
                    ),
                )
                .fix(share),
                (false, _) => Check::new(
                    "path",
                    Status::Fail,
                    format!(
                        "{head}: {no_route}, and the coordinator does not reach {} either: \
                         {} drops TCP port {port}, or the address is not up",
                        d.at, d.to
                    ),
                )
                .fix(format!(
                    "open TCP port {port} on {} (its firewall), check that {ip} is up on it, \
                     or {share}",
                    d.to
                )),
            }
        }
        Outcome::Stalled { mss, small: true } => {
            let size = mss.map_or_else(
                || "full-size".to_string(),
                |m| format!("{}-byte", packet(d.at, m)),
            );
            Check::new(
                "path",
                Status::Fail,
                format!(
                    "{head}: an MTU black hole: the connection opens, but {size} packets never \
                     arrive, while {}-byte ones do (something on the way has a smaller MTU and \
                     its 'fragmentation needed' messages do not come back)",
                    small_packet(d.at)
                ),
            )
            .fix(format!(
                "let ICMP 'fragmentation needed' (IPv6: 'packet too big') through the firewalls \
                 between {} and {}, or lower the MTU of both boxes' interfaces on this path \
                 to the smallest on the way",
                d.from, d.to
            ))
        }
        Outcome::Stalled { small: false, .. } => Check::new(
            "path",
            Status::Fail,
            format!(
                "{head}: the connection opens, but no data arrives, not even in {}-byte \
                 packets: something on the way drops data after the handshake",
                small_packet(d.at)
            ),
        )
        .fix(format!(
            "look for a filter by packet size or a stateful firewall between {} and {}",
            d.from, d.to
        )),
        Outcome::Other { why } => {
            Check::new("path", Status::Fail, format!("{head}: {why}")).fix(format!(
                "check what listens on port {port} of {}, and the path from {}",
                d.to, d.from
            ))
        }
    };
    Some(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dial(coordinator: bool, back: Option<bool>) -> Dial<'static> {
        Dial {
            from: "rank 1 (box1)",
            to: "rank 2 (box2)",
            at: "10.0.0.3:9000".parse().unwrap(),
            from_addr: Some("10.0.0.2".parse().unwrap()),
            coordinator,
            back,
        }
    }

    fn words(d: &Dial<'_>, o: Outcome) -> String {
        let c = verdict(d, &o).expect("a failure");
        assert_eq!(c.status, Status::Fail);
        format!("{} | fix: {}", c.detail, c.fix.unwrap_or_default())
    }

    #[test]
    fn each_kind_of_failure_is_named_with_the_box_the_address_and_a_fix() {
        let w = words(&dial(true, Some(true)), Outcome::NoAnswer);
        assert!(
            w.contains("one-way filter") && w.contains("10.0.0.2"),
            "{w}"
        );
        let w = words(&dial(true, Some(false)), Outcome::NoAnswer);
        assert!(w.contains("only the coordinator reaches 10.0.0.3"), "{w}");
        let w = words(
            &dial(true, Some(true)),
            Outcome::Unreachable {
                why: "No route to host".into(),
            },
        );
        assert!(
            w.contains("only the coordinator") && w.contains("No route"),
            "{w}"
        );
        let w = words(&dial(false, None), Outcome::NoAnswer);
        assert!(w.contains("does not reach 10.0.0.3:9000 either"), "{w}");
        let w = words(&dial(true, None), Outcome::Refused);
        assert!(w.contains("rejects TCP port 9000"), "{w}");
        let w = words(
            &dial(true, None),
            Outcome::Stalled {
                mss: Some(1448),
                small: true,
            },
        );
        assert!(
            w.contains("MTU black hole") && w.contains("1500-byte"),
            "{w}"
        );
        assert!(w.contains("1240-byte"), "{w}");
        let w = words(
            &dial(true, None),
            Outcome::Stalled {
                mss: None,
                small: false,
            },
        );
        assert!(w.contains("no data arrives"), "{w}");
        assert!(
            w.contains("rank 1 (box1)") && w.contains("rank 2 (box2)"),
            "{w}"
        );
    }

    #[test]
    fn a_dial_that_crossed_says_nothing() {
        let ok = Outcome::Ok {
            connect_ms: 0.2,
            transfer_ms: 3.0,
        };
        assert!(verdict(&dial(true, None), &ok).is_none());
    }
}
