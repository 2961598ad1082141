#!/usr/bin/env python3
"""The house rules (CONTRIBUTING.md, "Layout"), checked: no import cycles between modules,
no source file outside tests/ over 800 lines of code (unit tests not counted:
a `#[cfg(test)] mod x { .. }` block, or a file its parent declares with
`#[cfg(test)] mod x;`).

Usage: .ci/modgraph.py [--graph] [--root DIR]   (exit 1 on a violation)

And one floor down, for the modules whose code is methods of one shared
engine ([`PARTED`]: the watch engine): no cycle of method calls between
them (`method_cycles`), which the module check cannot see when every call
is a method on one type.

A module is a source file (`foo.rs` or `foo/mod.rs`) of one crate. Module A
depends on B when A's code (not its comments or doc links) names a path
`crate::b...`, `super::b...`, `self::b` or, inside a crate's root, `b::...`
of a module of the same crate. Unit tests (`#[cfg(test)] mod tests`) are left
out: a test may reach anywhere. The crate root's `mod x;` / `pub use x::Y`
are structure, not dependencies; any other parent depends on its children,
so a child using its parent's items is a cycle, which is what the rule is
for (shared items go into a sibling module).
"""
import os
import re
import sys
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if "--root" in sys.argv:
    ROOT = os.path.abspath(sys.argv[sys.argv.index("--root") + 1])
MAX_LINES = 800

# Folders whose modules are the owned parts of one engine, checked for
# method-call cycles between them (the folder's unit tests left out).
PARTED = ["src/watch"]


def crates():
    """(name, src dir) of every crate of the workspace, the fuzz one too;
    not vendor/ (patched copies of dependencies, kept as upstream wrote them)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "tests", "node_modules", "vendor")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            out.append((os.path.relpath(dirpath, ROOT), os.path.join(dirpath, "src")))
    return out


def strip(text):
    """Code without comments, string and char literals, and the unit-test module."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_") and text[i - 1] != "b"):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^'\\])'", text[i:i + 12]):
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def test_modules(files):
    """Modules declared `#[cfg(test)] mod x;` by their parent: test code only."""
    out = set()
    for m, p in files.items():
        text = open(p, encoding="utf-8").read()
        for name in re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", text):
            out.add(m + (name,))
    # A test module's own children are test code too.
    return {m for m in files if any(m[: len(t)] == t for t in out)}


