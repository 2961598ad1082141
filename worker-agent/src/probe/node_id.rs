//! **A node id that survives restarts and differs between clones** — 16
//! lowercase hex characters, the `id` in the caps and the TXT record.
//!
//! The coordinator uses the id to recognise one machine seen on several
//! interfaces or through several sources, so it must be:
//! - *stable*: the same after a reboot or an agent upgrade, so a node does
//!   not turn into a stranger. It is therefore recomputed from facts of the
//!   machine, not drawn at random on each start.
//! - *distinct on clones*: fleets are installed from one disk image, and
//!   `/etc/machine-id` is part of the image unless the image was prepared
//!   with `systemd-machine-id-setup`'s first-boot dance. Hashing the machine
//!   id alone would give every clone the same identity and the coordinator
//!   would merge a rack into one node. So the hash also covers what no image
//!   can copy: the firmware's `product_uuid` (SMBIOS system UUID) and the
//!   burned-in MAC addresses of the physical network cards.
//!
//! `id = hex(SHA-256("rlx-node-id-v1" ‖ machine-id ‖ product_uuid ‖ MACs)[..8])`,
//! MACs sorted so interface renames do not matter. Virtual interfaces
//! (bridges, veth, tun, docker), USB dongles that come and go, and addresses
//! the kernel reports as random or administratively set are left out because
//! they change without the machine changing. Adding or removing a network
//! card does change the id: that is a hardware change, and `--node-id` pins
//! an id for whoever needs it fixed regardless.
//!
//! When there is no hardware fact at all (a container without DMI access
//! and with only virtual interfaces, macOS), the id is random, drawn once and
//! kept in the state directory (`node-id` file), so it is still stable across
//! restarts.

use super::root::Root;
use sha2::{Digest, Sha256};
use std::path::Path;

/// SMBIOS UUIDs that vendors ship unprogrammed: shared by every board of a
/// model, so they identify nothing.
const PLACEHOLDER_UUIDS: [&str; 3] = [
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009",
];

/// Name of the file in the state directory that keeps a random id.
pub const STATE_FILE: &str = "node-id";

/// The facts an id is derived from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inputs {
    /// `/etc/machine-id` (or D-Bus's copy), if any.
    pub machine_id: Option<String>,
    /// `/sys/class/dmi/id/product_uuid`, lowercased, if readable and real.
    pub product_uuid: Option<String>,
    /// Permanent MACs of physical NICs, lowercase, sorted.
    pub macs: Vec<String>,
}

impl Inputs {
    /// Reads the inputs under `root`.
    pub fn read(root: &Root) -> Inputs {
        let machine_id = root
            .read("/etc/machine-id")
            .or_else(|| root.read("/var/lib/dbus/machine-id"))
            .filter(|s| !s.is_empty());
        // Readable by root only on most distributions; an agent running as a
        // user then relies on the MACs.
        let product_uuid = root
            .read("/sys/class/dmi/id/product_uuid")
            .map(|s| s.to_ascii_lowercase())
            .filter(|s| !s.is_empty() && !PLACEHOLDER_UUIDS.contains(&s.as_str()));
        let mut macs: Vec<String> = root
            .list("/sys/class/net")
            .into_iter()
            .filter_map(|nic| physical_mac(root, &nic))
            .collect();
        macs.sort();
        macs.dedup();
        Inputs {
            machine_id,
            product_uuid,
            macs,
        }
    }

    /// Whether anything here tells clones apart. The machine id alone does
    /// not (it is copied with the image).
    pub fn has_hardware(&self) -> bool {
        self.product_uuid.is_some() || !self.macs.is_empty()
    }

    /// The id these inputs give.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"rlx-node-id-v1\n");
        if let Some(m) = &self.machine_id {
            h.update(format!("machine-id={m}\n"));
        }
        if let Some(u) = &self.product_uuid {
            h.update(format!("product_uuid={u}\n"));
        }
        for mac in &self.macs {
            h.update(format!("mac={mac}\n"));
        }
        hex::encode(&h.finalize()[..8])
    }
}

/// The burned-in MAC of `nic` if it is a physical, non-USB card whose
/// address the kernel marks as permanent (`addr_assign_type` 0).
fn physical_mac(root: &Root, nic: &str) -> Option<String> {
    let dir = format!("/sys/class/net/{nic}");
    // Only interfaces backed by a bus device have a `device` link; bridges,
    // veth pairs, tun/tap, bonds and loopback do not.
    if !root.exists(format!("{dir}/device")) {
        return None;
    }
    if root.link_name(format!("{dir}/device/subsystem")).as_deref() == Some("usb") {
        tracing::debug!(%nic, "USB network adapter left out of the node id");
        return None;
    }
    // 0 = permanent; 1 random, 2 stolen, 3 set by userspace. Missing on very
    // old kernels: treat as permanent.
    if root
        .read(format!("{dir}/addr_assign_type"))
        .is_some_and(|t| t != "0")
    {
        return None;
    }
    let mac = root.read(format!("{dir}/address"))?.to_ascii_lowercase();
    let zero = mac.bytes().all(|b| b == b'0' || b == b':');
    (!mac.is_empty() && !zero).then_some(mac)
}

