//! The probe against checked-in fixture trees (`worker-agent/fixtures/`),
//! with fake GPU libraries: what each kind of machine must report.

use crate::{fixture, probe_fixture};
use rlx_agent::probe::{
    probe, FixtureLibs, NvidiaGpu, NvidiaLib, ProbeOptions, VulkanGpu, VulkanKind, VulkanLib,
};
use rlx_proto::caps::{is_valid_id, Device, DeviceInfo, NodeCaps};
use std::fs;
use std::path::Path;

const GIB: u64 = 1 << 30;

/// `(label, available)` of every device, in order.
fn labels(caps: &NodeCaps) -> Vec<(&str, bool)> {
    caps.devices
        .iter()
        .map(|d| (d.device.as_str(), d.available))
        .collect()
}

struct FakeNvml(Result<Vec<NvidiaGpu>, String>);

impl NvidiaLib for FakeNvml {
    fn devices(&self) -> Result<Vec<NvidiaGpu>, String> {
        self.0.clone()
    }
}

fn gpu(name: &str, mem: u64) -> NvidiaGpu {
    NvidiaGpu {
        name: name.into(),
        mem_bytes: mem,
        ..Default::default()
    }
}

/// Copies a fixture tree, keeping its symlinks, so a test can alter it.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ft.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

