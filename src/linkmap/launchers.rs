//! **Other runtimes' launch files from the same map** — the MLX hostfile
//! (`mlx.launch --hostfile`) and an Open MPI hostfile (`mpirun
//! --hostfile`), in the ring of the runtime's `hosts.json`, so one
//! cluster has one ring whichever runtime starts it.
//!
//! Each follows the format its reader parses, not a reading of its docs:
//!
//! - **MLX** (`python/mlx/distributed_run.py`, `parse_hostfile`, and the
//!   ring backend's `mlx/distributed/ring/ring.cpp`, ml-explore/mlx): a
//!   JSON list, one `{"ssh": .., "ips": [..]}` per rank. `mlx.launch`
//!   runs rank `r` over `ssh <ssh>` (or locally when `ssh` is
//!   `127.0.0.1`) and turns each rank's `ips` into `ip:port` listeners;
//!   rank `r` *accepts* on its own and *dials* rank `r + 1`'s. So rank
//!   `r`'s address is dialled by exactly one box, its left ring neighbour
//!   `r - 1` (rank 0's by the last rank): it is the one on the fastest
//!   measured path from that neighbour. The ring opens `AF_INET` sockets
//!   only, so only IPv4 addresses are written, and every rank gets one
//!   (the ring requires as many connections left as right).
//! - **Open MPI** (`orte_hosts(7)` / `mpirun(1)`, "Specifying Host
//!   Nodes"): one `host slots=N` line per node, `#` comments. mpirun
//!   starts its daemons over ssh to `host`, so `host` is the node's `ssh`
//!   (`localhost` for a node without one: the cluster file runs it on
//!   this machine; an `ssh://` URI's user and port cannot be said in a
//!   hostfile and are named in a comment). One slot per node: the cluster
//!   file runs one worker per node, and ranks fill the slots in file
//!   order, but for one node: **mpirun places the host it runs on first,
//!   whatever its line** (Open MPI 4.1.4's `--display-map`, checked by
//!   `compat/tests/mpi_hostfile.rs`). So the file starts the ring at the
//!   node without `ssh` (the coordinator's own box, where mpirun runs):
//!   the same ring, rotated, every rank keeping both its neighbours, and
//!   each line's comment says which `hosts.json` rank it is. Open MPI
//!   picks its own interfaces for traffic; each comment names the address
//!   the map found fastest (to choose `--mca btl_tcp_if_include` by).

use super::hosts::HostsFile;
use super::map::LinkMap;
use std::net::IpAddr;

/// One rank of an MLX hostfile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MlxHost {
    /// What `mlx.launch` runs `ssh` to: the node's ssh alias, or
    /// `127.0.0.1` (run here) for a node without one.
    pub ssh: String,
    /// The IPv4 address its left ring neighbour dials.
    pub ips: Vec<String>,
}

/// An MLX hostfile, with why each address was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct MlxHostfile {
    /// One entry per rank, in rank order.
    pub hosts: Vec<MlxHost>,
    /// Per rank, which path its address is on.
    pub notes: Vec<String>,
}

impl MlxHostfile {
    /// The file: the JSON list `mlx.launch --hostfile` reads.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.hosts).expect("strings serialize");
        s.push('\n');
        s
    }
}

/// Why no MLX hostfile can be written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LaunchFileError {
    /// The ring backend dials IPv4 only.
    #[error(
        "rank {rank}, {name}, has no IPv4 address measured from its left ring neighbour \
         {left}: MLX's ring backend dials IPv4 only (AF_INET). Give the two boxes IPv4 \
         addresses on a network they share, or measure again if the path failed by chance"
    )]
    NoIpv4 {
        /// The rank.
        rank: usize,
        /// Its box, `hostname (addr)`.
        name: String,
        /// The box that dials it.
        left: String,
    },
}

/// `hostname (addr)`, as the notes and errors name a box.
fn name(map: &LinkMap, b: usize) -> String {
    let x = &map.boxes[b];
    format!("{} ({})", x.hostname, x.addr)
}

/// `ssh` of a box for a launcher, or `local` when the node has none.
fn ssh_or<'a>(map: &'a LinkMap, b: usize, local: &'a str) -> &'a str {
    map.boxes[b]
        .ssh
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(local)
}

