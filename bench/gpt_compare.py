#!/usr/bin/env python3
"""The GPT-2 training step, tg (examples/train_gpt.c) against PyTorch eager
(bench/gpt_torch.py bench), alternating in rounds, at 1 and 2 threads, on the issue's two
configurations:

  small        4 layers, 4 heads, 256 channels, vocab 256,   T 256, batch 8
  gpt2-small  12 layers, 12 heads, 768 channels, vocab 50257, T 64,  batch 4

  bench/gpt_compare.py [--build build] [--python /tmp/torchvenv/bin/python] [--rounds 2]
                       [--steps 5] [--threads 1,2] [--configs small,gpt2-small] [--composed]
                       [--device cuda]

Both train on uniformly random token ids (the cost of a step does not depend on the text)
with AdamW (lr 1e-4, no weight decay), each program in a process of its own. Each number is
the smallest over the rounds of a run's median ms per step (its first step left out: it
allocates what the others reuse), so drift on a shared machine biases neither side. Peak RSS
is each process's VmHWM / ru_maxrss (so it includes the initialisation). PyTorch runs twice a
round: with glibc's default malloc settings (the issue's table), and with malloc kept from
returning memory to the system (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ past any step's
memory: "PyTorch, at its better setting, is the bar"; without it a third of GPT-2 small's step
was page faults on the issue's Xeon). tg keeps its freed CPU storage in its own caching
allocator, so it needs no such setting. --no-kept leaves the second one out.

--device cuda trains both on the GPU (one CPU thread unless --threads says otherwise; each
step ends with a device synchronize in both) and adds each one's peak device memory in use:
tg's CUDA allocator's peak (tg_cuda_memory_stats) and torch.cuda.max_memory_allocated.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = {
    "small": dict(layers=4, heads=4, channels=256, vocab=256, seq=256, batch=8),
    "gpt2-small": dict(layers=12, heads=12, channels=768, vocab=50257, seq=64, batch=4),
}


def run_tg(exe, cfg, steps, threads, composed, device):
    cmd = [exe] + [x for k, v in cfg.items() for x in ("--" + k, str(v))] + [
        "--random-tokens", str(max(20000, 4 * cfg["batch"] * cfg["seq"] * 10)), "--steps",
        str(steps), "--threads", str(threads), "--val-windows", "1", "--lr", "1e-4", "--quiet",
        "--composed" if composed else "--fused", "--device", device]
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("gpt_compare.py: train_gpt failed:\n" + out.stdout + out.stderr)
    ms = float(re.search(r"median ([.0-9]+) ms/step", out.stdout).group(1))
    rss = float(re.search(r"peak RSS ([.0-9]+) MB", out.stdout).group(1))
    dev = re.search(r"peak CUDA memory in use ([.0-9]+) MB", out.stdout)
    return ms, rss, float(dev.group(1)) if dev else None


# glibc's malloc kept from giving memory back: no mmap'ed blocks, no trimming of the heap.
KEPT_MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def run_torch(python, cfg, steps, threads, device, kept=False):
    cmd = [python, os.path.join(HERE, "gpt_torch.py"), "bench"] + [
        x for k, v in cfg.items() for x in ("--" + k, str(v))] + [
        "--steps", str(steps), "--threads", str(threads), "--device", device]
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    env = dict(os.environ, **KEPT_MALLOC) if kept else None
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit("gpt_compare.py: gpt_torch.py failed:\n" + out.stdout + out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["ms_per_step"], r["peak_rss_mb"], r.get("peak_cuda_mb"), r["impl"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default="/tmp/torchvenv/bin/python")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", help="CPU threads, a list (default 1,2; with --device cuda 1)")
    p.add_argument("--configs", default="small,gpt2-small")
    p.add_argument("--composed", action="store_true", help="tg's composed attention")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--no-kept", action="store_true",
                   help="leave out PyTorch with malloc kept from returning memory")
    a = p.parse_args()
    kept = not a.no_kept and a.device == "cpu"
    if a.threads is None:
        a.threads = "1" if a.device != "cpu" else "1,2"
    exe = os.path.join(a.build, "train_gpt")
    rows, impl = [], "PyTorch"
    for name in a.configs.split(","):
        cfg = CONFIGS[name]
        tokens = cfg["batch"] * cfg["seq"]
        for threads in (int(t) for t in a.threads.split(",")):
            none = (float("inf"), 0.0, None)
            best = {"tg": none, "pt": none, "kept": none}
            for _ in range(a.rounds):
                best["tg"] = min(best["tg"], run_tg(exe, cfg, a.steps, threads, a.composed,
                                                    a.device), key=lambda r: r[0])
                *pt, impl = run_torch(a.python, cfg, a.steps, threads, a.device)
                best["pt"] = min(best["pt"], tuple(pt), key=lambda r: r[0])
                if kept:
                    *pt, _ = run_torch(a.python, cfg, a.steps, threads, a.device, kept=True)
                    best["kept"] = min(best["kept"], tuple(pt), key=lambda r: r[0])
            rows.append((name, threads, tokens, best))
            print(json.dumps({"config": name, "device": a.device, "threads": threads,
                              "tg_ms": best["tg"][0], "tg_rss_mb": best["tg"][1],
                              "tg_cuda_mb": best["tg"][2], "torch_ms": best["pt"][0],
                              "torch_rss_mb": best["pt"][1], "torch_cuda_mb": best["pt"][2],
                              "torch_kept_ms": best["kept"][0] if kept else None,
                              "torch_kept_rss_mb": best["kept"][1] if kept else None}),
                  flush=True)
    cuda = a.device != "cpu"
    print("\n| config | device | threads | tg ms/step | %s ms/step | tg tokens/s | "
          "PyTorch tokens/s | PyTorch / tg time | tg peak RSS | PyTorch peak RSS |%s%s" %
          (impl, " PyTorch, malloc kept: ms/step | PyTorch kept / tg time | its peak RSS |"
           if kept else "", " tg peak device memory | PyTorch peak device memory |"
           if cuda else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if kept else "") +
          ("---|---|" if cuda else ""))
    for name, threads, tokens, b in rows:
        (tm, tr, td), (pm, pr, pd), (km, kr, _) = b["tg"], b["pt"], b["kept"]
        print("| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %.2fx | %.0f MB | %.0f MB |%s%s"
              % (name, a.device, threads, tm, pm, tokens * 1e3 / tm, tokens * 1e3 / pm, pm / tm,
                 tr, pr, " %.0f | %.2fx | %.0f MB |" % (km, km / tm, kr) if kept else "",
                 " %.0f MB | %.0f MB |" % (td, pd) if cuda else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
