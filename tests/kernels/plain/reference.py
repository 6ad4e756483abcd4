#!/usr/bin/python3
"""PyTorch's answers for the plain C++ CPU kernels (a ctest fixture, once per run).

Writes OUT_DIR/cases.json and the .npy files it names. Each case is one node:
  name      "family/what" (the C++ test runs the cases of one family per test)
  op        the op's name in ir/Ops.def
  attrs     {name: {kind: value}} with kind i, f, s, ints, floats, strs or dtype
  variables {name: file} initial values of module variables (update ops)
  steps     [{inputs: [in], outputs: [in], vars: {name: file}}]: the node runs
            once per step (ctx.step = 0, 1, ...); after step k its results must
            equal `outputs` and the named variables `vars`
  rtol, atol
where `in` is {"file": f} or {"file": f, "as": "bf16"} (NumPy has no bf16: the
file holds bf16-exact f32 values; the test converts inputs and compares
results by value).

Expected values come from PyTorch 1.13 (autograd for gradients, torch.optim for
updates). NumPy is the reference only where PyTorch has no such op (negative
slice steps, reflect padding on any axis, take with negative indices);
RMSProp follows the TensorFlow formulas written in the kernel's contract.

Usage: reference.py OUT_DIR
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(1234)
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
CASES = []
FILES = [0]


def I(v):
    return {"i": int(v)}


def Fl(v):
    return {"f": float(v)}


def INTS(v):
    return {"ints": [int(x) for x in v]}


def FLOATS(v):
    return {"floats": [float(x) for x in v]}


def S(v):
    return {"s": v}


def STRS(v):
    return {"strs": list(v)}


def DT(v):
    return {"dtype": v}


NUMPY = {torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
         torch.int32: np.int32, torch.bool: np.bool_}


def save(t, tag):
    """Writes a tensor (torch or numpy) and returns its `in` entry."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        entry = {}
        if t.dtype == torch.bfloat16:
            t = t.float()
            entry["as"] = "bf16"
        arr = t.contiguous().numpy().astype(NUMPY[t.dtype], copy=False)
    else:
        arr = np.asarray(t, order="C")
        entry = {}
    FILES[0] += 1
    fname = "%06d_%s.npy" % (FILES[0], tag)
    np.save(os.path.join(OUT, fname), arr)
    entry["file"] = fname
    return entry


def case(name, op, attrs, inputs, outputs, rtol=1e-5, atol=1e-6, variables=None, steps=None):
    c = {"name": name, "op": op, "attrs": attrs, "rtol": rtol, "atol": atol}
    if steps is None:
        steps = [{"inputs": [save(x, "in%d" % i) for i, x in enumerate(inputs)],
                  "outputs": [save(y, "out%d" % i) for i, y in enumerate(outputs)]}]
    c["steps"] = steps
    c["variables"] = variables or {}
    CASES.append(c)


def randn(*shape, dtype=torch.float32):
    return torch.randn(tuple(shape)).to(dtype)


def sum_tol(terms, floor=1e-5):
    """rtol for a result of a `terms`-term float32 sum that PyTorch groups in its own order, which
    depends on the CPU (its vector width): Higham's K*u (u = 2^-24), plus a few roundings around
    the sum (tests/common/SumBound.h), where that exceeds the floor other cases take."""
    return max(floor, (terms + 4) * 2.0 ** -24)


def tol(dtype):
    """(rtol, atol) for a 16-bit result computed in f32 and rounded once."""
    if dtype == torch.float16:
        return 2e-3, 1e-4
    if dtype == torch.bfloat16:
        return 1.6e-2, 1e-3
    return 1e-5, 1e-6


# --- Binary arithmetic with broadcasting -------------------------------------

BINARY = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}
SHAPES = [
    ("same", (3, 5, 7), (3, 5, 7)),
    ("row", (4, 6), (6,)),
    ("outer", (4, 1), (1, 6)),
    ("channel", (2, 16, 5, 5), (16, 1, 1)),
    ("scalar_left", (), (3, 4)),
    ("scalar_right", (3, 4), (1,)),
    ("middle", (2, 3, 4, 5), (3, 1, 5)),
    ("empty", (0, 3), (3,)),
    ("large", (70001,), (70001,)),
    ("large_channel", (4, 32, 33, 17), (1, 32, 1, 1)),
    ("rank10", (2, 1, 2, 1, 2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 2, 1, 2, 1, 3)),
]
for op, fn in BINARY.items():
    for tag, sa, sb in SHAPES:
        a, b = randn(*sa), randn(*sb)
        if op == "Div":
            b = b.sign() * (b.abs() + 0.5)
        case("binary/%s_%s" % (op, tag), op, {}, [a, b], [fn(a, b)])
    for dtype in (torch.float16, torch.bfloat16):
        for tag, sa, sb in (SHAPES[1], SHAPES[3], SHAPES[8]):
            a, b = randn(*sa, dtype=dtype), randn(*sb, dtype=dtype)
            if op == "Div":
                b = (b.float().sign() * (b.float().abs() + 0.5)).to(dtype)
            rtol, atol = tol(dtype)
            want = fn(a.float(), b.float()).to(dtype)
            case("binary/%s_%s_%s" % (op, tag, str(dtype)[6:]), op, {}, [a, b], [want], rtol, atol)
    if op != "Div":
        for dtype in (torch.int64, torch.int32):
            a = torch.randint(-100, 100, (3, 4, 5), dtype=dtype)
            b = torch.randint(-100, 100, (4, 1), dtype=dtype)
            case("binary/%s_%s" % (op, str(dtype)[6:]), op, {}, [a, b], [fn(a, b)], 0, 0)

