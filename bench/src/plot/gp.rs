//! What every plot shares: running gnuplot, the data cells it reads, the
//! summary row a plot looks up, and the line that says whose machine the
//! times are from.

use crate::results::Results;
use anyhow::{ensure, Context, Result};
use std::process::Command;

pub(super) use crate::results::find;

/// Runs gnuplot on `script`; its error output is the error.
pub(super) fn gnuplot(script: &str) -> Result<()> {
    let mut child = Command::new("gnuplot")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run gnuplot (apt-get install gnuplot-nox)")?;
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "gnuplot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A number in a data file; `?` (set as missing) when there is none.
pub(super) fn cell(x: Option<f64>) -> String {
    x.map_or("?".into(), |v| format!("{v:.3}"))
}

/// `text` inside a gnuplot single-quoted string (which has no escapes).
pub(super) fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', ""))
}

/// The start of every script: a PNG of `w` x `h` at `png`, labels taken
/// as written (no enhanced-text markup: `zc_watch.py` keeps its underscore).
pub(super) fn header(png: &std::path::Path, w: u32, h: u32) -> String {
    format!(
        "set terminal pngcairo noenhanced size {w},{h} font 'sans,10'\nset output {}\n",
        quoted(&png.display().to_string())
    )
}

/// `main` over a second line saying whose machine the figures are from
/// ([`machine`]), as a gnuplot string (a plot's or a multiplot's title).
pub(super) fn heading(main: &str, r: &Results) -> String {
    let esc = |s: &str| s.replace('\\', "").replace('"', "'");
    format!("\"{}\\n{}\"", esc(main), esc(&machine(r)))
}

/// A `set title` of [`heading`].
pub(super) fn title(main: &str, r: &Results) -> String {
    format!("set title {}\n", heading(main, r))
}

/// Where the times come from, for a plot's title: the run's mode and this
/// machine's cores and CPU, e.g. `full run on this machine: 2 cores, AMD EPYC`.
pub(super) fn machine(r: &Results) -> String {
    let model = r
        .machine
        .lscpu
        .iter()
        .find_map(|l| l.strip_prefix("Model name:"))
        .map(|m| format!(", {}", m.trim()))
        .unwrap_or_default();
    format!(
        "{} run on this machine: {} cores{model}",
        r.mode, r.machine.nproc
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_label_loses_its_single_quotes_and_nothing_else() {
        assert_eq!(quoted("ours' rate, 50 ms"), "'ours rate, 50 ms'");
    }

    #[test]
    fn a_missing_number_is_the_missing_marker() {
        assert_eq!(cell(None), "?");
        assert_eq!(cell(Some(1.23456)), "1.235");
    }
}
