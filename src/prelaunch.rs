//! **Before the runtime starts: can every rank dial what it will dial?**
//! The pre-launch path check (`rlx-discover check`). The runtime's
//! process group connects every pair of ranks at start-up, the lower rank
//! dialling the higher one's `hosts.json` entry, and its coordinator dials
//! every node's worker; one path that fails stalls the whole start. This
//! tries each of them first, the way the runtime will:
//!
//! ```text
//! coordinator ─TCP─► every node's worker addr                        (the worker port open?)
//! for each rank r:  r's agent stands in at hosts[r]                  (the port free, the address r's?)
//!                   coordinator ─► hosts[r]                          (reachable at all?)
//!                   each lower rank q's agent ─► hosts[r], 64 KiB    (q reaches it, full-size packets cross?)
//!                   on a failure: r's agent ─► q's agent port        (the way back: a one-way filter?)
//! ```
//!
//! Each failure is named with the boxes, the address and the fix
//! ([`verdict`]); a healthy cluster gives one `ok` line per rank and per
//! worker. The stand-in and the probes are agent requests under the
//! cluster key ([`rlx_proto::handshake::path_check`]).

mod verdict;

pub use rlx_net::check::{Check, Status};
pub use verdict::{verdict, Dial};

use crate::linkmap::{MapOptions, MapTarget};
use rlx_proto::handshake::path_check::{path_listen, path_probe, Outcome, PROBE_BYTES};
use rlx_proto::handshake::{query, Nonce};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchCheck {
    /// The schema version of this JSON: 1 until a field changes meaning.
    pub v: u32,
    /// Every check, in the order made: agents, workers, then rank by rank.
    pub checks: Vec<Check>,
    /// No check failed.
    pub healthy: bool,
    /// The whole check's wall time, ms.
    pub took_ms: u64,
}

/// Reads the runtime's `hosts.json` (`{"backend": .., "hosts": ["ip:port",
/// ..]}`): the address of each rank, in rank order. The runtime takes
/// only `ip:port` (it parses each as a socket address), so a name is
/// refused here too, naming the entry.
pub fn read_hosts_json(text: &str) -> Result<Vec<SocketAddr>, String> {
    #[derive(serde::Deserialize)]
    struct File {
        hosts: Vec<String>,
    }
    let f: File = serde_json::from_str(text).map_err(|e| {
        format!("not the runtime's hosts.json ({{\"backend\":..,\"hosts\":[\"ip:port\",..]}}): {e}")
    })?;
    f.hosts
        .iter()
        .enumerate()
        .map(|(r, h)| {
            h.parse::<SocketAddr>().map_err(|_| {
                format!("hosts[{r}] is {h:?}: the runtime takes ip:port only (IPv6 as [v6]:port)")
            })
        })
        .collect()
}

/// A box of the check: its node, its agent, its addresses.
struct Box_ {
    /// `hostname (addr)`.
    name: String,
    agent: SocketAddr,
    /// Its addresses, as its agent lists them (and its agent's).
    addrs: Vec<IpAddr>,
}

/// 32 hex of fresh randomness: a stand-in's token.
fn token() -> String {
    Nonce::random()
        .map(|n| n.to_hex()[..32].to_string())
        .unwrap_or_else(|_| format!("{:032x}", fastrand::u128(..)))
}

/// The coordinator's own dial of `at`: connected, and the stand-in
/// answered the token.
async fn coordinator_reaches(at: SocketAddr, token: &str, timeout: Duration) -> bool {
    let run = async {
        let mut s = TcpStream::connect(at).await.ok()?;
        s.write_all(format!("{token} 0\n").as_bytes()).await.ok()?;
        let mut line = String::new();
        BufReader::new(&mut s).read_line(&mut line).await.ok()?;
        (line == "ok 0\n").then_some(())
    };
    matches!(tokio::time::timeout(timeout, run).await, Ok(Some(())))
}

