//! **Which device a node should run** — the one place that turns a node's
//! reported devices into the `device = "..."` of its `[[node]]`.
//!
//! This is the field a hand-written config most often gets wrong (does that
//! box have CUDA, or only Vulkan?), so the rules are the predecessor's, kept
//! exactly: an accelerator before the CPU; among accelerators the one with the
//! most usable memory, Apple's unified Metal counting as host RAM; never the
//! Neural Engine; never a device the node's own build cannot target; ties go
//! to the probe's order, which lists the primary accelerator first. Devices
//! that were passed over for a reason are returned so the report can say why.

use crate::config::DeviceList;
use rlx_proto::caps::{Device, NodeCaps};
use serde::Serialize;
use std::fmt;

/// Why a reported device was not a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// This build does not know the label: a newer rlx on the node, or a
    /// device nobody has taught rlx about yet.
    Unrecognized,
    /// The node's rlx build was compiled without it: choosing it would hand
    /// the stage a device that fails on its first compile.
    NotTargetable,
    /// A discrete accelerator that reports no memory (a probe that could not
    /// read VRAM, a software renderer): only chosen when no accelerator with
    /// memory exists, so it never wins over a real one.
    NoMemoryReported,
}

/// A device that selection passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Skipped {
    /// The device label as the node reported it.
    pub label: String,
    /// The device's human name.
    pub name: String,
    /// Why it was passed over.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.reason {
            SkipReason::Unrecognized => "unrecognised by this build",
            SkipReason::NotTargetable => "node's build cannot target it",
            SkipReason::NoMemoryReported => "reports no device memory",
        };
        if self.name.is_empty() || self.name == self.label {
            write!(f, "{} ({why})", self.label)
        } else {
            write!(f, "{} \"{}\" ({why})", self.label, self.name)
        }
    }
}

/// The outcome of selection for one node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// The device to write into the node's config.
    pub device: DeviceList,
    /// Usable memory of the chosen device (host RAM for the CPU and for
    /// unified devices), bytes.
    pub mem_bytes: u64,
    /// Devices that were not candidates, with reasons. Reported, never silent.
    pub skipped: Vec<Skipped>,
    /// Every candidate of the chosen kind, in the node's order, as `(index
    /// among the node's devices of that kind, usable memory)`: two RTX 4090s
    /// are `[(0, 24 GiB), (1, 24 GiB)]`. One entry for the CPU.
    pub of_kind: Vec<(u32, u64)>,
}

impl Selection {
    /// The usable memory of each candidate of the chosen kind.
    pub(crate) fn mems(&self) -> Vec<u64> {
        self.of_kind.iter().map(|(_, m)| *m).collect()
    }
}

