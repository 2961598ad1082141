//! **Running the lab's helper commands** (`ip`, `nft`, `mount`) to
//! completion, with errors that name the command and carry its stderr.

use crate::error::{LabError, Result};
use std::ffi::OsStr;
use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// Whether `cmd` already runs under `ip netns exec`.
pub(crate) fn is_wrapped(cmd: &Command) -> bool {
    let args: Vec<&OsStr> = cmd.get_args().take(2).collect();
    cmd.get_program() == "ip" && args == [OsStr::new("netns"), OsStr::new("exec")]
}

/// A command line for messages, shell-quoted.
pub(crate) fn display(cmd: &Command) -> String {
    let words = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|w| w.to_string_lossy().into_owned());
    let words: Vec<String> = words.collect();
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// Run `cmd` to completion, feeding it `stdin`; its stdout, or an error
/// naming the command and its stderr.
pub(crate) fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String> {
    let child = start(cmd, stdin.is_some())?;
    finish(cmd, child, stdin)
}

/// Run several commands at once (one per namespace while building a lab)
/// and fail with the first error.
pub(crate) fn run_all<I>(cmds: I) -> Result<()>
where
    I: IntoIterator<Item = (Command, Option<String>)>,
{
    let mut started = Vec::new();
    let mut first_err = None;
    for (mut cmd, stdin) in cmds {
        match start(&mut cmd, stdin.is_some()) {
            Ok(child) => started.push((cmd, child, stdin)),
            Err(e) => {
                first_err = Some(e);
                break;
            }
        }
    }
    for (cmd, child, stdin) in started {
        if let Err(e) = finish(&cmd, child, stdin.as_deref()) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn start(cmd: &mut Command, with_stdin: bool) -> Result<Child> {
    cmd.stdin(if with_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .map_err(|source| LabError::Spawn {
        cmd: display(cmd),
        source,
    })
}

fn finish(cmd: &Command, mut child: Child, stdin: Option<&str>) -> Result<String> {
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A failed write shows up as the command's own error below.
        let _ = pipe.write_all(text.as_bytes());
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().map_err(|source| LabError::Spawn {
        cmd: display(cmd),
        source,
    })?;
    if status.success() {
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    } else {
        Err(LabError::Command {
            cmd: display(cmd),
            status: status.to_string(),
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        })
    }
}

/// Whether `program` is an executable file in a directory of `PATH`: the
/// lab asks it of `ip`, the kit of every peer.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| executable(&d.join(program))))
}

/// Whether `path` is a regular file someone may execute.
pub(crate) fn executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
