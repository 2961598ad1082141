//! docs/reference.md against the programs it describes: every flag of
//! every `rlx-discover` command and of `rlx-agent`, every key the cluster
//! file's parser accepts, and every key of the agent's config file must be
//! listed there, so that a flag or key added to the code without a line in
//! the reference fails here.
//!
//! The flags come from the binaries' own `--help` (an integration test
//! cannot reach a binary crate's clap types). The cluster-file keys come
//! from the parser: `rlx-discover expand` on a file with an unknown key
//! fails while loading the file, before it runs any discovery, and its
//! error lists the keys the parser knows. The agent's config keys come from
//! the `KEYS` list in worker-agent/src/config.rs, which that crate's own
//! tests hold to its parser.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RLX_DISCOVER: &str = env!("CARGO_BIN_EXE_rlx-discover");

/// The key written into the cluster files below so that the parser refuses
/// them and names the keys it knows instead.
const UNKNOWN_KEY: &str = "not_a_key_of_the_reference";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

fn reference() -> String {
    let p = workspace().join("docs/reference.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The part of `doc` under the first heading whose text contains `needle`,
/// up to the next heading of the same or a higher level. Lines inside code
/// fences are never headings (a `# comment` in a TOML example is not).
fn section(doc: &str, needle: &str) -> String {
    let mut fenced = false;
    let mut level_of_match = None;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let level = (!fenced).then(|| heading_level(line)).flatten();
        match (level_of_match, level) {
            (None, Some(l)) if line.contains(needle) => level_of_match = Some(l),
            (Some(m), Some(l)) if l <= m => break,
            (Some(_), _) => out.push(line),
            _ => {}
        }
    }
    assert!(
        level_of_match.is_some(),
        "docs/reference.md has no heading containing {needle:?}"
    );
    out.join("\n")
}

fn heading_level(line: &str) -> Option<usize> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    (hashes > 0 && line[hashes..].starts_with(' ')).then_some(hashes)
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// Whether `text` names `flag` as a whole token: `--browse` is not found
/// in `--browse-ms`, nor `--port` in `--agent-port`.
fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + flag.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// Whether `text` has a table row whose first cell is `key` in backticks,
/// or `parent.key` when the key belongs to a nested table.
fn has_row(text: &str, key: &str, parent: Option<&str>) -> bool {
    let plain = format!("`{key}`");
    let nested = parent.map(|p| format!("`{p}.{key}`"));
    text.lines().any(|line| {
        let Some(rest) = line.trim().strip_prefix('|') else {
            return false;
        };
        let cell = rest.split('|').next().unwrap_or("").trim();
        cell == plain || nested.as_deref() == Some(cell)
    })
}

fn run_help(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?} --help: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {args:?} --help failed: {out:?}",
        bin.display()
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// `--name` out of a word such as `--verbose...` or `--browse-ms]`.
fn flag_in(word: &str) -> Option<String> {
    let name: String = word
        .strip_prefix("--")?
        .chars()
        .take_while(|&c| is_word(c))
        .collect();
    (!name.is_empty()).then(|| format!("--{name}"))
}

/// The long flags (and their aliases) in the `Options:` section of a
/// `--help` text, in clap's long layout (each description on lines of its
/// own) or its short one (the description on the flag's line, aliases at
/// its end).
fn long_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let mut in_options = false;
    for line in help.lines() {
        if !line.is_empty() && !line.starts_with(' ') {
            in_options = line.trim_end() == "Options:";
            continue;
        }
        if !in_options {
            continue;
        }
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 6 && trimmed.starts_with('-') {
            // `-q, --quiet` or `--format <FORMAT>`: the first long flag is
            // the option's; later words are its description.
            flags.extend(
                trimmed
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .find_map(flag_in),
            );
        }
        for marker in ["[alias: ", "[aliases: "] {
            if let Some((_, rest)) = line.split_once(marker) {
                let list = rest.split(']').next().unwrap_or("");
                flags.extend(
                    list.split(|c: char| c.is_whitespace() || c == ',')
                        .filter_map(flag_in),
                );
            }
        }
    }
    flags
}

/// The environment variables a `--help` text names (`[env: NAME=...]`).
fn env_vars(help: &str) -> BTreeSet<String> {
    help.match_indices("[env: ")
        .map(|(i, m)| {
            help[i + m.len()..]
                .chars()
                .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
                .collect()
        })
        .collect()
}