def code_lines(raw):
    """Lines of a file without its inline unit-test module (to the end of
    the file: it is the last item by convention, and checked to be)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+\w+\s*\{", raw, flags=re.M)
    return (raw[: m.start()] if m else raw).count("\n")


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return ()
    return tuple(rel)


def expand_use(body):
    """`a::{b, c::{d}}` -> [a::b, a::c::d]"""
    body = body.strip()
    m = re.match(r"^([\w:]*?)::\{(.*)\}$", body, flags=re.S)
    if not m:
        return [body]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        for e in expand_use(p):
            out.append(prefix + "::" + e if e != "self" else prefix)
    return out


def resolve(mods, here, segs):
    """The module a path names, longest known prefix, or None."""
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] == "super":
        base, rest = here, segs
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif segs[0] == "self":
        base, rest = here, segs[1:]
    else:
        base, rest = here, segs  # a child module named directly
    best = None
    for i in range(len(rest) + 1):
        cand = base + tuple(rest[:i])
        if cand in mods:
            best = cand
    if best is None or best == base and segs[0] not in ("crate", "super", "self"):
        return None
    return best


def impl_methods(code):
    """Inherent impl blocks of `code` (stripped): {method name} and {type
    name}. Trait impls (`impl X for Y`) are left out: their methods are
    called through the trait (`Liveness::reach`, `Iterator::next`), whose
    names would tie every caller of a std trait to this module."""
    methods, types = set(), set()
    for m in re.finditer(r"^impl\b([^{;]*)\{", code, flags=re.M):
        head = m.group(1)
        if re.search(r"\bfor\b", head):
            continue
        t = re.sub(r"<.*", "", re.sub(r"^\s*<.*?>\s*(?=\w)", "", head.strip(), flags=re.S), flags=re.S)
        types.add(t.strip().split("::")[-1])
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        body = code[m.end():i]
        # Only the block's own items (depth 0 inside it), not closures' or
        # nested items' names.
        flat, d = [], 0
        for ch in body:
            if ch == "{":
                d += 1
            elif ch == "}":
                d -= 1
            elif d == 0:
                flat.append(ch)
        methods.update(re.findall(r"\bfn\s+(\w+)", "".join(flat)))
    return methods, types


def method_cycles(folder, imports):
    """The method-level call graph between the modules of `folder` (one
    level, its `tests` left out): module Y depends on X when Y's code calls
    `.name(` of a method an inherent impl in X defines, or names `T::` of a
    type X implements, or imports from X (`imports`, the module graph's
    edges between them: a cycle half imports, half method calls is one
    too). A name several modules define is an edge to each of them (an
    over-approximation: a false edge shows as a cycle to untangle or a name
    to change). Calls through a trait are not seen. Returns (edges, why,
    cycles) with why[(y, x)] the names behind each edge."""
    files = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".rs") and f != "tests.rs":
            files[f[:-3]] = strip(open(os.path.join(folder, f), encoding="utf-8").read())
    defs, owner_of_type = {}, {}
    for mod, code in files.items():
        methods, types = impl_methods(code)
        for n in methods:
            defs.setdefault(n, set()).add(mod)
        for t in types:
            owner_of_type.setdefault(t, set()).add(mod)
    edges = {m: set() for m in files}
    why = {}
    for mod, code in files.items():
        for x in imports.get(mod, ()):
            if x in files and x != mod:
                edges[mod].add(x)
                why.setdefault((mod, x), set()).add("use")
        uses = [(n, defs.get(n, set())) for n in re.findall(r"\.\s*(\w+)\s*(?:::<[^>]*>)?\(", code)]
        uses += [(t + "::" + n, owner_of_type.get(t, set()))
                 for t, n in re.findall(r"\b([A-Z]\w*)(?:::<[^>]*>)?::(\w+)\s*\(", code)]
        for n, owners in uses:
            for x in owners:
                if x != mod:
                    edges[mod].add(x)
                    why.setdefault((mod, x), set()).add(n)
    cycles = []
    for comp in sccs_of(edges):
        if len(comp) > 1:
            cycles.append(sorted(comp))
    return edges, why, cycles


def sccs_of(edges):
    """Tarjan's strongly connected components of `edges`."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    show = "--graph" in sys.argv
    bad = []
    imports = {}  # PARTED folder -> {module name: {module names it imports}}
    tracked = set(
        subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                       cwd=ROOT, capture_output=True, text=True).stdout.split()
    )
    for crate, src in crates():
        files = {}
        for dirpath, _, filenames in os.walk(src):
            for f in filenames:
                if f.endswith(".rs"):
                    p = os.path.join(dirpath, f)
                    files[module_of(src, p)] = p
        mods = set(files)
        tests = test_modules(files)
        edges = {m: set() for m in mods}
        for m, p in files.items():
            raw = open(p, encoding="utf-8").read()
            rel = os.path.relpath(p, ROOT)
            n = 0 if m in tests else code_lines(raw)
            if n > MAX_LINES and rel in tracked:
                bad.append(f"{rel}: {n} lines of code (the most is {MAX_LINES})")
            code = strip(raw)
            paths = []  # (path, structural): a `pub use` re-export is structure, not use
            for u in re.finditer(r"(\bpub(?:\([\w:]+\))?\s+)?\buse\s+([^;]+);", code):
                paths += [(e, bool(u.group(1))) for e in expand_use(u.group(2))]
            rest = re.sub(r"\buse\s+[^;]+;", "", code)
            paths += [(e, False) for e in re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", rest)]
            children = {t[-1] for t in mods if len(t) == len(m) + 1 and t[: len(m)] == m}
            for c in children:
                if re.search(r"(?<!::)(?<![\w])" + c + r"::\w", rest):
                    paths.append((c, False))
            for path, structural in paths:
                segs = [s for s in re.split(r"::", path.strip()) if s]
                segs = [s.split(" as ")[0].strip() for s in segs]
                t = resolve(mods, m, segs)
                if t is None or t == m:
                    continue
                # The crate root declaring or re-exporting a module is structure. Any other
                # parent depends on its children (it declares them, and what it re-exports it
                # usually uses), so a child must not use its parent's items back.
                if structural and m == () and t[: len(m)] == m:
                    continue
                edges[m].add(t)
        # Tarjan's strongly connected components.
        index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in edges[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                sccs.append(comp)

        sys.setrecursionlimit(10000)
        for v in sorted(mods):
            if v not in index:
                visit(v)
        name = lambda m: "::".join(m) or "(root)"
        for comp in sccs:
            if len(comp) > 1:
                bad.append(f"{crate}: import cycle: " + " <-> ".join(sorted(name(m) for m in comp)))
        # The same rule one floor up: a top-level module with its folder
        # (`pipeline` and everything in `pipeline/`) is one room, and no two
        # rooms may depend on each other, even through different files (a
        # road that doubles back). The crate root is structure, not a room.
        room = lambda m: m[:1]
        rooms = {room(m) for m in mods if m}
        up = {r: set() for r in rooms}
        for m in mods:
            for t in edges[m]:
                if m and t and m not in tests and room(m) != room(t):
                    up[room(m)].add(room(t))

        def reach(a):
            seen, todo = set(), [a]
            while todo:
                for b in up[todo.pop()]:
                    if b not in seen:
                        seen.add(b)
                        todo.append(b)
            return seen

        reached = {r: reach(r) for r in rooms}
        done = set()
        for a in sorted(rooms):
            ring = sorted(b for b in rooms if b in reached[a] and a in reached[b])
            if not ring or a in done:
                continue
            done.update(ring)
            why = sorted(
                f"{name(m)} -> {name(t)}" for m in mods for t in edges[m]
                if m and t and m not in tests and room(m) in ring and room(t) in ring
                and room(m) != room(t))
            bad.append(f"{crate}: rooms that depend on each other: "
                       + " <-> ".join(name(r) for r in ring) + " (" + "; ".join(why) + ")")
        if show:
            for m in sorted(mods):
                print(f"{crate}: {name(m)} -> {', '.join(sorted(name(t) for t in edges[m]))}")
        for folder in PARTED:
            rel = os.path.relpath(os.path.join(ROOT, folder), src)
            if rel.startswith(".."):
                continue
            base = tuple(rel.split(os.sep))
            inside = lambda m: len(m) == len(base) + 1 and m[: len(base)] == base
            imports[folder] = {m[-1]: {t[-1] for t in edges[m] if inside(t)} for m in mods if inside(m)}
    for folder in PARTED:
        path = os.path.join(ROOT, folder)
        if not os.path.isdir(path):
            continue
        edges, why, cycles = method_cycles(path, imports.get(folder, {}))
        if show:
            for m in sorted(edges):
                print(f"{folder} methods: {m} -> " + ", ".join(
                    f"{t} ({' '.join(sorted(why[(m, t)]))})" for t in sorted(edges[m])))
        for comp in cycles:
            calls = "; ".join(
                f"{a} -> {b}: {', '.join(sorted(why[(a, b)]))}"
                for a in comp for b in sorted(edges[a]) if b in comp)
            bad.append(f"{folder}: method calls go both ways between " + " <-> ".join(comp)
                       + " (" + calls + ")")
    for b in bad:
        print(b)
    if bad:
        print(f"modgraph: {len(bad)} violation(s) of the house rules")
        return 1
    print(f"modgraph: no import cycles (modules or rooms), no method-call cycles between the parts of "
          f"{', '.join(PARTED)}, no source file over {MAX_LINES} lines of code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
