#!/usr/bin/env python3
"""Runs the LLTM benchmark for tg (fused, composed, GEMMs alone) and every PyTorch peer found,
alternating in rounds, and prints them side by side with the issue-10 goals checked.

  bench/compare.py                        # build/bench/lltm_bench, all sizes, 1 and 2 threads
  bench/compare.py --build build-rel --iters 50 --sizes 16x32x128 --threads 1
  bench/compare.py --rounds 5 --rss --markdown --jsonl results.jsonl

Peers (bench/pytorch_lltm.py under another python): every --python-peer given, else the
first of $TORCHVENV/bin/python, ${TMPDIR:-/tmp}/torchvenv/bin/python, /tmp/torchvenv/bin/python
that imports torch (PyPI's PyTorch 2: eager and torch.compile) and /usr/bin/python3 when it
imports torch (Debian's PyTorch 1.13: eager only, it has no torch.compile). Without any (or
with --no-pytorch) the peer columns are empty. Each peer's column is named after its torch
version and implementation ("PyTorch 2.15 eager").

Rounds: tg, then each peer, --rounds times (default 3); each number is the smallest of its
medians, so run-to-run drift on a shared or virtual machine (often 10-20%) biases no side.

Table 1, one row per (size, threads, mode): median forward / backward microseconds of each
implementation; "best peer" the fastest peer by forward+backward; ratios (forward+backward):
  fused vs best   best peer's time / tg fused's (above 1: tg faster)         goal 1: >= 1.1
  comp vs PT2     PyTorch 2 eager's time / tg composed's                     goal 3: >= 1.0
  fused/gemms     tg fused's time / its GEMMs' alone                         goal 2a: <= 1.15
and "misses", the goals the row misses. Table 2: speed-up of the most threads over 1 thread
(1-thread time / N-thread time) per implementation; goal 4: tg fused and composed never
below 1.0, and >= 1.8 at the largest size. Table 3, memory: the bytes each tg graph keeps for
backward (saved_bytes) and, with --rss, the peak resident memory growth of a training step
(lltm_bench's rss_growth_bytes), each implementation and point in a process of its own
(1 thread). A summary lists every miss per goal.

All processes inherit this environment, so BLIS settings (BLIS_ARCH_TYPE, ...) apply to tg
and to a peer whose torch uses BLIS through libblas.so.3 (the "blas" in the header says).
"""
import argparse
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_SIZES = "16x32x128,64x1024x128,128x256x512,256x1024x1024"
TG_IMPLS = ("tg_fused", "tg_composed", "tg_gemms")
GOAL_FUSED_VS_PEER, GOAL_COMPOSED_VS_EAGER, GOAL_FUSED_OVER_GEMMS = 1.1, 1.0, 1.15
GOAL_SPEEDUP_ANY, GOAL_SPEEDUP_LARGEST = 1.0, 1.8

PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__, "
         "'file': torch.__file__, 'compile': hasattr(torch, 'compile')}))")


