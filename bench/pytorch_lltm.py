#!/usr/bin/env python3
"""Times the PyTorch tutorial's pure-Python LLTM (CPU or CUDA), as a reference for tg's bench.

The cell and the loop are those of the "Custom C++ and CUDA Extensions" tutorial: forward
rnn(X, (h, C)), then backward of (new_h.sum() + new_C.sum()), each timed on its own, leaf
gradients accumulating across iterations as in the tutorial. F32 on the CPU, or with
--device cuda on GPU 0, timed with CUDA events as lltm_bench --device cuda times tg. One worker
process per thread count, with OMP/OPENBLAS/MKL_NUM_THREADS set before torch is imported.

Modes: "params" (only weights and bias require grad, the tutorial's benchmark) and "all"
(input, h and C require grad too). Implementations (--impl, comma-separated):
  eager     the module as written                                   impl "pytorch_eager"
  compiled  torch.compile(module, dynamic=False) (inductor, CPU)     impl "pytorch_compiled"
The compiled module is compiled afresh per (size, mode) (torch._dynamo.reset()): its first
forward+backward, which compiles both graphs, is timed on its own and reported as
"compile_s"; then at least 10 untimed iterations, then the timed ones.

Output: one JSON line per (size, threads, mode, impl) with the median forward and backward
time in microseconds over --iters timed iterations, "torch" (torch.__version__) and "blas"
(BLAS_INFO from torch.__config__.show(), with the library libblas.so.3 resolves to when it
is Debian's "generic"). An implementation that cannot run prints a line with "skipped" (the
reason) instead: torch missing, torch.compile missing (PyTorch 1.x) or failing (no C++
compiler, ...). The exit status is 0 then.

  /tmp/torchvenv/bin/python bench/pytorch_lltm.py --impl eager,compiled --threads 1 --iters 100
  /usr/bin/python3 bench/pytorch_lltm.py --iters 100 --threads 1 --sizes 16x32x128  # Debian's
"""
import argparse
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

DEFAULT_SIZES = "16x32x128,64x1024x128,128x256x512,256x1024x1024"


IMPLS = ("eager", "compiled")


def skipped(impl, reason, **fields):
    print(json.dumps({"impl": "pytorch_" + impl, "skipped": reason, **fields}), flush=True)


def skip_all(impls, reason):
    for impl in impls:
        skipped(impl, reason)
    sys.exit(0)


def blas_of(torch):
    """BLAS_INFO from the build configuration; for "generic" also the libblas it loaded."""
    try:
        config = torch.__config__.show()
    except Exception:
        return None
    m = re.search(r"BLAS_INFO=([^,\s]+)", config)
    blas = m.group(1) if m else ("mkl" if "Math Kernel Library" in config else None)
    if blas == "generic":
        torch.mm(torch.ones(4, 4), torch.ones(4, 4))  # loads the BLAS if it is lazy
        try:
            with open("/proc/self/maps") as f:
                libs = sorted({line.split()[-1] for line in f
                               if re.search(r"lib(blas|blis|openblas|mkl)", line)})
            if libs:
                blas += " (" + ", ".join(os.path.realpath(lib) for lib in libs) + ")"
        except OSError:
            pass
    return blas


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


def parse_impls(text):
    impls = text.split(",")
    for i in impls:
        if i not in IMPLS:
            raise argparse.ArgumentTypeError(f"impl {i!r} is not one of {', '.join(IMPLS)}")
    if len(set(impls)) != len(impls):
        raise argparse.ArgumentTypeError(f"{text!r} names an implementation twice")
    return impls


def worker(args, threads):
    """Runs in a child process whose environment already fixes the thread count."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken installation
        skip_all(args.impl, f"import torch failed: {e}")

    torch.set_num_threads(threads)
    common = {"torch": torch.__version__, "blas": blas_of(torch)}
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"BLAS {common['blas']}", file=sys.stderr)
    impls = list(args.impl)
    if "compiled" in impls and not hasattr(torch, "compile"):
        skipped("compiled", f"torch {torch.__version__} has no torch.compile", threads=threads,
                **common)
        impls.remove("compiled")

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

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        skip_all(args.impl, f"torch {torch.__version__} sees no CUDA device")
    device = torch.device(args.device)
    if cuda:
        common["gpu"] = torch.cuda.get_device_name(0)

    def step(rnn, X, h, C):
        if cuda:  # events on the current stream, as lltm_bench times tg on tg's stream
            e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            e0.record()
            new_h, new_C = rnn(X, (h, C))
            e1.record()
            (new_h.sum() + new_C.sum()).backward()
            e2.record()
            e2.synchronize()
            return e0.elapsed_time(e1) * 1e3, e1.elapsed_time(e2) * 1e3
        t0 = time.perf_counter_ns()
        new_h, new_C = rnn(X, (h, C))
        t1 = time.perf_counter_ns()
        (new_h.sum() + new_C.sum()).backward()
        t2 = time.perf_counter_ns()
        return (t1 - t0) / 1e3, (t2 - t1) / 1e3

    torch.manual_seed(0)
    for batch, features, state in args.sizes:
        for mode in args.modes:
            for impl in impls:
                point = {"batch": batch, "features": features, "state": state,
                         "threads": threads, "mode": mode, "device": args.device}
                inputs_grad = mode == "all"
                X = torch.randn(batch, features, device=device, requires_grad=inputs_grad)
                h = torch.randn(batch, state, device=device, requires_grad=inputs_grad)
                C = torch.randn(batch, state, device=device, requires_grad=inputs_grad)
                rnn = LLTM(features, state).to(device)
                extra, warmup = {}, args.warmup
                if impl == "compiled":
                    # A fresh cache per point: no recompilation limit reached, no dynamic
                    # shapes guessed from earlier sizes, and compile_s is this point's.
                    try:
                        torch._dynamo.reset()
                        rnn = torch.compile(rnn, backend="inductor", dynamic=False)
                        t0 = time.perf_counter()
                        step(rnn, X, h, C)
                        extra["compile_s"] = round(time.perf_counter() - t0, 3)
                    except Exception as e:  # no C++ compiler, unsupported platform, ...
                        reason = f"torch.compile failed: {type(e).__name__}: {e}"
                        skipped(impl, reason.splitlines()[0][:500], **point, **common)
                        continue
                    warmup = max(warmup, 10)
                fwd, bwd = [], []
                for i in range(warmup + args.iters):
                    f, b = step(rnn, X, h, C)
                    if i >= warmup:
                        fwd.append(f)
                        bwd.append(b)
                print(json.dumps({
                    "impl": "pytorch_" + impl, **point,
                    "forward_us": round(statistics.median(fwd), 3),
                    "backward_us": round(statistics.median(bwd), 3),
                    "iters": args.iters, **extra, **common,
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
    p.add_argument("--impl", type=parse_impls, default=["eager"],
                   help="comma-separated: eager, compiled (torch.compile) (default eager)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the LLTM runs (default cpu); cuda times with CUDA events")
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
        skip_all(args.impl, f"torch is not installed for {sys.executable} (Debian: apt-get "
                 "install python3-torch, then run with /usr/bin/python3)")

    for threads in args.threads:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(threads),
               "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--sizes", ",".join("x".join(map(str, s)) for s in args.sizes),
               "--modes", ",".join(args.modes), "--impl", ",".join(args.impl),
               "--device", args.device]
        out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(out.stdout)
        sys.stdout.flush()
        if out.returncode != 0:
            sys.exit(out.returncode)
        if '"import torch failed' in out.stdout:
            return


if __name__ == "__main__":
    main()
