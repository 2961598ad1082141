//! **BENCHMARKS.md** — the machine, every goal marked met / not met / not yet
//! measured with the measured ratio, one table per scenario (median, min-max,
//! completeness, ratio to ours), the plots, the exact commands, and what was
//! not measured and why.
//!
//! `cells` formats the numbers; `goals` judges the goals; this module lays
//! out the page.

mod bystander;
mod cells;
mod faults_goals;
mod flood_goals;
mod goals;
mod identity_goals;
mod load_goals;
mod scale_goals;
mod watch_goals;

use crate::results::{Results, Summary};
use cells::{find, fmt_ms, found_cell, load_cell, median_cell, n_cell, range_cell, ratio};
use goals::goals;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn rel(from_md: &Path, target: &Path) -> String {
    let base = from_md.parent().unwrap_or(Path::new(""));
    target
        .strip_prefix(base)
        .unwrap_or(target)
        .display()
        .to_string()
}

/// One cell of the mDNS pivot tables: median (min - max), complete runs;
/// or what an unfinished case found.
fn pivot_cell(x: Option<&Summary>) -> String {
    let Some(x) = x else { return "-".into() };
    match x.median {
        Some(m) => {
            let range = match (x.min, x.max) {
                (Some(a), Some(b)) if x.runs > 1 => format!(" ({} - {})", fmt_ms(a), fmt_ms(b)),
                _ => String::new(),
            };
            format!("{}{range}, {}/{} runs", fmt_ms(m), x.complete_runs, x.runs)
        }
        None => format!(
            "**unfinished**: {}/{} runs complete, found {}",
            x.complete_runs,
            x.runs,
            found_cell(x)
        ),
    }
}

/// The mDNS scenario as two pivot tables (time until all N resolved, then
/// process wall time): one row per case, one column per tool, ratios to
/// ours. Per-run detail is in the results JSON/CSV.
fn mdns_tables(o: &mut String, s: &[Summary]) {
    const TOOLS: [&str; 5] = [
        "rlx-discover browse",
        "rlx-discover expand (empty [discover])",
        "python-zeroconf",
        "avahi-browse -rp",
        "avahi-browse -rpt (exits by itself)",
    ];
    let cases = mdns_cases(s);
    for (metric, title) in [
        (
            "complete_ms",
            "Time until all N were resolved (median (min - max), runs that found all N):",
        ),
        (
            "wall_ms",
            "Process wall time, start to exit (ours listens until its early-stop point or its \
             window; avahi-browse -rp is stopped as soon as all N are resolved):",
        ),
    ] {
        let _ = writeln!(o, "{title}\n");
        let _ = writeln!(
            o,
            "| N | loss | {} | python / ours | avahi -rp / ours | max load; others' CPU |",
            TOOLS.join(" | ")
        );
        let _ = writeln!(o, "|---|---|{}---|---|---|", "---|".repeat(TOOLS.len()));
        for (n, loss, v6) in &cases {
            let case = crate::sc_mdns::case_name_on(*n, *loss, *v6);
            let get = |t: &str| find(s, "mdns", &case, t, metric);
            let cells: Vec<String> = TOOLS.iter().map(|t| pivot_cell(get(t))).collect();
            let ours = get(TOOLS[0]).and_then(|x| x.median);
            let load = load_cell(TOOLS.iter().filter_map(|t| get(t)));
            let _ = writeln!(
                o,
                "| {} | {loss}% | {} | {} | {} | {load} |",
                n_cell(*n, *v6),
                cells.join(" | "),
                ratio(ours, get(TOOLS[2]).and_then(|x| x.median)),
                ratio(ours, get(TOOLS[3]).and_then(|x| x.median)),
            );
        }
        let _ = writeln!(o);
    }
}

/// The mDNS cases measured, IPv4 first, by size and loss.
fn mdns_cases(s: &[Summary]) -> Vec<(usize, u8, bool)> {
    let mut cases: Vec<(usize, u8, bool)> = s
        .iter()
        .filter(|x| x.scenario == "mdns")
        .filter_map(|x| crate::sc_mdns::parse_case(&x.case))
        .collect();
    cases.sort_by_key(|&(n, loss, v6)| (v6, n, loss));
    cases.dedup();
    cases
}

