//! **Which DNS server to ask** — a server given as text (`HOST`,
//! `HOST:PORT`, `IP`, `IP:PORT`, `[IPv6]:PORT`), checked, looked up, or
//! taken from `/etc/resolv.conf` when none is given.

use crate::service::{parse_domain, DNS_PORT};
use std::net::{IpAddr, SocketAddr};

/// A server given as `HOST`, `HOST:PORT`, `IP`, `IP:PORT` or `[IPv6]:PORT`
/// (port 53 when left out), checked for syntax only.
pub fn check_server(s: &str) -> Result<(), String> {
    split_server(s).map(|_| ())
}

pub(crate) fn split_server(s: &str) -> Result<(String, u16), String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(
            "the DNS server is empty; write it like 10.0.0.53 or ns1.example.org:53".into(),
        );
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok((ip.to_string(), DNS_PORT));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok((sa.ip().to_string(), sa.port()));
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => {
            let port =
                p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    format!("DNS server {s:?} has an invalid port `{p}` (1-65535)")
                })?;
            (h, port)
        }
        None => (s, DNS_PORT),
    };
    if host.contains(':') || host.contains('[') {
        return Err(format!(
            "DNS server {s:?}: write an IPv6 server as [addr]:port"
        ));
    }
    parse_domain(host).map_err(|e| format!("DNS server {s:?}: {e}"))?;
    Ok((host.to_string(), port))
}

/// Where to send queries: the given server (a host name is looked up with
/// the system resolver), else the first `nameserver` of `/etc/resolv.conf`.
pub async fn resolve_server(server: Option<&str>) -> Result<SocketAddr, String> {
    match server {
        Some(s) => {
            let (host, port) = split_server(s)?;
            if let Ok(ip) = host.parse::<IpAddr>() {
                return Ok(SocketAddr::new(ip, port));
            }
            let found = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|e| format!("cannot look up DNS server {host}: {e}"))?
                .next();
            found.ok_or_else(|| format!("DNS server {host} has no address"))
        }
        None => system_server(std::path::Path::new("/etc/resolv.conf")),
    }
}

/// The first `nameserver` of a resolv.conf.
pub fn system_server(path: &std::path::Path) -> Result<SocketAddr, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "no DNS server given and {} cannot be read ({e}): set dns_sd.server or --dns-server",
            path.display()
        )
    })?;
    let conf = resolv_conf::Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    conf.nameservers
        .first()
        .map(|ns| SocketAddr::new(IpAddr::from(ns.clone()), DNS_PORT))
        .ok_or_else(|| {
            format!(
                "no DNS server given and {} lists no nameserver: set dns_sd.server or --dns-server",
                path.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_take_an_optional_port_and_bracketed_ipv6() {
        assert_eq!(split_server("10.0.0.53").unwrap(), ("10.0.0.53".into(), 53));
        assert_eq!(
            split_server("10.0.0.53:5300").unwrap(),
            ("10.0.0.53".into(), 5300)
        );
        assert_eq!(
            split_server("[fd00::1]:53").unwrap(),
            ("fd00::1".into(), 53)
        );
        assert_eq!(split_server("fd00::1").unwrap(), ("fd00::1".into(), 53));
        assert_eq!(
            split_server("ns1.example.org:54").unwrap(),
            ("ns1.example.org".into(), 54)
        );
        assert!(split_server("ns1:0").is_err());
        assert!(split_server("ns1:http").is_err());
        assert!(split_server("").is_err());
    }

    #[test]
    fn the_system_resolver_is_the_first_nameserver_of_resolv_conf() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("resolv.conf");
        std::fs::write(
            &p,
            "# comment\nsearch lab\nnameserver 10.9.8.7\nnameserver 1.1.1.1\n",
        )
        .unwrap();
        assert_eq!(system_server(&p).unwrap(), "10.9.8.7:53".parse().unwrap());
        std::fs::write(&p, "search lab\n").unwrap();
        let e = system_server(&p).unwrap_err();
        assert!(e.contains("--dns-server"), "{e}");
    }
}
