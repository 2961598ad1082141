//! **rlx-bench: rlx-discover and rlx-agent measured beside the tools people
//! would use instead, on the same private network, in the same run.**
//!
//! ```text
//! bench/run.sh --quick          # ~5 min: proves the suite works (CI)
//! bench/run.sh                  # full: bench/results/full.json, BENCHMARKS.md, bench/plots/
//! rlx-bench report --results bench/results/full.json   # re-render without re-running
//! ```
//!
//! # Layout
//!
//! - [`ctx`]: the binaries measured and the state the scenarios share.
//! - [`results`]: samples, medians with unfinished runs, summaries.
//! - [`machine`]: the machine description (nproc, lscpu, uname, free).
//! - [`proc`]: timed runs with CPU and peak RSS, `/proc` readings, sockets
//!   inside a namespace.
//! - [`peers`]: simulated agents, avahi-daemon with a private D-Bus, the
//!   embedded python scripts.
//! - [`sc_mdns`], [`sc_scan`], [`sc_ssh`], [`sc_footprint`] (and
//!   [`sc_floods`]: its RSS under a stranger's floods), [`sc_trust`]:
//!   the first five scenarios; [`sc_soak`]: `watch` under churn for half
//!   an hour (in a full run; a quick one runs it only with `--only soak`);
//!   [`sc_links`]: link measurement against iperf3; [`sc_faults`]: `watch`
//!   under injected faults (crashes, pauses, cut links, loss, a CPU hog, the
//!   coordinator stopped) beside python-zeroconf and serf, every `left`
//!   judged against the injection log (30 min in a full run, 2 in quick);
//!   [`sc_dns`]: a DNS-SD-only cluster, `expand` against `dig`;
//!   [`sc_scale`]: `watch` at rest with 10, 50, 200 and 1,000 members,
//!   crashes timed at 200 and 1,000, and a join storm of 1,000 (a quick run,
//!   200 members only, with `--only scale`: CI runs it on the release build);
//!   [`sc_linkmap`]: the all-pairs link map of 16 boxes on two bridges
//!   against iperf3 and ping on each pair alone (a quick run, 8 boxes, only
//!   with `--only linkmap`).
//! - [`report`]: BENCHMARKS.md with every goal judged; [`plot`]: PNGs.
//!
//! Every scenario builds its network with [`rlx_lab`] and runs
//! every program inside it: no mDNS packet or scan leaves the namespaces the
//! suite creates, and the labs are torn down (processes killed by PID,
//! namespaces deleted) when each scenario ends, even on error.

#[cfg(target_os = "linux")]
mod compare;
#[cfg(target_os = "linux")]
mod ctx;
#[cfg(target_os = "linux")]
mod heap;
#[cfg(target_os = "linux")]
mod machine;
#[cfg(target_os = "linux")]
mod onerun;
#[cfg(target_os = "linux")]
mod others;
#[cfg(target_os = "linux")]
mod peers;
#[cfg(target_os = "linux")]
mod plot;
#[cfg(target_os = "linux")]
mod proc;
#[cfg(target_os = "linux")]
mod report;
#[cfg(target_os = "linux")]
mod results;
#[cfg(target_os = "linux")]
mod sc_dns;
#[cfg(target_os = "linux")]
mod sc_faults;
#[cfg(target_os = "linux")]
mod sc_floods;
#[cfg(target_os = "linux")]
mod sc_footprint;
#[cfg(target_os = "linux")]
mod sc_linkmap;
#[cfg(target_os = "linux")]
mod sc_links;
#[cfg(target_os = "linux")]
mod sc_mdns;
#[cfg(target_os = "linux")]
mod sc_scale;
#[cfg(target_os = "linux")]
mod sc_scan;
#[cfg(target_os = "linux")]
mod sc_soak;
#[cfg(target_os = "linux")]
mod sc_ssh;
#[cfg(target_os = "linux")]
mod sc_trust;
#[cfg(target_os = "linux")]
mod stamp;

#[cfg(target_os = "linux")]
use anyhow::{bail, Context, Result};
#[cfg(target_os = "linux")]
use clap::{Parser, Subcommand};
#[cfg(target_os = "linux")]
use ctx::{Bins, Ctx, Features};
#[cfg(target_os = "linux")]
use results::Results;
#[cfg(target_os = "linux")]
use std::collections::BTreeMap;
#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::time::Instant;

