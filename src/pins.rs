//! **Who is who: the pins file** — node id → node key, learned on first
//! sight and kept beside the cluster file, as SSH's `known_hosts` keeps
//! host keys.
//!
//! ```text
//! # rlx-discover pins: node id -> the agent's own public key (docs/security.md)
//! 0123456789abcdef ed25519 Rm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmE= # gpu-a first seen 2026-12-02
//! ```
//!
//! One pin a line: the node id, the algorithm, the base64 public key the
//! agent named in its caps (`node_key`) and proved by signing our challenge,
//! then an optional comment (`#`: the host name and the day it was first
//! seen). Blank lines and lines starting with `#` are comments. The file is
//! `<cluster file's stem>.pins` beside the cluster file (`cluster.toml` →
//! `cluster.pins`) unless `[discover] pins_file` names another (a relative
//! path is taken from the cluster file's directory). It is replaced
//! atomically ([`crate::clusterfile::write_atomic`]), and a run that pins a node
//! re-reads it first, so a `pins forget` done meanwhile is kept. It is a
//! trust store, so it gets the key file's protections (`file`): no
//! symbolic link, owned by this user or root, writable by nobody else, in a
//! directory nobody else can change; each refusal names the file and the
//! fix.
//!
//! Without a cluster file (`browse`, `watch` without `--config`) pins live
//! in memory for the run: `watch` keeps them for its lifetime.
//!
//! What a pin decides ([`Pins::judge`]): a node id seen for the first time
//! is pinned to the key it proved; the same key again is that machine
//! (also at a new address: a move); another key is another machine
//! claiming the id, refused loudly with both fingerprints and the command
//! that re-pins it after a real reinstall ([`forget_command`]).

mod file;

use crate::clusterfile::{write_atomic, WriteError};
pub use file::FileError;
use rlx_proto::identity::{NodePublicKey, ALGORITHM};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The pins file of a cluster file when `[discover] pins_file` names none:
/// `<stem>.pins` in the same directory.
pub fn default_path(cluster_file: &Path) -> PathBuf {
    crate::config::default_pins_path(cluster_file)
}

/// The command that drops the pin of `id` kept in `pins_file`, so that the
/// next run pins the key it then sees (after a real reinstall of that
/// machine). Pins kept in memory are forgotten by starting the run again.
pub fn forget_command(id: &str, pins_file: Option<&Path>) -> String {
    match pins_file {
        Some(p) => format!("rlx-discover pins forget {id} --pins-file {}", p.display()),
        None => format!(
            "start the run again (without a cluster file the pins of {id} and every other \
             node are kept in memory only)"
        ),
    }
}

/// One pin: the key and the comment written beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The node's public key.
    pub key: NodePublicKey,
    /// What the line's comment says (`gpu-a first seen 2026-12-02`), empty
    /// when none.
    pub comment: String,
}

/// Why the pins file cannot be used. Each names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// The file could not be written.
    #[error("pins file: {0}")]
    File(WriteError),
    /// The file could not be read or created, or its rules refuse it.
    #[error("{0}")]
    Checked(FileError),
    /// A line is not `<id> ed25519 <base64 key> [# comment]`.
    #[error(
        "pins file {}:{line}: {why}; each line is `<16-hex node id> {ALGORITHM} <base64 key> \
         # comment` (fix or delete the line: a deleted pin is learned again on next sight)",
        path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

// By hand, not `#[from]`, which would make each also the error's
// `source()`: `{:#}` would then print the cause a second time.
impl From<WriteError> for PinsError {
    fn from(e: WriteError) -> Self {
        PinsError::File(e)
    }
}

impl From<FileError> for PinsError {
    fn from(e: FileError) -> Self {
        PinsError::Checked(e)
    }
}

/// What a node key shown for a node id means against the pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The id is new: pin this key.
    New,
    /// The key pinned for the id.
    Pinned,
    /// Another key than the one pinned for the id: another machine.
    Clash {
        /// The key pinned for the id.
        pinned: NodePublicKey,
    },
}

