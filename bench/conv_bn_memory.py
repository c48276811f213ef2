#!/usr/bin/env python3
"""Conv2d + BatchNorm2d in training: what a step keeps for backward, its peak resident memory
and its time, side by side for tg fused (tg_conv2d_batch_norm), tg composed
(tg_conv2d_batch_norm_composed, generic ops), tg layers (tg_conv2d then tg_batch_norm, what a
user writes; PyTorch's formula at both sizes), PyTorch's composed nn.Conv2d + nn.BatchNorm2d, and the
reference's FusedConvBatchNorm2DFunction (shared/reference/extending-pytorch-zh.txt, written
here from its text). Each runs in a process of its own, so each peak is its own step's.

  python3 bench/conv_bn_memory.py [--bin build/bench/conv_bn_memory] [--sizes reference,realistic]
                                  [--iters N] [--threads T]

Sizes: reference = x [2, 3, 4, 4], w [5, 3, 3, 3], no padding, the reference's formula (eps
1e-3 outside the square root, unbiased variance) for tg and the reference's Function, no
affine; realistic = x [64, 32, 32, 32], w [64, 32, 3, 3], padding 1, PyTorch's batch_norm
(affine) for tg and PyTorch, the reference's Function with padding 1 (its own formula). F32.

saved: bytes of the distinct storages the graph keeps for backward, inputs included
(tg_graph_saved_bytes; PyTorch: saved-tensor hooks). peak: VmHWM after one forward+backward,
reset just before it, less VmRSS before it (after a warm-up step on a [2, c_in, 4, 4]
batch). ms: a step, averaged. Needs torch for the PyTorch
rows (skipped with a note otherwise)."""
import argparse
import os
import subprocess
import sys

SIZES = {"reference": (2, 3, 5, 4, 0), "realistic": (64, 32, 64, 32, 1)}


def proc_status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return -1


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def torch_worker(impl, size, iters, threads):
    """One PyTorch measurement in this process; prints one key=value line like the C bench."""
    import time

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    n, c_in, c_out, hw, pad = SIZES[size]

    def unsqueeze_help(t):
        return t[None, :, None, None]

    # The reference's batch_norm_backward and FusedConvBatchNorm2DFunction, verbatim but for
    # the padding passed through (stride 1, so conv_transpose2d and the transposed conv2d are
    # still the input and weight gradients).
    def batch_norm_backward(grad_out, X, sum, sqrt_var, N, eps):
        tmp = torch.sum((X - unsqueeze_help(sum) / N) * grad_out, dim=(0, 2, 3))
        tmp *= -1
        d_denom = tmp / (sqrt_var + eps) ** 2
        d_var = d_denom / (2 * sqrt_var)
        d_mean_dx = grad_out / unsqueeze_help(sqrt_var + eps)
        d_mean_dx = unsqueeze_help(-torch.sum(d_mean_dx, dim=(0, 2, 3)) / N)
        grad_input = X * unsqueeze_help(d_var * N)
        grad_input += unsqueeze_help(-d_var * sum)
        grad_input *= 2 / ((N - 1) * N)
        grad_input += d_mean_dx
        grad_input *= unsqueeze_help(sqrt_var + eps)
        grad_input += grad_out
        grad_input /= unsqueeze_help(sqrt_var + eps)
        return grad_input

    def convolution_backward(grad_out, X, weight):
        grad_weight = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1), padding=pad).transpose(0, 1)
        grad_X = F.conv_transpose2d(grad_out, weight, padding=pad)
        return grad_X, grad_weight

    class FusedConvBatchNorm2DFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            assert X.ndim == 4
            ctx.save_for_backward(X, conv_weight)
            X = F.conv2d(X, conv_weight, padding=pad)
            sum = torch.sum(X, dim=(0, 2, 3))
            var = torch.var(X, unbiased=True, dim=(0, 2, 3))
            sqrt_var = torch.sqrt(var)
            N = torch.numel(X) / X.size(1)
            ctx.eps = eps
            ctx.sum = sum
            ctx.sqrt_var = sqrt_var
            ctx.N = N
            mean = sum / N
            denom = sqrt_var + eps
            out = X - unsqueeze_help(mean)
            out /= unsqueeze_help(denom)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight = ctx.saved_tensors
            X_conv_out = F.conv2d(X, conv_weight, padding=pad)
            grad_out = batch_norm_backward(grad_out, X_conv_out, ctx.sum, ctx.sqrt_var, ctx.N, ctx.eps)
            grad_X, grad_weight = convolution_backward(grad_out, X, conv_weight)
            return grad_X, grad_weight, None

    torch.manual_seed(24)
    x = torch.randn(n, c_in, hw, hw, requires_grad=True)
    if impl == "torch_composed":
        conv = torch.nn.Conv2d(c_in, c_out, 3, padding=pad, bias=False)
        bn = torch.nn.BatchNorm2d(c_out)
        leaves = [x, conv.weight, bn.weight, bn.bias]

        def step(inp=x):
            return bn(conv(inp))
    else:
        w = (0.1 * torch.randn(c_out, c_in, 3, 3)).requires_grad_()
        leaves = [x, w]

        def step(inp=x):
            return FusedConvBatchNorm2DFunction.apply(inp, w)

    out_hw = hw + 2 * pad - 2
    g = torch.randn(n, c_out, out_hw, out_hw)
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    leaf_ptrs = {t.untyped_storage().data_ptr() for t in leaves}
    # warm-up on a small batch: one-time initialization is not the step's memory, and the
    # allocator has not yet kept the step's own blocks
    step(torch.randn(2, c_in, 4, 4)).sum().backward()
    rss_before = proc_status_bytes("VmRSS:")
    peak_reset = reset_peak()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = step()
    saved = sum(seen.values())
    beyond = sum(b for p, b in seen.items() if p not in leaf_ptrs)
    y.backward(g)
    del y
    peak = proc_status_bytes("VmHWM:")
    t0 = time.perf_counter()
    for _ in range(iters):
        step().backward(g)
    ms = (time.perf_counter() - t0) * 1e3 / iters
    growth = peak - rss_before if peak_reset and peak >= 0 and rss_before >= 0 else -1
    print(f"impl={impl} size={n}x{c_in}x{c_out}x{hw} saved_bytes={saved} saved_beyond_inputs={beyond} "
          f"peak_rss_growth={growth} ms_per_step={ms:.3f} threads={torch.get_num_threads()}")


