//! **The docs point at files that exist.** README.md, CONTRIBUTING.md,
//! BENCHMARKS.md and docs/*.md send readers to files of this repository,
//! by a link (`[protocol](docs/protocol.md)`) or by naming a path in
//! backticks (`src/admit.rs`). Renaming or moving a file breaks those
//! pointers without any error, and a reader then hunts for a file that no
//! longer exists. The same goes for `#anchors`: README.md and docs/guide.md
//! were split out of one long README (issue 25), and the sections they link
//! to must keep the headings the links use.
//!
//! Markdown is scanned by hand, not parsed (the tests have no Markdown
//! crate). The rules below are the part of CommonMark these files use:
//! fenced code blocks are skipped, backtick code spans may run over line
//! breaks but never over a blank line, and a link is `[text](target)`
//! outside code.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The repository's root: the root package's manifest directory.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files whose pointers are checked, relative to the root.
/// Other Markdown files (vendor/, bench/results/, fixtures) are records or
/// upstream text and are not held to this.
fn markdown_files() -> Vec<String> {
    let mut files: Vec<String> = ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let docs = repo().join("docs");
    let mut in_docs: Vec<String> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("reading {}: {e}", docs.display()))
        .map(|e| {
            e.expect("a docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    in_docs.sort();
    files.extend(in_docs);
    files
}

fn read(rel: &str) -> String {
    let p = repo().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e} (every file in this list must exist)",
            p.display()
        )
    })
}

/// Backticked words that start like this are taken for repository paths.
const PATH_PREFIXES: &[&str] = &[
    "src/",
    "docs/",
    "cli/",
    "worker-agent/",
    "net/",
    "proto/",
    "lab/",
    "bench/",
    "tests/",
    "vendor/",
    ".ci/",
    "examples/",
    "fuzz/",
    "packaging/",
];

/// Root files that a backticked word may name on its own.
const ROOT_FILES: &[&str] = &[
    "README.md",
    "CONTRIBUTING.md",
    "BENCHMARKS.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
    "Cargo.toml",
];

/// A pointer that is not one file: a placeholder for many (`tests/<theme>/main.rs`,
/// `src/config/*.rs`, `cli/src/cli/...`, `{a,b}.rs`) names no file to look for.
/// So does a part in capitals only, as `--help` writes its values
/// (`fuzz/seeds/T/`, one directory per fuzz target T; `DIR/`).
fn is_placeholder(path: &str) -> bool {
    let capitals = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_uppercase());
    path.contains('<')
        || path.contains('*')
        || path.contains("...")
        || path.contains('{')
        || path.split('/').any(capitals)
}

/// Files that exist only after something ran: `dist/` is what `.ci/release`
/// writes, `target/` what cargo builds. A fresh clone has neither, so their
/// absence says nothing about the docs.
fn is_made_at_run_time(repo_rel: &str) -> bool {
    repo_rel.starts_with("dist/") || repo_rel.starts_with("target/")
}

/// The text of `doc` with every fenced code block blanked out (newlines
/// kept, so that byte offsets still give the right line). A command in a
/// fence (`sudo install -m 644 worker-agent/rlx-agent.service ...`) is an
/// example to type, often with paths of the reader's machine.
fn prose(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut fence: Option<String> = None;
    for line in doc.split_inclusive('\n') {
        let t = line.trim_start();
        let marker: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
        let is_marker =
            marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        match &fence {
            None if is_marker => fence = Some(marker),
            Some(open) if is_marker && t.starts_with(open.as_str()) => fence = None,
            None => {
                out.push_str(line);
                continue;
            }
            Some(_) => {}
        }
        out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
    }
    out
}

/// The line (1-based) of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// Code spans of `text`: (byte offset, content). A run of N backticks opens
/// a span that the next run of exactly N backticks in the same paragraph
/// closes; an opening run without one is a literal backtick.
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let b = text.as_bytes();
    let run_at = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let start = i + n;
        let paragraph_end = text[start..].find("\n\n").map_or(b.len(), |p| start + p);
        let mut j = start;
        let mut close = None;
        while j < paragraph_end {
            if b[j] == b'`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                spans.push((i, &text[start..c]));
                i = c + n;
            }
            None => i = start,
        }
    }
    spans
}

/// `text` with every code span blanked out: `[x](y)` inside backticks is
/// not a link.
fn without_code_spans(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    for (at, content) in code_spans(text) {
        let n = text[at..].bytes().take_while(|&c| c == b'`').count();
        for c in &mut out[at..at + 2 * n + content.len()] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

/// Link targets of `text` (prose, code spans blanked): (byte offset, target).
/// Images (`![alt](path)`) count: their file must exist as well.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = text[from..].find("](") {
        let open = from + p + 2;
        from = open;
        let Some(len) = text[open..].find(')') else {
            break;
        };
        let inner = text[open..open + len].trim();
        // `[x](<path with spaces>)`, and `[x](path "title")`.
        let target = match inner.strip_prefix('<') {
            Some(rest) => rest.split('>').next().unwrap_or(""),
            None => inner.split_whitespace().next().unwrap_or(""),
        };
        if !target.is_empty() {
            out.push((open, target.to_string()));
        }
    }
    out
}

