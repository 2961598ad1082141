//! **Room in the kernel's neighbour table for a large lab.** The ARP
//! table is one for the whole kernel, every network namespace's entries
//! counted against the same limits (`net.ipv4.neigh.default.gc_thresh1-3`,
//! 128/512/1024 by default; the sysctls a namespace shows are the global
//! ones). A lab of a thousand hosts around one coordinator holds about two
//! entries per host (each host's for the coordinator, the coordinator's for
//! each host), so past about 500 hosts the kernel starts refusing new
//! entries ("neighbour table overflow") and packets are dropped: a
//! failure of the lab, not of what runs in it. A large lab raises the
//! limits for its lifetime and puts the old ones back when it is dropped.

use std::fs;

const THRESH: [&str; 3] = [
    "/proc/sys/net/ipv4/neigh/default/gc_thresh1",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh2",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
];

/// Raised limits, restored on drop.
#[derive(Debug)]
pub(crate) struct NeighRoom {
    old: [u64; 3],
}

/// Entries a lab of `hosts` hosts may hold: two per host, and room for
/// IPv6 and peers beside them.
pub(crate) fn needed(hosts: usize) -> u64 {
    (hosts as u64 * 4).max(1024)
}

impl NeighRoom {
    /// Raises the limits so that `entries` fit (the hard limit twice that),
    /// unless they already do; `None` when nothing was changed. A kernel
    /// that does not let this process change them (a user namespace) is
    /// told of on stderr: the lab is built anyway.
    pub(crate) fn make(entries: u64) -> Option<NeighRoom> {
        let old = read()?;
        if old[2] >= entries * 2 {
            return None;
        }
        let want = [
            old[0].max(entries / 2),
            old[1].max(entries),
            old[2].max(entries * 2),
        ];
        for i in 0..3 {
            if let Err(e) = fs::write(THRESH[i], want[i].to_string()) {
                eprintln!(
                    "rlx-lab: cannot raise {} to {} ({e}); a lab this large may overflow the \
                     kernel's neighbour table and drop packets",
                    THRESH[i], want[i]
                );
                write(old);
                return None;
            }
        }
        Some(NeighRoom { old })
    }
}

impl Drop for NeighRoom {
    fn drop(&mut self) {
        write(self.old);
    }
}

fn read() -> Option<[u64; 3]> {
    let mut v = [0u64; 3];
    for (i, p) in THRESH.iter().enumerate() {
        v[i] = fs::read_to_string(p).ok()?.trim().parse().ok()?;
    }
    Some(v)
}

/// Sets the three limits to `v`.
fn write(v: [u64; 3]) {
    for i in 0..3 {
        let _ = fs::write(THRESH[i], v[i].to_string());
    }
}
