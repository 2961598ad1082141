use crate::cmd::{display, is_wrapped, run};
use crate::topology::stale_owner;
use std::process::Command;

#[test]
fn stale_namespace_names_yield_their_owner_pid() {
    assert_eq!(stale_owner("rlx-4242-0-h3"), Some(4242));
    assert_eq!(stale_owner("rlx-4242-17-sw"), Some(4242));
    assert_eq!(stale_owner("rlx-4242-probe"), None);
    assert_eq!(stale_owner("rlx-bench-1-h0"), None);
    assert_eq!(stale_owner("other-4242-0-h0"), None);
}

#[test]
fn commands_from_the_lab_are_recognised_and_not_wrapped_twice() {
    let mut wrapped = Command::new("ip");
    wrapped.args(["netns", "exec", "x", "true"]);
    assert!(is_wrapped(&wrapped));
    assert!(!is_wrapped(&Command::new("true")));
    let mut other_ip = Command::new("ip");
    other_ip.args(["link", "show"]);
    assert!(!is_wrapped(&other_ip));
}

#[test]
fn command_lines_are_shell_quoted_in_messages() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo a b"]);
    assert_eq!(display(&cmd), "sh -c 'echo a b'");
}

#[test]
fn a_failing_command_is_named_with_its_stderr() {
    let err = run(
        Command::new("sh").args(["-c", "echo oops >&2; exit 3"]),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sh -c") && err.contains("oops") && err.contains('3'),
        "{err}"
    );
}

#[test]
fn a_missing_program_says_what_to_install() {
    let err = run(&mut Command::new("/nonexistent/ip"), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nonexistent/ip") && err.contains("iproute2"),
        "{err}"
    );
}

#[test]
fn stdin_reaches_the_command() {
    let out = run(&mut Command::new("cat"), Some("hello\n")).unwrap();
    assert_eq!(out, "hello\n");
}
