#!/usr/bin/env python3
"""Cuts the fork's combined diff into the patch series of vendor/mdns-sd/patches.

An aid for whoever changes the fork, not an authority: each change block of
the diff pristine -> vendor/mdns-sd (a run of changed lines, difflib's
opcode) is given to one PATCHES.md section by the `rlx patch:` markers in its
own added lines, or failing those the nearest marker above it in the fork
(RULES below: an explicit "PATCHES.md §N" first, then the RFC section and
words of the marker). A block whose markers name several sections goes to
the earliest (PATCHES.md says which sections share code that way). A new
file goes whole to the section of its first marker. Patch k is then the diff
between the tree with the blocks of sections < k and the tree with those of
sections <= k, so the series applies in order with no offset or fuzz.

The series it writes must be read before it is committed: a marker that no
rule knows puts its block in the section of the nearest one that does, and
`--explain` lists every block with the section chosen and why. `.ci/fork.py`
checks only that the committed series reproduces the fork, never that this
script would write the same one.

usage: .ci/fork_regen.py --pristine DIR [--explain]   (DIR: the unpacked
mdns-sd 0.21.7 crate, e.g. ~/.cargo/registry/src/*/mdns-sd-0.21.7)
"""
import difflib
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fork  # noqa: E402

# (section, slug) in series order; 0 is the fork's own packaging.
SECTIONS = [
    (0, "package-as-rlx-mdns-sd"),
    (1, "off-link-sources"),
    (2, "legacy-reply-limit"),
    (10, "renamed-names-in-answers"),
    (11, "late-conflicts-reprobe"),
    (12, "link-change-probes"),
    (13, "update-reannounces"),
    (14, "short-rename-counter"),
    (20, "qu-unicast-answers"),
    (21, "probes-qu-bit"),
    (22, "shared-delay-20-120ms"),
    (23, "own-ipv6-addresses-only"),
    (24, "goodbye-removed-address"),
    (25, "truncated-known-answers"),
    (26, "probe-tiebreak-sorted"),
    (27, "bounded-timers"),
    (28, "bounded-under-flood"),
    (29, "reflection-bounded"),
    (30, "answering-gaps"),
    (31, "own-packets-other-intf"),
    (32, "probes-qm-when-port-shared"),
    (33, "probing-conflicts"),
    (34, "duplicate-answer-suppression"),
    (35, "duplicate-question-suppression"),
    (36, "qu-answers-size-bound"),
]

# Marker text -> section, first match wins (after an explicit PATCHES.md §N).
RULES = [
    (r"the responder's state machine", 10),
    (r"Publishing|published under its own name|packaged from this unpacked|says what the fork is|Cargo\.lock is committed", 0),
    (r"§2[0-6]\b.*tests|answering patches", 20),
    (r"§5\.4, §11|prove|proved", 36),
    (r"QU unicast replies|limit of QU|QU replies limited", 29),
    (r"§11: \"All Multicast DNS responses|IP TTL|unicast TTL", 29),
    (r"§6: a record answering a probe|§6: a probe is answered|probe's answer|answering a probe", 29),
    (r"§11|§5\.5", 1),
    (r"§6\.7|legacy unicast replies|token bucket per querier|how many sources are tracked", 2),
    (r"§9: the most digits|only a short number|rename counter", 14),
    (r"§8\.4: (re-registering|an update)|re-announces, never re-probes", 13),
    (r"§8, §8\.3|§8 / §8\.4|§8\.4|§8\.3, §8\.4|§8\.3: \"at least two|link change", 12),
    (r"§9 / §16|§9 the host name|§9: the host name|§9: after a host rename|§8\.3: `my_services`", 10),
    (r"§9|§8\.1: when the conflicts|next probe past the limit|period over which|fifteen|count the conflict|conflict times", 11),
    (r"§8\.1: probes ask for unicast|§5\.4, §8\.1", 21),
    (r"§5\.4", 20),
    (r"10-50 ms|delay bounds|shared-response delay", 22),
    (r"§10\.[12]", 24),
    (r"§7\.2.*(bounded|flood)|§5 bounded|flood", 28),
    (r"§7\.2|multipacket", 25),
    (r"§8\.2\.1", 26),
    (r"§5\.2|timers|wake-up", 27),
    (r"§14", 31),
    (r"§15\.1", 32),
    (r"§8\.1", 33),
    (r"§7\.4", 34),
    (r"§7\.3", 35),
    (r"§6\.2: a response sent on an interface may carry", 23),
    (r"§6\.2|RFC 6763|both famil", 30),
    (r"§6|§16|§18\.1|§7\.1|ANY", 30),
]
# Change blocks with no marker of their own and none near that says their
# section: (file, the block's first added line, stripped) -> section.
OVERRIDES = {
    ("src/service_daemon.rs", "timers::Timers,"): 27,
    # Its marker's first line names no section; the next says 10-13.
    ("src/service_daemon/responder_state_tests.rs",
     "//! rlx patch: tests of `responder_state` and of the answer fixes after a"): 10,
}
MARK = re.compile(r"rlx patch:?(.*)")


