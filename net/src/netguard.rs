//! **Refuse to touch the real network from a test** — a guard that stops a
//! process from sending mDNS or scanning when it runs in the machine's initial
//! network namespace while `RLX_NETNS_GUARD=1`.
//!
//! ```sh
//! RLX_NETNS_GUARD=1 rlx-agent            # refused: this is the host's network
//! ip netns add t && ip netns exec t env RLX_NETNS_GUARD=1 rlx-agent --interface lo   # runs
//! ```
//!
//! The lab (the `rlx-lab` crate) sets the variable on every command it starts, so a
//! test that forgets `ip netns exec` fails loudly instead of multicasting onto
//! the developer's LAN. Without the variable the guard does nothing: real
//! deployments run in the initial namespace on purpose.
//!
//! # How "initial namespace" is decided
//!
//! The textbook check compares `/proc/self/ns/net` with `/proc/1/ns/net`, but
//! reading another process's namespace links needs ptrace access to it, and
//! on some machines even root gets `EACCES` for pid 1 (as on a
//! Firecracker VM whose init is not an ordinary process). So the guard uses
//! every piece of evidence it can get, in this order, and fails closed:
//!
//! 1. `/proc/self/ns/net` unreadable: refuse (we cannot tell).
//! 2. Its inode is [`NET_NS_INIT_INO`] (`0xEFFFFFF9`): refuse. Since Linux 6.18
//!    the initial network namespace has this fixed inode, and dynamically
//!    allocated namespace inodes start at `0xF0000000`, so on older kernels
//!    no other namespace can carry it either.
//! 3. `/proc/1/ns/net` readable: refuse when equal, pass when different.
//! 4. The namespace is owned by a user namespace other than the initial one
//!    (`NS_GET_USERNS`, compared with the fixed [`USER_NS_INIT_INO`]): pass,
//!    because the initial network namespace belongs to the initial user
//!    namespace. This covers `unshare --user --net` on kernels before 6.18.
//! 5. The kernel is 6.18 or newer: pass (rule 2 would have caught it).
//! 6. Otherwise: refuse, saying the namespace could not be identified.
//!
//! # Other systems (macOS)
//! Network namespaces are a Linux mechanism; a Mac has nothing a test could
//! make a private network of (a `utun` or `feth` pair still reaches the
//! LAN's multicast through the same stack). So on any system but Linux,
//! `RLX_NETNS_GUARD=1` refuses outright ([`Refusal::NoNamespaces`]): the
//! network tests cannot run there, and saying so beats multicasting onto
//! the developer's LAN. Without the variable the guard does nothing, as on
//! Linux: the agent and the coordinator run normally on a Mac.

use std::fmt;
#[cfg(target_os = "linux")]
use std::fs;
#[cfg(target_os = "linux")]
use std::os::unix::fs::MetadataExt;

/// The environment variable that turns the guard on (value `1`).
pub const GUARD_ENV: &str = "RLX_NETNS_GUARD";

/// Inode of the initial network namespace, fixed by the kernel since Linux
/// 6.18: `NET_NS_INIT_INO = 0xEFFFFFF9U` in `include/uapi/linux/nsfs.h`
/// (`enum init_ns_ino`), which `include/linux/proc_ns.h` exposes as
/// `PROC_NET_INIT_INO` and `net_ns_net_init()` assigns to `init_net`.
/// `readlink /proc/self/ns/net` in the root namespace prints
/// `net:[4026531833]` (= `0xEFFFFFF9`) on the development machine.
pub const NET_NS_INIT_INO: u64 = 0xEFFF_FFF9;

/// Inode of the initial user namespace, fixed far longer than the network
/// one (`PROC_USER_INIT_INO`, Linux 3.8; `USER_NS_INIT_INO = 0xEFFFFFFDU` in
/// the same uapi enum). Used to recognise namespaces made by `unshare --user`.
pub const USER_NS_INIT_INO: u64 = 0xEFFF_FFFD;

/// First kernel (major, minor) whose initial network namespace has the fixed
/// inode [`NET_NS_INIT_INO`].
const FIXED_NET_INO_SINCE: (u32, u32) = (6, 18);

/// Why the guard refused. The message says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardError {
    /// What was about to run (`"rlx-agent"`, `"mDNS browse"`...).
    pub what: String,
    /// What the guard saw.
    pub reason: Refusal,
}

