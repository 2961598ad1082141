//! **The host itself** — logical cores, RAM, CPU model and host name, read
//! from `/proc` and `/sys` under the probe [`Root`] on Linux and from
//! `sysctl` on macOS.

pub use super::model::Memory;
use super::root::Root;

/// Parses `/proc/meminfo` (values in KiB).
///
/// `MemAvailable` is the kernel's own estimate of what a new process can use
/// (free memory plus reclaimable page cache) and exists since Linux 3.14; on
/// older kernels the sum `MemFree + Buffers + Cached` is the usual
/// approximation. Available memory is clamped to the total so the caps always
/// validate.
pub fn parse_meminfo(text: &str) -> Option<Memory> {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
            kib.checked_mul(1024)
        })
    };
    let total = field("MemTotal")?;
    let avail = field("MemAvailable").unwrap_or_else(|| {
        ["MemFree", "Buffers", "Cached"]
            .iter()
            .filter_map(|f| field(f))
            .sum()
    });
    Some(Memory {
        total,
        avail: avail.min(total),
    })
}

/// Counts CPUs in a kernel CPU list such as `0-3,8-11` (the format of
/// `/sys/devices/system/cpu/online`).
pub fn parse_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.trim().parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// The CPU's marketing name from `/proc/cpuinfo` (`model name` on x86,
/// `Model`/`Hardware` on some ARM boards); `None` when the kernel gives none,
/// as on most ARM servers.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware", "cpu model"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        })
}

/// Logical CPUs online: `/sys/devices/system/cpu/online`, else the
/// `processor` lines of `/proc/cpuinfo`, else what the standard library
/// sees. "Logical" means hardware threads, the unit the planner divides work
/// into; a container's CPU quota is not applied here.
pub fn cores(root: &Root) -> u32 {
    if let Some(n) = root
        .read("/sys/devices/system/cpu/online")
        .and_then(|s| parse_cpu_list(&s))
    {
        return n;
    }
    if let Some(info) = root.read("/proc/cpuinfo") {
        let n = info
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
            .count() as u32;
        if n > 0 {
            return n;
        }
    }
    if root.is_host() {
        if let Some(n) = macos::logical_cpus() {
            return n;
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// RAM total and available; zeros when nothing can be read (the caps then
/// say "unknown" rather than inventing a number).
pub fn memory(root: &Root) -> Memory {
    if let Some(m) = root.read("/proc/meminfo").and_then(|t| parse_meminfo(&t)) {
        return m;
    }
    if root.is_host() {
        if let Some(m) = macos::memory() {
            return m;
        }
    }
    tracing::warn!(path = %root.path("/proc/meminfo").display(), "cannot read RAM size; reporting 0");
    Memory::default()
}

/// The CPU model, for the `cpu` device's name and the GFLOP/s cache key.
pub fn cpu_model(root: &Root) -> String {
    root.read("/proc/cpuinfo")
        .and_then(|t| parse_cpu_model(&t))
        .or_else(|| root.is_host().then(macos::cpu_brand).flatten())
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

/// The host name without a trailing `.local` (the mDNS domain is added by the
/// announcer, not part of the name). Read from the kernel's UTS name under the
/// root so fixtures can set it.
pub fn hostname(root: &Root) -> String {
    let raw = root.read("/proc/sys/kernel/hostname").or_else(|| {
        root.is_host()
            .then(|| nix::unistd::gethostname().ok())
            .flatten()
            .map(|h| h.to_string_lossy().into_owned())
    });
    let name = raw.unwrap_or_default();
    let name = name.trim().trim_end_matches('.');
    name.strip_suffix(".local").unwrap_or(name).to_string()
}

/// macOS has no `/proc`: these read `sysctl` instead. Elsewhere they return
/// `None` and the Linux paths above are the only source.
mod macos {
    #[cfg(target_os = "macos")]
    pub(super) use crate::probe::apple::sysctl::{cpu_brand, logical_cpus, memory};

    #[cfg(not(target_os = "macos"))]
    pub(super) fn logical_cpus() -> Option<u32> {
        None
    }
    #[cfg(not(target_os = "macos"))]
    pub(super) fn memory() -> Option<crate::probe::model::Memory> {
        None
    }
    #[cfg(not(target_os = "macos"))]
    pub(super) fn cpu_brand() -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_total_and_available_in_bytes() {
        let m = parse_meminfo(
            "MemTotal:       16303428 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n",
        )
        .unwrap();
        assert_eq!(m.total, 16303428 * 1024);
        assert_eq!(m.avail, 12000000 * 1024);
    }

    #[test]
    fn old_kernels_without_memavailable_use_free_plus_cache() {
        let m =
            parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 200 kB\n")
                .unwrap();
        assert_eq!(m.avail, 310 * 1024);
    }

    #[test]
    fn meminfo_without_total_is_unknown() {
        assert_eq!(parse_meminfo("MemFree: 5 kB"), None);
    }

    #[test]
    fn cpu_lists_count_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0-3,8-11\n"), Some(8));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-1,5"), Some(3));
        assert_eq!(parse_cpu_list("3-1"), None, "a reversed range is garbage");
        assert_eq!(parse_cpu_list(""), None);
    }

    #[test]
    fn cpu_model_comes_from_model_name_on_x86_and_model_on_boards() {
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n")
                .as_deref(),
            Some("AMD EPYC 7763 64-Core Processor")
        );
        assert_eq!(
            parse_cpu_model("processor : 0\nBogoMIPS : 108\n\nModel : Raspberry Pi 5 Model B\n")
                .as_deref(),
            Some("Raspberry Pi 5 Model B")
        );
        assert_eq!(parse_cpu_model("processor : 0\nCPU part : 0xd0c\n"), None);
    }
}
