#!/usr/bin/env python3
"""Import circles: pairs of source files of one crate that import each other (`use crate::..`,
`use super::..`), tests, benches and examples left out. Usage: python3 scripts/import-circles.py [ROOT]"""
import os, re, sys, itertools
root = sys.argv[1] if len(sys.argv) > 1 else '.'
crates = {}
for dirpath, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if d not in ('target', '.git', 'tests', 'benches', 'examples', 'bench', 'bench-apalis')]
    if 'Cargo.toml' in files and os.path.isdir(os.path.join(dirpath, 'src')):
        crates[dirpath] = os.path.join(dirpath, 'src')
def modpath(src, f):
    rel = os.path.relpath(f, src)[:-3].split(os.sep)
    if rel[-1] in ('mod', 'lib', 'main'): rel = rel[:-1]
    return tuple(rel)
total_pairs = 0; out = []
for crate, src in sorted(crates.items()):
    files = {}
    for dp, ds, fs in os.walk(src):
        for f in fs:
            if f.endswith('.rs'):
                p = os.path.join(dp, f); files[modpath(src, p)] = p
    mods = set(files)
    edges = {m: set() for m in mods}
    for m, p in files.items():
        text = open(p, errors='replace').read()
        text = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', text, flags=re.S)
        # Comments out first: a doc line that says "use ...;" would swallow the next real use.
        text = re.sub(r"//[^\n]*", "", text)
        is_dir = os.path.basename(p) in ('mod.rs', 'lib.rs', 'main.rs')
        for u in re.findall(r'\buse\s+([^;]+);', text):
            u = re.sub(r'\s+', '', u)
            heads = []
            if '{' in u:
                base, rest = u.split('{', 1)
                rest = rest.rsplit('}', 1)[0]
                parts = [base + x for x in re.split(r',(?![^{]*\})', rest)]
            else:
                parts = [u]
            for part in parts:
                segs = [s for s in part.split('::') if s]
                if not segs: continue
                if segs[0] == 'crate': cur = []; segs = segs[1:]
                elif segs[0] in ('super', 'self'):
                    cur = list(m)
                    while segs and segs[0] in ('super', 'self'):
                        if segs[0] == 'super': cur = cur[:-1]
                        segs = segs[1:]
                else: continue
                # longest module prefix
                path = cur + segs; best = None
                for k in range(len(path), -1, -1):
                    if tuple(path[:k]) in mods: best = tuple(path[:k]); break
                if best is not None and best != m and best != ():
                    edges[m].add(best)
    pairs = [(a, b) for a, b in itertools.combinations(sorted(mods), 2) if b in edges[a] and a in edges[b]]
    total_pairs += len(pairs)
    for a, b in pairs:
        out.append(f"{os.path.relpath(crate, root) or '.'}: {'/'.join(a) or 'lib'} <-> {'/'.join(b) or 'lib'}")
print("\n".join(out)); print(f"circles (pairs of files importing each other): {total_pairs}")
