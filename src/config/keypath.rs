//! **Where a key is in the file** — key paths into `cluster.toml`, so a
//! check that fails can point at the line to fix.

/// A step in a key path, for finding a span in the document.
#[derive(Debug, Clone)]
pub(crate) enum KeyRef {
    /// A key of a table.
    Key(String),
    /// An entry of an array of tables (`[[node]]` number `i`, from 0).
    Idx(usize),
}

impl KeyRef {
    /// `[section] key` as a path.
    pub(crate) fn at(section: &str, key: &str) -> Vec<KeyRef> {
        vec![KeyRef::Key(section.into()), KeyRef::Key(key.into())]
    }

    /// `key` of the `i`-th `[[node]]` as a path.
    pub(crate) fn node(i: usize, key: &str) -> Vec<KeyRef> {
        vec![
            KeyRef::Key("node".into()),
            KeyRef::Idx(i),
            KeyRef::Key(key.into()),
        ]
    }
}

/// A failed check: the key to point at, and what is wrong there (the
/// message the user sees, after `path:line: `).
#[derive(Debug, Clone)]
pub(crate) struct Invalid(pub(crate) Vec<KeyRef>, pub(crate) String);

/// Byte offset of the key at `path` in `text`, for line numbers. Falls back
/// to the nearest enclosing table when the key itself is absent.
pub(crate) fn span_of(text: &str, path: &[KeyRef]) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut table: &toml_edit::Table = doc.as_table();
    let mut best = None;
    let mut steps = path.iter().peekable();
    while let Some(step) = steps.next() {
        let KeyRef::Key(k) = step else { return best };
        let Some((key, value)) = table.get_key_value(k) else {
            return best;
        };
        best = key.span().map(|s| s.start).or(best);
        match (value, steps.peek()) {
            (toml_edit::Item::ArrayOfTables(a), Some(KeyRef::Idx(i))) => {
                steps.next();
                let Some(t) = a.get(*i) else { return best };
                best = t.span().map(|s| s.start).or(best);
                table = t;
            }
            (toml_edit::Item::Table(t), _) => table = t,
            _ => return best,
        }
    }
    best
}
