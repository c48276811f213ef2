#!/usr/bin/env python3
"""Fails when a code block of the docs that names the file it runs in is not in that file,
verbatim: a recipe a reader copies is then the code a test runs, and cannot rot apart.

  check_doc_code.py ROOT DOC...

A block counts when the line just before its opening fence is `<!-- runs in PATH -->`
(PATH from ROOT, the repository). Its lines must appear in PATH as consecutive lines, the
same text up to trailing blanks. Prints each block that does not and exits 1; also exits 1
when a DOC has no such block (a marker that went would otherwise pass unseen)."""
import re
import sys
from pathlib import Path

MARKER = re.compile(r"^<!-- runs in (\S+) -->\s*$")


def blocks(lines):
    """(path, first line number, block lines) for each marked fenced block."""
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m or i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            continue
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j].startswith("```"):
                yield m.group(1), i + 3, body
                break
            body.append(lines[j])


def contains(haystack, needle):
    return any(haystack[k:k + len(needle)] == needle for k in range(len(haystack) - len(needle) + 1))


def main():
    root = Path(sys.argv[1])
    bad = 0
    for doc in sys.argv[2:]:
        lines = [l.rstrip() for l in Path(doc).read_text().splitlines()]
        found = 0
        for path, line_no, body in blocks(lines):
            found += 1
            source = root / path
            if not source.is_file():
                print(f"{doc}:{line_no}: the block says it runs in {path}, which does not exist")
                bad += 1
            elif not body or not contains([l.rstrip() for l in source.read_text().splitlines()], body):
                print(f"{doc}:{line_no}: the block is not, verbatim, in {path}")
                bad += 1
        if not found:
            print(f"{doc}: no code block marked <!-- runs in PATH -->")
            bad += 1
    print(f"check_doc_code: {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
