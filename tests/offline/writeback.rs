//! `expand --write` end to end through the real binary: golden files
//! (a commented, oddly formatted config must come back byte for byte with
//! only the found nodes appended, in LF and CRLF), idempotence, the diff of
//! `--dry-run`, missing-node reporting and `--prune`, the conflict check,
//! and `kill -9` at random moments never leaving a half-written file.
//!
//! Discovery goes through a stand-in ssh (see `fakessh`): no packet is
//! sent. Regenerate the expected files with `UPDATE_GOLDEN=1 cargo test
//! --test offline writeback` and review the diff.

use crate::fakessh::{caps, mode, Cluster};
use rlx_lab::kit::wait_until;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares `actual` with the golden file `name` byte for byte, showing a
/// diff on mismatch; `UPDATE_GOLDEN=1` rewrites the file instead.
fn check_golden(actual: &str, name: &str) {
    let p = golden(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&p, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", p.display()));
    if actual != want {
        let d = similar::TextDiff::from_lines(&want, actual)
            .unified_diff()
            .header("expected", "actual")
            .to_string();
        panic!("{} differs from the output:\n{d}", p.display());
    }
}

/// The lab of the golden tests: two answering GPU boxes and one that is gone.
fn odd_cluster() -> (Cluster, String) {
    let c = Cluster::new();
    c.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    c.host("gpu-b", &caps("gpu-b", "00000000000000b2", "rocm", 16));
    let text = std::fs::read_to_string(golden("odd.toml")).unwrap();
    (c, text)
}

fn crlf(s: &str) -> String {
    s.replace('\n', "\r\n")
}

#[test]
fn write_appends_found_nodes_and_keeps_every_byte_of_a_commented_file() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    let r = c.expand(&["cluster.toml", "--write"]);
    r.expect_code(1); // "gone" failed: something needs a look
    assert!(r.stdout().is_empty(), "--write prints nothing on stdout");
    assert!(
        r.stderr()
            .contains("wrote cluster.toml: 2 node(s) appended"),
        "{}",
        r.dump()
    );
    let out = std::fs::read_to_string(&p).unwrap();
    // The file had no final newline: exactly one is added, then the nodes.
    assert!(
        out.starts_with(&format!("{text}\n\n# found by ")),
        "the user's bytes come first, unchanged:\n{out}"
    );
    check_golden(&out, "odd.expected.toml");
}

/// Guards against the toml_edit round trip, which writes `\n` for `\r\n`.
#[test]
fn a_crlf_file_is_kept_byte_for_byte_and_gets_crlf_nodes() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &crlf(&text));
    c.expand(&["cluster.toml", "--write"]).expect_code(1);
    let out = std::fs::read_to_string(&p).unwrap();
    let want = crlf(&std::fs::read_to_string(golden("odd.expected.toml")).unwrap());
    assert!(out == want, "CRLF output differs:\n{out:?}\n---\n{want:?}");
}

#[test]
fn a_second_write_with_the_same_cluster_changes_nothing() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    c.expand(&["cluster.toml", "--write"]).expect_code(1);
    let first = std::fs::read(&p).unwrap();
    let before = std::fs::metadata(&p).unwrap();
    let r = c.expand(&["cluster.toml", "--write"]);
    assert!(
        r.stderr()
            .contains("cluster.toml is up to date: nothing to write"),
        "{}",
        r.dump()
    );
    assert!(r.stderr().contains("0 node(s) added"), "{}", r.dump());
    let after = std::fs::metadata(&p).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), first, "same bytes");
    assert_eq!(
        (before.ino(), before.mtime(), before.mtime_nsec()),
        (after.ino(), after.mtime(), after.mtime_nsec()),
        "the file was not even rewritten"
    );
    let d = c.expand(&["cluster.toml", "--dry-run"]);
    assert_eq!(d.stdout(), "", "nothing to diff: {}", d.dump());
}