def parse(line):
    return dict(kv.split("=", 1) for kv in line.split())


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:]
    return parse(r.stdout.strip().splitlines()[-1]), None


def torch_python():
    for py in (os.environ.get("TORCH_PYTHON"), "/tmp/torchvenv/bin/python", sys.executable):
        if py and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bench/conv_bn_memory")
    ap.add_argument("--sizes", default="reference,realistic")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "SIZE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        torch_worker(a.worker[0], a.worker[1], a.iters, a.threads)
        return 0
    py = torch_python()
    failed = False
    for size in a.sizes.split(","):
        if size not in SIZES:
            ap.error(f"--sizes: unknown size '{size}' (reference, realistic)")
        rows = []
        for impl in ("fused", "composed", "layers"):
            rows.append((f"tg {impl}",) +
                        run([a.bin, impl, size, "--iters", str(a.iters), "--threads", str(a.threads)]))
        for impl, label in (("torch_composed", "PyTorch Conv2d+BatchNorm2d"),
                            ("torch_reference", "reference autograd.Function")):
            if py:
                rows.append((label,) + run([py, __file__, "--worker", impl, size,
                                            "--iters", str(a.iters), "--threads", str(a.threads)]))
            else:
                rows.append((label, None, ["torch not importable: skipped"]))
        n, c_in, c_out, hw, pad = SIZES[size]
        print(f"\n{size}: x [{n}, {c_in}, {hw}, {hw}] -> conv 3x3 padding {pad} -> {c_out} channels, "
              f"F32, {a.threads} threads, {a.iters} steps timed")
        print(f"{'':30} {'saved (KiB)':>12} {'beyond inputs':>14} {'peak RSS +KiB':>14} {'ms/step':>9}")
        for label, r, err in rows:
            if r is None:
                print(f"{label:30} {'; '.join(err)}")
                failed = failed or not (err and "skipped" in err[0])
                continue
            print(f"{label:30} {int(r['saved_bytes']) / 1024:12.1f} {int(r['saved_beyond_inputs']) / 1024:14.1f} "
                  f"{int(r['peak_rss_growth']) / 1024:14.0f} {float(r['ms_per_step']):9.3f}")
        ok = [r for _, r, _ in rows if r]
        for k, name in ((1, "tg composed"), (2, "tg layers")):
            if rows[0][1] and rows[k][1]:
                f, c = int(rows[0][1]["saved_bytes"]), int(rows[k][1]["saved_bytes"])
                pf, pc = int(rows[0][1]["peak_rss_growth"]), int(rows[k][1]["peak_rss_growth"])
                print(f"tg fused keeps {100 * f / c:.1f}% of {name}'s bytes (inputs included); "
                      f"peak growth {100 * pf / max(1, pc):.0f}%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
