//! **Figures from one run on one commit** — what `rlx-bench run` refuses so
//! that BENCHMARKS.md never stitches runs of different sources again:
//! a full run of a tree with uncommitted changes, and a `--merge` of a
//! re-run into results measured on another commit (or on any dirty tree).
//!
//! The source measured is what `bench/run.sh` puts in `RLX_BENCH_SOURCE`:
//! `commit <short hash>`, with ` + uncommitted changes` when the working
//! tree differs from it (`unknown` outside git).

/// What `bench/run.sh` appends to the source when the tree is dirty.
pub const DIRTY: &str = "+ uncommitted changes";

/// Whether `source` names a tree with uncommitted changes.
pub fn dirty(source: &str) -> bool {
    source.contains(DIRTY)
}

/// Why a run of `source` may not write full results, if it may not: a full
/// run's figures are the ones quoted, so they must be reproducible from a
/// commit. Quick mode may run dirty (it proves the suite works) and says so.
pub fn refuse_full(quick: bool, source: &str) -> Option<String> {
    if quick {
        return None;
    }
    if dirty(source) {
        return Some(format!(
            "a full run measures a commit, and this tree has uncommitted changes ({source}): \
             commit (or stash) them and run `sudo bench/run.sh` again; `--quick` may run a \
             dirty tree"
        ));
    }
    if source.trim().is_empty() || source == "unknown" {
        return Some(
            "a full run must say which commit it measured, and RLX_BENCH_SOURCE is not set: \
             run it through `sudo bench/run.sh` in a git checkout (it sets it)"
                .into(),
        );
    }
    None
}

/// The fewest repetitions per case a full run may take: every row of
/// BENCHMARKS.md states its spread, and three runs show little of one.
pub const FULL_REPS: u32 = 5;

/// Why a run with `reps` repetitions may not write full results, if it may
/// not.
pub fn refuse_reps(quick: bool, reps: Option<u32>) -> Option<String> {
    match reps {
        Some(r) if !quick && r < FULL_REPS => Some(format!(
            "a full run takes at least {FULL_REPS} repetitions per case (--reps {r} given): \
             its rows state their spread; use --quick for a shorter run"
        )),
        _ => None,
    }
}

/// Why the samples of `new_src` may not be merged into results of
/// `old_src`, if they may not.
pub fn refuse_merge(old_src: &str, new_src: &str) -> Option<String> {
    let again = "re-run the whole suite instead (`sudo bench/run.sh`, no --merge), so that \
                 every figure comes from one run on one commit";
    if dirty(new_src) || dirty(old_src) {
        return Some(format!(
            "--merge: refusing to merge a run with uncommitted changes (stored results: \
             {old_src}; this run: {new_src}): {again}"
        ));
    }
    if old_src != new_src {
        return Some(format!(
            "--merge: the stored results measured {old_src}, this run measured {new_src}: \
             figures of two commits would be stitched into one report; {again}"
        ));
    }
    if new_src == "unknown" || new_src == "unknown source" {
        return Some(format!(
            "--merge: the source measured is unknown, so it cannot be shown to be the same \
             commit: {again}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_of_two_commits_or_a_dirty_tree_is_refused_and_one_commit_is_not() {
        let a = "commit 32f60d4";
        let b = "commit b3856b8";
        let dirty_a = "commit 32f60d4 + uncommitted changes";
        assert_eq!(refuse_merge(a, a), None);
        let e = refuse_merge(a, b).expect("two commits");
        assert!(e.contains("32f60d4") && e.contains("b3856b8"), "{e}");
        assert!(e.contains("re-run the whole suite"), "{e}");
        assert!(refuse_merge(a, dirty_a).is_some());
        assert!(refuse_merge(dirty_a, a).is_some());
        assert!(refuse_merge(dirty_a, dirty_a).is_some());
        assert!(refuse_merge("unknown", "unknown").is_some());
    }

    #[test]
    fn a_full_run_takes_five_repetitions_or_more_and_a_quick_one_any() {
        assert!(refuse_reps(false, Some(3)).is_some());
        assert_eq!(refuse_reps(false, Some(5)), None);
        assert_eq!(refuse_reps(false, None), None);
        assert_eq!(refuse_reps(true, Some(1)), None);
    }

    #[test]
    fn a_full_run_of_a_dirty_or_unknown_tree_is_refused_and_a_quick_one_is_not() {
        let dirty_a = "commit 32f60d4 + uncommitted changes";
        assert!(refuse_full(false, dirty_a).is_some());
        assert!(refuse_full(false, "unknown").is_some());
        assert_eq!(refuse_full(false, "commit 32f60d4"), None);
        assert_eq!(refuse_full(true, dirty_a), None);
        assert_eq!(refuse_full(true, "unknown"), None);
    }
}
