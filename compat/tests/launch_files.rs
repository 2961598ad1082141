//! The launch files rlx-discover writes for other runtimes from a link
//! map, read by those runtimes' own code:
//!
//! - the MLX hostfile by MLX's launcher code
//!   (`mlx._distributed_utils.common.Hostfile.from_file`, of the pinned
//!   `mlx` wheel `.ci/mlx-reader` unpacks) as meant: each rank's `ssh`
//!   target and its one IPv4 address, in rank order. The reader is
//!   Python; `.ci/run` names its directory in `RLX_MLX_READER`, and
//!   elsewhere this test says SKIP;
//! - the Open MPI hostfile by `mpirun` itself (Debian's openmpi-bin),
//!   which must place every MPI rank on the host of its line.

use rlx_discover::linkmap::{
    hosts_json, mlx_hostfile, mpi_hostfile, BoxLinks, HostsOptions, LinkMap, PairLinks, PathLink,
    RingOrder,
};
use rlx_lab::kit::peer::{require, Peer, PYTHON};
use std::path::PathBuf;
use std::process::Command;

const TEST: &str = "mlx_launch_reads_every_rank_as_written";

fn reader() -> Option<PathBuf> {
    if !require(TEST, &[Peer::Python]) {
        return None;
    }
    match std::env::var_os("RLX_MLX_READER") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var("CI").is_err(),
                "CI must unpack MLX's launcher (.ci/mlx-reader) and set RLX_MLX_READER"
            );
            eprintln!(
                "SKIP {TEST}: set RLX_MLX_READER to a directory holding \
                 mlx/_distributed_utils (RLX_MLX_READER=$(bash .ci/mlx-reader))"
            );
            None
        }
    }
}

