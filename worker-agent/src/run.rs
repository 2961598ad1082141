//! **Run mode** — what `rlx-agent` does when it is not asked to `--probe`:
//! serve the handshake, announce the box over mDNS, keep the announcement
//! current, and say goodbye on SIGINT/SIGTERM.
//!
//! Order matters: signal handlers first (a SIGTERM during start-up must
//! still produce goodbyes, not a silent death), then the listener (so the
//! announced port is the one really bound, which matters for `--port 0`),
//! then the announcement and, with `--register`, the DNS registration
//! ([`crate::register`]). On a stop request the announcer sends its goodbye
//! packets (TTL 0) and waits until they are out, the DNS records are
//! deleted, the server stops, and the process exits 0.

use crate::announce::{AnnounceOptions, Announcer};
use crate::cli::AgentArgs;
use crate::register::{maintain, RegisterOptions, Registration};
use crate::server::{serve_signed, Limits};
use crate::shutdown::Shutdown;
use anyhow::{Context, Result};
use rlx_proto::caps::NodeCaps;
use rlx_proto::identity::NodeKey;
use rlx_proto::keys::KeyRing;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a probing agent looks at its box again (RAM and disk free, a
/// device appearing or vanishing). Reading /proc and sysfs costs a few
/// milliseconds, so once a minute keeps the idle agent far below 0.01% CPU
/// while free memory shown to coordinators is at most a minute old; the
/// announcer's own thresholds and rate limit decide whether anything is
/// re-announced.
pub const REPROBE_INTERVAL: Duration = Duration::from_secs(60);

/// How long after the announcement starts the agent trims its memory
/// ([`trim_resident_memory`]): after the last thing start-up wakes for.
/// mdns-sd probes for 0.75 s and announces twice, one second apart (RFC
/// 6762 §8.3); the interface checks after start end at 2.5 s
/// ([`crate::announce::LINK_SETTLE`]); and the daemon's first interface
/// check, put on its timer list for 5 s after its start, still wakes it
/// once after the check is turned off (mdns-sd does not remove timers), and
/// each wake-up runs its housekeeping code (a trim at 3 s saw those pages
/// fault straight back in). Trimming earlier pages out code that is then
/// pulled back in.
pub const TRIM_AFTER: Duration = Duration::from_secs(6);

/// A fresh incarnation for this run: 64 random bits as 16 hex characters,
/// announced in TXT ([`rlx_proto::txt::INCARNATION_KEY`]) and in every
/// handshake reply. Random rather than a boot epoch or a start time: a
/// restart within the same second (a supervisor restarting a crashed agent
/// at once) still gets another one, and nothing about the host leaks.
fn incarnation() -> Result<String> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| {
        anyhow::anyhow!("no random bytes for the agent's incarnation (getrandom: {e})")
    })?;
    Ok(hex::encode(b))
}

