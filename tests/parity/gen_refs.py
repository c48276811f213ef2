#!/usr/bin/env python3
"""Generates tests/parity/refs.txt: PyTorch's answers for every public tg op at the edges
(signed zeros, infinities, NaN, subnormals, huge values, exp overflow points, kinks, ties;
contiguous, transposed, stepped, expanded and broadcast layouts; zero-size dims; aliased
in-place writes), forward and backward. tests/test_parity.c replays them against tg without
torch. Run with any python that has torch:

    /tmp/torchvenv/bin/python tests/parity/gen_refs.py

An op joins by a line in OPS (name, torch function, case generator, tolerance) and an adapter
in tests/test_parity.c. The format is described in tests/parity/README.md."""
import hashlib
import math
import os
import re
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "refs.txt")
INF, NAN = math.inf, math.nan
DT = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64}
DTNAME = {v: k for k, v in DT.items()}
STEP_FILL = 777.0  # what the gaps of a stepped layout hold (must never be read)

# Edge values by dtype: (tag, value). Tags name the value in case ids.
EDGES = {
    "f64": [("0", 0.0), ("-0", -0.0), ("inf", INF), ("-inf", -INF), ("nan", NAN),
            ("minsub", 5e-324), ("sub", 1e-310), ("-sub", -1e-310), ("big", 1e300),
            ("-big", -1e300), ("tiny", 1e-300), ("ovf", 709.8), ("ovf+", 710.0),
            ("-ovf", -745.2), ("1", 1.0), ("-1", -1.0), ("half", 0.5), ("-2.5", -2.5),
            ("3", 3.0), ("20", 20.0), ("21", 21.0)],
    "f32": [("0", 0.0), ("-0", -0.0), ("inf", INF), ("-inf", -INF), ("nan", NAN),
            ("minsub", 1.401298464324817e-45), ("sub", 1e-40), ("-sub", -1e-40),
            ("big", 1e38), ("-big", -1e38), ("tiny", 1e-38), ("ovf", 88.7), ("ovf+", 89.0),
            ("-ovf", -104.0), ("1", 1.0), ("-1", -1.0), ("half", 0.5), ("-2.5", -2.5),
            ("3", 3.0), ("20", 20.0), ("21", 21.0)],
}
EPS = {"f32": 2.0**-23, "f64": 2.0**-52}


def fmt(v, dt):
    if dt == "i64" or isinstance(v, bool):
        return str(int(v))
    v = float(v)
    if v != v:
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    if v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    h = re.sub(r"0+p", "p", v.hex())
    return h.replace(".p", "p")


def vals(shape, seed=0, dt="f64"):
    """Deterministic small dyadic values (exact in F32), with repeats and zeros."""
    n = math.prod(shape)
    v = [((i * 37 + seed * 11) % 17 - 8) / 4.0 for i in range(n)]
    return torch.tensor(v, dtype=DT[dt]).reshape(shape)


def distinct(shape, seed=0, dt="f64"):
    n = math.prod(shape)
    v = [((i * 7 + seed * 3) % max(n, 1)) - n / 2 + 0.25 for i in range(n)]
    return torch.tensor(v, dtype=DT[dt]).reshape(shape)


def full(shape, value, dt):
    return torch.full(shape, value, dtype=DT[dt])


def edge_vec(dt):
    return torch.tensor([v for _, v in EDGES[dt]], dtype=DT[dt])


class In:
    """An input: logical values, layout (c, t, s, e<dim>) and whether it requires grad."""

    def __init__(self, t, layout="c", rg=None):
        self.t, self.layout = t, layout
        self.rg = t.is_floating_point() if rg is None else rg


def case(tag, ins, p=(), ip=(), gp="cyc"):
    return dict(tag=tag, ins=[i if isinstance(i, In) else In(i) for i in ins], p=list(p),
                ip=list(ip), gp=gp)


def build(inp):
    """The torch tensor for an input, in its layout; a leaf when it requires grad."""
    v, lay = inp.t, inp.layout
    if lay == "c":
        x = v.clone()
    elif lay == "t":
        x = v.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif lay == "s":
        base = torch.full(v.shape[:-1] + (2 * v.shape[-1],), STEP_FILL, dtype=v.dtype)
        base[..., ::2] = v
        x = base[..., ::2]
    elif lay.startswith("e"):
        d = int(lay[1:])
        x = v.narrow(d, 0, 1).clone().expand(v.shape)
    else:
        raise ValueError(lay)
    if inp.rg:
        x = x.detach().requires_grad_()
    return x


def gpattern(name, shape, dtype):
    cyc = {"cyc": [1.0, -2.0, 0.5], "cycz": [1.0, -2.0, 0.5, 0.0, NAN]}[name]
    n = math.prod(shape)
    return torch.tensor([cyc[i % len(cyc)] for i in range(n)], dtype=dtype).reshape(shape)


def inplace_target(x):
    return x.clone() if x.requires_grad else x


# ---- op specs ----------------------------------------------------------------------------
# Each: name -> (torch function f(xs, p, ip) -> tuple of outputs, case generator, ulp
# tolerance, kind). kind "acc" scales the tolerance with the magnitude of the terms (sums).


def unary_cases(param_sets=((),), per_value=True, inplace=False):
    def gen(dt):
        out = []
        for p in param_sets:
            pt = "" if not p else "p=%s/" % fmt(p[0], "f64")
            if per_value and p == param_sets[0]:
                for tag, v in EDGES[dt]:
                    out.append(case(pt + "v=" + tag, [full([5], v, dt)], p, gp="cycz"))
            out.append(case(pt + "edges", [edge_vec(dt)], p))
        p = param_sets[0]
        for lay in ("t", "s", "e0"):
            out.append(case("lay=" + lay, [In(vals([3, 4], 1, dt), lay, not inplace)], p))
        out.append(case("empty", [vals([0, 3], 0, dt)], p))
        out.append(case("0d", [vals([], 3, dt)], p))
        if inplace:
            out.append(case("lay=t/grad", [In(vals([3, 4], 1, dt), "t")], p))
        return out

    return gen


SOME_EDGES = ("0", "-0", "inf", "-inf", "nan", "sub", "big", "tiny", "-2.5")


def binary_cases(inplace=False, p=(), grad=True, all_edges=True):
    def gen(dt):
        out = []
        ev = edge_vec(dt)
        for tag, v in EDGES[dt]:
            if all_edges or tag in SOME_EDGES:
                out.append(case("b=" + tag, [ev, full(ev.shape, v, dt)], p))
        out.append(case("edges/gz", [ev, ev.flip(0)], p, gp="cycz"))  # upstream with 0 and NaN
        rg = None if not inplace else False
        out.append(case("lay=t,s", [In(vals([3, 4], 1, dt), "t", rg), In(vals([3, 4], 2, dt), "s")], p))
        out.append(case("lay=s,e0", [In(vals([3, 4], 1, dt), "s", rg), In(vals([3, 4], 2, dt)[:1].expand(3, 4), "e0")], p))
        if inplace:  # the same, forward only (no tape)
            out.append(case("lay=t,s/nograd", [In(vals([3, 4], 1, dt), "t", False), In(vals([3, 4], 2, dt), "s", False)], p))
            out.append(case("lay=s,e0/nograd", [In(vals([3, 4], 1, dt), "s", False), In(vals([3, 4], 2, dt)[:1].expand(3, 4), "e0", False)], p))
        out.append(case("bcast=row", [vals([3, 4], 1, dt), vals([4], 2, dt)], p))
        out.append(case("bcast=0d", [vals([3, 4], 1, dt), vals([], 2, dt)], p))
        out.append(case("ties", [vals([3, 4], 1, dt), vals([3, 4], 1, dt)], p))
        out.append(case("bcast=3d", [In(vals([2, 3, 4], 1, dt), "t", rg), vals([3, 1], 2, dt)], p))
        out.append(case("empty", [vals([0, 4], 1, dt), vals([4], 2, dt)], p))
        out.append(case("badshape", [vals([3, 4], 1, dt), vals([3], 2, dt)], p))
        if not inplace:
            out.append(case("bcast=outer", [vals([3, 1], 1, dt), vals([1, 4], 2, dt)], p))
            out.append(case("bcast=0d,t", [vals([], 2, dt), In(vals([3, 4], 1, dt), "t")], p))
        else:
            out.append(case("bcast=grow", [vals([4], 1, dt), vals([3, 4], 2, dt)], p))
            out.append(case("into=e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0", False), vals([3, 4], 2, dt)], p))
        if dt == "f64":
            out.append(case("promote=f32", [vals([3], 1, "f32"), vals([3], 2, "f64")], p))
            out.append(case("promote=f64", [vals([3], 1, "f64"), vals([3], 2, "f32")], p))
            out.append(case("int", [vals([3], 1, "f64").mul(4).long(), vals([3], 2, "f64").mul(4).long().add(9)], p))
            out.append(case("int+f32", [vals([3], 1, "f64").mul(4).long(), vals([3], 2, "f32")], p))
        return out

    return gen


def where_cases(dt):
    """cond (never requires grad; nonzero and NaN are true, as a bool cast), a, b."""
    ev = edge_vec(dt)
    n = ev.shape[0]
    mask = full([n], 0.0, dt)
    mask[::2] = 1.0
    c0 = lambda t: In(t, "c", False)
    out = [case("edges/gz", [c0(mask), ev, ev.flip(0)], gp="cycz"),  # inf/NaN never cross over
           case("cond=edges", [c0(ev), vals([n], 1, dt), vals([n], 2, dt)]),
           case("lay=e0,t,s", [In(vals([3, 4], 3, dt)[:1].expand(3, 4), "e0", False),
                               In(vals([3, 4], 1, dt), "t"), In(vals([3, 4], 2, dt), "s")]),
           case("bcast=3", [c0(vals([3, 1], 3, dt)), vals([2, 1, 4], 1, dt), vals([], 2, dt)]),
           case("bcast=cond", [c0(vals([2, 3, 4], 3, dt)), vals([4], 1, dt), vals([3, 1], 2, dt)]),
           case("cond=i64", [vals([3, 4], 3, dt).mul(4).long(), vals([3, 4], 1, dt), vals([4], 2, dt)]),
           case("empty", [c0(vals([0, 4], 3, dt)), vals([0, 4], 1, dt), vals([4], 2, dt)]),
           case("badshape", [c0(vals([3, 4], 3, dt)), vals([3, 4], 1, dt), vals([3], 2, dt)]),
           case("badshape/cond", [c0(vals([2], 3, dt)), vals([3, 4], 1, dt), vals([4], 2, dt)])]
    if dt == "f64":
        out.append(case("promote", [c0(vals([3], 3, "f32")), vals([3], 1, "f32"), vals([3], 2, "f64")]))
        out.append(case("int", [c0(vals([3], 3, "f64")), vals([3], 1, "f64").mul(4).long(),
                                vals([3], 2, "f64").mul(4).long().add(9)]))
        out.append(case("int+f32", [c0(vals([3], 3, "f64")), vals([3], 1, "f64").mul(4).long(),
                                    vals([3], 2, "f32")]))
    return out


def alias_cases(dt):
    return [case("sq3", [In(distinct([3, 3], 0, dt), "c", False)]),
            case("sq4", [In(distinct([4, 4], 1, dt), "c", False)])]


def alias_vec_cases(dt):
    return [case("n6", [In(distinct([6], 0, dt), "c", False)])]


def reduce_cases(has_dim=True, ties=False):
    def gen(dt):
        out = []
        for tag, v in EDGES[dt]:
            out.append(case("v=" + tag, [torch.tensor([[v, 1.0, 2.0], [3.0, v, -4.0]], dtype=DT[dt])]))
        out.append(case("inf-inf", [torch.tensor([INF, -INF, 1.0], dtype=DT[dt])]))
        out.append(case("big+big", [torch.tensor([EDGES[dt][8][1]] * 4, dtype=DT[dt])]))
        for lay in ("t", "s", "e0"):
            out.append(case("lay=" + lay, [In(vals([3, 4], 1, dt), lay)]))
        out.append(case("empty", [vals([0, 3], 0, dt)]))
        out.append(case("0d", [vals([], 3, dt)]))
        out.append(case("ties", [torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]], dtype=DT[dt])]))
        out.append(case("ties0", [torch.tensor([[0.0, -0.0], [-0.0, 0.0]], dtype=DT[dt])]))
        out.append(case("3d", [In(vals([2, 3, 4], 2, dt), "t")]))
        out.append(case("3d/nan", [torch.tensor([[[1.0, NAN], [2.0, 3.0]], [[NAN, NAN], [-1.0, INF]]], dtype=DT[dt])]))
        if dt == "f64":
            out.append(case("int", [vals([2, 3], 1).mul(4).long()]))
        return out

    def gen_dim(dt):
        out = []
        for c in gen(dt):
            x = c["ins"][0].t
            pairs = [(d, k) for d in range(-1, max(x.dim(), 1)) for k in (0, 1)]
            if c["tag"].startswith("v="):  # the edge values: one reduced dim is enough
                pairs = [(1, 0)]
            elif c["tag"] not in ("3d", "lay=t", "empty", "0d", "ties"):
                pairs = [(-1, 0), (0, 1)]
            for dim, kd in pairs:
                if x.dim() == 0 and dim not in (0, -1):
                    continue
                out.append(case(c["tag"] + "/d=%d,k=%d" % (dim, kd), c["ins"], ip=[dim, kd]))
        out.append(case("baddim", [vals([2, 3], 0, dt)], ip=[2, 0]))
        return out

    return gen_dim if has_dim else gen


