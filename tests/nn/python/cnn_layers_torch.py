#!/usr/bin/python3
"""Two torch CNNs, their state dicts saved with safetensors, load strictly into tg's
Sequentials of the same layers (so every name, num_batches_tracked included, must be
PyTorch's), and tg reproduces torch's outputs in training and in evaluation, the gradients,
and the running statistics after two training batches. Model a is the issue's
Conv2d-BatchNorm2d-ReLU-MaxPool2d-Flatten-Linear; model b has every other layer (Conv1d,
GroupNorm, LayerNorm, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d with momentum None and without
affine, Dropout) with options away from the defaults.

    cnn_layers_torch.py TOOL WORKDIR

TOOL is tests/nn/cnn_layers_torch_tool.c built. Exits 77 (a visible skip) when torch or
safetensors is not importable by this Python.
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


def model_a(nn):
    """The issue's CNN: Conv2d-BatchNorm2d-ReLU-MaxPool2d-Flatten-Linear on [6, 3, 8, 8]."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    return model, (6, 3, 8, 8)


def model_b(nn):
    """Every other layer with options away from the defaults, on [5, 3, 9, 8]."""
    model = nn.Sequential(
        nn.Conv2d(3, 6, (3, 2), stride=(1, 2), padding=1, dilation=(2, 1), groups=3, bias=False),
        nn.GroupNorm(3, 6, eps=1e-4),                                           # [5, 6, 7, 5]
        nn.AvgPool2d(2, padding=1, ceil_mode=True, count_include_pad=False),  # [5, 6, 4, 3]
        nn.LayerNorm([4, 3]),
        nn.AdaptiveAvgPool2d((3, None)),                                      # [5, 6, 3, 3]
        nn.Flatten(2),                                                        # [5, 6, 9]
        nn.Conv1d(6, 4, 3, padding="same"),
        nn.BatchNorm1d(4, momentum=None),
        nn.ReLU(),
        nn.Flatten(),
        nn.Dropout(0.0),
        nn.Linear(36, 2),
        nn.BatchNorm1d(2, affine=False, eps=1e-3, momentum=0.3))
    return model, (5, 3, 9, 8)


def check(nn, tool, work, name, make):
    model, shape = make(nn)
    model = model.double()
    with torch.no_grad():  # affine parameters away from their ones and zeros
        for n, p in model.named_parameters():
            if p.dim() == 1 or n.split(".")[0] in ("3",):
                p.uniform_(0.5, 1.5) if n.endswith("weight") else p.uniform_(-0.5, 0.5)
    state, inputs, outputs = (os.path.join(work, name + "_" + n) for n in
                              ("state.safetensors", "input.safetensors", "output.safetensors"))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, state)
    x1 = torch.randn(*shape, dtype=torch.float64) * 2 + 0.5
    x2 = torch.randn(*shape, dtype=torch.float64)
    save_file({"x1": x1, "x2": x2}, inputs)
    model.train()
    model(x1)
    y_train = model(x2)
    y_train.sum().backward()
    model.eval()
    with torch.no_grad():
        y_eval = model(x1)
    subprocess.run([tool, name, state, inputs, outputs], check=True)
    got = load_file(outputs)
    want = {"y_train": y_train.detach(), "y_eval": y_eval}
    want.update({"grad." + n: p.grad for n, p in model.named_parameters()})
    want.update({"state." + n: t for n, t in model.state_dict().items()})
    if sorted(got) != sorted(want):
        print("FAIL: %s: tg wrote %s, expected %s" % (name, sorted(got), sorted(want)))
        return 1
    bad = 0
    for key, w in want.items():
        g = got[key]
        if g.dtype != w.dtype or g.shape != w.shape:
            print("FAIL: %s: %s is %s %s, expected %s %s" % (name, key, g.dtype, list(g.shape),
                                                             w.dtype, list(w.shape)))
            bad += 1
        elif not torch.allclose(g, w, rtol=1e-12, atol=1e-13):
            print("FAIL: %s: %s differs by %g" % (name, key, (g - w).abs().max().item()))
            bad += 1
    if bad:
        return 1
    print("cnn_layers_torch: model %s: %d tensors agree with torch %s (state: %s)"
          % (name, len(want), torch.__version__, ", ".join(model.state_dict())))
    return 0


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    return check(torch.nn, tool, work, "a", model_a) | check(torch.nn, tool, work, "b", model_b)


if __name__ == "__main__":
    sys.exit(main())
