#!/usr/bin/env python3
"""Generates docs/api.md from the public headers (include/tg/*.h), so the reference cannot
drift from the API: every declaration appears with the comment written above it.

  scripts/gen-api-doc.py            rewrite docs/api.md and the tutorial in include/tg/tg.h
  scripts/gen-api-doc.py --check    exit 1 if either is stale (a ctest runs this)

The tutorial in tg.h's opening comment is a copy of examples/tutorial.c, which ctest builds
and runs, so the front door cannot show code that does not work.

The headers are the source: a section is a `/* ---- name ---- */` comment, a comment block
becomes prose, declarations and macros become C code blocks. Preprocessor boilerplate
(include guards, #include, extern "C", visibility pragmas) is left out."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ROOT / "include" / "tg"
OUT = ROOT / "docs" / "api.md"
TG_H = HEADERS / "tg.h"
TUTORIAL = ROOT / "examples" / "tutorial.c"
TUTORIAL_BEGIN = " * ---- tutorial: examples/tutorial.c (ctest builds and runs it) ----\n"
TUTORIAL_END = " * ---- end of tutorial ----\n"


def with_tutorial():
    """tg.h with its tutorial section replaced by examples/tutorial.c."""
    header = TG_H.read_text()
    a = header.index(TUTORIAL_BEGIN) + len(TUTORIAL_BEGIN)
    b = header.index(TUTORIAL_END)
    code = TUTORIAL.read_text().rstrip("\n").split("\n")
    if any("*/" in line or "/*" in line for line in code):
        raise SystemExit("examples/tutorial.c: use // comments (it is shown inside a /* */ block)")
    if any(len(line) > 95 for line in code):
        raise SystemExit("examples/tutorial.c: keep lines within 95 columns (tg.h indents them by 5)")
    body = " *\n" + "".join((" *   " + line).rstrip() + "\n" for line in code) + " *\n"
    return header[:a] + body + header[b:]

BOILERPLATE = re.compile(
    r'^\s*(#\s*(ifndef|ifdef|endif|include|pragma)\b|#\s*define\s+TG_\w+_H\s*$|'
    r'extern "C" \{|\}\s*$|TG_API_BEGIN|TG_API_END)')
SECTION = re.compile(r'^/\* ---- (.*?)(?: ----)?\s*(\*/)?\s*$')
FUNC = re.compile(r'\b(tg_[a-z0-9_]+)\s*\(')
MACRO = re.compile(r'^#\s*define\s+(TG_[A-Z0-9_]+)')


def header_order():
    """tg.h's include order, then any header it does not include."""
    tg_h = (HEADERS / "tg.h").read_text()
    names = re.findall(r'#include "([a-z_]+\.h)"', tg_h)
    rest = sorted(p.name for p in HEADERS.glob("*.h") if p.name not in names + ["tg.h"])
    return names + rest


def strip_cplusplus(lines):
    """Drops the `#ifdef __cplusplus ... #endif` wrappers."""
    out, skip = [], 0
    for line in lines:
        if re.match(r'\s*#\s*ifdef __cplusplus', line):
            skip = 1
            continue
        if skip:
            if re.match(r'\s*#\s*endif', line):
                skip = 0
            continue
        out.append(line)
    return out


def comment_text(block):
    text = []
    for line in block:
        line = re.sub(r'^\s*/\*+ ?', '', line)
        line = re.sub(r'\s*\*+/\s*$', '', line)
        line = re.sub(r'^\s*\* ?', '', line)
        text.append(line.rstrip())
    return "\n".join(text).strip()


def render(name):
    lines = strip_cplusplus((HEADERS / name).read_text().splitlines())
    out, code, names = [], [], []
    in_macro = False
    i = 0

    def flush():
        while code and not code[-1].strip():
            code.pop()
        if code:
            out.append("```c\n" + "\n".join(code) + "\n```\n")
            code.clear()

    # The opening comment is the header's summary.
    if lines and lines[0].startswith("/*"):
        j = 0
        while "*/" not in lines[j]:
            j += 1
        summary = comment_text(lines[: j + 1])
        summary = summary.removeprefix("tg — ").strip()
        first, _, rest = summary.partition("\n")
        title, _, tail = first.partition(". ")
        out.append(f"## {name}: {title.rstrip('.:')}\n")
        more = (tail + "\n" + rest).strip()
        if more:
            out.append(prose(more))
        i = j + 1
    while i < len(lines):
        line = lines[i]
        if BOILERPLATE.match(line):
            i += 1
            continue
        m = SECTION.match(line)
        if m:
            flush()
            block = [line]
            while "*/" not in lines[i]:
                i += 1
                block.append(lines[i])
            text = comment_text(block)
            title, _, more = text.partition("\n")
            out.append(f"### {m.group(1).strip().rstrip('-').strip()}\n")
            more = more.strip()
            if more:
                out.append(prose(more))
            i += 1
            continue
        if line.lstrip().startswith("/*") and not code_continues(code):
            # A comment of its own: prose (ends the current code block).
            flush()
            block = [line]
            while "*/" not in lines[i]:
                i += 1
                block.append(lines[i])
            out.append(prose(comment_text(block)))
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        code.append(line.rstrip())
        decl = line.split("/*")[0]
        if not in_macro and not line.lstrip().startswith("typedef"):
            names += [n for n in FUNC.findall(decl) if not decl.lstrip().startswith(n)]
            names += [n for n in FUNC.findall(decl) if decl.lstrip().startswith(n)]
        names += [m for m in MACRO.findall(line) if not m.startswith("TG__")]
        in_macro = line.rstrip().endswith("\\")
        i += 1
    flush()
    return out, names


def prose(text):
    """Comment text as markdown; a comment with indented lines (formulas, code) stays verbatim."""
    if any(line.startswith("  ") for line in text.splitlines()):
        return "```text\n" + text + "\n```\n"
    return text + "\n"


def code_continues(code):
    """A comment inside a multi-line declaration (struct fields) stays in the code block."""
    depth = sum(l.count("{") - l.count("}") for l in code)
    return depth > 0


def generate():
    parts = ["# tg API reference\n",
             "Generated from `include/tg/*.h` by `scripts/gen-api-doc.py` (a test checks it is\n"
             "current; edit the headers, then rerun the script). Include `<tg/tg.h>`; its opening\n"
             "comment is a worked tutorial, also built and run as `examples/tutorial.c`.\n"]
    index, bodies = [], []
    for name in header_order():
        body, names = render(name)
        bodies += body
        seen = []
        for n in names:
            if n not in seen:
                seen.append(n)
        if seen:
            index.append(f"- **{name}**: " + ", ".join(f"`{n}`" for n in seen))
    parts.append("## Index\n")
    parts.append("\n".join(index) + "\n")
    parts += bodies
    return "\n".join(parts).rstrip() + "\n"


def main():
    header = with_tutorial()
    if "--check" in sys.argv[1:]:
        stale = []
        if TG_H.read_text() != header:
            stale.append("include/tg/tg.h (its tutorial differs from examples/tutorial.c)")
        if not OUT.exists() or OUT.read_text() != generate():
            stale.append("docs/api.md")
        for name in stale:
            print(f"{name} is stale: run scripts/gen-api-doc.py", file=sys.stderr)
        return 1 if stale else 0
    TG_H.write_text(header)
    OUT.write_text(generate())
    return 0


if __name__ == "__main__":
    sys.exit(main())
