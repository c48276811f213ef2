#!/usr/bin/env python3
"""Fails when a public function of include/tg/ops.h, tensor.h, tensor_ops.h or testing.h has no case in
tests/parity/refs.txt and is not listed below as outside the comparison, so a new op joins
the comparison with PyTorch when it lands (tests/parity/README.md). No torch needed.

  tests/parity/check_coverage.py [ROOT]"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
HEADERS = ["include/tg/ops.h", "include/tg/tensor.h", "include/tg/tensor_ops.h",
           "include/tg/testing.h"]  # allclose: testing.h
# The op name of refs.txt where it is not the function's name less "tg_".
ALIASES = {"tg_allclose_ex": "allclose_nan"}
# Public functions outside the comparison, and why.
OUTSIDE = {
    "tg_from_data": "builds every input of every case",
    "tg_to_host_array": "reads every output of every case",
    "tg_empty": "values undefined", "tg_empty_like": "values undefined",
    "tg_rand": "tg's Philox stream is not torch's", "tg_randn": "random", "tg_uniform": "random",
    "tg_uniform_": "random", "tg_normal_": "random", "tg_manual_seed": "random",
    "tg_generator_new": "random", "tg_generator_free": "random", "tg_generator_seed": "random",
    "tg_generator_get_state": "random", "tg_generator_set_state": "random",
    "tg_scope_begin": "lifetimes", "tg_scope_end": "lifetimes", "tg_scope_escape": "lifetimes",
    "tg_scope_depth": "lifetimes", "tg_retain": "lifetimes", "tg_release": "lifetimes",
    "tg_live_objects": "lifetimes",
    "tg_op_register": "the op registry (tests/autograd/test_custom_function.c)",
    "tg_op_lookup": "the op registry", "tg_op_count": "the op registry",
    "tg_op_at": "the op registry",
    "tg_ndim": "properties, checked with every output", "tg_size": "properties",
    "tg_stride": "properties", "tg_sizes": "properties", "tg_strides": "properties",
    "tg_offset": "properties", "tg_numel": "properties", "tg_tensor_dtype": "properties",
    "tg_tensor_device": "properties", "tg_is_contiguous": "properties",
    "tg_shares_storage": "properties", "tg_data_ptr": "properties", "tg_version": "properties",
    "tg_to_string": "printing", "tg_fprint": "printing", "tg_print": "printing",
    "tg_gradcheck": "a testing tool: tg against itself", "tg_gradgradcheck": "a testing tool",
    "tg_op_check": "a testing tool",
    "tg_accessor_of": "a C access path, no values of its own",
    "tg_result_type": "a dtype, not values: every promoted case checks the dtype it picks; "
                      "its table and 0-dim rule are tests/ops/test_promotion.c's",
}


def public_functions(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"(?m)^\s*#.*(\\\n.*)*$", "", text)
    text = re.sub(r"typedef[^;]*;", "", text)
    return set(re.findall(r"\b(tg_[a-z0-9_]+)\s*\(", text))


def main():
    declared = set()
    for h in HEADERS:
        declared |= public_functions((ROOT / h).read_text())
    refs = (ROOT / "tests/parity/refs.txt").read_text()
    ops = set(re.findall(r"(?m)^C \S+ (\S+) ", refs))
    missing = sorted(f for f in declared
                     if f not in OUTSIDE and ALIASES.get(f, f[3:]) not in ops)
    gone = sorted(f for f in OUTSIDE if f not in declared)
    for f in missing:
        print("check_coverage: %s has no case in tests/parity/refs.txt: add it to gen_refs.py's "
              "OPS and adapters.c (or to OUTSIDE here, with the reason)" % f)
    for f in gone:
        print("check_coverage: %s is listed as outside the comparison but is not declared" % f)
    if missing or gone:
        return 1
    print("check_coverage: %d public functions, %d in refs.txt, %d outside" %
          (len(declared), len(declared) - len(OUTSIDE), len(OUTSIDE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