/// Four boxes on a LAN (10.0.0.x, 100 Mbit/s) and an IPv6 network
/// (fd00::x, faster); boxes 0 and 2 also share a direct cable
/// (169.254.0.x, 1 Gbit/s).
fn map() -> LinkMap {
    let ssh = [
        Some("gpu-a"),
        Some("ssh://me@10.0.0.2:2222"),
        Some("mac"),
        None,
    ];
    let boxes = (0..4)
        .map(|i| BoxLinks {
            addr: format!("10.0.0.{}:9100", i + 1),
            id: format!("id{i}"),
            hostname: format!("box{i}"),
            agent: format!("10.0.0.{}:6184", i + 1),
            ssh: ssh[i].map(String::from),
            links: Vec::new(),
        })
        .collect();
    let path = |a: String, b: String, mbps: f64, kind: &str| PathLink {
        a_addr: a.parse().unwrap(),
        b_addr: b.parse().unwrap(),
        kind: kind.into(),
        ab_mbps: mbps,
        ba_mbps: mbps,
        rtt_ms: 0.2,
        ab_udp: None,
        ba_udp: None,
        udp_notes: vec![],
    };
    let mut pairs = Vec::new();
    for a in 0..4 {
        for b in a + 1..4 {
            let mut paths = vec![
                path(
                    format!("fd00::{}", a + 1),
                    format!("fd00::{}", b + 1),
                    900.0,
                    "ethernet",
                ),
                path(
                    format!("10.0.0.{}", a + 1),
                    format!("10.0.0.{}", b + 1),
                    100.0,
                    "ethernet",
                ),
            ];
            if (a, b) == (0, 2) {
                paths.insert(
                    0,
                    path(
                        "169.254.0.1".into(),
                        "169.254.0.3".into(),
                        1000.0,
                        "thunderbolt",
                    ),
                );
            }
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
        took_ms: 1,
    }
}

/// The runtime's hosts.json of `m` in both ring orders: what each launch
/// file is written beside.
fn rings(m: &LinkMap) -> Vec<rlx_discover::linkmap::HostsFile> {
    [RingOrder::FileOrder, RingOrder::Fastest]
        .into_iter()
        .map(|ring| {
            let opts = HostsOptions {
                ring,
                ..HostsOptions::default()
            };
            hosts_json(m, &opts).unwrap()
        })
        .collect()
}

#[test]
fn mlx_launch_reads_every_rank_as_written() {
    let Some(dir) = reader() else { return };
    let m = map();
    for h in rings(&m) {
        let mlx = mlx_hostfile(&m, &h).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("hosts.json");
        std::fs::write(&file, mlx.to_json()).unwrap();
        let out = Command::new(PYTHON)
            .arg("-c")
            .arg(
                "import json, sys\n\
                 sys.path.insert(0, sys.argv[1])\n\
                 from mlx._distributed_utils.common import Hostfile\n\
                 h = Hostfile.from_file(sys.argv[2])\n\
                 print(json.dumps([[x.rank, x.ssh_hostname, x.ips] for x in h.hosts]))\n",
            )
            .arg(&dir)
            .arg(&file)
            .output()
            .expect("Debian's python3 runs");
        assert!(
            out.status.success(),
            "MLX's reader refused the file: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            mlx.to_json()
        );
        let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let want: Vec<serde_json::Value> = mlx
            .hosts
            .iter()
            .enumerate()
            .map(|(r, x)| serde_json::json!([r, x.ssh, x.ips]))
            .collect();
        assert_eq!(read, serde_json::Value::Array(want), "{}", mlx.to_json());
        // The IPv6 paths are faster, but the ring dials IPv4 only: one
        // IPv4 address per rank.
        for x in &mlx.hosts {
            assert_eq!(x.ips.len(), 1, "{}", mlx.to_json());
            assert!(
                x.ips[0].parse::<std::net::Ipv4Addr>().is_ok(),
                "{}",
                mlx.to_json()
            );
        }
        let local = mlx.hosts.iter().filter(|x| x.ssh == "127.0.0.1").count();
        assert_eq!(
            local,
            1,
            "the node without ssh runs here: {}",
            mlx.to_json()
        );
    }
}

/// Where `mpirun --display-map` puts each MPI rank: the node names, in
/// rank order.
fn mpirun_map(hostfile: &std::path::Path, n: usize) -> Vec<String> {
    // In a network namespace of its own with only loopback (`unshare -rn`,
    // root or not): --do-not-launch stops before any ssh, and nothing of
    // it reaches a real network.
    let out = Command::new("unshare")
        .args(["-rn", "sh", "-c"])
        .arg("ip link set lo up 2>/dev/null; exec mpirun --allow-run-as-root --hostfile \"$0\" --display-map --do-not-launch -n \"$1\" true")
        .arg(hostfile)
        .arg(n.to_string())
        .output()
        .expect("unshare runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut node = String::new();
    let mut at = vec![String::new(); n];
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("Data for node:") {
            node = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        } else if let Some((_, rank)) = line.split_once("Process rank:") {
            let rank: usize = rank.split_whitespace().next().unwrap().parse().unwrap();
            assert!(rank < n, "rank {rank} of {n}:\n{text}");
            at[rank] = node.clone();
        }
    }
    assert!(
        at.iter().all(|x| !x.is_empty()),
        "mpirun did not map every rank:\n{text}"
    );
    at
}

/// Open MPI places the host mpirun runs on first, whatever its line in
/// the hostfile (4.1.4): the file written starts at this machine's node,
/// so every MPI rank lands on the host of its own line, and the ring is
/// the hosts.json ring, rotated.
#[test]
fn mpirun_places_every_rank_on_the_host_of_its_line() {
    const TEST: &str = "mpirun_places_every_rank_on_the_host_of_its_line";
    if !require(TEST, &[Peer::OpenMpi]) {
        return;
    }
    let here = Command::new("uname").arg("-n").output().unwrap();
    let here = String::from_utf8_lossy(&here.stdout).trim().to_string();
    let m = map();
    for h in rings(&m) {
        let text = mpi_hostfile(&m, &h);
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("hostfile");
        std::fs::write(&file, &text).unwrap();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let host = l.split_whitespace().next().unwrap();
                if host == "localhost" {
                    here.clone()
                } else {
                    host.to_string()
                }
            })
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(mpirun_map(&file, lines.len()), lines, "{text}");
        // The ring: line k's neighbours are hosts.json neighbours.
        let hosts_ring: Vec<usize> = h.ranks.clone();
        let first = hosts_ring
            .iter()
            .position(|&b| m.boxes[b].ssh.is_none())
            .unwrap();
        for k in 0..4 {
            let b = hosts_ring[(first + k) % 4];
            assert!(
                text.contains(&format!(
                    "# rank {k} (hosts.json rank {}): box{b} ",
                    (first + k) % 4
                )),
                "{text}"
            );
        }
    }
}
