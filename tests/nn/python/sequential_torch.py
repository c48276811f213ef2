#!/usr/bin/python3
"""A torch.nn.Sequential's state dict, saved with safetensors, loads into tg's Sequential
(the names must be PyTorch's: the tool loads strictly) and gives PyTorch's output and
gradients.

    sequential_torch.py TOOL WORKDIR

TOOL is tests/nn/sequential_torch_tool.c built. Exits 77 (a visible skip) when torch or
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
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4), nn.Tanh(),
                          nn.Linear(4, 3), nn.Sigmoid()).double()
    state, inputs, outputs = (os.path.join(work, n) for n in
                              ("state.safetensors", "input.safetensors", "output.safetensors"))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, state)
    x = torch.randn(7, 2, 3, dtype=torch.float64)
    save_file({"x": x}, inputs)
    y = model(x)
    y.sum().backward()
    subprocess.run([tool, state, inputs, outputs], check=True)
    got = load_file(outputs)
    want = {"y": y.detach()}
    want.update({"grad." + n: p.grad for n, p in model.named_parameters()})
    if sorted(got) != sorted(want):
        print("FAIL: tg wrote %s, expected %s" % (sorted(got), sorted(want)))
        return 1
    bad = 0
    for name, w in want.items():
        if not torch.allclose(got[name], w, rtol=1e-12, atol=1e-14):
            print("FAIL: %s differs by %g" % (name, (got[name] - w).abs().max().item()))
            bad += 1
    if bad:
        return 1
    print("sequential_torch: %d tensors agree with torch %s (names: %s)"
          % (len(want), torch.__version__, ", ".join(n for n, _ in model.named_parameters())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
