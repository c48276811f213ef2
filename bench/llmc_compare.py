#!/usr/bin/env python3
"""tg's GPT-2 (examples/train_gpt.c) against llm.c's CPU reference (karpathy/llm.c,
train_gpt2.c): the same initial weights and the same batches, the first 10 AdamW steps'
losses compared (1e-5 relative in F32), and each side's ms per step.

  bench/llmc_compare.py LLMC_CHECKOUT [--build build] [--layers 4 --heads 4 --channels 256
                        --seq 256 --batch 8] [--steps 10] [--threads 1] [--text PATH]

tg writes llm.c's files (train_gpt --llmc-dir: model.bin with its initial weights, train.bin
and val.bin with the tokens of the text) and trains --steps steps with --sequential (llm.c's
batch order). This script copies train_gpt2.c and llmc/ from the checkout into a temporary
directory and patches that copy only: the model and token paths, B, T, the step count, the
train loader's shuffling off (tg follows llm.c's unshuffled order) and the loss printed with
9 decimals instead of 6. It builds it with the checkout's CPU flags (-Ofast -march=native,
OpenMP when the compiler has it), runs it with OMP_NUM_THREADS=--threads and compares.
None of llm.c's code goes into tg: it runs here, from the checkout given.
Exit status 0 when every loss agrees, 1 otherwise.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOL = 1e-5


def patch(src, a, d):
    """train_gpt2.c's main, pointed at tg's files and sizes."""
    subs = [
        (r'gpt2_build_from_checkpoint\(&model, "gpt2_124M.bin"\)',
         'gpt2_build_from_checkpoint(&model, "%s/model.bin")' % d),
        (r'const char\* train_tokens = [^;]*;', 'const char* train_tokens = "%s/train.bin";' % d),
        (r'const char\* val_tokens = [^;]*;', 'const char* val_tokens = "%s/val.bin";' % d),
        (r'int B = 4;', 'int B = %d;' % a.batch),
        (r'int T = 64;', 'int T = %d;' % a.seq),
        (r'dataloader_init\(&train_loader, train_tokens, B, T, 0, 1, 1\);',
         'dataloader_init(&train_loader, train_tokens, B, T, 0, 1, 0);'),
        (r'for \(int step = 0; step <= 40; step\+\+\)',
         'for (int step = 0; step < %d; step++)' % a.steps),
        (r'train loss %f \(took', 'train loss %.9f (took'),
    ]
    for pattern, repl in subs:
        src, n = re.subn(pattern, lambda _m: repl, src)
        if n != 1:
            sys.exit("llmc_compare.py: train_gpt2.c has changed: '%s' matched %d times"
                     % (pattern, n))
    return src


def build_llmc(checkout, work, a, d):
    for name in ("train_gpt2.c",):
        with open(os.path.join(checkout, name)) as f:
            src = patch(f.read(), a, d)
        with open(os.path.join(work, name), "w") as f:
            f.write(src)
    shutil.copytree(os.path.join(checkout, "llmc"), os.path.join(work, "llmc"))
    cc = os.environ.get("CC", "cc")
    base = [cc, "-Ofast", "-march=native", "-Wno-unused-result", "train_gpt2.c", "-lm",
            "-o", "train_gpt2"]
    omp = subprocess.run(base[:1] + ["-fopenmp", "-DOMP"] + base[1:], cwd=work,
                         capture_output=True, text=True)
    if omp.returncode != 0:
        print("llmc_compare.py: no OpenMP build (%s); building without" %
              omp.stderr.strip().splitlines()[-1:], file=sys.stderr)
        subprocess.run(base, cwd=work, check=True)
    return os.path.join(work, "train_gpt2"), omp.returncode == 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkout")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    for name, default in (("layers", 4), ("heads", 4), ("channels", 256), ("seq", 256),
                          ("batch", 8), ("steps", 10), ("threads", 1)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    a = p.parse_args()
    train_gpt = os.path.join(a.build, "train_gpt")
    with tempfile.TemporaryDirectory(prefix="llmc_compare.") as work:
        d = os.path.join(work, "files")
        os.makedirs(d)
        csv = os.path.join(work, "tg.csv")
        tg = subprocess.run([train_gpt, "--layers", str(a.layers), "--heads", str(a.heads),
                             "--channels", str(a.channels), "--seq", str(a.seq), "--batch",
                             str(a.batch), "--steps", str(a.steps), "--lr", "1e-4",
                             "--sequential", "--llmc-dir", d, "--csv", csv, "--text", a.text,
                             "--threads", str(a.threads), "--quiet"],
                            capture_output=True, text=True)
        if tg.returncode != 0:
            sys.exit("llmc_compare.py: train_gpt failed:\n" + tg.stdout + tg.stderr)
        with open(csv) as f:
            tg_losses = [float(r.split(",")[1]) for r in f.read().splitlines()[1:]]
        tg_ms = float(re.search(r"median ([.0-9]+) ms/step", tg.stdout).group(1))
        exe, omp = build_llmc(a.checkout, work, a, d)
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        out = subprocess.run([exe], cwd=work, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("llmc_compare.py: llm.c failed:\n" + out.stdout + out.stderr)
        steps = re.findall(r"step (\d+): train loss ([-.0-9naif]+) \(took ([.0-9]+) ms\)",
                           out.stdout)
        llmc_losses = [float(s[1]) for s in steps]
        llmc_ms = statistics.median(float(s[2]) for s in steps[1:] or steps)
    print("config: L%d H%d C%d T%d B%d, vocab 256 (bytes of %s), %d AdamW steps (lr 1e-4), "
          "%d thread(s)%s" % (a.layers, a.heads, a.channels, a.seq, a.batch, a.text, a.steps,
                              a.threads, "" if omp else ", llm.c without OpenMP"))
    print("step  tg loss       llm.c loss    relative")
    worst = 0.0
    for i, (t, l) in enumerate(zip(tg_losses, llmc_losses)):
        r = abs(t - l) / abs(l)
        worst = max(worst, r)
        print("%4d  %.9f  %.9f  %.2g" % (i, t, l, r))
    ok = len(tg_losses) == len(llmc_losses) == a.steps and worst <= TOL
    print("worst %.2g relative (bar %g): %s" % (worst, TOL, "agree" if ok else "DIFFER"))
    print("median ms/step (first step left out): tg %.1f, llm.c %.1f (tg %.2fx llm.c's speed)"
          % (tg_ms, llmc_ms, llmc_ms / tg_ms))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
