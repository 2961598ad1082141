//! **Throwaway OpenSSH servers**: keys, an sshd config, and the client-side
//! ssh config entry for an alias pointing at one — for the tests (on
//! loopback, and in lab hosts) and the benchmark's many-host SSH probe.
//! Nothing here reads or writes the machine's own `/etc/ssh` or `~/.ssh`:
//! the keys and configs live in a directory the caller owns.

use crate::cmd::run;
use crate::error::{LabError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian installs the server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Whether this machine has an OpenSSH server and client; otherwise the
/// running test says `SKIP` (a failure under CI, which installs them).
pub fn have_sshd() -> bool {
    super::peer::require(&super::gate::test_name(), &[super::peer::Peer::OpenSsh])
}

/// A new ed25519 key pair at `path` and `path.pub`.
pub fn keygen(path: &Path) -> Result<()> {
    run(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(path),
        None,
    )
    .map(|_| ())
}

/// The current user's name (the login name in client configs).
pub fn user() -> String {
    run(Command::new("id").arg("-un"), None)
        .map(|o| o.trim().to_string())
        .unwrap_or_else(|e| panic!("who am I: {e}"))
}

/// Prepares `dir` as an SSH world: a client key `id` authorized by the
/// servers (`authorized_keys`) and a host key. Idempotent.
pub fn prepare(dir: &Path) -> Result<()> {
    let io = |what, path: PathBuf| move |source| LabError::Io { what, path, source };
    if !dir.join("id").exists() {
        keygen(&dir.join("id"))?;
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys"))
            .map_err(io("cannot authorize", dir.join("id.pub")))?;
    }
    if !dir.join("host_key").exists() {
        keygen(&dir.join("host_key"))?;
    }
    // sshd insists on its privilege-separation directory when run as root.
    let _ = std::fs::create_dir_all("/run/sshd");
    Ok(())
}

/// Writes an sshd config in [`prepare`]d `dir` for a server listening on
/// `listen:port` whose remote commands get the environment `set_env`
/// (`SetEnv` syntax: `PATH=/a:/b KEY=value`); returns its path.
///
/// `MaxStartups 100`: when many sessions start at once (a coordinator
/// probing every host), sshd's default starts dropping them at 10 before
/// they authenticate, which would read as a failed probe.
pub fn server_config(
    dir: &Path,
    name: &str,
    listen: &str,
    port: u16,
    set_env: &str,
) -> Result<PathBuf> {
    prepare(dir)?;
    let cfg = dir.join(format!("sshd_{name}.conf"));
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress {listen}\nHostKey {hk}\nAuthorizedKeysFile {ak}\n\
             PidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
             MaxStartups 100\nSetEnv {set_env}\nLogLevel ERROR\n",
            hk = dir.join("host_key").display(),
            ak = dir.join("authorized_keys").display(),
        ),
    )
    .map_err(|source| LabError::Io {
        what: "cannot write",
        path: cfg.clone(),
        source,
    })?;
    Ok(cfg)
}

/// The command that runs sshd in the foreground with `cfg`, logging to stderr.
pub fn server_command(cfg: &Path) -> Command {
    let mut c = Command::new(SSHD);
    c.args(["-D", "-e", "-f"]).arg(cfg);
    c
}

/// An ssh_config entry: `alias` reaches `host:port` with the world's key,
/// no host-key prompts and no password prompts.
pub fn client_entry(dir: &Path, alias: &str, host: &str, port: u16) -> String {
    format!(
        "Host {alias}\n  HostName {host}\n  Port {port}\n  User {u}\n  IdentityFile {id}\n  \
         IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  \
         LogLevel ERROR\n  BatchMode yes\n",
        u = user(),
        id = dir.join("id").display(),
    )
}
