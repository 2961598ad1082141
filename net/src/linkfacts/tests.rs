//! Link facts read from fake sysfs trees, one per kind of link.

use super::*;
use std::os::unix::fs::symlink;

/// A fake `/` with `sys/class/net/<if>` entries built file by file.
struct Sys(tempfile::TempDir);

impl Sys {
    fn new() -> Sys {
        Sys(tempfile::tempdir().unwrap())
    }
    fn file(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
        self
    }
    fn dir(&self, rel: &str) -> &Self {
        fs::create_dir_all(self.0.path().join(rel)).unwrap();
        self
    }
    fn link(&self, rel: &str, target: &str) -> &Self {
        let p = self.0.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
        self
    }
    /// A NIC on PCI function `pci` with ARPHRD `ty`, `speed` and `mtu`.
    fn nic(&self, name: &str, ty: u32, speed: &str, mtu: u32, pci: &str) -> &Self {
        let d = format!("sys/class/net/{name}");
        self.dir(&format!("sys/devices/pci0000:00/{pci}"));
        self.file(&format!("{d}/type"), &format!("{ty}\n"))
            .file(&format!("{d}/speed"), &format!("{speed}\n"))
            .file(&format!("{d}/mtu"), &format!("{mtu}\n"))
            .link(
                &format!("{d}/device"),
                &format!("../../../devices/pci0000:00/{pci}"),
            )
    }
    fn facts(&self, name: &str) -> LinkFacts {
        read_sysfs(self.0.path(), name, vec!["10.0.0.5".parse().unwrap()])
    }
}

#[test]
fn a_wired_nic_is_ethernet_with_its_negotiated_speed_and_mtu() {
    let s = Sys::new();
    s.nic("enp1s0", 1, "10000", 9000, "0000:01:00.0");
    let f = s.facts("enp1s0");
    assert_eq!(
        (f.kind, f.speed_mbps, f.mtu, f.rdma),
        (LinkKind::Ethernet, Some(10_000), 9000, false)
    );
    assert_eq!(f.addrs, ["10.0.0.5".parse::<IpAddr>().unwrap()]);
}

/// Guards against reporting the kernel's "-1" (link down, or a driver that
/// does not know) as a speed.
#[test]
fn an_unknown_speed_is_left_out_not_reported_as_minus_one() {
    let s = Sys::new();
    s.nic("eth0", 1, "-1", 1500, "0000:02:00.0");
    assert_eq!(s.facts("eth0").speed_mbps, None);
    // Wi-Fi drivers refuse the read (EINVAL): no file here.
    s.file("sys/class/net/wlan0/type", "1")
        .file("sys/class/net/wlan0/mtu", "1500")
        .dir("sys/class/net/wlan0/wireless")
        .link("sys/class/net/wlan0/device", "../../../0000:03:00.0");
    let w = s.facts("wlan0");
    assert_eq!((w.kind, w.speed_mbps), (LinkKind::Wifi, None));
}

#[test]
fn a_nic_with_an_rdma_device_on_its_pci_function_is_rdma_capable() {
    let s = Sys::new();
    // mlx5 RoCE: the RDMA device shows under the NIC's own PCI function.
    s.nic("ens1f0", 1, "100000", 4200, "0000:41:00.0");
    s.link(
        "sys/class/infiniband/mlx5_0/device",
        "../../../devices/pci0000:00/0000:41:00.0",
    );
    let f = s.facts("ens1f0");
    assert_eq!(
        (f.kind, f.speed_mbps, f.rdma),
        (LinkKind::Ethernet, Some(100_000), true)
    );
    // Soft-RoCE (rxe) names its parent interface instead.
    s.nic("eth1", 1, "25000", 1500, "0000:42:00.0")
        .file("sys/class/infiniband/rxe0/parent", "eth1\n");
    assert!(s.facts("eth1").rdma);
    s.nic("eth2", 1, "25000", 1500, "0000:43:00.0");
    assert!(!s.facts("eth2").rdma, "no RDMA device is bound to eth2");
}

#[test]
fn ip_over_infiniband_is_infiniband() {
    let s = Sys::new();
    s.nic("ib0", 32, "200000", 2044, "0000:c1:00.0")
        .dir("sys/class/net/ib0/device/infiniband/mlx5_1");
    let f = s.facts("ib0");
    assert_eq!(
        (f.kind, f.speed_mbps, f.rdma),
        (LinkKind::Infiniband, Some(200_000), true)
    );
}

#[test]
fn thunderbolt_networking_is_thunderbolt() {
    let s = Sys::new();
    s.file("sys/class/net/thunderbolt0/type", "1")
        .file("sys/class/net/thunderbolt0/mtu", "65520")
        .dir("sys/devices/0-1.0")
        .link(
            "sys/class/net/thunderbolt0/device",
            "../../../devices/0-1.0",
        )
        .link(
            "sys/class/net/thunderbolt0/device/subsystem",
            "../../bus/thunderbolt",
        );
    assert_eq!(s.facts("thunderbolt0").kind, LinkKind::Thunderbolt);
}

#[test]
fn links_without_hardware_are_virtual_and_a_bond_takes_its_ports_kind() {
    let s = Sys::new();
    s.file("sys/class/net/br0/type", "1")
        .file("sys/class/net/lo/type", "772")
        .file("sys/class/net/lo/mtu", "65536");
    assert_eq!(s.facts("br0").kind, LinkKind::Virtual);
    assert_eq!(
        (s.facts("lo").kind, s.facts("lo").mtu),
        (LinkKind::Virtual, 65536)
    );
    s.nic("eno1", 1, "25000", 9000, "0000:18:00.0")
        .file("sys/class/net/bond0/type", "1")
        .file("sys/class/net/bond0/speed", "50000")
        .link("sys/class/net/bond0/lower_eno1", "../eno1");
    let b = s.facts("bond0");
    assert_eq!((b.kind, b.speed_mbps), (LinkKind::Ethernet, Some(50_000)));
}