def mm_cases(kind):
    def gen(dt):
        big = EDGES[dt][8][1]
        out = []
        a, b = vals([3, 4], 1, dt), vals([4, 2], 2, dt)
        for la in ("c", "t", "s"):
            for lb in ("c", "t", "e0"):
                bb = b[:1].expand(4, 2) if lb == "e0" else b
                out.append(case("lay=%s,%s" % (la, lb), [In(a, la), In(bb, lb)]))
        for tag, v in (("inf", INF), ("nan", NAN), ("-0", -0.0), ("big", big)):
            a2 = a.clone()
            a2[0, 0] = v
            out.append(case("a00=" + tag, [a2, b]))
        out.append(case("ovf", [full([2, 2], big, dt), full([2, 2], big, dt)]))
        out.append(case("ovf-", [full([2, 2], big, dt), torch.tensor([[big, -big], [big, -big]], dtype=DT[dt])]))
        a9, b9 = vals([6, 9], 4, dt), vals([9, 7], 5, dt)
        out.append(case("6x9x7", [a9, b9]))
        for tag, v in (("inf", INF), ("nan", NAN), ("big", big)) if kind == "mm" else ():
            a2 = a9.clone()
            a2[2, 3] = v
            out.append(case("6x9x7/a23=" + tag, [a2, In(b9, "t")]))
        out.append(case("6x9x7/ovf", [full([6, 9], big, dt), full([9, 7], big, dt)]))
        if kind == "mm":
            out.append(case("6x9x7/big*tiny", [full([6, 9], big, dt), full([9, 7], 1 / big, dt)]))
        out.append(case("k=0", [vals([3, 0], 1, dt), vals([0, 2], 1, dt)]))
        out.append(case("m=0", [vals([0, 4], 1, dt), b]))
        out.append(case("negzero", [full([2, 2], -0.0, dt), full([2, 2], 1.0, dt)]))
        out.append(case("badshape", [a, vals([3, 2], 1, dt)]))
        if kind == "matmul":
            out.append(case("1d,1d", [vals([4], 1, dt), vals([4], 2, dt)]))
            out.append(case("1d,2d", [vals([4], 1, dt), b]))
            out.append(case("2d,1d", [a, vals([4], 2, dt)]))
            out.append(case("1d,1d/empty", [vals([0], 1, dt), vals([0], 2, dt)]))
        if dt == "f64":
            out.append(case("promote", [a.float(), b]))
        if kind == "addmm":
            res = []
            for c in out:
                x, y = c["ins"][0].t, c["ins"][1].t
                if x.dim() != 2 or y.dim() != 2:
                    continue
                m, n = x.shape[0], y.shape[1]
                res.append(case(c["tag"], [vals([m, n], 3, dt)] + c["ins"], p=[1.0, 1.0]))
            res.append(case("bcast=row", [vals([2], 3, dt), a, b], p=[0.5, 2.0]))
            res.append(case("beta=0/nan", [full([3, 2], NAN, dt), a, b], p=[0.0, 1.0]))
            res.append(case("beta=0/inf", [full([3, 2], INF, dt), a, b], p=[0.0, 1.0]))
            a2 = a.clone()
            a2[1, 1] = INF
            res.append(case("alpha=0/inf", [vals([3, 2], 3, dt), a2, b], p=[1.0, 0.0]))
            a3 = a.clone()
            a3[1, 1] = NAN
            res.append(case("alpha=0/nan", [vals([3, 2], 3, dt), a3, b], p=[1.0, 0.0]))
            res.append(case("beta=-0", [full([3, 2], 0.0, dt), full([3, 4], -0.0, dt), b], p=[-1.0, 1.0]))
            return res
        return out

    return gen


def softmax_cases(dt):
    out = []
    rows = {"edge": [[0.0, 1.0, -1.0], [INF, 1.0, 0.0], [-INF, -INF, 0.0], [-INF, -INF, -INF],
                     [NAN, 1.0, 2.0], [EDGES[dt][8][1], 0.0, -EDGES[dt][8][1]],
                     [EDGES[dt][11][1], EDGES[dt][11][1], 0.0], [INF, INF, 1.0]]}
    x = torch.tensor(rows["edge"], dtype=DT[dt])
    for r in range(x.shape[0]):
        out.append(case("row%d" % r, [x[r:r + 1].clone()], ip=[1]))
    for dim in (0, 1, -1):
        out.append(case("d=%d" % dim, [vals([3, 4], 1, dt)], ip=[dim]))
    for lay in ("t", "s", "e0"):
        out.append(case("lay=" + lay, [In(vals([3, 4], 1, dt), lay)], ip=[1]))
    out.append(case("3d/d=1", [In(vals([2, 3, 4], 1, dt), "t")], ip=[1]))
    out.append(case("empty", [vals([0, 4], 1, dt)], ip=[1]))
    out.append(case("empty/d=0", [vals([0, 4], 1, dt)], ip=[0]))
    out.append(case("0d", [vals([], 1, dt)], ip=[0]))
    out.append(case("baddim", [vals([3, 4], 1, dt)], ip=[2]))
    return out


def mse_cases(dt):
    out = [case("lay=c", [vals([3, 4], 1, dt), vals([3, 4], 2, dt)]),
           case("lay=t,s", [In(vals([3, 4], 1, dt), "t"), In(vals([3, 4], 2, dt), "s")]),
           case("empty", [vals([0, 4], 1, dt), vals([0, 4], 2, dt)]),
           case("badshape", [vals([3, 4], 1, dt), vals([3, 5], 2, dt)]),
           case("bcast", [vals([3, 4], 1, dt), vals([4], 2, dt)])]
    for tag, v in EDGES[dt]:
        out.append(case("a=" + tag, [torch.tensor([v, 1.0], dtype=DT[dt]), torch.tensor([0.5, 1.0], dtype=DT[dt])]))
    return out


def bias_gelu_cases(dt):
    """bias_gelu (tg's fused y = gelu_tanh(x + bias), reached by name): torch's
    F.gelu(x + bias, approximate="tanh") over layouts, empty rows and every edge value in x
    and in bias."""
    e = edge_vec(dt)
    z = torch.zeros(e.numel(), dtype=DT[dt])
    return [case("lay=c", [vals([3, 4], 1, dt), vals([4], 2, dt)]),
            case("lay=t,s", [In(vals([3, 4], 1, dt), "t"), In(vals([4], 2, dt), "s")]),
            case("empty", [vals([0, 4], 1, dt), vals([4], 2, dt)]),
            case("badshape", [vals([3, 4], 1, dt), vals([5], 2, dt)]),
            case("x=edges", [e.reshape(1, -1), z]),
            case("bias=edges", [z.reshape(1, -1), e])]


def ce_cases(dt):
    t = torch.tensor([0, 3, 1], dtype=torch.int64)
    out = [case("lay=c", [vals([3, 4], 1, dt), In(t)]),
           case("lay=t", [In(vals([3, 4], 1, dt), "t"), In(t)]),
           case("-inf", [torch.tensor([[0.0, -INF], [-INF, 1.0]], dtype=DT[dt]), In(torch.tensor([0, 0]))]),
           case("inf", [torch.tensor([[INF, 0.0], [1.0, 2.0]], dtype=DT[dt]), In(torch.tensor([0, 1]))]),
           case("nan", [torch.tensor([[NAN, 0.0], [1.0, 2.0]], dtype=DT[dt]), In(torch.tensor([1, 1]))]),
           case("big", [torch.tensor([[EDGES[dt][8][1], 0.0]], dtype=DT[dt]), In(torch.tensor([1]))]),
           case("empty", [vals([0, 4], 1, dt), In(torch.zeros([0], dtype=torch.int64))]),
           case("badtarget", [vals([3, 4], 1, dt), In(torch.tensor([0, 4, 1]))]),
           case("negtarget", [vals([3, 4], 1, dt), In(torch.tensor([0, -1, 1]))])]
    return out


def emb_cases(dt):
    w = vals([5, 3], 1, dt)
    return [case("rep", [w, In(torch.tensor([[0, 4], [4, 2]]))]),
            case("1d", [In(w, "t"), In(torch.tensor([3, 3, 3]))]),
            case("0d", [w, In(torch.tensor(2))]),
            case("empty", [w, In(torch.zeros([0], dtype=torch.int64))]),
            case("oob", [w, In(torch.tensor([5]))]),
            case("neg", [w, In(torch.tensor([-1]))])]


def catstack_cases(kind):
    def gen(dt):
        a, b, c = vals([2, 3], 1, dt), vals([2, 3], 2, dt), vals([2, 3], 3, dt)
        out = []
        for dim in (0, 1, -1) if kind == "cat" else (0, 1, 2, -1):
            out.append(case("d=%d" % dim, [a, In(b, "t"), In(c, "s")], ip=[dim]))
        out.append(case("one", [a], ip=[0]))
        out.append(case("3d", [In(vals([2, 3, 4], 1, dt), "t"), vals([2, 3, 4], 2, dt)], ip=[1]))
        out.append(case("expanded", [In(a[:1].expand(2, 3), "e0"), b], ip=[0]))
        out.append(case("empty", [vals([0, 3], 1, dt), a], ip=[0]))
        out.append(case("badshape", [a, vals([3, 2], 1, dt)], ip=[0]))
        out.append(case("baddim", [a, b], ip=[3]))
        if kind == "cat":
            out.append(case("empty1d", [vals([0], 1, dt), a], ip=[0]))
            out.append(case("d=1/sizes", [a, vals([2, 1], 3, dt)], ip=[1]))
        if dt == "f64":
            out.append(case("promote", [a.float(), b], ip=[0]))
            out.append(case("promote=i64", [In(a.long()), b], ip=[0]))
        return out

    return gen


def view_cases(dt):
    x = vals([2, 3, 4], 1, dt)
    return {
        "view": [case("flat", [x], ip=[2, 6, 4]), case("infer", [x], ip=[2, -1, 2]),
                 case("lay=t", [In(vals([3, 4], 1, dt), "t")], ip=[1, 12]),
                 case("empty", [vals([0, 3], 0, dt)], ip=[1, 0]), case("bad", [x], ip=[1, 5])],
        "reshape": [case("flat", [x], ip=[1, 24]), case("lay=t", [In(vals([3, 4], 1, dt), "t")], ip=[1, 12]),
                    case("lay=s", [In(vals([3, 4], 1, dt), "s")], ip=[2, 2, 6]),
                    case("lay=e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0")], ip=[1, 12]),
                    case("empty", [vals([0, 3], 0, dt)], ip=[2, 3, 0]), case("bad", [x], ip=[1, 5])],
        "flatten": [case("3d", [x]), case("lay=t", [In(vals([3, 4], 1, dt), "t")]), case("0d", [vals([], 1, dt)])],
        "transpose": [case("0,2", [x], ip=[0, 2]), case("-1,0", [x], ip=[-1, 0]), case("bad", [x], ip=[0, 3])],
        "t": [case("2d", [In(vals([3, 4], 1, dt), "s")]), case("1d", [vals([3], 1, dt)]), case("3d", [x])],
        "permute": [case("201", [x], ip=[3, 2, 0, 1]), case("bad", [x], ip=[3, 0, 0, 1]),
                    case("lay=t", [In(vals([3, 4], 1, dt), "t")], ip=[2, 1, 0])],
        "narrow": [case("d1", [x], ip=[1, 1, 2]), case("neg", [x], ip=[-1, 2, 2]), case("len0", [x], ip=[0, 2, 0]),
                   case("oob", [x], ip=[1, 2, 2])],
        "slice": [case("step2", [x], ip=[2, 0, 4, 2]), case("clamp", [x], ip=[1, 1, 100, 1]),
                  case("step3/s", [In(vals([3, 8], 1, dt), "s")], ip=[1, 1, 8, 3]),
                  case("emptyrange", [x], ip=[1, 2, 1, 1]), case("step0", [x], ip=[1, 0, 2, 0])],
        "select": [case("d0", [x], ip=[0, 1]), case("neg", [x], ip=[-1, -1]), case("oob", [x], ip=[1, 3]),
                   case("lay=t", [In(vals([3, 4], 1, dt), "t")], ip=[0, 2])],
        "chunk": [case("5by2", [vals([5, 2], 1, dt)], ip=[2, 0]), case("6by4", [vals([6], 1, dt)], ip=[4, 0]),
                  case("empty", [vals([2, 0], 1, dt)], ip=[3, 1]), case("more", [vals([2, 3], 1, dt)], ip=[5, 1]),
                  case("bad", [vals([2, 3], 1, dt)], ip=[0, 1])],
        "split": [case("5by2", [vals([5, 2], 1, dt)], ip=[2, 0]), case("exact", [vals([6], 1, dt)], ip=[3, 0]),
                  case("empty", [vals([2, 0], 1, dt)], ip=[1, 1]), case("big", [vals([2, 3], 1, dt)], ip=[5, 1])],
        "expand": [case("row", [vals([1, 4], 1, dt)], ip=[3, 4]), case("-1", [vals([3, 1], 1, dt)], ip=[-1, 5]),
                   case("newdim", [vals([4], 1, dt)], ip=[2, 4]), case("bad", [vals([3, 2], 1, dt)], ip=[3, 4]),
                   case("to0", [vals([1, 4], 1, dt)], ip=[0, 4]), case("neg", [vals([1], 1, dt)], ip=[-2])],
        "squeeze": [case("d1", [vals([3, 1, 2], 1, dt)], ip=[1]), case("noop", [vals([3, 2], 1, dt)], ip=[0]),
                    case("neg", [vals([3, 1], 1, dt)], ip=[-1]), case("bad", [vals([3, 1], 1, dt)], ip=[2])],
        "squeeze_all": [case("3d", [vals([1, 3, 1], 1, dt)]), case("ones", [vals([1, 1], 1, dt)])],
        "unsqueeze": [case("d0", [vals([3], 1, dt)], ip=[0]), case("end", [vals([3], 1, dt)], ip=[1]),
                      case("neg", [vals([3, 2], 1, dt)], ip=[-1]), case("bad", [vals([3], 1, dt)], ip=[3])],
        "as_strided": [case("win", [vals([12], 1, dt)], ip=[2, 3, 3, 2, 1, 0]),
                       case("off", [vals([12], 1, dt)], ip=[2, 2, 2, 1, 4, 2]),
                       case("overlap", [vals([6], 1, dt)], ip=[2, 2, 3, 1, 1, 0]),
                       case("oob", [vals([6], 1, dt)], ip=[2, 3, 3, 1, 1, 0]),
                       case("win/nograd", [In(vals([12], 1, dt), "c", False)], ip=[2, 3, 3, 2, 1, 0]),
                       case("off/nograd", [In(vals([12], 1, dt), "c", False)], ip=[2, 2, 2, 1, 4, 2])],
        "contiguous": [case("t", [In(vals([3, 4], 1, dt), "t")]), case("s", [In(vals([3, 4], 1, dt), "s")]),
                       case("e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0")]), case("empty", [vals([0, 2], 1, dt)])],
        "clone": [case("t", [In(vals([3, 4], 1, dt), "t")]), case("edges", [edge_vec(dt)]),
                  case("s", [In(vals([3, 4], 1, dt), "s")]), case("empty", [vals([0, 2], 1, dt)])],
        "sum_to_size": [case("row", [vals([3, 4], 1, dt)], ip=[1, 4]), case("col", [vals([3, 4], 1, dt)], ip=[3, 1]),
                        case("lead", [vals([3, 4], 1, dt)], ip=[4]), case("all", [vals([3, 4], 1, dt)], ip=[1, 1]),
                        case("same", [In(vals([3, 4], 1, dt), "t")], ip=[3, 4]),
                        case("edges", [edge_vec(dt).reshape(3, 7)], ip=[1, 7]),
                        case("bad", [vals([3, 4], 1, dt)], ip=[2, 4]), case("empty", [vals([0, 4], 1, dt)], ip=[1, 4])],
    }


