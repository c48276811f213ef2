#!/usr/bin/env python3
"""PyTorch's side of bench/attention_bench.c: F.scaled_dot_product_attention (torch's own
fused CPU kernel) and the same attention composed of eager ops (q @ k^T * scale, masked_fill,
softmax, @ v), F32 on the CPU, causal, at the GPT shapes attention_bench times (B x H x T x D:
8x4x256x64 and 4x12x64x64), forward and forward + backward (the gradients of q, k and v),
alternating rounds, median ms, 1 and 2 threads (torch.set_num_threads). Without torch it prints
one line saying so and exits 0.

  /tmp/torchvenv/bin/python bench/pytorch_attention.py [--iters 9] [--threads 1,2]
                                                       [--shapes 8x4x256x64,4x12x64x64]
"""
import argparse
import importlib.util
import statistics
import sys
import time


def composed(F, torch, q, k, v):
    t = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    mask = torch.ones(t, k.shape[-2], dtype=torch.bool).tril()
    return F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=9)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", default="8x4x256x64,4x12x64x64")
    a = ap.parse_args()
    if importlib.util.find_spec("torch") is None:
        print("pytorch_attention: skipped (no torch in %s)" % sys.executable)
        return 0
    import torch
    import torch.nn.functional as F
    fns = {"sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           "composed": lambda q, k, v: composed(F, torch, q, k, v)}
    print("torch %s, F32, CPU, causal: ms (median of %d alternating rounds)" % (torch.__version__, a.iters))
    print("%-12s %3s %8s %9s %8s %9s" % ("BxHxTxD", "thr", "fwd sdpa", "composed", "f+b sdpa", "composed"))
    for shape in a.shapes.split(","):
        b, h, t, d = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(1)
        qkv = [torch.randn(b, h, t, d, generator=g, requires_grad=True) for _ in range(3)]
        print(shape)
        for thr in (int(x) for x in a.threads.split(",")):
            torch.set_num_threads(thr)
            row = []
            for backward in (False, True):
                times = {n: [] for n in fns}
                for it in range(a.iters + 1):  # the first round warms up
                    for n, fn in fns.items():
                        t0 = time.perf_counter()
                        y = fn(*qkv)
                        if backward:
                            y.backward(torch.ones_like(y))
                            for x in qkv:
                                x.grad = None
                        if it:
                            times[n].append((time.perf_counter() - t0) * 1e3)
                row += [statistics.median(times["sdpa"]), statistics.median(times["composed"])]
            print("%-12s %3d %8.2f %9.2f %8.2f %9.2f" % ("", thr, *row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
