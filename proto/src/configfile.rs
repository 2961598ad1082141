//! **Config files, read and reported alike** — the size cap and the
//! bounded read of the two programs' config files (the coordinator's
//! `cluster.toml`, the agent's `agent.toml`), and the one way both print a
//! place in such a file: `path:line:column: message`, the line (cut to
//! [`SNIPPET_WIDTH`] characters around the error) and a caret under it,
//! with the nearest known key for a misspelt one.
//!
//! ```text
//! cluster.toml:2:8: `port`: 70000 is not a port: write a whole number 1-65535
//!      |
//!    2 | port = 70000
//!      |        ^^^^^
//! ```
//!
//! Both programs parse with the `toml` crate (each at its own version), so
//! this module takes what every version gives, the text, the byte span and
//! the message, and depends on no parser.

use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The largest config file either program reads: 4 MiB. A cluster file is
/// about 300 bytes per `[[node]]` with its `# found by` comment, so 4 MiB
/// holds more than ten thousand nodes, far beyond any real cluster, and an
/// `agent.toml` is a dozen keys. Parsing takes about five times the text in
/// memory (a 200 MB file took 985 MB), so the cap also keeps a wrong path
/// (`/dev/zero`, a checkpoint shard, a log) from costing more than some
/// 20 MB before it is refused.
pub const MAX_CONFIG_FILE_BYTES: u64 = 4 << 20;

/// Widest source line an error shows, in characters. A longer line (a
/// 200 KB single-line array) is cut around the error column, with `…` on
/// the side or sides cut, so the caret still points at the mistake.
pub const SNIPPET_WIDTH: usize = 120;

/// Why a config file could not be read. Each message names the file and
/// says the cause once: no `source()` chain repeats it.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or reading failed (missing file, no permission...).
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The path is a directory.
    Directory {
        /// The path.
        path: PathBuf,
    },
    /// The file is over the cap.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, when the system knows it (a regular file); a pipe or
        /// device only shows that it gave more than `limit` bytes.
        bytes: Option<u64>,
        /// The cap.
        limit: u64,
    },
    /// The file is not UTF-8, so it is no TOML file.
    NotText {
        /// The file.
        path: PathBuf,
        /// Offset of the first byte that is not UTF-8.
        at: usize,
    },
}

impl ReadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::Directory { path }
            | ReadError::TooLarge { path, .. }
            | ReadError::NotText { path, .. } => path,
        }
    }
}

impl ReadError {
    /// What is wrong, without the path: `cannot be read: ...`, `is a
    /// directory...`, for a caller that names the file its own way.
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io { error, .. } => {
                format!("cannot be read: {error}; check the path and its permissions")
            }
            ReadError::Directory { .. } => "is a directory: name the file itself".into(),
            ReadError::TooLarge { bytes, limit, .. } => {
                let size = match bytes {
                    Some(b) => format!("{b} bytes"),
                    None => format!("more than {limit} bytes"),
                };
                format!("is {size}, over the {limit}-byte cap on a config file: is this the right file?")
            }
            ReadError::NotText { at, .. } => format!(
                "is not UTF-8 text (byte {at}), so it cannot be a TOML file; save it as UTF-8"
            ),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path().display(), self.reason())
    }
}

impl std::error::Error for ReadError {}

/// Reads the file at `path` as text, at most `limit` bytes: through a
/// reader that stops after `limit + 1` bytes, never a size check followed
/// by a whole read (the file can grow in between, and a pipe or
/// `/dev/zero` has no size).
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, ReadError> {
    let io = |error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(ReadError::Directory {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            bytes: (meta.is_file() && meta.len() > limit).then_some(meta.len()),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::NotText {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })
}

/// A place in a config file's text: its line and column, and the line as
/// shown (cut when long) with where the caret goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The line as shown: cut to [`SNIPPET_WIDTH`] characters around the
    /// column, tabs as spaces, no line end.
    pub shown: String,
    /// Characters of `shown` before the caret.
    pub caret_at: usize,
    /// How many carets (at least one).
    pub caret_len: usize,
}

impl Place {
    /// The place of `span` (byte offsets) in `text`. An empty span, or one
    /// that runs past its line, gets a caret to the end of the line's token.
    pub fn of(text: &str, span: Range<usize>) -> Place {
        let start = floor_char(text, span.start.min(text.len()));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let full = text[line_start..line_end].trim_end_matches('\r');
        let line = text[..start].matches('\n').count() + 1;
        let column = text[line_start..start].chars().count();
        let end = floor_char(text, span.end.clamp(start, line_end));
        let mut len = text[start..end].chars().count();
        if len == 0 {
            // The token at the start: up to white space, `=`, `,` or a bracket.
            len = text[start..line_end]
                .chars()
                .take_while(|c| !c.is_whitespace() && !"=,[]{}".contains(*c))
                .count()
                .max(1);
        }
        let chars: Vec<char> = full
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let (shown, caret_at, caret_len) = cut(&chars, column, len);
        Place {
            line,
            column: column + 1,
            shown,
            caret_at,
            caret_len,
        }
    }

