//! `rlx-discover man`: manual pages, generated from the same clap
//! definitions the binary parses (help text, examples and exit codes),
//! with the sections clap knows nothing of: ENVIRONMENT, FILES and SEE
//! ALSO ([`SECTIONS`]).

use anyhow::{Context, Result};
use clap::Args;
use rlx_proto::manpage::Section;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `man`.
#[derive(Debug, Args)]
#[command(after_help = after_help())]
pub struct ManArgs {
    /// Write rlx-discover.1 and one page per subcommand
    /// (rlx-discover-expand.1, ...) into this directory instead of printing
    /// the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

fn after_help() -> String {
    format!(
        "Examples:
  rlx-discover man | man -l -                        # read the page now
  rlx-discover man --dir ~/.local/share/man/man1     # install every page
  sudo rlx-discover man --dir /usr/local/share/man/man1 && sudo mandb

{}",
        crate::cli::runtime::exit_status("never")
    )
}

/// The sections every page gets, main page and subcommands alike: what the
/// program reads besides its flags (the variables it really reads, the
/// files at their real default places), and where to read on. Kept in
/// step with docs/reference.md ("Environment of `rlx-discover`").
pub const SECTIONS: &[Section] = &[
    Section {
        title: "ENVIRONMENT",
        entries: &[
            ("RLX_NETNS_GUARD", "When 1, refuse to multicast (mDNS) or scan a subnet from the machine's initial network namespace: the tests and the demo set it so that nothing reaches the real network. Unset it to run for real."),
            ("RUST_LOG", "The log filter (for example debug); it overrides -q and -v."),
            ("NO_COLOR", "Any value but the empty string turns colour off under --color auto."),
            ("CI", "Any value but the empty string, false or 0 turns progress bars off (as do TERM=dumb, a stderr that is not a terminal, -q, -v and RUST_LOG)."),
            ("TERM", "dumb turns progress bars off."),
            ("RLX_SSH_PROGRAM", "The program run instead of ssh for ssh_hosts probes and --check-ssh."),
            ("SOURCE_DATE_EPOCH", "Seconds since the epoch: fixes the time written into # found by comments."),
            ("HOME", "Where ~/.ssh/config is, for the ssh aliases written into [[node]] ssh."),
        ],
    },
    Section {
        title: "FILES",
        entries: &[
            ("cluster.toml", "The cluster file, named on the command line (expand CONFIG, --config): its [discover] stanza says where to look, and expand --write appends the [[node]] entries found."),
            ("<cluster file's stem>.pins", "Beside the cluster file (cluster.toml -> cluster.pins), unless [discover] pins_file names another: the node id -> node key pins (rlx-discover pins)."),
            ("/etc/rlx/cluster.key", "The usual place of the cluster key (--key-file, [discover] key_file; no default): 32 random bytes in hex, mode 0600, written by rlx-discover keygen (default rlx-cluster.key in the current directory)."),
            ("~/.ssh/config", "The ssh aliases (Host / HostName) matched to found machines, unless [discover] ssh_config names another file."),
            ("/etc/resolv.conf", "Its first nameserver is the DNS server for --domain when neither --dns-server nor dns_sd.server names one."),
            ("/etc/rlx/agent.toml", "The agent's settings, on each worker (see rlx-agent(1))."),
        ],
    },
    Section {
        title: "SEE ALSO",
        entries: &[
            ("rlx-agent(1)", "The agent that runs on every worker, which rlx-discover finds."),
            ("rlx-discover-expand(1), rlx-discover-browse(1), rlx-discover-watch(1), rlx-discover-doctor(1), rlx-discover-scan(1)", "One page per subcommand (rlx-discover man --dir DIR writes them)."),
            ("ssh(1), ssh_config(5)", "How ssh_hosts are reached and their aliases read."),
            ("docs/guide.md, docs/reference.md", "The user guide and every key, flag, exit code and timing, in the source tree and the packages' doc directory."),
        ],
    },
];

/// Renders one page: clap's, with [`SECTIONS`] before its VERSION section
/// (where man pages keep them), or at the end when it has none.
fn render(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    let page = String::from_utf8(out).context("clap_mangen wrote a page that is not UTF-8")?;
    Ok(rlx_proto::manpage::with_sections(&page, SECTIONS).into_bytes())
}

/// Renders the main page (`rlx-discover.1`) as roff.
pub fn render_main(cmd: clap::Command) -> Result<Vec<u8>> {
    render(cmd)
}

/// Writes every page into `dir` (created if needed); returns their paths.
pub fn write_all(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}; pass a directory you can write", dir.display()))?;
    // As clap_mangen::generate_to: built once, so that each subcommand's
    // page is named rlx-discover-SUB and its usage line says so.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    write_tree(&cmd, dir, &mut pages)?;
    pages.sort();
    Ok(pages)
}

/// Writes `cmd`'s page and those of its visible subcommands.
fn write_tree(cmd: &clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, dir, pages)?;
    }
    let path = dir.join(clap_mangen::Man::new(cmd.clone()).get_filename());
    std::fs::write(&path, render(cmd.clone())?)
        .with_context(|| format!("writing man page {}", path.display()))?;
    pages.push(path);
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn main_page() -> String {
        String::from_utf8(render_main(crate::cli::Cli::command()).unwrap()).unwrap()
    }

    #[test]
    fn the_man_page_has_environment_files_and_see_also_sections() {
        let page = main_page();
        for want in [
            ".SH \"ENVIRONMENT\"",
            "RLX_NETNS_GUARD",
            "RUST_LOG",
            "RLX_SSH_PROGRAM",
            ".SH \"FILES\"",
            "cluster.toml",
            ".pins",
            "/etc/rlx/cluster.key",
            ".SH \"SEE ALSO\"",
            "rlx\\-agent(1)",
        ] {
            assert!(page.contains(want), "{want:?} missing from:\n{page}");
        }
        let env = page.find(".SH \"ENVIRONMENT\"").unwrap();
        assert!(
            page.find(".SH VERSION").is_none_or(|v| v > env),
            "ENVIRONMENT comes before VERSION:\n{page}"
        );
    }

    #[test]
    fn the_man_page_says_what_the_program_does_not_how_the_crate_is_built() {
        let page = main_page();
        assert!(
            page.contains("Find the machines of an RLX cluster"),
            "{page}"
        );
        assert!(!page.contains("parses flags"), "{page}");
    }

    #[test]
    fn every_subcommand_page_gets_the_sections_too() {
        let dir = tempfile::tempdir().unwrap();
        let pages = write_all(crate::cli::Cli::command(), dir.path()).unwrap();
        assert!(pages.len() > 5, "{pages:?}");
        for p in pages {
            let page = std::fs::read_to_string(&p).unwrap();
            assert!(
                page.contains(".SH \"SEE ALSO\"") && page.contains("Exit status"),
                "{}:\n{page}",
                p.display()
            );
        }
    }
}