/// Whether the worker at `addr` (`host:port`) accepts a connection.
async fn worker_open(addr: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Checks the launch of `hosts` (rank order, from `hosts.json`) on the
/// boxes of `targets` (the cluster file's nodes and their agents).
pub async fn check_launch(
    targets: &[MapTarget],
    hosts: &[SocketAddr],
    opts: &MapOptions,
) -> LaunchCheck {
    let started = Instant::now();
    let mut checks = Vec::new();
    let key = &opts.keys.keys()[0];
    // The agents: each box's addresses, to know which box each rank is.
    let asked = targets
        .iter()
        .map(|t| query(t.agent, opts.timeout, Some(&opts.keys), None));
    let mut boxes: Vec<Option<Box_>> = Vec::new();
    for (t, r) in targets.iter().zip(futures::future::join_all(asked).await) {
        match r {
            Ok(reply) => {
                let mut addrs: Vec<IpAddr> = reply
                    .caps
                    .links
                    .iter()
                    .flat_map(|l| l.addrs.iter().map(|a| a.to_canonical()))
                    .collect();
                addrs.push(t.agent.ip().to_canonical());
                boxes.push(Some(Box_ {
                    name: format!("{} ({})", reply.caps.hostname, t.addr),
                    agent: t.agent,
                    addrs,
                }));
            }
            Err(e) => {
                checks.push(
                    Check::new(
                        "agent",
                        Status::Fail,
                        format!("{} (agent {}): {e}", t.addr, t.agent),
                    )
                    .fix("start rlx-agent on that box with the cluster's key_file, so its paths can be checked"),
                );
                boxes.push(None);
            }
        }
    }
    // The coordinator dials every worker.
    let dials = targets.iter().map(|t| worker_open(&t.addr, opts.timeout));
    for (t, r) in targets.iter().zip(futures::future::join_all(dials).await) {
        checks.push(match r {
            Ok(()) => Check::new(
                "worker port",
                Status::Ok,
                format!("{}: the RLX worker accepts connections", t.addr),
            ),
            Err(why) => Check::new(
                "worker port",
                Status::Fail,
                format!(
                    "{}: the RLX worker does not accept connections: {why}",
                    t.addr
                ),
            )
            .fix(format!(
                "start the RLX worker on that box, or open its port {} to this machine",
                t.addr.rsplit(':').next().unwrap_or("9100")
            )),
        });
    }
    // Which box each rank is.
    let mut rank_box: Vec<Option<usize>> = Vec::new();
    for (r, at) in hosts.iter().enumerate() {
        let ip = at.ip().to_canonical();
        let holders: Vec<usize> = boxes
            .iter()
            .enumerate()
            .filter(|(_, b)| b.as_ref().is_some_and(|b| b.addrs.contains(&ip)))
            .map(|(i, _)| i)
            .collect();
        match holders.as_slice() {
            [one] => rank_box.push(Some(*one)),
            [] => {
                checks.push(
                    Check::new(
                        "rank",
                        Status::Fail,
                        format!(
                            "rank {r}: hosts.json names {at}, an address no box of the cluster \
                             file lists (or whose agent did not answer)"
                        ),
                    )
                    .fix("write hosts.json again from the cluster's link map (rlx-discover links --hosts-json)"),
                );
                rank_box.push(None);
            }
            many => {
                let names: Vec<&str> = many
                    .iter()
                    .filter_map(|&i| boxes[i].as_ref().map(|b| b.name.as_str()))
                    .collect();
                checks.push(
                    Check::new(
                        "rank",
                        Status::Fail,
                        format!(
                        "rank {r}: {ip} is held by several boxes ({}): the runtime cannot tell \
                         which one it dials",
                        names.join(", ")
                    ),
                    )
                    .fix("give each box an address of its own on the network hosts.json uses"),
                );
                rank_box.push(None);
            }
        }
    }
    let label = |r: usize| match rank_box[r].and_then(|b| boxes[b].as_ref()) {
        Some(b) => format!("rank {r} ({})", b.name),
        None => format!("rank {r}"),
    };
    for (r, &at) in hosts.iter().enumerate() {
        let Some(b) = rank_box[r].and_then(|i| boxes[i].as_ref()) else {
            continue;
        };
        let tok = token();
        let listen_ms = 10_000;
        let stand_in = path_listen(b.agent, key, at, &tok, listen_ms, opts.timeout).await;
        let _listening = match stand_in {
            Ok(l) => l,
            Err(e) => {
                checks.push(
                    Check::new(
                        "stand-in",
                        Status::Fail,
                        format!("{}: the runtime could not listen at {at}: {e}", label(r)),
                    )
                    .fix(
                        "see the reason above; the runtime binds this address and port at start-up",
                    ),
                );
                continue;
            }
        };
        let coordinator = coordinator_reaches(at, &tok, opts.timeout).await;
        let lower: Vec<usize> = (0..r)
            .filter(|&q| rank_box[q].and_then(|i| boxes[i].as_ref()).is_some())
            .collect();
        let probes = lower.iter().map(|&q| {
            let agent = boxes[rank_box[q].expect("filtered")]
                .as_ref()
                .expect("filtered")
                .agent;
            path_probe(agent, key, (at, None), &tok, PROBE_BYTES, opts.timeout)
        });
        let results = futures::future::join_all(probes).await;
        let mut failed = 0;
        for (&q, res) in lower.iter().zip(results) {
            let qbox = boxes[rank_box[q].expect("filtered")]
                .as_ref()
                .expect("filtered");
            let probed = match res {
                Ok(p) => p,
                Err(e) => {
                    failed += 1;
                    checks.push(Check::new(
                        "path",
                        Status::Fail,
                        format!("{} -> {} at {at}: not checked: {e}", label(q), label(r)),
                    ));
                    continue;
                }
            };
            if matches!(probed.outcome, Outcome::Ok { .. }) {
                continue;
            }
            failed += 1;
            // The way back: does r's box, from the address it will listen
            // on, open a connection to q's agent?
            let back_to =
                SocketAddr::new(probed.from.unwrap_or(qbox.agent.ip()), qbox.agent.port());
            let back = path_probe(b.agent, key, (back_to, Some(at.ip())), "", 0, opts.timeout)
                .await
                .ok()
                .map(|p| matches!(p.outcome, Outcome::Ok { .. }));
            let (from, to) = (label(q), label(r));
            let dial = Dial {
                from: &from,
                to: &to,
                at,
                from_addr: probed.from,
                coordinator,
                back,
            };
            if let Some(c) = verdict(&dial, &probed.outcome) {
                checks.push(c);
            }
        }
        if failed == 0 {
            let who = if lower.is_empty() {
                "no lower rank dials it".to_string()
            } else {
                format!(
                    "every lower rank ({}) reached it with full-size packets",
                    lower.len()
                )
            };
            let coord = if coordinator {
                ""
            } else {
                "; the coordinator itself does not reach it (not needed by the runtime)"
            };
            checks.push(Check::new(
                "rank",
                Status::Ok,
                format!("{}: listens at {at}; {who}{coord}", label(r)),
            ));
        }
    }
    let healthy = !checks.iter().any(|c| c.status == Status::Fail);
    LaunchCheck {
        v: 1,
        checks,
        healthy,
        took_ms: started.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_json_is_read_as_the_runtime_reads_it() {
        let h = read_hosts_json(r#"{"backend":"tcp","hosts":["10.0.0.1:9000","[fd00::2]:9000"]}"#)
            .unwrap();
        assert_eq!(
            h,
            vec![
                "10.0.0.1:9000".parse().unwrap(),
                "[fd00::2]:9000".parse().unwrap()
            ]
        );
        let e = read_hosts_json(r#"{"backend":"tcp","hosts":["gpu-a:9000"]}"#).unwrap_err();
        assert!(e.contains("hosts[0]") && e.contains("ip:port only"), "{e}");
        assert!(read_hosts_json("[]").unwrap_err().contains("hosts.json"));
    }
}
