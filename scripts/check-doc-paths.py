#!/usr/bin/env python3
"""Fails when the documentation names a repository path or a source file that does not
exist, so a file that moves or goes cannot leave the docs pointing at it.

  scripts/check-doc-paths.py            check README.md, docs/*.md, src/**/README.md and the
                                        comments of include/tg/*.h, src/ops/def/*.def and
                                        the C/C++/CUDA sources of src/, tests/, bench/,
                                        examples/ and fuzz/
  scripts/check-doc-paths.py FILE...    check these files instead (ctest doc_paths_fails
                                        runs it on a fixture to show that it fails)

What counts as a mention:
- a path from the top (src/, include/tg/, tests/, scripts/, bench/, examples/, docs/,
  cmake/, fuzz/) that is not part of a longer path (build/bench/x is a build output);
- a path as the sources #include it, from src/ (ops/backend.h, tensor/, cpu/cpu_iter.c)
  or include/ (tg/cuda.h): it must exist below src/, src/ops/, src/ops/cuda/ or include/;
- a bare file name (lifetime.c, math.cuh, ...): some file in the tree has that name (a
  standard or library header such as math.h is not a tg file and passes);
- in Markdown, a relative link target, against the linking file's folder.
A trailing `:line` is not part of a path; a glob (src/ops/def/*.def) must match something.
Prints each missing path with where it was named; exits 1 if there is any."""
import glob
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A path character before a match makes it part of a longer path (or a URL, a placeholder).
NOT_AFTER = r"(?<![\w./\-<>$~@])"
# A path ends on a name character, a glob star or a folder's slash, so a sentence's full
# stop or an ellipsis is not part of it.
REST = r"/(?:[\w.*\-/]*[\w*/])?"
TOP = re.compile(NOT_AFTER + r"((?:src|include/tg|tests|scripts|bench|examples|docs|cmake|fuzz)"
                 + REST + ")")
INNER = re.compile(NOT_AFTER + r"((?:tensor|autograd|ops|nn|cpu|cuda|emu|def|tg)" + REST + ")")
INNER_BASES = ("src", "src/ops", "src/ops/cuda", "include")
BARE = re.compile(NOT_AFTER + r"([\w\-]+\.(?:c|h|cu|cuh|cpp|def|sh|py|md|cmake))\b(?![\w/])")
# Bare names that are not tg's files: the reader's own (app.c, an extension's my_ext.c), the
# PyTorch tutorial's that docs/extensions.md maps to tg's, and headers of C, POSIX and the
# libraries tg uses (a comment may well say why it needs no math.h).
NOT_TGS = {"app.c", "my_ext.c", "my_ext.cu", "src.c", "setup.py", "check.py", "grad_check.py",
           "benchmark.py", "lltm.cpp", "lltm_cuda.cpp", "lltm_cuda_kernel.cu"} | {h + ".h" for h in (
    "assert complex ctype errno fenv float inttypes limits locale math setjmp signal "
    "stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn string "
    "tgmath threads time uchar wchar wctype pthread unistd dlfcn sched omp blis "
    "criterion cuda cuda_runtime cublas_v2 cuda_fp16 immintrin cpuid").split()}
# gpt (issue 25): karpathy/llm.c's files, which docs/gpt.md and examples/gpt/ compare against
NOT_TGS |= {"llm.c", "train_gpt2.c", "train_gpt2.py", "train_gpt2.cu"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def default_files():
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted((ROOT / "src").glob("**/README.md"))
    files += sorted((ROOT / "include" / "tg").glob("*.h"))
    files += sorted((ROOT / "src" / "ops" / "def").glob("*.def"))
    for folder in ("src", "tests", "bench", "examples", "fuzz"):
        files += sorted(p for p in (ROOT / folder).glob("**/*")
                        if p.suffix in (".c", ".h", ".cu", ".cuh", ".cpp"))
    return files


def tree_names():
    """The names of the files in the tree (build folders and dot folders left out)."""
    names = set()
    for _, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        names.update(files)
    return names


def texts(path):
    """(line number, text) pieces to scan: the whole of a Markdown file, a C file's comments."""
    source = path.read_text()
    if path.suffix == ".md":
        yield from enumerate(source.split("\n"), 1)
        return
    for m in COMMENT.finditer(source):
        first = source.count("\n", 0, m.start()) + 1
        for i, line in enumerate(m.group(0).split("\n")):
            yield first + i, line


def exists(rel, base=ROOT):
    if any(c in rel for c in "*?["):
        return bool(glob.glob(str(base / rel), recursive=True))
    return (base / rel).exists()


def clean(token):
    """Drops Markdown's bold marker (`src/x.c**`) that the glob characters let in."""
    while token.endswith("**") and not token.endswith("/**"):
        token = token.rstrip("*").rstrip(".")
    return token


def check(path, names):
    missing = []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for line_no, text in texts(path):
        found = [t for t in map(clean, TOP.findall(text)) if not exists(t)]
        found += [t for t in map(clean, INNER.findall(text))
                  if not any(exists(t, ROOT / b) for b in INNER_BASES)]
        found += [t for t in BARE.findall(text) if t not in names and t not in NOT_TGS]
        if path.suffix == ".md":
            for target in LINK.findall(text):
                target = target.split("#")[0]  # an anchor alone is this page
                if target and not re.match(r"[a-z]+:", target) and not exists(target, path.parent):
                    found.append(target)
        missing += [(f"{where}:{line_no}", t) for t in dict.fromkeys(found)]
    return missing


def main(argv):
    files = [Path(a).resolve() for a in argv] or default_files()
    names = tree_names()
    missing = []
    for f in files:
        missing += check(f, names)
    for where, rel in missing:
        print(f"{where}: {rel} does not exist")
    if missing:
        print(f"check-doc-paths: {len(missing)} missing: " + ", ".join(r for _, r in missing))
        return 1
    print(f"check-doc-paths: every path named in {len(files)} files exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