/// The node id: derived from the hardware when possible, else the random id
/// kept in `state_dir` (created on first use).
///
/// Never fails: without a writable state directory the random id is used for
/// this run only, with a warning that says how to make it stable.
pub fn node_id(root: &Root, state_dir: Option<&Path>) -> String {
    let inputs = Inputs::read(root);
    if inputs.has_hardware() {
        let id = inputs.id();
        tracing::debug!(%id, product_uuid = inputs.product_uuid.is_some(), macs = inputs.macs.len(), "node id derived from hardware");
        return id;
    }
    tracing::debug!("no product_uuid or physical MAC; using the id kept in the state directory");
    persisted_random(state_dir)
}

fn persisted_random(state_dir: Option<&Path>) -> String {
    let Some(dir) = state_dir else {
        let id = random_id();
        tracing::warn!(%id, "no state directory: the node id will change on restart; pass --state-dir or --node-id");
        return id;
    };
    let file = dir.join(STATE_FILE);
    if let Ok(text) = std::fs::read_to_string(&file) {
        let text = text.trim();
        if rlx_proto::caps::is_valid_id(text) {
            return text.to_string();
        }
        tracing::warn!(path = %file.display(), "node-id file is not 16 lowercase hex characters; replacing it");
    }
    let id = random_id();
    let saved = std::fs::create_dir_all(dir)
        .and_then(|()| super::state::write_atomically(&file, format!("{id}\n").as_bytes()));
    if let Err(e) = saved {
        tracing::warn!(path = %file.display(), error = %e, "cannot save the node id: it will change on restart; fix the directory or pass --node-id");
    }
    id
}

fn random_id() -> String {
    let mut b = [0u8; 8];
    // The OS RNG failing means the system is unusable; an id from the clock
    // is still unique enough for one run.
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        b = (t ^ u64::from(std::process::id()).rotate_left(32)).to_le_bytes();
    }
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A minimal machine: machine-id, DMI uuid, one PCI NIC, plus the virtual
    /// interfaces every host has.
    fn machine(dir: &Path, mac: &str, uuid: &str) {
        let w = |p: &str, s: &str| {
            let p = dir.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, s).unwrap();
        };
        w("etc/machine-id", "3d1219c7c4c5404aaa1f6d2a48adfda4\n");
        w("sys/class/dmi/id/product_uuid", uuid);
        w("sys/class/net/eno1/address", mac);
        w("sys/class/net/eno1/addr_assign_type", "0\n");
        fs::create_dir_all(dir.join("sys/class/net/eno1/device")).unwrap();
        symlink(
            "../../../../bus/pci",
            dir.join("sys/class/net/eno1/device/subsystem"),
        )
        .unwrap();
        w("sys/class/net/lo/address", "00:00:00:00:00:00\n");
        w("sys/class/net/docker0/address", "02:42:ac:11:00:01\n");
    }

    #[test]
    fn the_same_machine_gets_the_same_id_every_time() {
        let d = tempfile::tempdir().unwrap();
        machine(
            d.path(),
            "3c:ec:ef:00:00:01\n",
            "4c4c4544-0042-3510-8052-b4c04f4d4e32\n",
        );
        let root = Root::new(d.path());
        let a = node_id(&root, None);
        assert!(rlx_proto::caps::is_valid_id(&a), "{a}");
        assert_eq!(a, node_id(&root, None));
        let inputs = Inputs::read(&root);
        assert_eq!(
            inputs.macs,
            ["3c:ec:ef:00:00:01"],
            "virtual interfaces are left out"
        );
    }

    /// Guards against clones of one disk image sharing an id: same
    /// machine-id, different board or NIC.
    #[test]
    fn clones_with_one_machine_id_get_different_ids() {
        let ids: Vec<String> = [
            ("3c:ec:ef:00:00:01", "4c4c4544-0042-3510-8052-b4c04f4d4e32"),
            ("3c:ec:ef:00:00:02", "4c4c4544-0042-3510-8052-b4c04f4d4e32"),
            ("3c:ec:ef:00:00:01", "4c4c4544-0042-3510-8052-b4c04f4d4e33"),
        ]
        .iter()
        .map(|(mac, uuid)| {
            let d = tempfile::tempdir().unwrap();
            machine(d.path(), mac, uuid);
            node_id(&Root::new(d.path()), None)
        })
        .collect();
        assert_ne!(ids[0], ids[1], "a different MAC must give a different id");
        assert_ne!(
            ids[0], ids[2],
            "a different product_uuid must give a different id"
        );
    }

    #[test]
    fn randomised_and_placeholder_identities_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        machine(
            d.path(),
            "3c:ec:ef:00:00:01\n",
            "03000200-0400-0500-0006-000700080009\n",
        );
        fs::write(d.path().join("sys/class/net/eno1/addr_assign_type"), "3\n").unwrap();
        let inputs = Inputs::read(&Root::new(d.path()));
        assert!(!inputs.has_hardware(), "{inputs:?}");
    }

    #[test]
    fn without_hardware_facts_a_random_id_is_kept_in_the_state_dir() {
        let fx = tempfile::tempdir().unwrap();
        fs::create_dir_all(fx.path().join("etc")).unwrap();
        fs::write(fx.path().join("etc/machine-id"), "abc\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("nested");
        let root = Root::new(fx.path());
        let a = node_id(&root, Some(&dir));
        assert!(rlx_proto::caps::is_valid_id(&a));
        assert_eq!(a, node_id(&root, Some(&dir)), "a restart must keep the id");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            a,
            node_id(&root, Some(other.path())),
            "another box draws its own"
        );
    }
}
