//! **The checkpoint directory** — free space under it and how fast its files
//! read, the two numbers that decide whether a node can hold and load its
//! shard.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the read measurement may take: long enough to get past the
/// first request's latency, short enough that `--probe` stays well under
/// half a second.
pub const IO_BUDGET: Duration = Duration::from_millis(200);

/// Most bytes read per measurement: 512 MiB is what a fast NVMe drive
/// delivers in the budget; a faster one stops here early with a true rate.
pub const IO_MAX_BYTES: u64 = 512 << 20;

/// Below this many bytes read, the "rate" is one request's latency, not a
/// throughput: report 0 (unknown) instead.
pub const IO_MIN_BYTES: u64 = 4 << 20;

/// Size of each read: large sequential requests like a checkpoint loader's.
const CHUNK: usize = 1 << 20;

/// Alignment `O_DIRECT` needs for buffers (the logical block size is at most
/// 4 KiB on current devices).
const ALIGN: usize = 4096;

/// How many directory entries the file walk may look at, so a checkpoint
/// dir that is accidentally `/` does not turn the probe into a disk crawl.
const WALK_MAX_ENTRIES: usize = 10_000;

/// Bytes free to an unprivileged user on the file system holding `dir`.
///
/// A directory that does not exist yet (the agent may be started before the
/// checkpoint is copied) is measured at its nearest existing ancestor; 0 when
/// nothing can be measured.
pub fn free_bytes(dir: &Path) -> u64 {
    let mut at = Some(dir);
    while let Some(p) = at {
        if p.exists() {
            return match nix::sys::statvfs::statvfs(p) {
                #[allow(clippy::unnecessary_cast)] // field widths differ by platform
                Ok(s) => (s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64),
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "statvfs failed; disk_free = 0");
                    0
                }
            };
        }
        at = p.parent();
    }
    0
}

/// Checkpoint read speed in MB/s (10^6 bytes), 0 when unknown.
///
/// Reads the directory's largest files (the weights) sequentially for at
/// most [`IO_BUDGET`] or [`IO_MAX_BYTES`]. Reads bypass the page cache
/// (`O_DIRECT` on Linux, `F_NOCACHE` on macOS) so the number is the drive's,
/// not RAM's, and so that the probe neither warms nor evicts the cache the
/// worker will load from. File systems without direct I/O (tmpfs, some
/// network mounts) are read normally. An empty or absent directory, or one
/// holding less than [`IO_MIN_BYTES`], gives 0.
pub fn read_mbps(dir: &Path) -> f64 {
    let files = largest_files(dir);
    if files.is_empty() {
        tracing::debug!(dir = %dir.display(), "no files to time; io_mbps = 0");
        return 0.0;
    }
    let mut buf = AlignedBuf::new();
    let start = Instant::now();
    let mut total = 0u64;
    'files: for path in files {
        let mut f = match open_uncached(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "cannot open for the read test");
                continue;
            }
        };
        loop {
            if total >= IO_MAX_BYTES || start.elapsed() >= IO_BUDGET {
                break 'files;
            }
            match f.read(buf.as_mut()) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                // Some file systems accept O_DIRECT at open and refuse the
                // first read: fall back to a cached read from where we are.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => match File::open(&path) {
                    Ok(plain) => f = plain,
                    Err(_) => break,
                },
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "read failed in the read test");
                    break;
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if total < IO_MIN_BYTES || secs <= 0.0 {
        tracing::debug!(dir = %dir.display(), bytes = total, "too little data to time; io_mbps = 0");
        return 0.0;
    }
    let mbps = total as f64 / 1e6 / secs;
    tracing::debug!(dir = %dir.display(), bytes = total, secs, mbps, "checkpoint read rate");
    mbps.min(rlx_proto::caps::limits::MAX_IO_MBPS)
}

/// Regular files under `dir` (three levels deep, following file symlinks as
/// in Hugging Face snapshot dirs), largest first.
fn largest_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), 0u32)];
    let mut seen = 0usize;
    while let Some((d, depth)) = pending.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > WALK_MAX_ENTRIES {
                break;
            }
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                if depth < 3 {
                    pending.push((path, depth + 1));
                }
            } else if let Ok(m) = fs::metadata(&path) {
                // Follows a symlink to its file; a link to a directory is
                // not descended into (no loops).
                if m.is_file() && m.len() > 0 {
                    files.push((m.len(), path));
                }
            }
        }
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.into_iter().map(|(_, p)| p).collect()
}

/// Opens a file for reading around the page cache where the OS allows it.
fn open_uncached(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(f) => return Ok(f),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
        File::open(path)
    }
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd;
        let f = File::open(path)?;
        // SAFETY: fcntl on a descriptor we own; failure only means cached reads.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_NOCACHE, 1) };
        Ok(f)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        File::open(path)
    }
}

/// A [`CHUNK`]-byte buffer aligned to [`ALIGN`], as `O_DIRECT` requires.
struct AlignedBuf {
    raw: Vec<u8>,
    offset: usize,
}

impl AlignedBuf {
    fn new() -> Self {
        let raw = vec![0u8; CHUNK + ALIGN];
        let offset = raw.as_ptr().align_offset(ALIGN);
        AlignedBuf { raw, offset }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.offset..self.offset + CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_measured_at_the_nearest_existing_directory() {
        let d = tempfile::tempdir().unwrap();
        let here = free_bytes(d.path());
        assert!(here > 0);
        let later = free_bytes(&d.path().join("not/yet/copied"));
        assert!(
            later > 0,
            "a missing checkpoint dir is measured at its parent"
        );
    }

    #[test]
    fn an_empty_or_missing_checkpoint_dir_reads_at_zero() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_mbps(d.path()), 0.0);
        assert_eq!(read_mbps(&d.path().join("missing")), 0.0);
        fs::write(d.path().join("config.json"), "{}").unwrap();
        assert_eq!(read_mbps(d.path()), 0.0, "a few bytes are not a throughput");
    }

    #[test]
    fn a_checkpoint_with_weights_gets_a_read_rate() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("shards")).unwrap();
        fs::write(
            d.path().join("shards/model-00001.safetensors"),
            vec![7u8; 16 << 20],
        )
        .unwrap();
        fs::write(d.path().join("config.json"), "{}").unwrap();
        let started = Instant::now();
        let r = read_mbps(d.path());
        assert!(r > 0.0, "16 MiB must be enough to time");
        assert!(
            started.elapsed() < IO_BUDGET * 3,
            "the read test must stay bounded"
        );
    }

    #[test]
    fn largest_files_come_first() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("small"), [1u8; 10]).unwrap();
        fs::write(d.path().join("big"), [1u8; 1000]).unwrap();
        let f = largest_files(d.path());
        assert!(f[0].ends_with("big"), "{f:?}");
    }
}
