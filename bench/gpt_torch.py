#!/usr/bin/env python3
"""examples/train_gpt.c's GPT-2 in PyTorch (llm.c's train_gpt2.py architecture, the state names
of examples/gpt/gpt_model.h), for two jobs:

  gpt_torch.py agree TRAIN_GPT WORKDIR
      The agreement test (ctest gpt_torch): runs TRAIN_GPT (tg) for 10 AdamW steps in F64 and
      in F32 with --sequential, --save-init and --llmc-dir, loads tg's initial weights
      (safetensors) and token file (llm.c's format) here, takes the same 10 steps with
      torch.optim.AdamW (lr 1e-4, betas 0.9/0.999, eps 1e-8, weight decay 0: llm.c's CPU
      settings) and compares the losses: 1e-10 relative in F64, 1e-5 in F32. Exits 77 (a
      visible skip) when torch or safetensors cannot be imported.

  gpt_torch.py bench --layers L --heads H --channels C --vocab V --seq T --batch B
                     [--steps N] [--threads N] [--f64] [--init PATH] [--device cpu|cuda]
      Times training steps on random token ids (PyTorch eager) and prints one JSON line:
      median ms/step (the first step left out), tokens/s, peak RSS and, on CUDA, the peak of
      the caching allocator's memory in use (bench/gpt_compare.py). On CUDA each step ends
      with torch.cuda.synchronize(), as train_gpt's ends with tg_cuda_synchronize().
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError as e:
    print("SKIP: %s cannot import torch and safetensors (%s)" % (sys.executable, e))
    sys.exit(77)

LR, BETAS, EPS = 1e-4, (0.9, 0.999), 1e-8
AGREE_STEPS = 10
# small enough for a few seconds on 2 cores, every part of the model present
AGREE_SIZES = ["--layers", "2", "--heads", "2", "--channels", "32", "--seq", "16", "--batch", "4"]
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


class Attention(torch.nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.heads = H
        self.c_attn = torch.nn.Linear(C, 3 * C)
        self.c_proj = torch.nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(torch.nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = torch.nn.Linear(C, 4 * C)
        self.c_proj = torch.nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(C)
        self.attn = Attention(C, H)
        self.ln_2 = torch.nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    """gpt_model.h's model, attribute for attribute; the LM head is wte (tied)."""

    def __init__(self, layers, heads, channels, vocab, max_seq):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, channels)
        self.wpe = torch.nn.Embedding(max_seq, channels)
        self.h = torch.nn.ModuleList(Block(channels, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(channels)
        # train_gpt2.py's init (also train_gpt's): 0.02, residual projections 0.02/sqrt(2L)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif "ln_" in name:
                torch.nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def read_llmc_tokens(path):
    with open(path, "rb") as f:
        header = torch.frombuffer(bytearray(f.read(256 * 4)), dtype=torch.int32)
        assert header[0].item() == 20240520 and header[1].item() == 1, "not an llm.c token file"
        n = header[2].item()
        data = bytearray(f.read())
    assert len(data) == 2 * n, "token file length does not match its header"
    return torch.frombuffer(data, dtype=torch.uint16).to(torch.int64)


def relative(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want))


def agree_one(train_gpt, work, dtype):
    name = "f64" if dtype == torch.float64 else "f32"
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    init, csv = os.path.join(d, "init.safetensors"), os.path.join(d, "losses.csv")
    cmd = [train_gpt] + AGREE_SIZES + ["--steps", str(AGREE_STEPS), "--lr", repr(LR),
                                       "--sequential", "--save-init", init, "--llmc-dir", d,
                                       "--csv", csv, "--threads", "1", "--quiet"]
    if dtype == torch.float64:
        cmd.append("--f64")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(csv) as f:
        tg_losses = [float(line.split(",")[1]) for line in f.read().splitlines()[1:]]
    state = load_file(init)
    L = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("h."))
    V, C = state["wte.weight"].shape
    heads = int(AGREE_SIZES[AGREE_SIZES.index("--heads") + 1])
    model = GPT(L, heads, C, V, state["wpe.weight"].shape[0]).to(dtype)
    model.load_state_dict(state, strict=True)
    tokens = read_llmc_tokens(os.path.join(d, "train.bin"))
    B = int(AGREE_SIZES[AGREE_SIZES.index("--batch") + 1])
    T = int(AGREE_SIZES[AGREE_SIZES.index("--seq") + 1])
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    n_batches = (len(tokens) - 1) // (B * T)
    losses = []
    for s in range(AGREE_STEPS):  # llm.c's DataLoader without shuffling
        buf = tokens[(s % n_batches) * B * T:][:B * T + 1]
        loss = model(buf[:-1].view(B, T), buf[1:].view(B, T))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    worst = relative(tg_losses, losses)
    ok = len(tg_losses) == AGREE_STEPS and worst <= TOL[dtype]
    print("gpt_torch %s: %d AdamW steps, losses %.6f -> %.6f, worst %.2g relative (bar %g)%s"
          % (name, AGREE_STEPS, losses[0], losses[-1], worst, TOL[dtype], "" if ok else
             "\nFAIL: tg %s\n      torch %s" % (tg_losses, losses)))
    return ok


def agree(argv):
    train_gpt, work = argv
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    ok = all([agree_one(train_gpt, work, torch.float64), agree_one(train_gpt, work, torch.float32)])
    if ok:
        print("gpt_torch: tg and torch %s agree" % torch.__version__)
    return 0 if ok else 1


def bench(argv):
    p = argparse.ArgumentParser(prog="gpt_torch.py bench")
    for name, default in (("layers", 4), ("heads", 4), ("channels", 256), ("vocab", 256),
                          ("seq", 256), ("batch", 8), ("steps", 6), ("threads", 1)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--f64", action="store_true")
    p.add_argument("--init", help="tg's initial state (safetensors) instead of a fresh init")
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dtype = torch.float64 if a.f64 else torch.float32
    model = GPT(a.layers, a.heads, a.channels, a.vocab, a.seq).to(dtype)
    if a.init:
        model.load_state_dict(load_file(a.init), strict=True)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    times, losses = [], []
    for _ in range(a.steps):
        buf = torch.randint(0, a.vocab, (a.batch * a.seq + 1,)).to(device)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(buf[:-1].view(a.batch, a.seq), buf[1:].view(a.batch, a.seq))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if cuda:
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - t0))
    ms = sorted(times[1:] if len(times) > 1 else times)[len(times[1:] or times) // 2]
    r = {"impl": "PyTorch %s eager" % torch.__version__.split("+")[0], "device": a.device,
         "threads": a.threads, "ms_per_step": ms, "tokens_per_s": a.batch * a.seq * 1e3 / ms,
         "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
         "first_loss": losses[0]}
    if cuda:
        r["peak_cuda_mb"] = torch.cuda.max_memory_allocated(device) / 1e6
        r["gpu"] = torch.cuda.get_device_name(device)
    print(json.dumps(r))
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "agree" and len(sys.argv) == 4:
        return agree(sys.argv[2:])
    if len(sys.argv) >= 2 and sys.argv[1] == "bench":
        return bench(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
