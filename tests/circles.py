#!/usr/bin/env python3
"""No call circle between the tree's source files.

A file A "calls" file B when A's object refers to a symbol that B's
object defines.  A circle (A calls B, B calls ... A) means neither file
can be read, tested or replaced without the other: the layering the
README describes (front-ends on lib/, each file one idea) has a hole.

The graph is built from `nm` on the objects of the build tree (the
directory given; default $top_builddir as `make check` sets it, else the
current one): one node per source file,
named by the object's directory and stem.  Objects of one source built
twice (libtool's .libs/ copy, per-target prefixes such as
"libznbd_la-") are one node.  Test programs and fuzz harnesses are left
out: they call what they test, never the other way.

Exit 0 and a PASS line when the graph has no strongly connected
component of two or more files; exit 1 and every circle otherwise;
exit 77 (skip) when no object is found or `nm` is missing.
"""
import os
import re
import shutil
import subprocess
import sys

SKIP_DIRS = ("tests", "bench", "build-aux")
SKIP_STEMS = re.compile(r"(^|_)(fuzz|fuzz_control|.*_test)$")


def node_of(path, top):
    rel = os.path.relpath(path, top)
    parts = rel.split(os.sep)
    parts = [p for p in parts if p != ".libs"]
    d = "/".join(parts[:-1])
    stem = parts[-1][:-2]
    # Per-target object prefixes: "libznbd_la-zone" or "znbd-worker".
    if "-" in stem:
        stem = stem.split("-", 1)[1]
    return d + "/" + stem


def objects(top):
    for root, dirs, files in os.walk(top):
        rel = os.path.relpath(root, top)
        first = rel.split(os.sep)[0]
        if first in SKIP_DIRS or first.startswith("build-"):
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".o"):
                yield os.path.join(root, f)


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            used.add(fields[1])
        elif len(fields) == 3 and fields[1] in "TDBR":
            defined.add(fields[2])
    return defined, used


def circles(edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("top_builddir", ".")
    if not shutil.which("nm"):
        print("SKIP: no nm")
        return 77
    nodes = {}
    for obj in objects(top):
        n = node_of(obj, top)
        if SKIP_STEMS.search(n.rsplit("/", 1)[1]):
            continue
        # A stale object of a source that is gone would add false edges.
        nodes.setdefault(n, []).append(obj)
    if not nodes:
        print("SKIP: no object files under", top)
        return 77
    defs, uses = {}, {}
    for n, objs in nodes.items():
        d, u = symbols(max(objs, key=os.path.getmtime))
        uses[n] = u
        for s in d:
            defs.setdefault(s, set()).add(n)
    edges = {n: set() for n in nodes}
    for n, u in uses.items():
        for s in u:
            for m in defs.get(s, ()):
                # A symbol defined in several programs' files (main) is
                # only an edge inside one directory.
                if m != n and m.rsplit("/", 1)[0] == n.rsplit("/", 1)[0] or (
                    m != n and len(defs[s]) == 1
                ):
                    edges[n].add(m)
    found = circles(edges)
    if found:
        print("FAIL: call circles between files:")
        for c in found:
            print("  " + " <-> ".join(c))
        return 1
    print("PASS: %d files, %d call edges, no circle" %
          (len(nodes), sum(len(e) for e in edges.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