/// `rel` (a path relative to the directory of the Markdown file `doc`)
/// relative to the repository's root, or None when it climbs out of it.
fn from_root(doc: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<String> = Path::new(doc)
        .parent()
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    for c in Path::new(rel).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    let mut joined = parts.join("/");
    if rel.ends_with('/') {
        joined.push('/');
    }
    Some(joined)
}

/// One relative link of the docs: where it is, and where it points.
struct Link {
    /// `docs/guide.md:12`.
    at: String,
    /// The target as written.
    written: String,
    /// The file it names, relative to the root (`README.md` for `#x` in
    /// README.md itself).
    file: String,
    /// The `#anchor`, without the `#`.
    anchor: Option<String>,
}

/// Every relative link of every checked Markdown file. Web addresses and
/// mail addresses are not files of the repository and are left out.
fn links() -> Vec<Link> {
    let mut out = Vec::new();
    for doc in markdown_files() {
        let text = without_code_spans(&prose(&read(&doc)));
        for (at, target) in link_targets(&text) {
            let lower = target.to_ascii_lowercase();
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| lower.starts_with(s))
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a.to_string())),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                Some(doc.clone())
            } else {
                from_root(&doc, path)
            };
            out.push(Link {
                at: format!("{doc}:{}", line_of(&text, at)),
                written: target.clone(),
                file: file.unwrap_or_else(|| format!("(outside the repository) {path}")),
                anchor,
            });
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_names_a_file_that_exists() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for l in links() {
        if is_placeholder(&l.written) || is_made_at_run_time(&l.file) {
            continue;
        }
        checked += 1;
        if !repo().join(&l.file).exists() {
            wrong.push(format!(
                "{}: the link ({}) names {}, which does not exist: fix the path, or name the file it was renamed to",
                l.at, l.written, l.file
            ));
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the link scanner broken?"
    );
    assert!(
        wrong.is_empty(),
        "broken links in the docs:\n{}",
        wrong.join("\n")
    );
}

