//! **The real peers the tests run against** — python-zeroconf, avahi, BIND,
//! OpenSSH, nftables: Debian packages a fresh machine may not have. A test
//! that needs one asks [`require`] first: on a machine without it the test
//! says `SKIP <test>: needs <what> (apt-get install <package>)` and
//! passes, so `cargo test --workspace` typed on a fresh machine is green and
//! says what it did not check; under `CI=true` a missing peer fails the test
//! instead (`.ci/run` installs them all, and a skip there would hide a broken
//! runner).

use crate::cmd::executable;
pub use crate::cmd::on_path;
use std::path::Path;
use std::process::{Command, Stdio};

/// Debian's interpreter, which has python3-zeroconf (the `python3` on PATH
/// may be another CPython without Debian's packages).
pub const PYTHON: &str = "/usr/bin/python3";

/// A program the tests talk to, and the package that brings it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Debian's `/usr/bin/python3`, for the tests' small socket scripts.
    Python,
    /// python-zeroconf under Debian's own `/usr/bin/python3` (the `python3`
    /// on PATH may be another CPython without Debian's packages).
    PythonZeroconf,
    /// avahi-daemon with avahi-publish/avahi-browse, and the private D-Bus
    /// daemon it needs.
    Avahi,
    /// avahi's DNS-SD compatibility library (`libdns_sd.so.1`), the
    /// agent's system responder on Linux.
    AvahiDnsSd,
    /// BIND's `named` and `tsig-keygen`.
    Bind,
    /// OpenSSH's `sshd`, `ssh` and `ssh-keygen`.
    OpenSsh,
    /// `nft`, for loss and silent hosts in the lab.
    Nftables,
    /// `iperf3`, the reference the link measurement is checked against.
    Iperf3,
    /// libfaketime's `faketime`, to run an agent whose clock is off.
    Faketime,
    /// `setfacl` and `getfacl`, to give a file an ACL a write must keep.
    Acl,
    /// Open MPI's `mpirun`, the reader of the MPI hostfile `links` writes.
    OpenMpi,
}