# --- Unary activations and math ----------------------------------------------

UNARY = [
    ("Relu", {}, torch.relu, None),
    ("LeakyRelu", {}, lambda x: F.leaky_relu(x, 0.01), None),
    ("LeakyRelu", {"alpha": Fl(0.2)}, lambda x: F.leaky_relu(x, 0.2), "alpha"),
    ("Sigmoid", {}, torch.sigmoid, None),
    ("Tanh", {}, torch.tanh, None),
    ("Exp", {}, torch.exp, None),
    ("Log", {}, torch.log, None),
    ("Sqrt", {}, torch.sqrt, None),
    ("Neg", {}, torch.neg, None),
    ("Clip", {"min": Fl(-0.5), "max": Fl(0.75)}, lambda x: torch.clamp(x, -0.5, 0.75), None),
    ("Clip", {"min": Fl(0.1)}, lambda x: torch.clamp(x, min=0.1), "min_only"),
    ("Dropout", {"ratio": Fl(0.5)}, lambda x: x, None),
]
for op, attrs, fn, variant in UNARY:
    label = op + ("_" + variant if variant else "")
    for tag, shape in (("small", (3, 7)), ("odd", (5, 3, 11)), ("large", (3, 40001)), ("empty", (0,))):
        x = randn(*shape) * 3
        if op in ("Log", "Sqrt"):
            x = x.abs() + 0.01
        case("unary/%s_%s" % (label, tag), op, attrs, [x], [fn(x)])
    for dtype in (torch.float16, torch.bfloat16):
        x = randn(4, 33, dtype=dtype) * 2
        if op in ("Log", "Sqrt"):
            x = (x.float().abs() + 0.01).to(dtype)
        rtol, atol = tol(dtype)
        case("unary/%s_%s" % (label, str(dtype)[6:]), op, attrs, [x], [fn(x.float()).to(dtype)],
             rtol, atol)
for dtype in (torch.int64, torch.int32):
    x = torch.randint(-50, 50, (6, 7), dtype=dtype)
    case("unary/Neg_%s" % str(dtype)[6:], "Neg", {}, [x], [-x], 0, 0)

# --- Cast between every pair of dtypes ---------------------------------------

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64, "i32": torch.int32, "bool": torch.bool}
base = torch.tensor([[-3.75, -1.0, -0.5, 0.0, 0.25, 1.5],
                     [2.0, 100.9, -77.3, 0.0078125, 3.14159, 65.5]])
for src_name, src in DTYPES.items():
    for dst_name, dst in DTYPES.items():
        x = base.to(src)
        case("cast/%s_to_%s" % (src_name, dst_name), "Cast", {"to": DT(dst_name)}, [x],
             [x.to(dst)], 0, 0)
x = randn(2, 40000) * 1000
case("cast/f32_to_f16_large", "Cast", {"to": DT("f16")}, [x], [x.half()], 0, 0)
case("cast/f32_to_bf16_large", "Cast", {"to": DT("bf16")}, [x], [x.bfloat16()], 0, 0)

# --- Activation gradients (autograd) -----------------------------------------


def autograd(fn, x, dy):
    x = x.clone().requires_grad_(True)
    y = fn(x)
    y.backward(dy)
    return y.detach(), x.grad


GRADS = [
    ("ReluGrad", {}, torch.relu, "y"),
    ("LeakyReluGrad", {"alpha": Fl(0.2)}, lambda x: F.leaky_relu(x, 0.2), "x"),
    ("SigmoidGrad", {}, torch.sigmoid, "y"),
    ("TanhGrad", {}, torch.tanh, "y"),
    ("ClipGrad", {"min": Fl(-0.5), "max": Fl(0.5)}, lambda x: torch.clamp(x, -0.5, 0.5), "x"),
]
for op, attrs, fn, saved in GRADS:
    for tag, shape in (("small", (4, 9)), ("odd", (3, 5, 7)), ("large", (2, 40003)), ("empty", (0, 2))):
        x = randn(*shape) * 2
        if op == "ClipGrad" and x.numel() >= 4:
            x.view(-1)[:4] = torch.tensor([-0.5, 0.5, -0.5000001, 0.5000001])  # the boundaries
        dy = randn(*shape)
        y, dx = autograd(fn, x, dy)
        case("grad/%s_%s" % (op, tag), op, attrs, [y if saved == "y" else x, dy], [dx])
    for dtype in (torch.float16, torch.bfloat16):
        x = randn(3, 40, dtype=dtype)
        dy = randn(3, 40, dtype=dtype)
        y = fn(x.float()).to(dtype)
        # The 16-bit kernel computes in f32 from the stored (rounded) operands.
        if saved == "y":
            if op == "ReluGrad":
                want = torch.where(y.float() > 0, dy.float(), torch.zeros(()))
            elif op == "SigmoidGrad":
                want = dy.float() * y.float() * (1 - y.float())
            else:
                want = dy.float() * (1 - y.float() * y.float())
            ins = [y, dy]
        else:
            _, want = autograd(fn, x.float(), dy.float())
            ins = [x, dy]
        rtol, atol = tol(dtype)
        case("grad/%s_%s" % (op, str(dtype)[6:]), op, attrs, ins, [want.to(dtype)], rtol, atol)

