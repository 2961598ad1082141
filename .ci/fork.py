#!/usr/bin/env python3
"""Keeps the vendored mdns-sd honest: every change from the pristine crate is
a marked patch.

The pristine source is taken from the registry the way cargo takes it: a
throwaway package depending on `mdns-sd = "=VERSION"` is fetched with
`cargo fetch` (into $CARGO_HOME), and vendor/mdns-sd is compared with the
unpacked crate file by file. Each hunk of the diff (3 lines of context) must
carry the marker `rlx patch` in its own lines, added or context, or be part
of a file that is ours alone (a new file must carry the marker near its top).
PATCHES.md, the list of the patches, is exempt.

It then checks the patch series, vendor/mdns-sd/patches/NNNN-*.patch: the
pristine crate copied to a temporary directory, each patch applied in order
with `patch -p1` and no fuzz, must give vendor/mdns-sd file for file (the
files named in IGNORED and IGNORED_DIRS aside). `.ci/fork_regen.py` drafts the
series from the fork's markers; what is checked here is the committed series.

The fork's version is the upstream release it was cut from with a
pre-release tag of ours, `X.Y.Z-rlx.N`; the pristine crate is mdns-sd X.Y.Z.

usage: .ci/fork.py [--pristine DIR]   (DIR: an unpacked mdns-sd crate, to skip
the fetch). Exit 0 when every hunk is marked and the series reproduces the
fork; 1 with each unmarked hunk, or the first file the series gets wrong,
printed; 2 when the pristine source, or the `patch` program, cannot be had.
"""
import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
VENDOR = ROOT / "vendor" / "mdns-sd"
MARKER = "rlx patch"
# Files cargo adds when it unpacks or packages a crate, and ours that list
# the patches: not code.
IGNORED = {".cargo-ok", ".cargo_vcs_info.json", "Cargo.lock", "Cargo.toml.orig", "PATCHES.md"}
IGNORED_DIRS = {".github", "target"}
# The patch series: checked by applying it, not by markers.
SERIES_DIR = "patches"
# How far from its top a new file must name the marker.
NEW_FILE_HEAD = 40


