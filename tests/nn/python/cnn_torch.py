#!/usr/bin/python3
"""examples/train_cnn.c's model against PyTorch: the same CNN built with torch.nn, the same
initial weights (tg's, written by the tool with safetensors and loaded here), the same
batches, 20 steps of SGD (momentum 0.9) and 20 of Adam, in F64 and F32. The losses of every
step, and at the end every parameter and batch norm's running mean and variance, must agree:
to 1e-10 relative in F64 and 1e-5 in F32 (relative to the largest magnitude of each tensor,
so that elements near zero are held to the tensor's scale).

    cnn_torch.py TOOL WORKDIR

TOOL is tests/nn/cnn_torch_tool.c built. Exits 77 (a visible skip) when torch or safetensors
is not importable by this Python.
"""
import os
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print("SKIP: %s cannot import torch and safetensors (%s)" % (sys.executable, e))
    sys.exit(77)

STEPS, BATCH, SIZE = 20, 16, 28
LR = {"sgd": 0.05, "adam": 2e-3}  # train_cnn's defaults
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


class CNN(torch.nn.Module):
    """cnn_model.h's model, attribute for attribute (so the state names are the same)."""

    def __init__(self, c1=4, c2=8, classes=10):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2)
        self.fc = nn.Linear(c2 * (SIZE // 4) ** 2, classes)

    def forward(self, x):
        F = torch.nn.functional
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def relative(got, want):
    scale = want.abs().max().item()
    return (got - want).abs().max().item() / (scale if scale > 0 else 1.0)


def check(tool, work, dtype, opt, batches):
    name = "%s %s" % ("f64" if dtype == torch.float64 else "f32", opt)
    init, final = (os.path.join(work, "%s_%s_%s.safetensors" % (n, opt, str(dtype)[6:]))
                   for n in ("init", "final"))
    subprocess.run([tool, "f64" if dtype == torch.float64 else "f32", opt, repr(LR[opt]),
                    batches, init, final], check=True)
    model = CNN().to(dtype)
    missing, unexpected = model.load_state_dict(load_file(init), strict=False)
    # tg's batch norm has no num_batches_tracked: with momentum 0.1 PyTorch does not use it
    if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
        print("FAIL %s: state names differ: missing %s, unexpected %s" % (name, missing, unexpected))
        return 1
    data = load_file(batches)
    xs, ys = data["x"], data["y"]
    params = list(model.parameters())
    optim = (torch.optim.SGD(params, lr=LR[opt], momentum=0.9) if opt == "sgd"
             else torch.optim.Adam(params, lr=LR[opt]))
    model.train()
    losses = []
    for s in range(STEPS):
        loss = torch.nn.functional.cross_entropy(model(xs[s]), ys[s])
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    got = load_file(final)
    tol, bad = TOL[dtype], 0
    worst = relative(got["losses"], torch.tensor(losses, dtype=torch.float64))
    if worst > tol:
        print("FAIL %s: losses differ by %.3g relative (tg %s, torch %s)"
              % (name, worst, got["losses"].tolist(), losses))
        bad += 1
    want = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    if sorted(want) != sorted(k for k in got if k != "losses"):
        print("FAIL %s: tg wrote %s, torch has %s" % (name, sorted(got), sorted(want)))
        return bad + 1
    for k, w in want.items():
        r = relative(got[k], w)
        worst = max(worst, r)
        if r > tol:
            print("FAIL %s: %s differs by %.3g relative" % (name, k, r))
            bad += 1
    print("cnn_torch %s: %d losses (%.4f -> %.4f) and %d tensors (parameters, running "
          "mean and var) agree, worst %.2g relative (bar %g)"
          % (name, STEPS, losses[0], losses[-1], len(want), worst, tol) if not bad else
          "cnn_torch %s: worst %.2g relative (bar %g)" % (name, worst, tol))
    return bad


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    # A task that can be learnt, so that the losses fall as in training: each class is a
    # random template, each image its class's template under noise. (Random labels make
    # SGD overshoot at train_cnn's learning rate, and F32 rounding then grows chaotically.)
    templates = torch.randn(10, 1, SIZE, SIZE, dtype=torch.float64)
    y = torch.randint(0, 10, (STEPS, BATCH))
    x = templates[y] + torch.randn(STEPS, BATCH, 1, SIZE, SIZE, dtype=torch.float64)
    bad = 0
    for dtype in (torch.float64, torch.float32):
        batches = os.path.join(work, "batches_%s.safetensors" % str(dtype)[6:])
        save_file({"x": x.to(dtype).contiguous(), "y": y}, batches)
        for opt in ("sgd", "adam"):
            bad += check(tool, work, dtype, opt, batches)
    if bad:
        return 1
    print("cnn_torch: tg and torch %s agree" % torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