/// Runs the agent until SIGINT or SIGTERM. `caps` is the first probe (or
/// the caps file).
pub async fn run(args: &AgentArgs, mut caps: NodeCaps) -> Result<()> {
    caps.incarnation = Some(incarnation()?);
    let shutdown = Shutdown::on_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let key = match args.key_path()? {
        Some(p) => Some(
            KeyRing::load(&p)
                .with_context(|| format!("--key-file (key_file) {}", p.display()))?
                .first()
                .clone(),
        ),
        None => None,
    };
    let node_key = node_key(args)?;
    // The caps name this agent's own key, whatever a caps file copied from
    // another machine said (a reply naming a key it cannot sign with is
    // refused).
    caps.node_key = node_key.as_ref().map(|k| k.public().to_base64());
    anyhow::ensure!(
        args.advertise.len() <= rlx_proto::handshake::MAX_ADVERTISED,
        "--advertise given {} times; at most {} endpoints can be declared",
        args.advertise.len(),
        rlx_proto::handshake::MAX_ADVERTISED
    );
    let listener = crate::listen::Incoming::bind(args.port, &args.interfaces).await?;
    let port = listener.port()?;
    if !args.interfaces.is_empty() {
        tracing::info!(
            addresses = ?listener.addresses(),
            "the handshake port listens on the addresses of {} and loopback only",
            args.interfaces.join(", ")
        );
    }
    // With `--port 0` the port is known only now.
    caps.agent_port = Some(port);
    if let Some(held) = &caps.worker_held_by {
        tracing::warn!(
            worker_port = args.worker_port,
            "{} is held by {held}, not an RLX worker: coordinators report the worker port as held \
             by it; move the worker (worker_port = N, --worker-port) or the other program",
            args.worker_port
        );
    } else if caps.worker_listening == Some(false) {
        tracing::info!(
            worker_port = args.worker_port,
            "nothing listens on the worker port yet: coordinators write this node all the same \
             and report its worker as not listening"
        );
    }
    match caps.ssh_port {
        Some(ssh_port) => tracing::info!(ssh_port, "an SSH server answers on this box"),
        None => tracing::info!(
            "no SSH server answers on this box: the RLX runtime probes and launches workers over \
             ssh; start sshd (sudo systemctl enable --now ssh) or the coordinator cannot launch here"
        ),
    }
    let caps_tx = Arc::new(watch::channel(Arc::new(caps.clone())).0);
    let caps_rx = caps_tx.subscribe();
    // Prepared before anything is announced: a bad key file or zone is a
    // start-up error, like a bad --key-file.
    let registration = match (&args.register, args.tsig_path()?) {
        (Some(target), Some(key_file)) => Some(
            Registration::prepare(
                &RegisterOptions {
                    target: target.clone(),
                    key_file,
                    name: args.name.clone(),
                    port: args.worker_port,
                    lease: Duration::from_secs(args.lease_secs),
                    addrs: args.register_addrs.clone(),
                },
                &caps,
            )
            .await
            .with_context(|| format!("--register {target}"))?,
        ),
        _ => None,
    };
    let stop = shutdown.clone();
    let measure = args.measure_rules();
    match crate::measure::refusal(measure.policy, key.is_some()) {
        Some(why) => tracing::info!("link measurement refused to everyone: {why}"),
        None if key.is_none() => tracing::warn!(
            "link measurement allowed to anyone who reaches port {port} (--measure any, no \
             --key-file): up to 64 MiB each way, {} a minute per address",
            measure.per_minute
        ),
        None => {}
    }
    // The peers the server accepts, told to the built-in responder once it
    // runs (vendor/mdns-sd/PATCHES.md §36).
    let proved = crate::proved::ProvedPeers::default();
    let server = tokio::spawn(serve_signed(
        listener,
        Arc::clone(&caps_tx),
        (key, node_key.map(Arc::new)),
        args.advertise.clone(),
        Limits {
            measure,
            ..Limits::default()
        },
        proved.clone(),
        async move {
            stop.wait().await;
        },
    ));
    let announced_caps = caps_rx.clone();
    let registrar = registration.map(|reg| {
        let stop = shutdown.clone();
        tokio::spawn(maintain(reg, caps_rx, async move { stop.wait().await }))
    });
    let announcer = Announcer::start(
        &caps,
        AnnounceOptions {
            name: args.name.clone(),
            port: args.worker_port,
            interfaces: args.interfaces.clone(),
            responder: args.responder,
            ..Default::default()
        },
    )
    .context("announcing over mDNS")?;
    if let Some(prove) = announcer.source_prover() {
        proved.connect(prove);
    }
    tracing::info!(
        instance = %announcer.instance_name(),
        responder = %announcer.responder(),
        port,
        worker_port = args.worker_port,
        id = %caps.id,
        keyed = args.key_file.is_some(),
        advertised = ?args.advertise,
        "announcing {} (worker port {}); answering the handshake on port {port}",
        rlx_proto::service::SERVICE,
        args.worker_port
    );

    // Start-up (argument parsing, the probe, the GPU libraries, mdns-sd's
    // probing and its two announcements) touched code that the idle agent
    // never runs again; give those pages back once that is over.
    tokio::spawn(async {
        tokio::time::sleep(TRIM_AFTER).await;
        trim_resident_memory(true);
    });

    let reprobe = async {
        // Simulated or overridden caps do not change by themselves.
        if args.caps_file.is_none() {
            reprobe_until_stopped(args, &caps, &caps_tx, shutdown.wait()).await;
        }
    };
    // On a stop request the DNS deletion runs alongside the mDNS goodbyes.
    let (said, (), ()) = tokio::join!(
        announcer.run(announced_caps, shutdown.wait()),
        reprobe,
        async {
            if let Some(r) = registrar {
                let _ = r.await;
            }
        }
    );
    said.context("sending mDNS goodbyes")?;
    let _ = server.await;
    Ok(())
}

/// The agent's node key ([`rlx_proto::identity`]): kept in the state
/// directory beside the node id, made there on first start. A key file
/// that cannot be used (unsafe, corrupt, unwritable directory) stops the
/// start with the file and the fix: answering with a new key would make
/// every coordinator that pinned the old one refuse this node. Without a
/// state directory (`--root` fixtures without `--state-dir`) the agent has
/// none and answers like an older agent.
fn node_key(args: &AgentArgs) -> Result<Option<NodeKey>> {
    let Some(dir) = args.state_dir() else {
        tracing::warn!(
            "no state directory: answering without a node key (coordinators cannot pin this \
             node's identity); pass --state-dir"
        );
        return Ok(None);
    };
    let key = NodeKey::load_or_create(&dir)?;
    tracing::info!(
        fingerprint = %key.public().fingerprint(),
        "node key {}",
        dir.join(rlx_proto::identity::NODE_KEY_FILE).display()
    );
    Ok(Some(key))
}