/// The subcommands in the `Commands:` section of a `--help` text, without
/// clap's own `help`.
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if !line.is_empty() && !line.starts_with(' ') {
            in_commands = line.trim_end() == "Commands:";
            continue;
        }
        let trimmed = line.trim_start();
        if in_commands && line.len() - trimmed.len() == 2 {
            let name = trimmed.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// A command (its words after the program's name), its long flags, and the
/// environment variables its help names.
type Help = (Vec<String>, BTreeSet<String>, BTreeSet<String>);

/// Every command of `bin` below `path` (itself included), from `--help`.
fn commands(bin: &Path, path: Vec<String>, out: &mut Vec<Help>) {
    let args: Vec<&str> = path.iter().map(String::as_str).collect();
    let help = run_help(bin, &args);
    let subs = subcommands(&help);
    out.push((path.clone(), long_flags(&help), env_vars(&help)));
    for s in subs {
        let mut p = path.clone();
        p.push(s);
        commands(bin, p, out);
    }
}

/// The flags of each subcommand in `all` (after the program's own, which
/// come first), less the program's own, that the section of `doc` titled
/// `` `PROGRAM SUBCOMMAND` `` does not name.
fn unlisted_subcommand_flags(doc: &str, program: &str, all: &[Help]) -> Vec<String> {
    let top = &all[0].1;
    let mut missing = Vec::new();
    for (path, flags, _) in &all[1..] {
        let title = format!("`{program} {}`", path.join(" "));
        let text = section(doc, &title);
        for f in flags.difference(top) {
            if !names_flag(&text, f) {
                missing.push(format!("{f} of {title}"));
            }
        }
    }
    missing
}

#[test]
fn every_flag_of_every_command_is_in_the_reference() {
    let doc = reference();
    let mut all = Vec::new();
    commands(Path::new(RLX_DISCOVER), Vec::new(), &mut all);
    let globals = &all[0].1;
    assert!(
        all.len() > 10 && globals.contains("--quiet") && globals.contains("--color"),
        "the --help texts did not parse: {all:?}"
    );
    assert!(
        all.iter().any(|(p, f, _)| p == &["expand"]
            && f.contains("--write")
            && f.contains("--browse-ms")),
        "expand's --write and the alias --browse-ms were not read from its --help: {all:?}"
    );
    let global_section = section(&doc, "Global flags");
    let mut missing: Vec<String> = globals
        .iter()
        .filter(|f| !names_flag(&global_section, f))
        .map(|f| format!("global flag {f} (section \"Global flags\")"))
        .collect();
    missing.extend(unlisted_subcommand_flags(&doc, "rlx-discover", &all));
    assert!(
        missing.is_empty(),
        "docs/reference.md does not list:\n  {}",
        missing.join("\n  ")
    );
}

/// The long flags and `RLX_AGENT_*` variables that worker-agent/src/cli.rs
/// declares on `AgentArgs`, hidden flags left out: the same list as the
/// agent's `--help`, read from the source so that a stale or missing binary
/// cannot hide a new flag.
fn agent_flags_in_source() -> (BTreeSet<String>, BTreeSet<String>) {
    let p = workspace().join("worker-agent/src/cli.rs");
    let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let body = src
        .split_once("pub struct AgentArgs {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("AgentArgs in worker-agent/src/cli.rs");
    let (mut flags, mut vars) = (BTreeSet::new(), BTreeSet::new());
    let mut attr: Option<String> = None;
    for line in body.lines().map(str::trim) {
        if line.starts_with("#[arg") {
            attr = Some(String::new());
        }
        if let Some(a) = &mut attr {
            if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')) {
                let a = std::mem::take(a);
                attr = None;
                if a.contains("hide = true") {
                    continue;
                }
                if let Some((_, rest)) = a.split_once("long = \"") {
                    flags.insert(format!("--{}", rest.split('"').next().unwrap_or("")));
                } else if a.split(|c: char| !is_word(c)).any(|w| w == "long") {
                    flags.insert(format!("--{}", field.0.trim().replace('_', "-")));
                }
                if let Some((_, rest)) = a.split_once("env = \"") {
                    vars.insert(rest.split('"').next().unwrap_or("").to_string());
                }
            } else {
                a.push_str(line);
                a.push(' ');
            }
        }
    }
    (flags, vars)
}

#[test]
fn every_flag_of_the_agent_and_its_variable_is_in_the_reference() {
    let doc = reference();
    let text = section(&doc, "`rlx-agent` flags");
    let (mut flags, mut vars) = agent_flags_in_source();
    assert!(
        flags.contains("--worker-port")
            && flags.contains("--interface")
            && vars.contains("RLX_AGENT_CONFIG"),
        "AgentArgs did not parse: {flags:?} {vars:?}"
    );
    // The binary beside this package's (one target directory), else the
    // workspace's debug build.
    let agent = [
        Path::new(RLX_DISCOVER).with_file_name("rlx-agent"),
        workspace().join("target/debug/rlx-agent"),
    ]
    .into_iter()
    .find(|p| p.is_file());
    let mut missing = Vec::new();
    match agent {
        Some(bin) => {
            let mut all = Vec::new();
            commands(&bin, Vec::new(), &mut all);
            let (_, help_flags, help_vars) = &all[0];
            let stale: Vec<&String> = flags
                .iter()
                .chain(&vars)
                .filter(|f| !help_flags.contains(*f) && !help_vars.contains(*f))
                .collect();
            if !stale.is_empty() {
                eprintln!(
                    "\n*** {} looks older than worker-agent/src/cli.rs (its --help lacks \
                     {stale:?}): its subcommands may be out of date too; rebuild it with \
                     `cargo build -p rlx-agent` ***\n",
                    bin.display()
                );
            }
            flags.extend(help_flags.iter().cloned());
            vars.extend(all.iter().flat_map(|(_, _, v)| v.iter().cloned()));
            missing.extend(unlisted_subcommand_flags(&doc, "rlx-agent", &all));
        }
        None => eprintln!(
            "\n*** SKIPPED: no rlx-agent binary beside {RLX_DISCOVER} or in target/debug: its \
             --help and subcommands were not checked (build it with `cargo build -p \
             rlx-agent`); only the flags declared in worker-agent/src/cli.rs were ***\n"
        ),
    }
    missing.extend(
        flags
            .iter()
            .chain(&vars)
            .filter(|f| !names_flag(&text, f))
            .map(|f| format!("{f} (section \"4. `rlx-agent` flags\")")),
    );
    assert!(
        missing.is_empty(),
        "docs/reference.md does not list:\n  {}",
        missing.join("\n  ")
    );
}

/// Runs `cmd` with a deadline, its output into files.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("starting rlx-discover");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for rlx-discover") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "rlx-discover expand ran for {limit:?} on a cluster file it should refuse at load \
                 time, before any discovery: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap_or_default(),
        stderr: std::fs::read(&err_path).unwrap_or_default(),
    }
}