def version():
    """The upstream release the fork was cut from, from its `X.Y.Z-rlx.N`."""
    text = (VENDOR / "Cargo.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        sys.exit("fork.py: no version in vendor/mdns-sd/Cargo.toml")
    up = re.fullmatch(r"(\d+\.\d+\.\d+)-rlx\.\d+", m.group(1))
    if not up:
        sys.exit(f"fork.py: vendor/mdns-sd/Cargo.toml has version {m.group(1)!r}; a fork's "
                 "version is the upstream release it was cut from plus `-rlx.N` (e.g. 0.21.7-rlx.1): "
                 "set it so (PATCHES.md, \"Publishing\")")
    return up.group(1)


def fetch_pristine(ver):
    """Unpacks mdns-sd VER from the registry as cargo does; its directory."""
    home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d)
        (p / "src").mkdir()
        (p / "src" / "lib.rs").write_text("")
        (p / "Cargo.toml").write_text(
            '[package]\nname = "pristine-mdns-sd"\nversion = "0.0.0"\nedition = "2021"\n\n'
            f'[dependencies]\nmdns-sd = "={ver}"\n'
        )
        r = subprocess.run(["cargo", "fetch", "--manifest-path", str(p / "Cargo.toml")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"fork.py: cargo fetch of mdns-sd {ver} failed:\n{r.stderr}", file=sys.stderr)
            sys.exit(2)
    found = sorted((home / "registry" / "src").glob(f"*/mdns-sd-{ver}"))
    if not found:
        print(f"fork.py: mdns-sd-{ver} not unpacked under {home}/registry/src", file=sys.stderr)
        sys.exit(2)
    return found[0]


def files(base):
    """The files compared, relative to base (the series itself is not one)."""
    out = set()
    for path in base.rglob("*"):
        rel = path.relative_to(base)
        if path.is_dir() or rel.name in IGNORED or rel.parts[0] in IGNORED_DIRS:
            continue
        if rel.parts[0] == SERIES_DIR:
            continue
        out.add(rel)
    return out


def read(path):
    return path.read_text(errors="replace").splitlines()


def unmarked_hunks(rel, old, new):
    """The hunks of old -> new whose lines never name the marker."""
    bad = []
    hunk = []
    for line in difflib.unified_diff(old, new, f"pristine/{rel}", f"vendor/{rel}", n=3, lineterm=""):
        if line.startswith("@@"):
            if hunk and not any(MARKER in h for h in hunk[1:]):
                bad.append(hunk)
            hunk = [line]
        elif hunk:
            hunk.append(line)
    if hunk and not any(MARKER in h for h in hunk[1:]):
        bad.append(hunk)
    return bad


def check_series(pristine):
    """None when the series applied to pristine gives VENDOR; else what is wrong."""
    patches = sorted((VENDOR / SERIES_DIR).glob("[0-9][0-9][0-9][0-9]-*.patch"))
    if not patches:
        return (f"vendor/mdns-sd/{SERIES_DIR}/ holds no NNNN-<slug>.patch: draft the series with "
                f"`.ci/fork_regen.py --pristine {pristine}`, review it, and commit it")
    if shutil.which("patch") is None:
        print("fork.py: the `patch` program is needed to check vendor/mdns-sd/patches/; "
              "install it (Debian: apt-get install patch)", file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory() as d:
        tree = pathlib.Path(d) / "mdns-sd"
        shutil.copytree(pristine, tree)
        for p in patches:
            r = subprocess.run(["patch", "-p1", "-F0", "--batch", "--forward", "--no-backup-if-mismatch",
                                "-s", "-d", str(tree), "-i", str(p)], capture_output=True, text=True)
            if r.returncode != 0:
                return (f"{p.relative_to(ROOT)} does not apply (after the patches before it) to the "
                        f"pristine {pristine.name}:\n{r.stdout}{r.stderr}"
                        "fix the patch, or redraft the series with .ci/fork_regen.py and review it")
            rejects = list(tree.rglob("*.rej"))
            if rejects:
                return f"{p.relative_to(ROOT)} left {rejects[0].relative_to(tree)}: it applied only in part"
        ours, got = files(VENDOR), files(tree)
        for rel in sorted(ours | got):
            if rel not in got:
                return (f"vendor/mdns-sd/{rel} is in the fork but no patch of {SERIES_DIR}/ creates it: "
                        "add it to the patch of its PATCHES.md section")
            if rel not in ours:
                return f"the series leaves {rel}, which the fork does not have: drop it from its patch"
            if (VENDOR / rel).read_bytes() != (tree / rel).read_bytes():
                diff = list(difflib.unified_diff(read(tree / rel), read(VENDOR / rel),
                                                 f"series/{rel}", f"vendor/{rel}", n=1, lineterm=""))
                return (f"vendor/mdns-sd/{rel} differs from what the series makes of it (first "
                        f"differing file): a change made in the fork and not in its patch:\n"
                        + "\n".join(diff[:16]) + "\nput the change in the patch of its section "
                        f"({SERIES_DIR}/), or redraft with .ci/fork_regen.py and review the result")
    return None


def main():
    args = sys.argv[1:]
    if args[:1] == ["--pristine"] and len(args) == 2:
        pristine = pathlib.Path(args[1])
    elif not args:
        pristine = fetch_pristine(version())
    else:
        sys.exit(__doc__)
    ours, theirs = files(VENDOR), files(pristine)
    problems = []
    for rel in sorted(ours - theirs):
        head = read(VENDOR / rel)[:NEW_FILE_HEAD]
        if not any(MARKER in line for line in head):
            problems.append(f"vendor/mdns-sd/{rel}: a file of ours with no `{MARKER}` marker in its first {NEW_FILE_HEAD} lines")
    for rel in sorted(theirs - ours):
        problems.append(f"vendor/mdns-sd/{rel}: deleted from the pristine crate without a word (PATCHES.md must say why, and the check list it)")
    hunks = 0
    for rel in sorted(ours & theirs):
        old, new = read(pristine / rel), read(VENDOR / rel)
        if old == new:
            continue
        for h in unmarked_hunks(rel, old, new):
            hunks += 1
            shown = "\n".join(h[:12] + (["..."] if len(h) > 12 else []))
            problems.append(f"vendor/mdns-sd/{rel}: a hunk with no `{MARKER}` marker:\n{shown}")
    if problems:
        print(f"fork.py: the vendored mdns-sd differs from the pristine {pristine.name} without a marker "
              f"({len(problems)} place(s)); mark each change `// rlx patch: <what> (RFC section)` "
              "and list it in vendor/mdns-sd/PATCHES.md:\n", file=sys.stderr)
        for p in problems:
            print(p + "\n", file=sys.stderr)
        sys.exit(1)
    wrong = check_series(pristine)
    if wrong:
        print(f"fork.py: the patch series does not reproduce the fork: {wrong}", file=sys.stderr)
        sys.exit(1)
    n = len(list((VENDOR / SERIES_DIR).glob("[0-9][0-9][0-9][0-9]-*.patch")))
    print(f"fork.py: every change from {pristine.name} is a marked patch, and the {n} patches "
          f"of vendor/mdns-sd/{SERIES_DIR}/ applied to it give vendor/mdns-sd")


if __name__ == "__main__":
    main()