# --- AddN ----------------------------------------------------------------------

for count, shape in ((1, (3, 4)), (2, (5, 7)), (3, (2, 3, 5)), (5, (70001,))):
    xs = [randn(*shape) for _ in range(count)]
    case("addn/f32_%d" % count, "AddN", {}, xs, [sum(xs[1:], xs[0])])
for dtype in (torch.float16, torch.bfloat16):
    xs = [randn(4, 9, dtype=dtype) for _ in range(3)]
    rtol, atol = tol(dtype)
    want = (xs[0].float() + xs[1].float() + xs[2].float()).to(dtype)
    case("addn/%s" % str(dtype)[6:], "AddN", {}, xs, [want], rtol, atol)
xs = [torch.randint(-9, 9, (3, 4), dtype=torch.int64) for _ in range(3)]
case("addn/int64", "AddN", {}, xs, [xs[0] + xs[1] + xs[2]], 0, 0)

# --- Softmax family --------------------------------------------------------------

SOFTMAX_SHAPES = [
    ("last", (4, 10), -1),
    ("middle", (3, 5, 7), 1),
    ("first", (2, 3, 4, 5), 0),
    ("last_explicit", (2, 3, 70), 2),
    ("wide_inner", (2, 6, 130), 1),
    ("single", (6, 1), 1),
    ("empty", (0, 5), 1),
    ("large", (300, 1000), -1),
]
for tag, shape, axis in SOFTMAX_SHAPES:
    x = randn(*shape) * 4
    if tag == "last":
        x = x * 50  # large magnitudes: exp would overflow without the max shift
    dy = randn(*shape)
    for op, grad_op, fn in (("Softmax", "SoftmaxGrad", torch.softmax),
                            ("LogSoftmax", "LogSoftmaxGrad", torch.log_softmax)):
        y, dx = autograd(lambda t: fn(t, axis), x, dy)
        attrs = {"axis": I(axis)}
        # The normalizing sums run along the axis.
        k = shape[axis]
        case("softmax/%s_%s" % (op, tag), op, attrs, [x], [y], sum_tol(k), 1e-6)
        case("softmax/%s_%s" % (grad_op, tag), grad_op, attrs, [y, dy], [dx], sum_tol(k, 1e-4), 1e-5)
x = randn(3, 8)
case("softmax/Softmax_default_axis", "Softmax", {}, [x], [torch.softmax(x, -1)])

# --- Shape ops -----------------------------------------------------------------

for dtype in (torch.float32, torch.float16, torch.int64, torch.bool):
    x = (randn(2, 3, 4) * 5).to(dtype)
    d = str(dtype)[6:]
    case("shape/Reshape_%s" % d, "Reshape", {"shape": INTS([4, 6])}, [x], [x.reshape(4, 6)], 0, 0)
    case("shape/Flatten_%s" % d, "Flatten", {"axis": I(2)}, [x], [x.reshape(6, 4)], 0, 0)
    case("shape/Unsqueeze_%s" % d, "Unsqueeze", {"axes": INTS([0, 4])}, [x],
         [x.reshape(1, 2, 3, 4, 1)], 0, 0)
x = randn(2, 3, 4)
case("shape/Flatten_default", "Flatten", {}, [x], [x.reshape(2, 12)], 0, 0)
case("shape/Flatten_zero", "Flatten", {"axis": I(0)}, [x], [x.reshape(1, 24)], 0, 0)
case("shape/Flatten_negative", "Flatten", {"axis": I(-1)}, [x], [x.reshape(6, 4)], 0, 0)
x = randn(3, 1, 4, 1)
case("shape/Squeeze_axes", "Squeeze", {"axes": INTS([-1])}, [x], [x.reshape(3, 1, 4)], 0, 0)
case("shape/Squeeze_all", "Squeeze", {}, [x], [x.reshape(3, 4)], 0, 0)

TRANSPOSES = [
    ("2d", (5, 7), [1, 0]),
    ("nhwc", (2, 3, 4, 5), [0, 2, 3, 1]),
    ("nchw", (2, 4, 5, 3), [0, 3, 1, 2]),
    ("default", (2, 3, 4), None),
    ("rotate", (3, 4, 6), [2, 0, 1]),
    ("keep_last", (3, 4, 6), [1, 0, 2]),
    ("large", (64, 33, 65), [2, 1, 0]),
]
for tag, shape, perm in TRANSPOSES:
    x = randn(*shape)
    attrs = {} if perm is None else {"perm": INTS(perm)}
    want = x.permute(*(perm if perm else reversed(range(len(shape)))))
    case("shape/Transpose_%s" % tag, "Transpose", attrs, [x], [want], 0, 0)
for dtype in (torch.float16, torch.int32, torch.bool):
    x = (randn(3, 5, 2) * 4).to(dtype)
    case("shape/Transpose_%s" % str(dtype)[6:], "Transpose", {"perm": INTS([2, 0, 1])}, [x],
         [x.permute(2, 0, 1)], 0, 0)