/// The keys the cluster-file parser says it expects where `toml` puts
/// [`UNKNOWN_KEY`].
///
/// `rlx-discover expand` reads and parses the file before anything else
/// (cli/src/cli/expand.rs: `writeback::read`, then `ClusterConfig::parse`),
/// and an unknown key fails that parse, so it exits 2 with no discovery
/// run. Each file below also carries `timeout_ms = 0` and `mdns = false`,
/// and the command gets `--no-mdns`: should a parser ever accept the
/// unknown key, the load-time check of `timeout_ms` still refuses the file
/// before any source runs.
fn keys_the_parser_expects(toml: &str) -> BTreeSet<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, toml).expect("writing the cluster file");
    let out = run_bounded(
        Command::new(RLX_DISCOVER)
            .arg("expand")
            .arg(&file)
            .arg("--no-mdns"),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{toml}\n{err}");
    let refusal = format!("unknown key `{UNKNOWN_KEY}`");
    let at = err
        .find(&refusal)
        .unwrap_or_else(|| panic!("no {refusal:?} in the error for\n{toml}\n{err}"));
    let line = err[at..].lines().next().unwrap_or("");
    let (_, expected) = line
        .split_once("known keys:")
        .unwrap_or_else(|| panic!("the error names no known keys: {line}"));
    let keys: BTreeSet<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(!keys.is_empty(), "no keys in {line}");
    keys
}

/// The `keys` (of the table `parent`, when nested) that the section of
/// docs/reference.md titled `section_title` has no table row for.
fn unlisted_keys(
    section_title: &str,
    keys: &BTreeSet<String>,
    parent: Option<&str>,
) -> Vec<String> {
    let text = section(&reference(), section_title);
    keys.iter()
        .filter(|k| !has_row(&text, k, parent))
        .map(|k| match parent {
            Some(p) => format!("{p}.{k}"),
            None => k.clone(),
        })
        .collect()
}