#[cfg(target_os = "linux")]
/// Benchmark rlx-discover and rlx-agent against avahi, python-zeroconf,
/// nmap and serial ssh inside private network namespaces.
#[derive(Debug, Parser)]
#[command(name = "rlx-bench", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[cfg(target_os = "linux")]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the scenarios and write results, BENCHMARKS.md and plots.
    Run(RunArgs),
    /// Re-render BENCHMARKS.md and the plots from a results file.
    Report(ReportArgs),
    /// The rows of two results files whose figures moved more than their
    /// spread, as a Markdown table: what a new BENCHMARKS.md explains.
    Compare(CompareArgs),
}

#[cfg(target_os = "linux")]
#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// The earlier run's results JSON (e.g. from `git show
    /// HEAD~:bench/results/full.json`).
    old: PathBuf,
    /// The new run's.
    new: PathBuf,
}

#[cfg(target_os = "linux")]
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Small sizes, one repetition, short windows: about 5 minutes (the
    /// faults scenario's 2 minutes of faults included), proves the suite
    /// works (not figures to quote).
    #[arg(long)]
    quick: bool,
    /// Only these scenarios (comma-separated: mdns, scan, ssh, footprint,
    /// trust, soak, links, faults, dns, scale). With --quick, `soak` and
    /// `scale` run only when named here: the one is long, the other's
    /// figure means something only on the release build.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Soak scenario: minutes of churn (default 30).
    #[arg(long, default_value_t = 30.0, value_name = "MIN")]
    soak_minutes: f64,
    /// Soak scenario: also run a second watch under heaptrack, record its
    /// heap in use over the run, and keep heaptrack's data in DIR (needs
    /// heaptrack installed).
    #[arg(long, value_name = "DIR")]
    soak_heap: Option<PathBuf>,
    /// Faults scenario: minutes of injected faults (default: 30; 2 with
    /// --quick, with 10 agents instead of 50).
    #[arg(long, value_name = "MIN")]
    faults_minutes: Option<f64>,
    /// Repetitions per case (default: 1 quick, 5 full; a full run refuses
    /// fewer than 5).
    #[arg(long)]
    reps: Option<u32>,
    /// mDNS scenario: numbers of agents (default: 1,10 quick; 1,10,50,100,200 full).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    mdns_n: Vec<usize>,
    /// mDNS scenario: loss percentages (default: 0,20 quick; 0,5,20 full).
    #[arg(long, value_delimiter = ',', value_name = "PCT,...")]
    mdns_loss: Vec<u8>,
    /// mDNS scenario sizes on an IPv6-only LAN (default: 50 in full mode
    /// when --mdns-n is not given).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    mdns_ipv6_n: Vec<usize>,
    /// Directory holding the rlx-discover and rlx-agent binaries.
    #[arg(long, default_value = "target/release")]
    bin_dir: PathBuf,
    /// Where to write the results JSON.
    #[arg(long)]
    results: PathBuf,
    /// Re-run only the scenarios given (--only) and replace their samples
    /// in the existing results file, keeping the others.
    #[arg(long, requires = "only")]
    merge: bool,
    /// Start a full run even while other processes use more than 10% of a
    /// core (every row taken beside them is marked in the report).
    #[arg(long)]
    allow_busy: bool,
    /// Where to write the Markdown report.
    #[arg(long)]
    markdown: PathBuf,
    /// Directory for the PNG plots.
    #[arg(long)]
    plots: PathBuf,
}

#[cfg(target_os = "linux")]
#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The results JSON written by `run`.
    #[arg(long)]
    results: PathBuf,
    /// Where to write the Markdown report.
    #[arg(long, default_value = "BENCHMARKS.md")]
    markdown: PathBuf,
    /// Directory for the PNG plots.
    #[arg(long, default_value = "bench/plots")]
    plots: PathBuf,
}

#[cfg(target_os = "linux")]
fn detect_features(bins: &Bins, work: &Path) -> Features {
    let help = std::process::Command::new(&bins.discover)
        .args(["browse", "--help"])
        .output();
    let (browse, browse_ms_flag) = match help {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            (text.contains("--json"), text.contains("--browse-ms"))
        }
        _ => (false, false),
    };
    Features {
        browse,
        browse_ms_flag,
        agent_run: sc_footprint::agent_run_mode_works(bins, work),
    }
}

