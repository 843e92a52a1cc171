#!/usr/bin/env python3
"""Non-test lines of Rust sources, as issue 14 counts them: every line of <root>/**/*.rs except
#[cfg(test)] items, testing.rs files and the conformance suite. Usage: nontest-lines.py ROOT...
"""
import sys, pathlib, re
def count(path):
    lines = path.read_text().splitlines()
    n = 0; i = 0; skipping = False; depth = 0
    while i < len(lines):
        l = lines[i]
        if not skipping and re.match(r'\s*#\[cfg\(test\)\]', l):
            skipping = True; depth = 0; started = False
            i += 1; continue
        if skipping:
            depth += l.count('{') - l.count('}')
            if '{' in l: started = True
            if (started and depth <= 0) or (not started and l.strip().endswith(';')):
                skipping = False
            i += 1; continue
        n += 1; i += 1
    return n
for root in sys.argv[1:]:
    total = sum(count(p) for p in pathlib.Path(root).rglob('*.rs') if p.name != 'testing.rs' and 'conformance' not in p.parts)
    print(root, total)
