//! **Macs: the Metal GPUs and the Neural Engine** — read from `sysctl` and
//! `system_profiler SPDisplaysDataType -json` on macOS; the parsing is plain
//! functions so it is tested on Linux against recorded outputs
//! (`fixtures/macos/`, provenance in `fixtures/README.md`).
//!
//! - **Apple Silicon**: one GPU sharing the whole RAM (unified memory:
//!   reported with `mem_bytes = 0`, which selection reads as "as much as
//!   RAM", the seed's rule) named with its core count as `system_profiler`
//!   reports it (`sppci_cores`, which macOS takes from the GPU's IOKit
//!   entry, `gpu-core-count`), and one Neural Engine (`ane`, reported but
//!   never planned on). When the administrator set `iogpu.wired_limit_mb`
//!   (the memory the GPU may wire, 0 = macOS's default, about two thirds to
//!   three quarters of RAM, which only Metal's
//!   `recommendedMaxWorkingSetSize` tells and the agent does not link
//!   Metal), the limit is named in the GPU's name: information for people,
//!   not a change of selection (the caps have no field for it yet).
//! - **Intel Macs**: their discrete GPUs (AMD Radeon Pro, Vega) are listed by
//!   `system_profiler` with their VRAM and reported as `metal` with it.
//!   Integrated Intel GPUs are left out: what they show as VRAM is a small
//!   shared carve-out, no model would be planned on one, and reporting it
//!   unified would count it as all of RAM.

use rlx_proto::caps::DeviceInfo;

/// One GPU as `system_profiler SPDisplaysDataType -json` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfiledGpu {
    /// `sppci_model` (`Apple M1 Pro`, `AMD Radeon Pro 5500M`).
    pub model: String,
    /// `sppci_cores`, Apple GPUs only.
    pub cores: Option<u32>,
    /// `spdisplays_vram` (dedicated memory), bytes.
    pub vram_bytes: Option<u64>,
    /// Apple's own GPU (`spdisplays_vendor` = `sppci_vendor_Apple`).
    pub apple: bool,
    /// Built into the CPU package (`sppci_bus` = `spdisplays_builtin`).
    pub builtin: bool,
}

/// The GPUs in `system_profiler SPDisplaysDataType -json` output (entries of
/// another device type, and any output that is not the expected JSON, give
/// none).
pub fn parse_displays(json: &str) -> Vec<ProfiledGpu> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Vec::new();
    };
    let Some(items) = v.get("SPDisplaysDataType").and_then(|d| d.as_array()) else {
        return Vec::new();
    };
    let text = |item: &serde_json::Value, key: &str| {
        item.get(key)
            .and_then(|x| x.as_str())
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
    };
    items
        .iter()
        .filter(|item| text(item, "sppci_device_type").is_none_or(|t| t == "spdisplays_gpu"))
        .filter_map(|item| {
            let model = text(item, "sppci_model")?;
            let vendor = text(item, "spdisplays_vendor").unwrap_or_default();
            Some(ProfiledGpu {
                apple: vendor.eq_ignore_ascii_case("sppci_vendor_Apple")
                    || model.starts_with("Apple "),
                cores: text(item, "sppci_cores").and_then(|c| c.parse().ok()),
                vram_bytes: text(item, "spdisplays_vram").and_then(|v| parse_size(&v)),
                builtin: text(item, "sppci_bus").as_deref() == Some("spdisplays_builtin"),
                model,
            })
        })
        .collect()
}

/// `"8 GB"`, `"1536 MB"` (how `system_profiler` writes memory sizes, binary
/// units) in bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let (n, unit) = s.trim().split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let shift = match unit.trim() {
        "KB" => 10,
        "MB" => 20,
        "GB" => 30,
        "TB" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// `iogpu.wired_limit_mb` (macOS 14 and later) as a limit in bytes: `None`
/// when 0, which means macOS's own default.
pub fn wired_limit_bytes(mb: Option<u64>) -> Option<u64> {
    mb.filter(|&m| m > 0).map(|m| m << 20)
}

/// Devices of a Mac, from its CPU brand string (`machdep.cpu.brand_string`,
/// e.g. `Apple M2 Pro`), `hw.optional.arm64`, the GPUs `system_profiler`
/// lists and the GPU wired-memory limit (see the module docs).
pub fn devices(
    brand: Option<&str>,
    arm64: bool,
    gpus: &[ProfiledGpu],
    wired_limit: Option<u64>,
) -> Vec<DeviceInfo> {
    let dev = |label: &str, name: String, mem_bytes: u64, unified: bool| DeviceInfo {
        device: label.into(),
        name,
        mem_bytes,
        unified,
        gflops: 0.0,
        available: true,
        ..Default::default()
    };
    if !arm64 {
        // Intel: the discrete GPUs, with their own memory.
        return gpus
            .iter()
            .filter(|g| !g.apple && !g.builtin)
            .filter_map(|g| Some(dev("metal", g.model.clone(), g.vram_bytes?, false)))
            .collect();
    }
    let chip = brand
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .unwrap_or("Apple Silicon");
    let gpu = gpus.iter().find(|g| g.apple);
    let mut name = format!("{} GPU", gpu.map_or(chip, |g| g.model.as_str()));
    let mut notes = Vec::new();
    if let Some(c) = gpu.and_then(|g| g.cores) {
        notes.push(format!("{c}-core"));
    }
    if let Some(limit) = wired_limit {
        notes.push(format!("wired limit {}", gib(limit)));
    }
    if !notes.is_empty() {
        name = format!("{name} ({})", notes.join(", "));
    }
    vec![
        dev("metal", name, 0, true),
        dev("ane", format!("{chip} Neural Engine"), 0, true),
    ]
}

