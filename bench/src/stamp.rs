//! **Lines of a process's output, stamped with the wall clock as they
//! appear**: a thread reads the file the lab writes its stdout to every
//! few milliseconds. For serf, whose log has second-resolution times, the
//! stamp is the time of its news; for `watch`, whose `at_ms` counts from
//! its own start (some tens of ms after the spawn in a debug build), the
//! stamps place that start on the bench's clock ([`offset`]).

use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the file is read: the stamps' resolution.
const POLL: Duration = Duration::from_millis(5);

/// Unix time, ms.
pub(crate) fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// A file followed by a thread; stops when dropped.
pub(crate) struct Stamped {
    lines: Arc<Mutex<Vec<(f64, String)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stamped {
    /// Follows `path` (which exists: the lab creates it at the spawn).
    pub(crate) fn follow(path: PathBuf) -> Stamped {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (lines.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let Ok(mut file) = std::fs::File::open(&path) else {
                return;
            };
            let mut partial = Vec::new();
            let mut buf = [0u8; 65536];
            loop {
                let stopping = s.load(Ordering::Relaxed);
                loop {
                    match file.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => partial.extend_from_slice(&buf[..n]),
                    }
                }
                let now = wall_ms();
                while let Some(nl) = partial.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=nl).collect();
                    let text = String::from_utf8_lossy(&line).trim_end().to_string();
                    l.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((now, text));
                }
                if stopping {
                    return;
                }
                std::thread::sleep(POLL);
            }
        });
        Stamped {
            lines,
            stop,
            thread: Some(thread),
        }
    }

    /// Every complete line so far, with when it was first seen.
    pub(crate) fn lines(&self) -> Vec<(f64, String)> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads what is left and stops following.
    pub(crate) fn finish(&mut self) -> Vec<(f64, String)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.lines()
    }
}

impl Drop for Stamped {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A program's JSON lines (`watch --json`), each event with its `at_ms`
/// placed on the wall clock ([`offset`]; `spawned`: when it was spawned),
/// and where that clock starts. Lines that are not JSON objects with an
/// `at_ms` are left out.
pub(crate) fn placed_events(lines: &[(f64, String)], spawned: f64) -> (Vec<(f64, Value)>, f64) {
    let events: Vec<(f64, Value)> = lines
        .iter()
        .filter_map(|(seen, l)| Some((*seen, serde_json::from_str::<Value>(l).ok()?)))
        .collect();
    let start = offset(
        events
            .iter()
            .filter_map(|(seen, e)| Some((*seen, e["at_ms"].as_f64()?))),
        spawned,
    );
    let placed = events
        .into_iter()
        .filter_map(|(_, e)| Some((start + e["at_ms"].as_f64()?, e)))
        .collect();
    (placed, start)
}

/// Where a program's own clock (`at_ms` from its start) starts on the wall
/// clock: each line was seen at or after `start + at_ms`, so the smallest
/// `seen - at_ms` is the latest start that fits them all, within one poll
/// of the truth; and the program cannot have started before it was
/// spawned (`spawned`).
pub(crate) fn offset(seen_at: impl Iterator<Item = (f64, f64)>, spawned: f64) -> f64 {
    let tightest = seen_at
        .map(|(seen, at)| seen - at)
        .fold(f64::INFINITY, f64::min);
    if tightest.is_finite() {
        tightest.max(spawned)
    } else {
        spawned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_the_tightest_line_and_never_before_the_spawn() {
        let seen = [(1_000_150.0, 100.0), (1_000_530.0, 470.0)];
        assert_eq!(offset(seen.into_iter(), 1_000_000.0), 1_000_050.0);
        assert_eq!(offset(seen.into_iter(), 1_000_070.0), 1_000_070.0);
        assert_eq!(offset(std::iter::empty(), 5.0), 5.0);
    }

    #[test]
    fn json_events_are_placed_on_the_wall_clock_and_other_lines_left_out() {
        let lines = [
            (1_000_150.0, r#"{"event":"joined","at_ms":100}"#.to_string()),
            (1_000_900.0, "not json".to_string()),
            (1_000_530.0, r#"{"event":"left","at_ms":470}"#.to_string()),
        ];
        let (placed, start) = placed_events(&lines, 1_000_000.0);
        assert_eq!(start, 1_000_050.0);
        let at: Vec<f64> = placed.iter().map(|p| p.0).collect();
        assert_eq!(at, [1_000_150.0, 1_000_520.0]);
        assert_eq!(placed[1].1["event"], "left");
    }

    #[test]
    fn a_followed_file_gives_back_its_lines_stamped_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, "one\ntw").unwrap();
        let mut s = Stamped::follow(path.clone());
        std::thread::sleep(Duration::from_millis(30));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"o\nthree\n").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let lines = s.finish();
        let text: Vec<&str> = lines.iter().map(|l| l.1.as_str()).collect();
        assert_eq!(text, ["one", "two", "three"]);
        assert!(lines[0].0 <= lines[1].0, "stamps in order: {lines:?}");
    }
}