#[cfg(target_os = "linux")]
fn run(a: RunArgs) -> Result<()> {
    let started = Instant::now();
    let started_utc = utc_now();
    // Absolute: the paths are also used from other directories (ssh's
    // remote command, scripts).
    let bin_dir = std::fs::canonicalize(&a.bin_dir).with_context(|| {
        format!(
            "binary directory {} (build first: bench/run.sh does)",
            a.bin_dir.display()
        )
    })?;
    let bins = Bins {
        discover: bin_dir.join("rlx-discover"),
        agent: bin_dir.join("rlx-agent"),
    };
    for b in [&bins.discover, &bins.agent] {
        if !b.exists() {
            bail!(
                "{} does not exist: build it first (bench/run.sh does: cargo build --release)",
                b.display()
            );
        }
    }
    match rlx_lab::lab_support() {
        Ok(rlx_lab::LabMode::Root) => {}
        Ok(rlx_lab::LabMode::Unshare) => bail!(
            "the benchmark needs root (network namespaces, nftables, sshd, avahi-daemon): \
             run bench/run.sh as root"
        ),
        Err(e) => bail!("cannot build a private network here: {e}"),
    }
    let work = tempfile::Builder::new().prefix("rlx-bench-").tempdir()?;
    let scripts = peers::Scripts::write(work.path())?;
    let machine = machine::Machine::describe(&bins.discover, &bins.agent);
    let source = machine
        .versions
        .get("source measured")
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    if let Some(why) = onerun::refuse_full(a.quick, &source) {
        bail!("{why}");
    }
    if let Some(why) = onerun::refuse_reps(a.quick, a.reps) {
        bail!("{why}");
    }
    if a.quick && onerun::dirty(&source) {
        eprintln!(
            "rlx-bench: quick mode on a tree with uncommitted changes ({source}): \
             these figures are not from a commit"
        );
    }
    // A merge that would be refused is refused before the run, not after.
    if a.merge {
        let old = read_results(&a.results)?;
        if let Some(why) = onerun::refuse_merge(&source_of(&old), &source) {
            bail!("{why}");
        }
    }
    let features = detect_features(&bins, work.path());
    eprintln!(
        "rlx-bench {} mode; features: browse={} agent run mode={}; load {}",
        if a.quick { "quick" } else { "full" },
        features.browse,
        features.agent_run,
        machine.load_at_start
    );
    // No build beside a timed run: other processes' CPU is sampled for the
    // whole run and stamped on every sample; a full run does not start on a
    // machine already busy with other work.
    let others = others::Others::start();
    let busy = others.measure(std::time::Duration::from_secs(3));
    eprintln!(
        "rlx-bench: other processes used {} of one core over 3 s",
        busy.map_or("?".into(), |p| format!("{p:.1}%"))
    );
    if let Some(p) = busy.filter(|p| *p > others::BUSY_PCT) {
        if !a.quick && !a.allow_busy {
            bail!(
                "other processes are using {p:.0}% of one core (a build? another test?): \
                 a full run's figures would be inflated by them; stop them and run again \
                 (or pass --allow-busy, and every row taken beside them is marked)"
            );
        }
        eprintln!("rlx-bench: the machine is busy: rows taken beside other work are marked");
    }
    let mut ctx = Ctx {
        quick: a.quick,
        reps: a.reps.unwrap_or(if a.quick { 1 } else { 5 }),
        bins,
        features,
        scripts,
        work,
        samples: Vec::new(),
        commands: BTreeMap::new(),
        notes: Vec::new(),
        not_measured: Vec::new(),
        mdns_n: a.mdns_n.clone(),
        mdns_loss: a.mdns_loss.clone(),
        mdns_ipv6_n: a.mdns_ipv6_n.clone(),
        soak_minutes: a.soak_minutes,
        soak_heap: a.soak_heap.clone(),
        faults_minutes: a.faults_minutes.unwrap_or(if a.quick { 2.0 } else { 30.0 }),
        others,
        mark: Instant::now(),
        window: Instant::now(),
    };
    let all = [
        "mdns",
        "scan",
        "ssh",
        "footprint",
        "trust",
        "soak",
        "links",
        "faults",
        "dns",
        "scale",
        "linkmap",
    ];
    for o in &a.only {
        if !all.contains(&o.as_str()) {
            bail!("unknown scenario `{o}`: use one of {}", all.join(", "));
        }
    }
    let wanted = |s: &str| {
        (a.only.is_empty() && (!matches!(s, "soak" | "scale" | "linkmap") || !a.quick))
            || a.only.iter().any(|o| o == s)
    };
    type Scenario = fn(&mut Ctx) -> Result<()>;
    let scenarios: [(&str, Scenario); 12] = [
        ("scan", sc_scan::run),
        ("ssh", sc_ssh::run),
        ("footprint", sc_footprint::run),
        // The footprint under a stranger's floods.
        ("footprint", sc_floods::run),
        ("trust", sc_trust::run),
        ("mdns", sc_mdns::run),
        ("soak", sc_soak::run),
        ("links", sc_links::run),
        ("faults", sc_faults::run),
        ("dns", sc_dns::run),
        ("scale", sc_scale::run),
        ("linkmap", sc_linkmap::run),
    ];
    for (name, f) in scenarios {
        if !wanted(name) {
            continue;
        }
        let t = Instant::now();
        ctx.restart_window();
        eprintln!("== {name} (load {})", machine::loadavg());
        // One scenario failing (a peer missing, a lab that cannot be built)
        // is reported and the others still run.
        if let Err(e) = f(&mut ctx) {
            eprintln!("== {name} FAILED: {e:#}");
            ctx.not_measured
                .push((format!("scenario {name}"), format!("failed: {e:#}")));
        }
        eprintln!("== {name} done in {:.0} s", t.elapsed().as_secs_f64());
    }
    let mut machine = machine;
    machine.load_at_end = machine::loadavg();
    let mut results = Results {
        mode: if a.quick { "quick" } else { "full" }.into(),
        started: started_utc,
        duration_s: started.elapsed().as_secs_f64(),
        reps: Some(ctx.reps),
        machine,
        commands: ctx.commands,
        notes: ctx.notes,
        not_measured: ctx.not_measured,
        samples: ctx.samples,
    };
    // Judged on this run's own samples, before a merge adds older ones.
    let mut broken = results::never_measured(&results.samples);
    broken.extend(
        results
            .not_measured
            .iter()
            .filter(|(what, _)| what.starts_with("scenario "))
            .map(|(what, why)| format!("{what} {why}")),
    );
    if a.merge {
        results = merge(&a.results, &a.only, results)?;
    }
    if let Some(dir) = a.results.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&a.results, serde_json::to_string_pretty(&results)?)
        .with_context(|| format!("writing {}", a.results.display()))?;
    write_csv(&results, &a.results.with_extension("csv"))?;
    render(&results, &a.results, &a.markdown, &a.plots)?;
    eprintln!(
        "rlx-bench: {} samples in {:.0} s; results {}, report {}, plots {}",
        results.samples.len(),
        results.duration_s,
        a.results.display(),
        a.markdown.display(),
        a.plots.display()
    );
    // Written first, so nothing measured is lost; then a broken suite
    // fails the run (and CI's quick mode) instead of passing quietly.
    if !broken.is_empty() {
        for b in &broken {
            eprintln!("rlx-bench: broken: {b}");
        }
        bail!(
            "{} figure(s) of ours were never measured or a scenario failed (above); \
             the bench or the tool it runs is broken",
            broken.len()
        );
    }
    Ok(())
}

