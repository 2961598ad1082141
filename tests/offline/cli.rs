//! The command line as users and scripts meet it: every subcommand's help
//! shows examples (new subcommands are covered automatically), completions
//! and man pages generate from the clap definitions, errors say what to do
//! and exit 2, JSON field names are the documented ones, and progress bars
//! appear on a terminal but never in a pipe.
//!
//! No test here sends a packet: discovery goes through a stand-in ssh.

use crate::fakessh::{caps, Cluster};
use rlx_lab::kit::Run;
use std::collections::BTreeSet;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(rlx_lab::kit::discover_bin());
    c.env_remove("RUST_LOG");
    c
}

fn run(args: &[&str]) -> Run {
    let mut c = bin();
    c.args(args);
    Run::of(c)
}

/// The subcommands, as the binary's own `--help` lists them (so a new one is
/// covered without touching this file). `help` is clap's, not ours.
fn subcommands() -> Vec<String> {
    let help = run(&["--help"]).expect_code(0).stdout();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|s| s != "help")
        .collect()
}

#[test]
fn every_subcommand_help_shows_its_examples() {
    let subs = subcommands();
    assert!(subs.len() >= 5, "{subs:?}");
    for sub in subs {
        let r = run(&[&sub, "--help"]);
        r.expect_code(0);
        let help = r.stdout();
        assert!(
            help.contains("Examples:"),
            "`{sub} --help` has no Examples:\n{help}"
        );
        assert!(
            help.contains(&format!("rlx-discover {sub}")),
            "`{sub} --help` shows no example command line:\n{help}"
        );
    }
}

#[test]
fn the_top_level_help_lists_the_exit_codes() {
    let help = run(&["--help"]).expect_code(0).stdout();
    for code in ["0  success", "1  output printed", "2  error"] {
        assert!(help.contains(code), "{code:?} missing from:\n{help}");
    }
    let expand = run(&["expand", "--help"]).stdout();
    assert!(expand.contains("Exit status"), "{expand}");
}

/// The two programs exit by one table (`rlx_proto::exit`): a script or a
/// service manager reads a code the same whichever of them gave it. Before,
/// a bad config file was 2 from `rlx-discover` and 1 from `rlx-agent`.
#[test]
fn a_usage_error_and_a_bad_config_file_give_the_same_code_from_both_programs() {
    let error = i32::from(rlx_proto::exit::ERROR);
    let agent = |args: &[&str]| {
        let mut c = Command::new(rlx_lab::kit::agent_bin());
        // No machine's /etc/rlx/agent.toml in the way.
        c.env_remove("RUST_LOG")
            .env("RLX_AGENT_CONFIG", "/dev/null");
        c.args(args);
        Run::of(c)
    };
    // A flag neither knows.
    let d = run(&["browse", "--no-such-flag"]);
    let a = agent(&["--probe", "--no-such-flag"]);
    d.expect_code(error);
    a.expect_code(error);
    // A config file with an unknown key: each names the key and the file.
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.toml");
    std::fs::write(&cluster, "[discover]\nmdns = false\nprot = 9100\n").unwrap();
    let agent_toml = dir.path().join("agent.toml");
    std::fs::write(&agent_toml, "prot = 9100\n").unwrap();
    let d = run(&["expand", cluster.to_str().unwrap()]);
    let a = agent(&[
        "--probe",
        "--no-bench",
        "--config",
        agent_toml.to_str().unwrap(),
    ]);
    d.expect_code(error);
    a.expect_code(error);
    for r in [&d, &a] {
        assert!(r.stderr().contains("prot"), "{}", r.dump());
    }
}

/// The one table is what both programs' `--help` ends in.
#[test]
fn both_programs_help_show_the_same_exit_table() {
    let table = rlx_proto::exit::TABLE;
    let d = run(&["--help"]).expect_code(0).stdout();
    let mut c = Command::new(rlx_lab::kit::agent_bin());
    c.arg("--help");
    let a = Run::of(c).expect_code(0).stdout();
    for (name, help) in [("rlx-discover", &d), ("rlx-agent", &a)] {
        assert!(
            help.contains(table),
            "{name} --help lacks the shared exit table:\n{help}"
        );
    }
}

