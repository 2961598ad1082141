//! **The command line without a network**: help, completions, man pages,
//! config errors, `expand --write` and the parsers' properties. No test
//! here sends a packet (discovery goes through a stand-in ssh, `fakessh`),
//! so this binary needs no root and no peer: `cargo test --test offline`.
//!
//! One module per theme:
//! - `cli`: every subcommand's help, completions, man pages, exit codes,
//!   progress bars on a terminal only.
//! - `config_errors`: a bad cluster file names its file, line and key.
//! - `writeback`: golden files, idempotence, `--dry-run`, `--prune`, and
//!   `kill -9` never leaving a half-written file.
//! - `write_owner`: `--write` as another user (uid 65534, through
//!   `setpriv`: needs root): files it may not write refused, owner, mode
//!   and ACL kept.
//! - `proptest_parsers`: no input panics the four parsers.
//! - `runtime_files`: the RLX runtime's own example, fixtures and probe
//!   JSON through `expand`, judged by the runtime.
//! - `fakessh`: the stand-in ssh the others run discovery through.
//! - `docs`: every file and heading the Markdown docs point at exists.
//! - `release`: `.ci/release` builds where cargo builds (`CARGO_TARGET_DIR`).

mod cli;
mod config_errors;
mod docs;
mod fakessh;
mod packaging;
mod proptest_parsers;
mod release;
mod runtime_files;
mod write_owner;
mod writeback;
