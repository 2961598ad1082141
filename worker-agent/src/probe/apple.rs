//! **Apple Silicon: the Metal GPU and the Neural Engine** — both read from
//! `sysctl` on macOS; the parsing is plain functions so it is tested on Linux.
//!
//! An M-series chip has one GPU sharing the whole RAM (unified memory:
//! reported with `mem_bytes = 0`, which the coordinator reads as "as much as
//! RAM") and one Neural Engine (`ane`, reported but never planned on).
//! Intel Macs have Metal GPUs too, but `sysctl` cannot enumerate them; they
//! are left out rather than guessed.

use rlx_proto::caps::DeviceInfo;

/// Devices of an Apple machine, from its CPU brand string
/// (`machdep.cpu.brand_string`, e.g. `Apple M2 Pro`) and `hw.optional.arm64`.
pub fn devices(brand: Option<&str>, arm64: bool) -> Vec<DeviceInfo> {
    if !arm64 {
        return Vec::new();
    }
    let chip = brand
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .unwrap_or("Apple Silicon");
    let dev = |label: &str, name: String| DeviceInfo {
        device: label.into(),
        name,
        mem_bytes: 0,
        unified: true,
        gflops: 0.0,
        available: true,
    };
    vec![
        dev("metal", format!("{chip} GPU")),
        dev("ane", format!("{chip} Neural Engine")),
    ]
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apple_silicon_has_a_unified_metal_gpu_and_a_neural_engine() {
        let d = devices(Some("Apple M2 Pro"), true);
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
    }

    #[test]
    fn intel_macs_report_no_apple_devices() {
        assert!(devices(Some("Intel(R) Core(TM) i9-9880H"), false).is_empty());
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