def run_jsonl(cmd, env=None, fatal=True):
    print("# " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if out.returncode != 0:
        if fatal:
            sys.exit(f"compare.py: {cmd[0]} exited with {out.returncode}")
        print(f"compare.py: {cmd[0]} exited with {out.returncode}: its results so far kept",
              file=sys.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


# ---- peers ----

def probe(py):
    """{'version', 'file', 'compile'} of the torch `py` imports, or None."""
    if not py or not os.access(py, os.X_OK):
        return None
    try:
        out = subprocess.run([py, "-c", PROBE], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if out.returncode == 0 and lines else None


def find_peers(args):
    if args.no_pytorch:
        return []
    if args.python_peer:
        candidates = [(py, True) for py in args.python_peer]
    else:
        venvs = [os.path.join(os.environ["TORCHVENV"], "bin", "python")] if os.environ.get(
            "TORCHVENV") else []
        venvs += [os.path.join(os.environ.get("TMPDIR") or "/tmp", "torchvenv", "bin", "python"),
                  "/tmp/torchvenv/bin/python"]
        venv = next((py for py in venvs if probe(py)), None)
        candidates = [(venv, False), ("/usr/bin/python3", False)]
    peers, seen = [], set()
    for py, required in candidates:
        info = probe(py)
        if not info:
            if required:
                sys.exit(f"compare.py: --python-peer {py} does not import torch")
            continue
        if info["file"] in seen:  # the same torch twice (a venv on the system site-packages)
            continue
        seen.add(info["file"])
        short = ".".join(info["version"].split("+")[0].split(".")[:2])
        label = f"PyTorch {short}"
        while any(p["label"] == label for p in peers):
            label += "'"
        peers.append({"python": py, "version": info["version"], "label": label,
                      "major": int(short.split(".")[0]) if short.split(".")[0].isdigit() else 0,
                      "impls": ["eager", "compiled"] if info["compile"] else ["eager"]})
    if not peers:
        print("# no python with torch found: peer columns left empty", file=sys.stderr)
    return peers


def peer_column(peer, impl):
    return f"{peer['label']} {impl.replace('pytorch_', '')}"


# ---- running ----

def collect(args, bench, peers, sink=None):
    """Every result line of every round; peer lines get "column" (their table column). Each
    line also goes to sink as soon as its process ends, so a run stopped early keeps them."""
    common = ["--iters", str(args.iters), "--threads", args.threads, "--sizes", args.sizes,
              "--modes", args.modes]
    rows, skipped = [], {}

    def keep(new_rows):
        rows.extend(new_rows)
        if sink:
            for r in new_rows:
                sink.write(json.dumps(r) + "\n")
            sink.flush()

    for _ in range(args.rounds):
        keep([dict(r, column=r["impl"]) for r in run_jsonl([bench] + common)])
        for peer in peers:
            cmd = [peer["python"], os.path.join(HERE, "pytorch_lltm.py"), *common,
                   "--impl", ",".join(peer["impls"])]
            for r in run_jsonl(cmd, fatal=False):
                r["column"] = peer_column(peer, r["impl"])
                r["peer"] = peer["label"]
                if "skipped" in r:
                    skipped[r["column"]] = r["skipped"]
                else:
                    keep([r])
                    peer.setdefault("blas", r.get("blas"))
    return rows, skipped


def collect_rss(args, bench):
    """rss_growth_bytes per (size, mode, impl): one lltm_bench process per point, 1 thread."""
    out = {}
    for size in args.sizes.split(","):
        for mode in args.modes.split(","):
            for impl in ("fused", "composed"):
                cmd = [bench, "--iters", str(args.iters), "--threads", "1", "--sizes", size,
                       "--modes", mode, "--impls", impl]
                for r in run_jsonl(cmd):
                    if "rss_growth_bytes" in r:
                        out[(r["batch"], r["features"], r["state"], mode, r["impl"])] = \
                            r["rss_growth_bytes"]
    return out


def best_of_rounds(rows):
    """{(b, f, s, threads, mode): {column: row with the smallest forward and backward}}."""
    table = {}
    for r in rows:
        key = (r["batch"], r["features"], r["state"], r["threads"], r["mode"])
        best = table.setdefault(key, {}).setdefault(r["column"], dict(r))
        for field in ("forward_us", "backward_us"):
            best[field] = min(best[field], r[field])
    return table


# ---- formatting ----

def total(r):
    return r["forward_us"] + r["backward_us"] if r else None


def us(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def pair(r):
    return f"{us(r['forward_us'])} / {us(r['backward_us'])}" if r else "-"


def ratio(a, b):
    return a / b if a and b else None


def fmt_ratio(x, suffix="x"):
    return f"{x:.2f}{suffix}" if x is not None else "-"


def nbytes(v):
    if v is None:
        return "-"
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if v >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{v} B"


def version_key(version):
    return tuple(int(x) if x.isdigit() else 0 for x in version.split("+")[0].split("."))


def size_name(b, f, s, markdown):
    return f"{b}×{f}×{s}" if markdown else f"{b}x{f}x{s}"


def render(headers, rows, markdown):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(headers), "-" * len(fmt(headers))] + [fmt(r) for r in rows])


def machine():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blis = {k: v for k, v in os.environ.items() if k.startswith("BLIS_")}
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}" + (
        f", {' '.join(f'{k}={v}' for k, v in sorted(blis.items()))}" if blis else "")


