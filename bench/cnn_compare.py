#!/usr/bin/env python3
"""examples/train_cnn.c's training step against the same model in PyTorch eager, in
alternating rounds (issue 24: "the example's training step >= 1.0x PyTorch 2 eager"). Each
round runs, per thread count: train_cnn composed, train_cnn --fused (conv+BN fused), then
this script's PyTorch side (--torch-side) under a Python with torch. Every run trains --steps
SGD steps (momentum 0.9, lr 0.05) of --batch 28x28 images and reports its mean ms per step
over all of them (train_cnn's own "ms/step", which leaves out data loading and evaluation;
the PyTorch side times the same steps the same way, on random images). Each number is the
smallest of its rounds.

  bench/cnn_compare.py [--build build] [--steps 200] [--batch 64] [--rounds 3]
                       [--threads 1,2] [--python PY] [--device cuda]
                       [--data DIR] [--train-size 10000]
--data and --train-size go to train_cnn (its images; the step's cost does not depend on how
many there are).

--device cuda trains all three on the GPU (train_cnn synchronizes after each step; the
PyTorch side synchronizes before reading its clock).
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def torch_side(steps, batch, threads, c1, c2, device):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    class CNN(nn.Module):  # examples/cnn/cnn_model.h's model
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, c1, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c1)
            self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c2)
            self.fc = nn.Linear(c2 * 7 * 7, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
            return self.fc(x.flatten(1))

    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = CNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs = torch.rand(8, batch, 1, 28, 28).to(device)
    ys = torch.randint(0, 10, (8, batch)).to(device)
    sync()
    t0 = time.perf_counter()
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[s % 8]), ys[s % 8])
        loss.backward()
        opt.step()
    sync()
    print(f"{1e3 * (time.perf_counter() - t0) / steps:.3f} ms/step")


def find_python(given):
    candidates = [given] if given else [
        os.path.join(d, "bin", "python") for d in (
            os.environ.get("TORCHVENV", ""), os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                          "torchvenv"), "/tmp/torchvenv") if d]
    for py in candidates:
        if os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def ms_per_step(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    m = re.search(r"([0-9.]+) ms/step", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"cnn_compare.py: {' '.join(cmd)} exited with {out.returncode}:\n{out.stdout}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--c1", type=int, default=8)
    p.add_argument("--c2", type=int, default=16)
    p.add_argument("--python")
    p.add_argument("--data", help="train_cnn's --data (default: its own)")
    p.add_argument("--train-size", type=int, default=10000)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--torch-side", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if args.torch_side:
        torch_side(args.steps, args.batch, threads[0], args.c1, args.c2, args.device)
        return
    prog = os.path.join(args.build, "train_cnn")
    if not os.access(prog, os.X_OK):
        sys.exit(f"cnn_compare.py: {prog} not found; build tg first")
    py = find_python(args.python)
    if not py:
        print("# no python with torch found: the PyTorch column is left empty", file=sys.stderr)
    best = {}
    for _ in range(args.rounds):
        for t in threads:
            common = ["--steps", str(args.steps), "--batch", str(args.batch), "--threads", str(t),
                      "--c1", str(args.c1), "--c2", str(args.c2), "--quiet",
                      "--train-size", str(args.train_size), "--test-size", "100",
                      "--device", args.device] + (["--data", args.data] if args.data else [])
            runs = {"composed": [prog] + common, "fused": [prog, "--fused"] + common}
            if py:
                runs["pytorch"] = [py, os.path.abspath(__file__), "--torch-side", "--steps",
                                   str(args.steps), "--batch", str(args.batch), "--threads",
                                   str(t), "--c1", str(args.c1), "--c2", str(args.c2),
                                   "--device", args.device]
            for name, cmd in runs.items():
                ms = ms_per_step(cmd)
                print(f"# {name} {t}t: {ms:.2f} ms/step", file=sys.stderr, flush=True)
                best[(t, name)] = min(best.get((t, name), ms), ms)
    print(f"train_cnn's step (batch {args.batch}, c1 {args.c1}, c2 {args.c2}, SGD, on "
          f"{args.device}), ms/step, "
          f"best of {args.rounds} rounds of {args.steps} steps; PyTorch: {py or 'none'}")
    print("| threads | tg composed | tg fused | PyTorch eager | PT / composed | PT / fused |")
    print("|---|---|---|---|---|---|")
    for t in threads:
        c, f, pt = best[(t, "composed")], best[(t, "fused")], best.get((t, "pytorch"))
        cells = [str(t), f"{c:.2f}", f"{f:.2f}", f"{pt:.2f}" if pt else "-",
                 f"{pt / c:.2f}" if pt else "-", f"{pt / f:.2f}" if pt else "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
