//! **The heap in use over a long run, from heaptrack** — for the soak's
//! question "are watch's tables bounded?", which RSS alone cannot answer:
//! RSS also holds what the allocator keeps after a free (arena caches,
//! fragmentation), so a slowly rising RSS may be a leak or may be glibc
//! settling. heaptrack records every allocation and free; the bytes still
//! allocated at each moment are the program's own memory, nothing else.
//!
//! How: heaptrack's preload library goes straight into the measured
//! process's environment (`LD_PRELOAD`, and `DUMP_HEAPTRACK_OUTPUT` to a
//! file, set through `env`) rather than through the `heaptrack` script, so
//! the PID the soak signals and samples stays the program's own and the lab
//! wrapper (`ip netns exec`) is untraced. After the run, `heaptrack_interpret` turns the raw
//! trace into heaptrack's format and `heaptrack_print` writes it as massif
//! snapshots (time, heap bytes) plus the allocation sites still live at
//! the end.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The heaptrack pieces this needs, found where Debian installs them.
pub struct Heaptrack {
    preload: PathBuf,
    interpret: PathBuf,
}

impl Heaptrack {
    /// heaptrack if it is installed (`apt-get install heaptrack`), or why not.
    pub fn find() -> Result<Heaptrack, String> {
        for lib in ["/usr/lib/heaptrack", "/usr/lib/x86_64-linux-gnu/heaptrack"] {
            let lib = Path::new(lib);
            let (preload, interpret) = (
                lib.join("libheaptrack_preload.so"),
                lib.join("libexec/heaptrack_interpret"),
            );
            if preload.is_file()
                && interpret.is_file()
                && rlx_lab::kit::peer::on_path("heaptrack_print")
            {
                return Ok(Heaptrack { preload, interpret });
            }
        }
        Err("heaptrack is not installed (apt-get install heaptrack)".into())
    }

    /// `env LD_PRELOAD=… DUMP_HEAPTRACK_OUTPUT=raw`, to put before the
    /// program: through `env` so that only the program is traced, not the
    /// `ip netns exec` that starts it (it execs, so the PID is the same).
    pub fn env_args(&self, raw: &Path) -> Vec<OsString> {
        let mut preload = OsString::from("LD_PRELOAD=");
        preload.push(&self.preload);
        let mut out = OsString::from("DUMP_HEAPTRACK_OUTPUT=");
        out.push(raw);
        vec![preload, out]
    }

    /// The recorded run: heap bytes in use over time, and the top sites
    /// of what was still allocated when it ended. heaptrack's data
    /// (`watch.heaptrack`, for `heaptrack_print` or `heaptrack_gui`), its
    /// massif view and its printed report (`watch.heaptrack.txt`) are
    /// kept in `keep`.
    pub fn read(&self, raw: &Path, keep: &Path) -> Result<HeapRun> {
        std::fs::create_dir_all(keep).with_context(|| format!("creating {}", keep.display()))?;
        let data = keep.join("watch.heaptrack");
        let status = Command::new(&self.interpret)
            .stdin(std::fs::File::open(raw).with_context(|| format!("opening {}", raw.display()))?)
            .stdout(std::fs::File::create(&data)?)
            .status()
            .context("running heaptrack_interpret")?;
        if !status.success() {
            bail!("heaptrack_interpret on {} failed: {status}", raw.display());
        }
        let massif = keep.join("watch.massif");
        let out = Command::new("heaptrack_print")
            .arg("--file")
            .arg(&data)
            .arg("--print-massif")
            .arg(&massif)
            .args(["--massif-detailed-freq", "0"])
            .args(["--print-allocators", "0", "--print-temporary", "0"])
            .args(["--print-leaks", "1"])
            .stderr(Stdio::inherit())
            .output()
            .context("running heaptrack_print")?;
        if !out.status.success() {
            bail!(
                "heaptrack_print on {} failed: {}",
                data.display(),
                out.status
            );
        }
        std::fs::write(keep.join("watch.heaptrack.txt"), &out.stdout)?;
        let timeline = parse_massif(&std::fs::read_to_string(&massif)?);
        if timeline.is_empty() {
            bail!("heaptrack recorded no snapshots in {}", data.display());
        }
        Ok(HeapRun {
            timeline,
            leaks: top_leaks(&String::from_utf8_lossy(&out.stdout), 5),
        })
    }
}

/// What heaptrack saw of one run.
pub struct HeapRun {
    /// (seconds since the program started, heap bytes in use).
    pub timeline: Vec<(f64, u64)>,
    /// The largest sites still allocated at the end, one line each.
    pub leaks: Vec<String>,
}

impl HeapRun {
    /// Mean heap in use, kB, over snapshots in `[from, to)` seconds.
    pub fn mean_kb(&self, from: f64, to: f64) -> Option<f64> {
        let v: Vec<u64> = self
            .timeline
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, b)| *b)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64 / v.len() as f64 / 1024.0)
    }

    /// The highest heap in use, kB.
    pub fn max_kb(&self) -> Option<f64> {
        self.timeline
            .iter()
            .map(|(_, b)| *b)
            .max()
            .map(|b| b as f64 / 1024.0)
    }
}

/// massif's `time=` (in the header's `time_unit`: heaptrack writes `s`)
/// and `mem_heap_B=` of each snapshot.
fn parse_massif(text: &str) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut time = None;
    let mut to_seconds = 1.0;
    for line in text.lines() {
        if let Some(u) = line.strip_prefix("time_unit:") {
            to_seconds = match u.trim() {
                "ms" => 1e-3,
                "us" => 1e-6,
                _ => 1.0,
            };
        } else if let Some(t) = line.strip_prefix("time=") {
            time = t.trim().parse::<f64>().ok();
        } else if let Some(b) = line.strip_prefix("mem_heap_B=") {
            if let (Some(t), Ok(b)) = (time.take(), b.trim().parse::<u64>()) {
                out.push((t * to_seconds, b));
            }
        }
    }
    out
}

