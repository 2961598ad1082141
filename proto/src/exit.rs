//! **Exit codes** — the one table both programs exit by, so that a script
//! or a service manager reads `rlx-discover`'s and `rlx-agent`'s codes the
//! same way. Each program prints [`TABLE`] in its `--help` and man page;
//! a subcommand adds only what its own 1 means (docs/reference.md, "Exit
//! codes").
//!
//! Why 1 is not "error": `rlx-discover expand --write` exits 1 when the
//! file was written but something needs a look, and a script must be able
//! to tell that from a run that wrote nothing. So 1 is "done, with a
//! problem to look at", and every failure to do what was asked is 2,
//! whether the flags, a file or the run itself was at fault.
//!
//! ```
//! use rlx_proto::exit::{ERROR, NEEDS_A_LOOK, SUCCESS};
//! assert_eq!((SUCCESS, NEEDS_A_LOOK, ERROR), (0, 1, 2));
//! ```

/// The command did what was asked, and nothing needs a look.
pub const SUCCESS: u8 = 0;

/// The command ran to the end and printed its output, but found something
/// that needs a look (the report on stderr says what): a check that
/// failed, a source or node with a problem, nothing found.
pub const NEEDS_A_LOOK: u8 = 1;

/// The command could not do what was asked: bad flags (clap's usage errors
/// exit 2 too), a bad config, key or caps file, a refused operation, or a
/// failure while running (a port in use, an I/O error). The message names
/// what was wrong and what to do.
pub const ERROR: u8 = 2;

/// The table as `--help` and the man pages show it (an `Exit status:`
/// block, the words of docs/reference.md, "Exit codes").
pub const TABLE: &str = "\
Exit status (the same for rlx-discover and rlx-agent):
  0  success
  1  output printed, but something needs a look (stderr says what): a
     failed check, a source or node with a problem, nothing found; each
     subcommand's --help says what its 1 means
  2  error: bad flags, a bad config, key or caps file, a refused operation,
     or a failure while running (a port in use, an I/O error); the message
     names what was wrong and what to do";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_every_code_once_in_order() {
        let codes: Vec<&str> = TABLE
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .filter_map(|l| l.split("  ").next())
            .filter(|c| c.parse::<u8>().is_ok())
            .collect();
        let want: Vec<String> = [SUCCESS, NEEDS_A_LOOK, ERROR]
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(codes, want, "{TABLE}");
    }
}