#[test]
fn completions_generate_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let s = run(&["completions", shell]).expect_code(0).stdout();
        assert!(
            s.contains("expand") && s.contains("--dry-run"),
            "{shell}: {s}"
        );
    }
    let r = run(&["completions", "bash"]);
    r.expect_code(0);
    assert!(
        r.stdout().contains("complete -F _rlx__discover") && r.stdout().contains("rlx-discover"),
        "{}",
        r.dump()
    );
    let r = run(&["completions", "tcsh"]);
    r.expect_code(2);
    assert!(r.stderr().contains("possible values"), "{}", r.dump());
}

#[test]
fn man_pages_generate_with_examples_and_exit_codes() {
    let r = run(&["man"]);
    r.expect_code(0);
    let page = r.stdout();
    assert!(
        page.starts_with(".ie") || page.contains(".TH rlx-discover"),
        "{page}"
    );
    assert!(page.contains("Exit status"), "{page}");
    for section in ["ENVIRONMENT", "FILES", "SEE ALSO"] {
        assert!(page.contains(&format!(".SH \"{section}\"")), "{page}");
    }
    let dir = tempfile::tempdir().unwrap();
    let r = run(&["man", "--dir", dir.path().to_str().unwrap()]);
    r.expect_code(0);
    let pages: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for sub in subcommands() {
        let want = format!("rlx-discover-{sub}.1");
        assert!(pages.contains(&want), "{want} not in {pages:?}");
    }
    let expand = std::fs::read_to_string(dir.path().join("rlx-discover-expand.1")).unwrap();
    assert!(
        expand.contains("Examples:") && expand.contains("\\-\\-prune"),
        "{expand}"
    );
}

#[test]
fn errors_say_what_is_wrong_and_what_to_do_and_exit_2() {
    let c = Cluster::new();
    let cases: Vec<(Vec<&str>, &str, &[&str])> = vec![
        (
            vec!["expand", "nope.toml"],
            "",
            &["nope.toml", "check the path"],
        ),
        (
            vec!["expand", "cluster.toml", "--prune"],
            "[discover]\nmdns = false\n",
            &["--prune", "needs --write"],
        ),
        (
            vec!["expand", "cluster.toml"],
            "[discover]\nmdns = false\nprot = 9100\n",
            &["cluster.toml:3", "prot", "did you mean `port`?"],
        ),
        (
            vec!["expand", "cluster.toml", "--write"],
            "node = [{ addr = \"a:9100\", ckpt_dir = \"/m\" }]\n[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n",
            &["inline array", "[[node]] table"],
        ),
        (
            vec!["expand", "cluster.toml", "--json", "--format", "toml"],
            "[discover]\n",
            &["--json", "cannot be used with"],
        ),
    ];
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    for (args, config, wants) in cases {
        if !config.is_empty() {
            c.write("cluster.toml", config);
        }
        let mut cmd = c.command();
        cmd.args(&args).arg("--no-mdns");
        let r = Run::of(cmd);
        r.expect_code(2);
        for w in wants {
            assert!(r.stderr().contains(w), "{w:?} missing:\n{}", r.dump());
        }
    }
}

