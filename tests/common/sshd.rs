//! Throwaway OpenSSH servers for tests: keys, an sshd config, and the
//! client-side ssh config entry for an alias pointing at it. Used on
//! loopback (tests/ssh.rs) and inside lab namespaces (tests/lan.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian installs the server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Returns false (and says why) when this machine has no OpenSSH server or
/// client; under CI that is a failure, since .ci/run installs them.
pub fn have_sshd() -> bool {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string();
    rlx_lab::peer::require(&test, &[rlx_lab::peer::Peer::OpenSsh])
}

/// A new ed25519 key pair at `path` and `path.pub`.
pub fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen");
}

/// The current user's name (the login name in client configs).
pub fn user() -> String {
    let o = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Prepares `dir` as an SSH world: a client key `id` authorized by the
/// servers (`authorized_keys`) and a host key. Idempotent.
pub fn prepare(dir: &Path) {
    if !dir.join("id").exists() {
        keygen(&dir.join("id"));
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
    }
    if !dir.join("host_key").exists() {
        keygen(&dir.join("host_key"));
    }
    // sshd insists on its privilege-separation directory when run as root.
    let _ = std::fs::create_dir_all("/run/sshd");
}

/// Writes an sshd config in `dir` for a server listening on `listen:port`
/// whose remote commands get `path` as PATH; returns its path.
pub fn server_config(dir: &Path, name: &str, listen: &str, port: u16, path: &str) -> PathBuf {
    prepare(dir);
    let cfg = dir.join(format!("sshd_{name}.conf"));
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress {listen}\nHostKey {hk}\nAuthorizedKeysFile {ak}\n\
             PidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
             SetEnv PATH={path}\nLogLevel ERROR\n",
            hk = dir.join("host_key").display(),
            ak = dir.join("authorized_keys").display(),
        ),
    )
    .unwrap();
    cfg
}

/// The command that runs sshd in the foreground with `cfg`, logging to stderr.
pub fn server_command(cfg: &Path) -> Command {
    let mut c = Command::new(SSHD);
    c.args(["-D", "-e", "-f"]).arg(cfg);
    c
}

/// An ssh_config entry: `alias` reaches `host:port` with the world's key and
/// no host-key prompts.
pub fn client_entry(dir: &Path, alias: &str, host: &str, port: u16) -> String {
    format!(
        "Host {alias}\n  HostName {host}\n  Port {port}\n  User {u}\n  IdentityFile {id}\n  \
         IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n",
        u = user(),
        id = dir.join("id").display(),
    )
}
