#!/usr/bin/env python3
"""Times the PyTorch tutorial's pure-Python LLTM on the CPU, as a reference for tg's bench.

The cell and the loop are those of the "Custom C++ and CUDA Extensions" tutorial: forward
rnn(X, (h, C)), then backward of (new_h.sum() + new_C.sum()), each timed on its own, leaf
gradients accumulating across iterations as in the tutorial. F32 on the CPU. One worker
process per thread count, with OMP/OPENBLAS/MKL_NUM_THREADS set before torch is imported.

Modes: "params" (only weights and bias require grad, the tutorial's benchmark) and "all"
(input, h and C require grad too). Output: one JSON line per (size, threads, mode) with the
median forward and backward time in microseconds over --iters timed iterations.

Run with Debian's torch (apt-get install python3-torch):
  /usr/bin/python3 bench/pytorch_lltm.py --iters 100 --threads 1 --sizes 16x32x128
Without torch it prints one {"impl": "pytorch", "skipped": ...} line and exits 0.
"""
import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time

DEFAULT_SIZES = "16x32x128,64x1024x128,128x256x512,256x1024x1024"


def skip(reason):
    print(json.dumps({"impl": "pytorch", "skipped": reason}), flush=True)
    sys.exit(0)


def parse_sizes(text):
    sizes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"size {item!r} is not BATCHxFEATURESxSTATE")
        sizes.append(tuple(int(p) for p in parts))
    return sizes


def parse_ints(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: values must be at least 1")
    return values


def parse_modes(text):
    modes = text.split(",")
    for m in modes:
        if m not in ("params", "all"):
            raise argparse.ArgumentTypeError(f"mode {m!r} is not 'params' or 'all'")
    return modes


def worker(args, threads):
    """Runs in a child process whose environment already fixes the thread count."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken installation
        skip(f"import torch failed: {e}")

    torch.set_num_threads(threads)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} thread(s)", file=sys.stderr)

    class LLTM(torch.nn.Module):
        def __init__(self, input_features, state_size):
            super().__init__()
            self.input_features = input_features
            self.state_size = state_size
            # 3 * state_size for input gate, output gate and candidate cell gate.
            # input_features + state_size because we will multiply with [input, h].
            self.weights = torch.nn.Parameter(
                torch.empty(3 * state_size, input_features + state_size))
            self.bias = torch.nn.Parameter(torch.empty(3 * state_size))
            self.reset_parameters()

        def reset_parameters(self):
            stdv = 1.0 / math.sqrt(self.state_size)
            for weight in self.parameters():
                weight.data.uniform_(-stdv, +stdv)

        def forward(self, input, state):
            old_h, old_cell = state
            X = torch.cat([old_h, input], dim=1)
            # Input, output and candidate cell gates with one MM (F.linear is this addmm).
            gate_weights = torch.addmm(self.bias, X, self.weights.t())
            gates = gate_weights.chunk(3, dim=1)
            input_gate = torch.sigmoid(gates[0])
            output_gate = torch.sigmoid(gates[1])
            candidate_cell = torch.nn.functional.elu(gates[2])
            new_cell = old_cell + candidate_cell * input_gate
            new_h = torch.tanh(new_cell) * output_gate
            return new_h, new_cell

    torch.manual_seed(0)
    for batch, features, state in args.sizes:
        for mode in args.modes:
            inputs_grad = mode == "all"
            X = torch.randn(batch, features, requires_grad=inputs_grad)
            h = torch.randn(batch, state, requires_grad=inputs_grad)
            C = torch.randn(batch, state, requires_grad=inputs_grad)
            rnn = LLTM(features, state)
            fwd, bwd = [], []
            for i in range(args.warmup + args.iters):
                t0 = time.perf_counter_ns()
                new_h, new_C = rnn(X, (h, C))
                t1 = time.perf_counter_ns()
                (new_h.sum() + new_C.sum()).backward()
                t2 = time.perf_counter_ns()
                if i >= args.warmup:
                    fwd.append((t1 - t0) / 1e3)
                    bwd.append((t2 - t1) / 1e3)
            print(json.dumps({
                "impl": "pytorch", "batch": batch, "features": features, "state": state,
                "threads": threads, "mode": mode,
                "forward_us": round(statistics.median(fwd), 3),
                "backward_us": round(statistics.median(bwd), 3),
                "iters": args.iters,
            }), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=100, help="timed iterations (default 100)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed iterations first (default: iters/10, at least 3)")
    p.add_argument("--threads", type=parse_ints, default=[1, 2],
                   help="comma-separated thread counts (default 1,2)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES),
                   help=f"comma-separated BATCHxFEATURESxSTATE (default {DEFAULT_SIZES})")
    p.add_argument("--modes", type=parse_modes, default=["params", "all"],
                   help="comma-separated: params (tutorial), all (default params,all)")
    p.add_argument("--worker", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.iters < 1:
        p.error("--iters must be at least 1")
    if args.warmup is None:
        args.warmup = max(3, args.iters // 10)

    if args.worker is not None:
        worker(args, args.worker)
        return
    if importlib.util.find_spec("torch") is None:
        skip(f"torch is not installed for {sys.executable} (Debian: apt-get install python3-torch, "
             "then run with /usr/bin/python3)")

    for threads in args.threads:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(threads),
               "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--sizes", ",".join("x".join(map(str, s)) for s in args.sizes),
               "--modes", ",".join(args.modes)]
        out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(out.stdout)
        sys.stdout.flush()
        if out.returncode != 0:
            sys.exit(out.returncode)
        if '"skipped"' in out.stdout:
            return


if __name__ == "__main__":
    main()
