//! **Other work beside a timed run** — the CPU used by processes that are
//! not the bench's, sampled from `/proc` while the suite runs, so that every
//! sample says how busy the rest of the machine was while it was taken (a
//! build beside the fault soak once inflated its figures unseen: the load
//! average counts the lab's own agents too, so it cannot tell the two apart).
//!
//! A process is the bench's when the bench is among its ancestors or when it
//! lives in one of this run's lab namespaces (`rlx-<bench pid>-*`; processes
//! in other namespaces, another test's labs, are other work). Kernel
//! threads are left out: the lab's own packets are processed in softirq
//! threads. For every other process the sampler adds up its CPU time and its
//! reaped children's (`utime + stime + cutime + cstime` of `/proc/PID/stat`),
//! so the short-lived compilers of a build are counted through the `cargo`
//! that waits for them; a process that starts and ends between two samples
//! with no parent outside the bench left to reap it is missed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often `/proc` is read.
const EVERY: Duration = Duration::from_millis(500);

/// Share of one core that other processes may use beside a sample before it
/// is marked as taken on a busy machine, percent.
pub const BUSY_PCT: f64 = 10.0;

/// One process as read from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    pub pid: u32,
    pub ppid: u32,
    /// `utime + stime + cutime + cstime`, clock ticks.
    pub ticks: u64,
    /// Start time after boot, clock ticks (tells a reused PID apart).
    pub start: u64,
    /// A kernel thread (`PF_KTHREAD`).
    pub kthread: bool,
}

/// Parses one `/proc/PID/stat` line.
pub fn parse_stat(line: &str) -> Option<Stat> {
    let pid = line.split_whitespace().next()?.parse().ok()?;
    // The command may hold spaces and parentheses: fields start after the last ')'.
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field k is f[k - 3].
    let num = |k: usize| -> Option<u64> { f.get(k - 3)?.parse().ok() };
    Some(Stat {
        pid,
        ppid: num(4)? as u32,
        ticks: num(14)? + num(15)? + num(16)? + num(17)?,
        start: num(22)?,
        kthread: num(9)? & 0x0020_0000 != 0,
    })
}

/// The processes that are not `root`'s descendants, not in a namespace
/// `in_lab` says is a lab's, and not kernel threads.
pub fn theirs(stats: &[Stat], root: u32, in_lab: impl Fn(u32) -> bool) -> Vec<&Stat> {
    let parent: HashMap<u32, u32> = stats.iter().map(|s| (s.pid, s.ppid)).collect();
    let ours = |mut pid: u32| {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match parent.get(&pid) {
                Some(&p) if p != 0 && p != pid => pid = p,
                _ => return false,
            }
        }
        false
    };
    stats
        .iter()
        .filter(|s| !s.kthread && s.pid != 2 && s.ppid != 2 && !ours(s.pid) && !in_lab(s.pid))
        .collect()
}

/// What a sample remembers of each process: (PID, start) -> (ticks, parent).
pub type Seen = HashMap<(u32, u64), (u64, u32)>;

/// The processes of `now` as the next sample's `before`.
pub fn seen(now: &[&Stat]) -> Seen {
    now.iter()
        .map(|s| ((s.pid, s.start), (s.ticks, s.ppid)))
        .collect()
}

/// Ticks used by `now`'s processes since `before` (PID and start time as
/// the key; a process first seen is counted from its start when it started
/// after `before_uptime_ticks`, else from now on). A process that ended
/// was counted up to its last sample: the time its parent's `cutime` gains
/// when reaping it is counted less that, so nothing is counted twice.
pub fn used_since(before: &Seen, now: &[&Stat], before_uptime_ticks: u64) -> u64 {
    let mut delta: HashMap<u32, u64> = now
        .iter()
        .map(|s| {
            let d = match before.get(&(s.pid, s.start)) {
                Some(&(t, _)) => s.ticks.saturating_sub(t),
                None if s.start >= before_uptime_ticks => s.ticks,
                None => 0,
            };
            (s.pid, d)
        })
        .collect();
    let alive: std::collections::HashSet<(u32, u64)> =
        now.iter().map(|s| (s.pid, s.start)).collect();
    let parent_before: HashMap<u32, u32> = before.iter().map(|(k, v)| (k.0, v.1)).collect();
    for (key, &(ticks, ppid)) in before {
        if alive.contains(key) {
            continue;
        }
        // The time of a process that ended lands in the cutime of whoever
        // reaps it: its parent, or, when the parent ended too (a build's
        // compiler reaped by a cargo that then exited), the nearest
        // ancestor still alive.
        let mut p = ppid;
        for _ in 0..64 {
            if let Some(d) = delta.get_mut(&p) {
                *d = d.saturating_sub(ticks);
                break;
            }
            match parent_before.get(&p) {
                Some(&pp) if pp != p => p = pp,
                _ => break,
            }
        }
    }
    delta.values().sum()
}

fn read_all() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|l| parse_stat(&l))
        .collect()
}

/// The inode of the network namespace of `pid` (`net:[INODE]`).
fn netns(pid: u32) -> Option<u64> {
    let l = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    ns_inode(&l.to_string_lossy())
}

/// `INODE` of `net:[INODE]`.
fn ns_inode(link: &str) -> Option<u64> {
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// The inodes of this run's lab namespaces: `/run/netns/rlx-<pid>-*`, the
/// labs' naming (other runs' and other programs' namespaces are not ours:
/// their processes are other work).
fn lab_namespaces(me: u32) -> std::collections::HashSet<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let prefix = format!("rlx-{me}-");
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .map(|m| m.ino())
        .collect()
}