/// Every key name in a JSON value, recursively.
fn keys(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

/// Guards the stable JSON interface: every field `expand --json` prints is
/// documented in docs/json.md, and `--json` is `--format json`.
#[test]
fn every_json_field_of_expand_is_documented() {
    // A cluster that fills every array of the report: an added node with a
    // skipped device, a duplicate, a failure, an id clash, a warning, a
    // missing node, a removed node.
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    c.host("gpu-b", &caps("gpu-b", "00000000000000b2", "rocm", 16));
    c.write(
        "cluster.toml",
        "[discover]\nmdns = false\nssh_hosts = [\"gpu-a\", \"gpu-b\", \"gpu-c\", \"gpu-d\", \"gone\"]\n\
         ckpt_dir = \"/m\"\n\n[[node]]\naddr = \"pinned:9100\"\nssh = \"gpu-b\"\nckpt_dir = \"/m\"\ndevice = \"cuda\"\n",
    );
    c.expand(&["cluster.toml", "--write"]);
    c.remove_host("gpu-a");
    let two_devices = caps("gpu-c", "00000000000000c3", "vulkan", 8).replace(
        "\"devices\":[",
        "\"devices\":[{\"device\":\"npu-x\",\"name\":\"future\",\"mem_bytes\":1,\
         \"unified\":false,\"gflops\":0,\"available\":true},",
    );
    c.host("gpu-c", &two_devices);
    c.host("gpu-d", &caps("gpu-d", "00000000000000c3", "cuda", 8));
    let r = c.expand(&["cluster.toml", "--dry-run", "--prune", "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {}", r.dump()));
    for top in ["nodes", "report", "missing", "file"] {
        assert!(v.get(top).is_some(), "no {top}: {v:#}");
    }
    for list in [
        "tried",
        "added",
        "duplicates",
        "failed",
        "skipped_devices",
        "clashes",
        "warnings",
    ] {
        let n = v["report"][list].as_array().map_or(0, Vec::len);
        assert!(
            n > 0,
            "report.{list} is empty, so its fields go unchecked: {v:#}"
        );
    }
    let same = c.expand(&["cluster.toml", "--dry-run", "--prune", "--format", "json"]);
    let timeless = |s: &str| {
        let mut v: serde_json::Value = serde_json::from_str(s).unwrap();
        // When each run started, on the wall clock.
        v["report"]["started_unix_us"] = 0.into();
        for t in v["report"]["tried"].as_array_mut().unwrap() {
            t["elapsed_ms"] = 0.into();
        }
        // The report lists nodes in the order they answered.
        let added = v["report"]["added"].as_array_mut().unwrap();
        for a in added.iter_mut() {
            a["found_ms"] = 0.into();
        }
        added.sort_by_key(|a| a["addr"].as_str().unwrap_or("").to_string());
        v
    };
    assert_eq!(
        timeless(&r.stdout()),
        timeless(&same.stdout()),
        "--json is --format json"
    );

    let mut found = BTreeSet::new();
    keys(&v, &mut found);
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("docs/json.md");
    let undocumented: Vec<_> = found
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "fields missing from docs/json.md: {undocumented:?}"
    );
}

#[test]
fn progress_bars_never_reach_a_pipe() {
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    c.delay_host("gpu-a", 1.5);
    c.write(
        "cluster.toml",
        "[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n",
    );
    let mut cmd = c.command();
    cmd.env_remove("CI")
        .args(["expand", "cluster.toml", "--no-mdns"]);
    let r = Run::of(cmd);
    r.expect_code(0);
    let err = r.stderr();
    assert!(
        !err.contains("ssh probes") && !err.contains('\r') && !err.contains('\u{1b}'),
        "{}",
        r.dump()
    );
}

/// The other half: on a terminal (a pty from util-linux `script`), a probe
/// that takes longer than a second shows a bar.
#[test]
fn a_slow_probe_shows_a_progress_bar_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "CI needs util-linux `script`");
        eprintln!("SKIP: util-linux `script` is not installed");
        return;
    }
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    c.delay_host("gpu-a", 1.8);
    c.write(
        "cluster.toml",
        "[discover]\nmdns = false\nssh_hosts = [\"gpu-a\"]\nckpt_dir = \"/m\"\n",
    );
    let line = format!(
        "{} expand cluster.toml --no-mdns > /dev/null",
        rlx_lab::kit::discover_bin().display()
    );
    let mut script = Command::new("script");
    c.configure(&mut script);
    script
        .env_remove("CI")
        .env("TERM", "xterm")
        .args(["-qec", &line, "/dev/null"]);
    let r = Run::of(script);
    r.expect_code(0);
    assert!(r.stdout().contains("ssh probes"), "{}", r.dump());
}
