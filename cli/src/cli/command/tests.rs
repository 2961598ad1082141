//! The help text as a user reads it: what the program is for, an exit
//! status block and working examples on every page, and durations with
//! their units.

use super::Cli;
use clap::{CommandFactory, Parser};

/// Every visible command, the top level and its subcommands at any depth.
fn commands() -> Vec<clap::Command> {
    fn walk(cmd: &clap::Command, out: &mut Vec<clap::Command>) {
        out.push(cmd.clone());
        // `help` is clap's own, with no after_help to give.
        for sub in cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            walk(sub, out);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, &mut out);
    out
}

fn after_help(cmd: &clap::Command) -> String {
    cmd.get_after_help()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// The command lines of a help text's examples, as words: each line that
/// runs rlx-discover (after an optional `sudo`), up to a comment, a pipe,
/// an `&&` or a redirection.
fn examples(help: &str) -> Vec<Vec<String>> {
    help.lines()
        .map(str::trim_start)
        .map(|l| l.strip_prefix("sudo ").unwrap_or(l))
        .filter(|l| l.starts_with("rlx-discover "))
        .map(|l| {
            let end = [" #", " |", " &&", " >"]
                .iter()
                .filter_map(|sep| l.find(sep))
                .min()
                .unwrap_or(l.len());
            l[..end].split_whitespace().map(str::to_string).collect()
        })
        .collect()
}

#[test]
fn the_help_says_what_the_program_does_for_a_user_not_how_the_crate_is_built() {
    let mut cmd = Cli::command();
    let help = cmd.render_long_help().to_string();
    assert!(
        help.contains("Find the machines of an RLX cluster and write their [[node]] list"),
        "{help}"
    );
    assert!(help.contains("runs on the coordinator"), "{help}");
    assert!(!help.contains("parses flags"), "{help}");
    let short = Cli::command().render_help().to_string();
    assert!(!short.contains("parses flags"), "{short}");
}

#[test]
fn every_example_in_every_help_text_parses() {
    let mut parsed = 0;
    for cmd in commands() {
        for words in examples(&after_help(&cmd)) {
            if let Err(e) = Cli::try_parse_from(&words) {
                panic!(
                    "the example `{}` in `{} --help` does not parse:\n{e}",
                    words.join(" "),
                    cmd.get_name()
                );
            }
            parsed += 1;
        }
    }
    assert!(
        parsed >= 20,
        "only {parsed} examples found: is the scanner broken?"
    );
}

#[test]
fn the_old_millisecond_flag_names_appear_in_no_example() {
    for cmd in commands() {
        for words in examples(&after_help(&cmd)) {
            assert!(
                !words
                    .iter()
                    .any(|w| w.starts_with("--") && w.ends_with("-ms")),
                "`{}` uses an old -ms flag name: write the duration flag with a unit",
                words.join(" ")
            );
        }
    }
}

#[test]
fn every_subcommand_help_has_an_exit_status_block() {
    for cmd in commands() {
        let help = after_help(&cmd);
        assert!(
            help.contains("Exit status") && help.contains("  2  error"),
            "`{} --help` has no exit status block:\n{help}",
            cmd.get_bin_name().unwrap_or(cmd.get_name())
        );
    }
}

#[test]
fn duration_defaults_are_shown_with_a_unit_not_as_raw_milliseconds() {
    let mut checked = 0;
    for cmd in commands() {
        for arg in cmd.get_arguments() {
            if arg.get_value_names().is_none_or(|v| v[0] != "DURATION") {
                continue;
            }
            for d in arg.get_default_values() {
                let d = d.to_string_lossy();
                assert!(
                    d.parse::<u64>().is_err() && crate::cli::duration::millis(&d).is_ok(),
                    "--{} shows [default: {d}]: show it with its unit",
                    arg.get_long().unwrap_or_default()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 2, "no duration default found");
    let mut scan = Cli::command();
    let scan = scan
        .find_subcommand_mut("scan")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(scan.contains("[default: 300ms]"), "{scan}");
    let mut watch = Cli::command();
    let watch = watch
        .find_subcommand_mut("watch")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(watch.contains("[default: 2m]"), "{watch}");
}

#[test]
fn write_and_dry_run_together_are_refused_naming_both() {
    let e = Cli::try_parse_from(["rlx-discover", "expand", "c.toml", "--write", "--dry-run"])
        .unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("--dry-run") && msg.contains("--write"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), i32::from(rlx_proto::exit::ERROR));
    for ok in [["--write"], ["--dry-run"]] {
        let mut args = vec!["rlx-discover", "expand", "c.toml"];
        args.extend(ok);
        assert!(Cli::try_parse_from(&args).is_ok(), "{args:?}");
    }
}