/// Picks the device a node should run from the caps it reported.
pub(crate) fn best_device(caps: &NodeCaps) -> Selection {
    // (kind, usable memory, reports memory): candidates compare first on
    // whether they report memory at all, so a zero-memory discrete device
    // never beats a real one, then on memory; `>` keeps the earlier on ties.
    let mut best: Option<(Device, u64, bool)> = None;
    // Every candidate with its kind, index among its label, memory and
    // whether that memory is real.
    let mut candidates: Vec<(Device, u32, u64, bool)> = Vec::new();
    let mut seen_of_label: std::collections::HashMap<&str, u32> = Default::default();
    let mut skipped = Vec::new();
    let skip = |d: &rlx_proto::caps::DeviceInfo, reason| Skipped {
        label: d.device.clone(),
        name: d.name.clone(),
        reason,
    };
    for d in &caps.devices {
        // CUDA's ordinals follow the probe's order of the label (NVML's
        // order; cards NVML cannot see are listed after the ones it can).
        let index = {
            let n = seen_of_label.entry(d.device.as_str()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let Some(kind) = d.parsed() else {
            skipped.push(skip(d, SkipReason::Unrecognized));
            continue;
        };
        if !d.available {
            skipped.push(skip(d, SkipReason::NotTargetable));
            continue;
        }
        // The CPU is the floor, not a candidate; the Neural Engine is not a
        // general compute target for a pipeline stage.
        if !kind.is_accelerator() {
            continue;
        }
        let (mem, real) = match (d.mem_bytes, d.unified) {
            (0, true) => (caps.ram_total, true),
            (0, false) => {
                skipped.push(skip(d, SkipReason::NoMemoryReported));
                (0, false)
            }
            (m, _) => (m, true),
        };
        candidates.push((kind, index, mem, real));
        let better = match best {
            None => true,
            Some((_, m, r)) => (real, mem) > (r, m),
        };
        if better {
            best = Some((kind, mem, real));
        }
    }
    let (kind, mem) = best.map_or((Device::Cpu, caps.ram_total), |(k, m, _)| (k, m));
    let real = best.is_some_and(|(_, _, r)| r);
    let of_kind = match best {
        None => vec![(0, mem)],
        // With real memory, the candidates of the kind that have it; a
        // zero-memory choice (nothing better existed) stands alone.
        Some(_) if real => candidates
            .iter()
            .filter(|(k, _, _, r)| *k == kind && *r)
            .map(|(_, i, m, _)| (*i, *m))
            .collect(),
        Some(_) => candidates
            .iter()
            .find(|(k, ..)| *k == kind)
            .map(|(_, i, m, _)| vec![(*i, *m)])
            .unwrap_or_default(),
    };
    Selection {
        device: DeviceList::single(kind),
        mem_bytes: mem,
        skipped,
        of_kind,
    }
}

#[cfg(test)]
mod tests {
    //! The predecessor's selection tests, kept as behaviour tests.
    use super::*;
    use rlx_proto::caps::DeviceInfo;

    fn caps_with(devices: Vec<DeviceInfo>, ram: u64) -> NodeCaps {
        NodeCaps {
            addr: "x:1".into(),
            os: "linux".into(),
            cores: 8,
            ram_total: ram,
            ram_avail: ram,
            devices,
            gflops: 1.0,
            ..Default::default()
        }
    }

    fn dev(label: &str, mem: u64, unified: bool) -> DeviceInfo {
        DeviceInfo {
            device: label.into(),
            name: label.into(),
            mem_bytes: mem,
            unified,
            gflops: 0.0,
            available: true,
            ..Default::default()
        }
    }

    /// A GPU the node's own build cannot target must not be chosen for its
    /// stage: the session on it fails, so planning around it hands that node
    /// a device it will die on. It has to fall back to CPU and say why.
    #[test]
    fn a_device_the_node_cannot_target_is_skipped() {
        let mut cuda = dev("cuda", 24_000_000_000, false);
        cuda.available = false;
        let c = caps_with(vec![dev("cpu", 0, false), cuda], 64_000_000_000);
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "cpu");
        assert_eq!(s.skipped.len(), 1, "the skip must be reported, not silent");
        assert!(s.skipped[0].to_string().contains("cuda"), "{:?}", s.skipped);
        assert_eq!(s.skipped[0].reason, SkipReason::NotTargetable);
    }

    /// The device pick is the thing a hand-written config most often gets
    /// wrong, so it must prefer the biggest real accelerator.
    #[test]
    fn the_largest_accelerator_is_preferred() {
        let c = caps_with(
            vec![
                dev("cpu", 0, false),
                dev("vulkan", 8_000_000_000, true),
                dev("cuda", 24_000_000_000, false),
            ],
            64_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "cuda");
        assert_eq!(s.mem_bytes, 24_000_000_000);
    }

    /// Metal reports mem_bytes = 0 (no separate ceiling); it must still beat a
    /// small discrete GPU rather than being read as "no memory".
    #[test]
    fn unified_metal_counts_as_host_ram_not_zero() {
        let c = caps_with(
            vec![
                dev("cpu", 0, false),
                dev("metal", 0, true),
                dev("vulkan", 2_000_000_000, true),
            ],
            128_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "metal");
        assert_eq!(s.mem_bytes, 128_000_000_000);
    }

    #[test]
    fn the_ane_is_never_chosen_and_the_cpu_is_the_floor() {
        let c = caps_with(
            vec![dev("cpu", 0, false), dev("ane", 0, true)],
            16_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "cpu");
        assert!(
            s.skipped.is_empty(),
            "the ANE is not a skip worth reporting"
        );
    }

    /// A device label this build does not know must be REPORTED, not folded
    /// into "cpu": the lossy `kind()` collapses it to Cpu, which would make the
    /// accelerator invisible and silently turn a GPU box into a CPU stage.
    #[test]
    fn unrecognized_devices_are_reported_not_silently_cpu() {
        let c = caps_with(
            vec![
                dev("cpu", 0, false),
                dev("quantum-tpu", 80_000_000_000, false),
            ],
            64_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(
            s.skipped.len(),
            1,
            "the unknown label must surface: {:?}",
            s.skipped
        );
        assert!(s.skipped[0].to_string().contains("quantum-tpu"));
        assert_eq!(s.skipped[0].reason, SkipReason::Unrecognized);
        // With nothing recognised, CPU is the honest answer, now with a reason.
        assert_eq!(s.device.as_str(), "cpu");
        // And the lossy accessor is what would have hidden it.
        let unknown = &c.devices[1];
        assert!(!unknown.is_recognized());
        assert_eq!(unknown.kind(), Device::Cpu);
        assert_eq!(unknown.parsed(), None);
    }

    /// A recognised accelerator alongside an unrecognised one is still chosen,
    /// and the unknown is still reported.
    #[test]
    fn an_unrecognized_device_does_not_block_a_known_accelerator() {
        let c = caps_with(
            vec![
                dev("cpu", 0, false),
                dev("weird-npu", 99_000_000_000, false),
                dev("cuda", 24_000_000_000, false),
            ],
            64_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "cuda");
        assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
        assert!(s.skipped[0].label.contains("weird-npu"));
    }

    /// A discrete device that reports 0 bytes (VRAM unreadable) must not be
    /// read as "as much as RAM" and beat a real GPU: it is flagged instead.
    #[test]
    fn a_zero_memory_accelerator_is_flagged_not_chosen_over_a_real_one() {
        let c = caps_with(
            vec![
                dev("cpu", 0, false),
                dev("vulkan", 0, false),
                dev("cuda", 8_000_000_000, false),
            ],
            256_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "cuda");
        assert_eq!(s.skipped.len(), 1);
        assert_eq!(s.skipped[0].reason, SkipReason::NoMemoryReported);
    }

    /// With nothing better, a zero-memory accelerator is still an accelerator:
    /// chosen over the CPU, and still flagged so the user can check it.
    #[test]
    fn a_lone_zero_memory_accelerator_is_chosen_and_flagged() {
        let c = caps_with(
            vec![dev("cpu", 0, false), dev("rocm", 0, false)],
            64_000_000_000,
        );
        let s = best_device(&c);
        assert_eq!(s.device.as_str(), "rocm");
        assert_eq!(s.skipped[0].reason, SkipReason::NoMemoryReported);
    }

    #[test]
    fn ties_go_to_the_probes_own_order() {
        let c = caps_with(
            vec![
                dev("cuda", 24_000_000_000, false),
                dev("vulkan", 24_000_000_000, false),
            ],
            64_000_000_000,
        );
        assert_eq!(best_device(&c).device.as_str(), "cuda");
    }
}
