#!/usr/bin/env python3
"""Prints the PyTorch reference numbers pasted into tests/nn/test_adamw.c,
test_param_groups.c, test_clip_grad.c and test_lr_schedule.c (so those run without torch).

  /tmp/torchvenv/bin/python tests/nn/python/optim_refs.py

The problems are defined by closed formulas that the C tests repeat (see each section)."""
import math

import torch

torch.set_default_dtype(torch.float64)


def fill(n, f):
    return torch.tensor([f(i) for i in range(n)], dtype=torch.float64)


def problem():
    """W [3,4], b [4], c [2,2]; x [5,3], y [5,4];
    loss = sum(tanh(x @ W + b) * y) + 0.5 * sum(c^3)."""
    W = fill(12, lambda i: 0.5 * math.sin(0.7 * i + 0.1)).reshape(3, 4).requires_grad_()
    b = fill(4, lambda i: 0.3 * math.cos(1.3 * i)).requires_grad_()
    c = fill(4, lambda i: 0.2 * i - 0.3).reshape(2, 2).requires_grad_()
    x = fill(15, lambda i: math.sin(0.37 * i + 0.5)).reshape(5, 3)
    y = fill(20, lambda i: math.cos(0.23 * i)).reshape(5, 4)

    def loss():
        return (torch.tanh(x @ W + b) * y).sum() + 0.5 * (c * c * c).sum()

    return W, b, c, loss


def dump(name, t):
    vals = ", ".join("%.17g" % v for v in t.detach().flatten().tolist())
    print("static const double %s[] = {%s};" % (name, vals))


def run(name, make_opt, steps):
    W, b, c, loss = problem()
    opt = make_opt(W, b, c)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        l = loss()
        losses.append(l.item())
        l.backward()
        opt.step()
    print("/* %s: %d steps */" % (name, steps))
    dump(name + "_losses", torch.tensor(losses))
    dump(name + "_W", W)
    dump(name + "_b", b)
    dump(name + "_c", c)


# test_adamw.c: AdamW with three groups (W: the constructor's; b: lr 5e-3, no decay;
# c: inherits everything).
run("adamw", lambda W, b, c: torch.optim.AdamW(
    [{"params": [W]}, {"params": [b], "lr": 5e-3, "weight_decay": 0.0}, {"params": [c]}],
    lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1), 20)
# test_param_groups.c: SGD (momentum, L2) and Adam (L2) with the same groups.
run("sgd", lambda W, b, c: torch.optim.SGD(
    [{"params": [W]}, {"params": [b], "lr": 0.05, "weight_decay": 0.0}, {"params": [c]}],
    lr=0.02, momentum=0.9, weight_decay=1e-3), 10)
run("adam", lambda W, b, c: torch.optim.Adam(
    [{"params": [W]}, {"params": [b], "lr": 5e-3, "weight_decay": 0.0}, {"params": [c]}],
    lr=1e-2, weight_decay=0.1), 10)

# test_clip_grad.c: p1 [3,4] with grad sin(1.1 i), p2 [5] with grad 0.5 i - 1, p3 without.
print("/* clip_grad_norm_: {norm_type, max_norm, total, clipped p1 grad..., p2 grad...} */")
for dtype, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
    rows = []
    for norm_type in (2.0, math.inf, 1.0, 3.0, 0.5):
        for max_norm in (1.0, 100.0):
            p1 = torch.zeros(3, 4, dtype=dtype, requires_grad=True)
            p2 = torch.zeros(5, dtype=dtype, requires_grad=True)
            p3 = torch.zeros(2, dtype=dtype, requires_grad=True)
            p1.grad = fill(12, lambda i: math.sin(1.1 * i)).to(dtype).reshape(3, 4)
            p2.grad = fill(5, lambda i: 0.5 * i - 1).to(dtype)
            total = torch.nn.utils.clip_grad_norm_([p1, p2, p3], max_norm, norm_type)
            vals = [norm_type, max_norm, total.item()] + p1.grad.flatten().tolist() + p2.grad.tolist()
            rows.append("{" + ", ".join("%.17g" % v if math.isfinite(v) else "INFINITY" for v in vals) + "}")
    print("static const double clip_%s[][20] = {\n  %s};" % (tag, ",\n  ".join(rows)))
for bad in (math.inf, math.nan):
    p1 = torch.zeros(3, requires_grad=True)
    p1.grad = torch.tensor([1.0, bad, -2.0])
    total = torch.nn.utils.clip_grad_norm_([p1], 1.0)
    print("/* clip with %r: total %r, grads %r */" % (bad, total.item(), p1.grad.tolist()))

# test_lr_schedule.c: two groups, lr 0.1 and 0.02.
def lrs(make_sched, steps=10):
    p, q = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.02}], lr=0.1)
    s = make_sched(opt)
    out = [s.get_last_lr()]
    for _ in range(steps - 1):
        opt.step()
        s.step()
        out.append(s.get_last_lr())
    return out


def dump_lrs(name, seq):
    print("static const double %s[][2] = {%s};" % (
        name, ", ".join("{%.17g, %.17g}" % tuple(r) for r in seq)))


dump_lrs("step_lrs", lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)))
dump_lrs("lambda_lrs", lrs(lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 0.9 ** s)))


def get_lr(it, max_lr, warmup, total, min_lr):
    """llm.c's / nanoGPT's schedule (the formula in include/tg/optim.h)."""
    if it < warmup:
        return max_lr * (it + 1) / warmup
    if it >= total:
        return min_lr
    r = (it - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)


dump_lrs("cosine_lrs", [[get_lr(s, 0.1, 3, 10, 0.01), get_lr(s, 0.02, 3, 10, 0.01)]
                        for s in range(12)])