impl Peer {
    /// What `apt-get install` needs for this peer.
    pub fn packages(self) -> &'static str {
        match self {
            Peer::Python => "python3",
            Peer::PythonZeroconf => "python3-zeroconf",
            Peer::Avahi => "avahi-daemon avahi-utils dbus-daemon",
            Peer::AvahiDnsSd => "libavahi-compat-libdnssd1",
            Peer::Bind => "bind9 bind9-utils",
            Peer::OpenSsh => "openssh-server openssh-client",
            Peer::Nftables => "nftables",
            Peer::Iperf3 => "iperf3",
            Peer::Faketime => "faketime",
            Peer::Acl => "acl",
            Peer::OpenMpi => "openmpi-bin",
        }
    }

    /// What the peer is, for the skip message.
    pub fn what(self) -> &'static str {
        match self {
            Peer::Python => "Debian's /usr/bin/python3",
            Peer::PythonZeroconf => "python-zeroconf (under /usr/bin/python3)",
            Peer::Avahi => "avahi-daemon, avahi-publish and dbus-daemon",
            Peer::AvahiDnsSd => "avahi's libdns_sd.so.1",
            Peer::Bind => "BIND (/usr/sbin/named, tsig-keygen)",
            Peer::OpenSsh => "OpenSSH (/usr/sbin/sshd, ssh, ssh-keygen)",
            Peer::Nftables => "nftables (nft)",
            Peer::Iperf3 => "iperf3",
            Peer::Faketime => "faketime (libfaketime)",
            Peer::Acl => "setfacl and getfacl",
            Peer::OpenMpi => "Open MPI's mpirun",
        }
    }

    /// Whether this machine has the peer.
    pub fn present(self) -> bool {
        match self {
            Peer::Python => executable(Path::new(PYTHON)),
            Peer::PythonZeroconf => Command::new(PYTHON)
                .args([
                    "-c",
                    "from zeroconf import ServiceBrowser, ServiceInfo, Zeroconf",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            Peer::Avahi => {
                executable(Path::new("/usr/sbin/avahi-daemon"))
                    && on_path("avahi-publish")
                    && on_path("avahi-browse")
                    && on_path("dbus-daemon")
            }
            Peer::AvahiDnsSd => [
                "/usr/lib",
                "/usr/lib64",
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
            ]
            .iter()
            // A file, not just a name: `.ci/fresh` hides it under /dev/null.
            .any(|d| Path::new(d).join("libdns_sd.so.1").is_file()),
            Peer::Bind => executable(Path::new("/usr/sbin/named")) && on_path("tsig-keygen"),
            Peer::OpenSsh => {
                executable(Path::new("/usr/sbin/sshd")) && on_path("ssh") && on_path("ssh-keygen")
            }
            Peer::Nftables => on_path("nft"),
            Peer::Iperf3 => on_path("iperf3"),
            Peer::Faketime => on_path("faketime"),
            Peer::Acl => on_path("setfacl") && on_path("getfacl"),
            Peer::OpenMpi => on_path("mpirun"),
        }
    }
}

/// Whether `test` can run: every peer present. Otherwise prints
/// `SKIP <test>: ...` naming what to install and returns `false`, or, under
/// `CI=true`, panics (the runner was meant to install it).
pub fn require(test: &str, peers: &[Peer]) -> bool {
    let missing: Vec<Peer> = peers.iter().copied().filter(|p| !p.present()).collect();
    if missing.is_empty() {
        return true;
    }
    let what: Vec<&str> = missing.iter().map(|p| p.what()).collect();
    let pkgs: Vec<&str> = missing.iter().map(|p| p.packages()).collect();
    let msg = format!(
        "{test}: needs {} (sudo apt-get install {})",
        what.join(", "),
        pkgs.join(" ")
    );
    assert!(!in_ci(), "{msg}; CI must install it (see .ci/run)");
    skip(&msg);
    false
}

/// `Err` with a message naming the check the calling test forgot when
/// `peer` is missing: the kit's helpers that start a peer (avahi, BIND,
/// sshd, the python-zeroconf browser) ask it first, so a test that skipped
/// [`require`] fails saying so instead of with a bare "cannot run".
pub fn ensure(peer: Peer) -> Result<(), String> {
    if peer.present() {
        return Ok(());
    }
    Err(format!(
        "{} is not installed (apt-get install {}): a test that starts it must call \
         rlx_lab::kit::peer::require(.., &[Peer::{peer:?}]) first, so that it says SKIP \
         here instead of failing",
        peer.what(),
        peer.packages()
    ))
}

/// Says `SKIP <what>` on stderr, past the test harness's output capture
/// (which takes only `print!`/`eprint!`), so a skip shows in plain `cargo
/// test` output instead of passing silently.
pub fn skip(what: &str) {
    use std::io::Write;
    // One write of the whole line: `writeln!` writes its pieces one by one,
    // and the harness's own `test ... ok` lines then land in the middle.
    let line = format!("SKIP {what}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Whether this is a CI run (`CI` set to anything but empty, `0` or
/// `false`), where nothing may skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_names_the_debian_packages_that_bring_it() {
        for p in [
            Peer::Python,
            Peer::PythonZeroconf,
            Peer::Avahi,
            Peer::AvahiDnsSd,
            Peer::Bind,
            Peer::OpenSsh,
            Peer::Nftables,
            Peer::Iperf3,
            Peer::Faketime,
            Peer::Acl,
        ] {
            assert!(!p.packages().is_empty() && !p.what().is_empty(), "{p:?}");
        }
    }

    #[test]
    fn a_missing_peer_names_the_check_the_test_forgot() {
        // Present or not here, the message is the same shape.
        for p in [Peer::Nftables, Peer::Avahi, Peer::Bind, Peer::OpenSsh] {
            if let Err(e) = ensure(p) {
                assert!(
                    e.contains(&format!("peer::require(.., &[Peer::{p:?}])")),
                    "{e}"
                );
                assert!(e.contains(p.packages()), "{e}");
            }
        }
    }

    #[test]
    fn a_program_that_is_nowhere_is_not_on_path() {
        assert!(!on_path("rlx-no-such-program-anywhere"));
        assert!(on_path("sh"));
    }
}
