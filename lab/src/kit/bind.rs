//! **BIND's `named` for the wide-area DNS-SD tests**: an authoritative
//! server for one dynamic zone, updates allowed to a fresh `tsig-keygen`
//! key, started in one lab host.
//! Nothing here touches the host's /etc/bind or /var/cache/bind: the
//! server's directory, pid file, session key and trust anchors all live in
//! a temp dir. Callers check
//! [`peer::require(.., &[Peer::Bind])`](super::peer::require) first.

use super::proc::Proc;
use crate::topology::Lab;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The dynamic zone agents register in.
pub const ZONE: &str = "lab.test";

/// How long start-up may take on a loaded 2-core box.
pub const UP: Duration = Duration::from_secs(30);

/// BIND's `named` running in one lab host; killed with the lab process.
pub struct Named {
    /// The server process.
    pub proc: Proc,
    /// Its address.
    pub ip: String,
    /// The TSIG key file (mode 0600) the zone accepts updates signed with.
    pub key: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts `named` in host `host` of `lab`, authoritative for [`ZONE`] with
/// updates allowed to a fresh `tsig-keygen` key.
pub fn start_named(lab: &Lab, host: usize) -> Named {
    if let Err(e) = super::peer::ensure(super::peer::Peer::Bind) {
        panic!("{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ip = lab.host(host).ip.to_string();
    let keygen = Command::new("tsig-keygen")
        .args(["-a", "hmac-sha256", "rlx-update"])
        .output()
        .expect("tsig-keygen (bind9-utils) is needed for the DNS-SD tests");
    assert!(keygen.status.success(), "tsig-keygen failed");
    let key = d.join("update.key");
    std::fs::write(&key, &keygen.stdout).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(d.join("bind.keys"), "").unwrap();
    std::fs::write(
        d.join(format!("{ZONE}.db")),
        format!(
            "$TTL 60\n@ IN SOA ns.{ZONE}. hostmaster.{ZONE}. 1 60 60 600 60\n@ IN NS ns.{ZONE}.\nns IN A {ip}\n"
        ),
    )
    .unwrap();
    let p = d.display();
    std::fs::write(
        d.join("named.conf"),
        format!(
            r#"include "{p}/update.key";
options {{
  directory "{p}";
  pid-file "{p}/named.pid";
  session-keyfile "{p}/session.key";
  managed-keys-directory "{p}";
  bindkeys-file "{p}/bind.keys";
  dump-file "{p}/dump.db";
  statistics-file "{p}/stats";
  listen-on port 53 {{ {ip}; }};
  listen-on-v6 {{ none; }};
  recursion no;
  dnssec-validation no;
  minimal-responses no;
  notify no;
}};
controls {{ }};
zone "{ZONE}" {{
  type primary;
  file "{p}/{ZONE}.db";
  allow-update {{ key "rlx-update"; }};
}};
"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new("/usr/sbin/named");
    cmd.args(["-g", "-n", "1", "-c"]).arg(d.join("named.conf"));
    let proc = Proc::spawn(lab, host, cmd);
    // Not "running": `running on Linux ...` is the first line of the log,
    // long before the sockets are open.
    proc.expect_output("all zones loaded", UP);
    // The configure line quotes /etc/bind; every file named opens must be ours.
    let log = proc.stderr();
    let touched: Vec<&str> = log
        .lines()
        .filter(|l| {
            !l.contains("built with") && (l.contains("/etc/bind") || l.contains("/var/cache/bind"))
        })
        .collect();
    assert!(
        touched.is_empty(),
        "named must not use the host's files: {touched:?}"
    );
    Named {
        proc,
        ip,
        key,
        _dir: dir,
    }
}