fn uptime_ticks(hz: f64) -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0, |s| (s * hz) as u64)
}

/// The CPU seconds other processes used, cumulative, over time.
#[derive(Clone, Default)]
pub struct Others {
    timeline: Arc<Mutex<Vec<(Instant, f64)>>>,
}

impl Others {
    /// Starts the sampler thread (it runs until the process exits).
    pub fn start() -> Others {
        let o = Others::default();
        let timeline = o.timeline.clone();
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        let me = std::process::id();
        std::thread::spawn(move || {
            let mut before = Seen::new();
            let mut before_up = uptime_ticks(hz);
            let mut total = 0.0;
            let mut first = true;
            loop {
                let up = uptime_ticks(hz);
                let all = read_all();
                let labs = lab_namespaces(me);
                let in_lab =
                    |pid: u32| !labs.is_empty() && netns(pid).is_some_and(|n| labs.contains(&n));
                let now = theirs(&all, me, in_lab);
                if !first {
                    total += used_since(&before, &now, before_up) as f64 / hz;
                }
                first = false;
                before = seen(&now);
                before_up = up;
                if let Ok(mut t) = timeline.lock() {
                    t.push((Instant::now(), total));
                }
                std::thread::sleep(EVERY);
            }
        });
        o
    }

    /// Share of one core (percent) other processes used from `since` to
    /// now; `None` before two samples cover the window.
    pub fn pct_since(&self, since: Instant) -> Option<f64> {
        let t = self.timeline.lock().ok()?;
        let (t1, c1) = *t.last()?;
        let (t0, c0) = *t.iter().rev().find(|(at, _)| *at <= since).or(t.first())?;
        let secs = t1.duration_since(t0).as_secs_f64();
        (secs >= 0.4).then(|| (c1 - c0) / secs * 100.0)
    }

    /// Waits `window` and returns the share of one core others used in it.
    pub fn measure(&self, window: Duration) -> Option<f64> {
        let t = Instant::now();
        std::thread::sleep(window + EVERY);
        self.pct_since(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(pid: u32, ppid: u32, ticks: u64, start: u64) -> Stat {
        Stat {
            pid,
            ppid,
            ticks,
            start,
            kthread: false,
        }
    }

    #[test]
    fn a_namespace_link_gives_its_inode() {
        assert_eq!(ns_inode("net:[4026531840]"), Some(4026531840));
        assert_eq!(ns_inode("mnt:[4026531840]"), None);
    }

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_the_name_is_read() {
        let l = "4242 (cargo (x) b) S 4000 4242 4000 0 -1 4194304 10 0 0 0 \
                 150 50 7 3 20 0 1 0 98765 1000 100 18446744073709551615";
        let s = parse_stat(l).unwrap();
        assert_eq!(s.pid, 4242);
        assert_eq!(s.ppid, 4000);
        assert_eq!(s.ticks, 150 + 50 + 7 + 3);
        assert_eq!(s.start, 98765);
        assert!(!s.kthread);
        let k = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 0";
        assert!(parse_stat(k).unwrap().kthread);
    }

    #[test]
    fn the_benchs_descendants_and_lab_processes_are_not_others_and_a_build_is() {
        // 1 init, 100 bench, 101 its child, 102 grandchild, 200 cargo,
        // 201 rustc under cargo, 300 a lab agent reparented to init.
        let all = vec![
            st(1, 0, 5, 1),
            st(100, 1, 9, 10),
            st(101, 100, 9, 11),
            st(102, 101, 9, 12),
            st(200, 1, 40, 20),
            st(201, 200, 400, 21),
            st(300, 1, 30, 30),
        ];
        let pids: Vec<u32> = theirs(&all, 100, |p| p == 300)
            .iter()
            .map(|s| s.pid)
            .collect();
        assert_eq!(pids, vec![1, 200, 201]);
    }

    #[test]
    fn cpu_is_counted_from_the_last_sample_and_a_new_process_from_its_start_once() {
        let before: Seen = [((200, 20), (40, 1)), ((201, 21), (400, 200))].into();
        // rustc 201 ran 10 more ticks and was reaped by cargo 200 (its 410
        // ticks moved to cargo's cutime: 40 + 410); cargo started 202; 203
        // existed before but was not seen (not counted).
        let now = [
            st(200, 1, 450, 20),
            st(202, 200, 50, 600),
            st(203, 1, 70, 5),
        ];
        let now: Vec<&Stat> = now.iter().collect();
        assert_eq!(used_since(&before, &now, 500), 10 + 50);
    }

    #[test]
    fn a_grandchild_reaped_by_a_parent_that_then_ended_is_not_counted_twice() {
        // bash 100 > cargo 200 > rustc 300. At the last sample cargo had
        // 50 ticks and rustc 600 (counted as it ran); since then rustc ran
        // 10 more, was reaped by cargo, which ran 5 more and was reaped by
        // bash: bash's cutime gains 50 + 5 + 610.
        let before: Seen = [
            ((100, 1), (7, 1)),
            ((200, 2), (50, 100)),
            ((300, 3), (600, 200)),
        ]
        .into();
        let now = [st(100, 1, 7 + 665, 1)];
        let now: Vec<&Stat> = now.iter().collect();
        assert_eq!(used_since(&before, &now, 500), 15);
    }
}
