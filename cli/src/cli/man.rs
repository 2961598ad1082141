//! `rlx-discover man`: manual pages, generated from the same clap
//! definitions the binary parses (help text, examples and exit codes).

use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `man`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rlx-discover man | man -l -                        # read the page now
  rlx-discover man --dir ~/.local/share/man/man1     # install every page
  sudo rlx-discover man --dir /usr/local/share/man/man1 && sudo mandb")]
pub struct ManArgs {
    /// Write rlx-discover.1 and one page per subcommand
    /// (rlx-discover-expand.1, ...) into this directory instead of printing
    /// the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Renders the main page (`rlx-discover.1`) as roff.
pub fn render_main(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// Writes every page into `dir` (created if needed); returns their paths.
pub fn write_all(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}; pass a directory you can write", dir.display()))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rlx-discover") && n.ends_with(".1"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

/// Prints the main page, or writes all of them with `--dir`.
pub fn run(a: ManArgs, cmd: clap::Command) -> Result<ExitCode> {
    use std::io::Write;
    match a.dir {
        None => std::io::stdout().write_all(&render_main(cmd)?)?,
        Some(dir) => {
            for p in write_all(cmd, &dir)? {
                eprintln!("wrote {}", p.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