/// `51539607552` -> `"48 GiB"`, `"10.5 GiB"`.
fn gib(bytes: u64) -> String {
    let g = bytes as f64 / f64::from(1u32 << 30);
    if g.fract() == 0.0 {
        format!("{g:.0} GiB")
    } else {
        format!("{g:.1} GiB")
    }
}

/// Decodes a `sysctl` string value (NUL-terminated C string).
pub fn parse_c_string(raw: &[u8]) -> Option<String> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let s = String::from_utf8_lossy(&raw[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Decodes a `sysctl` integer value: 4 or 8 bytes in native byte order,
/// depending on the key (`hw.logicalcpu` is 32-bit, `hw.memsize` 64-bit).
pub fn parse_int(raw: &[u8]) -> Option<u64> {
    match raw.len() {
        4 => Some(u64::from(u32::from_ne_bytes(raw.try_into().ok()?))),
        8 => Some(u64::from_ne_bytes(raw.try_into().ok()?)),
        _ => None,
    }
}

/// Memory a new process can get on macOS, in bytes: free, speculative,
/// purgeable and file-backed pageable pages (the ones the kernel drops
/// instead of swapping), the closest `sysctl` gets to Linux's
/// `MemAvailable`. Missing counters count as 0.
pub fn available_bytes(page_size: u64, pages: &[Option<u64>]) -> u64 {
    pages
        .iter()
        .flatten()
        .sum::<u64>()
        .saturating_mul(page_size)
}

/// The `sysctl` calls themselves, macOS only.
#[cfg(target_os = "macos")]
pub mod sysctl {
    use crate::probe::apple::{available_bytes, parse_c_string, parse_int};
    use crate::probe::model::Memory;
    use std::ffi::CString;

    fn raw(name: &str) -> Option<Vec<u8>> {
        let key = CString::new(name).ok()?;
        let mut len: libc::size_t = 0;
        // SAFETY: a size query with a null buffer, as sysctlbyname(3) documents.
        let rc = unsafe {
            libc::sysctlbyname(
                key.as_ptr(),
                std::ptr::null_mut(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 || len == 0 {
            return None;
        }
        let mut buf = vec![0u8; len];
        // SAFETY: `buf` has `len` writable bytes and `len` says so.
        let rc = unsafe {
            libc::sysctlbyname(
                key.as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        buf.truncate(len);
        Some(buf)
    }

    fn int(name: &str) -> Option<u64> {
        parse_int(&raw(name)?)
    }

    /// `hw.logicalcpu`.
    pub fn logical_cpus() -> Option<u32> {
        int("hw.logicalcpu").map(|n| n as u32)
    }

    /// `hw.memsize` and the VM page counters.
    pub fn memory() -> Option<Memory> {
        let total = int("hw.memsize")?;
        let page = int("hw.pagesize").unwrap_or(16384);
        let avail = available_bytes(
            page,
            &[
                int("vm.page_free_count"),
                int("vm.page_speculative_count"),
                int("vm.page_purgeable_count"),
                int("vm.page_pageable_external_count"),
            ],
        );
        Some(Memory {
            total,
            avail: avail.min(total),
        })
    }

    /// `machdep.cpu.brand_string`.
    pub fn cpu_brand() -> Option<String> {
        parse_c_string(&raw("machdep.cpu.brand_string")?)
    }

    /// `hw.optional.arm64` is 1 on Apple Silicon (also under Rosetta).
    pub fn is_arm64() -> bool {
        int("hw.optional.arm64") == Some(1)
    }

    /// `iogpu.wired_limit_mb`, absent before macOS 14 and on Intel Macs.
    pub fn wired_limit_mb() -> Option<u64> {
        int("iogpu.wired_limit_mb")
    }

    /// The GPUs `system_profiler SPDisplaysDataType -json` lists, asked
    /// once per process: they do not change while the agent runs (an eGPU
    /// on an Intel Mac would need a restart), and the tool takes a few
    /// hundred milliseconds, too much for the once-a-minute re-probe.
    pub fn gpus() -> Vec<crate::probe::apple::ProfiledGpu> {
        static GPUS: std::sync::OnceLock<Vec<crate::probe::apple::ProfiledGpu>> =
            std::sync::OnceLock::new();
        GPUS.get_or_init(|| {
            let out = std::process::Command::new("/usr/sbin/system_profiler")
                .args(["SPDisplaysDataType", "-json"])
                .stderr(std::process::Stdio::null())
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    crate::probe::apple::parse_displays(&String::from_utf8_lossy(&o.stdout))
                }
                Ok(o) => {
                    tracing::warn!(status = %o.status, "system_profiler SPDisplaysDataType failed: GPUs named from the CPU brand only");
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot run /usr/sbin/system_profiler: GPUs named from the CPU brand only");
                    Vec::new()
                }
            }
        })
        .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M1_PRO: &str = include_str!("../../fixtures/macos/spdisplays-m1-pro.json");
    const M2_ULTRA: &str = include_str!("../../fixtures/macos/spdisplays-m2-ultra-headless.json");
    const INTEL: &str = include_str!("../../fixtures/macos/spdisplays-intel-uhd-radeon-pro.json");

    #[test]
    fn apple_silicon_has_a_unified_metal_gpu_and_a_neural_engine() {
        let d = devices(Some("Apple M2 Pro"), true, &[], None);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].device.as_str(), d[0].name.as_str()),
            ("metal", "Apple M2 Pro GPU")
        );
        assert!(
            d[0].unified && d[0].mem_bytes == 0,
            "unified memory is reported as 0 = RAM"
        );
        assert_eq!(d[1].device, "ane");
        assert_eq!(d[1].name, "Apple M2 Pro Neural Engine");
    }

    #[test]
    fn system_profiler_gives_the_apple_gpu_and_its_core_count() {
        let gpus = parse_displays(M1_PRO);
        assert_eq!(
            gpus,
            vec![ProfiledGpu {
                model: "Apple M1 Pro".into(),
                cores: Some(16),
                vram_bytes: None,
                apple: true,
                builtin: true,
            }]
        );
        let d = devices(Some("Apple M1 Pro"), true, &gpus, None);
        assert_eq!(d[0].name, "Apple M1 Pro GPU (16-core)");
        assert!(
            d[0].unified && d[0].mem_bytes == 0,
            "selection still counts RAM"
        );
    }

    #[test]
    fn a_headless_mac_studio_is_read_the_same_and_a_wired_limit_is_named() {
        let gpus = parse_displays(M2_ULTRA);
        assert_eq!(gpus[0].cores, Some(76));
        let limit = wired_limit_bytes(Some(163_840));
        assert_eq!(limit, Some(160 << 30));
        let d = devices(Some("Apple M2 Ultra"), true, &gpus, limit);
        assert_eq!(
            d[0].name,
            "Apple M2 Ultra GPU (76-core, wired limit 160 GiB)"
        );
        assert_eq!(d[0].mem_bytes, 0, "the limit is information, not selection");
        assert_eq!(wired_limit_bytes(Some(0)), None, "0 = macOS's default");
        assert_eq!(wired_limit_bytes(None), None);
    }

    #[test]
    fn intel_macs_report_their_discrete_gpu_with_its_vram_and_not_the_integrated_one() {
        let gpus = parse_displays(INTEL);
        assert_eq!(gpus.len(), 2);
        assert!(gpus[0].builtin && gpus[0].vram_bytes.is_none());
        let d = devices(Some("Intel(R) Core(TM) i9-9880H"), false, &gpus, None);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (
                d[0].device.as_str(),
                d[0].name.as_str(),
                d[0].mem_bytes,
                d[0].unified
            ),
            ("metal", "AMD Radeon Pro 5500M", 8 << 30, false)
        );
        assert!(devices(Some("Intel(R) Core(TM) i5"), false, &[], None).is_empty());
    }

    #[test]
    fn sizes_and_broken_output_are_read_safely() {
        assert_eq!(parse_size("1536 MB"), Some(1536 << 20));
        assert_eq!(parse_size("8 GB"), Some(8 << 30));
        assert_eq!(parse_size("lots"), None);
        assert!(parse_displays("not json").is_empty());
        assert!(parse_displays(r#"{"SPDisplaysDataType": "x"}"#).is_empty());
        assert!(parse_displays(r#"{"SPDisplaysDataType": [{"_name": "no model"}]}"#).is_empty());
    }

    #[test]
    fn sysctl_values_decode_from_native_bytes() {
        assert_eq!(parse_int(&12u32.to_ne_bytes()), Some(12));
        assert_eq!(parse_int(&(64u64 << 30).to_ne_bytes()), Some(64 << 30));
        assert_eq!(parse_int(&[1, 2, 3]), None);
        assert_eq!(
            parse_c_string(b"Apple M3 Max\0\0").as_deref(),
            Some("Apple M3 Max")
        );
        assert_eq!(parse_c_string(b"\0"), None);
        assert_eq!(
            available_bytes(16384, &[Some(10), None, Some(5)]),
            15 * 16384
        );
    }
}