def point_order(k):
    return (k[0] * k[1] * k[2], k[3], k[4] != "params")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="tg build directory holding bench/lltm_bench (default: build/)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--sizes", default=DEFAULT_SIZES)
    p.add_argument("--modes", default="params,all")
    p.add_argument("--python-peer", "--python", action="append", metavar="PYTHON",
                   help="a python with torch to run bench/pytorch_lltm.py (repeatable; "
                        "default: the torchvenv and /usr/bin/python3, see above)")
    p.add_argument("--no-pytorch", action="store_true", help="tg only")
    p.add_argument("--rounds", "--repeat", type=int, default=3,
                   help="run everything N times, alternating; keep each number's smallest "
                        "median (default 3)")
    p.add_argument("--rss", action="store_true",
                   help="also measure each training step's peak RSS (one process per point)")
    p.add_argument("--markdown", action="store_true", help="tables as GitHub markdown")
    p.add_argument("--jsonl", help="also write every result line to this file, as it comes")
    args = p.parse_args()
    if args.iters < 1 or args.rounds < 1:
        p.error("--iters and --rounds must be at least 1")

    bench = os.path.join(args.build, "bench", "lltm_bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"compare.py: {bench} not found; build tg first (cmake --build {args.build})")
    peers = find_peers(args)
    sink = open(args.jsonl, "w") if args.jsonl else None
    rows, skipped = collect(args, bench, peers, sink)
    if sink:
        sink.close()
    rss = collect_rss(args, bench) if args.rss else {}
    table = best_of_rounds(rows)
    md = args.markdown
    measured = {r["column"] for r in rows}
    peer_cols = [peer_column(peer, i) for peer in peers for i in peer["impls"]
                 if peer_column(peer, i) in measured]
    pt2 = max((peer for peer in peers if peer["major"] >= 2), key=lambda q: version_key(q["version"]),
              default=None)
    eager2 = peer_column(pt2, "eager") if pt2 else None

    # ---- header ----
    kernels = sorted({r["blis_kernels"] + (f" (GEMMs of 2^22 multiply-adds and more: "
                                            f"{r['blis_large_kernels']})"
                                            if r.get("blis_large_kernels") else "")
                      + (f", GEMM engine per shape class chosen by {r['gemm_engines_chosen_by']}"
                         if r.get("gemm_engines_chosen_by") else "")
                      for r in rows if "blis_kernels" in r})
    print(f"machine: {machine()}")
    print(f"tg: {bench}, BLIS kernels {', '.join(kernels) or '?'}")
    for peer in peers:
        compile_s = [r["compile_s"] for r in rows
                     if r.get("peer") == peer["label"] and "compile_s" in r]
        extra = (f", torch.compile took {min(compile_s):.1f}-{max(compile_s):.1f} s per point"
                 if compile_s else "")
        print(f"{peer['label']}: torch {peer['version']} ({peer['python']}), BLAS "
              f"{peer.get('blas') or '?'}{extra}")
    for col, why in sorted(skipped.items()):
        print(f"{col}: skipped{' at some points' if col in measured else ''}: {why}")
    print(f"command: {' '.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])}")
    print(f"F32, CPU; median µs forward / backward over {args.iters} iterations, best of "
          f"{args.rounds} alternating round(s)\n")

    # ---- table 1 ----
    misses = {"1": [], "2a": [], "3": [], "4": []}
    headers = (["B×I×S" if md else "BxIxS", "thr", "mode", "tg fused", "tg composed",
                "tg gemms"] + peer_cols + ["best peer", "fused vs best", "composed vs PT2 eager",
                                           "fused/gemms", "misses"])
    out = []
    for key in sorted(table, key=point_order):
        b, f, s, thr, mode = key
        t = table[key]
        fused, comp, gemms = (t.get(n) for n in TG_IMPLS)
        present = [c for c in peer_cols if t.get(c)]
        best = min(present, key=lambda c: total(t[c])) if present else None
        r1 = ratio(total(t.get(best)), total(fused))
        r3 = ratio(total(t.get(eager2)), total(comp))
        r2 = ratio(total(fused), total(gemms))
        name = f"{size_name(b, f, s, md)} {thr} {mode}"
        missed = []
        for goal, value, ok in (("1", r1, r1 is None or r1 >= GOAL_FUSED_VS_PEER),
                                ("2a", r2, r2 is None or r2 <= GOAL_FUSED_OVER_GEMMS),
                                ("3", r3, r3 is None or r3 >= GOAL_COMPOSED_VS_EAGER)):
            if not ok:
                missed.append(goal)
                misses[goal].append(f"{name} ({value:.3f})")
        out.append([size_name(b, f, s, md), str(thr), mode, pair(fused), pair(comp), pair(gemms)]
                   + [pair(t.get(c)) for c in peer_cols]
                   + [best or "-", fmt_ratio(r1), fmt_ratio(r3), fmt_ratio(r2, ""),
                      ",".join(missed) or "-"])
    print(render(headers, out, md))

    # ---- table 2: threads ----
    threads = sorted({k[3] for k in table})
    if len(threads) > 1 and threads[0] == 1:
        n = threads[-1]
        cols = list(TG_IMPLS[:2]) + peer_cols
        points = sorted({(k[0], k[1], k[2], k[4]) for k in table},
                        key=lambda k: (k[0] * k[1] * k[2], k[3] != "params"))
        largest = max(b * f * s for b, f, s, _ in points)
        out = []
        for b, f, s, mode in points:
            one, many = table.get((b, f, s, 1, mode), {}), table.get((b, f, s, n, mode), {})
            ups = {c: ratio(total(one.get(c)), total(many.get(c))) for c in cols}
            need = GOAL_SPEEDUP_LARGEST if b * f * s == largest else GOAL_SPEEDUP_ANY
            missed = [c.replace("tg_", "") for c in TG_IMPLS[:2]
                      if ups[c] is not None and ups[c] < need]
            for c in missed:
                misses["4"].append(f"{size_name(b, f, s, md)} {mode} {c} ({ups['tg_' + c]:.3f}, "
                                   f"needs {need})")
            out.append([size_name(b, f, s, md), mode] + [fmt_ratio(ups[c]) for c in cols]
                       + [",".join(missed) or "-"])
        print(f"\nspeed-up of {n} threads over 1 (1-thread time / {n}-thread time, "
              f"forward+backward); goal 4: >= {GOAL_SPEEDUP_ANY}, >= {GOAL_SPEEDUP_LARGEST} "
              "at the largest size")
        print(render(["B×I×S" if md else "BxIxS", "mode", "tg fused", "tg composed"]
                     + peer_cols + ["misses goal 4"], out, md))

    # ---- table 3: memory ----
    out = []
    for b, f, s, mode in sorted({(k[0], k[1], k[2], k[4]) for k in table},
                                key=lambda k: (k[0] * k[1] * k[2], k[3] != "params")):
        one = table.get((b, f, s, min(threads), mode), {})
        sf, sc = (one.get(n, {}).get("saved_bytes") for n in ("tg_fused", "tg_composed"))
        rf, rc = (rss.get((b, f, s, mode, n)) for n in ("tg_fused", "tg_composed"))
        out.append([size_name(b, f, s, md), mode, nbytes(sf), nbytes(sc),
                    fmt_ratio(ratio(sf, sc), ""), nbytes(rf), nbytes(rc),
                    fmt_ratio(ratio(rf, rc), "")])
    print("\nmemory: bytes the graph keeps for backward (saved) and, with --rss, peak RSS "
          "growth of a training step (one process per point, 1 thread)")
    print(render(["B×I×S" if md else "BxIxS", "mode", "saved fused", "saved composed",
                  "fused/composed", "RSS fused", "RSS composed", "fused/composed"], out, md))

    # ---- summary ----
    print("\ngoals missed:" + ("" if any(misses.values()) else " none"))
    names = {"1": f"fused >= {GOAL_FUSED_VS_PEER}x best peer",
             "2a": f"fused/gemms <= {GOAL_FUSED_OVER_GEMMS}",
             "3": f"composed >= {GOAL_COMPOSED_VS_EAGER}x PyTorch 2 eager",
             "4": "2 threads not slower than 1, >= 1.8x at the largest"}
    for goal, where in misses.items():
        if where:
            print(f"- goal {goal} ({names[goal]}): {'; '.join(where)}")
    if not peers:
        print("- goals 1 and 3 not checked: no peer")
    elif not eager2:
        print("- goal 3 not checked: no PyTorch 2 peer")


if __name__ == "__main__":
    main()