def section_of(text):
    """The section a marker's text names, or None."""
    m = re.search(r"PATCHES\.md,? (?:sections? |§)(\d+)", text) or re.search(r"\(§(\d\d)\)", text)
    if m:
        return int(m.group(1))
    for pat, sec in RULES:
        if re.search(pat, text):
            return sec
    return None


def markers(lines):
    out = []
    for line in lines:
        m = MARK.search(line)
        if m:
            out.append((m.group(1).strip(), section_of(m.group(1))))
    return out


def nearest_above(new, j):
    """The section of the nearest known marker at or above line j of the fork."""
    for k in range(min(j, len(new) - 1), -1, -1):
        m = MARK.search(new[k])
        if m and section_of(m.group(1)) is not None:
            return section_of(m.group(1)), f"nearest marker above (line {k + 1})"
    return None, "no marker"


def blocks(rel, old, new):
    """[(section, why, (i1, i2, j1, j2))] for each change block of old -> new."""
    out = []
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        own = [(t, s) for t, s in markers(new[j1:j2]) if s is not None]
        first = new[j1].strip() if j2 > j1 else None
        if (str(rel), first) in OVERRIDES:
            sec, why = OVERRIDES[(str(rel), first)], "OVERRIDES"
        elif own:
            sec = min(s for _, s in own)
            why = "; ".join(sorted({f"§{s}: {t[:60]}" for t, s in own}))
        else:
            # A deletion or an unmarked line: the marker is in the context
            # just below (a comment on the next lines) or the nearest above.
            below = [(t, s) for t, s in markers(new[j2:j2 + 3]) if s is not None]
            if below:
                sec, why = below[0][1], f"marker below: {below[0][0][:60]}"
            else:
                sec, why = nearest_above(new, j1)
        out.append((sec, why, (i1, i2, j1, j2)))
    return out


def state(old, new, chosen):
    """old with the blocks in `chosen` (a list of (i1, i2, j1, j2)) applied."""
    res, pos = [], 0
    for i1, i2, j1, j2 in sorted(chosen):
        res += old[pos:i1] + new[j1:j2]
        pos = i2
    return res + old[pos:]


def udiff(rel, a, b, a_exists, b_exists):
    """A -p1 unified diff of rel from a to b (lists of lines with endings)."""
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel}" if a_exists else "/dev/null",
                                     f"b/{rel}", n=3):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
            continue
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return out


def main():
    args = sys.argv[1:]
    explain = "--explain" in args
    args = [a for a in args if a != "--explain"]
    if len(args) != 2 or args[0] != "--pristine":
        sys.exit(__doc__)
    pristine = pathlib.Path(args[1])
    order = [s for s, _ in SECTIONS]
    ours, theirs = fork.files(fork.VENDOR), fork.files(pristine)
    plan = {}  # rel -> (old, new, [(sec, why, block)])
    for rel in sorted(ours):
        new = (fork.VENDOR / rel).read_text().splitlines(keepends=True)
        if rel in theirs:
            old = (pristine / rel).read_text().splitlines(keepends=True)
            if old == new:
                continue
            bl = blocks(rel, old, new)
        else:
            old = None
            secs = [s for _, s in markers(new) if s is not None]
            key = (str(rel), new[0].strip() if new else None)
            if key in OVERRIDES:
                bl = [(OVERRIDES[key], "new file, OVERRIDES", (0, 0, 0, len(new)))]
            else:
                bl = [(min(secs) if secs else None, "new file, the earliest section its markers name",
                       (0, 0, 0, len(new)))]
        for sec, why, b in bl:
            if sec not in order:
                sys.exit(f"fork_regen.py: {rel} lines {b[2] + 1}-{b[3]}: no section ({why}); "
                         "add a rule to RULES or a `PATCHES.md §N` to its marker")
            if explain:
                print(f"§{sec:<3} {rel}:{b[2] + 1}-{b[3]}  ({why})")
        plan[rel] = (old, new, bl)
    for rel in sorted(theirs - ours):
        sys.exit(f"fork_regen.py: {rel} deleted from the fork; the series cannot say so yet")
    series = []
    n = 0
    for sec, slug in SECTIONS:
        k = order.index(sec)
        text = []
        for rel, (old, new, bl) in plan.items():
            before = [b for s, _, b in bl if order.index(s) < k]
            upto = [b for s, _, b in bl if order.index(s) <= k]
            if len(before) == len(upto):
                continue
            if old is None:
                text += udiff(rel, [], new, False, True)
            else:
                text += udiff(rel, state(old, new, before), state(old, new, upto), True, True)
        if not text:
            # Its code is all in a new file an earlier section created.
            print(f"fork_regen.py: §{sec} ({slug}) has no change of its own: folded into an "
                  "earlier patch (say so in PATCHES.md)")
            continue
        name = f"{n:04d}-{slug}.patch"
        what = f"PATCHES.md §{sec}" if sec else 'packaging (PATCHES.md, "Publishing")'
        series.append((name, f"rlx-mdns-sd: {what}\n\n" + "".join(text)))
        n += 1
    outdir = fork.VENDOR / "patches"
    outdir.mkdir(exist_ok=True)
    for p in outdir.glob("*.patch"):
        p.unlink()
    for name, text in series:
        (outdir / name).write_text(text)
        print(f"fork_regen.py: wrote {name}")

if __name__ == "__main__":
    main()
