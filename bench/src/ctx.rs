//! **What the scenarios share**: the binaries measured, what they can do,
//! and the state of one run ([`Ctx`]) that every scenario records into.
//! Its own module so that `main`, which calls the scenarios, is not also
//! what they use.

use crate::machine;
use crate::peers;
use crate::results::Sample;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The binaries measured.
#[derive(Debug, Clone)]
pub struct Bins {
    /// `rlx-discover`.
    pub discover: PathBuf,
    /// `rlx-agent`.
    pub agent: PathBuf,
}

/// What the binaries under test can do yet (run mode and browse are being
/// finished in parallel with this suite).
#[derive(Debug, Clone, Copy, Default)]
pub struct Features {
    /// `rlx-discover browse --json` exists.
    pub browse: bool,
    /// `rlx-discover browse` accepts `--browse-ms`.
    // Detected with `browse` from the same `--help`; no scenario reads it
    // yet (it was equally unread when this struct lived in `main.rs`).
    #[allow(dead_code)]
    pub browse_ms_flag: bool,
    /// `rlx-agent` run mode announces and answers the handshake.
    pub agent_run: bool,
}

/// State shared by the scenarios of one run.
pub struct Ctx {
    /// Quick mode.
    pub quick: bool,
    /// Repetitions per case.
    pub reps: u32,
    /// The binaries.
    pub bins: Bins,
    /// What they can do.
    pub features: Features,
    /// Scratch space (caps files, configs, keys), removed at the end.
    pub work: tempfile::TempDir,
    /// The embedded scripts.
    pub scripts: peers::Scripts,
    /// Every sample so far.
    pub samples: Vec<Sample>,
    /// Exact command per tool.
    pub commands: BTreeMap<String, String>,
    /// Notes for the report.
    pub notes: Vec<String>,
    /// Figures not measured, with the reason.
    pub not_measured: Vec<(String, String)>,
    /// mDNS scenario sizes (empty: the mode's default).
    pub mdns_n: Vec<usize>,
    /// mDNS scenario loss levels (empty: the mode's default).
    pub mdns_loss: Vec<u8>,
    /// mDNS scenario sizes on an IPv6-only LAN (empty: 50 in full mode
    /// when no `mdns_n` is given, none otherwise).
    pub mdns_ipv6_n: Vec<usize>,
    /// Soak scenario: minutes of churn.
    pub soak_minutes: f64,
    /// Soak scenario: record a second watch's heap with heaptrack and keep
    /// its data here.
    pub soak_heap: Option<std::path::PathBuf>,
    /// Faults scenario: minutes of injected faults.
    pub faults_minutes: f64,
    /// CPU used by processes not the bench's, sampled while it runs.
    pub others: crate::others::Others,
    /// When the last sample was recorded (or the scenario started): the
    /// next sample's window for [`Ctx::others`] starts there.
    pub mark: Instant,
    /// The window of the last sample (samples recorded within a second of
    /// each other are metrics of one measurement and share it).
    pub window: Instant,
}

impl Ctx {
    /// Records one sample, stamping the current load average.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        scenario: &str,
        case: &str,
        tool: &str,
        metric: &str,
        rep: u32,
        value: Option<f64>,
        found: Option<u64>,
        expected: Option<u64>,
        note: impl Into<String>,
    ) {
        let now = Instant::now();
        if now.duration_since(self.mark) > Duration::from_secs(1) {
            self.window = self.mark;
        }
        self.mark = now;
        let s = Sample {
            found,
            expected,
            load1: machine::load1(),
            others_cpu_pct: self.others.pct_since(self.window),
            note: note.into(),
            ..Sample::measured((scenario, case, tool, metric), rep, value)
        };
        eprintln!(
            "  {scenario} | {case} | {tool} | {metric} #{rep}: {}{}{}",
            s.value
                .map_or("unfinished".to_string(), |v| format!("{v:.1}")),
            match (found, expected) {
                (Some(f), Some(e)) => format!(" ({f}/{e})"),
                (Some(f), None) => format!(" (found {f})"),
                _ => String::new(),
            },
            if s.note.is_empty() {
                String::new()
            } else {
                format!(" [{}]", s.note)
            }
        );
        self.samples.push(s);
    }

    /// Starts the next sample's window now (a scenario starting).
    pub fn restart_window(&mut self) {
        self.mark = Instant::now();
        self.window = self.mark;
    }

    /// Records the exact command a tool runs (once per tool).
    pub fn command(&mut self, tool: &str, cmd: impl Into<String>) {
        self.commands
            .entry(tool.into())
            .or_insert_with(|| cmd.into());
    }

    /// Notes something not measured and why.
    pub fn not_measured(&mut self, what: &str, why: impl Into<String>) {
        let why = why.into();
        eprintln!("  not measured: {what}: {why}");
        self.not_measured.push((what.into(), why));
    }
}