def access_cases(kind):
    def gen(dt):
        x = In(vals([3, 4], 1, dt), "t", False)
        if kind == "item":
            return [case("1el", [In(vals([1, 1], 2, dt), "c", False)]), case("0d", [In(vals([], 2, dt), "c", False)]),
                    case("many", [x]), case("empty", [In(vals([0], 1, dt), "c", False)]),
                    case("nan", [In(torch.tensor([NAN], dtype=DT[dt]), "c", False)])]
        if kind == "get":
            return [case("1,2", [x], ip=[1, 2]), case("oob", [x], ip=[3, 0]), case("neg", [x], ip=[-1, 0]),
                    case("neg/all", [x], ip=[-3, -4]), case("neg/oob", [x], ip=[-4, 0]),
                    case("i64", [In(torch.tensor([[2**53 + 1, -5]]), "c", False)], ip=[0, 0])]
        if kind == "set":
            return ([case("v=" + t, [In(vals([2, 2], 1, dt), "s", False)], p=[v], ip=[1, 0]) for t, v in EDGES[dt][:6]] +
                    [case("oob", [x], p=[1.0], ip=[0, 4]), case("neg", [x], p=[1.0], ip=[-1, -2]),
                     case("into=e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0", False)], p=[1.0], ip=[1, 1])] +
                    ([case("v=1e300", [In(vals([2, 2], 1, dt), "c", False)], p=[1e300], ip=[0, 0]),
                      case("v=3.5e38", [In(vals([2, 2], 1, dt), "c", False)], p=[3.5e38], ip=[0, 0])] if dt == "f32" else
                     [case("i64/v=2.7", [In(torch.zeros([1, 2], dtype=torch.int64), "c", False)], p=[2.7], ip=[0, 1]),
                      case("i64/v=1e19", [In(torch.zeros([1, 2], dtype=torch.int64), "c", False)], p=[1e19], ip=[0, 1])]))
        if kind == "expand_as":
            return [case("row", [In(vals([1, 4], 1, dt)), In(vals([3, 4], 2, dt), "c", False)]),
                    case("newdim", [In(vals([4], 1, dt)), In(vals([2, 4], 2, dt), "c", False)]),
                    case("bad", [In(vals([3, 2], 1, dt)), In(vals([3, 4], 2, dt), "c", False)])]
        if kind == "to_device":
            return [case("cpu", [In(vals([3, 4], 1, dt), "t")])]
        if kind == "all_finite":
            return [case("v=" + t, [In(torch.tensor([1.0, v], dtype=DT[dt]), "c", False)]) for t, v in EDGES[dt][:6]] + [
                case("empty", [In(vals([0], 1, dt), "c", False)])] + (
                [case("i64", [In(torch.tensor([1, 2]), "c", False)])] if dt == "f64" else [])
        if kind in ("allclose", "allclose_nan", "max_abs_diff"):
            out = []
            ev = edge_vec(dt)
            for tag, v in EDGES[dt]:
                if kind == "allclose" or tag in SOME_EDGES:
                    out.append(case("b=" + tag, [In(ev, "c", False), In(full(ev.shape, v, dt), "c", False)], p=[1e-5, 1e-8]))
            out.append(case("same", [In(ev, "c", False), In(ev.clone(), "s", False)], p=[0, 0]))
            out.append(case("bcast", [In(vals([3, 4], 1, dt), "t", False), In(vals([4], 1, dt), "c", False)], p=[0.1, 0.5]))
            out.append(case("empty", [In(vals([0, 4], 1, dt), "c", False), In(vals([0, 4], 1, dt), "c", False)], p=[0, 0]))
            out.append(case("badshape", [In(vals([3, 4], 1, dt), "c", False), In(vals([3], 1, dt), "c", False)], p=[0, 0]))
            out.append(case("tol=inf", [In(vals([3], 1, dt), "c", False), In(full([3], INF, dt), "c", False)], p=[INF, 0]))
            if dt == "f64":
                out.append(case("promote", [In(vals([3], 1, "f32"), "c", False), In(vals([3], 1, "f64"), "c", False)], p=[0, 0]))
            return out
        raise ValueError(kind)

    return gen


def scalar_result(v):
    return (torch.tensor(float(v), dtype=torch.float64),)


def get_f(xs, p, ip):
    return scalar_result(xs[0][tuple(ip)].item())


def set_f(xs, p, ip):
    xs[0][tuple(ip)] = p[0]
    return (xs[0],)


def max_abs_diff_f(xs, p, ip):
    a, b = torch.broadcast_tensors(xs[0].double(), xs[1].double())
    return scalar_result((a - b).abs().max().item() if a.numel() else 0.0)


def copy_cases(dt):
    other = "f32" if dt == "f64" else "f64"
    big = EDGES[dt][8][1]
    cases = [case("lay=t<-s", [In(vals([3, 4], 1, dt), "t", False), In(vals([3, 4], 2, dt), "s")]),
            case("bcast", [In(vals([3, 4], 1, dt), "c", False), vals([4], 2, dt)]),
            case("grad", [vals([3, 4], 1, dt), vals([3, 4], 2, dt)]),
            case("grad/bcast", [vals([3, 4], 1, dt), vals([4], 2, dt)]),
            case("grad/from=" + other, [vals([2, 3], 1, dt), vals([3], 2, other)]),
            case("grad/src-only", [In(vals([2, 3], 1, dt), "c", False), vals([2, 3], 2, dt)]),
            case("from=" + other, [In(vals([3], 1, dt), "c", False), torch.tensor([1e300 if other == "f64" else 3e38, -1e-310 if other == "f64" else 1e-40, 0.1], dtype=DT[other])]),
            case("edges", [In(edge_vec(dt), "c", False), edge_vec(dt).flip(0)]),
            case("into=e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0", False), vals([3, 4], 2, dt)]),
            case("empty", [In(vals([0, 4], 1, dt), "c", False), vals([4], 2, dt)]),
            case("badshape", [In(vals([3, 4], 1, dt), "c", False), vals([3], 2, dt)]),
            case("big->i64", [In(torch.zeros(3, dtype=torch.int64), "c", False), torch.tensor([2.7, -2.7, big], dtype=DT[dt])]),
            case("i64->", [In(vals([2], 1, dt), "c", False), torch.tensor([2**53 + 1, -3], dtype=torch.int64)])]
    for c in cases:  # forward only, but for the case named grad
        if not c["tag"].startswith("grad"):
            for i in c["ins"]:
                i.rg = False
    return cases


def to_dtype_cases(dt):
    ev = edge_vec(dt)
    fin = torch.tensor([2.7, -2.7, 0.5, -0.5, 1e15, -0.0], dtype=DT[dt])
    return [case("to=f32", [ev], ip=[0]), case("to=f64", [ev], ip=[1]), case("to=i64/finite", [fin], ip=[2]),
            case("to=i64/nan", [torch.tensor([NAN], dtype=DT[dt])], ip=[2]),
            case("to=i64/inf", [torch.tensor([INF, -INF], dtype=DT[dt])], ip=[2]),
            case("to=i64/big", [torch.tensor([EDGES[dt][8][1]], dtype=DT[dt])], ip=[2]),
            case("lay=t", [In(vals([3, 4], 1, dt), "t")], ip=[1 if dt == "f32" else 0])] + (
        [case("from=i64", [In(torch.tensor([2**53 + 1, 2**24 + 1, -7]))], ip=[0]),
         case("from=i64/f64", [In(torch.tensor([2**53 + 1, 2**24 + 1, -7]))], ip=[1])] if dt == "f64" else [])


def fill_cases(dt):
    out = []
    for tag, v in EDGES[dt]:
        out.append(case("v=" + tag, [In(vals([2, 2], 1, dt), "c", False)], p=[v]))
    out.append(case("lay=s", [In(vals([3, 4], 1, dt), "s", False)], p=[2.5]))
    out.append(case("into=e0", [In(vals([3, 4], 1, dt)[:1].expand(3, 4), "e0", False)], p=[2.5]))
    if dt == "f32":
        out.append(case("v=1e300", [In(vals([2], 1, dt), "c", False)], p=[1e300]))
        out.append(case("v=1e-310", [In(vals([2], 1, dt), "c", False)], p=[1e-310]))
        # FLT_MAX is kept; 3.4028235e38 (above FLT_MAX, though it rounds to it) is refused
        out.append(case("v=fltmax", [In(vals([2], 1, dt), "c", False)], p=[-3.4028234663852886e38]))
        out.append(case("v=3.4028235e38", [In(vals([2], 1, dt), "c", False)], p=[3.4028235e38]))
    else:
        out.append(case("i64/v=2.7", [In(torch.zeros(2, dtype=torch.int64), "c", False)], p=[2.7]))
        out.append(case("i64/v=-2.7", [In(torch.zeros(2, dtype=torch.int64), "c", False)], p=[-2.7]))
        for tag, v in [("nan", NAN), ("inf", INF), ("2^63", 2.0**63), ("-2^63", -2.0**63), ("-1e19", -1e19)]:
            out.append(case("i64/v=" + tag, [In(torch.zeros(2, dtype=torch.int64), "c", False)], p=[v]))
    return out


def creation_cases(kind):
    def gen(dt):
        d = {"f32": 0, "f64": 1}[dt]
        if kind in ("zeros", "ones"):
            return [case("2x3", [], ip=[d, 2, 3]), case("empty", [], ip=[d, 0, 3]), case("0d", [], ip=[d])]
        if kind == "full":
            return [case("v=" + t, [], p=[v], ip=[d, 2, 2]) for t, v in EDGES[dt][:6]] + (
                [case("v=1e300", [], p=[1e300], ip=[d, 2]), case("v=-3.5e38", [], p=[-3.5e38], ip=[d, 2])]
                if dt == "f32" else [])
        if kind == "scalar":
            return [case("v=" + t, [], p=[v], ip=[d]) for t, v in EDGES[dt]]
        if kind == "arange":
            return [case("0,1,0.1", [], p=[0, 1, 0.1], ip=[d]), case("5,0,-1", [], p=[5, 0, -1], ip=[d]),
                    case("0,10,3", [], p=[0, 10, 3], ip=[d]), case("empty", [], p=[3, 3, 1], ip=[d]),
                    case("wrongway", [], p=[0, 5, -1], ip=[d]), case("step0", [], p=[0, 5, 0], ip=[d]),
                    case("inf", [], p=[0, INF, 1], ip=[d]), case("nan", [], p=[0, NAN, 1], ip=[d]),
                    case("step=nan", [], p=[0, 5, NAN], ip=[d]), case("step=-inf", [], p=[5, 0, -INF], ip=[d]),
                    case("start=nan", [], p=[NAN, 5, 1], ip=[d]), case("huge", [], p=[0, 1e19, 1], ip=[d]),
                    case("wrongway/0", [], p=[0, 0, -1], ip=[d]),
                    case("-0.5,0.5,0.25", [], p=[-0.5, 0.5, 0.25], ip=[d])]
        if kind.endswith("_like"):
            x = In(vals([2, 3], 1, dt), "t", False)
            return [case("t", [x], p=[-0.0]), case("empty", [In(vals([0, 3], 1, dt), "c", False)], p=[NAN])]
        raise ValueError(kind)

    return gen


def sc(v):
    return float(v)


def to_dt(x, ip):
    return (x.to([torch.float32, torch.float64, torch.int64][ip[0]]),)