/// The evidence that made the guard refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `/proc/self/ns/net` could not be read.
    Unreadable(String),
    /// The namespace inode is the kernel's fixed initial one.
    InitialInode(u64),
    /// Same namespace as pid 1.
    SameAsInit(u64),
    /// Nothing could prove the namespace is a private one.
    Undecidable(u64),
    /// This system has no network namespaces (anything but Linux).
    NoNamespaces(&'static str),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unreadable(e) => write!(f, "/proc/self/ns/net cannot be read ({e})"),
            Refusal::InitialInode(ino) => write!(
                f,
                "this process is in the machine's initial network namespace \
                 (net:[{ino}], the kernel's fixed initial inode)"
            ),
            Refusal::SameAsInit(ino) => write!(
                f,
                "this process shares its network namespace (net:[{ino}]) with pid 1"
            ),
            Refusal::Undecidable(ino) => write!(
                f,
                "net:[{ino}] could not be proven private (pid 1's namespace is \
                 unreadable and this kernel predates the fixed initial inode)"
            ),
            Refusal::NoNamespaces(os) => write!(
                f,
                "{os} has no network namespaces, so nothing here can be a private \
                 test network (the network tests run on Linux only)"
            ),
        }
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Refusal::NoNamespaces(_) = self.reason {
            return write!(
                f,
                "refusing to run {}: {GUARD_ENV}=1 and {}. It would send multicast or \
                 scan on the real network. Unset {GUARD_ENV} to run it for real",
                self.what, self.reason
            );
        }
        write!(
            f,
            "refusing to run {}: {GUARD_ENV}=1 and {}. It would send multicast or \
             scan on the real network. Run it inside a network namespace you created \
             (`ip netns add t; ip netns exec t ...` as root, or \
             `unshare --user --map-root-user --net ...`), or unset {GUARD_ENV} \
             outside tests",
            self.what, self.reason
        )
    }
}

impl std::error::Error for GuardError {}

/// What the guard knows about this process's network namespace. Separate
/// from the probing so the decision can be tested with made-up values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Inode of `/proc/self/ns/net`, `None` if unreadable.
    pub own: Option<u64>,
    /// Inode of `/proc/1/ns/net`, `None` if unreadable.
    pub pid1: Option<u64>,
    /// Inode of the user namespace owning ours (`NS_GET_USERNS`), if known.
    pub owner_userns: Option<u64>,
    /// Kernel (major, minor), if known.
    pub kernel: Option<(u32, u32)>,
}

/// Refuse when `RLX_NETNS_GUARD=1` and this process is (or may be) in the
/// machine's initial network namespace. `what` names the operation in the
/// error. Does nothing when the variable is unset or not `1`.
pub fn ensure_private_netns(what: &str) -> Result<(), GuardError> {
    if std::env::var_os(GUARD_ENV).is_none_or(|v| v != "1") {
        return Ok(());
    }
    #[cfg(not(target_os = "linux"))]
    return Err(GuardError {
        what: what.to_string(),
        reason: Refusal::NoNamespaces(std::env::consts::OS),
    });
    #[cfg(target_os = "linux")]
    linux_evidence(what)
}

/// Gathers the evidence (Linux only) and decides.
#[cfg(target_os = "linux")]
fn linux_evidence(what: &str) -> Result<(), GuardError> {
    let own = fs::metadata("/proc/self/ns/net").map(|m| m.ino());
    let evidence = match own {
        Err(e) => {
            return Err(GuardError {
                what: what.to_string(),
                reason: Refusal::Unreadable(e.to_string()),
            })
        }
        Ok(ino) => Evidence {
            own: Some(ino),
            pid1: fs::metadata("/proc/1/ns/net").map(|m| m.ino()).ok(),
            owner_userns: owner_userns_inode(),
            kernel: kernel_version(),
        },
    };
    decide(&evidence).map_err(|reason| GuardError {
        what: what.to_string(),
        reason,
    })
}