CONCATS = [
    ("middle", [(2, 3, 4), (2, 5, 4), (2, 1, 4)], 1),
    ("last", [(3, 2), (3, 5)], -1),
    ("first", [(1, 4), (3, 4)], 0),
    ("with_empty", [(2, 3, 4), (2, 0, 4), (2, 2, 4)], 1),
    ("channels", [(4, 64, 17, 17), (4, 96, 17, 17), (4, 32, 17, 17)], 1),
]
for tag, shapes, axis in CONCATS:
    xs = [randn(*s) for s in shapes]
    case("shape/Concat_%s" % tag, "Concat", {"axis": I(axis)}, xs, [torch.cat(xs, axis)], 0, 0)
    if axis == 0 or tag == "first":
        case("shape/ConcatBatch_%s" % tag, "ConcatBatch", {}, xs, [torch.cat(xs, 0)], 0, 0)
xs = [torch.randint(0, 9, s, dtype=torch.int64) for s in ((2, 2), (2, 3))]
case("shape/Concat_int64", "Concat", {"axis": I(1)}, xs, [torch.cat(xs, 1)], 0, 0)
xs = [randn(2, 1), randn(3, 1), randn(0, 1)]
case("shape/ConcatBatch_uneven", "ConcatBatch", {}, xs, [torch.cat(xs, 0)], 0, 0)

SPLITS = [
    ("middle", (2, 6, 3), 1, [1, 2, 3]),
    ("last", (4, 5), -1, [2, 3]),
    ("with_empty", (3, 4), 1, [0, 4, 0]),
    ("channels", (4, 192, 9, 9), 1, [64, 96, 32]),
]
for tag, shape, axis, sizes in SPLITS:
    x = randn(*shape)
    case("shape/Split_%s" % tag, "Split", {"axis": I(axis), "split": INTS(sizes)}, [x],
         list(torch.split(x, sizes, axis)), 0, 0)
x = randn(5, 3)
case("shape/SplitBatch", "SplitBatch", {"sizes": INTS([3, 0, 2])}, [x],
     list(torch.split(x, [3, 0, 2], 0)), 0, 0)
x = torch.randint(0, 9, (4, 2), dtype=torch.int32)
case("shape/Split_int32", "Split", {"axis": I(0), "split": INTS([1, 3])}, [x],
     list(torch.split(x, [1, 3], 0)), 0, 0)

BIG = 2**31 - 1
SLICES = [
    # tag, shape, starts, ends, axes, steps, numpy index
    ("basic", (5, 7), [1, 2], [4, 6], [0, 1], [1, 1], np.s_[1:4, 2:6]),
    ("default_axes", (5, 7), [1], [-1], [], [], np.s_[1:-1]),
    ("step2", (6, 9), [0, 1], [BIG, 8], [0, 1], [2, 3], np.s_[0::2, 1:8:3]),
    ("reverse", (5, 7), [-1], [-BIG], [1], [-1], np.s_[:, ::-1]),
    ("reverse_step", (4, 11), [9, 0], [1, BIG], [1, 0], [-2, 1], np.s_[:, 9:1:-2]),
    ("negative_axis", (2, 3, 8), [-3], [BIG], [-1], [1], np.s_[..., -3:]),
    ("clamped", (4, 5), [-10, 2], [10, 100], [0, 1], [1, 1], np.s_[-10:10, 2:100]),
    ("empty", (4, 5), [3], [1], [0], [1], np.s_[3:1]),
    ("reverse_all", (3, 4, 5), [-1, -1, -1], [-BIG, -BIG, -BIG], [0, 1, 2], [-1, -1, -1],
     np.s_[::-1, ::-1, ::-1]),
]
for tag, shape, starts, ends, axes, steps, idx in SLICES:
    x = randn(*shape).numpy()
    attrs = {"starts": INTS(starts), "ends": INTS(ends)}
    if axes:
        attrs["axes"] = INTS(axes)
    if steps:
        attrs["steps"] = INTS(steps)
    case("shape/Slice_%s" % tag, "Slice", attrs, [x], [np.asarray(x[idx], order="C")], 0, 0)
x = torch.randint(0, 99, (6, 4), dtype=torch.int64).numpy()
case("shape/Slice_int64", "Slice", {"starts": INTS([5]), "ends": INTS([-BIG]), "steps": INTS([-2])},
     [x], [np.asarray(x[5::-2], order="C")], 0, 0)

# Pad: pads = [begin per axis..., end per axis...].
x = randn(2, 3, 4, 5)
pads = [0, 1, 2, 0, 0, 2, 1, 3]  # axis 1: (1, 2), axis 2: (2, 1), axis 3: (0, 3)
torch_pads = (0, 3, 2, 1, 1, 2)  # last axis first, (begin, end)
case("shape/Pad_constant", "Pad", {"pads": INTS(pads), "value": Fl(1.5)}, [x],
     [F.pad(x, torch_pads, value=1.5)], 0, 0)
case("shape/Pad_edge", "Pad", {"pads": INTS(pads), "mode": S("edge")}, [x],
     [torch.from_numpy(np.pad(x.numpy(), [(0, 0), (1, 2), (2, 1), (0, 3)], mode="edge"))], 0, 0)
xr = randn(2, 3, 6, 7)
case("shape/Pad_reflect_hw", "Pad", {"pads": INTS([0, 0, 2, 3, 0, 0, 1, 4]), "mode": S("reflect")},
     [xr], [F.pad(xr, (3, 4, 2, 1), mode="reflect")], 0, 0)