#[test]
fn dry_run_prints_the_diff_that_write_then_applies() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    let d = c.expand(&["cluster.toml", "--dry-run"]);
    d.expect_code(1);
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        text,
        "dry run writes nothing"
    );
    let diff = d.stdout();
    assert!(
        diff.starts_with("--- cluster.toml\n+++ cluster.toml (after --write)\n"),
        "{}",
        d.dump()
    );
    c.expand(&["cluster.toml", "--write"]);
    let written = std::fs::read_to_string(&p).unwrap();
    let added: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(|l| &l[1..])
        .collect();
    // The file had no final newline, so its last line is in the diff too.
    let appended: Vec<&str> = written.lines().skip(text.lines().count() - 1).collect();
    assert_eq!(
        added, appended,
        "the diff's added lines are what --write appended"
    );
    assert!(diff.contains("\\ No newline at end of file"), "{diff}");
}

fn json(r: &rlx_lab::kit::Run) -> serde_json::Value {
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {}", r.dump()))
}

#[test]
fn a_node_that_vanished_is_reported_as_missing_and_kept() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    c.expand(&["cluster.toml", "--write"]);
    let written = std::fs::read_to_string(&p).unwrap();
    c.remove_host("gpu-b");
    let r = c.expand(&["cluster.toml", "--write", "--json"]);
    r.expect_code(1);
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        written,
        "nothing removed"
    );
    let v = json(&r);
    let missing = v["missing"].as_array().unwrap();
    let b = missing
        .iter()
        .find(|m| m["addr"] == "gpu-b:9100")
        .unwrap_or_else(|| panic!("gpu-b reported missing: {}", r.dump()));
    assert_eq!(b["origin"], "discovered");
    assert_eq!(b["action"], "kept");
    assert!(b["found_by"].as_str().unwrap().starts_with("found by ssh"));
    assert!(b["failure"].as_str().unwrap().contains("does not resolve"));
    let hand = missing
        .iter()
        .find(|m| m["addr"] == "10.0.0.9:9100")
        .unwrap();
    assert_eq!(hand["origin"], "hand-written");
    assert_eq!(v["file"]["written"], false);
    assert_eq!(v["file"]["changed"], false);
    // The text report says what to do.
    let t = c.expand(&["cluster.toml"]);
    assert!(
        t.stderr().contains("gpu-b:9100") && t.stderr().contains("--prune"),
        "{}",
        t.dump()
    );
}

#[test]
fn prune_removes_vanished_found_nodes_but_never_hand_written_ones() {
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    c.expand(&["cluster.toml", "--write"]);
    c.remove_host("gpu-b");
    let r = c.expand(&["cluster.toml", "--write", "--prune", "--json"]);
    let v = json(&r);
    assert_eq!(
        v["file"]["removed"],
        serde_json::json!(["gpu-b:9100"]),
        "{}",
        r.dump()
    );
    let out = std::fs::read_to_string(&p).unwrap();
    assert!(!out.contains("gpu-b:9100"), "{out}");
    assert!(
        out.contains("addr=\"10.0.0.9:9100\""),
        "the pinned node stays"
    );
    assert!(out.starts_with(&text), "the user's bytes stay");
    // Only gpu-a's block is left after the user's text: exactly what a
    // first --write would have appended had gpu-b never answered.
    let c2 = Cluster::new();
    c2.host("gpu-a", &caps("gpu-a", "00000000000000a1", "cuda", 24));
    let p2 = c2.write("cluster.toml", &text);
    c2.expand(&["cluster.toml", "--write"]);
    assert_eq!(out, std::fs::read_to_string(p2).unwrap());
    // Nothing found at all: --prune refuses to empty the file.
    c.remove_host("gpu-a");
    let r = c.expand(&["cluster.toml", "--write", "--prune"]);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), out, "{}", r.dump());
    assert!(
        r.stderr().contains("--prune removed nothing"),
        "{}",
        r.dump()
    );
}