/// The decision, from evidence alone (see the module docs for the order).
pub fn decide(e: &Evidence) -> Result<(), Refusal> {
    let Some(own) = e.own else {
        return Err(Refusal::Unreadable("no inode".into()));
    };
    if own == NET_NS_INIT_INO {
        return Err(Refusal::InitialInode(own));
    }
    if let Some(pid1) = e.pid1 {
        return if pid1 == own {
            Err(Refusal::SameAsInit(own))
        } else {
            Ok(())
        };
    }
    if e.owner_userns.is_some_and(|u| u != USER_NS_INIT_INO) {
        return Ok(());
    }
    if e.kernel.is_some_and(|k| k >= FIXED_NET_INO_SINCE) {
        return Ok(());
    }
    Err(Refusal::Undecidable(own))
}

/// Inode of the user namespace that owns this process's network namespace.
///
/// `NS_GET_USERNS` (Linux 4.9) returns a descriptor for it; it fails with
/// `EPERM` when the owner lies outside our own user namespace, which tells us
/// nothing, hence `None`.
#[cfg(target_os = "linux")]
fn owner_userns_inode() -> Option<u64> {
    use nix::libc;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    /// `_IO(NSIO, 0x1)` with `NSIO = 0xb7`, from `include/uapi/linux/nsfs.h`.
    const NS_GET_USERNS: u64 = 0xb701;
    let net = fs::File::open("/proc/self/ns/net").ok()?;
    // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor
    // (or -1); `net` stays open for the duration of the call.
    let fd = unsafe { libc::ioctl(net.as_raw_fd(), NS_GET_USERNS as _) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    let owner = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    owner.metadata().ok().map(|m| m.ino())
}

/// Kernel (major, minor) from `/proc/sys/kernel/osrelease`.
#[cfg(target_os = "linux")]
fn kernel_version() -> Option<(u32, u32)> {
    parse_kernel_release(&fs::read_to_string("/proc/sys/kernel/osrelease").ok()?)
}

/// `"6.18.44-fc-v657"` -> `(6, 18)`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_kernel_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIVATE: u64 = 4026532248;
    const OLD_INIT: u64 = 4026531992;

    fn ev(own: u64) -> Evidence {
        Evidence {
            own: Some(own),
            ..Evidence::default()
        }
    }

    #[test]
    fn the_fixed_initial_inode_is_refused_whatever_else_is_known() {
        let e = Evidence {
            pid1: Some(PRIVATE),
            owner_userns: Some(123),
            kernel: Some((6, 18)),
            ..ev(NET_NS_INIT_INO)
        };
        assert_eq!(decide(&e), Err(Refusal::InitialInode(NET_NS_INIT_INO)));
    }

    #[test]
    fn an_unreadable_own_namespace_is_refused() {
        assert!(matches!(
            decide(&Evidence::default()),
            Err(Refusal::Unreadable(_))
        ));
    }

    #[test]
    fn sharing_pid_1s_namespace_is_refused_on_old_kernels() {
        let e = Evidence {
            pid1: Some(OLD_INIT),
            kernel: Some((5, 15)),
            ..ev(OLD_INIT)
        };
        assert_eq!(decide(&e), Err(Refusal::SameAsInit(OLD_INIT)));
    }

    #[test]
    fn a_namespace_other_than_pid_1s_passes() {
        let e = Evidence {
            pid1: Some(OLD_INIT),
            ..ev(PRIVATE)
        };
        assert_eq!(decide(&e), Ok(()));
    }

    #[test]
    fn a_namespace_owned_by_a_child_user_namespace_passes_without_pid_1() {
        let e = Evidence {
            owner_userns: Some(4026532177),
            kernel: Some((5, 10)),
            ..ev(PRIVATE)
        };
        assert_eq!(decide(&e), Ok(()));
    }

    #[test]
    fn without_pid_1_a_new_kernel_proves_a_non_initial_inode_private() {
        let e = Evidence {
            owner_userns: Some(USER_NS_INIT_INO),
            kernel: Some((6, 18)),
            ..ev(PRIVATE)
        };
        assert_eq!(decide(&e), Ok(()));
    }

    #[test]
    fn without_pid_1_an_old_kernel_and_the_initial_user_namespace_is_refused() {
        let e = Evidence {
            owner_userns: Some(USER_NS_INIT_INO),
            kernel: Some((6, 17)),
            ..ev(OLD_INIT)
        };
        assert_eq!(decide(&e), Err(Refusal::Undecidable(OLD_INIT)));
        assert_eq!(decide(&ev(OLD_INIT)), Err(Refusal::Undecidable(OLD_INIT)));
    }

    #[test]
    fn kernel_releases_parse_to_major_and_minor() {
        assert_eq!(parse_kernel_release("6.18.44-fc-v657\n"), Some((6, 18)));
        assert_eq!(parse_kernel_release("5.4-rc1"), Some((5, 4)));
        assert_eq!(parse_kernel_release("garbage"), None);
    }

    #[test]
    fn the_refusal_says_what_to_do() {
        let msg = GuardError {
            what: "rlx-agent".into(),
            reason: Refusal::InitialInode(NET_NS_INIT_INO),
        }
        .to_string();
        for needle in ["rlx-agent", "RLX_NETNS_GUARD", "ip netns exec", "unshare"] {
            assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
        }
    }

    /// This test process runs in the machine's initial namespace (as
    /// `cargo test` does), so the live evidence must refuse. Guarded by the
    /// inode so that running the suite inside a namespace does not fail it.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_live_evidence_of_the_root_namespace_is_refused() {
        let own = fs::metadata("/proc/self/ns/net").unwrap().ino();
        if own != NET_NS_INIT_INO {
            eprintln!("SKIP: not in the initial network namespace (net:[{own}])");
            return;
        }
        let e = Evidence {
            own: Some(own),
            pid1: fs::metadata("/proc/1/ns/net").map(|m| m.ino()).ok(),
            owner_userns: owner_userns_inode(),
            kernel: kernel_version(),
        };
        assert!(
            decide(&e).is_err(),
            "root namespace passed the guard: {e:?}"
        );
        assert_eq!(owner_userns_inode(), Some(USER_NS_INIT_INO));
    }

    #[test]
    fn a_system_without_namespaces_is_refused_with_the_reason() {
        let msg = GuardError {
            what: "rlx-agent".into(),
            reason: Refusal::NoNamespaces("macos"),
        }
        .to_string();
        for needle in ["rlx-agent", "macos has no network namespaces", "Linux only"] {
            assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
        }
    }

    /// On a Mac the guard refuses whatever the process is: there is no
    /// private network a test could be in.
    #[test]
    #[cfg(not(target_os = "linux"))]
    fn with_the_variable_set_a_system_without_namespaces_is_refused() {
        let refused = run_probe(Some("1"));
        assert!(
            refused.contains("GUARD: refused") && refused.contains("no network namespaces"),
            "{refused}"
        );
        assert!(run_probe(None).contains("GUARD: pass"), "{refused}");
    }

    /// Environment variable that turns [`guard_probe_helper`] into a probe.
    const PROBE_ENV: &str = "RLX_NETGUARD_PROBE";

    /// Not a test on its own: when run by the test below with
    /// `RLX_NETGUARD_PROBE=1`, prints what the real guard decided. (Setting
    /// the guard variable in this process would race the parallel tests.)
    #[test]
    fn guard_probe_helper() {
        if std::env::var_os(PROBE_ENV).is_some() {
            match ensure_private_netns("the probe") {
                Ok(()) => println!("GUARD: pass"),
                Err(e) => println!("GUARD: refused: {e}"),
            }
        }
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn run_probe(guard: Option<&str>) -> String {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "netguard::tests::guard_probe_helper",
            "--nocapture",
        ])
        .env(PROBE_ENV, "1")
        .env_remove(GUARD_ENV);
        if let Some(v) = guard {
            cmd.env(GUARD_ENV, v);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "probe failed: {stdout}");
        stdout
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn with_the_variable_set_the_root_namespace_is_refused_and_without_it_nothing_happens() {
        let own = fs::metadata("/proc/self/ns/net").unwrap().ino();
        if own != NET_NS_INIT_INO {
            eprintln!("SKIP: not in the initial network namespace (net:[{own}])");
            return;
        }
        let refused = run_probe(Some("1"));
        assert!(
            refused.contains("GUARD: refused") && refused.contains("initial network namespace"),
            "guard let the root namespace through: {refused}"
        );
        assert!(
            run_probe(None).contains("GUARD: pass"),
            "guard acted without the variable"
        );
        assert!(
            run_probe(Some("0")).contains("GUARD: pass"),
            "only `1` turns the guard on"
        );
    }
}