/// The MLX hostfile for the ranks of `hosts` (from [`super::hosts_json`]
/// on the same map).
pub fn mlx_hostfile(map: &LinkMap, hosts: &HostsFile) -> Result<MlxHostfile, LaunchFileError> {
    let order = &hosts.ranks;
    let n = order.len();
    let mut out = Vec::with_capacity(n);
    let mut notes = Vec::new();
    for (r, &b) in order.iter().enumerate() {
        let ssh = ssh_or(map, b, "127.0.0.1").to_string();
        if n == 1 {
            // A world of one dials nobody; mlx.launch needs no address.
            out.push(MlxHost {
                ssh,
                ips: Vec::new(),
            });
            notes.push("one rank: no ring, no address".into());
            continue;
        }
        let left = order[(r + n - 1) % n];
        let best = map.pair(left, b).and_then(|pair| {
            pair.paths
                .iter()
                .filter(|p| matches!(map.path_from(b, left, p).0, IpAddr::V4(_)))
                .max_by(|x, y| x.both_ways_mbps().total_cmp(&y.both_ways_mbps()))
        });
        let Some(p) = best else {
            return Err(LaunchFileError::NoIpv4 {
                rank: r,
                name: name(map, b),
                left: name(map, left),
            });
        };
        let ip = map.path_from(b, left, p).0;
        notes.push(format!(
            "rank {r}, {}: {ip}, dialled by rank {}, {} ({}, {} Mbit/s both ways)",
            name(map, b),
            (r + n - 1) % n,
            name(map, left),
            p.kind,
            p.both_ways_mbps().round()
        ));
        out.push(MlxHost {
            ssh,
            ips: vec![ip.to_string()],
        });
    }
    Ok(MlxHostfile { hosts: out, notes })
}

/// The Open MPI hostfile for the ranks of `hosts`: one `host slots=1`
/// line per rank, in the ring order of `hosts.json` started at the node
/// without `ssh` (mpirun places its own host first, see the module
/// docs), each after a comment naming the box, its `hosts.json` rank and
/// address.
pub fn mpi_hostfile(map: &LinkMap, hosts: &HostsFile) -> String {
    let n = hosts.ranks.len();
    let first = hosts
        .ranks
        .iter()
        .position(|&b| ssh_or(map, b, "").is_empty())
        .unwrap_or(0);
    let mut s = String::from(
        "# Open MPI hostfile written by rlx-discover from its link map:\n\
         # one slot per node, the ring of the runtime's hosts.json.\n",
    );
    if first != 0 {
        s.push_str(&format!(
            "# mpirun places the host it runs on first, so the ring starts at this machine:\n\
             # MPI rank k is hosts.json rank (k + {first}) mod {n}, with the same neighbours.\n"
        ));
    }
    for k in 0..n {
        let r = (first + k) % n;
        let b = hosts.ranks[r];
        let at = hosts.hosts.get(r).map(String::as_str).unwrap_or("?");
        s.push_str(&format!(
            "# rank {k} (hosts.json rank {r}): {}, fastest address {at}\n",
            name(map, b)
        ));
        let (host, lost) = mpi_host(ssh_or(map, b, "localhost"));
        s.push_str(&lost.unwrap_or_default());
        s.push_str(&format!("{host} slots=1\n"));
    }
    s
}

/// An RLX `ssh` value (an alias, an address, or `ssh://[user@]host[:port]`,
/// see [`crate::sshtarget`]) as a hostfile host, with what it lost:
/// mpirun logs in as the user who runs it, on port 22, so a user or port
/// belongs in `~/.ssh/config` under the host's name.
fn mpi_host(ssh: &str) -> (String, Option<String>) {
    let Some(uri) = ssh.strip_prefix("ssh://") else {
        return (ssh.to_string(), None);
    };
    let (user, hostport) = match uri.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, uri),
    };
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').unwrap_or((rest, ""));
        (h, tail.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let mut lost = Vec::new();
    if let Some(u) = user {
        lost.push(format!("user {u}"));
    }
    if let Some(p) = port.filter(|p| *p != "22") {
        lost.push(format!("port {p}"));
    }
    let note = (!lost.is_empty()).then(|| {
        format!(
            "# {}: mpirun cannot say it here; put it in ~/.ssh/config under Host {host}\n",
            lost.join(", ")
        )
    });
    (host.to_string(), note)
}