/// The pins of one coordinator: in a file, or in memory for the run.
#[derive(Debug, Clone, Default)]
pub struct Pins {
    path: Option<PathBuf>,
    entries: BTreeMap<String, Pin>,
    /// Read the file, never write it ([`Pins::read_only`]).
    read_only: bool,
}

impl Pins {
    /// Pins kept in memory only, for one run (no cluster file).
    pub fn in_memory() -> Pins {
        Pins::default()
    }

    /// The pins in `path` (none yet when it does not exist).
    pub fn load(path: &Path) -> Result<Pins, PinsError> {
        let mut p = Pins {
            path: Some(path.to_path_buf()),
            entries: BTreeMap::new(),
            read_only: false,
        };
        p.reload()?;
        Ok(p)
    }

    /// These pins with their file only read, never written (`expand
    /// --dry-run`): a clash with a pin is still refused, and new pins last
    /// for the run.
    pub fn read_only(mut self) -> Pins {
        self.read_only = true;
        self
    }

    /// Reads the file again (a `pins forget` in another process, a pin
    /// written by another run): the file's pins win over those in memory;
    /// pins that only read-only pins hold in memory are kept.
    pub fn reload(&mut self) -> Result<(), PinsError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut fresh = match file::read_checked(path)? {
            Some((text, _)) => parse(path, &text)?,
            None => BTreeMap::new(),
        };
        if self.read_only {
            for (id, pin) in std::mem::take(&mut self.entries) {
                fresh.entry(id).or_insert(pin);
            }
        }
        self.entries = fresh;
        Ok(())
    }

    /// The file, when the pins are kept in one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The pin of `id`.
    pub fn get(&self, id: &str) -> Option<&Pin> {
        self.entries.get(id)
    }

    /// Every pin, by node id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Pin)> {
        self.entries.iter()
    }

    /// What `key`, shown for `id`, means.
    pub fn judge(&self, id: &str, key: &NodePublicKey) -> Judgement {
        match self.entries.get(id) {
            None => Judgement::New,
            Some(p) if p.key == *key => Judgement::Pinned,
            Some(p) => Judgement::Clash { pinned: p.key },
        }
    }

    /// Pins `key` for `id` in memory (see [`Pins::save`]); the comment
    /// names `host` and today's date. The host name is the agent's to
    /// choose, and the pins file is read in editors and terminals: control
    /// characters and `#` become `?`, white space goes, and bidi overrides
    /// and other invisible format characters are escaped (`\u{202e}`), so a
    /// name cannot break the line, start a comment, or make the line read
    /// in another order than it is parsed.
    pub fn pin(&mut self, id: &str, key: NodePublicKey, host: &str) {
        let host: String = host
            .chars()
            .map(|c| if c.is_control() || c == '#' { '?' } else { c })
            .filter(|c| !c.is_whitespace())
            .take(64)
            .flat_map(|c| match c {
                '"' | '\'' | '\\' => vec![c],
                c => c.escape_debug().collect(),
            })
            .collect();
        let comment = format!("{host} first seen {}", today());
        self.entries.insert(id.to_string(), Pin { key, comment });
    }

    /// Drops the pin of `id`; whether there was one.
    pub fn forget(&mut self, id: &str) -> bool {
        self.entries.remove(id).is_some()
    }

    /// The command that re-pins `id` ([`forget_command`]).
    pub fn forget_command(&self, id: &str) -> String {
        forget_command(id, self.path.as_deref())
    }

    /// Writes the pins to their file, atomically (nothing without one).
    /// Pins another process wrote meanwhile are kept: the file is read
    /// again, ours are added where it has none, and the write is refused
    /// and tried again if the file changed between the read and the rename.
    /// `forgotten` are removed from the file as well.
    pub fn save(&mut self, forgotten: &[String]) -> Result<(), PinsError> {
        let Some(path) = self.path.clone().filter(|_| !self.read_only) else {
            return Ok(());
        };
        let mut tries = 0;
        loop {
            let read = match file::read_checked(&path)? {
                Some(read) => Some(read),
                None => {
                    file::create_empty(&path)?;
                    file::read_checked(&path)?
                }
            };
            let Some((text, snap)) = read else {
                return Err(FileError::Io {
                    path: path.clone(),
                    what: "creating",
                    error: std::io::ErrorKind::NotFound.into(),
                    hint: "; it was removed as soon as it was made: run again".into(),
                }
                .into());
            };
            let mut merged = parse(&path, &text)?;
            for id in forgotten {
                merged.remove(id);
            }
            for (id, pin) in &self.entries {
                merged.entry(id.clone()).or_insert_with(|| pin.clone());
            }
            match write_atomic(&snap, &render(&merged)) {
                Err(WriteError::Changed { .. }) if tries < 3 => tries += 1,
                Err(e) => return Err(e.into()),
                Ok(_) => {
                    self.entries = merged;
                    return Ok(());
                }
            }
        }
    }
}

