"""PyTorch's side of bench/bmm_bench.c: torch.matmul at GPT's attention shapes, F32,
forward and forward + backward, median ms over alternating rounds per thread count.

    python bench/bmm_torch.py [--threads 1,2] [--iters N] [--sizes BxHxTxD]
"""
import argparse
import statistics
import time

import torch


def time_once(a, b, backward):
    t0 = time.perf_counter()
    y = torch.matmul(a, b)
    if backward:
        y.sum().backward()
    return (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--sizes", default="8x4x256x64")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    B, H, T, D = (int(s) for s in args.sizes.split("x"))
    g = torch.Generator().manual_seed(0)
    q = (torch.rand(B, H, T, D, generator=g) * 2 - 1).requires_grad_()
    k = (torch.rand(B, H, T, D, generator=g) * 2 - 1).requires_grad_()
    p = torch.rand(B, H, T, T, generator=g).requires_grad_()
    calls = [("q @ k^T", q, k.transpose(-2, -1)), ("p @ v", p, k)]
    print(f"torch {torch.__version__}, sizes B={B} H={H} T={T} D={D}, F32, median ms of {args.iters} rounds")
    print(f"{'call':8} {'thr':4} {'forward':>10} {'fwd+bwd':>14}")
    for name, a, b in calls:
        for t in threads:
            torch.set_num_threads(t)
            time_once(a, b, True)
        s = {t: ([], []) for t in threads}
        for _ in range(args.iters):
            for t in threads:
                torch.set_num_threads(t)
                s[t][0].append(time_once(a, b, False))
                s[t][1].append(time_once(a, b, True))
        for t in threads:
            print(f"{name:8} {t:<4} {statistics.median(s[t][0]):10.3f} {statistics.median(s[t][1]):14.3f}")


if __name__ == "__main__":
    main()
