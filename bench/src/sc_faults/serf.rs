//! **HashiCorp serf beside `watch`**: Debian's `serf` (memberlist's SWIM
//! with Lifeguard, the failure detector most clusters would reach for), one
//! agent per lab host, the coordinator's host included, each joined to
//! the coordinator's at its address (no multicast discovery). What serf
//! says of the members is read from the coordinator agent's log as it
//! prints it (`serf: EventMemberFailed: node-3 10.7.1.4`): the event
//! handlers' feed is coalesced for up to 3 s, the log is not.
//!
//! The default `lan` profile: a probe every second, suspicion timeout 4 x
//! log10(N) s at least (Lifeguard starts it 6 times longer and shrinks it
//! as other members confirm).

use rlx_lab::Lab;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

/// serf's gossip port (its default), TCP and UDP on the host's address.
pub(crate) const PORT: u16 = 7946;

/// The serf binary, when it is installed.
pub(crate) fn find() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join("serf"))
        .find(|p| p.is_file())
}

/// `serf version`'s first line.
pub(crate) fn version(serf: &PathBuf) -> String {
    Command::new(serf)
        .arg("version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default()
}

/// A serf agent named `name` in lab host `i`, joining `join` (the
/// coordinator's address; retried every second, so a restart while the
/// coordinator is busy still joins). Its RPC port is on the namespace's
/// own loopback. The coordinator's logs at `info`, where the member
/// events are; the others at `warn`.
pub(crate) fn agent_command(
    lab: &Lab,
    serf: &PathBuf,
    i: usize,
    name: &str,
    join: Option<Ipv4Addr>,
) -> Command {
    let ip = lab.host(i).ip;
    let mut c = lab.command(i, serf);
    c.arg("agent")
        .arg(format!("-node={name}"))
        .arg(format!("-bind={ip}:{PORT}"))
        .arg("-rpc-addr=127.0.0.1:7373");
    match join {
        Some(j) => {
            c.arg(format!("-retry-join={j}:{PORT}"))
                .args(["-retry-interval=1s", "-log-level=warn"]);
        }
        None => {
            c.arg("-log-level=info");
        }
    }
    c
}

/// What one log line says: (`Join`/`Leave`/`Failed`/`Update`/`Reap`, the
/// member's name), for a `serf: EventMember...` line.
pub(crate) fn member_event(line: &str) -> Option<(&str, &str)> {
    let rest = &line[line.find("serf: EventMember")? + "serf: EventMember".len()..];
    let (kind, rest) = rest.split_once(':')?;
    let name = rest.split_whitespace().next()?;
    Some((kind, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_event_is_read_from_serfs_log_line_and_nothing_else_is() {
        assert_eq!(
            member_event("    2026/12/02 22:43:10 [INFO] serf: EventMemberFailed: b 127.0.0.2"),
            Some(("Failed", "b"))
        );
        assert_eq!(
            member_event("2026/12/02 22:43:01 [INFO] serf: EventMemberJoin: node-12 10.1.1.13"),
            Some(("Join", "node-12"))
        );
        assert_eq!(
            member_event("[INFO] agent: Received event: member-join"),
            None
        );
        assert_eq!(
            member_event("[INFO] memberlist: Suspect b has failed, no acks received"),
            None
        );
    }
}
