"""DLPack exchange between tg (libtg.so through ctypes) and PyTorch, both ways, zero-copy.

Usage: dlpack_torch.py PATH/TO/libtg.so
Exits 77 (ctest: skipped) when torch cannot be imported, saying why. Checks values,
strides, shared memory (a write on either side shows on the other), that every deleter runs
exactly once and only after the last user let go, and that tg ends with no live object.
"""
import ctypes
import gc
import sys

try:
    import torch
    import torch.utils.dlpack
except Exception as e:  # ImportError, or a broken install
    print(f"SKIP: torch cannot be imported by {sys.executable}: {e!r}")
    sys.exit(77)

TG_F32, TG_F64, TG_I64 = 0, 1, 2
TORCH_DTYPES = {TG_F32: torch.float32, TG_F64: torch.float64, TG_I64: torch.int64}


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class Options(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("device", Device), ("requires_grad", ctypes.c_bool)]


class Scope(ctypes.Structure):
    _fields_ = [("depth", ctypes.c_int), ("serial", ctypes.c_uint64)]


# dlpack/dlpack.h, version 0.6
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
]

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
I64P = ctypes.POINTER(ctypes.c_int64)
for name, res, args in [
    ("tg_arange", P, [ctypes.c_double, ctypes.c_double, ctypes.c_double, Options]),
    ("tg_view", P, [P, ctypes.c_int, I64P]),
    ("tg_t", P, [P]),
    ("tg_to_dlpack", ctypes.POINTER(DLManagedTensor), [P]),
    ("tg_from_dlpack", P, [ctypes.POINTER(DLManagedTensor)]),
    ("tg_get", ctypes.c_int, [P, I64P, ctypes.POINTER(ctypes.c_double)]),
    ("tg_set", ctypes.c_int, [P, I64P, ctypes.c_double]),
    ("tg_ndim", ctypes.c_int, [P]),
    ("tg_size", ctypes.c_int64, [P, ctypes.c_int]),
    ("tg_stride", ctypes.c_int64, [P, ctypes.c_int]),
    ("tg_tensor_dtype", ctypes.c_int, [P]),
    ("tg_retain", P, [P]),
    ("tg_release", None, [P]),
    ("tg_scope_begin", Scope, []),
    ("tg_scope_end", ctypes.c_int, [Scope]),
    ("tg_live_objects", ctypes.c_int64, []),
    ("tg_last_error_message", ctypes.c_char_p, []),
]:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = res, args

capi = ctypes.pythonapi
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_SetName.restype = ctypes.c_int
capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# A capsule keeps the name's address: these must outlive every capsule.
DLTENSOR = ctypes.c_char_p(b"dltensor")
USED_DLTENSOR = ctypes.c_char_p(b"used_dltensor")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def tg_error():
    return lib.tg_last_error_message().decode()


def index(*ix):
    return (ctypes.c_int64 * len(ix))(*ix)


def tg_get(t, *ix):
    out = ctypes.c_double()
    assert lib.tg_get(t, index(*ix), ctypes.byref(out)) == 0, tg_error()
    return out.value


def tg_values(t):
    """All elements of a 2-D tg tensor, as nested lists of floats."""
    rows, cols = lib.tg_size(t, 0), lib.tg_size(t, 1)
    return [[tg_get(t, i, j) for j in range(cols)] for i in range(rows)]


class CountingWrapper:
    """A DLManagedTensor of our own around another one, whose deleter counts its calls
    before calling the inner deleter: the consumer sees an owner that is not tg's nor
    torch's, and we see exactly how often it was deleted."""

    def __init__(self, inner_ptr):
        self.inner = inner_ptr
        self.deletes = 0
        self.deleter = DELETER(self._delete)  # kept alive as long as self
        self.managed = DLManagedTensor()
        self.managed.dl_tensor = inner_ptr.contents.dl_tensor
        self.managed.manager_ctx = None
        self.managed.deleter = self.deleter

    def _delete(self, _):
        self.deletes += 1
        inner = self.inner.contents
        inner.deleter(self.inner)

    @property
    def pointer(self):
        return ctypes.pointer(self.managed)


def tg_to_torch(dtype):
    """tg -> DLPack -> torch: values, strides, writes both ways, one deletion."""
    start = lib.tg_live_objects()
    scope = lib.tg_scope_begin()
    base = lib.tg_view(lib.tg_arange(0, 12, 1, Options(dtype)), 2, index(3, 4))
    t = lib.tg_t(base)  # [4, 3], strides [1, 4]: not contiguous
    m = lib.tg_to_dlpack(t)
    assert m, tg_error()
    wrapper = CountingWrapper(m)
    x = torch.utils.dlpack.from_dlpack(capi.PyCapsule_New(wrapper.pointer, DLTENSOR, None))
    check(x.dtype == TORCH_DTYPES[dtype], f"tg->torch {dtype}: dtype {x.dtype}")
    check(tuple(x.shape) == (4, 3), f"tg->torch {dtype}: shape {tuple(x.shape)}")
    check(x.stride() == (1, 4), f"tg->torch {dtype}: strides {x.stride()}")
    want = torch.arange(12, dtype=x.dtype).reshape(3, 4).t()
    check(torch.equal(x, want), f"tg->torch {dtype}: values {x.tolist()}")
    x[1, 2] = 100  # torch writes, tg reads
    check(tg_get(t, 1, 2) == 100, f"tg->torch {dtype}: torch's write not seen by tg")
    check(tg_get(base, 2, 1) == 100, f"tg->torch {dtype}: nor through tg's base tensor")
    lib.tg_set(base, index(0, 3), -5)  # tg writes, torch reads
    check(x[3, 0].item() == -5, f"tg->torch {dtype}: tg's write not seen by torch")
    lib.tg_scope_end(scope)
    # tg let go; torch's tensor still holds the storage through the export.
    check(wrapper.deletes == 0, f"tg->torch {dtype}: deleted while torch holds it")
    check(lib.tg_live_objects() > start, f"tg->torch {dtype}: storage freed under torch")
    check(x[3, 0].item() == -5 and x[1, 2].item() == 100, f"tg->torch {dtype}: memory changed")
    y = x[1:]  # a torch view keeps it alive too
    del x
    gc.collect()
    check(wrapper.deletes == 0, f"tg->torch {dtype}: deleted while a torch view holds it")
    del y
    gc.collect()
    check(wrapper.deletes == 1, f"tg->torch {dtype}: deleter ran {wrapper.deletes} times")
    check(lib.tg_live_objects() == start, f"tg->torch {dtype}: {lib.tg_live_objects()} live")