/// Re-probes every [`REPROBE_INTERVAL`] until `shutdown` resolves: the
/// handshake always serves the latest caps; the announcer
/// ([`Announcer::run`]) and the DNS registration re-announce only material
/// changes.
async fn reprobe_until_stopped(
    args: &AgentArgs,
    first: &NodeCaps,
    caps_tx: &watch::Sender<Arc<NodeCaps>>,
    shutdown: impl Future,
) {
    let mut tick = tokio::time::interval(REPROBE_INTERVAL);
    tick.tick().await; // the first tick is immediate; we just probed
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tick.tick() => {}
        }
        // Re-probes skip the measurements (GFLOP/s and checkpoint reads) and
        // keep the first figures: they do not drift, and reading the
        // checkpoint dir every minute would cost real I/O and CPU.
        let mut quick = args.clone();
        quick.no_bench = true;
        let fresh = tokio::task::spawn_blocking(move || quick.caps()).await;
        match fresh.map_err(anyhow::Error::from).and_then(|r| r) {
            Ok(mut c) => {
                c.agent_port = first.agent_port;
                c.gflops = first.gflops;
                c.io_mbps = first.io_mbps;
                c.incarnation.clone_from(&first.incarnation);
                caps_tx.send_replace(Arc::new(c));
            }
            Err(e) => tracing::warn!("re-probe failed; keeping the last caps: {e:#}"),
        }
        // The probe's code goes back out of this process's memory until the
        // next re-probe; it stays in the page cache, so that one costs minor
        // faults, not disk reads (without this an idle probing agent keeps
        // the probe's code resident after its first re-probe; its idle size
        // is in BENCHMARKS.md, "Agent footprint").
        trim_resident_memory(false);
    }
}

