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

use crate::announce::{AnnounceOptions, Announcer, Shutdown, Update};
use crate::cli::AgentArgs;
use crate::register::{maintain, RegisterOptions, Registration};
use crate::server::serve;
use anyhow::{Context, Result};
use rlx_discover::caps::NodeCaps;
use rlx_discover::keys::KeyRing;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
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
/// each wake-up runs its housekeeping code (measured: 97 pages, 390 kB,
/// back in after a trim at 3 s). Trimming earlier pages out code that is
/// then pulled back in.
pub const TRIM_AFTER: Duration = Duration::from_secs(6);

/// Binds the handshake port: dual-stack `[::]` when the host has IPv6, else
/// IPv4 only (IPv6 disabled by sysctl, as in many containers and labs).
async fn bind(port: u16) -> Result<TcpListener> {
    match TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))).await {
        Ok(l) => Ok(l),
        Err(v6) => TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            .await
            .with_context(|| {
                format!("cannot listen on port {port} (IPv6: {v6}); is another agent running? choose another with --port")
            }),
    }
}

/// Runs the agent until SIGINT or SIGTERM. `caps` is the first probe (or
/// the caps file).
pub async fn run(args: &AgentArgs, caps: NodeCaps) -> Result<()> {
    let shutdown = Shutdown::on_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let key = match &args.key_file {
        Some(p) => Some(
            KeyRing::load(p)
                .with_context(|| format!("--key-file {}", p.display()))?
                .first()
                .clone(),
        ),
        None => None,
    };
    let listener = bind(args.port).await?;
    let port = listener.local_addr()?.port();
    let (caps_tx, caps_rx) = watch::channel(Arc::new(caps.clone()));
    // Prepared before anything is announced: a bad key file or zone is a
    // start-up error, like a bad --key-file.
    let registration = match (&args.register, &args.tsig_key) {
        (Some(target), Some(key_file)) => Some(
            Registration::prepare(
                &RegisterOptions {
                    target: target.clone(),
                    key_file: key_file.clone(),
                    name: args.name.clone(),
                    port,
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
    let server = tokio::spawn(serve(listener, caps_rx.clone(), key, async move {
        stop.wait().await;
    }));
    let registrar = registration.map(|reg| {
        let stop = shutdown.clone();
        tokio::spawn(maintain(reg, caps_rx, async move { stop.wait().await }))
    });
    let announcer = Announcer::start(
        &caps,
        AnnounceOptions {
            name: args.name.clone(),
            port,
            interfaces: args.interfaces.clone(),
            ..Default::default()
        },
    )
    .context("announcing over mDNS")?;
    tracing::info!(
        instance = %announcer.instance_name(),
        port,
        id = %caps.id,
        keyed = args.key_file.is_some(),
        "announcing _rlx._tcp; answering the handshake"
    );

    // Start-up (argument parsing, the probe, the GPU libraries, mdns-sd's
    // probing and its two announcements) touched code that the idle agent
    // never runs again; give those pages back once that is over.
    tokio::spawn(async {
        tokio::time::sleep(TRIM_AFTER).await;
        trim_resident_memory();
    });

    let sig = if args.caps_file.is_some() {
        // Simulated or overridden caps do not change by themselves.
        shutdown.wait().await
    } else {
        reprobe_until_stopped(args, &caps, &shutdown, &caps_tx, &announcer).await
    };
    tracing::info!("{sig}: saying goodbye");
    let goodbye = announcer.shutdown();
    // The DNS deletion runs alongside the mDNS goodbyes.
    let (said, _) = tokio::join!(goodbye, async {
        if let Some(r) = registrar {
            let _ = r.await;
        }
    });
    said.context("sending mDNS goodbyes")?;
    let _ = server.await;
    Ok(())
}

/// Re-probes every [`REPROBE_INTERVAL`]: the handshake always serves the
/// latest caps; the announcer re-announces only material changes.
async fn reprobe_until_stopped(
    args: &AgentArgs,
    first: &NodeCaps,
    shutdown: &Shutdown,
    caps_tx: &watch::Sender<Arc<NodeCaps>>,
    announcer: &Announcer,
) -> crate::announce::StopSignal {
    let mut tick = tokio::time::interval(REPROBE_INTERVAL);
    tick.tick().await; // the first tick is immediate; we just probed
    loop {
        tokio::select! {
            sig = shutdown.wait() => return sig,
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
                c.gflops = first.gflops;
                c.io_mbps = first.io_mbps;
                caps_tx.send_replace(Arc::new(c.clone()));
                match announcer.update(&c) {
                    Ok(Update::Announced(why)) => tracing::info!("re-announced: {why}"),
                    Ok(Update::Deferred { reason, .. }) => {
                        tracing::debug!("change deferred by the rate limit: {reason}")
                    }
                    Ok(Update::Unchanged) => {}
                    Err(e) => tracing::warn!("could not re-announce: {e:#}"),
                }
            }
            Err(e) => tracing::warn!("re-probe failed; keeping the last caps: {e:#}"),
        }
    }
}

/// Hands start-up memory back to the system once the agent is idle: unused
/// heap (`malloc_trim`) and the resident pages of this program's own code
/// (`MADV_PAGEOUT`, Linux 5.4+; pages the idle loop uses fault back in on
/// demand). An agent sits on every machine of a cluster for months, mostly
/// idle; what it keeps resident should be what it uses, not what start-up
/// touched. Best effort: on other kernels or systems it does nothing.
///
/// What decides whether the kernel really lets the pages go (measured on
/// Linux 6.18, ext4, a 5.9 MB binary: without these the executable stayed
/// at 2.7-4.1 MB resident; with them 0.7-0.8 MB, of which 144 kB is RELRO
/// data, anonymous memory that stays):
/// - The file's dirty pages are written back first (`fdatasync`). Reclaim
///   skips dirty page-cache pages, and a binary that was just built,
///   copied or installed stays dirty for up to 30 s (the kernel's
///   writeback delay), longer than the agent takes to start. This alone
///   made the difference in the footprint benchmark, which copies or
///   builds the binary right before starting it.
/// - `POSIX_FADV_DONTNEED` on the file first: it drops the file's cached
///   pages that nobody maps, so a later fault cannot map them in as
///   "fault-around" neighbours, and, finding mapped pages it cannot drop,
///   drains every CPU's LRU batches (mm/fadvise.c), whereas `MADV_PAGEOUT`
///   drains only the calling CPU's and skips pages still queued elsewhere.
///   Measured effect: about 0.1 MB more paged out.
/// - `MADV_RANDOM` on the mappings: a later fault reads the one page it
///   needs instead of a read-ahead window, so what comes back is closer to
///   what the agent really runs (measured: a re-probe brought back 1.65 MB
///   with it, 2.2 MB without).
///
/// Pages shared with another process that maps the same file (a second
/// agent, `rlx-agent --probe` run at that moment) are skipped by the
/// kernel; they are charged to both.
///
/// The kernel pages file-backed memory out only for a process that owns
/// the file or may write it (`can_do_file_pageout`, mm/madvise.c: otherwise
/// it would be a side channel on shared files); for anyone else the call
/// succeeds and leaves the executable resident. So this works for an agent
/// run by the binary's owner (root with a root-owned binary, as in the
/// benchmark) and not under `rlx-agent.service`, whose `DynamicUser` does
/// not own `/usr/local/bin/rlx-agent` (measured as uid 65534: the
/// executable stayed at 4.08 MB resident). The kernel still reclaims
/// those clean pages under memory pressure.
pub fn trim_resident_memory() {
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
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        // /proc/self/exe opens the file that is mapped, even after an
        // upgrade replaced the one at the path.
        if let Ok(file) = std::fs::File::open("/proc/self/exe") {
            // Read-only file systems refuse; their pages are never dirty.
            let _ = file.sync_data();
            // SAFETY: advice on an open descriptor; it never changes data.
            unsafe {
                libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
        let exe = exe.to_string_lossy();
        for line in maps.lines() {
            // start-end perms offset dev inode path
            let mut f = line.split_whitespace();
            let (Some(range), Some(perms)) = (f.next(), f.next()) else {
                continue;
            };
            if !line.ends_with(&*exe) || !perms.starts_with('r') || perms.contains('w') {
                continue;
            }
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            else {
                continue;
            };
            // SAFETY: the range is a whole read-only file mapping of our own
            // executable taken from /proc/self/maps; MADV_RANDOM only changes
            // read-ahead, and MADV_PAGEOUT only asks the kernel to reclaim
            // its clean pages, which are re-read from the file when touched
            // again. Neither changes memory contents.
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_RANDOM);
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_PAGEOUT);
            }
        }
    }
}