#[test]
fn a_two_gpu_nvidia_server_reports_both_gpus_and_not_its_bmc_vga() {
    let caps = probe_fixture("nvidia-aspeed");
    assert_eq!(
        labels(&caps),
        [("cpu", true), ("cuda", true), ("cuda", true)],
        "{caps:#?}"
    );
    for d in &caps.devices[1..] {
        assert_eq!(d.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(d.mem_bytes, 85_520_809_984);
        assert!(!d.unified);
    }
    assert!(
        !caps
            .devices
            .iter()
            .any(|d| d.name.contains("ASPEED") || d.device.contains("1a03")),
        "the ASPEED management VGA is not an accelerator: {caps:#?}"
    );
    assert_eq!((caps.hostname.as_str(), caps.cores), ("gpu-a", 112));
    assert_eq!(caps.ram_total, 528_280_000 * 1024);
    assert_eq!(caps.ram_avail, 500_000_000 * 1024);
    assert_eq!(caps.devices[0].name, "Intel(R) Xeon(R) Platinum 8480+");
    assert!(is_valid_id(&caps.id), "{}", caps.id);
    assert_eq!(caps.version, env!("CARGO_PKG_VERSION"));
    assert_eq!((caps.gflops, caps.io_mbps, caps.disk_free), (0.0, 0.0, 0));
}

/// Guards against a driverless GPU box looking like a CPU box: the cards are
/// reported as cuda, unavailable, saying why.
#[test]
fn nvidia_cards_without_nvml_are_reported_unavailable_with_the_reason() {
    let mut opts = ProbeOptions::fixture(fixture("nvidia-aspeed")).unwrap();
    opts.nvidia = Box::new(FakeNvml(Err("NVIDIA driver not loaded".into())));
    let caps = probe(&opts).unwrap();
    assert_eq!(
        labels(&caps),
        [("cpu", true), ("cuda", false), ("cuda", false)]
    );
    assert!(
        caps.devices[1].name.contains("NVIDIA driver not loaded"),
        "{}",
        caps.devices[1].name
    );
    assert!(caps.devices[1].name.contains("0000:18:00.0"));
    assert!(caps.devices[2].name.contains("0000:2a:00.0"));
}

#[test]
fn devices_outside_the_targets_are_reported_but_unavailable() {
    let mut opts = ProbeOptions::fixture(fixture("nvidia-aspeed")).unwrap();
    opts.targets = vec![Device::Cpu, Device::Vulkan];
    let caps = probe(&opts).unwrap();
    assert_eq!(
        labels(&caps),
        [("cpu", true), ("cuda", false), ("cuda", false)]
    );
    assert_eq!(
        caps.devices[1].mem_bytes, 85_520_809_984,
        "memory is still reported"
    );

    let mut opts = ProbeOptions::fixture(fixture("amd")).unwrap();
    opts.targets = vec![Device::Rocm];
    let caps = probe(&opts).unwrap();
    assert_eq!(
        labels(&caps),
        [
            ("cpu", false),
            ("rocm", true),
            ("rocm", true),
            ("vulkan", false),
            ("vulkan", false)
        ]
    );
}

#[test]
fn an_amd_desktop_reports_rocm_and_vulkan_views_and_its_apu_as_unified() {
    let caps = probe_fixture("amd");
    assert_eq!(
        labels(&caps),
        [
            ("cpu", true),
            ("rocm", true),
            ("rocm", true),
            ("vulkan", true),
            ("vulkan", true)
        ],
        "{caps:#?}"
    );
    let d = &caps.devices;
    assert_eq!((d[1].mem_bytes, d[1].unified), (24 * GIB, false));
    assert_eq!(
        d[1].name, "AMD/ATI Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M",
        "named from pci.ids"
    );
    assert!(
        d[2].unified,
        "the integrated Radeon shares host RAM: {:?}",
        d[2]
    );
    assert_eq!(d[3].name, "AMD Radeon RX 7900 XTX (RADV NAVI31)");
    assert_eq!((d[3].mem_bytes, d[3].unified), (24 * GIB, false));
    assert!(d[4].unified);
    assert!(
        !d.iter().any(|d| d.name.contains("llvmpipe")),
        "software renderers are the CPU"
    );
}

#[test]
fn a_vm_with_an_emulated_vga_reports_only_its_cpu() {
    let caps = probe_fixture("cpu-only");
    assert_eq!(labels(&caps), [("cpu", true)]);
    assert_eq!((caps.cores, caps.hostname.as_str()), (4, "vm-small"));
    assert_eq!(caps.accelerator_mem(), 0);
}

/// Guards against unknown devices being dropped or folded into cpu.
#[test]
fn accelerators_nobody_can_name_keep_raw_pci_labels() {
    let caps = probe_fixture("unknown-accel");
    assert_eq!(
        labels(&caps),
        [
            ("cpu", true),
            ("vulkan", false),
            ("pci-1e52:401e", false),
            ("pci-1fff:0042", false)
        ],
        "{caps:#?}"
    );
    let d = &caps.devices;
    assert_eq!(d[2].name, "Tenstorrent Inc Wormhole at 0000:41:00.0");
    assert_eq!(d[3].name, "unknown processing accelerator at 0000:42:00.0");
    assert!(d[2].parsed().is_none() && !d[2].is_recognized());
    assert!(d[1].name.contains("UHD Graphics 770") && d[1].name.contains("no Vulkan loader"));
    assert!(
        !d.iter().any(|d| d.name.contains("Matrox")),
        "the Matrox BMC VGA is not reported"
    );
    assert!(d[1..].iter().all(|d| d.mem_bytes == 0 && !d.unified));
}

#[test]
fn eight_gpus_are_all_listed_and_validate() {
    let mut opts = ProbeOptions::fixture(fixture("cpu-only")).unwrap();
    opts.nvidia = Box::new(FakeNvml(Ok((0..8)
        .map(|_| gpu("NVIDIA A100-SXM4-80GB", 80 * GIB))
        .collect())));
    let caps = probe(&opts).unwrap();
    assert_eq!(caps.devices.len(), 9);
    assert!(caps.devices[1..]
        .iter()
        .all(|d| d.device == "cuda" && d.available));
    NodeCaps::from_json(&caps.to_json()).expect("the printed JSON parses back");
}

#[test]
fn a_gpu_whose_memory_cannot_be_read_is_listed_with_zero_memory() {
    let mut opts = ProbeOptions::fixture(fixture("cpu-only")).unwrap();
    opts.nvidia = Box::new(FakeNvml(Ok(vec![
        gpu("NVIDIA GeForce RTX 4090", 24 * GIB),
        gpu("NVIDIA A2", 0),
    ])));
    let caps = probe(&opts).unwrap();
    let zero: &DeviceInfo = &caps.devices[2];
    assert_eq!(
        (
            zero.device.as_str(),
            zero.mem_bytes,
            zero.unified,
            zero.available
        ),
        ("cuda", 0, false, true)
    );
}

#[test]
fn the_node_id_is_stable_for_a_tree_and_changes_with_its_hardware() {
    let a = probe_fixture("nvidia-aspeed").id;
    assert_eq!(a, probe_fixture("nvidia-aspeed").id, "same tree, same id");

    let tmp = tempfile::tempdir().unwrap();
    let clone = tmp.path().join("clone");
    copy_tree(&fixture("nvidia-aspeed"), &clone);
    let id_of = |root: &Path| probe(&ProbeOptions::fixture(root).unwrap()).unwrap().id;
    assert_eq!(id_of(&clone), a, "a faithful copy is the same machine");

    fs::write(
        clone.join("sys/class/net/eno2/address"),
        "3c:ec:ef:99:99:99\n",
    )
    .unwrap();
    let other_mac = id_of(&clone);
    assert_ne!(other_mac, a, "a clone with another NIC is another node");

    fs::write(
        clone.join("sys/class/dmi/id/product_uuid"),
        "4c4c4544-0042-3510-8052-000000000001\n",
    )
    .unwrap();
    assert_ne!(id_of(&clone), other_mac, "another board is another node");

    fs::write(
        clone.join("sys/class/net/docker0/address"),
        "02:42:ac:11:00:99\n",
    )
    .unwrap();
    let before = id_of(&clone);
    fs::write(
        clone.join("sys/class/net/docker0/address"),
        "02:42:ac:11:00:42\n",
    )
    .unwrap();
    assert_eq!(
        id_of(&clone),
        before,
        "virtual interfaces do not move the id"
    );
}

#[test]
fn an_explicit_node_id_wins_and_a_malformed_one_is_refused() {
    let mut opts = ProbeOptions::fixture(fixture("cpu-only")).unwrap();
    opts.node_id = Some("00000000deadbeef".into());
    assert_eq!(probe(&opts).unwrap().id, "00000000deadbeef");
    opts.node_id = Some("DEADBEEF".into());
    let err = format!("{:#}", probe(&opts).unwrap_err());
    assert!(err.contains("16 lowercase hex"), "{err}");
}

#[test]
fn the_checkpoint_dir_is_reported_measured_and_the_gflops_cached() {
    let ckpt = tempfile::tempdir().unwrap();
    fs::write(ckpt.path().join("model.safetensors"), vec![1u8; 16 << 20]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut opts = ProbeOptions::fixture(fixture("cpu-only")).unwrap();
    opts.ckpt_dir = Some(ckpt.path().to_path_buf());
    opts.state_dir = Some(state.path().to_path_buf());
    opts.cluster = Some("lab".into());
    opts.bench = true;
    let caps = probe(&opts).unwrap();
    assert_eq!(
        caps.ckpt_dir.as_deref(),
        Some(ckpt.path().to_str().unwrap())
    );
    assert_eq!(caps.cluster.as_deref(), Some("lab"));
    assert!(caps.disk_free > 0);
    assert!(caps.io_mbps > 0.0, "16 MiB of weights give a read rate");
    assert!(caps.gflops > 0.0);
    assert_eq!(
        caps.devices[0].gflops, caps.gflops,
        "the cpu device carries the CPU's number"
    );
    assert!(
        state.path().join("cpu-gflops.json").exists(),
        "the measurement is cached"
    );
    let again = probe(&opts).unwrap();
    assert_eq!(
        again.gflops, caps.gflops,
        "the second probe reuses the cached number"
    );
}

#[test]
fn a_root_that_is_not_a_directory_is_an_error_naming_it() {
    let opts = ProbeOptions {
        root: "/nonexistent/fixture".into(),
        bench: false,
        ..Default::default()
    };
    let err = format!("{:#}", probe(&opts).unwrap_err());
    assert!(err.contains("/nonexistent/fixture"), "{err}");
}

#[test]
fn a_typo_in_a_fixture_library_file_fails_loudly() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("gpu-libs.json"), r#"{"nvlm": []}"#).unwrap();
    let err = FixtureLibs::load(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("gpu-libs.json") && err.contains("nvlm"),
        "{err}"
    );
}

/// A Vulkan loader that counts how often it is asked.
struct CountingVulkan(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl VulkanLib for CountingVulkan {
    fn devices(&self) -> Result<Vec<VulkanGpu>, String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(vec![VulkanGpu {
            name: "Some GPU".into(),
            kind: VulkanKind::Discrete,
            vendor: 0x1234,
            device: 1,
            mem_bytes: GIB,
            pci: None,
            mem_free: 0,
        }])
    }
}

/// Guards the `--probe` time budget: loading Mesa's Vulkan drivers on a
/// machine with no GPU driver costs ~40 ms and can only find software
/// renderers.
#[test]
fn vulkan_is_not_asked_on_a_machine_without_a_gpu_kernel_driver() {
    use std::sync::{atomic::AtomicUsize, Arc};
    let calls = Arc::new(AtomicUsize::new(0));
    let mut opts = ProbeOptions::fixture(fixture("cpu-only")).unwrap();
    opts.vulkan = Box::new(CountingVulkan(calls.clone()));
    assert_eq!(labels(&probe(&opts).unwrap()), [("cpu", true)]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    let mut opts = ProbeOptions::fixture(fixture("unknown-accel")).unwrap();
    opts.vulkan = Box::new(CountingVulkan(calls.clone()));
    let caps = probe(&opts).unwrap();
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a DRM card means ask"
    );
    assert!(caps
        .devices
        .iter()
        .any(|d| d.device == "vulkan" && d.available));
}
