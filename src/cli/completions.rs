//! `rlx-discover completions`: shell completion scripts, generated from the
//! same clap definitions the binary parses, so they never fall behind.

use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::process::ExitCode;

/// Arguments of `completions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rlx-discover completions bash > ~/.local/share/bash-completion/completions/rlx-discover
  rlx-discover completions zsh  > ~/.zfunc/_rlx-discover    # with fpath+=~/.zfunc
  rlx-discover completions fish > ~/.config/fish/completions/rlx-discover.fish
  rlx-discover completions powershell >> $PROFILE")]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script for `shell` to `out`.
pub fn generate(shell: Shell, out: &mut dyn std::io::Write) {
    let mut cmd = super::Cli::command();
    clap_complete::generate(shell, &mut cmd, "rlx-discover", out);
}

/// Prints the completion script on stdout.
pub fn run(a: CompletionsArgs) -> Result<ExitCode> {
    generate(a.shell, &mut std::io::stdout().lock());
    Ok(ExitCode::SUCCESS)
}