/// Hands start-up memory back to the system once the agent is idle: unused
/// heap (`malloc_trim`) and the pages of this program's own code that
/// start-up touched (argument parsing, the probe, the GPU libraries) and the
/// idle loop never runs again. An agent sits on every machine of a cluster
/// for months, mostly idle; what it keeps resident should be what it uses,
/// not what start-up touched. Pages the idle loop or a re-probe needs fault
/// back in on demand, from the page cache. Best effort: on other systems it
/// does nothing.
///
/// How, and why this way:
/// - The code mappings (read-only, and holding no copied-on-write page) are
///   unmapped with `MADV_DONTNEED`, which any process may do to its own
///   private mappings. `MADV_PAGEOUT` would also evict the pages from the
///   page cache, but the kernel does that only for a process that owns the
///   file or may write it (`can_do_file_pageout`, mm/madvise.c): under
///   `rlx-agent.service`, whose `DynamicUser` does not own
///   `/usr/local/bin/rlx-agent`, it did nothing (run as uid 65534, the
///   executable stayed resident whole).
/// - RELRO (relocated data made read-only after start-up) holds private
///   copies that `MADV_DONTNEED` would discard, so it only gets
///   `MADV_PAGEOUT`, which keeps contents.
/// - `MADV_RANDOM` first: a later fault reads the one page it needs instead
///   of a read-ahead window, so what comes back is closer to what the agent
///   really runs (a re-probe brings back about a quarter less with it than
///   without).
/// - With `evict_cache` (after start-up, not after each re-probe, whose
///   code is needed again a minute later), the file's dirty pages are then
///   written back (`fdatasync`: a binary just built or installed stays
///   dirty for up to 30 s, and reclaim skips dirty pages) and
///   `POSIX_FADV_DONTNEED` drops the cached pages nobody maps any more, so
///   the memory is freed, not just unmapped, where the kernel allows.
///
/// Linux only. On macOS it does nothing: there is no `/proc/self/smaps` to
/// find the executable's mappings by, and the kernel reclaims clean file
/// pages of an idle process under memory pressure on its own (the agent's
/// resident size there is what Activity Monitor's "Memory" shows, not a
/// figure it can trim).
pub fn trim_resident_memory(evict_cache: bool) {
    #[cfg(not(target_os = "linux"))]
    let _ = evict_cache;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: malloc_trim only releases free heap memory.
        unsafe {
            libc::malloc_trim(0);
        }
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return;
        };
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return;
        };
        for m in exe_mappings(&smaps, &exe.to_string_lossy()) {
            let (a, len) = (m.start as *mut libc::c_void, m.end - m.start);
            if m.anonymous_kb == 0 {
                // SAFETY: a read-only private mapping of our own executable
                // that holds no anonymous (copied-on-write) page, so every
                // page in it is the file's own: MADV_DONTNEED unmaps them
                // from this process, and a later touch maps the same bytes
                // back from the page cache (or the file). MADV_RANDOM only
                // changes read-ahead. Unlike MADV_PAGEOUT this needs no
                // ownership of the file, so it works under the service's
                // DynamicUser too.
                unsafe {
                    libc::madvise(a, len, libc::MADV_RANDOM);
                    libc::madvise(a, len, libc::MADV_DONTNEED);
                }
            } else {
                // RELRO: relocated data, made read-only after start-up. Its
                // pages are private copies that MADV_DONTNEED would throw
                // away; MADV_PAGEOUT only asks the kernel to swap them out,
                // keeping their contents.
                // SAFETY: as above; MADV_PAGEOUT never changes contents.
                unsafe {
                    libc::madvise(a, len, libc::MADV_PAGEOUT);
                }
            }
        }
        // With `evict_cache` (once, after start-up), the pages just unmapped
        // are dropped from the page cache too, where the kernel can (clean,
        // mapped by nobody). /proc/self/exe opens the file that is mapped,
        // even after an upgrade replaced the one at the path.
        if !evict_cache {
            return;
        }
        if let Ok(file) = std::fs::File::open("/proc/self/exe") {
            // Read-only file systems refuse; their pages are never dirty.
            let _ = file.sync_data();
            // SAFETY: advice on an open descriptor; it never changes data.
            unsafe {
                libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// A read-only mapping of the executable, from `/proc/self/smaps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExeMapping {
    /// First address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
    /// Anonymous (copied-on-write) memory in it, kB: nonzero for RELRO.
    pub anonymous_kb: u64,
}

/// The read-only, non-writable mappings of `exe` in `smaps` text.
pub fn exe_mappings(smaps: &str, exe: &str) -> Vec<ExeMapping> {
    let mut out: Vec<ExeMapping> = Vec::new();
    let mut current: Option<ExeMapping> = None;
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                // A mapping header: start-end perms offset dev inode path.
                out.extend(current.take());
                let perms = f.next().unwrap_or("");
                if line.ends_with(exe) && perms.starts_with('r') && !perms.contains('w') {
                    current = Some(ExeMapping {
                        start: a,
                        end: b,
                        // Until its Anonymous line says otherwise.
                        anonymous_kb: u64::MAX,
                    });
                }
                continue;
            }
        }
        if first == "Anonymous:" {
            if let (Some(m), Some(kb)) = (current.as_mut(), f.next()) {
                // Unreadable means "unknown": treat as holding copies.
                m.anonymous_kb = kb.parse().unwrap_or(u64::MAX);
            }
        }
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0a0000000-55d0a0100000 r--p 00000000 08:01 1234 /usr/local/bin/rlx-agent
Size:               1024 kB
Rss:                 512 kB
Anonymous:             0 kB
55d0a0100000-55d0a0500000 r-xp 00100000 08:01 1234 /usr/local/bin/rlx-agent
Size:               4096 kB
Anonymous:             0 kB
55d0a0500000-55d0a0524000 r--p 00500000 08:01 1234 /usr/local/bin/rlx-agent
Size:                144 kB
Anonymous:           144 kB
55d0a0524000-55d0a0528000 rw-p 00524000 08:01 1234 /usr/local/bin/rlx-agent
Anonymous:            16 kB
7f0000000000-7f0000100000 r-xp 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
";

    #[test]
    fn only_read_only_mappings_of_our_executable_are_trimmed_and_relro_is_told_apart() {
        let m = exe_mappings(SMAPS, "/usr/local/bin/rlx-agent");
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!((m[0].start, m[0].anonymous_kb), (0x55d0a0000000, 0));
        assert_eq!(
            (m[1].start, m[1].end, m[1].anonymous_kb),
            (0x55d0a0100000, 0x55d0a0500000, 0)
        );
        assert_eq!(m[2].anonymous_kb, 144, "RELRO holds private copies");
    }

    #[test]
    fn a_mapping_without_an_anonymous_line_is_not_assumed_clean() {
        let smaps = "1000-2000 r-xp 00000000 08:01 1 /bin/x\nSize: 4 kB\n";
        assert_eq!(exe_mappings(smaps, "/bin/x")[0].anonymous_kb, u64::MAX);
        let odd = "1000-2000 r-xp 00000000 08:01 1 /bin/x\nAnonymous: ? kB\n";
        assert_eq!(exe_mappings(odd, "/bin/x")[0].anonymous_kb, u64::MAX);
    }

    #[test]
    fn trimming_our_own_memory_leaves_the_program_working() {
        let before: u64 = (0..1000u64).map(|x| x * x).sum();
        trim_resident_memory(true);
        let after: u64 = (0..1000u64).map(|x| x * x).sum();
        assert_eq!(before, after);
        // Formatting and allocation code paged back in still runs.
        assert_eq!(format!("{:?}", vec![1, 2]), "[1, 2]");
    }
}
