//! `rlx-discover completions`: shell completion scripts, generated from the
//! same clap definitions the binary parses, so they never fall behind.

use anyhow::Result;
use clap::Args;
use clap_complete::Shell;
use std::process::ExitCode;

/// Arguments of `completions`.
#[derive(Debug, Args)]
#[command(after_help = format!("Examples:
  rlx-discover completions bash > ~/.local/share/bash-completion/completions/rlx-discover
  rlx-discover completions zsh  > ~/.zfunc/_rlx-discover    # with fpath+=~/.zfunc
  rlx-discover completions fish > ~/.config/fish/completions/rlx-discover.fish
  rlx-discover completions powershell >> $PROFILE

{}", crate::cli::runtime::exit_status("never")))]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script of the command line `cmd` for `shell` to `out`.
pub fn generate(mut cmd: clap::Command, shell: Shell, out: &mut dyn std::io::Write) {
    clap_complete::generate(shell, &mut cmd, "rlx-discover", out);
}

/// Prints the completion script of `cmd` (the binary's own definitions,
/// passed in by the dispatcher) on stdout.
pub fn run(a: CompletionsArgs, cmd: clap::Command) -> Result<ExitCode> {
    generate(cmd, a.shell, &mut std::io::stdout().lock());
    Ok(ExitCode::SUCCESS)
}
