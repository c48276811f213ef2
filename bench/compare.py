#!/usr/bin/env python3
"""Runs the LLTM benchmark for tg (fused, composed, GEMMs alone) and PyTorch and prints
them side by side, one row per (size, threads, gradient mode).

  bench/compare.py                        # build/bench/lltm_bench, all sizes, 1 and 2 threads
  bench/compare.py --build build-rel --iters 50 --sizes 16x32x128 --threads 1
  bench/compare.py --jsonl results.jsonl  # also keep every JSON line

Columns: median forward / backward microseconds of each implementation; "vs pytorch" is
PyTorch's forward+backward time over tg's (above 1: tg is faster); "fused/gemms" is the
fused op's forward+backward over that of its GEMMs alone; "saved" is the bytes the fused
graph keeps for backward over the composed graph's. A second table gives each tg
implementation's 1-thread time over its time with more threads.

With --repeat N both programs run N times, alternating, and each number is the smallest of
its N medians: run-to-run drift on a shared or virtual machine (often 10-20% here) then
biases neither side.

PyTorch runs through bench/pytorch_lltm.py with the first python that imports torch
(--python, then /usr/bin/python3, then python3); without one the PyTorch columns are empty.
Both processes inherit this environment, so BLIS settings (BLIS_ARCH_TYPE, ...) apply to
both: Debian's PyTorch uses the same BLIS through libblas.so.3.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_SIZES = "16x32x128,64x1024x128,128x256x512,256x1024x1024"


def run_jsonl(cmd, env=None):
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"compare.py: {cmd[0]} exited with {out.returncode}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def python_with_torch(preferred):
    candidates = [preferred] if preferred else ["/usr/bin/python3", shutil.which("python3")]
    for py in candidates:
        if py and os.path.exists(py):
            ok = subprocess.run([py, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL).returncode == 0
            if ok:
                return py
    return None


def machine():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blis = {k: v for k, v in os.environ.items() if k.startswith("BLIS_")}
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}" + (
        f", {' '.join(f'{k}={v}' for k, v in sorted(blis.items()))}" if blis else "")


def fmt_pair(r):
    return f"{r['forward_us']:9.1f} /{r['backward_us']:9.1f}" if r else " " * 20


def total(r):
    return r["forward_us"] + r["backward_us"] if r else None


def ratio(a, b, fmt="{:5.2f}x"):
    return fmt.format(a / b) if a and b else "     -"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="tg build directory holding bench/lltm_bench (default: build/)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--sizes", default=DEFAULT_SIZES)
    p.add_argument("--modes", default="params,all")
    p.add_argument("--python", help="python interpreter with torch for the PyTorch runs")
    p.add_argument("--no-pytorch", action="store_true")
    p.add_argument("--repeat", type=int, default=1,
                   help="run both N times, alternating; keep each number's smallest median")
    p.add_argument("--jsonl", help="also write every result line to this file")
    args = p.parse_args()

    bench = os.path.join(args.build, "bench", "lltm_bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"compare.py: {bench} not found; build tg first (cmake --build {args.build})")
    common = ["--iters", str(args.iters), "--threads", args.threads, "--sizes", args.sizes,
              "--modes", args.modes]
    py = None if args.no_pytorch else python_with_torch(args.python)
    if not py and not args.no_pytorch:
        print("# no python with torch found: PyTorch columns left empty", file=sys.stderr)
    rows = []
    for _ in range(max(1, args.repeat)):
        rows += run_jsonl([bench] + common)
        if py:
            rows += [r for r in run_jsonl([py, os.path.join(HERE, "pytorch_lltm.py")] + common)
                     if "skipped" not in r]
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    table = {}
    for r in rows:
        key = (r["batch"], r["features"], r["state"], r["threads"], r["mode"])
        best = table.setdefault(key, {}).setdefault(r["impl"], dict(r))
        for field in ("forward_us", "backward_us"):
            best[field] = min(best[field], r[field])

    print(f"machine: {machine()}")
    runs = f", best of {args.repeat} runs" if args.repeat > 1 else ""
    print(f"median us over {args.iters} iterations{runs}, F32, CPU; forward / backward")
    head = (f"{'B x F x S':>16} {'thr':>3} {'mode':<6} | {'tg fused':^20} | {'tg composed':^20} | "
            f"{'pytorch':^20} | {'tg gemms':^20} | fused vs pytorch | composed vs pytorch | "
            f"fused/gemms | saved fused/composed")
    print(head)
    print("-" * len(head))
    for key in sorted(table, key=lambda k: (k[0] * k[1] * k[2], k[3], k[4] != "params")):
        b, f, s, thr, mode = key
        t = table[key]
        fused, comp, pt, gemms = (t.get(n) for n in ("tg_fused", "tg_composed", "pytorch",
                                                     "tg_gemms"))
        saved = ratio(fused and fused["saved_bytes"], comp and comp["saved_bytes"], "{:6.2f}")
        print(f"{b:>5}x{f:>5}x{s:>5} {thr:>3} {mode:<6} | {fmt_pair(fused)} | {fmt_pair(comp)} | "
              f"{fmt_pair(pt)} | {fmt_pair(gemms)} | {ratio(total(pt), total(fused)):>16} | "
              f"{ratio(total(pt), total(comp)):>19} | {ratio(total(fused), total(gemms), '{:5.2f}'):>11} | "
              f"{saved:>20}")

    threads = sorted({k[3] for k in table})
    if len(threads) > 1:
        print(f"\nspeed-up of {threads[-1]} threads over 1 thread (1-thread time / "
              f"{threads[-1]}-thread time, forward+backward)")
        print(f"{'B x F x S':>16} {'mode':<6} | {'tg fused':>8} | {'tg composed':>11} | {'pytorch':>7}")
        for key in sorted({(k[0], k[1], k[2], k[4]) for k in table},
                          key=lambda k: (k[0] * k[1] * k[2], k[3] != "params")):
            b, f, s, mode = key
            one, many = table.get((b, f, s, 1, mode), {}), table.get((b, f, s, threads[-1], mode), {})
            cells = [ratio(total(one.get(n)), total(many.get(n)))
                     for n in ("tg_fused", "tg_composed", "pytorch")]
            print(f"{b:>5}x{f:>5}x{s:>5} {mode:<6} | {cells[0]:>8} | {cells[1]:>11} | {cells[2]:>7}")


if __name__ == "__main__":
    main()
