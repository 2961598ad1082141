#!/usr/bin/env bash
# The benchmark suite's one entry point: builds the binaries, runs every
# scenario inside private network namespaces with the peers side by side,
# tears everything down, and writes results, BENCHMARKS.md and plots.
#
#   sudo bench/run.sh            full mode (about 90 minutes, the half-hour soak of
#                                `watch` included): bench/results/full.json
#                                (+ .csv), BENCHMARKS.md, bench/plots/*.png
#   sudo bench/run.sh --quick    about 5 minutes once built: proves the suite
#                                works; writes to target/bench-quick/ only
#
# Any other argument goes to `rlx-bench run` (e.g. --only mdns,scan).
# RLX_BENCH_PROFILE=dev uses the debug build (CI, where it already exists).
# Exit status: 0 done (whatever the figures), 1 the suite failed, 2 usage or
# missing prerequisites. Speed is not pass/fail: read BENCHMARKS.md.
#
# Figures from one run on one commit: full mode refuses a tree with
# uncommitted changes (quick mode runs it and says so), and a `--merge` of
# a re-run into results of another commit, or of a dirty tree, is refused:
# re-run the whole suite. Full mode needs at least 5 repetitions, samples
# the CPU other processes use (from /proc) beside every timed sample, marks
# each row taken beside other work as busy, and does not start while other
# processes use more than 10% of a core (--allow-busy starts anyway).
# Build nothing beside it.
#
# Network safety: every mDNS packet, scan and ssh session of the suite stays
# inside namespaces it creates (rlx-<pid>-<n>-*); on exit, even after Ctrl-C,
# this script kills what still runs in those namespaces and deletes them.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
args=()
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$a") ;;
  esac
done

if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: needs root (network namespaces, nftables, sshd, avahi-daemon); try: sudo $0 $*" >&2
  exit 2
fi
missing=()
command -v gnuplot >/dev/null 2>&1 ||
  echo "bench/run.sh: gnuplot not installed: no plots (apt-get install gnuplot-nox)" >&2
for p in ip nft nmap avahi-daemon avahi-browse dbus-daemon ssh ssh-keygen; do
  command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ -x /usr/sbin/sshd ] || missing+=("sshd")
/usr/bin/python3 -c 'import zeroconf' 2>/dev/null || missing+=("python3-zeroconf (for /usr/bin/python3)")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bench/run.sh: missing: ${missing[*]}" >&2
  echo "  install (no daemon may start in the root namespace):" >&2
  echo "  printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d" >&2
  echo "  apt-get install avahi-daemon avahi-utils dbus-daemon python3-zeroconf nmap nftables openssh-server openssh-client gnuplot-nox iperf3 serf" >&2
  exit 2
fi

# Which source is measured (recorded in the results): the commit, and
# whether the working tree differs from it.
if [ -z "${RLX_BENCH_SOURCE:-}" ] && git rev-parse --git-dir >/dev/null 2>&1; then
  RLX_BENCH_SOURCE="commit $(git rev-parse --short HEAD)"
  # Changed or new (untracked, not ignored) files both make it dirty.
  if ! git diff --quiet HEAD -- . 2>/dev/null ||
    [ -n "$(git status --porcelain --untracked-files=normal -- . 2>/dev/null)" ]; then
    RLX_BENCH_SOURCE="$RLX_BENCH_SOURCE + uncommitted changes"
  fi
fi
export RLX_BENCH_SOURCE="${RLX_BENCH_SOURCE:-unknown}"
case "$RLX_BENCH_SOURCE" in
  *"+ uncommitted changes"*)
    if [ "$quick" = 0 ]; then
      echo "bench/run.sh: refusing a full run of a tree with uncommitted changes ($RLX_BENCH_SOURCE):" >&2
      echo "  BENCHMARKS.md must come from one run on one commit; commit or stash, then run again" >&2
      echo "  (--quick may run a dirty tree)" >&2
      exit 2
    fi
    echo "bench/run.sh: quick run of a tree with uncommitted changes ($RLX_BENCH_SOURCE)" >&2 ;;
esac

profile="${RLX_BENCH_PROFILE:-release}"
# Where cargo builds ($CARGO_TARGET_DIR or ./target), as .ci/release finds it.
target=$(. .ci/target-dir && target_dir_of "$PWD" "${CARGO_TARGET_DIR:-}")
case "$profile" in
  release) bin_dir=$target/release ;;
  dev) bin_dir=$target/debug ;;
  *) echo "bench/run.sh: RLX_BENCH_PROFILE must be release or dev" >&2; exit 2 ;;
esac
echo "bench/run.sh: building ($profile)..." >&2
t0=$(date +%s)
cargo build --profile "$profile" -p rlx-discover-cli -p rlx-agent -p rlx-bench --bins
echo "bench/run.sh: built in $(( $(date +%s) - t0 )) s" >&2

if [ "$quick" = 1 ]; then
  out=target/bench-quick
  set -- --quick --results "$out/quick.json" --markdown "$out/BENCHMARKS.md" --plots "$out/plots"
else
  set -- --results bench/results/full.json --markdown BENCHMARKS.md --plots bench/plots
fi

bench_pid=""
cleanup() {
  local rc=$?
  if [ -n "$bench_pid" ]; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
    # Namespaces of this run are named rlx-<bench pid>-<n>-*: whatever the
    # bench could not tear down (it was killed) is removed here.
    for ns in $(ip netns list | awk '{print $1}' | grep "^rlx-${bench_pid}-" || true); do
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    done
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin_dir/rlx-bench" run --bin-dir "$bin_dir" "$@" ${args[@]+"${args[@]}"} &
bench_pid=$!
wait "$bench_pid"
rc=$?
bench_pid_done=$bench_pid
bench_pid=""
# A normal exit tears its labs down itself; sweep anyway in case a lab
# could not be deleted.
for ns in $(ip netns list | awk '{print $1}' | grep "^rlx-${bench_pid_done}-" || true); do
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
done
exit "$rc"