    /// The two lines under an error's first line: the source line and the
    /// caret, with the gutter `line |`.
    pub fn snippet(&self) -> String {
        let gutter = self.line.to_string().len().max(4);
        format!(
            "  {l:>gutter$} | {s}\n  {b:>gutter$} | {pad}{carets}",
            l = self.line,
            s = self.shown,
            b = "",
            pad = " ".repeat(self.caret_at),
            carets = "^".repeat(self.caret_len),
        )
    }
}

/// `chars` cut to [`SNIPPET_WIDTH`] around `col` (0-based), with `…` where
/// it was cut; and where the caret of `len` characters lands in the result.
fn cut(chars: &[char], col: usize, len: usize) -> (String, usize, usize) {
    let col = col.min(chars.len());
    if chars.len() <= SNIPPET_WIDTH {
        let len = len.min(chars.len().saturating_sub(col)).max(1);
        return (chars.iter().collect(), col, len);
    }
    // Room for the two ellipses; the error column a third of the way in.
    let width = SNIPPET_WIDTH - 2;
    let start = col
        .saturating_sub(width / 3)
        .min(chars.len().saturating_sub(width));
    let end = (start + width).min(chars.len());
    let mut shown = String::new();
    if start > 0 {
        shown.push('…');
    }
    shown.extend(&chars[start..end]);
    if end < chars.len() {
        shown.push('…');
    }
    let caret_at = col - start + usize::from(start > 0);
    let len = len.min(end.saturating_sub(col)).max(1);
    (shown, caret_at, len)
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// One error or warning at a place in a config file, as both programs
/// print it: `path:line:column: message`, then the snippet.
pub fn render(path: &Path, place: Option<&Place>, message: &str) -> String {
    match place {
        Some(p) => format!(
            "{}:{}:{}: {message}\n{}",
            path.display(),
            p.line,
            p.column,
            p.snippet()
        ),
        None => format!("{}: {message}", path.display()),
    }
}

/// The known name closest to `key`, when it is close enough to be a typo
/// of it: a Jaro-Winkler similarity of at least 0.8 (it weighs a shared
/// start, where typos are rarest), or the same letters in another case.
pub fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(&key, k), *k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// serde's message for a key a `deny_unknown_fields` table does not take
/// (``unknown field `key_flie`, expected one of `a`, `b` ``), said as what
/// to do: the nearest known key when one is close, else the keys known.
/// `None` for any other message.
pub fn unknown_key(message: &str) -> Option<String> {
    let rest = message.trim().strip_prefix("unknown field `")?;
    let (key, expected) = rest.split_once('`')?;
    let known: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|k| !k.is_empty())
        .collect();
    Some(match nearest(key, &known) {
        Some(k) => format!("unknown key `{key}`: did you mean `{k}`?"),
        None if known.is_empty() => format!("unknown key `{key}`: remove it"),
        None => format!(
            "unknown key `{key}`: remove it or fix its spelling (known keys: `{}`)",
            known.join("`, `")
        ),
    })
}

/// A parser's message for the value at `span` said as what to do, the
/// same in both programs: an unknown key with the nearest known one
/// ([`unknown_key`]); a number out of its range with the range (a port's
/// as 1-65535); a number or boolean written as text with how to write it;
/// else the key and the parser's words, with `hint(key)` when it has one.
pub fn explain(
    text: &str,
    span: Option<Range<usize>>,
    msg: &str,
    hint: impl Fn(&str) -> Option<&'static str>,
) -> String {
    let msg = msg.trim();
    if let Some(said) = unknown_key(msg) {
        return said;
    }
    let Some(key) = span.and_then(|s| key_at(text, s.start)) else {
        return msg.to_string();
    };
    let whole = ["u16", "u32", "u64", "usize"]
        .into_iter()
        .find(|t| msg.contains(&format!("expected {t}")));
    let number = msg
        .strip_prefix("invalid value: integer `")
        .and_then(|r| r.split('`').next());
    if let (Some(t), Some(n)) = (whole, number) {
        return format!("`{key}`: {n} is out of range: {}", whole_range(key, t));
    }
    let hint = if whole.is_some() {
        " (write a whole number without quotes)".to_string()
    } else if msg.contains("expected a boolean") {
        " (write true or false)".to_string()
    } else {
        hint(key).map_or_else(String::new, |h| format!(" ({h})"))
    };
    format!("`{key}`: {msg}{hint}")
}