#[cfg(test)]
mod tests {
    use super::super::map::{BoxLinks, PairLinks, PathLink};
    use super::*;
    use crate::linkmap::{hosts_json, HostsOptions};

    /// Boxes 0..n, box i at 10.0.0.(i+1) and fd00::(i+1), every pair
    /// measured on the IPv4 path (`v4` Mbit/s) and the IPv6 one (`v6`).
    fn map(n: usize, v4: f64, v6: f64, ssh: &[Option<&str>]) -> LinkMap {
        let boxes = (0..n)
            .map(|i| BoxLinks {
                addr: format!("10.0.0.{}:9100", i + 1),
                id: format!("id{i}"),
                hostname: format!("box{i}"),
                agent: format!("10.0.0.{}:6184", i + 1),
                ssh: ssh.get(i).copied().flatten().map(String::from),
                links: Vec::new(),
            })
            .collect();
        let mut pairs = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let path = |aa: String, bb: String, mbps: f64| PathLink {
                    a_addr: aa.parse().unwrap(),
                    b_addr: bb.parse().unwrap(),
                    kind: "ethernet".into(),
                    ab_mbps: mbps,
                    ba_mbps: mbps,
                    rtt_ms: 0.2,
                    ab_udp: None,
                    ba_udp: None,
                    udp_notes: vec![],
                };
                let mut paths = vec![
                    path(format!("10.0.0.{}", a + 1), format!("10.0.0.{}", b + 1), v4),
                    path(format!("fd00::{}", a + 1), format!("fd00::{}", b + 1), v6),
                ];
                paths.sort_by(|x, y| y.both_ways_mbps().total_cmp(&x.both_ways_mbps()));
                pairs.push(PairLinks {
                    a,
                    b,
                    paths,
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
            took_ms: 0,
        }
    }

    #[test]
    fn the_mlx_hostfile_gives_each_rank_its_ipv4_address_even_when_ipv6_is_faster() {
        let m = map(3, 100.0, 900.0, &[Some("gpu0"), Some("me@gpu1"), None]);
        let h = hosts_json(&m, &HostsOptions::default()).unwrap();
        let mlx = mlx_hostfile(&m, &h).unwrap();
        let json: serde_json::Value = serde_json::from_str(&mlx.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"ssh": "gpu0", "ips": ["10.0.0.1"]},
                {"ssh": "me@gpu1", "ips": ["10.0.0.2"]},
                {"ssh": "127.0.0.1", "ips": ["10.0.0.3"]},
            ])
        );
        assert!(
            mlx.notes[0].contains("dialled by rank 2"),
            "{:?}",
            mlx.notes
        );
    }

    #[test]
    fn a_rank_its_left_neighbour_reaches_only_over_ipv6_is_refused_by_name() {
        let mut m = map(2, 100.0, 900.0, &[]);
        m.pairs[0].paths.retain(|p| p.a_addr.is_ipv6());
        let h = hosts_json(&m, &HostsOptions::default()).unwrap();
        let err = mlx_hostfile(&m, &h).unwrap_err();
        assert!(err.to_string().contains("rank 0, box0"), "{err}");
        assert!(err.to_string().contains("IPv4"), "{err}");
    }

    #[test]
    fn the_mpi_hostfile_lists_one_slot_per_rank_by_ssh_host_in_rank_order() {
        let m = map(
            3,
            100.0,
            10.0,
            &[Some("gpu0"), Some("ssh://me@gpu1:2222"), None],
        );
        let h = hosts_json(&m, &HostsOptions::default()).unwrap();
        let text = mpi_hostfile(&m, &h);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        // This machine's node (no ssh) first, where mpirun puts it anyway;
        // the ring rotated, so each keeps its neighbours.
        assert_eq!(lines, ["localhost slots=1", "gpu0 slots=1", "gpu1 slots=1"]);
        assert!(
            text.contains(
                "# rank 2 (hosts.json rank 1): box1 (10.0.0.2:9100), fastest address 10.0.0.2:9000"
            ),
            "{text}"
        );
        assert!(text.contains("hosts.json rank (k + 2) mod 3"), "{text}");
        assert!(
            text.contains("# user me, port 2222: mpirun cannot say it here"),
            "{text}"
        );
        assert_eq!(mpi_host("ssh://[fd00::7]:22").0, "fd00::7");
    }
}
