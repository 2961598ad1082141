//! **A node's address** — what the runtime dials: `IP:port`, `[v6]:port` or
//! `alias:port`, parsed, formatted and taken apart in one place.
//!
//! ```text
//! "10.0.0.9:9100"    host 10.0.0.9   port 9100
//! "[fd00::9]:9100"   host fd00::9    port 9100   (IPv6 in brackets)
//! "gpu-a:9100"       host gpu-a      port 9100   (an ssh alias or DNS name)
//! ```
//!
//! The `addr` strings themselves stay what the user or the source wrote:
//! `[[node]]` entries, sightings and reports keep them as text, byte for
//! byte, and this type is how code reads them. [`NodeAddr::parse`] is the
//! strict rule a hand-written `[[node]] addr` must pass; [`NodeAddr::split`]
//! is the lenient reading used to compare addresses that never went through
//! that check (an ssh alias is written `alias:port` as the user gave it).

use rlx_proto::service::DEFAULT_WORKER_PORT;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// A node address: a host (IP, DNS name or ssh alias, without IPv6
/// brackets) and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddr {
    host: String,
    port: u16,
}

/// Why a string is not a node address. The texts are the ones the config
/// check prints after `[[node]] #N: addr `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// No `:port` at all.
    #[error("{addr:?} needs a port, e.g. \"{addr}:{DEFAULT_WORKER_PORT}\"")]
    NoPort {
        /// The address as written.
        addr: String,
    },
    /// Nothing before the `:port`.
    #[error("{addr:?} has no host")]
    NoHost {
        /// The address as written.
        addr: String,
    },
    /// An IPv6 address without brackets: `fd00::1:9100` is ambiguous.
    #[error("{addr:?}: write IPv6 addresses as \"[addr]:port\"")]
    Unbracketed {
        /// The address as written.
        addr: String,
    },
    /// The port is not a number in 1-65535.
    #[error("{addr:?} has an invalid port `{port}` (1-65535)")]
    BadPort {
        /// The address as written.
        addr: String,
        /// The port text as written.
        port: String,
    },
}

impl NodeAddr {
    /// The address of `ip` and `port`.
    pub fn new(ip: IpAddr, port: u16) -> Self {
        NodeAddr {
            host: ip.to_string(),
            port,
        }
    }

    /// Parses `host:port` or `[v6]:port`: the rule every hand-written
    /// `[[node]] addr` passes at load time.
    pub fn parse(addr: &str) -> Result<Self, AddrError> {
        let Some((host, port)) = addr.rsplit_once(':') else {
            return Err(AddrError::NoPort { addr: addr.into() });
        };
        if host.is_empty() {
            return Err(AddrError::NoHost { addr: addr.into() });
        }
        if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
            return Err(AddrError::Unbracketed { addr: addr.into() });
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(NodeAddr {
                host: unbracket(host).into(),
                port: p,
            }),
            _ => Err(AddrError::BadPort {
                addr: addr.into(),
                port: port.into(),
            }),
        }
    }

    /// The lenient reading of any `addr` string: the host without brackets
    /// (the whole string when there is no `:`), and the port when the text
    /// after the last `:` is one. Never fails, so addresses that did not
    /// pass [`NodeAddr::parse`] (an ssh alias with a colon in it) still
    /// compare the way they always did.
    pub fn split(addr: &str) -> (&str, Option<u16>) {
        match addr.rsplit_once(':') {
            Some((host, port)) => (unbracket(host), port.parse().ok()),
            None => (unbracket(addr), None),
        }
    }

    /// The host: an IP (IPv6 without brackets), a DNS name or an ssh alias.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host as an IP, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

/// `[fd00::1]` -> `fd00::1`; anything else unchanged.
fn unbracket(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

impl From<SocketAddr> for NodeAddr {
    fn from(sa: SocketAddr) -> Self {
        NodeAddr::new(sa.ip(), sa.port())
    }
}

impl FromStr for NodeAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        NodeAddr::parse(s)
    }
}

/// `host:port`, with IPv6 hosts in brackets (`[fd00::1]:9100`): the same
/// text as [`SocketAddr`]'s for an IP.
impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_address_formats_exactly_as_a_socket_address_does() {
        for sa in ["10.0.0.9:9100", "[fd00::9]:9100", "[::ffff:10.0.0.1]:1"] {
            let sa: SocketAddr = sa.parse().unwrap();
            assert_eq!(NodeAddr::from(sa).to_string(), sa.to_string());
        }
    }

    #[test]
    fn parse_takes_hosts_and_ports_apart_and_drops_ipv6_brackets() {
        let a = NodeAddr::parse("[fd00::9]:9100").unwrap();
        assert_eq!((a.host(), a.port()), ("fd00::9", 9100));
        assert_eq!(a.ip(), Some("fd00::9".parse().unwrap()));
        let a = NodeAddr::parse("gpu-a:9100").unwrap();
        assert_eq!((a.host(), a.port(), a.ip()), ("gpu-a", 9100, None));
        assert_eq!(a.to_string(), "gpu-a:9100");
    }

    #[test]
    fn parse_errors_say_what_to_write() {
        let e = |s: &str| NodeAddr::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("gpu-a"),
            format!("\"gpu-a\" needs a port, e.g. \"gpu-a:{DEFAULT_WORKER_PORT}\"")
        );
        assert_eq!(e(":9100"), "\":9100\" has no host");
        assert_eq!(
            e("fd00::1:9100"),
            "\"fd00::1:9100\": write IPv6 addresses as \"[addr]:port\""
        );
        assert_eq!(e("a:0"), "\"a:0\" has an invalid port `0` (1-65535)");
        assert!(matches!(
            NodeAddr::parse("a:http"),
            Err(AddrError::BadPort { port, .. }) if port == "http"
        ));
    }

    #[test]
    fn split_reads_any_addr_string_without_failing() {
        assert_eq!(NodeAddr::split("[fd00::1]:9100"), ("fd00::1", Some(9100)));
        assert_eq!(NodeAddr::split("fd00::1:9100"), ("fd00::1", Some(9100)));
        assert_eq!(NodeAddr::split("alias"), ("alias", None));
        assert_eq!(NodeAddr::split("alias:http"), ("alias", None));
    }
}