/// The key of the value that starts at `offset`: what precedes `=` on its
/// line.
fn key_at(text: &str, offset: usize) -> Option<&str> {
    let start = floor_char(text, offset.min(text.len()));
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = text[line_start..start].split_once('=')?;
    let key = key.trim();
    (!key.is_empty()).then_some(key)
}

/// What a whole-number key of type `t` takes, said as a range; a port's
/// as a port's (0 is refused by the checks that follow).
fn whole_range(key: &str, t: &str) -> String {
    if key == "port" || key.ends_with("_port") {
        return "a port is a whole number 1-65535".into();
    }
    let max = match t {
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        _ => u64::MAX,
    };
    format!("write a whole number 0-{max}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_has_the_line_the_column_and_a_caret_under_the_span() {
        let text = "[discover]\nport = 70000\n";
        let p = Place::of(text, 18..23);
        assert_eq!((p.line, p.column), (2, 8));
        assert_eq!(
            p.snippet(),
            "     2 | port = 70000\n       |        ^^^^^",
            "the caret sits under the value"
        );
    }

    #[test]
    fn a_long_line_is_cut_around_the_error_with_ellipses_and_the_caret_still_on_it() {
        let text = format!("ssh_hosts = [{}\"bad\"]\n", "\"h\", ".repeat(40_000));
        let at = text.find("\"bad\"").unwrap();
        let p = Place::of(&text, at..at + 5);
        assert!(
            p.shown.chars().count() <= SNIPPET_WIDTH,
            "a 200 KB line is shown in at most {SNIPPET_WIDTH} characters, not echoed whole"
        );
        assert!(p.shown.starts_with('…'), "{}", p.shown);
        let under: String = p.shown.chars().skip(p.caret_at).take(5).collect();
        assert_eq!(
            under, "\"bad\"",
            "the caret points at the error: {}",
            p.shown
        );
    }

    #[test]
    fn the_start_of_a_long_line_is_cut_on_the_right_only() {
        let text = format!("x = \"{}\"", "a".repeat(500));
        let p = Place::of(&text, 0..1);
        assert!(!p.shown.starts_with('…') && p.shown.ends_with('…'));
        assert_eq!(p.caret_at, 0);
    }

    #[test]
    fn an_unknown_key_names_the_nearest_known_one_or_else_lists_them() {
        assert_eq!(
            unknown_key("unknown field `key_flie`, expected one of `name`, `key_file`").as_deref(),
            Some("unknown key `key_flie`: did you mean `key_file`?")
        );
        let far = unknown_key("unknown field `zzz`, expected one of `name`, `port`").unwrap();
        assert!(far.contains("known keys: `name`, `port`"), "{far}");
        assert_eq!(unknown_key("invalid type: string"), None);
    }

    #[test]
    fn a_number_out_of_range_says_the_range_and_one_in_quotes_how_to_write_it() {
        let none = |_: &str| None;
        let text = "worker_port = 70000\n";
        assert_eq!(
            explain(
                text,
                Some(14..19),
                "invalid value: integer `70000`, expected u16",
                none
            ),
            "`worker_port`: 70000 is out of range: a port is a whole number 1-65535"
        );
        let text = "lease_secs = \"9\"\n";
        let said = explain(
            text,
            Some(13..16),
            "invalid type: string \"9\", expected u64",
            none,
        );
        assert!(said.contains("without quotes"), "{said}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_it_its_size_and_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, vec![b'#'; 2049]).unwrap();
        let e = read_bounded(&path, 2048).unwrap_err().to_string();
        for needle in ["cluster.toml", "2049 bytes", "2048-byte"] {
            assert!(e.contains(needle), "{needle:?} in {e}");
        }
        assert_eq!(read_bounded(&path, 4096).unwrap().len(), 2049);
    }

    #[test]
    fn a_device_without_a_size_is_read_no_further_than_the_cap() {
        let e = read_bounded(Path::new("/dev/zero"), 1024).unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::TooLarge {
                    bytes: None,
                    limit: 1024,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("more than 1024 bytes"), "{e}");
    }

    #[test]
    fn a_directory_or_a_missing_file_says_its_cause_once() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_bounded(dir.path(), 1024).unwrap_err().to_string();
        assert_eq!(e.matches("directory").count(), 1, "{e}");
        let e = read_bounded(&dir.path().join("nope"), 1024).unwrap_err();
        assert!(
            std::error::Error::source(&e).is_none(),
            "no chain to print twice"
        );
        assert_eq!(e.to_string().matches("No such file").count(), 1, "{e}");
    }
}
