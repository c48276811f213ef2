#!/usr/bin/env python3
"""PyTorch's side of bench/conv_compare.py: conv2d 3x3, padding 1, F32 on the CPU (oneDNN
where torch has it) or on CUDA (cuDNN), forward and forward + backward (dx, dw, db from
y.sum()), median of --iters runs after one warm-up; one JSON line per shape and thread count,
in conv_bench's format (bench/conv_bench.c --json). On CUDA each run is timed with CUDA events
on the current stream, as conv_bench times tg's.

  pytorch_conv.py [--iters N] [--threads 1,2] [--shapes 8x64x56,8x1x16x28,...] [--device cuda]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        dims = [int(d) for d in item.split("x")]
        if len(dims) == 3:
            dims = [dims[0], dims[1], dims[1], dims[2]]
        if len(dims) != 4 or min(dims) < 1:
            raise argparse.ArgumentTypeError(f"bad shape '{item}'")
        shapes.append(dims)
    return shapes


def median_us(fn, iters, cuda):
    fn()
    runs = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(runs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--shapes", type=parse_shapes, default=parse_shapes("8x64x56,8x128x28,8x256x14"))
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    for n, c, co, hw in args.shapes:
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            g = torch.Generator().manual_seed(1)
            x = torch.randn(n, c, hw, hw, generator=g).to(device).requires_grad_()
            w = torch.randn(co, c, 3, 3, generator=g).to(device).requires_grad_()
            b = torch.randn(co, generator=g).to(device).requires_grad_()

            def forward():  # recorded for backward, as tg's forward step is
                F.conv2d(x, w, b, padding=1)

            def forward_backward():
                x.grad = w.grad = b.grad = None
                F.conv2d(x, w, b, padding=1).sum().backward()

            print(json.dumps({"impl": "pytorch", "version": torch.__version__, "batch": n,
                              "in": c, "out": co, "size": hw, "threads": threads,
                              "device": args.device,
                              "forward_us": median_us(forward, args.iters, cuda),
                              "forward_backward_us": median_us(forward_backward, args.iters, cuda),
                              "iters": args.iters}), flush=True)


if __name__ == "__main__":
    main()