def creation(fn):
    def f(xs, p, ip):
        return (fn(p, ip[1:], [torch.float32, torch.float64][ip[0]]),)
    return f


def cmp_op(fn):
    def f(xs, p, ip):
        a, b = xs
        r = fn(a, b)
        return (r.to(torch.promote_types(a.dtype, b.dtype)),)
    return f


def inplace_op(meth):
    def f(xs, p, ip):
        t = inplace_target(xs[0])
        getattr(t, meth)(*xs[1:], *[sc(v) for v in p])
        return (t,)
    return f


def inplace_via(fn):
    """An in-place form torch lacks (softplus_): the reference is the out-of-place result."""
    def f(xs, p, ip):
        t = inplace_target(xs[0])
        t.copy_(fn(t.clone(), p))
        return (t,)
    return f


def chunk_f(xs, p, ip):
    return tuple(torch.chunk(xs[0], ip[0], ip[1]))


def split_f(xs, p, ip):
    return tuple(torch.split(xs[0], ip[0], ip[1]))


def max_dim(fn):
    def f(xs, p, ip):
        v, i = fn(xs[0], ip[0], bool(ip[1]))
        return (v, i)
    return f


def sum_dim_f(xs, p, ip):
    return (xs[0].sum(ip[0], keepdim=bool(ip[1])),)


def mean_dim_f(xs, p, ip):
    return (xs[0].mean(ip[0], keepdim=bool(ip[1])),)


def alias_t(meth):
    def f(xs, p, ip):
        m = xs[0]
        getattr(m, meth)(m.t())
        return (m,)
    return f


def alias_shift(meth):
    def f(xs, p, ip):
        x = xs[0]
        getattr(x[1:], meth)(x[:-1])
        return (x,)
    return f


def alias_self(meth):
    def f(xs, p, ip):
        x = xs[0]
        getattr(x, meth)(x)
        return (x,)
    return f


U = lambda fn: (lambda xs, p, ip: (fn(xs[0]),))
UP = lambda fn: (lambda xs, p, ip: (fn(xs[0], sc(p[0])),))
B = lambda fn: (lambda xs, p, ip: (fn(xs[0], xs[1]),))
POW_P = [(2.0,), (0.5,), (-1.0,), (3.0,), (0.0,), (-0.5,), (1 / 3,), (2.5,), (-2.0,), (1.0,)]
SCALARS = [(2.0,), (-0.0,), (0.0,), (1e-310,), (1e-40,), (INF,), (NAN,), (0.1,), (-3.0,), (1e300,)]
ELU_A = [(1.0,), (0.5,), (0.0,), (2.0,)]
SOFTPLUS = lambda x: F.softplus(x)

# name: (torch function, case generator, ulp tolerance, kind)
OPS = {}


def op(name, fn, gen, tol=4, kind="pw"):
    OPS[name] = (fn, gen, tol, kind)


for name, fn, tol in [("neg", torch.neg, 0), ("exp", torch.exp, 4), ("log", torch.log, 4),
                      ("sqrt", torch.sqrt, 1), ("sigmoid", torch.sigmoid, 4), ("tanh", torch.tanh, 4),
                      ("relu", torch.relu, 0), ("abs", torch.abs, 0), ("reciprocal", torch.reciprocal, 1),
                      ("softplus", SOFTPLUS, 4)]:
    op(name, U(fn), unary_cases(), tol)
    if name == "softplus":
        op(name + "_", inplace_via(lambda x, p: F.softplus(x)), unary_cases(per_value=False, inplace=True), tol)
    else:
        op(name + "_", inplace_op(name + "_"), unary_cases(per_value=False, inplace=True), tol)
op("pow_scalar", UP(torch.pow), unary_cases(POW_P), 4)
op("pow_scalar_", inplace_op("pow_"), unary_cases(POW_P, per_value=False, inplace=True), 4)
op("elu", UP(lambda x, a: F.elu(x, a)), unary_cases(ELU_A), 4)
op("elu_", inplace_via(lambda x, p: F.elu(x, sc(p[0]))), unary_cases(ELU_A, per_value=False, inplace=True), 4)
for name, fn in [("add_scalar", lambda x, s: x + s), ("sub_scalar", lambda x, s: x - s),
                 ("rsub_scalar", lambda x, s: s - x), ("mul_scalar", lambda x, s: x * s),
                 ("div_scalar", lambda x, s: x / s)]:
    op(name, UP(fn), unary_cases(SCALARS), 1)
op("add_scalar_", inplace_op("add_"), unary_cases(SCALARS, per_value=False, inplace=True), 1)
op("mul_scalar_", inplace_op("mul_"), unary_cases(SCALARS, per_value=False, inplace=True), 1)
for name in ("add", "sub", "mul", "div"):
    op(name, B(getattr(torch, name)), binary_cases(), 0)
    op(name + "_", inplace_op(name + "_"), binary_cases(inplace=True, all_edges=False), 0)
op("add_scaled", lambda xs, p, ip: (torch.add(xs[0], xs[1], alpha=p[0]),), binary_cases(p=[-0.5], all_edges=False), 1)
op("add_scaled_", lambda xs, p, ip: (inplace_target(xs[0]).add_(xs[1], alpha=p[0]),), binary_cases(True, p=[-0.5], all_edges=False), 1)
for name in ("eq", "ne", "gt", "ge", "lt", "le"):
    op(name, cmp_op(getattr(torch, name)), binary_cases(grad=False, all_edges=False), 0)
op("where", lambda xs, p, ip: (torch.where(xs[0].bool(), xs[1], xs[2]),), where_cases, 0)
op("copy_alias_t", alias_t("copy_"), alias_cases, 0)
op("copy_alias_shift", alias_shift("copy_"), alias_vec_cases, 0)
op("copy_alias_self", alias_self("copy_"), alias_vec_cases, 0)
op("add_alias_t", alias_t("add_"), alias_cases, 0)
op("mul_alias_shift", alias_shift("mul_"), alias_vec_cases, 0)
op("add_alias_self", alias_self("add_"), alias_vec_cases, 0)
op("sum", U(torch.sum), reduce_cases(False), 4, "acc")
op("mean", U(torch.mean), reduce_cases(False), 4, "acc")
op("max", U(torch.max), reduce_cases(False), 0)
op("min", U(torch.min), reduce_cases(False), 0)
op("sum_dim", sum_dim_f, reduce_cases(), 4, "acc")
op("mean_dim", mean_dim_f, reduce_cases(), 4, "acc")
op("max_dim", max_dim(torch.max), reduce_cases(), 0)
op("min_dim", max_dim(torch.min), reduce_cases(), 0)
op("mm", B(torch.mm), mm_cases("mm"), 4, "acc")
op("matmul", B(torch.matmul), mm_cases("matmul"), 4, "acc")
op("addmm", lambda xs, p, ip: (torch.addmm(xs[0], xs[1], xs[2], beta=p[0], alpha=p[1]),), mm_cases("addmm"), 4, "acc")
op("cat", lambda xs, p, ip: (torch.cat(xs, ip[0]),), catstack_cases("cat"), 0)
op("stack", lambda xs, p, ip: (torch.stack(xs, ip[0]),), catstack_cases("stack"), 0)
op("embedding", lambda xs, p, ip: (F.embedding(xs[1], xs[0]),), emb_cases, 0)
op("softmax", lambda xs, p, ip: (torch.softmax(xs[0], ip[0]),), softmax_cases, 4, "acc")
op("log_softmax", lambda xs, p, ip: (torch.log_softmax(xs[0], ip[0]),), softmax_cases, 4, "acc")
op("mse_loss", lambda xs, p, ip: (F.mse_loss(xs[0], xs[1]),), mse_cases, 4, "acc")
op("bias_gelu", lambda xs, p, ip: (F.gelu(xs[0] + xs[1], approximate="tanh"),), bias_gelu_cases, 4)
op("cross_entropy", lambda xs, p, ip: (F.cross_entropy(xs[0], xs[1]),), ce_cases, 4, "acc")
VIEW_FNS = {
    "view": lambda xs, p, ip: (xs[0].view(ip[1:]),),
    "reshape": lambda xs, p, ip: (xs[0].reshape(ip[1:]),),
    "flatten": lambda xs, p, ip: (xs[0].flatten(),),
    "transpose": lambda xs, p, ip: (xs[0].transpose(ip[0], ip[1]),),
    "t": lambda xs, p, ip: (xs[0].t(),),
    "permute": lambda xs, p, ip: (xs[0].permute(ip[1:]),),
    "narrow": lambda xs, p, ip: (xs[0].narrow(ip[0], ip[1], ip[2]),),
    "slice": lambda xs, p, ip: (slice_f(xs[0], *ip),),
    "select": lambda xs, p, ip: (xs[0].select(ip[0], ip[1]),),
    "chunk": chunk_f,
    "split": split_f,
    "expand": lambda xs, p, ip: (xs[0].expand(ip),),
    "squeeze": lambda xs, p, ip: (xs[0].squeeze(ip[0]),),
    "squeeze_all": lambda xs, p, ip: (xs[0].squeeze(),),
    "unsqueeze": lambda xs, p, ip: (xs[0].unsqueeze(ip[0]),),
    "as_strided": lambda xs, p, ip: (torch.as_strided(xs[0], ip[1:1 + ip[0]], ip[1 + ip[0]:1 + 2 * ip[0]], ip[1 + 2 * ip[0]]),),
    "contiguous": lambda xs, p, ip: (xs[0].contiguous(),),
    "clone": lambda xs, p, ip: (xs[0].clone(),),
    "sum_to_size": lambda xs, p, ip: (xs[0].sum_to_size(ip),),
}


def slice_f(x, dim, start, end, step):
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


for name, fn in VIEW_FNS.items():
    op(name, fn, (lambda n: lambda dt: view_cases(dt)[n])(name), 4 if name == "sum_to_size" else 0,
       "acc" if name == "sum_to_size" else "pw")
op("copy_", lambda xs, p, ip: (inplace_target(xs[0]).copy_(xs[1]),), copy_cases, 0)
op("to_dtype", lambda xs, p, ip: to_dt(xs[0], ip), to_dtype_cases, 0)
op("fill_", lambda xs, p, ip: (xs[0].fill_(p[0]),), fill_cases, 0)
op("expand_as", lambda xs, p, ip: (xs[0].expand_as(xs[1]),), access_cases("expand_as"), 0)
op("to_device", lambda xs, p, ip: (xs[0].to("cpu"),), access_cases("to_device"), 0)
op("item", lambda xs, p, ip: scalar_result(xs[0].item()), access_cases("item"), 0)
op("get", get_f, access_cases("get"), 0)
op("set", set_f, access_cases("set"), 0)
op("all_finite", lambda xs, p, ip: scalar_result(bool(torch.isfinite(xs[0]).all())), access_cases("all_finite"), 0)
op("allclose", lambda xs, p, ip: scalar_result(torch.allclose(*torch.broadcast_tensors(xs[0], xs[1]), rtol=p[0], atol=p[1])),
   access_cases("allclose"), 0)
op("allclose_nan", lambda xs, p, ip: scalar_result(torch.allclose(*torch.broadcast_tensors(xs[0], xs[1]), rtol=p[0], atol=p[1], equal_nan=True)),
   access_cases("allclose_nan"), 0)
op("max_abs_diff", max_abs_diff_f, access_cases("max_abs_diff"), 0)
op("zero_", lambda xs, p, ip: (xs[0].zero_(),), lambda dt: fill_cases(dt)[:1] + fill_cases(dt)[-3:-1], 0)
op("zeros", creation(lambda p, s, d: torch.zeros(s, dtype=d)), creation_cases("zeros"), 0)
op("ones", creation(lambda p, s, d: torch.ones(s, dtype=d)), creation_cases("ones"), 0)
op("full", creation(lambda p, s, d: torch.full(s, p[0], dtype=d)), creation_cases("full"), 0)
op("scalar", creation(lambda p, s, d: torch.tensor(p[0], dtype=d)), creation_cases("scalar"), 0)
op("arange", creation(lambda p, s, d: torch.arange(p[0], p[1], p[2], dtype=d)), creation_cases("arange"), 1)
op("zeros_like", U(torch.zeros_like), creation_cases("zeros_like"), 0)
op("ones_like", U(torch.ones_like), creation_cases("zeros_like"), 0)
op("full_like", lambda xs, p, ip: (torch.full_like(xs[0], p[0]),), creation_cases("full_like"), 0)

# ---- the convolution family (tg/conv.h): conv2d, conv1d, conv_transpose2d, unfold, fold ----
# Integer parameters: conv2d [stride h, w, padding h, w, dilation h, w, groups, mode] (mode 0:
# the padding ints, 1: "valid", 2: "same"); conv1d [stride, padding, dilation, groups, mode];
# conv_transpose2d [stride h, w, padding h, w, output_padding h, w, dilation h, w, groups];
# unfold [kernel h, w, dilation h, w, padding h, w, stride h, w]; fold [output h, w, then
# unfold's]. A third input of a conv is its bias. Edge values go into x only (a weight of inf
# times a zero of the padding would make NaN where a direct kernel skips the padding).
CONV_EDGES = ("0", "-0", "inf", "-inf", "nan", "sub", "tiny", "1", "-2.5")
PAD_MODES = {0: None, 1: "valid", 2: "same"}
# An optional last int: the padding's fill (tg_conv_padding_fill), torch.nn.Conv2d's
# padding_mode; other than zeros, the layer pads with F.pad and convolves unpadded.
FILLS = {1: "reflect", 2: "replicate", 3: "circular"}


