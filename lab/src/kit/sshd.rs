//! **Throwaway OpenSSH servers**: keys, an sshd config, and the client-side
//! ssh config entry for an alias pointing at one — for the tests (on
//! loopback, and in lab hosts) and the benchmark's many-host SSH probe.
//! Nothing here reads or writes the machine's own `/etc/ssh` or `~/.ssh`:
//! the keys and configs live in a directory the caller owns. In a lab, a
//! server runs on a host's own address ([`start_in_lab`]), and a program
//! that runs plain `ssh` reaches it through [`client_wrapper`].

use super::Proc;
use crate::cmd::run;
use crate::error::{LabError, Result};
use crate::topology::Lab;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where Debian installs the server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Whether this machine has an OpenSSH server and client; otherwise the
/// running test says `SKIP` (a failure under CI, which installs them).
pub fn have_sshd() -> bool {
    super::peer::require(&super::gate::test_name(), &[super::peer::Peer::OpenSsh])
}

/// A new ed25519 key pair at `path` and `path.pub`.
pub fn keygen(path: &Path) -> Result<()> {
    super::peer::ensure(super::peer::Peer::OpenSsh).map_err(LabError::Unsupported)?;
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
        "Host {alias}\n  HostName {host}\n  Port {port}\n{}",
        client_options(dir)
    )
}

/// The last entry of a client config: `Host *`, the options of
/// [`client_entry`] without a `HostName`, so that a bare address (what
/// `expand` writes for a box no alias names) is reached with the world's
/// key too. Its wildcard keeps it out of the aliases rlx-discover reads.
pub fn client_defaults(dir: &Path) -> String {
    format!("Host *\n{}", client_options(dir))
}

/// The options every client entry carries: the world's key and user, no
/// prompts, and a bounded connect.
fn client_options(dir: &Path) -> String {
    format!(
        "  User {u}\n  IdentityFile {id}\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  \
         StrictHostKeyChecking no\n  LogLevel ERROR\n  BatchMode yes\n  ConnectTimeout {CONNECT_TIMEOUT_S}\n",
        u = user(),
        id = dir.join("id").display(),
    )
}

/// ssh's `ConnectTimeout` in the client entries: a lab link answers in
/// microseconds, so this only bounds a test whose server never came up
/// (without it, ssh waits for the kernel's TCP timeout, minutes).
const CONNECT_TIMEOUT_S: u32 = 10;

/// Writes `dir/client-bin/ssh`, a script that runs this machine's `ssh`
/// with `-F config` and its own arguments, and returns `dir/client-bin`.
///
/// For a program that runs plain `ssh` from `PATH` and offers no way to
/// name a config (the RLX runtime's probe and launch: `ssh HOST CMD`): put
/// the returned directory first on its `PATH`, and it reaches the test's
/// servers with the test's key, never reading `~/.ssh`.
pub fn client_wrapper(dir: &Path, config: &Path) -> Result<PathBuf> {
    let real = std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("ssh"))
                .find(|p| crate::cmd::executable(p))
        })
        .ok_or_else(|| LabError::Invalid("no ssh on PATH for the client wrapper".into()))?;
    let bin = dir.join("client-bin");
    let script = bin.join("ssh");
    let io = |what, path: PathBuf| move |source| LabError::Io { what, path, source };
    std::fs::create_dir_all(&bin).map_err(io("cannot create", bin.clone()))?;
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' -F '{}' \"$@\"\n",
            real.display(),
            config.display()
        ),
    )
    .map_err(io("cannot write", script.clone()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(io("cannot make executable", script.clone()))?;
    Ok(bin)
}

/// Starts sshd in lab host `i` of `lab`, listening on that host's own
/// address, port 22, as a server on a real box does (so the host's agent
/// finds it where it looks first); `set_env` as in [`server_config`]. Its
/// config is `dir/sshd_<name>.conf`; it is killed with the lab. Wait for
/// it with [`wait_listening`].
pub fn start_in_lab(lab: &Lab, i: usize, dir: &Path, name: &str, set_env: &str) -> Result<Proc> {
    let ip = lab.host(i).ip.to_string();
    // A command run over ssh on the host sees that host's state directory,
    // as the agent started there does (Lab::command), so `rlx-agent
    // --probe` over ssh names the same node id and key.
    let set_env = format!("{set_env} STATE_DIRECTORY={}", lab.state_dir(i).display());
    let cfg = server_config(dir, name, &ip, 22, &set_env)?;
    Ok(Proc(lab.spawn(i, server_command(&cfg))?))
}

/// Waits until each of `servers` (lab host, its sshd started by
/// [`start_in_lab`]) accepts connections on port 22 from lab host `from`,
/// or panics after `timeout` with the output of those that did not.
pub fn wait_listening(lab: &Lab, from: usize, servers: &[(usize, &Proc)], timeout: Duration) {
    let addrs = servers
        .iter()
        .map(|(h, _)| SocketAddr::from((lab.host(*h).ip, 22)))
        .collect();
    let left = super::netns::wait_tcp(&lab.host(from).ns, addrs, timeout)
        .unwrap_or_else(|e| panic!("cannot wait for sshd: {e}"));
    let dumps: Vec<String> = servers
        .iter()
        .filter(|(h, _)| left.contains(&SocketAddr::from((lab.host(*h).ip, 22))))
        .map(|(_, p)| p.dump())
        .collect();
    assert!(
        left.is_empty(),
        "sshd never listened at {left:?} within {timeout:?}:\n{}",
        dumps.join("\n")
    );
}