#[test]
fn a_file_edited_while_discovery_runs_is_not_overwritten() {
    let (c, text) = odd_cluster();
    c.delay_host("gpu-a", 1.0);
    let p = c.write("cluster.toml", &text);
    let child = c
        .command()
        .args(["expand", "cluster.toml", "--write", "--no-mdns"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While the slow host is being probed, the user saves the file.
    wait_until(
        Duration::from_secs(10),
        "the probe of gpu-a started",
        || c.probe_started("gpu-a"),
    );
    let edited = format!("{text}\n# edited by hand\n");
    std::fs::write(&p, &edited).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("changed on disk while discovery ran")
            && err.contains("run the command again"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        edited,
        "the edit survives"
    );
    let strays: Vec<_> = std::fs::read_dir(c.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".rlx-tmp"))
        .collect();
    assert!(
        strays.is_empty(),
        "the temporary file is removed: {strays:?}"
    );
}

#[test]
fn the_file_mode_survives_a_write() {
    use std::os::unix::fs::PermissionsExt;
    let (c, text) = odd_cluster();
    let p = c.write("cluster.toml", &text);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    c.expand(&["cluster.toml", "--write"]);
    assert_ne!(std::fs::read_to_string(&p).unwrap(), text);
    assert_eq!(mode(&p), 0o640);
}

/// xorshift64*: random kill delays without a dependency; the seed is
/// printed so a failure can be replayed with `KILL_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Guards the atomic-write promise: SIGKILL at any moment leaves the old
/// file or the new one, whole, and never a truncated or mixed one.
#[test]
fn kill_9_at_random_moments_never_leaves_a_half_written_file() {
    // Default iterations keep the suite quick; KILL_ITERATIONS=500 soaks.
    let iterations: usize = std::env::var("KILL_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let seed = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("KILL_SEED={seed}");
    let mut rng = Rng(seed);

    let (c, text) = odd_cluster();
    // A large file (about 1.5 MB) so reading, writing and the re-read
    // before the rename take long enough for kills to land inside them.
    let mut old = format!("{text}\n");
    for i in 0..20_000 {
        old.push_str(&format!(
            "# filler {i:05}: a long comment line that keeps the file big enough\n"
        ));
    }
    let p = c.write("cluster.toml", &old);
    let t0 = Instant::now();
    c.expand(&["cluster.toml", "--write"]).expect_code(1);
    let full = t0.elapsed();
    let new = std::fs::read_to_string(&p).unwrap();
    assert!(new.len() > old.len() && new.starts_with(&old));

    // Bounded in time as well as count: a slow machine runs fewer kills.
    let budget = Duration::from_secs(120).max(full * iterations as u32 * 2);
    let (mut kept_old, mut got_new, mut strays, mut finished) = (0, 0, 0, 0);
    let started = Instant::now();
    let mut done = 0;
    while done < iterations && started.elapsed() < budget {
        std::fs::write(&p, &old).unwrap();
        let mut child = c
            .command()
            .args(["-q", "expand", "cluster.toml", "--write", "--no-mdns"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 * 13 / 10));
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_some() {
            finished += 1;
        }
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        let now = std::fs::read_to_string(&p).unwrap();
        if now == old {
            kept_old += 1;
        } else if now == new {
            got_new += 1;
        } else {
            panic!(
                "after SIGKILL at {delay:?} (seed {seed}) the file is neither the old \
                 ({} bytes) nor the new ({} bytes) version: {} bytes",
                old.len(),
                new.len(),
                now.len()
            );
        }
        for e in std::fs::read_dir(c.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
        {
            if e.file_name().to_string_lossy().ends_with(".rlx-tmp") {
                strays += 1;
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        done += 1;
    }
    eprintln!(
        "{done} kills over a {full:?} run: old file {kept_old}, new file {got_new} \
         (process already done {finished}), killed mid-write (temp file left) {strays}"
    );
    assert!(done >= 10, "only {done} iterations ran within {budget:?}");
    assert!(kept_old > 0, "some kills must land before the rename");
}
