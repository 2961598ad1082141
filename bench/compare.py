#!/usr/bin/python3
"""Compares two results files of `rlx-bench run` (bench/run.sh) figure by
figure: the median of each (scenario, case, tool, metric) before and after,
their ratio, and whether the change is within the runs' own spread.

usage: bench/compare.py BEFORE.json AFTER.json [--tools TOOL,...] [--markdown]

"Within noise" means the after median lies inside the before runs' range
widened by the after runs' own spread (max - min of each side): with 3 to 5
repetitions on a shared 2-core machine that is the honest test, not a
percentage picked in advance. Figures that either side did not produce
(a case only one run has, an unfinished peer) are listed as such.
"""

import json
import statistics
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    groups = {}
    for s in d["samples"]:
        if s.get("computed") or s.get("value") is None:
            continue
        key = (s["scenario"], s["case"], s["tool"], s["metric"])
        groups.setdefault(key, []).append(float(s["value"]))
    return d, groups


def verdict(before, after):
    if len(before) < 2 or len(after) < 2:
        return "one sample: no spread to judge by"
    lo = min(before) - (max(after) - min(after))
    hi = max(before) + (max(after) - min(after))
    return "within noise" if lo <= statistics.median(after) <= hi else "changed"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    tools = None
    for a in sys.argv[1:]:
        if a.startswith("--tools="):
            tools = set(a.split("=", 1)[1].split(","))
    (db, before), (da, after) = load(args[0]), load(args[1])
    print(f"before: {args[0]} ({db.get('started', '?')}), after: {args[1]} ({da.get('started', '?')})")
    print()
    print("| scenario | case | tool | metric | before (median, n) | after (median, n) | after / before | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(set(before) | set(after)):
        scenario, case, tool, metric = key
        if tools and tool not in tools:
            continue
        b, a = before.get(key), after.get(key)
        if not b or not a:
            side = "after" if b else "before"
            print(f"| {scenario} | {case} | {tool} | {metric} | "
                  f"{'-' if not b else f'{statistics.median(b):.1f} ({len(b)})'} | "
                  f"{'-' if not a else f'{statistics.median(a):.1f} ({len(a)})'} | - | only {'before' if b else 'after'} |")
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = f"{ma / mb:.2f}" if mb else "-"
        print(f"| {scenario} | {case} | {tool} | {metric} | {mb:.1f} ({len(b)}) | "
              f"{ma:.1f} ({len(a)}) | {ratio} | {verdict(b, a)} |")


if __name__ == "__main__":
    main()
