#!/usr/bin/env python3
"""Times two builds of lltm_bench side by side: the same sizes, alternating which runs first,
--rounds times, keeping each number's best median; prints base, new and new/base.

    bench/compare_builds.py OLD/bench/lltm_bench NEW/bench/lltm_bench [--rounds 4]
        [-- lltm_bench arguments (default: --iters 200 --threads 1,2 --modes all
            --sizes 16x32x128,64x1024x128,128x256x512)]
"""
import argparse
import json
import subprocess
import sys

DEFAULT_ARGS = ["--iters", "200", "--threads", "1,2", "--modes", "all",
                "--sizes", "16x32x128,64x1024x128,128x256x512"]


def run(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        d = json.loads(line)
        key = (d["impl"], d["batch"], d["features"], d["state"], d["threads"], d["mode"])
        yield key, d["forward_us"], d["backward_us"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=4)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    opts = parser.parse_args(argv[:split])
    args = argv[split + 1:] or DEFAULT_ARGS
    best = {}
    for r in range(opts.rounds):
        order = [("base", opts.base), ("new", opts.new)]
        for name, binary in order if r % 2 == 0 else order[::-1]:
            for key, fwd, bwd in run(binary, args):
                f, b = best.get((name, key), (float("inf"), float("inf")))
                best[(name, key)] = (min(f, fwd), min(b, bwd))
    print("impl         B    F    S thr mode   | base fwd / bwd us    | new fwd / bwd us     "
          "| new/base fwd  bwd")
    for key in sorted({k for _, k in best}):
        (bf, bb), (nf, nb) = best[("base", key)], best[("new", key)]
        impl, B, F, S, thr, mode = key
        print(f"{impl:12} {B:4} {F:4} {S:4} {thr:3} {mode:6} | {bf:9.1f} / {bb:9.1f} "
              f"| {nf:9.1f} / {nb:9.1f} | {nf / bf:9.3f} {nb / bb:5.3f}")


if __name__ == "__main__":
    sys.exit(main())
