//! Every accelerator's details and every announced link's facts, probed
//! from the fixture trees `nvidia-hgx-8`, `nvidia-mig` and `amd-mi210`:
//! what a placement planner reads from the handshake's caps (docs/json.md,
//! "Capabilities").

use crate::probe_fixture;
use rlx_proto::caps::{DeviceInfo, LinkInfo, NodeCaps, PcieLink, PeerLink};
use rlx_proto::txt;

fn of_kind<'a>(caps: &'a NodeCaps, kind: &str) -> Vec<&'a DeviceInfo> {
    caps.devices.iter().filter(|d| d.device == kind).collect()
}

fn link<'a>(caps: &'a NodeCaps, name: &str) -> &'a LinkInfo {
    caps.links
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no link {name} in {:?}", caps.links))
}

#[test]
fn eight_nvlinked_h100s_each_report_memory_compute_driver_pcie_and_their_peers() {
    let caps = probe_fixture("nvidia-hgx-8");
    let gpus = of_kind(&caps, "cuda");
    assert_eq!(gpus.len(), 8, "{:#?}", caps.devices);
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(g.mem_bytes, 85_520_809_984);
        assert_eq!(
            g.mem_free,
            84_987_740_160 - i as u64 * (512 << 20),
            "cuda:{i}"
        );
        assert_eq!(g.compute.as_deref(), Some("9.0"));
        assert_eq!(g.driver.as_deref(), Some("550.54.15"));
        assert_eq!(g.cuda.as_deref(), Some("12.4"));
        assert_eq!(g.mig, Some(false));
        // sysfs's current_link_speed "32.0 GT/s PCIe" is generation 5.
        assert_eq!(g.pcie, Some(PcieLink { gen: 5, width: 16 }));
        let others: Vec<u32> = (0..8).filter(|j| *j != i as u32).collect();
        assert_eq!(
            g.peers,
            others
                .iter()
                .map(|&peer| PeerLink {
                    peer,
                    path: "nvlink".into(),
                    nvlinks: 18
                })
                .collect::<Vec<_>>(),
            "cuda:{i} reaches every other GPU over 18 NVLinks (NVSwitch)"
        );
    }
    assert_eq!(gpus[3].pci.as_deref(), Some("0000:5d:00.0"));
}

#[test]
fn a_mig_box_says_which_gpu_is_partitioned_and_which_link_trained_down() {
    let caps = probe_fixture("nvidia-mig");
    let gpus = of_kind(&caps, "cuda");
    assert_eq!(
        gpus.iter().map(|g| g.mig).collect::<Vec<_>>(),
        [Some(true), Some(false)]
    );
    assert_eq!(gpus[0].compute.as_deref(), Some("8.0"));
    assert_eq!(gpus[0].pcie, Some(PcieLink { gen: 4, width: 16 }));
    // An idle A100 drops to 2.5 GT/s: the probe reports what is negotiated.
    assert_eq!(gpus[1].pcie, Some(PcieLink { gen: 1, width: 16 }));
    assert_eq!(gpus[0].peers[0].path, "sys", "across sockets, no NVLink");
    assert_eq!(gpus[0].peers[0].nvlinks, 0);
}

#[test]
fn two_amd_instinct_cards_report_their_gfx_target_free_vram_and_pcie_link() {
    let caps = probe_fixture("amd-mi210");
    let gpus = of_kind(&caps, "rocm");
    assert_eq!(gpus.len(), 2, "{:#?}", caps.devices);
    for g in &gpus {
        assert_eq!(g.name, "Instinct MI210");
        assert_eq!(g.mem_bytes, 68_702_699_520);
        assert_eq!(
            g.gfx.as_deref(),
            Some("gfx90a"),
            "KFD gfx_target_version 90010"
        );
        assert_eq!(g.pcie, Some(PcieLink { gen: 4, width: 16 }));
        assert_eq!(
            (g.compute.as_ref(), g.mig),
            (None, None),
            "NVIDIA-only facts"
        );
    }
    assert_eq!(gpus[0].mem_free, 68_702_699_520 - (1 << 30));
    assert_eq!(gpus[1].mem_free, 68_702_699_520 - (2 << 30));
    assert_eq!(
        (gpus[0].pci.as_deref(), gpus[1].pci.as_deref()),
        (Some("0000:63:00.0"), Some("0000:e3:00.0"))
    );
}

#[test]
fn each_announced_link_reports_its_kind_speed_mtu_and_rdma() {
    let hgx = probe_fixture("nvidia-hgx-8");
    let names: Vec<&str> = hgx.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["eno1", "ib0"],
        "lo and docker0 are not announced on"
    );
    let eno1 = link(&hgx, "eno1");
    assert_eq!(
        (eno1.kind.as_str(), eno1.speed_mbps, eno1.mtu, eno1.rdma),
        ("ethernet", Some(25_000), 9000, false)
    );
    let ib0 = link(&hgx, "ib0");
    assert_eq!(
        (ib0.kind.as_str(), ib0.speed_mbps, ib0.mtu, ib0.rdma),
        ("infiniband", Some(400_000), 4092, true)
    );
    let mi = probe_fixture("amd-mi210");
    let roce = link(&mi, "enp1s0f0np0");
    assert_eq!(
        (roce.kind.as_str(), roce.speed_mbps, roce.rdma),
        ("ethernet", Some(100_000), true),
        "a ConnectX port with its mlx5 RDMA device is RoCE-capable"
    );
    assert!(!link(&mi, "eno1").rdma);
}

/// Guards against the details leaking into the mDNS announcement: they
/// travel in the handshake's caps only, and an 8-GPU box's TXT record
/// stays within one Ethernet frame.
#[test]
fn an_eight_gpu_box_keeps_its_txt_record_under_1300_bytes_and_its_details_in_the_caps() {
    let caps = probe_fixture("nvidia-hgx-8");
    let pairs = txt::encode(&caps).unwrap();
    let n = txt::wire_len(&pairs);
    assert!(n < 1300, "TXT record is {n} bytes");
    let announced = txt::decode(&txt::to_strings(&pairs)).unwrap();
    let gpus = of_kind(&announced, "cuda");
    assert_eq!(gpus.len(), 8, "every GPU is still announced");
    assert!(gpus
        .iter()
        .all(|g| g.peers.is_empty() && g.compute.is_none()));
    assert!(announced.links.is_empty());
    let json = caps.to_json();
    assert!(json.len() > n, "the caps carry more than the TXT");
    let back = NodeCaps::from_json(&json).unwrap();
    assert_eq!(back, caps, "the details survive the handshake's JSON");
    assert!(
        of_kind(&back, "cuda")
            .iter()
            .all(|g| g.peers.len() == 7 && g.compute.is_some()),
        "the handshake's caps carry the details the TXT leaves out"
    );
    assert_eq!(back.links.len(), 2);
}