#[cfg(target_os = "linux")]
/// The results in `path` with the samples, notes and gaps of `scenarios`
/// replaced by those of `new` (a re-run of just those scenarios).
fn merge(path: &Path, scenarios: &[String], new: Results) -> Result<Results> {
    let mut old = read_results(path)?;
    anyhow::ensure!(
        old.mode == new.mode,
        "--merge: {} holds a {} run; this is a {} run",
        path.display(),
        old.mode,
        new.mode
    );
    let ours = |text: &str| {
        scenarios.iter().any(|s| {
            text.starts_with(&format!("{s}:"))
                || text.starts_with(&format!("scenario {s}"))
                || (s == "footprint" && text.starts_with("probe:"))
        })
    };
    let (new_src, old_src) = (source_of(&new), source_of(&old));
    if let Some(why) = onerun::refuse_merge(&old_src, &new_src) {
        bail!("{why}");
    }
    old.samples.retain(|x| !scenarios.contains(&x.scenario));
    old.samples.extend(new.samples);
    old.notes.retain(|n| !ours(n));
    old.notes.extend(new.notes);
    old.not_measured.retain(|(w, _)| !ours(w));
    old.not_measured.extend(new.not_measured);
    old.commands.extend(new.commands);
    old.notes.push(format!(
        "merge: {} re-run at {} ({:.0} s, load at start {}) on {new_src}{} and merged into the \
         run of {}.",
        scenarios.join(", "),
        new.started,
        new.duration_s,
        new.machine.load_at_start,
        if new_src == old_src {
            String::new()
        } else {
            format!(" (the rest of this file: {old_src})")
        },
        old.started
    ));
    Ok(old)
}

