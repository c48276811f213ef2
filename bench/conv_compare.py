#!/usr/bin/env python3
"""conv2d on the CPU (or --device cuda), tg against PyTorch eager (oneDNN; cuDNN on CUDA), in
alternating rounds: the issue-24 comparison. Each round runs build/bench/conv_bench --json (tg's engine, tg_conv_engine(); where
that is oneDNN, again with TG_ONEDNN_LIBRARY=off for tg's own im2col + GEMM, the "im2col"
columns), then bench/pytorch_conv.py under
every Python given (default: the first of $TORCHVENV/bin/python, ${TMPDIR:-/tmp}/torchvenv/bin/python
that imports torch); each number is the smallest of its rounds' medians.

  bench/conv_compare.py [--build build] [--iters 5] [--rounds 3] [--threads 1,2]
                        [--shapes 8x64x56,8x128x28,8x256x14] [--python PY] [--jsonl FILE]
                        [--device cuda]

Table: per shape (batch x in x out x size) and threads, forward and forward+backward
milliseconds of each, the ratio PyTorch / tg (above 1: tg faster; goal >= 1.0), tg's
forward+backward GFLOP/s and the GEMM engine's rate on the forward's product alone.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def find_python(given):
    candidates = given or [os.path.join(d, "bin", "python") for d in
                           (os.environ.get("TORCHVENV", ""),
                            os.path.join(os.environ.get("TMPDIR", "/tmp"), "torchvenv"),
                            "/tmp/torchvenv") if d]
    for py in candidates:
        if os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def run(cmd, sink, env=None, impl=None):
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env) if env else None)
    if out.returncode != 0:
        sys.exit(f"conv_compare.py: {cmd[0]} exited with {out.returncode}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    for r in rows:
        r["impl"] = impl or r["impl"]
    if sink:
        for r in rows:
            sink.write(json.dumps(r) + "\n")
        sink.flush()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--shapes", default="8x64x56,8x128x28,8x256x14")
    p.add_argument("--python", action="append", help="a Python with torch (default: found)")
    p.add_argument("--jsonl", help="also write every result line here, as it comes")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: both on the GPU")
    args = p.parse_args()
    bench = os.path.join(args.build, "bench", "conv_bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"conv_compare.py: {bench} not found; build tg first")
    py = find_python(args.python)
    if not py:
        print("# no python with torch found: PyTorch columns left empty", file=sys.stderr)
    common = ["--iters", str(args.iters), "--threads", args.threads, "--shapes", args.shapes,
              "--device", args.device]
    sink = open(args.jsonl, "w") if args.jsonl else None
    best = {}
    for _ in range(args.rounds):
        rows = run([bench, "--json"] + common, sink)
        engine = rows[0].get("engine", "") if rows else ""
        if args.device == "cpu" and not engine.startswith("im2col"):  # tg's own path too
            rows += run([bench, "--json"] + common, sink, {"TG_ONEDNN_LIBRARY": "off"}, "im2col")
        if py:
            rows += run([py, os.path.join(HERE, "pytorch_conv.py")] + common, sink)
        for r in rows:
            key = (r["batch"], r["in"], r["out"], r["size"], r["threads"], r["impl"])
            old = best.setdefault(key, dict(r))
            for f in ("forward_us", "forward_backward_us", "gemm_us"):
                if f in r:
                    old[f] = min(old[f], r[f])
    if sink:
        sink.close()
    print(f"conv2d 3x3 padding 1, F32, {args.device}; best of {args.rounds} rounds of medians of "
          f"{args.iters}; PyTorch: {py or 'none'}")
    engine = next((r.get("engine") for k, r in best.items() if k[5] == "tg"), "?")
    print(f"tg's convolutions: {engine}; \"im2col\": the same build with TG_ONEDNN_LIBRARY=off")
    print("| N x Cin x Cout x HW | thr | tg fwd ms | PT fwd ms | fwd PT/tg | tg f+b ms | "
          "PT f+b ms | f+b PT/tg | im2col f+b ms | f+b PT/im2col | tg f+b GF/s | GEMM GF/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    misses = []
    for key in sorted(k for k in best if k[5] == "tg"):
        n, c, co, hw, t, _ = key
        tg = best[key]
        pt = best.get((n, c, co, hw, t, "pytorch"))
        own = best.get((n, c, co, hw, t, "im2col"))
        flops = 2.0 * n * c * co * 9 * hw * hw
        cells = [f"{n}x{c}x{co}x{hw}", str(t), f"{tg['forward_us'] / 1e3:.2f}",
                 f"{pt['forward_us'] / 1e3:.2f}" if pt else "-",
                 f"{pt['forward_us'] / tg['forward_us']:.2f}" if pt else "-",
                 f"{tg['forward_backward_us'] / 1e3:.2f}",
                 f"{pt['forward_backward_us'] / 1e3:.2f}" if pt else "-",
                 f"{pt['forward_backward_us'] / tg['forward_backward_us']:.2f}" if pt else "-",
                 f"{own['forward_backward_us'] / 1e3:.2f}" if own else "-",
                 f"{pt['forward_backward_us'] / own['forward_backward_us']:.2f}"
                 if pt and own else "-",
                 f"{3 * flops / tg['forward_backward_us'] / 1e3:.1f}",
                 f"{flops / tg['gemm_us'] / 1e3:.1f}"]
        print("| " + " | ".join(cells) + " |")
        if pt and pt["forward_backward_us"] < tg["forward_backward_us"]:
            misses.append(f"{cells[0]} {t}t: {pt['forward_backward_us'] / tg['forward_backward_us']:.2f}")
    print("misses (forward+backward below 1.0x PyTorch): " + (", ".join(misses) or "none"))


if __name__ == "__main__":
    main()