case("shape/Pad_reflect_all", "Pad", {"pads": INTS(pads), "mode": S("reflect")}, [x],
     [torch.from_numpy(np.pad(x.numpy(), [(0, 0), (1, 2), (2, 1), (0, 3)], mode="reflect"))], 0, 0)
case("shape/Pad_replicate_hw", "Pad", {"pads": INTS([0, 0, 2, 3, 0, 0, 1, 4]), "mode": S("edge")},
     [xr], [F.pad(xr, (3, 4, 2, 1), mode="replicate")], 0, 0)
xc = randn(3, 4, 5)  # negative pads crop: axis 1 (-1, 2), axis 2 (1, -2)
case("shape/Pad_crop", "Pad", {"pads": INTS([0, -1, 1, 0, 2, -2])}, [xc],
     [F.pad(xc, (1, -2, -1, 2))], 0, 0)
xi = torch.randint(-5, 5, (3, 4), dtype=torch.int32)
case("shape/Pad_int32", "Pad", {"pads": INTS([1, 0, 0, 2]), "value": Fl(7)}, [xi],
     [F.pad(xi.float(), (0, 2, 1, 0), value=7).to(torch.int32)], 0, 0)

EXPANDS = [
    ("column", (3, 1), (2, 3, 4)),
    ("scalar", (1,), (5,)),
    ("row", (4,), (3, 4)),
    ("middle", (2, 1, 3), (2, 5, 3)),
    ("large", (1, 64, 1), (8, 64, 300)),
]
for tag, shape, to in EXPANDS:
    x = randn(*shape)
    case("shape/Expand_%s" % tag, "Expand", {"shape": INTS(to)}, [x],
         [x.expand(*to).contiguous()], 0, 0)
xb = torch.rand(3, 1) > 0.5
case("shape/Expand_bool", "Expand", {"shape": INTS([3, 4])}, [xb], [xb.expand(3, 4).contiguous()],
     0, 0)

# Empty tensors move nothing but must still get their shapes right.
xe = randn(0, 3)
case("shape/Transpose_empty", "Transpose", {"perm": INTS([1, 0])}, [xe], [xe.t().contiguous()], 0, 0)
case("shape/Reshape_empty", "Reshape", {"shape": INTS([3, 0])}, [xe], [xe.reshape(3, 0)], 0, 0)
case("shape/Pad_empty", "Pad", {"pads": INTS([1, 0, 1, 0]), "value": Fl(2)}, [xe],
     [F.pad(xe, (0, 0, 1, 1), value=2.0)], 0, 0)
case("shape/Expand_empty", "Expand", {"shape": INTS([4, 0, 3])}, [xe],
     [xe.expand(4, 0, 3).contiguous()], 0, 0)
case("shape/Slice_of_empty", "Slice", {"starts": INTS([1]), "ends": INTS([3]), "axes": INTS([1])},
     [xe], [xe[:, 1:3].contiguous()], 0, 0)
case("cast/f32_to_i32_empty", "Cast", {"to": DT("i32")}, [xe], [xe.to(torch.int32)], 0, 0)

# --- Gather and its gradient ----------------------------------------------------

GATHERS = [
    # tag, data shape, axis, indices
    ("rows", (5, 3), 0, [[0, 4], [-1, 2]]),
    ("columns", (4, 6), 1, [5, 0, 0, -6]),
    ("last_axis", (2, 3, 7), -1, [[1, 2, 3]]),
    ("scalar_index", (4, 5), 0, 2),
    ("empty_indices", (4, 5), 1, np.zeros((0,), np.int64)),
    ("embedding", (1000, 64), 0, np.random.RandomState(0).randint(0, 1000, (32, 20))),
]
for tag, shape, axis, idx in GATHERS:
    data = randn(*shape)
    for itype in (np.int64, np.int32):
        ind = np.array(idx, dtype=itype)
        want = np.take(data.numpy(), ind, axis=axis)
        case("gather/Gather_%s_%s" % (tag, itype.__name__), "Gather", {"axis": I(axis)},
             [data, ind], [want], 0, 0)
    # Gradient: autograd of index_select over the flattened indices.
    ind = np.array(idx, dtype=np.int64)
    a = axis % len(shape)
    flat = torch.from_numpy(ind.reshape(-1)) % shape[a]
    out_shape = shape[:a] + ind.shape + shape[a + 1:]
    dy = randn(*out_shape)
    d = data.clone().requires_grad_(True)
    d.index_select(a, flat).reshape(out_shape).backward(dy)
    case("gather/GatherGrad_%s" % tag, "GatherGrad",
         {"axis": I(axis), "data_shape": INTS(shape)}, [ind, dy], [d.grad], 1e-5, 1e-6)
data = torch.randint(-9, 9, (4, 3), dtype=torch.int64)
ind = np.array([3, 3, 0], np.int32)
case("gather/Gather_int64_data", "Gather", {"axis": I(0)}, [data, ind],
     [np.take(data.numpy(), ind, axis=0)], 0, 0)
data = randn(6, 5, dtype=torch.float16)
ind = np.array([[1, 1], [5, 0]], np.int64)
case("gather/Gather_f16_data", "Gather", {"axis": I(0)}, [data, ind],
     [np.take(data.numpy(), ind, axis=0)], 0, 0)