def torch_to_tg(dtype):
    """torch -> DLPack -> tg: values, strides, writes both ways, torch's deleter once."""
    start = lib.tg_live_objects()
    tdt = TORCH_DTYPES[dtype]
    x = torch.arange(20, dtype=tdt).reshape(4, 5)[1:, ::2]  # [3, 3] strides [5, 2] offset 5
    cap = torch.utils.dlpack.to_dlpack(x)
    inner = ctypes.cast(capi.PyCapsule_GetPointer(cap, DLTENSOR), ctypes.POINTER(DLManagedTensor))
    wrapper = CountingWrapper(inner)
    scope = lib.tg_scope_begin()
    t = lib.tg_from_dlpack(wrapper.pointer)
    assert t, tg_error()
    capi.PyCapsule_SetName(cap, USED_DLTENSOR)  # tg owns it now: torch must not delete it
    del cap
    check(lib.tg_tensor_dtype(t) == dtype, f"torch->tg {tdt}: dtype {lib.tg_tensor_dtype(t)}")
    strides = (lib.tg_stride(t, 0), lib.tg_stride(t, 1))
    check(strides == x.stride(), f"torch->tg {tdt}: strides {strides} vs {x.stride()}")
    check(tg_values(t) == x.double().tolist(), f"torch->tg {tdt}: values {tg_values(t)}")
    lib.tg_set(t, index(2, 1), 77)  # tg writes, torch reads
    check(x[2, 1].item() == 77, f"torch->tg {tdt}: tg's write not seen by torch")
    x[0, 2] = -3  # torch writes, tg reads
    check(tg_get(t, 0, 2) == -3, f"torch->tg {tdt}: torch's write not seen by tg")
    kept = lib.tg_retain(lib.tg_t(t))  # a view of tg's own, past the scope
    lib.tg_scope_end(scope)
    check(wrapper.deletes == 0, f"torch->tg {tdt}: deleted while a tg view holds it")
    check(tg_get(kept, 1, 2) == 77, f"torch->tg {tdt}: the view lost the memory")
    lib.tg_release(kept)
    check(wrapper.deletes == 1, f"torch->tg {tdt}: deleter ran {wrapper.deletes} times")
    check(lib.tg_live_objects() == start, f"torch->tg {tdt}: {lib.tg_live_objects()} live")
    check(x[2, 1].item() == 77, f"torch->tg {tdt}: torch's tensor changed after tg let go")
    del x
    gc.collect()
    check(wrapper.deletes == 1, f"torch->tg {tdt}: deleter ran again")


def torch_refused_capsule_stays_torch():
    """A tensor tg cannot take (float16): an error, and the capsule is still torch's."""
    x = torch.ones(3, dtype=torch.float16)
    cap = torch.utils.dlpack.to_dlpack(x)
    m = ctypes.cast(capi.PyCapsule_GetPointer(cap, DLTENSOR), ctypes.POINTER(DLManagedTensor))
    check(not lib.tg_from_dlpack(m), "float16 accepted")
    check("bits 16" in tg_error(), f"float16: message {tg_error()!r}")
    # Still named "dltensor": torch's capsule destructor frees it, once.
    y = torch.utils.dlpack.from_dlpack(cap)
    check(torch.equal(y, x), "float16: torch could not take its capsule back")


def round_trip_through_torch():
    """tg -> torch -> tg: the same memory, and tg back to no live object."""
    start = lib.tg_live_objects()
    scope = lib.tg_scope_begin()
    t = lib.tg_view(lib.tg_arange(0, 6, 1, Options(TG_F64)), 2, index(2, 3))
    x = torch.utils.dlpack.from_dlpack(capi.PyCapsule_New(lib.tg_to_dlpack(t), DLTENSOR, None))
    cap = torch.utils.dlpack.to_dlpack(x.t())
    u = lib.tg_from_dlpack(ctypes.cast(capi.PyCapsule_GetPointer(cap, DLTENSOR),
                                       ctypes.POINTER(DLManagedTensor)))
    assert u, tg_error()
    capi.PyCapsule_SetName(cap, USED_DLTENSOR)
    lib.tg_set(u, index(2, 1), 9)
    check(tg_get(t, 1, 2) == 9, "tg->torch->tg: not the same memory")
    del cap, x
    gc.collect()
    lib.tg_scope_end(scope)
    check(lib.tg_live_objects() == start, f"tg->torch->tg: {lib.tg_live_objects()} live")


for dt in (TG_F32, TG_F64, TG_I64):
    tg_to_torch(dt)
    torch_to_tg(dt)
torch_refused_capsule_stays_torch()
round_trip_through_torch()
gc.collect()
check(lib.tg_live_objects() == 0, f"at the end: {lib.tg_live_objects()} live objects")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print(f"dlpack_torch: all checks passed (torch {torch.__version__})")