/// The `n` largest call stacks of heaptrack_print's "MEMORY LEAKS"
/// section (what was still allocated at the end), each as its size, its
/// count and the first frame that is not the allocator or a container
/// growing (the code that holds the memory).
fn top_leaks(text: &str, n: usize) -> Vec<String> {
    let Some(section) = text.split("MEMORY LEAKS").nth(1) else {
        return Vec::new();
    };
    let plumbing = [
        "alloc::",
        "_$LT$alloc",
        "core::",
        "hashbrown::",
        "__rust",
        "std::",
        "_$LT$std",
        "malloc",
        "realloc",
        "calloc",
        "operator new",
        "0x",
    ];
    let mut stacks: Vec<(f64, String)> = Vec::new();
    let mut lines = section.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(head) = line.strip_suffix(" calls from:") else {
            continue;
        };
        let size = head.split_whitespace().next().map_or(0.0, parse_size);
        let mut frame = None;
        while let Some(next) = lines.peek() {
            if !next.starts_with("    ") {
                break;
            }
            let f = lines.next().unwrap_or_default().trim();
            let is_location = f.starts_with("at ") || f.starts_with("in ");
            if frame.is_none() && !is_location && !plumbing.iter().any(|p| f.starts_with(p)) {
                frame = Some(unescape(strip_hash(f)));
            }
        }
        stacks.push((
            size,
            format!("{head} calls from {}", frame.unwrap_or_else(|| "?".into())),
        ));
    }
    stacks.sort_by(|a, b| b.0.total_cmp(&a.0));
    stacks.into_iter().take(n).map(|(_, s)| s).collect()
}

/// heaptrack's sizes: `512B`, `6.27K`, `1.20M`, `2.00G`.
fn parse_size(s: &str) -> f64 {
    let (num, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        Some('B') => (&s[..s.len() - 1], 1.0),
        _ => (s, 1.0),
    };
    num.parse::<f64>().map_or(0.0, |v| v * mult)
}

/// The escapes heaptrack leaves in a legacy-mangled Rust path
/// (`Watch$LT$C$GT$::run::_$u7b$$u7b$closure$u7d$$u7d$`), as Rust writes them.
fn unescape(f: &str) -> String {
    [
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$C$", ","),
        ("$RF$", "&"),
        ("$u20$", " "),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("..", "::"),
    ]
    .iter()
    .fold(f.to_string(), |s, (from, to)| s.replace(from, to))
}

/// A Rust symbol without its `::h0123456789abcdef` hash.
fn strip_hash(f: &str) -> &str {
    match f.rsplit_once("::h") {
        Some((sym, h)) if h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()) => sym,
        _ => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn massif_snapshots_become_seconds_and_bytes() {
        let t = "desc: heaptrack\ncmd: x\ntime_unit: s\n#-----------\nsnapshot=0\n#-----------\n\
                 time=0.001\nmem_heap_B=100\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=empty\n\
                 #-----------\nsnapshot=1\n#-----------\ntime=2.5\nmem_heap_B=4096\n";
        assert_eq!(parse_massif(t), vec![(0.001, 100), (2.5, 4096)]);
        let ms = "time_unit: ms\n#-----------\nsnapshot=0\ntime=2500\nmem_heap_B=1\n";
        assert_eq!(parse_massif(ms), vec![(2.5, 1)]);
    }

    #[test]
    fn the_largest_leaks_are_named_by_the_first_frame_past_the_allocator() {
        let t = "PEAK\nMEMORY LEAKS\n58.99K leaked over 68139 calls from\n0x1\n  in x\n\
                 6.27K leaked over 582 calls from:\n    alloc::raw_vec::grow_one::h26930fa2de527025\n\
                 \x20     in /x/rlx-discover\n    rlx_proto::caps::NodeCaps::from_json::h82298d11f2931af3\n\
                 \x20     in /x/rlx-discover\n32.77K leaked over 9 calls from:\n    \
                 mdns_sd::service_daemon::Zeroconf::handle_response::hff353b49f3983321\n\
                 \x20     at src/x.rs:1\n\n";
        assert_eq!(
            top_leaks(t, 5),
            vec![
                "32.77K leaked over 9 calls from mdns_sd::service_daemon::Zeroconf::handle_response",
                "6.27K leaked over 582 calls from rlx_proto::caps::NodeCaps::from_json",
            ]
        );
    }

    #[test]
    fn the_escapes_of_a_mangled_path_are_written_as_rust_writes_them() {
        assert_eq!(
            unescape("rlx_discover::watch::Watch$LT$C$GT$::run::_$u7b$$u7b$closure$u7d$$u7d$"),
            "rlx_discover::watch::Watch<C>::run::_{{closure}}"
        );
    }

    #[test]
    fn a_heap_run_averages_the_snapshots_inside_a_window() {
        let r = HeapRun {
            timeline: vec![(0.0, 1024), (10.0, 3072), (70.0, 10240)],
            leaks: Vec::new(),
        };
        assert_eq!(r.mean_kb(0.0, 60.0), Some(2.0));
        assert_eq!(r.mean_kb(100.0, 200.0), None);
        assert_eq!(r.max_kb(), Some(10.0));
    }
}