# Many repeats of few rows: the scatter-add accumulates.
ind = np.random.RandomState(1).randint(0, 4, (300,)).astype(np.int64)
dy = randn(300, 70000 // 300)
d = torch.zeros(4, 70000 // 300, requires_grad=True)
d.index_select(0, torch.from_numpy(ind)).backward(dy)
case("gather/GatherGrad_repeats", "GatherGrad", {"axis": I(0), "data_shape": INTS([4, 233])},
     [ind, dy], [d.grad], 1e-5, 1e-5)
ind = np.random.RandomState(2).randint(0, 3, (5,)).astype(np.int32)
dy = randn(1, 5, 40000)
d = torch.zeros(1, 3, 40000, requires_grad=True)
d.index_select(1, torch.from_numpy(ind).long()).backward(dy)
case("gather/GatherGrad_wide_i32", "GatherGrad", {"axis": I(1), "data_shape": INTS([1, 3, 40000])},
     [ind, dy], [d.grad], 1e-5, 1e-6)

# --- Reductions -------------------------------------------------------------------

REDUCES = [
    ("all", (3, 4, 5), [], 1),
    ("all_nokeep", (3, 4, 5), [], 0),
    ("middle", (2, 3, 4, 5), [1], 1),
    ("spatial", (2, 3, 4, 5), [2, 3], 0),
    ("bias_grad", (2, 3, 4, 5), [0, 2, 3], 0),
    ("last_negative", (5, 7), [-1], 1),
    ("first", (5, 7), [0], 0),
    ("alternating", (3, 4, 5, 6, 2), [1, 3], 0),
    ("unit_axes", (3, 1, 4), [1], 0),
    ("empty_reduced", (0, 3), [0], 0),
    ("empty_kept", (3, 0), [0], 1),
    ("large_rows", (20, 4001), [1], 0),
    ("large_columns", (20, 4001), [0], 0),
    ("large_all", (300001,), [], 0),
    ("large_nchw", (8, 64, 35, 35), [0, 2, 3], 1),
    ("rank10", (2, 3, 2, 3, 2, 3, 2, 3, 2, 3), [0, 2, 4, 6, 8], 0),
]
for tag, shape, axes, keep in REDUCES:
    x = randn(*shape)
    attrs = {"keepdims": I(keep)}
    if axes:
        attrs["axes"] = INTS(axes)
    dims = axes if axes else list(range(len(shape)))
    for op, fn in (("ReduceSum", torch.sum), ("ReduceMean", torch.mean)):
        if tag == "empty_reduced" and op == "ReduceMean":
            continue  # NaN: checked in C++
        want = fn(x.double(), dim=dims, keepdim=bool(keep)).float()
        case("reduce/%s_%s" % (op, tag), op, attrs, [x], [want], 2e-6, 1e-6)

# --- Softmax cross-entropy ----------------------------------------------------------

for tag, rows, classes, scale, itype in (("mean_i64", 8, 10, None, torch.int64),
                                         ("scaled_i32", 5, 3, 0.25, torch.int32),
                                         ("large_logits", 4, 1000, None, torch.int64),
                                         ("many_rows", 512, 100, 1.0 / 1024, torch.int64)):
    x = randn(rows, classes) * (40 if tag == "large_logits" else 3)
    labels = torch.randint(0, classes, (rows,), dtype=itype)
    attrs = {} if scale is None else {"scale": Fl(scale)}
    s = 1.0 / rows if scale is None else scale
    xg = x.clone().requires_grad_(True)
    loss = F.cross_entropy(xg, labels.long(), reduction="sum") * s
    dloss = torch.tensor(0.7)
    loss.backward(dloss)
    # Each row's log-sum over the classes, then the sum over rows.
    case("loss/SoftmaxCrossEntropy_%s" % tag, "SoftmaxCrossEntropy", attrs, [x, labels],
         [loss.detach()], sum_tol(classes + rows), 1e-6)
    case("loss/SoftmaxCrossEntropyGrad_%s" % tag, "SoftmaxCrossEntropyGrad", attrs,
         [x, labels, dloss], [xg.grad], sum_tol(classes), 1e-7)
x = randn(0, 4)
labels = torch.zeros(0, dtype=torch.int64)
case("loss/SoftmaxCrossEntropy_empty", "SoftmaxCrossEntropy", {}, [x, labels],
     [torch.tensor(0.0)], 0, 0)

# The loss op's other kinds (--loss): NLL on log-probabilities, MSE against targets of any shape.
for tag, rows, classes, scale in (("mean", 8, 10, None), ("scaled", 5, 3, 0.25)):
    x = F.log_softmax(randn(rows, classes) * 3, dim=1)
    labels = torch.randint(0, classes, (rows,), dtype=torch.int64)
    attrs = {"loss": S("nll")}
    if scale is not None:
        attrs["scale"] = Fl(scale)
    xg = x.clone().requires_grad_(True)
    loss = F.nll_loss(xg, labels, reduction="sum") * (1.0 / rows if scale is None else scale)
    dloss = torch.tensor(0.7)
    loss.backward(dloss)
    case("loss/Nll_%s" % tag, "SoftmaxCrossEntropy", attrs, [x, labels], [loss.detach()],
         sum_tol(rows), 1e-6)
    case("loss/NllGrad_%s" % tag, "SoftmaxCrossEntropyGrad", attrs, [x, labels, dloss], [xg.grad],
         1e-6, 1e-7)
for tag, shape, scale in (("mean", (8, 3), None), ("rank3_scaled", (4, 2, 5), 0.01), ("rank1", (6,), None)):
    x, t = randn(*shape), randn(*shape)
    attrs = {"loss": S("mse")}
    if scale is not None:
        attrs["scale"] = Fl(scale)
    xg = x.clone().requires_grad_(True)
    loss = F.mse_loss(xg, t, reduction="sum") * (1.0 / x.numel() if scale is None else scale)
    dloss = torch.tensor(0.7)
    loss.backward(dloss)
    case("loss/Mse_%s" % tag, "SoftmaxCrossEntropy", attrs, [x, t], [loss.detach()],
         sum_tol(x.numel()), 1e-6)
    case("loss/MseGrad_%s" % tag, "SoftmaxCrossEntropyGrad", attrs, [x, t, dloss], [xg.grad],
         1e-6, 1e-7)

# --- Optimizers over several steps ---------------------------------------------------

LRS = [0.1, 0.05, 0.02]


def optimizer_case(name, op, attrs, slots, make, slot_state, shape=(7, 5)):
    """Runs torch.optim for len(LRS) steps; slot_state(state) names torch's state."""
    p = randn(*shape)
    grads = [randn(*shape) for _ in LRS]
    param = torch.nn.Parameter(p.clone())
    opt = make([param])
    variables = {"p": save(p, "p")["file"]}
    for s in slots:
        variables[s] = None
    steps = []
    for g, lr in zip(grads, LRS):
        for group in opt.param_groups:
            group["lr"] = lr
        param.grad = g.clone()
        opt.step()
        vars_ = {"p": save(param.detach(), "p")["file"]}
        for s, t in zip(slots, slot_state(opt.state[param])):
            vars_[s] = save(t, s)["file"]
        steps.append({"inputs": [save(g, "g"), save(torch.tensor(lr), "lr")], "outputs": [],
                      "vars": vars_})
    attrs = dict(attrs, var=S("p"))
    if slots:
        attrs["slots"] = STRS(slots)
    case("optimizer/" + name, op, attrs, [], [], 1e-5, 1e-6, variables, steps)


optimizer_case("sgd", "ApplySGD", {}, [], lambda ps: torch.optim.SGD(ps, lr=0.1), lambda st: [])
optimizer_case("sgd_wd", "ApplySGD", {"weight_decay": Fl(0.01)}, [],
               lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.01), lambda st: [])
for nesterov in (False, True):
    for wd in (0.0, 0.001):
        optimizer_case("momentum%s%s" % ("_nesterov" if nesterov else "", "_wd" if wd else ""),
                       "ApplyMomentum",
                       {"momentum": Fl(0.9), "nesterov": I(nesterov), "weight_decay": Fl(wd)},
                       ["buf"],
                       lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=nesterov,
                                                  weight_decay=wd),
                       lambda st: [st["momentum_buffer"]])
