//! **Durations on the command line** — one convention for every flag that
//! takes a time: a number with a unit (`3s`, `250ms`, `2m`, `1h`, as
//! humantime reads them), or a bare number of milliseconds, the unit of the
//! flags' old spellings (`--browse-ms 3000` is still `--browse 3000`), so
//! scripts written for the old flags keep working. Every such flag keeps its
//! old name as an alias.

use std::time::Duration;

/// A duration in milliseconds: `3s`, `250ms`, or a bare number of ms.
pub fn millis(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    humantime::parse_duration(t)
        .map(|d: Duration| d.as_millis() as u64)
        .map_err(|e| {
            format!(
                "`{s}` is not a duration ({e}): give a number with a unit, e.g. 3s, 250ms or 2m"
            )
        })
}

/// A flag's duration that has a default: shown in `--help` the way it is
/// typed (`[default: 2m]`, not `[default: 120000]`), parsed by [`millis`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub u64);

impl Millis {
    /// [`millis`], for clap's `value_parser`.
    pub fn parse(s: &str) -> Result<Millis, String> {
        millis(s).map(Millis)
    }

    /// As a [`Duration`].
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// The largest unit that divides it (`2m`, `300ms`, `1m 30s`), as humantime
/// writes it, so that the help's default reads back through [`millis`].
impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.duration()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_duration_is_shown_with_its_unit_and_reads_back_the_same() {
        for (ms, shown) in [
            (120_000, "2m"),
            (300, "300ms"),
            (90_000, "1m 30s"),
            (0, "0s"),
        ] {
            assert_eq!(Millis(ms).to_string(), shown);
            assert_eq!(Millis::parse(shown), Ok(Millis(ms)));
        }
    }

    #[test]
    fn a_duration_takes_a_unit_and_a_bare_number_is_milliseconds_as_before() {
        assert_eq!(millis("3s"), Ok(3000));
        assert_eq!(millis("250ms"), Ok(250));
        assert_eq!(millis("1m 30s"), Ok(90_000));
        assert_eq!(millis("3000"), Ok(3000));
        assert!(millis("three seconds").unwrap_err().contains("e.g. 3s"));
    }
}
