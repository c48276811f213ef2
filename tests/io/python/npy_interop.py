"""NumPy interop for tg's .npy reader and writer, both ways, compared exactly.

Run by ctest (tests/io/CMakeLists.txt) as
    /usr/bin/python3 npy_interop.py NPY_INTEROP_TOOL SCRATCH_DIR

1. numpy writes files (float32/float64/int64, '<' and '>', C and Fortran order, 0-dim,
   zero-size, odd shapes up to 8 dims, format versions 1.0, 2.0 and 3.0); the tool
   (tests/io/npy_interop_tool.c) loads each and prints dtype, sizes and element bits, which
   must equal numpy's. Files tg must refuse (float16, int32, object, structured, 9 dims) must
   fail with the expected status and message.
2. The tool writes tensors made in tg (transposed, sliced, expanded, special values...);
   numpy.load must give exactly the arrays numpy builds the same way, and the files must be
   byte for byte what np.save writes (numpy >= 1.23, whose header layout tg copies).

Exits 77 (ctest: skipped) when numpy cannot be imported.
"""
import io
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:  # a visible skip, never a silent pass
    print(f"SKIP npy_interop: numpy cannot be imported ({e})")
    sys.exit(77)

TOOL, SCRATCH = sys.argv[1], sys.argv[2]
TG_DTYPE = {"f4": "float32", "f8": "float64", "i8": "int64"}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def values(shape, kind, seed):
    """Deterministic values with NaN, -0.0 and infinities among the floats."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "i8":
        info = np.iinfo(np.int64)
        v = rng.integers(info.min, info.max, size=n, dtype=np.int64, endpoint=True)
        v[: min(n, 2)] = [info.min, info.max][: min(n, 2)]
    else:
        v = rng.standard_normal(n) * 1000
        specials = [np.nan, -0.0, np.inf, -np.inf]
        v[: min(n, 4)] = specials[: min(n, 4)]
        v = v.astype("f" + kind[1])
    return v.reshape(shape)


def bits(a):
    """Element bits in C order as the tool prints them."""
    a = np.array(a.astype(a.dtype.newbyteorder("=")), order="C")  # keeps 0-dim
    width = a.dtype.itemsize
    u = a.view(np.uint32 if width == 4 else np.uint64).ravel()
    return [format(int(x), "0%dx" % (2 * width)) for x in u]


def run_tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"npy_interop_tool {args[0]} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


shutil.rmtree(SCRATCH, ignore_errors=True)
from_numpy = os.path.join(SCRATCH, "from_numpy")
from_tg = os.path.join(SCRATCH, "from_tg")
os.makedirs(from_numpy)
os.makedirs(from_tg)

# ---- 1. numpy writes, tg reads ----
SHAPES = [(), (0,), (3, 0, 2), (5,), (2, 3), (3, 1, 4), (2, 3, 4, 5), (1, 2, 1, 3, 1, 2, 1, 2)]
expected = {}  # path -> array
fortran_files = 0
seed = 0
for kind in ("f4", "f8", "i8"):
    for order in "<>":
        for layout in "CF":
            for shape in SHAPES:
                seed += 1
                a = values(shape, kind, seed).astype(order + kind)
                if layout == "F":
                    a = np.asfortranarray(a)
                name = f"{order.replace('<', 'le').replace('>', 'be')}_{kind}_{layout}_" + (
                    "x".join(map(str, shape)) or "scalar")
                path = os.path.join(from_numpy, name + ".npy")
                np.save(path, a)
                with open(path, "rb") as f:
                    version = np.lib.format.read_magic(f)
                    header = np.lib.format._read_array_header(f, version)
                fortran_files += header[1]
                expected[path] = a
# versions 2.0 and 3.0
for version in ((2, 0), (3, 0)):
    a = values((4, 3), "f8", 100 + version[0]).astype(">f8")
    path = os.path.join(from_numpy, f"version_{version[0]}.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.asfortranarray(a), version=version)
    expected[path] = a
if fortran_files < 20:
    fail(f"only {fortran_files} files were written in Fortran order")

# files tg must refuse: (array, status, message fragment)
REFUSED = {
    "float16": (np.ones(3, np.float16), "TG_ERR_DTYPE", "unsupported dtype '<f2'"),
    "int32": (np.ones(3, ">i4"), "TG_ERR_DTYPE", "unsupported dtype '>i4'"),
    "bool": (np.ones(3, bool), "TG_ERR_DTYPE", "unsupported dtype '|b1'"),
    "object": (np.array([1, "a"], dtype=object), "TG_ERR_DTYPE", "unsupported dtype '|O'"),
    "structured": (np.zeros(2, dtype=[("a", "<f4"), ("b", "<i8")]), "TG_ERR_DTYPE",
                   "unsupported dtype [('a', '<f4'), ('b', '<i8')]"),
    "nine_dims": (np.zeros((1,) * 9, np.float32), "TG_ERR_UNSUPPORTED", "has 9 dims"),
}
refused_paths = {}
for name, (a, status, fragment) in REFUSED.items():
    path = os.path.join(from_numpy, f"refused_{name}.npy")
    np.save(path, a, allow_pickle=True)
    refused_paths[path] = (status, fragment)
# a file numpy wrote, cut short: tg says how many bytes are missing
cut = os.path.join(from_numpy, "refused_truncated.npy")
buf = io.BytesIO()
np.save(buf, np.arange(6, dtype=np.float32).reshape(2, 3))
with open(cut, "wb") as f:
    f.write(buf.getvalue()[:-4])
refused_paths[cut] = ("TG_ERR_FORMAT", "header says [2, 3] float32 = 24 bytes but the file has 20")

paths = list(expected) + list(refused_paths)
lines = run_tool("dump", *paths).splitlines()
if len(lines) != len(paths):
    fail(f"the tool printed {len(lines)} lines for {len(paths)} files")
for path, line in zip(paths, lines):
    got_path, rest = line.split(" ", 1)
    if got_path != path:
        fail(f"line for {got_path}, expected {path}")
        continue
    name = os.path.basename(path)
    if path in refused_paths:
        status, fragment = refused_paths[path]
        if not rest.startswith(f"error {status} tg_npy_load: '{path}': ") or fragment not in rest:
            fail(f"{name}: expected {status} with '{fragment}', got: {rest}")
        continue
    a = expected[path]
    kind = a.dtype.kind + str(a.dtype.itemsize)
    want = f"ok {TG_DTYPE[kind]} {a.ndim}" + "".join(f" {s}" for s in a.shape) + " :" + "".join(
        " " + b for b in bits(a))
    if rest != want:
        fail(f"{name}: tg read\n  {rest[:300]}\nexpected\n  {want[:300]}")
n_read = len(expected)

# ---- 2. tg writes, numpy reads ----
f32 = np.float32
C_WRITTEN = {
    "f32_2x3": np.arange(6, dtype=f32).reshape(2, 3) * f32(0.5) - f32(1),
    "f64_scalar": np.array(3.25),
    "i64_empty": np.zeros((3, 0, 2), np.int64),
    "f32_empty_1d": np.zeros((0,), f32),
    "f64_transposed": np.arange(12.0).reshape(3, 4).T,
    "i64_sliced": np.arange(20, dtype=np.int64).reshape(4, 5)[1:4:2, ::2],
    "f32_expanded": np.broadcast_to(np.arange(3, dtype=f32).reshape(3, 1), (2, 3, 4)),
    "f32_8d": np.arange(48, dtype=f32).reshape(1, 2, 1, 3, 1, 2, 1, 4),
    "f64_special": np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324, 1.7976931348623157e308]),
    "i64_extremes": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0]),
}
run_tool("write", from_tg)
same_bytes = hasattr(np.lib.format, "GROWTH_AXIS_MAX_DIGITS")
for name, want in C_WRITTEN.items():
    path = os.path.join(from_tg, name + ".npy")
    try:
        got = np.load(path)
    except Exception as e:
        fail(f"numpy cannot load tg's {name}.npy: {e}")
        continue
    want_le = np.array(want, dtype=want.dtype.newbyteorder("<"), order="C")
    if got.dtype.str != want_le.dtype.str or got.shape != want.shape:
        fail(f"{name}: numpy read {got.dtype.str} {got.shape}, expected {want_le.dtype.str} "
             f"{want.shape}")
    elif bits(got) != bits(want):
        fail(f"{name}: the elements differ: {got!r} vs {want!r}")
    if same_bytes:
        buf = io.BytesIO()
        np.save(buf, want_le)
        with open(path, "rb") as f:
            data = f.read()
        if data != buf.getvalue():
            fail(f"{name}: tg's file is not byte for byte what np.save writes:\n  {data[:140]!r}\n"
                 f"  {buf.getvalue()[:140]!r}")

if failures:
    print(f"npy_interop: {len(failures)} failure(s)")
    sys.exit(1)
print(f"npy_interop: ok: tg read {n_read} files numpy wrote and refused {len(refused_paths)} as "
      f"expected; numpy read {len(C_WRITTEN)} files tg wrote"
      + (", byte for byte np.save's" if same_bytes else " (bytes not compared: numpy < 1.23)"))