/// What one run put on the segment, per tool: median
/// packets and kB of the queries from the browser's host, the unicast
/// replies to it, and the multicast responses every device receives.
fn mdns_load_table(o: &mut String, s: &[Summary]) {
    const TOOLS: [&str; 4] = [
        "rlx-discover browse",
        "rlx-discover expand (empty [discover])",
        "python-zeroconf",
        "avahi-browse -rp",
    ];
    let cases = mdns_cases(s);
    let any = cases.iter().any(|(n, l, v6)| {
        let case = crate::sc_mdns::case_name_on(*n, *l, *v6);
        find(s, "mdns", &case, TOOLS[0], "seg_unicast_pkts").is_some()
    });
    if !any {
        return;
    }
    let _ = writeln!(
        o,
        "Load on the segment per run (median packets, then KB of IP packets, runs and min-max \
         packets in brackets; counted on the lab's switch as each frame enters it): queries sent from the browser's host / unicast replies \
         to it / multicast responses, which every device on the segment receives:\n"
    );
    let _ = writeln!(o, "| N | loss | {} |", TOOLS.join(" | "));
    let _ = writeln!(o, "|---|---|{}", "---|".repeat(TOOLS.len()));
    for (n, loss, v6) in &cases {
        let case = crate::sc_mdns::case_name_on(*n, *loss, *v6);
        let cells: Vec<String> = TOOLS
            .iter()
            .map(|t| {
                let part = |m: &str| bystander::cell(s, &case, t, m);
                match (
                    part("seg_queries"),
                    part("seg_unicast"),
                    part("seg_multicast"),
                ) {
                    (Some(q), Some(u), Some(m)) => format!("{q} / {u} / {m}"),
                    _ => "-".into(),
                }
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {loss}% | {} |",
            n_cell(*n, *v6),
            cells.join(" | ")
        );
    }
    let _ = writeln!(o);
}

/// What the profile of the 100- and 200-agent lossless rows showed, written
/// from a packet capture on the browser's link (an AF_PACKET socket in its
/// namespace) and the browse's own JSON.
fn mdns_profile(o: &mut String) {
    let _ = writeln!(
        o,
        "*The three paragraphs below are investigations made on earlier runs, each with its \
         own figures and commit; the tables above are this run's.*\n\n\
         **Why the last instances arrived late at 100-200 agents (profile).** A packet capture \
         on the browser's link at 200 agents (before the fix, commit 645174c) showed: the first \
         legacy query left at 0 ms; the 200 agents, all woken by that one multicast query, \
         share the lab's two cores, so their ARP requests for the browser (needed for a unicast \
         reply) and then their replies left at about 3 per ms over 0-80 ms. The browse's own \
         loop was starved by the same agents: its standard queries, due at 0 ms, and legacy \
         round 1, due at 50 ms, left at 60 ms; round 2, due at 100 ms, at 170 ms; round 3, \
         due at 200 ms, at 270 ms. At 170 ms 291 unicast replies arrived within 10 ms, more \
         than the legacy socket's default receive buffer (`net.core.rmem_default`, 208 KB) \
         holds: about one early answer in ten was dropped on a lossless link (the browse \
         measured answer rates of 92%, 74% and 64% in three runs), so it took the drops for \
         loss, missed its clean stop at 250 ms and sent more rounds: 862-939 unicast replies \
         per `browse`, 1,439-1,714 per `expand`, which listened 0.85-2 s. The per-node \
         found_ms values coincide (all 100 at 26 ms in one run, all 200 at 166 ms in \
         another): they are when the browse got a CPU to read the replies, not when the \
         replies were sent. Not the cause: rate limits (legacy replies are not held to the \
         once-a-second multicast limit, and the agents' 32-reply burst per querier is far \
         above the 4-5 queries of a browse), the order of the legacy rounds, or known \
         answers (the three early rounds carry none by design). At 100 agents on an idle \
         machine the browse resolved all in 27-33 ms against python-zeroconf's 71-153 ms; \
         the earlier 96 ms against 88 ms was measured at load 1.7, with other work on the two \
         cores. Fixed: the legacy sockets ask for 2 MiB of receive buffer (beyond \
         `rmem_max` where allowed), no later legacy round is sent once the answers are clean, \
         a dual-stack browse stops querying the family that adds nothing, and standard \
         queries carry every known answer (TC follow-up packets, RFC 6762 §7.2).\n"
    );
    let _ = writeln!(
        o,
        "**Load before and after** (same lab, lossless, unicast replies per run): 100 agents \
         338 before, 300 after (three per agent: the three early rounds, and no fourth once \
         clean); 200 agents 862-939 per `browse` and 1,439-1,714 per `expand` before, about \
         737 for both after (when the starved browse reads the last early answers only after \
         200 ms, round 3 still goes out). At 200 agents and 20% loss the browse draws about \
         1,100 unicast replies and 200 multicast responses (about 3,500 and 1,000 when first \
         measured). What remains: each legacy round after the early ones draws a reply from \
         every resolved agent that its one-packet known-answer list (about 60) cannot hold; \
         multi-packet known answers would not help there while responders answer a truncated \
         query at once (mdns-sd 0.21.7 does), since each legacy packet is \
         answered by unicast without a rate limit.\n\n\
         **IPv6-only at 20% loss**: before, mDNS heard all 50 agents in every run but the \
         admission handshake refused 3-6 per run (\"cannot connect: no answer within 1500 \
         ms\"), so no run was complete: IPv4 had ARP help for the handshake, IPv6 none, so a \
         lost Neighbor Solicitation or Advertisement waited for the kernel's one-second retry \
         and the 1.5 s connect timeout ran out. Now the handshakes' nudger helps IPv6 too \
         (rlx-net's neighbour6 module: the kernel's IPv6 neighbour table read over netlink, \
         our own Neighbor Solicitations for the targets still INCOMPLETE, our Neighbor \
         Advertisements while a handshake runs past 300 ms, with ARP's bounds): 3 of 3 runs \
         complete for `browse` and for `expand`, none refused in the 6 runs (this re-run \
         started at load 17.6 on the 2 cores). `tests/heavy/ipv6_loss.rs` (20 agents, cold \
         caches, 20% loss): 5 of 5 runs complete; before, 1, 1, 2, 3 and 1 refused. In the \
         same re-run one IPv4 handshake of 300 at 50 agents and 20% loss failed all four \
         attempts (`browse`, load 12.5): the IPv4 nudging is unchanged, and rlx-net's \
         neighbour module measured about one such failure in a thousand handshakes (since \
         then five attempts, 200 ms apart, where there were four).\n"
    );
}

/// The plots of scenario `sc`: each PNG whose name is the scenario's or
/// starts with it and a dash (`mdns-loss5.png`, `soak-memory.png`), in the
/// order drawn. A plot not drawn is not mentioned.
fn plots_of(o: &mut String, sc: &str, md_path: &Path, pngs: &[PathBuf]) {
    for p in pngs {
        let Some(stem) = p.file_stem().map(|f| f.to_string_lossy()) else {
            continue;
        };
        let ours = stem
            .strip_prefix(sc)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'));
        if ours {
            let _ = writeln!(o, "![{stem}]({})\n", rel(md_path, p));
        }
    }
}

/// The whole report.
pub fn markdown(r: &Results, results_path: &Path, md_path: &Path, pngs: &[PathBuf]) -> String {
    let s = r.summaries();
    let mut o = String::new();
    let _ = writeln!(o, "# Benchmarks\n");
    let _ = writeln!(
        o,
        "rlx-discover and rlx-agent measured beside the tools people would use instead, on the \
         same private network (network namespaces built by the `rlx-lab` crate, `lab/`), in the same run. \
         Generated by `bench/run.sh{}` on {} ({:.0} s), {}; raw samples in `{}` \
         (and `.csv`). Re-render with `rlx-bench report --results {}`.\n",
        if r.mode == "quick" { " --quick" } else { "" },
        r.started,
        r.duration_s,
        match (
            r.machine.versions.get("source measured"),
            r.notes.iter().any(|n| n.starts_with("merge:")),
        ) {
            // Results merged before merges were refused: not one run.
            (_, true) => "with scenarios re-run and merged in (below): not one run".to_string(),
            (Some(src), false) => format!("one run of {src}"),
            (None, false) => "one run of an unrecorded source".to_string(),
        },
        rel(md_path, results_path),
        results_path.display()
    );
    if r.mode == "quick" {
        let _ = writeln!(o, "> **Quick mode**: small sizes, one repetition. These figures prove the suite works; they are not the ones to quote.\n");
    }
    if let Some(src) = r
        .machine
        .versions
        .get("source measured")
        .filter(|src| crate::onerun::dirty(src))
    {
        let _ = writeln!(
            o,
            "> **Not from a commit**: the tree measured had uncommitted changes ({src}).\n"
        );
    }
    for n in r.notes.iter().filter(|n| n.starts_with("merge:")) {
        let _ = writeln!(o, "> Re-run: {}\n", n.trim_start_matches("merge: "));
    }
    let nproc: f64 = r.machine.nproc.parse().unwrap_or(1.0);
    let busy = s.iter().map(|x| x.load1_max).fold(0.0, f64::max);
    let _ = writeln!(o, "## Machine\n");
    let _ = writeln!(o, "- `nproc`: {}", r.machine.nproc);
    for l in &r.machine.lscpu {
        let _ = writeln!(o, "- {l}");
    }
    let _ = writeln!(o, "- `uname -srvm`: {}", r.machine.uname);
    let _ = writeln!(o, "- `free -m`: {}", r.machine.memory);
    let _ = writeln!(
        o,
        "- load average at start: {}; at end: {}",
        r.machine.load_at_start, r.machine.load_at_end
    );
    for (k, v) in &r.machine.versions {
        let _ = writeln!(o, "- {k}: {v}");
    }
    if let Some(reps) = r.reps {
        let _ = writeln!(
            o,
            "- repetitions per case: {reps} (each row states its own n and spread)"
        );
    }
    let beside: Vec<&Summary> = s.iter().filter(|x| cells::busy(x)).collect();
    let unmeasured = s
        .iter()
        .filter(|x| !x.computed && x.others_cpu_max.is_none())
        .count();
    if !beside.is_empty() {
        let _ = writeln!(
            o,
            "\n> **Other work beside timed runs**: in {} of {} rows, processes other than the \
             bench's (a build, another test) used more than {:.0}% of one core while a sample was \
             taken (read from `/proc`; the lab's own agents and peers are not counted). Those \
             rows are marked **busy** in the tables; their times are not to be quoted. First: \
             {}.\n",
            beside.len(),
            s.len(),
            crate::others::BUSY_PCT,
            beside
                .iter()
                .take(5)
                .map(|x| format!("{} / {} / {} / {}", x.scenario, x.case, x.tool, x.metric))
                .collect::<Vec<_>>()
                .join("; ")
        );
    } else if unmeasured == 0 && !s.is_empty() {
        let _ = writeln!(
            o,
            "\n- other work beside timed runs: none above {:.0}% of one core in any row (the \
             CPU of processes other than the bench's, read from `/proc` while each sample was \
             taken)",
            crate::others::BUSY_PCT
        );
    }
    if busy > nproc * 0.75 {
        let _ = writeln!(
            o,
            "\n> **Busy machine**: the 1-minute load average reached {busy:.1} on {nproc:.0} cores during \
             this run (the lab's own agents and peers, up to 200 processes at once, share them \
             with the tools measured, as does any other work). Absolute times are inflated; ratios \
             measured pair by pair, alternating tools, are the figures to read. Each table gives \
             the highest load seen per row.\n"
        );
    }

    let _ = writeln!(o, "\n## Goals\n");
    let _ = writeln!(
        o,
        "| area | goal | status | measured (median) | runs, spread; load | beside | note |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for g in goals(&s, r)
        .into_iter()
        .chain(identity_goals::identity_goals(&s))
        .chain(watch_goals::watch_goals(&s))
        .chain(faults_goals::faults_goals(r))
        .chain(flood_goals::flood_goals(&s))
        .chain(load_goals::load_goals(&s))
        .chain(scale_goals::scale_goals(&s))
    {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            g.area,
            g.what,
            g.status.text(),
            g.measured.replace('|', "/"),
            g.basis.as_ref().map_or("-".into(), |b| format!(
                "{}; {}",
                cells::spread_cell(b),
                load_cell([b])
            )),
            g.versus.replace('|', "/"),
            g.comment.replace('|', "/")
        );
    }
    let _ = writeln!(
        o,
        "\nRatios are peer / ours (above 1: ours is faster or smaller) unless the column says otherwise. \
         A run that did not find everything before its deadline has no time: medians count it as \
         slower than every finished run, and \"unfinished\" means at least half the runs did not finish.\n"
    );

    let titles = [
        (
            "mdns",
            "1. mDNS discovery: time until all N agents are resolved",
        ),
        ("scan", "2. Subnet scan"),
        ("ssh", "3. SSH probe of many hosts"),
        ("footprint", "4. Agent footprint"),
        ("trust", "5. Trust"),
        ("soak", "6. `watch` under churn (soak)"),
        (
            "links",
            "7. Link measurement: accuracy against iperf3, cost",
        ),
        (
            "faults",
            "8. Faults: false deaths and detection under injected faults",
        ),
        ("dns", "9. A DNS-SD-only cluster"),
        (
            "scale",
            "10. A fleet: `watch` at rest with many members, crashes, a join storm",
        ),
        (
            "linkmap",
            "11. The all-pairs link map against iperf3 and ping on each pair alone",
        ),
    ];
    for (sc, title) in titles {
        let rows: Vec<&Summary> = s.iter().filter(|x| x.scenario == sc).collect();
        let _ = writeln!(o, "## {title}\n");
        for n in r.notes.iter().filter(|n| {
            n.starts_with(&format!("{sc}:")) || (sc == "footprint" && n.starts_with("probe:"))
        }) {
            let _ = writeln!(o, "{n}\n");
        }
        if rows.is_empty() {
            let _ = writeln!(o, "Not measured in this run.\n");
        } else if sc == "mdns" {
            mdns_tables(&mut o, &s);
            mdns_load_table(&mut o, &s);
            bystander::table(&mut o, &s, &mdns_cases(&s));
            mdns_profile(&mut o);
        } else if sc == "faults" {
            faults_goals::section(&mut o, r);
        } else {
            if sc == "scale" {
                scale_goals::scaling_table(&mut o, &s);
            }
            let _ = writeln!(o, "| case | tool | metric | median | min - max | found | runs complete | vs ours | max load; others' CPU |");
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
            for x in &rows {
                let ours_tool = match sc {
                    "mdns" => Some("rlx-discover browse"),
                    "scan" => Some("rlx-discover scan"),
                    "ssh" => Some("rlx-discover expand (ssh_hosts)"),
                    "links" => Some("rlx-discover browse --links"),
                    "dns" => Some("rlx-discover expand (dns_sd, mDNS on)"),
                    _ => None,
                };
                let vs = ours_tool
                    .filter(|t| *t != x.tool && !x.tool.starts_with("rlx-"))
                    .and_then(|t| find(&s, sc, &x.case, t, &x.metric))
                    .map(|ours| ratio(ours.median, x.median))
                    .unwrap_or_default();
                let _ = writeln!(
                    o,
                    "| {} | {}{} | {} | {} | {} | {} | {}/{} | {} | {} |",
                    x.case,
                    x.tool,
                    if x.computed { " *(computed)*" } else { "" },
                    x.metric,
                    median_cell(x),
                    range_cell(x),
                    found_cell(x),
                    x.complete_runs,
                    x.runs,
                    vs,
                    if x.computed {
                        "-".to_string()
                    } else {
                        load_cell([*x])
                    }
                );
            }
            let _ = writeln!(o);
        }
        plots_of(&mut o, sc, md_path, pngs);
    }

    let _ = writeln!(o, "## Not measured\n");
    if r.not_measured.is_empty() {
        let _ = writeln!(o, "Everything was measured.\n");
    }
    for (what, why) in &r.not_measured {
        let _ = writeln!(o, "- {what}: {why}");
    }
    let _ = writeln!(o, "\n## Exact commands\n");
    let _ = writeln!(
        o,
        "Each runs inside a lab namespace (`ip netns exec <ns> ...`); capitals are placeholders.\n"
    );
    let _ = writeln!(o, "```text");
    for (tool, cmd) in &r.commands {
        let _ = writeln!(o, "{tool}:\n    {cmd}");
    }
    let _ = writeln!(o, "```\n");
    let _ = writeln!(
        o,
        "## How to reproduce\n\n```sh\nsudo bench/run.sh            # full mode: bench/results/full.json, this file, bench/plots/\n\
         sudo bench/run.sh --quick    # about 5 minutes once built; writes to target/bench-quick/\n```\n\n\
         Needs root (network namespaces, nftables), and the peers: `avahi-daemon avahi-utils \
         dbus-daemon python3-zeroconf nmap openssh-server openssh-client nftables gnuplot-nox` \
         (install with a `policy-rc.d` that exits 101 so no daemon starts in the root namespace)."
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_goes_into_the_section_its_name_starts_with_and_no_other() {
        let pngs: Vec<PathBuf> = [
            "out/plots/mdns-loss5.png",
            "out/plots/soak-latency.png",
            "out/plots/soak-memory.png",
            "out/plots/scan.png",
            "out/plots/soakage.png",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let md = Path::new("out/BENCHMARKS.md");
        let mut o = String::new();
        plots_of(&mut o, "soak", md, &pngs);
        assert_eq!(
            o,
            "![soak-latency](plots/soak-latency.png)\n\n![soak-memory](plots/soak-memory.png)\n\n"
        );
        let mut o = String::new();
        plots_of(&mut o, "links", md, &pngs);
        assert_eq!(o, "");
    }
}
