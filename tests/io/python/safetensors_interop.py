#!/usr/bin/python3
"""safetensors interop between tg and Python, both ways, compared exactly.

    safetensors_interop.py TOOL

TOOL is tests/io/safetensors_interop_tool.c built (write PATH / dump PATH). Python writes files
that tg reads (tensors in shuffled header and data order, every dtype tg reads, 0-dim,
zero-size, NaN payloads, metadata) and tg writes files that Python reads (values from
formulas computed here as well); Python also re-writes tg's file and tg reads it back.

The Python side is the `safetensors` package when it is importable, otherwise the reference
reader and writer below: an implementation of the published format written from its
description (json + struct + numpy), independent of the C code. Exits 77 (a visible skip)
when numpy is missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not importable by %s" % sys.executable)
    sys.exit(77)

try:
    import safetensors.numpy as st_numpy
    from safetensors import safe_open
except ImportError:
    st_numpy = None

DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
MAX_HEADER = 100 << 20


def fail(msg):
    print("safetensors_interop: FAIL: " + msg)
    sys.exit(1)


# ---- the reference implementation of the format ----

def ref_write(path, tensors, metadata=None, order=None):
    """Writes tensors (name -> numpy array) with data in `order` (default: dict order)."""
    names = list(order or tensors)
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in names:
        a = tensors[name]
        code = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64",
                np.dtype("<f2"): "F16"}[a.dtype.newbyteorder("<")]
        data = np.array(a, dtype=a.dtype.newbyteorder("<"), order="C").tobytes(order="C")
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def ref_read(path):
    """Reads a file, checking the format's rules; returns (names in header order, names in
    data order (ties in header order), {name: array}, metadata, the header's bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("%s: shorter than 8 bytes" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER or 8 + n > len(blob):
        fail("%s: header length %d does not fit" % (path, n))
    raw = blob[8:8 + n]
    text = raw.decode("utf-8")
    if not text.startswith("{"):
        fail("%s: header does not start with '{'" % path)
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        fail("%s: duplicate keys" % path)
    header = dict(pairs)
    metadata = dict(header.pop("__metadata__", []))
    if not all(isinstance(v, str) for v in metadata.values()):
        fail("%s: metadata values must be strings" % path)
    buf = blob[8 + n:]
    names = [k for k in keys if k != "__metadata__"]
    entries = sorted(((dict(header[name])["data_offsets"], i, name)
                      for i, name in enumerate(names)))
    end = 0
    arrays = {}
    for (b, e), _, name in entries:
        info = dict(header[name])
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail("%s: %s has keys %s" % (path, name, sorted(info)))
        if b != end or e < b:
            fail("%s: %s at [%d, %d] does not follow %d" % (path, name, b, e, end))
        end = e
        dt = np.dtype(DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if count * dt.itemsize != e - b:
            fail("%s: %s: shape %s does not match [%d, %d]" % (path, name, shape, b, e))
        arrays[name] = np.frombuffer(buf[b:e], dtype=dt).reshape(shape)
    if end != len(buf):
        fail("%s: data buffer of %d bytes, tensors cover %d" % (path, len(buf), end))
    return names, [name for _, _, name in entries], arrays, metadata, raw


def py_write(path, tensors, metadata, order):
    if st_numpy is not None:
        st_numpy.save_file(tensors, path, metadata=metadata)
    else:
        ref_write(path, tensors, metadata, order)


def py_read(path):
    """(arrays, metadata) as the Python side reads them."""
    if st_numpy is not None:
        with safe_open(path, framework="np") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    _, _, arrays, metadata, _ = ref_read(path)
    return arrays, metadata


# ---- comparing ----

def dump_line(name, a):
    code = {"f4": "F32", "f8": "F64", "i8": "I64"}[a.dtype.str[1:]]
    data = np.array(a, dtype=a.dtype.newbyteorder("<"), order="C").tobytes()
    return "tensor %s %s %s %s" % (name, code, ",".join(str(d) for d in a.shape), data.hex())


def run_tool(tool, *args, expect_rc=0):
    p = subprocess.run([tool] + list(args), capture_output=True, text=True)
    if p.returncode != expect_rc:
        fail("%s %s: exit %d, expected %d\n%s%s" % (tool, " ".join(args), p.returncode,
                                                    expect_rc, p.stdout, p.stderr))
    return p


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def python_tensors():
    nan_payload = np.array([0x7ff8000000000123], dtype="<i8").view("<f8")[0]
    return {
        "embed.weight": (np.arange(24, dtype="<f4").reshape(2, 3, 4) * np.float32(-0.375)),
        "bias": np.array([np.inf, -0.0, 1e-45, np.nan, 3.4e38], dtype="<f4"),
        "f64": np.array([[np.pi, nan_payload], [-1e308, 5e-324]], dtype="<f8"),
        "steps": np.array([-(2 ** 63), 2 ** 63 - 1, 0, -1], dtype="<i8"),
        "scalar": np.array(7, dtype="<i8"),
        "nothing": np.zeros((3, 0), dtype="<f8"),
        "nothing2": np.zeros((0,), dtype="<f4"),
        "unicode.é": np.array([1.5], dtype="<f8"),
    }


def expected_from_c():
    """What safetensors_interop_tool write saves (its formulas, computed here)."""
    return {
        "layer.weight": (np.arange(12, dtype=np.float64) * 0.25 - 1).astype("<f4").reshape(3, 4),
        "x": 1.0 / (np.arange(5, dtype="<f8") + 1),
        "k": ((np.arange(6, dtype="<i8") - 3) * 10 ** 15).reshape(2, 3),
        "s": np.array(2.5, dtype="<f8"),
        "empty": np.zeros((0, 4), dtype="<f4"),
        "t": np.arange(12, dtype="<f8").reshape(3, 4).T,
    }, {"format": "tg", "note": "caf\u00e9 \"quoted\""}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    side = "the safetensors package" if st_numpy is not None else "the reference reader/writer"
    print("safetensors_interop: Python side is %s (numpy %s)" % (side, np.__version__))
    with tempfile.TemporaryDirectory() as tmp:
        # Python -> C: data order differs from the header's (JSON) key order.
        tensors = python_tensors()
        order = ["scalar", "f64", "nothing", "embed.weight", "unicode.é", "bias", "nothing2",
                 "steps"]
        metadata = {"format": "np", "epoch": "3", "unicode": "\u00fc\u20ac"}
        path = os.path.join(tmp, "from_python.safetensors")
        py_write(path, tensors, metadata, order)
        got = run_tool(tool, "dump", path).stdout.splitlines()
        data_order = ref_read(path)[1]  # tg returns tensors in data order
        if st_numpy is None and data_order != order:
            fail("the reference writer did not follow the order asked")
        want = [dump_line(n, tensors[n]) for n in data_order]
        meta_lines = ["meta %s %s" % kv for kv in metadata.items()]
        if got[:len(want)] != want or sorted(got[len(want):]) != sorted(meta_lines):
            fail("Python -> C differs:\n got  %s\n want %s" % ("\n      ".join(got),
                                                             "\n      ".join(want)))
        print("safetensors_interop: Python -> C: %d tensors, %d metadata items, exact"
              % (len(tensors), len(metadata)))

        # C -> Python
        path = os.path.join(tmp, "from_c.safetensors")
        run_tool(tool, "write", path)
        arrays, meta = py_read(path)
        want_arrays, want_meta = expected_from_c()
        if set(arrays) != set(want_arrays):
            fail("C -> Python: tensors %s, expected %s" % (sorted(arrays), sorted(want_arrays)))
        for name, want_a in want_arrays.items():
            if not same_bits(arrays[name], np.array(want_a, order="C")):
                fail("C -> Python: %s is %r, expected %r" % (name, arrays[name], want_a))
        if meta != want_meta:
            fail("C -> Python: metadata %r, expected %r" % (meta, want_meta))
        names, _, _, _, text = ref_read(path)  # the layout the Python package writes
        if names != list(want_arrays):
            fail("C -> Python: header order %s, expected the dict's %s" % (names, list(want_arrays)))
        if len(text) % 8 or len(text) - len(text.rstrip(b" ")) >= 8:
            fail("C -> Python: header of %d bytes not padded to 8 with spaces" % len(text))
        if not text.startswith(b'{"__metadata__":'):
            fail("C -> Python: metadata does not come first: %s" % text[:40])
        print("safetensors_interop: C -> Python: %d tensors, %d metadata items, exact"
              % (len(arrays), len(meta)))

        # C -> Python -> C: Python writes tg's file again (data in reverse order).
        path2 = os.path.join(tmp, "again.safetensors")
        py_write(path2, arrays, meta, list(reversed(names)))
        got = run_tool(tool, "dump", path2).stdout.splitlines()
        want = sorted(dump_line(n, want_arrays[n]) for n in names)
        if sorted(l for l in got if l.startswith("tensor ")) != want:
            fail("C -> Python -> C differs:\n%s" % "\n".join(got))
        print("safetensors_interop: C -> Python -> C: exact")

        # A file Python writes that tg must refuse: a dtype tg does not read.
        path3 = os.path.join(tmp, "f16.safetensors")
        ref_write(path3, {"half": np.ones(3, dtype="<f2")})
        err = run_tool(tool, "dump", path3, expect_rc=1).stderr
        if 'tensor "half" has dtype "F16"' not in err or "TG_ERR_DTYPE" not in err:
            fail("F16 file: unexpected error: %s" % err)
        print("safetensors_interop: an F16 file is refused: %s" % err.strip())
    print("safetensors_interop: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
