//! The `hosts.json` rlx-discover writes from a link map is the runtime's
//! process-group file: `rlx_distributed::config::Hostfile` parses it and
//! `DistConfig::from_hostfile` builds every rank's configuration from it,
//! with the peers and the backend our `HostsFile` says; and on loopback
//! addresses the runtime's own transport connects the whole group over it.

use rlx_discover::linkmap::{
    hosts_json, BoxLinks, HostsFile, HostsOptions, LinkMap, PairLinks, PathLink, RingOrder,
};
use rlx_distributed::config::{DistConfig, Hostfile, ParallelMode};
use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc;
use std::time::Duration;

/// A map of boxes at `ips` (one per box), every pair one path between
/// their addresses, of `kind` at 1 Gbit/s; `slow` pairs at 10 Mbit/s.
fn map(ips: &[&str], kind: &str, slow: &[(usize, usize)]) -> LinkMap {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let boxes = ips
        .iter()
        .enumerate()
        .map(|(i, a)| BoxLinks {
            addr: SocketAddr::new(ip(a), 9100).to_string(),
            id: format!("id{i}"),
            hostname: format!("box{i}"),
            agent: SocketAddr::new(ip(a), 6184).to_string(),
            ssh: None,
            links: Vec::new(),
        })
        .collect();
    let mut pairs = Vec::new();
    for a in 0..ips.len() {
        for b in a + 1..ips.len() {
            let mbps = if slow.contains(&(a, b)) { 10.0 } else { 1000.0 };
            pairs.push(PairLinks {
                a,
                b,
                paths: vec![PathLink {
                    a_addr: ip(ips[a]),
                    b_addr: ip(ips[b]),
                    kind: kind.into(),
                    ab_mbps: mbps,
                    ba_mbps: mbps,
                    rtt_ms: 0.2,
                    ab_udp: None,
                    ba_udp: None,
                    udp_notes: vec![],
                }],
                failed: Vec::new(),
            });
        }
    }
    LinkMap {
        v: 1,
        boxes,
        pairs,
        skipped: Vec::new(),
        bottlenecks: vec![],
        took_ms: 1,
    }
}

/// The runtime reads `h.to_json()` as `h` means it, for every rank.
fn the_runtime_reads(h: &HostsFile) -> Hostfile {
    let text = h.to_json();
    let hf = Hostfile::from_json_str(&text).unwrap_or_else(|e| panic!("{e:#}\n{text}"));
    assert_eq!(hf.backend, h.backend, "{text}");
    assert_eq!(hf.hosts, h.hosts, "{text}");
    let ours: Vec<SocketAddr> = h.hosts.iter().map(|s| s.parse().unwrap()).collect();
    let n = h.hosts.len() as u32;
    for r in 0..n {
        let cfg = DistConfig::from_hostfile(&hf, r, ParallelMode::Tensor)
            .unwrap_or_else(|e| panic!("rank {r}: {e:#}\n{text}"));
        assert_eq!((cfg.rank, cfg.world_size), (r, n));
        assert_eq!(cfg.backend.as_str(), h.backend, "{text}");
        assert_eq!(cfg.peers, ours, "{text}");
    }
    assert!(DistConfig::from_hostfile(&hf, n, ParallelMode::Tensor).is_err());
    hf
}

#[test]
fn every_rank_of_every_written_file_is_accepted_with_our_peers_and_backend() {
    let v4 = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"];
    let v6 = ["fd00::1", "fd00::2", "fd00::3", "fd00::4"];
    let fastest = HostsOptions {
        ring: RingOrder::Fastest,
        ..HostsOptions::default()
    };
    for ips in [&v4[..], &v6[..]] {
        for n in [1, 2, 4] {
            for kind in ["ethernet", "thunderbolt"] {
                for opts in [HostsOptions::default(), fastest] {
                    let m = map(&ips[..n], kind, &[(1, 2)]);
                    let h = hosts_json(&m, &opts).unwrap();
                    assert_eq!(h.hosts.len(), n);
                    let want = if n > 1 && kind == "thunderbolt" {
                        "thunderbolt"
                    } else {
                        "tcp"
                    };
                    assert_eq!(h.backend, want, "{n} boxes of {kind}: {:?}", h.notes);
                    if ips[0].contains(':') {
                        assert!(h.hosts.iter().all(|x| x.starts_with('[')), "{:?}", h.hosts);
                    }
                    the_runtime_reads(&h);
                }
            }
        }
    }
}

#[test]
fn the_runtime_reads_the_ring_order_and_a_non_default_port() {
    let m = map(
        &["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
        "ethernet",
        &[(1, 2)],
    );
    let h = hosts_json(
        &m,
        &HostsOptions {
            port: 29500,
            ring: RingOrder::Fastest,
        },
    )
    .unwrap();
    assert_ne!(h.ranks, [0, 1, 2, 3], "{:?}", h.notes);
    let hf = the_runtime_reads(&h);
    let peers = hf.peers().unwrap();
    for (r, &b) in h.ranks.iter().enumerate() {
        assert_eq!(peers[r], format!("10.0.0.{}:29500", b + 1).parse().unwrap());
    }
}

/// A port free on 127.0.0.1 now (the group binds it on 127.0.0.1-4).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_runtimes_transport_connects_every_rank_over_the_written_file() {
    // Four "boxes" at 127.0.0.1-4, which Linux routes all to loopback.
    let ips = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"];
    if std::net::TcpListener::bind("127.0.0.2:0").is_err() {
        eprintln!("SKIP: 127.0.0.2 is not a local address here (not Linux?)");
        return;
    }
    let h = hosts_json(
        &map(&ips, "ethernet", &[]),
        &HostsOptions {
            port: free_port(),
            ring: RingOrder::FileOrder,
        },
    )
    .unwrap();
    let hf = the_runtime_reads(&h);
    let (tx, rx) = mpsc::channel();
    for r in 0..ips.len() as u32 {
        let (hf, tx) = (hf.clone(), tx.clone());
        std::thread::spawn(move || {
            let got = DistConfig::from_hostfile(&hf, r, ParallelMode::Tensor)
                .and_then(|c| c.connect())
                .and_then(|g| {
                    g.barrier().map_err(|e| anyhow::anyhow!("{e:?}"))?;
                    Ok(g.world_size())
                });
            tx.send((r, got.map_err(|e| format!("{e:#}")))).ok();
        });
    }
    for _ in 0..ips.len() {
        let (r, got) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the process group connects within 30 s");
        assert_eq!(got, Ok(4), "rank {r}");
    }
}

#[test]
fn a_cluster_file_with_hosts_port_is_still_loaded_by_the_runtime() {
    // `hosts_port` is rlx-discover's key; the runtime's `[discover]`
    // ignores the keys it does not read, so the file stays one both load.
    let text = "model = \"m\"\n[discover]\nhosts_port = 29500\n";
    let rt = rlx_compat::load_text(text);
    assert_eq!(rt["ok"], true, "{rt}");
    let ours = rlx_discover::ClusterConfig::parse(std::path::Path::new("c.toml"), text).unwrap();
    assert_eq!(ours.discover.unwrap().hosts_port, 29500);
}