#[cfg(target_os = "linux")]
/// The results stored in `path` (for `--merge`).
fn read_results(path: &Path) -> Result<Results> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--merge: reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("--merge: parsing {}", path.display()))
}

#[cfg(target_os = "linux")]
/// The source a run measured (`RLX_BENCH_SOURCE` as recorded).
fn source_of(r: &Results) -> String {
    r.machine
        .versions
        .get("source measured")
        .cloned()
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(target_os = "linux")]
fn write_csv(r: &Results, path: &Path) -> Result<()> {
    let mut s =
        String::from("scenario,case,tool,metric,rep,value,found,expected,computed,load1,note\n");
    let q = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
    for x in &r.samples {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.2},{}\n",
            q(&x.scenario),
            q(&x.case),
            q(&x.tool),
            q(&x.metric),
            x.rep,
            x.value.map(|v| format!("{v:.3}")).unwrap_or_default(),
            x.found.map(|v| v.to_string()).unwrap_or_default(),
            x.expected.map(|v| v.to_string()).unwrap_or_default(),
            x.computed,
            x.load1,
            q(&x.note)
        ));
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

#[cfg(target_os = "linux")]
fn render(r: &Results, results_path: &Path, markdown: &Path, plots: &Path) -> Result<()> {
    let pngs = match plot::plot_all(r, plots) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rlx-bench: no plots: {e:#}");
            Vec::new()
        }
    };
    let md = report::markdown(r, results_path, markdown, &pngs);
    if let Some(dir) = markdown.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    std::fs::write(markdown, md).with_context(|| format!("writing {}", markdown.display()))
}

#[cfg(target_os = "linux")]
/// The current UTC time, RFC 3339, from `date` (no time crate needed).
fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
/// On SIGINT, SIGTERM or SIGHUP, kill what runs in this run's namespaces
/// (`rlx-<our pid>-*`, the labs' naming) and delete them, then exit 130:
/// labs are otherwise torn down by `Drop`, which a signal would skip.
///
/// The signals are blocked in every thread (set before any other thread
/// starts) and taken by one thread with `sigwait`, so the clean-up runs as
/// ordinary code. Children do not inherit the mask: `std::process::Command`
/// resets it before `exec`.
fn clean_up_on_signal() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        let Ok(sig) = set.wait() else { return };
        eprintln!("rlx-bench: {sig:?}: removing this run's namespaces");
        let prefix = format!("rlx-{}-", std::process::id());
        let list = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for ns in list
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|ns| ns.starts_with(&prefix))
        {
            let pids = std::process::Command::new("ip")
                .args(["netns", "pids", ns])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            for pid in pids
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", ns])
                .status();
        }
        std::process::exit(130);
    });
}

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if matches!(cli.cmd, Cmd::Run(_)) {
        clean_up_on_signal();
    }
    let r = match cli.cmd {
        Cmd::Run(a) => run(a),
        Cmd::Report(a) => (|| {
            let text = std::fs::read_to_string(&a.results)
                .with_context(|| format!("reading {}", a.results.display()))?;
            let r: Results = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", a.results.display()))?;
            render(&r, &a.results, &a.markdown, &a.plots)
        })(),
        Cmd::Compare(a) => (|| {
            let read = |p: &PathBuf| -> Result<Results> {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading {}", p.display()))?;
                serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
            };
            let text = compare::markdown(&read(&a.old)?, &read(&a.new)?);
            // Piped into `head`, a closed pipe is the reader's choice.
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing the table"),
            }
        })(),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rlx-bench: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

/// Elsewhere the suite has nothing to run on: its labs are Linux network
/// namespaces (`setns`, `CLONE_NEWNET`), so this binary only says so.
#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("rlx-bench runs on Linux only: its private networks are Linux network namespaces");
    std::process::ExitCode::FAILURE
}