/// Words of backticked text that name repository paths, with where they
/// are: `src/admit.rs`, or the script of `bash .ci/platforms`.
fn backticked_paths() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in markdown_files() {
        let text = prose(&read(&doc));
        for (at, span) in code_spans(&text) {
            for word in span.split_whitespace() {
                // Sentence punctuation around a path (`see src/a.rs),`) and a
                // `:line` suffix are not part of it.
                let word = word.trim_matches(|c: char| "()[],;\"'".contains(c));
                let word = match word.rsplit_once(':') {
                    Some((p, n)) if n.chars().all(|c| c.is_ascii_digit()) => p,
                    _ => word.trim_end_matches(':'),
                };
                let looks_like_a_path =
                    PATH_PREFIXES.iter().any(|p| word.starts_with(p)) || ROOT_FILES.contains(&word);
                if looks_like_a_path && !is_placeholder(word) {
                    out.push((format!("{doc}:{}", line_of(&text, at)), word.to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn every_backticked_repository_path_in_the_docs_exists() {
    let found = backticked_paths();
    assert!(
        found.len() > 50,
        "only {} backticked paths found: is the code-span scanner broken?",
        found.len()
    );
    let wrong: Vec<String> = found
        .iter()
        .filter(|(_, p)| !repo().join(p).exists())
        .map(|(at, p)| {
            format!("{at}: `{p}` does not exist in the repository: fix the path, or name the file it was renamed to")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "paths in the docs that do not exist:\n{}",
        wrong.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, every character dropped but
/// letters, digits, spaces, `-` and `_`, then spaces to `-`. Inline markup
/// is dropped first (`` `watch` `` gives `watch`, `[a](b)` gives `a`).
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading: only its text is shown, so only its text counts.
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors GitHub makes for `doc`'s headings (a repeated heading gets
/// `-1`, `-2`, ...), and any `id="..."` or `name="..."` written by hand.
fn anchors(doc: &str) -> BTreeSet<String> {
    let text = prose(doc);
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') && line.len() - t.len() < 4 {
            let title = t[hashes..].trim().trim_end_matches('#').trim();
            let base = slug(title);
            let mut s = base.clone();
            let mut n = 0;
            while seen.contains(&s) {
                n += 1;
                s = format!("{base}-{n}");
            }
            seen.insert(s);
        }
        for attr in ["id=\"", "name=\""] {
            let mut from = 0;
            while let Some(p) = line[from..].find(attr) {
                let start = from + p + attr.len();
                let Some(len) = line[start..].find('"') else {
                    break;
                };
                seen.insert(line[start..start + len].to_string());
                from = start + len;
            }
        }
    }
    seen
}

#[test]
fn the_slug_rule_is_githubs() {
    assert_eq!(slug("With the RLX runtime"), "with-the-rlx-runtime");
    assert_eq!(
        slug("Seeing the LAN: `browse` and `watch`"),
        "seeing-the-lan-browse-and-watch"
    );
    assert_eq!(
        slug("Writing the file back: `expand --write`"),
        "writing-the-file-back-expand---write"
    );
    assert_eq!(slug("`[discover]` keys"), "discover-keys");
    assert_eq!(
        slug("Embedding it in a runtime (Rust)"),
        "embedding-it-in-a-runtime-rust"
    );
    assert_eq!(slug("see [the guide](docs/guide.md)"), "see-the-guide");
    let twice = anchors("# A\n## a\n```\n# not a heading\n```\n");
    assert_eq!(twice, ["a", "a-1"].iter().map(|s| s.to_string()).collect());
}

#[test]
fn every_anchor_into_the_readme_and_the_guide_names_a_heading() {
    let targets = ["README.md", "docs/guide.md"];
    let mut wrong = Vec::new();
    let mut checked = 0;
    for l in links() {
        let (Some(anchor), true) = (&l.anchor, targets.contains(&l.file.as_str())) else {
            continue;
        };
        checked += 1;
        let known = anchors(&read(&l.file));
        if anchor.is_empty() {
            wrong.push(format!(
                "{}: ({}) has an empty anchor, which leads nowhere: link a heading, or drop the `#`",
                l.at, l.written
            ));
        } else if !known.contains(anchor.as_str()) {
            // The headings that share the anchor's first word, as a hint
            // to the one it was meant to be.
            let stem = anchor.split('-').next().unwrap_or(anchor);
            let close: Vec<&str> = known
                .iter()
                .filter(|k| k.contains(stem))
                .map(|k| k.as_str())
                .take(5)
                .collect();
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!(" (close: #{})", close.join(", #"))
            };
            wrong.push(format!(
                "{}: #{anchor} is no heading of {}{hint}: link a heading that exists, or rename the heading back",
                l.at, l.file
            ));
        }
    }
    assert!(
        checked > 0,
        "no link into README.md or docs/guide.md has an anchor: is the link scanner broken?"
    );
    assert!(
        wrong.is_empty(),
        "anchors that lead nowhere:\n{}",
        wrong.join("\n")
    );
}

/// The README's "The two commands" is the newcomer's whole contract: one
/// command for the demo, one for the tests. `.ci/run` and `.ci/fresh` run the second
/// exactly as written, so the README must keep it word for word.
#[test]
fn the_readme_keeps_the_two_commands_word_for_word() {
    let readme = read("README.md");
    let block = "```sh\n\
                 # 1. The main job: a private network of simulated machines, discovered end to end\n\
                 cargo build --release --workspace && target/release/rlx-discover demo\n\
                 \n\
                 # 2. The tests\n\
                 cargo test --workspace\n\
                 ```\n";
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("The two commands\n"))
        .expect("README.md has a \"## The two commands\" section: put it back, after Install");
    assert!(
        section.contains(block),
        "README.md's \"The two commands\" section must hold this block exactly (CI runs the test command as written):\n{block}"
    );
    // What it does and the demo's output come first, then Install, then
    // the two commands.
    let at = |h: &str| {
        readme
            .find(&format!("\n## {h}\n"))
            .unwrap_or_else(|| panic!("README.md has no \"## {h}\" section"))
    };
    assert!(
        at("What it does, on four machines") < at("Install")
            && at("Install") < at("The two commands"),
        "README.md's order: what it does (the demo's output), then Install, then The two commands"
    );
    for script in [".ci/run", ".ci/fresh"] {
        assert!(
            read(script).contains("cargo test --workspace"),
            "{script} no longer runs `cargo test --workspace`, the README's test command: make them agree"
        );
    }
}

/// Every error or result a library caller receives can be named from the
/// crate's root or its modules (they could not: `RulesError`,
/// `LinkSetupError`, `Discovery`, `StopRule`). This fails to compile if one
/// is hidden again.
#[test]
fn the_types_a_caller_receives_can_be_named() {
    fn named<T>() -> &'static str {
        std::any::type_name::<T>()
    }
    for name in [
        named::<rlx_discover::RulesError>(),
        named::<rlx_discover::LinkSetupError>(),
        named::<rlx_discover::Discovery>(),
        named::<rlx_discover::mdns::StopRule>(),
    ] {
        assert!(name.starts_with("rlx_discover::"), "{name}");
    }
}

/// Guards against a lab test looser than the documentation, or a promise
/// no test checks: docs/guide.md's table "What watch promises" lists
/// exactly `rlx_lab::kit::promise::ALL`, row for row, which the lab tests
/// assert.
#[test]
fn the_guides_watch_promises_are_the_bounds_the_lab_tests_assert() {
    let guide = read("docs/guide.md");
    let from = guide
        .find("<a id=\"what-watch-promises\"></a>")
        .expect("docs/guide.md has the section \"What watch promises\"");
    let rows: Vec<&str> = guide[from..]
        .lines()
        .skip_while(|l| !l.starts_with("| event |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let want: Vec<String> = rlx_lab::kit::promise::ALL.iter().map(|p| p.row()).collect();
    assert_eq!(rows, want, "docs/guide.md, \"What watch promises\"");
}