def filled(x, w, fill, pad, dilation):
    """x padded as nn.Conv1d/Conv2d's _conv_forward pads it for padding_mode FILLS[fill]."""
    dims = w.dim() - 2
    twice = []
    for d in reversed(range(dims)):
        if pad == "valid":
            twice += [0, 0]
        elif pad == "same":
            total = dilation[d] * (w.shape[2 + d] - 1)
            twice += [total // 2, total - total // 2]
        else:
            twice += [pad[d], pad[d]]
    return F.pad(x, twice, mode=FILLS[fill])


def conv2d_f(xs, p, ip):
    pad = PAD_MODES[ip[7]] or (ip[2], ip[3])
    b = xs[2] if len(xs) > 2 else None
    x = xs[0]
    if len(ip) > 8 and ip[8]:
        x, pad = filled(x, xs[1], ip[8], pad, (ip[4], ip[5])), 0
    return (F.conv2d(x, xs[1], b, (ip[0], ip[1]), pad, (ip[4], ip[5]), ip[6]),)


def conv1d_f(xs, p, ip):
    pad = PAD_MODES[ip[4]] or ip[1]
    b = xs[2] if len(xs) > 2 else None
    x = xs[0]
    if len(ip) > 5 and ip[5]:
        x, pad = filled(x, xs[1], ip[5], pad if isinstance(pad, str) else (pad,), (ip[2],)), 0
    return (F.conv1d(x, xs[1], b, ip[0], pad, ip[2], ip[3]),)


def conv_transpose2d_f(xs, p, ip):
    b = xs[2] if len(xs) > 2 else None
    return (F.conv_transpose2d(xs[0], xs[1], b, (ip[0], ip[1]), (ip[2], ip[3]), (ip[4], ip[5]),
                               ip[8], (ip[6], ip[7])),)


def edge_image(dt, shape, seed):
    """vals() with the edge values of CONV_EDGES spread over it."""
    x = vals(shape, seed, dt).reshape(-1)
    ev = [v for t, v in EDGES[dt] if t in CONV_EDGES]
    for k, v in enumerate(ev):
        x[(k * 5 + seed) % x.numel()] = v
    return x.reshape(shape)


def conv2d_cases(dt):
    x, w, b = vals([2, 4, 5, 6], 1, dt), vals([6, 2, 3, 2], 2, dt), vals([6], 3, dt)
    return [case("plain", [vals([1, 2, 4, 4], 1, dt), vals([3, 2, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 1, 1, 1, 0]),
            case("bias,stride,pad", [x, vals([3, 4, 3, 2], 2, dt), vals([3], 3, dt)], ip=[2, 1, 1, 2, 1, 1, 1, 0]),
            case("groups,dilation", [x, w, b], ip=[1, 2, 0, 1, 2, 1, 2, 0]),
            case("same/even", [x, vals([3, 4, 2, 4], 2, dt)], ip=[1, 1, 0, 0, 1, 2, 1, 2]),
            case("valid", [x, vals([3, 4, 3, 3], 2, dt), vals([3], 3, dt)], ip=[1, 2, 0, 0, 1, 1, 1, 1]),
            case("lay=t,s", [In(x, "t"), In(w, "s"), b], ip=[1, 1, 1, 1, 1, 1, 2, 0]),
            case("unbatched", [vals([4, 5, 6], 1, dt), w, b], ip=[1, 1, 1, 0, 1, 1, 2, 0]),
            case("empty", [vals([0, 4, 5, 6], 1, dt), w, b], ip=[1, 1, 0, 0, 1, 1, 2, 0]),
            case("x=edges", [edge_image(dt, [1, 2, 5, 5], 4), vals([2, 2, 2, 2], 2, dt), vals([2], 3, dt)],
                 ip=[1, 1, 1, 1, 1, 1, 1, 0]),
            case("bad/channels", [x, vals([3, 3, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 1, 1, 1, 0]),
            case("bad/kernel", [vals([1, 2, 2, 2], 1, dt), vals([3, 2, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 1, 1, 1, 0]),
            case("bad/same,stride", [x, w], ip=[2, 1, 0, 0, 1, 1, 2, 2]),
            case("fill=reflect", [x, vals([3, 4, 3, 3], 2, dt), vals([3], 3, dt)], ip=[1, 1, 1, 2, 1, 1, 1, 0, 1]),
            case("fill=replicate,same", [In(x, "t"), vals([3, 4, 2, 4], 2, dt)], ip=[1, 1, 0, 0, 1, 2, 1, 2, 2]),
            case("fill=circular,stride,groups", [x, w, b], ip=[2, 1, 2, 1, 1, 2, 2, 0, 3]),
            case("fill=circular,unbatched", [vals([4, 5, 6], 1, dt), w], ip=[1, 1, 5, 6, 1, 1, 2, 0, 3]),
            case("fill=reflect,x=edges", [edge_image(dt, [1, 2, 5, 5], 4), vals([2, 2, 2, 2], 2, dt)],
                 ip=[1, 1, 1, 1, 1, 1, 1, 0, 1]),
            case("fill=replicate,valid", [x, vals([3, 4, 3, 3], 2, dt)], ip=[1, 1, 1, 1, 1, 1, 1, 1, 2]),
            case("bad/fill=reflect,pad", [x, vals([3, 4, 1, 1], 2, dt)], ip=[1, 1, 5, 0, 1, 1, 1, 0, 1]),
            case("bad/fill=circular,pad", [x, vals([3, 4, 1, 1], 2, dt)], ip=[1, 1, 0, 7, 1, 1, 1, 0, 3])]


def conv1d_cases(dt):
    x = vals([2, 4, 9], 1, dt)
    return [case("plain", [x, vals([3, 4, 3], 2, dt), vals([3], 3, dt)], ip=[1, 0, 1, 1, 0]),
            case("stride,pad,dilation,groups", [In(x, "t"), vals([4, 2, 2], 2, dt)], ip=[2, 2, 3, 2, 0]),
            case("same/even", [x, vals([2, 4, 4], 2, dt), vals([2], 3, dt)], ip=[1, 0, 1, 1, 2]),
            case("unbatched", [vals([4, 9], 1, dt), vals([3, 4, 3], 2, dt)], ip=[1, 1, 1, 1, 0]),
            case("x=edges", [edge_image(dt, [1, 1, 12], 2), vals([1, 1, 2], 2, dt)], ip=[1, 1, 1, 1, 0]),
            case("fill=circular", [x, vals([3, 4, 3], 2, dt), vals([3], 3, dt)], ip=[1, 2, 1, 1, 0, 3]),
            case("fill=reflect,same,unbatched", [vals([4, 9], 1, dt), vals([3, 4, 4], 2, dt)],
                 ip=[1, 0, 2, 1, 2, 1]),
            case("fill=replicate,stride", [In(x, "t"), vals([4, 2, 2], 2, dt)], ip=[2, 3, 1, 2, 0, 2])]


def conv_transpose2d_cases(dt):
    x = vals([2, 4, 3, 4], 1, dt)
    return [case("plain", [x, vals([4, 2, 3, 3], 2, dt), vals([2], 3, dt)], ip=[1, 1, 0, 0, 0, 0, 1, 1, 1]),
            case("stride,pad,outpad", [x, vals([4, 3, 3, 2], 2, dt)], ip=[2, 3, 1, 0, 1, 2, 1, 1, 1]),
            case("groups,dilation", [In(x, "t"), vals([4, 1, 2, 3], 2, dt), vals([2], 3, dt)],
                 ip=[2, 1, 0, 1, 0, 0, 2, 1, 2]),
            case("outpad<dilation", [x, vals([4, 2, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 1, 1, 2, 2, 1]),
            case("empty", [vals([0, 4, 3, 4], 1, dt), vals([4, 2, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 0, 0, 1, 1, 1]),
            case("x=edges", [edge_image(dt, [1, 1, 3, 4], 3), vals([1, 2, 2, 2], 2, dt)], ip=[2, 2, 0, 0, 0, 0, 1, 1, 1]),
            case("bad/outpad", [x, vals([4, 2, 3, 3], 2, dt)], ip=[1, 1, 0, 0, 1, 1, 1, 1, 1]),
            case("bad/size", [vals([1, 4, 1, 1], 1, dt), vals([4, 2, 1, 1], 2, dt)], ip=[1, 1, 1, 1, 0, 0, 1, 1, 1])]


def unfold_cases(dt):
    x = vals([2, 3, 5, 6], 1, dt)
    return [case("plain", [x], ip=[2, 3, 1, 1, 0, 0, 1, 1]),
            case("all", [In(x, "t")], ip=[3, 2, 1, 2, 1, 2, 2, 1]),
            case("unbatched", [vals([3, 5, 6], 1, dt)], ip=[2, 2, 1, 1, 0, 0, 2, 2]),
            case("x=edges", [edge_image(dt, [1, 1, 4, 4], 1)], ip=[2, 2, 1, 1, 1, 1, 1, 1]),
            case("bad/blocks", [x], ip=[6, 2, 1, 1, 0, 0, 1, 1])]


def fold_cases(dt):
    return [case("plain", [vals([2, 12, 12], 1, dt)], ip=[4, 5, 2, 2, 1, 1, 0, 0, 1, 1]),
            case("all", [In(vals([1, 12, 12], 1, dt), "t")], ip=[5, 6, 3, 2, 1, 2, 1, 2, 2, 1]),
            case("unbatched", [vals([8, 6], 1, dt)], ip=[4, 6, 2, 2, 1, 1, 0, 0, 2, 2]),
            case("x=edges", [edge_image(dt, [1, 4, 9], 2)], ip=[4, 4, 2, 2, 1, 1, 0, 0, 1, 1]),
            case("bad/blocks", [vals([1, 12, 11], 1, dt)], ip=[4, 5, 2, 2, 1, 1, 0, 0, 1, 1]),
            case("bad/divisible", [vals([1, 10, 12], 1, dt)], ip=[4, 5, 2, 2, 1, 1, 0, 0, 1, 1])]


op("conv2d", conv2d_f, conv2d_cases, 8, "acc")
op("conv1d", conv1d_f, conv1d_cases, 8, "acc")
op("conv_transpose2d", conv_transpose2d_f, conv_transpose2d_cases, 8, "acc")
op("unfold", lambda xs, p, ip: (F.unfold(xs[0], (ip[0], ip[1]), (ip[2], ip[3]), (ip[4], ip[5]), (ip[6], ip[7])),),
   unfold_cases, 0)
op("fold", lambda xs, p, ip: (F.fold(xs[0], (ip[0], ip[1]), (ip[2], ip[3]), (ip[4], ip[5]), (ip[6], ip[7]),
                                     (ip[8], ip[9])),), fold_cases, 4, "acc")


# ---- pooling and padding (issue 24, helper "pool"; tg/pool.h) ----


def pool_edges(dt, shape):
    """The edge vector, then zeros, as a tensor of shape: NaN, +-inf, +-0 and ties in windows."""
    e = edge_vec(dt)
    n = math.prod(shape)
    return torch.cat([e, torch.zeros(max(n - e.numel(), 0), dtype=DT[dt])])[:n].reshape(shape)


def max_pool_f(xs, p, ip):
    return F.max_pool2d(xs[0], ip[0:2], ip[2:4], ip[4:6], ip[6:8], bool(ip[8]), return_indices=True)


def max_pool_cases(dt):
    g = lambda k, s, pd, d, c: list(k) + list(s) + list(pd) + list(d) + [c]
    return [case("2x2", [distinct([2, 2, 4, 4], 1, dt)], ip=g((2, 2), (2, 2), (0, 0), (1, 1), 0)),
            case("3x3/s2/p1/lay=t", [In(distinct([1, 2, 5, 6], 2, dt), "t")], ip=g((3, 3), (2, 2), (1, 1), (1, 1), 0)),
            case("ceil/lay=s", [In(distinct([1, 1, 5, 5], 3, dt), "s")], ip=g((2, 2), (2, 2), (1, 1), (1, 1), 1)),
            case("ceil/s3", [distinct([2, 6, 7], 4, dt)], ip=g((3, 2), (3, 3), (1, 0), (1, 1), 1)),
            case("dilation", [distinct([1, 2, 7, 6], 5, dt)], ip=g((2, 3), (1, 2), (1, 1), (2, 2), 0)),
            case("ties", [vals([1, 2, 4, 6], 1, dt)], ip=g((2, 3), (1, 1), (1, 1), (1, 1), 0)),
            case("edges", [pool_edges(dt, [2, 3, 4])], ip=g((2, 2), (1, 1), (0, 0), (1, 1), 0)),
            case("edges/ceil", [pool_edges(dt, [1, 4, 6])], ip=g((3, 3), (2, 2), (1, 1), (1, 1), 1)),
            case("empty", [vals([0, 2, 4, 4], 1, dt)], ip=g((2, 2), (2, 2), (0, 0), (1, 1), 0)),
            case("k=0", [vals([1, 1, 4, 4], 1, dt)], ip=g((0, 2), (1, 1), (0, 0), (1, 1), 0)),
            case("pad>k/2", [vals([1, 1, 4, 4], 1, dt)], ip=g((2, 2), (2, 2), (2, 0), (1, 1), 0)),
            case("small", [vals([1, 1, 4, 4], 1, dt)], ip=g((5, 2), (1, 1), (0, 0), (1, 1), 0)),
            case("2d", [vals([4, 4], 1, dt)], ip=g((2, 2), (2, 2), (0, 0), (1, 1), 0))]


def avg_pool_f(xs, p, ip):
    return (F.avg_pool2d(xs[0], ip[0:2], ip[2:4], ip[4:6], bool(ip[6]), bool(ip[7]), ip[8] or None),)


def avg_pool_cases(dt):
    g = lambda k, s, pd, c, inc, dv: list(k) + list(s) + list(pd) + [c, inc, dv]
    return [case("2x2", [vals([2, 2, 4, 4], 1, dt)], ip=g((2, 2), (2, 2), (0, 0), 0, 1, 0)),
            case("3x3/p1/lay=t", [In(vals([1, 2, 5, 6], 2, dt), "t")], ip=g((3, 3), (2, 2), (1, 1), 0, 1, 0)),
            case("3x3/p1/exclude", [vals([1, 2, 5, 6], 2, dt)], ip=g((3, 3), (2, 2), (1, 1), 0, 0, 0)),
            case("ceil/lay=s", [In(vals([1, 1, 5, 5], 3, dt), "s")], ip=g((2, 3), (2, 2), (1, 1), 1, 1, 0)),
            case("ceil/exclude", [vals([2, 6, 7], 4, dt)], ip=g((3, 2), (3, 3), (1, 0), 1, 0, 0)),
            case("divisor", [vals([1, 2, 4, 5], 5, dt)], ip=g((2, 2), (1, 2), (1, 0), 0, 1, 3)),
            case("edges", [pool_edges(dt, [2, 3, 4])], ip=g((2, 2), (1, 1), (0, 0), 0, 1, 0)),
            case("empty", [vals([0, 2, 4, 4], 1, dt)], ip=g((2, 2), (2, 2), (0, 0), 0, 1, 0)),
            case("s=0", [vals([1, 1, 4, 4], 1, dt)], ip=g((2, 2), (0, 1), (0, 0), 0, 1, 0)),
            case("pad>k/2", [vals([1, 1, 4, 4], 1, dt)], ip=g((2, 2), (1, 1), (0, 2), 0, 1, 0)),
            case("small", [vals([1, 1, 4, 4], 1, dt)], ip=g((2, 5), (1, 1), (0, 0), 0, 1, 0))]


def adaptive_cases(dt):
    return [case("5x7to3x4", [vals([2, 2, 5, 7], 1, dt)], ip=[3, 4]),
            case("global/lay=t", [In(vals([3, 4, 5], 2, dt), "t")], ip=[1, 1]),
            case("up/lay=s", [In(vals([1, 2, 3, 2], 3, dt), "s")], ip=[4, 3]),
            case("edges", [pool_edges(dt, [2, 3, 4])], ip=[2, 3]),
            case("empty", [vals([0, 2, 4, 4], 1, dt)], ip=[2, 2]),
            # forward only: PyTorch's backward refuses an empty grad_output; tg's gives zeros
            case("out=0", [In(vals([1, 2, 3, 3], 1, dt), "c", False)], ip=[0, 2]),
            case("neg", [vals([1, 2, 3, 3], 1, dt)], ip=[2, -1]),
            case("h=0", [vals([1, 2, 0, 3], 1, dt)], ip=[2, 2])]


TORCH_PAD_MODES = ["constant", "reflect", "replicate"]


def pad_f(xs, p, ip):
    mode = TORCH_PAD_MODES[ip[0]]
    return (F.pad(xs[0], list(ip[1:]), mode=mode, value=p[0] if mode == "constant" else None),)


def pad_cases(dt):
    c = lambda tag, x, mode, pads, value=0.0: case(tag, [x], p=[value], ip=[mode] + list(pads))
    return [c("const/2d", vals([2, 3, 4], 1, dt), 0, (1, 2, 0, 1), 1.5),
            c("const/crop/lay=t", In(vals([2, 3, 4], 1, dt), "t"), 0, (-1, 2, 2, -2)),
            c("const/every/lay=s", In(vals([2, 1, 3], 2, dt), "s"), 0, (1, 1, 0, 2, 1, 0)),
            c("const/-0", vals([2, 3], 1, dt), 0, (1, 1), -0.0),
            c("const/nan", vals([2, 3], 1, dt), 0, (0, 2), NAN),
            c("const/empty", vals([2, 0], 1, dt), 0, (1, 1), 7.0),
            c("const/edges", pool_edges(dt, [3, 7]), 0, (2, 1, 1, 0), -INF),
            c("reflect/1d", vals([2, 5], 1, dt), 1, (4, 3)),
            c("reflect/1d/neg/lay=t", In(vals([2, 2, 5], 1, dt), "t"), 1, (-2, 1)),
            c("reflect/2d/lay=s", In(vals([2, 3, 4], 1, dt), "s"), 1, (3, 1, 2, 2)),
            c("reflect/3d", vals([2, 3, 3, 4], 1, dt), 1, (1, 2, 2, 1, 1, 2)),
            c("reflect/edges", pool_edges(dt, [1, 3, 7]), 1, (2, 3, 1, 2)),
            c("replicate/1d", vals([2, 3], 1, dt), 2, (3, 4)),
            c("replicate/2d/crop/lay=t", In(vals([2, 2, 3, 4], 1, dt), "t"), 2, (2, -1, 3, 0)),
            c("replicate/3d", vals([1, 2, 2, 3], 1, dt), 2, (1, 1, 2, 0, 0, 3)),
            c("replicate/empty-batch", vals([0, 2, 3], 1, dt), 2, (1, 1)),
            c("odd", vals([2, 3], 1, dt), 0, (1, 2, 3)),
            c("toolong", vals([2, 3], 1, dt), 0, (1, 1, 1, 1, 1, 1)),
            c("crop<0", vals([2, 3], 1, dt), 0, (-2, -2)),
            c("reflect>=size", vals([1, 2, 3], 1, dt), 1, (3, 0)),
            c("reflect/4d-1pad", vals([1, 1, 2, 3], 1, dt), 1, (1, 1)),
            c("replicate/1d-input", vals([3], 1, dt), 2, (1, 1)),
            c("reflect/c=0", vals([1, 0, 3], 1, dt), 1, (1, 1))]


op("max_pool2d", max_pool_f, max_pool_cases, 0)
op("avg_pool2d", avg_pool_f, avg_pool_cases, 4, "acc")
op("adaptive_avg_pool2d", lambda xs, p, ip: (F.adaptive_avg_pool2d(xs[0], ip),), adaptive_cases, 4, "acc")
op("pad", pad_f, pad_cases, 0)


# ---- issue 24, normalization family (helper norm): var/std, batch/layer/group norm, dropout ----


def var_f(fn):
    """ip: keepdim, then the dims (none: every dim); p: correction."""
    return lambda xs, p, ip: (fn(xs[0], dim=ip[1:] if len(ip) > 1 else None, correction=p[0],
                                 keepdim=bool(ip[0])),)


def var_cases(dt):
    e = edge_vec(dt)
    return [case("all", [vals([3, 4], 1, dt)], p=[1], ip=[0]),
            case("dims=0,2,keep", [vals([3, 4, 5], 2, dt)], p=[0], ip=[1, 0, 2]),
            case("dim=-1,c=2.5", [vals([3, 4], 3, dt)], p=[2.5], ip=[0, -1]),
            case("lay=t", [In(vals([3, 4], 4, dt), "t")], p=[1], ip=[0, 1]),
            case("lay=s", [In(vals([3, 4], 5, dt), "s")], p=[1], ip=[1, 0]),
            case("c=N", [vals([3], 1, dt)], p=[3], ip=[0]),
            case("c>N", [vals([3], 2, dt)], p=[5], ip=[0]),
            case("one", [vals([1], 1, dt)], p=[1], ip=[0]),
            case("empty", [vals([0, 3], 1, dt)], p=[1], ip=[0, 0]),
            case("const", [torch.full([2, 3], 1.5, dtype=DT[dt])], p=[1], ip=[0, 1]),
            case("x=edges", [e], p=[1], ip=[0]),
            case("dupdim", [vals([3, 4], 1, dt)], p=[1], ip=[0, 0, 0]),
            case("baddim", [vals([3, 4], 1, dt)], p=[1], ip=[0, 2])]


def running(c, dt, seed=4):
    """[2, C]: row 0 the running mean, row 1 the running var (positive); not a leaf with grad."""
    return In(torch.stack([vals([c], seed, dt), vals([c], seed + 1, dt).abs() + 0.5]), "c", False)


def bn_train_f(xs, p, ip):
    """x, weight, bias, running [2, C]; p: momentum, eps. Outputs y and the running stats."""
    rs = xs[3]
    y = F.batch_norm(xs[0], rs[0], rs[1], xs[1], xs[2], True, p[0], p[1])
    return (y, rs.clone())


def bn_eval_f(xs, p, ip):
    """x, running [2, C], weight, bias; p: eps."""
    return (F.batch_norm(xs[0], xs[1][0], xs[1][1], xs[2], xs[3], False, 0.1, p[0]),)


def bn_train_cases(dt):
    e = edge_vec(dt)
    return [case("lay=c", [vals([4, 3, 2], 1, dt), vals([3], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.1, 1e-5]),
            case("2d,lay=t", [In(vals([5, 3], 1, dt), "t"), vals([3], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.1, 1e-5]),
            case("4d", [vals([2, 3, 2, 2], 1, dt), vals([3], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.3, 1e-3]),
            case("const", [torch.full([3, 2], 2.0, dtype=DT[dt]), vals([2], 2, dt), vals([2], 3, dt), running(2, dt)], p=[0.1, 1e-5]),
            case("x=edges", [e.reshape(-1, 1), vals([1], 2, dt), vals([1], 3, dt), running(1, dt)], p=[0.1, 1e-5]),
            case("empty", [vals([0, 3], 1, dt), vals([3], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.1, 1e-5]),
            case("one/channel", [vals([1, 3], 1, dt), vals([3], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.1, 1e-5]),
            case("badweight", [vals([4, 3], 1, dt), vals([4], 2, dt), vals([3], 3, dt), running(3, dt)], p=[0.1, 1e-5])]


def bn_eval_cases(dt):
    e = edge_vec(dt)
    return [case("lay=c", [vals([4, 3, 2], 1, dt), running(3, dt), vals([3], 2, dt), vals([3], 3, dt)], p=[1e-5]),
            case("2d,lay=t", [In(vals([5, 3], 1, dt), "t"), running(3, dt), vals([3], 2, dt), vals([3], 3, dt)], p=[1e-5]),
            case("one", [vals([1, 3], 1, dt), running(3, dt), vals([3], 2, dt), vals([3], 3, dt)], p=[1e-3]),
            case("x=edges", [e.reshape(-1, 1), running(1, dt), vals([1], 2, dt), vals([1], 3, dt)], p=[1e-5])]


def layer_norm_cases(dt):
    e = edge_vec(dt)
    return [case("lay=c", [vals([3, 4], 1, dt), vals([4], 2, dt), vals([4], 3, dt)], p=[1e-5], ip=[4]),
            case("lay=t", [In(vals([3, 4], 1, dt), "t"), vals([4], 2, dt), vals([4], 3, dt)], p=[1e-5], ip=[4]),
            case("2dims", [vals([2, 3, 4], 1, dt), vals([3, 4], 2, dt), vals([3, 4], 3, dt)], p=[1e-3], ip=[3, 4]),
            case("const", [torch.full([2, 3], -1.0, dtype=DT[dt]), vals([3], 2, dt), vals([3], 3, dt)], p=[1e-5], ip=[3]),
            case("x=edges", [e.reshape(1, -1), torch.ones(e.numel(), dtype=DT[dt]), torch.zeros(e.numel(), dtype=DT[dt])], p=[1e-5], ip=[e.numel()]),
            case("empty", [vals([0, 4], 1, dt), vals([4], 2, dt), vals([4], 3, dt)], p=[1e-5], ip=[4]),
            case("badshape", [vals([3, 4], 1, dt), vals([5], 2, dt), vals([5], 3, dt)], p=[1e-5], ip=[5])]


def group_norm_cases(dt):
    e = edge_vec(dt)
    return [case("lay=c", [vals([2, 6, 3], 1, dt), vals([6], 2, dt), vals([6], 3, dt)], p=[1e-5], ip=[3]),
            case("4d,lay=t", [In(vals([2, 4, 2, 2], 1, dt), "t"), vals([4], 2, dt), vals([4], 3, dt)], p=[1e-5], ip=[2]),
            case("groups=C", [vals([2, 3, 2], 1, dt), vals([3], 2, dt), vals([3], 3, dt)], p=[1e-3], ip=[3]),
            case("x=edges", [e.reshape(1, 1, -1), vals([1], 2, dt), vals([1], 3, dt)], p=[1e-5], ip=[1]),
            case("badgroups", [vals([2, 6, 3], 1, dt), vals([6], 2, dt), vals([6], 3, dt)], p=[1e-5], ip=[4])]


def dropout_cases(dt):
    e = edge_vec(dt)
    return [case("eval", [vals([3, 4], 1, dt)], p=[0.5], ip=[0]),
            case("p=0", [In(vals([3, 4], 1, dt), "t")], p=[0], ip=[1]),
            case("p=1", [e], p=[1], ip=[1]),
            case("badp", [vals([3], 1, dt)], p=[1.5], ip=[1])]


op("var", var_f(torch.var), var_cases, 4, "acc")
op("std", var_f(torch.std), var_cases, 4, "acc")
op("batch_norm_train", bn_train_f, bn_train_cases, 16, "acc")
op("batch_norm_eval", bn_eval_f, bn_eval_cases, 4)
op("layer_norm", lambda xs, p, ip: (F.layer_norm(xs[0], ip, xs[1], xs[2], p[0]),), layer_norm_cases, 16, "acc")
op("group_norm", lambda xs, p, ip: (F.group_norm(xs[0], ip[0], xs[1], xs[2], p[0]),), group_norm_cases, 16, "acc")
op("dropout", lambda xs, p, ip: (F.dropout(xs[0], p[0], bool(ip[0])),), dropout_cases, 0)


# ---- issue 25, helper bmm: batched matmul, bmm, tril/triu, masked_fill (tg/ops.h) ----
def bmm_cases(dt):
    e = edge_vec(dt)
    n = e.numel()
    ea = torch.stack([e, e.flip(0)]).reshape(2, 1, n)
    out = [case("3d", [vals([2, 3, 4], 1, dt), vals([2, 4, 5], 2, dt)]),
           case("lay=t,t", [In(vals([2, 3, 4], 1, dt), "t"), In(vals([2, 4, 5], 2, dt), "t")]),
           case("lay=s,c", [In(vals([2, 3, 4], 1, dt), "s"), vals([2, 4, 2], 2, dt)]),
           case("a=edges", [ea, vals([2, n, 2], 2, dt)]),
           case("k=0", [vals([2, 3, 0], 1, dt), vals([2, 0, 4], 2, dt)]),
           case("batch=0", [vals([0, 3, 4], 1, dt), vals([0, 4, 2], 2, dt)]),
           case("badbatch", [vals([2, 3, 4], 1, dt), vals([3, 4, 5], 2, dt)]),
           case("badinner", [vals([2, 3, 4], 1, dt), vals([2, 3, 5], 2, dt)]),
           case("2d", [vals([3, 4], 1, dt), vals([4, 5], 2, dt)])]
    if dt == "f64":
        out.append(case("promote", [vals([2, 3, 4], 1, "f32"), vals([2, 4, 5], 2, "f64")]))
    return out


def matmul_batched_cases(dt):
    e = edge_vec(dt)
    n = e.numel()
    out = [case("3d@2d", [vals([2, 3, 4], 1, dt), vals([4, 5], 2, dt)]),
           case("3d@1d", [vals([2, 3, 4], 1, dt), vals([4], 2, dt)]),
           case("1d@3d", [vals([4], 1, dt), vals([2, 4, 3], 2, dt)]),
           case("2d@3d", [vals([3, 4], 1, dt), vals([2, 4, 5], 2, dt)]),
           case("4d@3d/bcast", [vals([2, 1, 3, 4], 1, dt), vals([5, 4, 2], 2, dt)]),
           case("4d@4d/bcast", [vals([2, 1, 3, 4], 1, dt), vals([1, 3, 4, 2], 2, dt)]),
           case("qk^T", [vals([2, 2, 3, 4], 1, dt), In(vals([2, 2, 4, 3], 2, dt), "t")]),
           case("lay=e0", [In(vals([2, 3, 4], 1, dt), "e0", False), vals([2, 4, 2], 2, dt)]),
           case("lay=s,t", [In(vals([2, 3, 4], 1, dt), "s"), In(vals([4, 2], 2, dt), "t")]),
           case("a=edges", [torch.stack([e, e.flip(0)]).reshape(2, 1, n), vals([n, 3], 2, dt)]),
           case("k=0", [vals([2, 3, 0], 1, dt), vals([0, 4], 2, dt)]),
           case("batch=0", [vals([0, 3, 4], 1, dt), vals([2, 1, 4, 5], 2, dt)]),
           case("badbatch", [vals([2, 3, 4], 1, dt), vals([3, 4, 5], 2, dt)]),
           case("badinner", [vals([2, 3, 4], 1, dt), vals([5, 2], 2, dt)])]
    if dt == "f64":
        out.append(case("promote", [vals([2, 3, 4], 1, "f32"), vals([4, 5], 2, "f64")]))
    return out


def tri_cases(dt):
    e = edge_vec(dt)
    out = [case("d=%d" % d, [vals([3, 4], 1, dt)], ip=[d]) for d in (-1, 0, 2, -5, 9)]
    out += [case("batched", [vals([2, 3, 4], 1, dt)], ip=[1]),
            case("edges", [e.reshape(3, -1)], ip=[0], gp="cycz"),
            case("lay=t", [In(vals([4, 3], 1, dt), "t")], ip=[-1]),
            case("empty", [vals([0, 3], 1, dt)], ip=[0]),
            case("1d", [vals([3], 1, dt)], ip=[0])]
    if dt == "f64":
        out.append(case("i64", [vals([3, 4], 1, dt).mul(4).long()], ip=[0]))
    return out


def masked_fill_cases(dt):
    e = edge_vec(dt)
    n = e.numel()
    c0 = lambda t: In(t, "c", False)
    alt = full([n], 0.0, dt)
    alt[::2] = 1.0
    out = [case("edges", [e, c0(alt)], p=[-INF], gp="cycz"),
           case("edges/value=nan", [e, c0(alt.flip(0))], p=[NAN]),
           case("mask=edges", [vals([n], 1, dt), c0(e)], p=[2.5]),
           case("bcast=row", [vals([3, 4], 1, dt), c0(vals([4], 3, dt))], p=[0.5]),
           case("bcast=col,lay=t", [In(vals([3, 4], 1, dt), "t"), c0(vals([3, 1], 3, dt))], p=[-1]),
           case("mask=i64", [vals([2, 3], 1, dt), c0(vals([3], 3, dt).mul(4).long())], p=[7]),
           case("empty", [vals([0, 4], 1, dt), c0(vals([4], 3, dt))], p=[1]),
           case("badshape", [vals([3, 4], 1, dt), c0(vals([3, 4, 1], 3, dt))], p=[1]),
           case("badbcast", [vals([3, 4], 1, dt), c0(vals([3], 3, dt))], p=[1])]
    if dt == "f64":
        out.append(case("x=i64", [vals([3], 1, dt).mul(4).long(), c0(vals([3], 3, dt))], p=[-3]))
    return out


op("bmm", B(torch.bmm), bmm_cases, 4, "acc")
op("matmul_batched", B(torch.matmul), matmul_batched_cases, 4, "acc")
op("tril", lambda xs, p, ip: (torch.tril(xs[0], ip[0]),), tri_cases, 0)
op("triu", lambda xs, p, ip: (torch.triu(xs[0], ip[0]),), tri_cases, 0)
op("masked_fill", lambda xs, p, ip: (xs[0].masked_fill(xs[1].bool(), p[0]),), masked_fill_cases, 0)
# ---- indexing along a dim (issue 25, helper "index"; tg/index.h) ----


def I64(v):
    return In(torch.tensor(v, dtype=torch.int64))


def gather_cases(dt):
    x = vals([3, 4], 1, dt)
    return [case("d=1/rep", [x, I64([[0, 3, 3], [1, 1, 0], [2, 0, 2]])], ip=[1]),
            case("d=0/small/lay=t", [In(x, "t"), I64([[2, 0]])], ip=[0]),
            case("d=-1/lay=s/long", [In(x, "s"), I64([[3, 3, 2, 1, 0, 0]])], ip=[-1]),
            case("edges", [edge_vec(dt).reshape(1, -1), I64([list(range(edge_vec(dt).numel()))[::-1]])], ip=[1]),
            case("3d", [In(vals([2, 3, 4], 2, dt), "t"), I64([[[0, 2, 1, 1], [2, 2, 0, 1]]] * 2)], ip=[1]),
            case("0d", [vals([], 3, dt), I64(0)], ip=[0]),
            case("empty", [x, In(torch.zeros([3, 0], dtype=torch.int64))], ip=[1]),
            case("oob", [x, I64([[4]])], ip=[1]),
            case("neg", [x, I64([[0], [-1]])], ip=[1]),
            case("badndim", [x, I64([0, 1])], ip=[1]),
            case("badsize", [x, I64([[0]] * 4)], ip=[1])]


def scatter_add_cases(dt):
    x, src = vals([3, 4], 1, dt), vals([3, 5], 2, dt)
    return [case("d=1/rep", [x, I64([[0, 3, 3], [1, 1, 0], [2, 0, 2]]), vals([3, 3], 2, dt)], ip=[1]),
            case("d=0/lay=t", [In(x, "t"), I64([[2, 0, 2, 2], [0, 0, 1, 1]]), In(vals([2, 4], 3, dt), "s")], ip=[0]),
            # src larger than index: forward only (PyTorch's backward refuses it; tg's gives zeros)
            case("srcbig", [x, I64([[3, 3]]), In(src, "c", False)], ip=[1]),
            case("edges", [vals([1, 4], 1, dt), I64([[0, 1, 2, 3, 0, 1, 2, 3, 0, 1]]), edge_vec(dt)[:10].reshape(1, -1)], ip=[1]),
            case("empty", [x, In(torch.zeros([3, 0], dtype=torch.int64)), In(src, "c", False)], ip=[1]),
            case("oob", [x, I64([[4]]), src], ip=[1]),
            case("neg", [x, I64([[-1]]), src], ip=[0]),
            case("dtype", [x, I64([[0]]), src.long()], ip=[1])]


def index_select_cases(dt):
    x = vals([3, 4], 1, dt)
    return [case("d=0/rep", [x, I64([2, 0, 2, 2])], ip=[0]),
            case("d=1/lay=t", [In(x, "t"), I64([3, 0])], ip=[1]),
            case("d=1/lay=s", [In(x, "s"), I64([1, 1])], ip=[-1]),
            case("3d", [vals([2, 3, 2], 2, dt), I64([2, 2, 0])], ip=[1]),
            case("edges", [edge_vec(dt).reshape(-1, 1), I64(list(range(edge_vec(dt).numel()))[::-1])], ip=[0]),
            case("0dindex", [x, I64(1)], ip=[0]),
            case("empty", [x, In(torch.zeros([0], dtype=torch.int64))], ip=[1]),
            case("oob", [x, I64([3])], ip=[0]),
            case("neg", [x, I64([-1])], ip=[1]),
            case("2dindex", [x, I64([[1]])], ip=[0])]


def index_add_cases(dt):
    x = vals([3, 4], 1, dt)
    return [case("d=0/rep", [x, I64([2, 0, 2]), vals([3, 4], 2, dt)], p=[1.0], ip=[0]),
            case("d=1/alpha/lay=t", [In(x, "t"), I64([3, 0, 3]), In(vals([3, 3], 3, dt), "t")], p=[-2.5], ip=[1]),
            case("3d/lay=s", [In(vals([2, 3, 2], 2, dt), "s"), I64([1, 1]), vals([2, 2, 2], 4, dt)], p=[0.5], ip=[1]),
            case("edges", [vals([2, 10], 1, dt), I64([0, 1]), edge_vec(dt)[:20].reshape(2, 10)], p=[1.0], ip=[0]),
            case("empty", [x, In(torch.zeros([0], dtype=torch.int64)), vals([3, 0], 1, dt)], p=[1.0], ip=[1]),
            case("oob", [x, I64([3]), vals([1, 4], 1, dt)], p=[1.0], ip=[0]),
            case("badsrc", [x, I64([0, 1]), vals([1, 4], 1, dt)], p=[1.0], ip=[0])]


def topk_f(xs, p, ip):
    v, i = torch.topk(xs[0], ip[0], ip[1], bool(ip[2]), bool(ip[3]))
    return (v, i)


def topk_cases(dt):
    x = distinct([3, 5], 1, dt)
    spec = torch.tensor([NAN, 1.0, -INF, 0.5, INF, -2.0], dtype=DT[dt])
    out = []
    for k, dim, largest in ((2, 1, 1), (3, 0, 0), (5, -1, 0), (0, 1, 1)):
        out.append(case("k=%d/d=%d/l=%d" % (k, dim, largest), [x], ip=[k, dim, largest, 1]))
    out += [case("lay=t", [In(x, "t")], ip=[2, 0, 1, 1]),
            case("lay=s", [In(x, "s")], ip=[4, 1, 1, 1]),
            case("3d", [In(distinct([2, 3, 4], 2, dt), "t")], ip=[2, 1, 0, 1]),
            case("nan/largest", [spec], ip=[4, 0, 1, 1]),
            case("nan/smallest", [spec], ip=[6, 0, 0, 1]),
            case("0d", [vals([], 3, dt)], ip=[1, 0, 1, 1]),
            case("empty", [vals([0, 3], 1, dt)], ip=[2, 1, 1, 1]),
            # equal values: tg gives them in index order; PyTorch's order is its sort's
            case("ties", [torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 1.0], dtype=DT[dt])], ip=[2, 0, 1, 1]),
            case("k>n", [x], ip=[6, 1, 1, 1]),
            case("k<0", [x], ip=[-1, 1, 1, 1])]
    if dt == "f64":
        out.append(case("int", [distinct([2, 4], 3).mul(10).long()], ip=[2, 1, 1, 1]))
    return out


def arg_f(fn):
    """ip: has_dim (0: over all elements, tg's TG_ALL_DIMS), dim, keepdim."""
    def f(xs, p, ip):
        return (fn(xs[0], ip[1] if ip[0] else None, bool(ip[2])),)
    return f


def arg_cases(dt):
    ties = torch.tensor([[1.0, 3.0, 3.0], [NAN, 2.0, NAN]], dtype=DT[dt])
    out = []
    for tag, x in (("ties/nan", ties), ("lay=t", In(vals([3, 4], 1, dt), "t")),
                   ("edges", edge_vec(dt)[:20].reshape(2, -1)), ("zeros", torch.tensor([[0.0, -0.0], [-0.0, 0.0]], dtype=DT[dt]))):
        out.append(case(tag + "/all", [x], ip=[0, 0, 0]))
        out.append(case(tag + "/all/keep", [x], ip=[0, 0, 1]))
        out += [case(tag + "/d=%d/k=%d" % (d, k), [x], ip=[1, d, k]) for d in (0, -1) for k in (0, 1)]
    out += [case("0d", [vals([], 3, dt)], ip=[1, 0, 0]),
            case("emptyrows", [vals([0, 3], 1, dt)], ip=[1, 1, 0]),
            case("empty/all", [vals([0, 3], 1, dt)], ip=[0, 0, 0]),
            case("emptydim", [vals([3, 0], 1, dt)], ip=[1, 1, 0])]
    if dt == "f64":
        out.append(case("int", [vals([2, 3], 1).mul(4).long()], ip=[1, 1, 0]))
    return out


def one_hot_cases(dt):
    if dt != "f64":
        return []
    return [case("infer", [I64([0, 2, 1])], ip=[-1]),
            case("c=4/lay=t", [In(torch.tensor([[3, 0], [1, 1]]), "t")], ip=[4]),
            case("0d", [I64(1)], ip=[3]),
            case("empty", [In(torch.zeros([0], dtype=torch.int64))], ip=[3]),
            case("empty/infer", [In(torch.zeros([0], dtype=torch.int64))], ip=[-1]),
            case("big", [I64([0, 3])], ip=[3]),
            case("neg", [I64([0, -1])], ip=[3])]


op("gather", lambda xs, p, ip: (torch.gather(xs[0], ip[0], xs[1]),), gather_cases, 0)
op("scatter_add", lambda xs, p, ip: (torch.scatter_add(xs[0], ip[0], xs[1], xs[2]),), scatter_add_cases, 4, "acc")
op("index_select", lambda xs, p, ip: (torch.index_select(xs[0], ip[0], xs[1]),), index_select_cases, 0)
op("index_add", lambda xs, p, ip: (torch.index_add(xs[0], ip[0], xs[1], xs[2], alpha=p[0]),), index_add_cases, 4, "acc")
op("topk", topk_f, topk_cases, 0)
op("argmax", arg_f(torch.argmax), arg_cases, 0)
op("argmin", arg_f(torch.argmin), arg_cases, 0)
op("one_hot", lambda xs, p, ip: (F.one_hot(xs[0], ip[0]),), one_hot_cases, 0)
# ---- issue 25, fused scaled dot-product attention (helper "attn") ----
def attention_cases(dt):
    """tg_scaled_dot_product_attention (fused) and tg_attention_composed against
    F.scaled_dot_product_attention without dropout (the generators differ); p: scale (0 for
    1/sqrt(D)), ip: is_causal. Causal with Tq != Tk is top-left in both."""
    def qkv(b, h, tq, tk, d, dv):
        return [vals([b, h, tq, d], 1, dt), vals([b, h, tk, d], 2, dt), vals([b, h, tk, dv], 3, dt)]
    e = edge_vec(dt)
    kv = [torch.tensor([[1.0], [-1.0], [0.5]], dtype=DT[dt]), vals([3, 2], 3, dt)]
    return [case("lay=c", qkv(2, 2, 5, 5, 4, 4), p=[0], ip=[0]),
            case("causal", qkv(1, 2, 6, 6, 3, 5), p=[0], ip=[1]),
            case("tq<tk", qkv(1, 2, 3, 5, 4, 2), p=[0], ip=[0]),
            case("causal,tq>tk", qkv(1, 2, 5, 3, 4, 4), p=[0], ip=[1]),
            case("causal,tq<tk,scale", qkv(1, 1, 3, 5, 2, 2), p=[0.5], ip=[1]),
            case("lay=t,s", [In(vals([1, 2, 4, 3], 1, dt), "t"), vals([1, 2, 4, 3], 2, dt),
                             In(vals([1, 2, 4, 3], 3, dt), "s")], p=[0], ip=[1]),
            case("3d", [vals([2, 4, 3], 1, dt), vals([2, 4, 3], 2, dt), vals([2, 4, 3], 3, dt)], p=[0], ip=[0]),
            case("2d,t=1", [vals([1, 3], 1, dt), vals([1, 3], 2, dt), vals([1, 2], 3, dt)], p=[0], ip=[1]),
            case("empty", qkv(0, 2, 3, 3, 2, 2), p=[0], ip=[1]),
            case("q=edges", [e.reshape(-1, 1)] + kv, p=[1], ip=[0]),
            case("badshape", [vals([1, 2, 4, 3], 1, dt), vals([1, 2, 4, 2], 2, dt), vals([1, 2, 4, 3], 3, dt)],
                 p=[0], ip=[0])]


def attention_f(xs, p, ip):
    return (F.scaled_dot_product_attention(xs[0], xs[1], xs[2], is_causal=bool(ip[0]),
                                           scale=p[0] if p[0] != 0 else None),)


op("scaled_dot_product_attention", attention_f, attention_cases, 16, "acc")
op("attention_composed", attention_f, attention_cases, 16, "acc")


# ---- running and writing ------------------------------------------------------------------


def edge_tokens(dt):
    return [fmt(v, dt) for v in edge_vec(dt).tolist()]


def run_length(tokens):
    """Three or more equal values in a row as `value*count`."""
    out, k = [], 0
    while k < len(tokens):
        n = 1
        while k + n < len(tokens) and tokens[k + n] == tokens[k]:
            n += 1
        out.extend([tokens[k]] * n if n < 3 else ["%s*%d" % (tokens[k], n)])
        k += n
    return out


def tensor_line(tag, t, extra=""):
    dt = DTNAME.get(t.dtype, "f32") if t.dtype != torch.bool else "i64"
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.long()
    tokens = [fmt(v, dt) for v in t.tolist()]
    vs = "@e" if dt in EDGES and tokens == edge_tokens(dt) else " ".join(run_length(tokens))
    return "%s %s%s : %s" % (tag, dt, extra, vs)


def sizes_str(shape):
    return " %d%s" % (len(shape), "".join(" %d" % s for s in shape))


def atol_of(dt, tensors, kind):
    if kind != "acc":
        return 0.0
    m = 1.0
    for t in tensors:
        if t.is_floating_point() and t.numel():
            f = t.detach().double().abs()
            f = f[torch.isfinite(f)]
            if f.numel():
                m = max(m, f.max().item())
    n = max([t.numel() for t in tensors] + [1])
    return min(EPS[dt] * 8 * n * m, 1e300)


def run_case(name, dt, c):
    fn, _, tol, kind = OPS[name]
    cid = "%s/%s/%s" % (name, dt, c["tag"])
    lines = []
    ins = [build(i) for i in c["ins"]]
    err = None
    try:
        outs = fn(ins, c["p"], c["ip"])
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        err = type(e).__name__ + ": " + str(e).splitlines()[0][:80]
    atol = atol_of(dt, [i.t for i in c["ins"]] + ([] if err else [o for o in outs]), kind)
    lines.append("C %s %s %d %s %s" % (cid, name, tol, fmt(atol, "f64"), c["gp"]))
    if c["p"]:
        lines.append("P " + " ".join(fmt(v, "f64") for v in c["p"]))
    if c["ip"]:
        lines.append("I " + " ".join(str(v) for v in c["ip"]))
    for i in c["ins"]:
        lines.append(tensor_line("X", i.t, " %s %d%s" % (i.layout, int(i.rg), sizes_str(i.t.shape))))
    if err:
        lines.append("E " + err.replace("\n", " "))
        return lines
    for o in outs:
        lines.append(tensor_line("Y", o, sizes_str(o.shape)))
    gouts = [o for o in outs if o.requires_grad]
    gins = [x for x in ins if x.requires_grad]
    if gouts and gins:
        g = [gpattern(c["gp"], o.shape, o.dtype) for o in gouts]
        try:
            grads = torch.autograd.grad(gouts, gins, g, allow_unused=True)
        except RuntimeError as e:
            lines.append("EG " + type(e).__name__ + ": " + str(e).splitlines()[0][:80])
            return lines
        for k, gr in enumerate(grads):
            if gr is None:
                lines.append("D none")
            else:
                lines.append(tensor_line("D", gr, sizes_str(gr.shape)))
    return lines



# ---- issue 25, pointwise (helper pointwise): gelu, silu, clamp, maximum, minimum, cumsum,
# logsumexp. gelu's p[0]: 0 the erf form, 1 tanh. clamp's p: min, max (NaN: no bound).
# cumsum's ip: dim. logsumexp's ip: keepdim, then the dims (none: every dim).
def binary_inplace_via(fn):
    """An in-place binary form torch lacks (maximum_): the out-of-place result copied in."""
    def f(xs, p, ip):
        t = inplace_target(xs[0])
        r = fn(t.clone(), xs[1])
        if not torch.can_cast(r.dtype, t.dtype):  # PyTorch's rule for its in-place ops
            raise RuntimeError("result type %s can't be cast to %s" % (r.dtype, t.dtype))
        t.copy_(r)
        return (t,)
    return f


def clamp_f(xs, p, ip):
    lo, hi = (None if math.isnan(v) else sc(v) for v in p)
    return (torch.clamp(xs[0], lo, hi),)


def cumsum_cases(dt):
    out = []
    for c in reduce_cases(False)(dt):
        x = c["ins"][0].t
        for dim in ((-1, 0) if x.dim() > 1 else (0,)):
            out.append(case(c["tag"] + "/d=%d" % dim, c["ins"], ip=[dim]))
    out.append(case("baddim", [vals([2, 3], 0, dt)], ip=[2]))
    return out


def logsumexp_cases(dt):
    rows = torch.tensor([[-INF, -INF, -INF], [INF, 1.0, -2.0], [NAN, 1.0, 2.0], [INF, -INF, 0.0],
                         [1e30 if dt == "f32" else 1e300, 1.0, -1.0]], dtype=DT[dt])
    out = [case("all", [vals([3, 4], 1, dt)], ip=[0]),
           case("rows=inf,nan", [rows], ip=[0, 1]),
           case("rows=inf,nan/keep", [rows], ip=[1, 1]),
           case("dims=0,2,keep", [vals([3, 4, 5], 2, dt)], ip=[1, 0, 2]),
           case("lay=t", [In(vals([3, 4], 4, dt), "t")], ip=[0, 0]),
           case("lay=s", [In(vals([3, 4], 5, dt), "s")], ip=[1, -1]),
           case("lay=e0", [In(vals([3, 4], 3, dt)[:1].expand(3, 4), "e0")], ip=[0, 0]),
           case("empty/dim=0", [vals([0, 3], 1, dt)], ip=[0, 0]),
           case("empty/dim=1", [vals([0, 3], 1, dt)], ip=[0, 1]),
           case("0d", [vals([], 3, dt)], ip=[0]),
           case("x=edges", [edge_vec(dt)], ip=[0, 0]),
           case("baddim", [vals([3, 4], 1, dt)], ip=[0, 2])]
    if dt == "f64":
        out.append(case("int", [vals([2, 3], 1).mul(4).long()], ip=[0, 1]))
    return out


op("gelu", lambda xs, p, ip: (F.gelu(xs[0], approximate="tanh" if p[0] else "none"),),
   unary_cases(((0.0,), (1.0,))), 4)
op("silu", U(F.silu), unary_cases(), 4)
op("silu_", inplace_via(lambda x, p: F.silu(x)), unary_cases(per_value=False, inplace=True), 4)
op("clamp", clamp_f, unary_cases(((-1.0, 2.0), (NAN, 0.5), (0.0, NAN), (2.0, -1.0))), 0)
for name in ("maximum", "minimum"):
    op(name, B(getattr(torch, name)), binary_cases(), 0)
    op(name + "_", binary_inplace_via(getattr(torch, name)), binary_cases(inplace=True, all_edges=False), 0)
op("cumsum", lambda xs, p, ip: (torch.cumsum(xs[0], ip[0]),), cumsum_cases, 4, "acc")
op("logsumexp", lambda xs, p, ip: (torch.logsumexp(xs[0], dim=ip[1:] if len(ip) > 1 else
                                                   list(range(xs[0].dim())), keepdim=bool(ip[0])),),
   logsumexp_cases, 4, "acc")

def main():
    """gen_refs.py [--out PATH] [--check]: --check compares with the committed refs.txt."""
    args = sys.argv[1:]
    out_path = args[args.index("--out") + 1] if "--out" in args else OUT
    torch.set_num_threads(1)
    src = open(os.path.abspath(__file__), "rb").read()
    digest = hashlib.sha256(src).hexdigest()
    body, nops, ncases = [], 0, 0
    for name in OPS:
        _, gen, _, _ = OPS[name]
        nops += 1
        for dt in ("f32", "f64"):
            for c in gen(dt):
                body.extend(run_case(name, dt, c))
                ncases += 1
    head = ["# tg parity references: generated by tests/parity/gen_refs.py; do not edit",
            "H torch=%s gen_sha256=%s ops=%d cases=%d" % (torch.__version__, digest, nops, ncases)]
    head += ["V %s %d %s" % (dt, len(EDGES[dt]), " ".join(edge_tokens(dt))) for dt in ("f32", "f64")]
    text = "\n".join(head + body) + "\n"
    if "--check" in args:
        old = open(OUT).read().splitlines()
        for k, (a, b) in enumerate(zip(old, text.splitlines())):
            if a != b:
                print("refs.txt:%d differs from what torch %s gives now:\n  refs: %s\n  now:  %s"
                      % (k + 1, torch.__version__, a[:200], b[:200]))
                return 1
        if len(old) != len(text.splitlines()):
            print("refs.txt has %d lines, the generator %d" % (len(old), len(text.splitlines())))
            return 1
        print("refs.txt is what torch %s gives: %d cases over %d ops" % (torch.__version__, ncases, nops))
        return 0
    with open(out_path, "w") as f:
        f.write(text)
    print("%s: %d cases over %d ops, %d bytes" % (out_path, ncases, nops, os.path.getsize(out_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