const HEADER: &str = "# rlx-discover pins: node id -> the agent's own public key, learned on \
first sight (docs/security.md).\n# A machine reinstalled on purpose: `rlx-discover pins forget <id>`.\n";

/// The file's text for `entries`, one line a pin, by node id.
fn render(entries: &BTreeMap<String, Pin>) -> String {
    let mut out = String::from(HEADER);
    for (id, p) in entries {
        out.push_str(&format!("{id} {ALGORITHM} {}", p.key.to_base64()));
        if !p.comment.is_empty() {
            out.push_str(&format!(" # {}", p.comment));
        }
        out.push('\n');
    }
    out
}

/// Parses a pins file's text; `path` names it in errors.
fn parse(path: &Path, text: &str) -> Result<BTreeMap<String, Pin>, PinsError> {
    let mut entries = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let bad = |why: String| PinsError::Malformed {
            path: path.to_path_buf(),
            line: i + 1,
            why,
        };
        let (body, comment) = match raw.split_once('#') {
            Some((b, c)) => (b.trim(), c.trim()),
            None => (raw.trim(), ""),
        };
        if body.is_empty() {
            continue;
        }
        let words: Vec<&str> = body.split_whitespace().collect();
        let [id, alg, key] = words[..] else {
            return Err(bad(format!(
                "{} words before the comment, not 3",
                words.len()
            )));
        };
        if !rlx_proto::caps::is_valid_id(id) {
            return Err(bad("the node id is not 16 lowercase hex characters".into()));
        }
        if alg != ALGORITHM {
            return Err(bad(format!("unknown key type {alg:?}")));
        }
        let key = NodePublicKey::parse(key)
            .ok_or_else(|| bad("the key is not the base64 of a 32-byte Ed25519 key".into()))?;
        if entries
            .insert(
                id.to_string(),
                Pin {
                    key,
                    comment: comment.to_string(),
                },
            )
            .is_some()
        {
            return Err(bad(format!("node id {id} is pinned twice")));
        }
    }
    Ok(entries)
}

