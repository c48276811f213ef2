#!/usr/bin/python3
"""A small torch CNN (Conv2d-BatchNorm2d-ReLU-MaxPool2d-Flatten-Linear), its state dict saved
with safetensors, loads strictly into tg's Sequential of the same layers (so every name,
num_batches_tracked included, must be PyTorch's), and tg reproduces torch's outputs in
training and in evaluation, the gradients, and the running statistics after two training
batches.

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


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5)).double()
    with torch.no_grad():  # affine parameters away from their ones and zeros
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-0.5, 0.5)
    state, inputs, outputs = (os.path.join(work, n) for n in
                              ("state.safetensors", "input.safetensors", "output.safetensors"))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, state)
    x1 = torch.randn(6, 3, 8, 8, dtype=torch.float64) * 2 + 0.5
    x2 = torch.randn(6, 3, 8, 8, dtype=torch.float64)
    save_file({"x1": x1, "x2": x2}, inputs)
    model.train()
    model(x1)
    y_train = model(x2)
    y_train.sum().backward()
    model.eval()
    with torch.no_grad():
        y_eval = model(x1)
    subprocess.run([tool, state, inputs, outputs], check=True)
    got = load_file(outputs)
    want = {"y_train": y_train.detach(), "y_eval": y_eval}
    want.update({"grad." + n: p.grad for n, p in model.named_parameters()})
    want.update({"state." + n: t for n, t in model.state_dict().items()})
    if sorted(got) != sorted(want):
        print("FAIL: tg wrote %s, expected %s" % (sorted(got), sorted(want)))
        return 1
    bad = 0
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            print("FAIL: %s is %s %s, expected %s %s" % (name, g.dtype, list(g.shape), w.dtype,
                                                         list(w.shape)))
            bad += 1
        elif not torch.allclose(g, w, rtol=1e-12, atol=1e-13):
            print("FAIL: %s differs by %g" % (name, (g - w).abs().max().item()))
            bad += 1
    if bad:
        return 1
    print("cnn_layers_torch: %d tensors agree with torch %s (state: %s)"
          % (len(want), torch.__version__, ", ".join(model.state_dict())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
