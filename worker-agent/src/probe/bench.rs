//! **CPU GFLOP/s** — a short, bounded f32 multiply-add measurement on every
//! core, cached per CPU so that only the first probe on a machine pays for it.
//!
//! The number is peak single-precision FMA throughput (independent
//! accumulator chains, the widest SIMD the CPU offers: AVX2+FMA when present
//! on x86-64, NEON FMA on aarch64, SSE2 otherwise). Real matrix multiplies
//! reach a fraction of it, but the same fraction on similar machines, which
//! is what a planner comparing nodes needs. It is not a benchmark to quote.

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

/// Time spent before counting, to let cores leave idle clocks.
pub const WARMUP: Duration = Duration::from_millis(20);

/// Time that is counted. With the warm-up this keeps the whole probe under
/// the 0.5 s goal even on a loaded machine, and is long enough (hundreds of
/// thousands of loop iterations) that timer resolution does not matter.
pub const MEASURE: Duration = Duration::from_millis(100);

/// Name of the cache file in the state directory.
pub const CACHE_FILE: &str = "cpu-gflops.json";

/// Independent accumulators: enough chains to hide FMA latency (4 cycles,
/// 2 units, 8 lanes on AVX2 = 64 in flight) while staying in registers.
const LANES: usize = 96;

/// Iterations per timed chunk: about 0.1 ms on a current core, so a thread
/// notices the deadline promptly.
const CHUNK: u64 = 2_000;

/// One chunk of the kernel; returns floating-point operations done.
#[inline(always)]
fn kernel_body(acc: &mut [f32; LANES], m: f32, c: f32, iters: u64, fma: bool) -> u64 {
    for _ in 0..iters {
        for a in acc.iter_mut() {
            // The recurrence x = 0.999999x + 0.001 converges to 1000 and never
            // reaches denormals, which would slow x86 down by microcode assists.
            *a = if fma { a.mul_add(m, c) } else { *a * m + c };
        }
    }
    iters * LANES as u64 * 2
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2(acc: &mut [f32; LANES], m: f32, c: f32, iters: u64) -> u64 {
    kernel_body(acc, m, c, iters, true)
}

fn kernel_portable(acc: &mut [f32; LANES], m: f32, c: f32, iters: u64) -> u64 {
    // aarch64 always has FMA; elsewhere `mul_add` without hardware FMA
    // would call a slow software routine.
    kernel_body(acc, m, c, iters, cfg!(target_arch = "aarch64"))
}

#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx2_fma() -> bool {
    false
}

fn kernel(acc: &mut [f32; LANES], m: f32, c: f32, iters: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has just been checked for both features.
        return unsafe { kernel_avx2(acc, m, c, iters) };
    }
    kernel_portable(acc, m, c, iters)
}

/// Which kernel ran and how it was compiled: part of the cache key, so a
/// number measured by an unoptimised test build, or by an older kernel, is
/// never reused by the real agent.
pub fn method() -> String {
    let simd = if has_avx2_fma() {
        "avx2-fma"
    } else {
        "portable"
    };
    let build = if cfg!(debug_assertions) { "-debug" } else { "" };
    format!("{simd}-{LANES}-p90{build}")
}

/// Length of one timed slice: many chunks, far above timer resolution,
/// and short against a scheduler time slice, so most slices run undisturbed.
pub const SLICE: Duration = Duration::from_millis(1);