fn assert_listed(section_title: &str, missing: &[String]) {
    assert!(
        missing.is_empty(),
        "the section {section_title} of docs/reference.md has no table row for: {missing:?} \
         (write each key as the first cell of a row, `key`, or `table.key` for a nested table)"
    );
}

#[test]
fn every_discover_key_the_parser_accepts_is_in_the_reference() {
    let keys = keys_the_parser_expects(&format!(
        "[discover]\n{UNKNOWN_KEY} = 1\ntimeout_ms = 0\nmdns = false\n"
    ));
    assert!(
        keys.contains("ssh_hosts") && keys.contains("dns_sd") && keys.len() >= 20,
        "{keys:?}"
    );
    let dns_sd = keys_the_parser_expects(&format!(
        "[discover]\ntimeout_ms = 0\nmdns = false\n\
         dns_sd = {{ domain = \"rlx.example.org\", {UNKNOWN_KEY} = 1 }}\n"
    ));
    assert!(dns_sd.contains("domain"), "{dns_sd:?}");
    let mut missing = unlisted_keys("`[discover]`", &keys, None);
    missing.extend(unlisted_keys("`[discover]`", &dns_sd, Some("dns_sd")));
    assert_listed("`[discover]`", &missing);
}

/// `[[node]]` is the runtime's table: a key it does not read is not
/// refused (the runtime ignores it) but warned about, and the warning for a
/// key near none of them lists every key it reads. The file has no
/// `[discover]`, so nothing is discovered.
#[test]
fn every_node_key_the_parser_accepts_is_in_the_reference() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("model = \"m\"\n[[node]]\n{UNKNOWN_KEY} = 1\naddr = \"a:1\"\nckpt_dir = \"/m\"\n"),
    )
    .expect("writing the cluster file");
    let out = run_bounded(
        Command::new(RLX_DISCOVER)
            .arg("expand")
            .arg(&file)
            .arg("--no-mdns"),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let listed = "the keys it reads are ";
    let at = err
        .find(listed)
        .unwrap_or_else(|| panic!("no {listed:?} in the warning:\n{err}"));
    let line = err[at + listed.len()..].lines().next().unwrap_or("");
    let keys: BTreeSet<String> = line.split(", ").map(|k| k.trim().to_string()).collect();
    assert!(
        keys.contains("addr") && keys.contains("standby_for") && keys.len() == 11,
        "{keys:?}"
    );
    assert_listed("`[[node]]`", &unlisted_keys("`[[node]]`", &keys, None));
}

#[test]
fn every_key_of_the_agent_config_file_is_in_the_reference() {
    let p = workspace().join("worker-agent/src/config.rs");
    let src = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let list = src
        .split_once("pub const KEYS: &[&str] = &[")
        .and_then(|(_, rest)| rest.split_once("];"))
        .map(|(list, _)| list)
        .expect("the KEYS list in worker-agent/src/config.rs");
    let keys: BTreeSet<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(
        keys.contains("worker_port") && keys.contains("register_addrs"),
        "{keys:?}"
    );
    assert_listed(
        "`/etc/rlx/agent.toml`",
        &unlisted_keys("`/etc/rlx/agent.toml`", &keys, None),
    );
}

#[test]
fn every_file_path_the_reference_names_exists() {
    let doc = reference();
    let root = workspace();
    let mut missing = BTreeSet::new();
    for word in doc.split(|c: char| {
        c.is_whitespace() || matches!(c, '`' | '(' | ')' | ',' | ';' | '"' | '[' | ']' | '|')
    }) {
        let word = word.trim_end_matches(['.', ':']);
        let looks_like_a_file = [".rs", ".md", ".toml", ".service", ".plist", ".json"]
            .iter()
            .any(|ext| word.ends_with(ext));
        let is_relative_path = word.contains('/')
            && !word.starts_with(['/', '~', '$', '<', '.'])
            && !word.contains("://")
            && !word.contains(['<', '*', '='])
            && (looks_like_a_file || word.ends_with('/'));
        if is_relative_path && !root.join(word).exists() {
            missing.insert(word.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference.md names paths that are not in the repository: {missing:?}"
    );
}