for wd in (0.0, 0.01):
    optimizer_case("adam%s" % ("_wd" if wd else ""), "ApplyAdam",
                   {"beta1": Fl(0.9), "beta2": Fl(0.999), "epsilon": Fl(1e-8),
                    "weight_decay": Fl(wd)},
                   ["m", "v"],
                   lambda ps: torch.optim.Adam(ps, lr=0.1, betas=(0.9, 0.999), eps=1e-8,
                                               weight_decay=wd),
                   lambda st: [st["exp_avg"], st["exp_avg_sq"]])
optimizer_case("adam_large", "ApplyAdam", {}, ["m", "v"],
               lambda ps: torch.optim.Adam(ps, lr=0.1), lambda st: [st["exp_avg"], st["exp_avg_sq"]],
               shape=(300, 301))


class RMSPropTF(torch.optim.Optimizer):
    """The TensorFlow / Inception-paper RMSProp of the kernel contract, in float32."""

    def __init__(self, params, lr, decay, momentum, eps):
        super().__init__(params, dict(lr=lr, decay=decay, momentum=momentum, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["ms"] = torch.zeros_like(p)
                    st["mom"] = torch.zeros_like(p)
                g = p.grad
                st["ms"].mul_(group["decay"]).add_((1 - group["decay"]) * g * g)
                st["mom"].mul_(group["momentum"]).add_(
                    group["lr"] * g / torch.sqrt(st["ms"] + group["eps"]))
                p.sub_(st["mom"])


for tag, momentum, eps in (("", 0.9, 1.0), ("_no_momentum", 0.0, 1e-3)):
    optimizer_case("rmsprop" + tag, "ApplyRMSProp",
                   {"decay": Fl(0.9), "momentum": Fl(momentum), "epsilon": Fl(eps)}, ["ms", "mom"],
                   lambda ps: RMSPropTF(ps, 0.1, 0.9, momentum, eps),
                   lambda st: [st["ms"], st["mom"]])

p, value = randn(3, 4), randn(3, 4)
case("optimizer/assign", "Assign", {"var": S("p")}, [], [], 0, 0,
     {"p": save(p, "p")["file"]},
     [{"inputs": [save(value, "value")], "outputs": [], "vars": {"p": save(value, "p")["file"]}}])

# --- Erf, Gelu, HardSigmoid, HardSwish and their gradients ---------------------
# Last in the file, so that the cases above keep their random data.



class HardSigmoidOnnx(torch.autograd.Function):
    """ONNX's default HardSigmoid (alpha 0.2, beta 0.5) with PyTorch's hardsigmoid convention at
    the ends: a gradient strictly inside (0, 1) only (torch.clamp's would pass it at the ends)."""

    @staticmethod
    def forward(ctx, x):
        t = 0.2 * x + 0.5
        ctx.save_for_backward(t)
        return torch.clamp(t, 0, 1)

    @staticmethod
    def backward(ctx, dy):
        (t,) = ctx.saved_tensors
        return dy * 0.2 * ((t > 0) & (t < 1)).float()


torch.manual_seed(4321)
# HardSwish's and HardSigmoid's kinks, first in each tensor: where PyTorch's vectorised kernel
# computes them (its scalar tail gives HardSwish' 3/2 at 3, not 1; docs/plain-kernels.md).
KINKS = torch.tensor([-3.0, 3.0, -2.5, 2.5, 0.0, -3.0000002, 3.0000002])
MODERN = [
    ("Erf", {}, torch.erf, None),
    ("Gelu", {}, F.gelu, None),
    ("Gelu", {"approximate": S("tanh")}, lambda x: F.gelu(x, approximate="tanh"), "tanh"),
    ("HardSigmoid", {"alpha": Fl(1 / 6), "beta": Fl(0.5)}, F.hardsigmoid, "torch"),
    ("HardSigmoid", {}, lambda x: HardSigmoidOnnx.apply(x), "onnx_default"),
    ("HardSwish", {}, F.hardswish, None),
]
for op, attrs, fn, variant in MODERN:
    label = op + ("_" + variant if variant else "")
    for tag, shape in (("small", (3, 7)), ("odd", (5, 3, 11)), ("large", (3, 40001)), ("empty", (0,))):
        x = randn(*shape) * 3
        if x.numel() >= len(KINKS):
            x.view(-1)[:len(KINKS)] = KINKS
        case("unary/%s_%s" % (label, tag), op, attrs, [x], [fn(x)])
        if x.numel() == 0:
            continue
        dy = randn(*shape)
        _, dx = autograd(fn, x, dy)
        # Where tanh is a few ulps from -1 (x from about -4.6 to -3), 1 + tanh is a handful of
        # ulps that libm and PyTorch round their own ways, multiplied by up to about 10.
        atol = 1e-5 if variant == "tanh" else 1e-6
        case("grad/%sGrad%s_%s" % (op, "_" + variant if variant else "", tag), op + "Grad", attrs,
             [x, dy], [dx], 1e-5, atol)
    for dtype in (torch.float16, torch.bfloat16):
        x = randn(4, 33, dtype=dtype) * 2
        rtol, atol = tol(dtype)
        case("unary/%s_%s" % (label, str(dtype)[6:]), op, attrs, [x], [fn(x.float()).to(dtype)],
             rtol, atol)
        dy = randn(4, 33, dtype=dtype)
        _, want = autograd(fn, x.float(), dy.float())
        case("grad/%sGrad%s_%s" % (op, "_" + variant if variant else "", str(dtype)[6:]),
             op + "Grad", attrs, [x, dy], [want.to(dtype)], rtol, atol)

# --- LayerNorm and its gradient -------------------------------------------------


def layer_norm_case(tag, shape, axis, eps=1e-5, bias=True, offset=0.0, spread=1.0):
    """PyTorch in float64 on the float32 data, rounded: the kernel sums in double, and PyTorch's
    float32 sums are off by more than the kernel where |mean| is large beside the spread (1e-2
    absolute in the large_mean case)."""
    x = randn(*shape) * spread + offset
    normalized = tuple(shape[axis:])
    scale = randn(*normalized) * 0.5 + 1
    b = randn(*normalized) if bias else torch.zeros(normalized)
    dy = randn(*shape)
    xs, ss, bs = (t.double().requires_grad_(True) for t in (x, scale, b))
    y = F.layer_norm(xs, normalized, ss, bs, eps)
    y.backward(dy.double())
    attrs = {"axis": I(axis if tag != "negative_axis" else axis - len(shape)), "epsilon": Fl(eps)}
    ins = [x, scale] + ([b] if bias else [])
    case("layernorm/%s" % tag, "LayerNorm", attrs, ins, [y.detach().float()], 1e-5, 1e-5)
    case("layernorm/%s_grad" % tag, "LayerNormGrad", attrs, [x, scale, dy],
         [t.grad.float() for t in (xs, ss, bs)], 1e-5, 1e-5)


layer_norm_case("last_axis", (6, 16), 1)
layer_norm_case("tokens", (4, 7, 32), 2)
layer_norm_case("negative_axis", (3, 5, 8), 2)
layer_norm_case("two_axes", (3, 4, 5, 6), 2, eps=1e-3)
layer_norm_case("no_bias", (5, 24), 1, bias=False)
layer_norm_case("wide_row", (2, 3000), 1)
layer_norm_case("many_rows", (3000, 8), 1)
layer_norm_case("large_mean", (8, 64), 1, offset=1000.0, spread=0.01)

with open(os.path.join(OUT, "cases.json.tmp"), "w") as f:
    json.dump(CASES, f, indent=1)
os.replace(os.path.join(OUT, "cases.json.tmp"), os.path.join(OUT, "cases.json"))
print("wrote %d cases to %s" % (len(CASES), OUT))