/// Measures GFLOP/s over `threads` threads: each warms up, then times
/// [`SLICE`]-long slices for [`MEASURE`]; the rates add up.
///
/// A thread's rate is the 90th percentile of its slices, not the average:
/// on a busy machine (a build running beside the agent) the average would
/// measure the neighbours, and the number is cached for good. Slices where
/// the thread ran undisturbed show what the core can do.
pub fn measure(threads: u32) -> f64 {
    let threads = threads.max(1);
    let rates: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut acc = [1.0f32; LANES];
                    let (m, c) = (black_box(0.999_999f32), black_box(0.001f32));
                    let warm_until = Instant::now() + WARMUP;
                    while Instant::now() < warm_until {
                        kernel(&mut acc, m, c, CHUNK);
                    }
                    let start = Instant::now();
                    let mut slices = Vec::with_capacity(128);
                    while start.elapsed() < MEASURE {
                        let t = Instant::now();
                        let mut flops = 0u64;
                        while t.elapsed() < SLICE {
                            flops += kernel(&mut acc, m, c, CHUNK);
                        }
                        slices.push(flops as f64 / t.elapsed().as_secs_f64() / 1e9);
                    }
                    black_box(&acc);
                    percentile(&mut slices, 0.9)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let total: f64 = rates.iter().sum();
    tracing::debug!(threads, gflops = total, "measured CPU GFLOP/s");
    total.min(rlx_proto::caps::limits::MAX_GFLOPS)
}

/// The `q` quantile (0..=1) of `v`, 0 for an empty slice.
fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// What is cached: the measurement and what it was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Cached {
    cpu: String,
    cores: u32,
    method: String,
    gflops: f64,
}

/// GFLOP/s for this CPU: from the cache in `state_dir` when it was measured
/// on the same CPU model and core count (a VM resized or moved to other
/// hardware measures again) with the same [`method`], else measured now and
/// cached.
pub fn cached_or_measure(state_dir: Option<&Path>, cpu: &str, cores: u32) -> f64 {
    let file = state_dir.map(|d| d.join(CACHE_FILE));
    if let Some(f) = &file {
        let hit = std::fs::read_to_string(f)
            .ok()
            .and_then(|t| serde_json::from_str::<Cached>(&t).ok())
            .filter(|c| {
                c.cpu == cpu
                    && c.cores == cores
                    && c.method == method()
                    && c.gflops.is_finite()
                    && c.gflops > 0.0
            });
        if let Some(c) = hit {
            tracing::debug!(path = %f.display(), gflops = c.gflops, "CPU GFLOP/s from cache");
            return c.gflops.min(rlx_proto::caps::limits::MAX_GFLOPS);
        }
    }
    let gflops = measure(cores);
    if let (Some(f), Some(dir)) = (&file, state_dir) {
        let entry = Cached {
            cpu: cpu.to_string(),
            cores,
            method: method(),
            gflops,
        };
        let json = serde_json::to_string(&entry).unwrap_or_default();
        let saved = std::fs::create_dir_all(dir)
            .and_then(|()| super::state::write_atomically(f, json.as_bytes()));
        if let Err(e) = saved {
            tracing::warn!(path = %f.display(), error = %e, "cannot cache CPU GFLOP/s; every probe will measure again");
        }
    }
    gflops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_ignores_disturbed_slices() {
        let mut v = vec![10.0, 2.0, 10.0, 10.0, 1.0, 10.0, 10.0, 10.0, 10.0, 10.0];
        assert_eq!(percentile(&mut v, 0.9), 10.0);
        assert_eq!(percentile(&mut [], 0.9), 0.0);
    }

    #[test]
    fn the_measurement_is_positive_and_bounded_in_time() {
        let t = Instant::now();
        let g = measure(1);
        assert!(g > 0.1, "one core does more than 0.1 GFLOP/s: {g}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_cached_measurement_is_reused_only_for_the_same_cpu() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(CACHE_FILE);
        let entry = format!(
            r#"{{"cpu":"Test CPU","cores":4,"method":"{}","gflops":123.5}}"#,
            method()
        );
        std::fs::write(&f, entry).unwrap();
        assert_eq!(cached_or_measure(Some(d.path()), "Test CPU", 4), 123.5);
        let other = cached_or_measure(Some(d.path()), "Test CPU", 2);
        assert_ne!(other, 123.5, "a different core count measures again");
        let saved: Cached = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(
            (saved.cores, saved.gflops),
            (2, other),
            "and replaces the cache"
        );
    }
}