/// Today's date in UTC, `YYYY-MM-DD`, for a pin's comment.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod file_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::identity::NodeKey;

    fn k(b: u8) -> NodePublicKey {
        NodeKey::from_seed([b; 32]).public()
    }

    #[test]
    fn the_pins_file_of_a_cluster_file_sits_beside_it() {
        assert_eq!(
            default_path(Path::new("/etc/rlx/cluster.toml")),
            PathBuf::from("/etc/rlx/cluster.pins")
        );
        assert_eq!(
            forget_command("0123456789abcdef", Some(Path::new("c.pins"))),
            "rlx-discover pins forget 0123456789abcdef --pins-file c.pins"
        );
    }

    #[test]
    fn pins_round_trip_through_their_file_with_their_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.pins");
        let mut p = Pins::load(&path).unwrap();
        assert_eq!(p.iter().count(), 0, "no file yet: no pins");
        p.pin("0123456789abcdef", k(1), "gpu-a");
        p.pin("fedcba9876543210", k(2), "bad\nhost # name");
        p.save(&[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let line = format!("0123456789abcdef ed25519 {} # gpu-a first seen ", k(1));
        assert!(text.contains(&line), "{text}");
        assert_eq!(
            text.lines().count(),
            4,
            "a header of 2 lines, one line a pin: {text}"
        );
        let back = Pins::load(&path).unwrap();
        assert_eq!(back.get("0123456789abcdef").unwrap().key, k(1));
        assert_eq!(back.get("fedcba9876543210").unwrap().key, k(2));
        assert!(
            back.get("fedcba9876543210")
                .unwrap()
                .comment
                .starts_with("bad?host?name first seen"),
            "a host name cannot break the line or start a comment: {text}"
        );
    }

    /// Guards against a host name that reorders its pin line on screen: a
    /// right-to-left override in the name made an editor show the key and
    /// the comment in another order than the file is parsed.
    #[test]
    fn a_host_names_bidi_and_format_characters_are_escaped_in_its_pin_comment() {
        let mut pins = Pins::default();
        pins.pin("0123456789abcdef", k(1), "gpu\u{202e}a\u{200b}b");
        let comment = &pins.get("0123456789abcdef").unwrap().comment;
        assert!(
            comment.starts_with("gpu\\u{202e}a\\u{200b}b first seen"),
            "{comment}"
        );
        assert!(comment
            .chars()
            .all(|c| !matches!(c, '\u{202e}' | '\u{200b}')));
    }

    #[test]
    fn a_save_keeps_what_another_process_pinned_or_forgot_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.pins");
        let mut ours = Pins::load(&path).unwrap();
        let mut theirs = Pins::load(&path).unwrap();
        theirs.pin("fedcba9876543210", k(2), "b");
        theirs.save(&[]).unwrap();
        ours.pin("0123456789abcdef", k(1), "a");
        ours.save(&[]).unwrap();
        let back = Pins::load(&path).unwrap();
        assert_eq!(back.iter().count(), 2, "both pins are in the file");
        let mut forgetting = Pins::load(&path).unwrap();
        forgetting.forget("0123456789abcdef");
        forgetting.save(&["0123456789abcdef".to_string()]).unwrap();
        assert!(Pins::load(&path).unwrap().get("0123456789abcdef").is_none());
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "the atomic write leaves no temporary file");
    }

    #[test]
    fn read_only_pins_judge_by_the_file_and_never_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.pins");
        let mut p = Pins::load(&path).unwrap().read_only();
        p.pin("0123456789abcdef", k(1), "a");
        p.save(&[]).unwrap();
        assert!(!path.exists(), "a dry run writes nothing");
        p.reload().unwrap();
        assert_eq!(
            p.judge("0123456789abcdef", &k(2)),
            Judgement::Clash { pinned: k(1) },
            "but remembers its pins for the run"
        );
    }

    #[test]
    fn a_malformed_pins_line_is_an_error_naming_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.pins");
        std::fs::write(
            &path,
            format!("# ok\n0123456789abcdef ed25519 {}\nnonsense\n", k(1)),
        )
        .unwrap();
        let e = Pins::load(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("{}:3", path.display())), "{e}");
        std::fs::write(&path, format!("0123456789abcdef ssh-rsa {}\n", k(1))).unwrap();
        let e = Pins::load(&path).unwrap_err().to_string();
        assert!(e.contains("unknown key type"), "{e}");
    }

    #[test]
    fn a_known_id_with_another_key_is_a_clash_and_the_same_key_is_pinned() {
        let mut p = Pins::in_memory();
        assert_eq!(p.judge("0123456789abcdef", &k(1)), Judgement::New);
        p.pin("0123456789abcdef", k(1), "a");
        assert_eq!(p.judge("0123456789abcdef", &k(1)), Judgement::Pinned);
        assert_eq!(
            p.judge("0123456789abcdef", &k(2)),
            Judgement::Clash { pinned: k(1) }
        );
        p.save(&[]).unwrap();
    }

    #[test]
    fn dates_are_the_gregorian_calendars() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_424), "2025-12-02");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }
}
