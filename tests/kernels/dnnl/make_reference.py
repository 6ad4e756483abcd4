"""Reference data for the oneDNN-backed CPU kernels, computed with PyTorch.

Usage: /usr/bin/python3 make_reference.py OUTDIR

Writes OUTDIR/manifest.json and one folder of .npy files per case. Each case
is one node: its op, attributes (typed: {"int": v}, {"ints": [...]},
{"float": v}), its operands and its expected results, in operand and result
order. Inputs are float32; expected results are computed in float64 from
those same float32 inputs and stored as float32, so the reference carries no
float32 summation error of its own. Gradients come from autograd.

ONNX-style asymmetric pads are applied with F.pad (zeros for convolution and
average pooling with padding counted, -inf for max pooling); average pooling
with asymmetric pads and padding not counted divides the padded sum by the
padded count of ones.
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
OUT = sys.argv[1]
cases = []
gen = torch.Generator().manual_seed(1234)


def randn(*shape):
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float32)


def distinct(*shape):
    """Values without ties, so max pooling's argmax is unambiguous."""
    n = int(np.prod(shape))
    return (torch.randperm(n, generator=gen).float() * (4.0 / n) - 2.0).reshape(shape)


def f64(t):
    return t.detach().double().requires_grad_(True)


def save(name, role, t):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, role + ".npy")
    np.save(path, t.detach().to(torch.float32).contiguous().numpy())
    return os.path.join(name, role + ".npy")


def add(name, op, attrs, inputs, outputs):
    """inputs/outputs: lists of (role, tensor)."""
    cases.append({
        "name": name,
        "op": op,
        "attrs": attrs,
        "inputs": [save(name, r, t) for r, t in inputs],
        "outputs": [save(name, r, t) for r, t in outputs],
    })


def ints(v):
    return {"ints": list(v)}


def conv_case(name, x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), group=1):
    """pads: ONNX order [top, left, bottom, right]."""
    xd, wd = f64(x), f64(w)
    bd = f64(b) if b is not None else None
    xp = F.pad(xd, (pads[1], pads[3], pads[0], pads[2]))
    y = F.conv2d(xp, wd, bd, stride=strides, dilation=dil, groups=group)
    dy = randn(*y.shape)
    dx, dw = torch.autograd.grad(y, [xd, wd], dy.double())
    attrs = {"strides": ints(strides), "pads": ints(pads), "dilations": ints(dil),
             "group": {"int": group}}
    ins = [("x", x), ("w", w)] + ([("b", b)] if b is not None else [])
    add(name, "Conv", attrs, ins, [("y", y)])
    add(name + "_grad_data", "ConvGradData", dict(attrs, input_shape=ints(x.shape)),
        [("dy", dy), ("w", w)], [("dx", dx)])
    add(name + "_grad_filter", "ConvGradFilter", dict(attrs, filter_shape=ints(w.shape)),
        [("x", x), ("dy", dy)], [("dw", dw)])


def pool_case(name, kind, x, k, strides, pads=(0, 0, 0, 0), ceil=False, include=True, dil=(1, 1)):
    xd = f64(x)
    symmetric = pads[0] == pads[2] and pads[1] == pads[3]
    if kind == "max":
        if symmetric:
            y = F.max_pool2d(xd, k, strides, (pads[0], pads[1]), dil, ceil_mode=ceil)
        else:
            assert not ceil
            xp = F.pad(xd, (pads[1], pads[3], pads[0], pads[2]), value=-float("inf"))
            y = F.max_pool2d(xp, k, strides, 0, dil)
    elif symmetric:
        y = F.avg_pool2d(xd, k, strides, (pads[0], pads[1]), ceil_mode=ceil,
                         count_include_pad=include)
    else:
        assert not ceil
        padded = lambda t: F.pad(t, (pads[1], pads[3], pads[0], pads[2]))
        y = F.avg_pool2d(padded(xd), k, strides, 0)
        if not include:
            y = y / F.avg_pool2d(padded(torch.ones_like(xd)), k, strides, 0)
    dy = randn(*y.shape)
    (dx,) = torch.autograd.grad(y, [xd], dy.double())
    attrs = {"kernel_shape": ints(k), "strides": ints(strides), "pads": ints(pads),
             "ceil_mode": {"int": int(ceil)}}
    if kind == "max":
        attrs["dilations"] = ints(dil)
        add(name, "MaxPool", attrs, [("x", x)], [("y", y)])
        add(name + "_grad", "MaxPoolGrad", attrs, [("x", x), ("dy", dy)], [("dx", dx)])
    else:
        attrs["count_include_pad"] = {"int": int(include)}
        add(name, "AveragePool", attrs, [("x", x)], [("y", y)])
        add(name + "_grad", "AveragePoolGrad", dict(attrs, input_shape=ints(x.shape)),
            [("dy", dy)], [("dx", dx)])


def gap_case(name, x):
    y = f64(x).mean(dim=tuple(range(2, x.dim())), keepdim=True)
    add(name, "GlobalAveragePool", {}, [("x", x)], [("y", y)])


def bn_infer_case(name, x, eps):
    c = x.shape[1]
    scale, bias, mean = randn(c), randn(c), randn(c)
    var = torch.rand(c, generator=gen) + 0.5
    y = F.batch_norm(f64(x), mean.double(), var.double(), scale.double(), bias.double(),
                     training=False, eps=eps)
    add(name, "BatchNorm", {"epsilon": {"float": eps}},
        [("x", x), ("scale", scale), ("bias", bias), ("mean", mean), ("var", var)], [("y", y)])


def bn_train_case(name, x, eps):
    c = x.shape[1]
    scale, bias = randn(c), randn(c)
    xd, sd, bd = f64(x), f64(scale), f64(bias)
    dims = [0] + list(range(2, x.dim()))
    mean = xd.mean(dim=dims)
    var = xd.var(dim=dims, unbiased=False)
    y = F.batch_norm(xd, None, None, sd, bd, training=True, eps=eps)
    dy = randn(*y.shape)
    dx, dscale, dbias = torch.autograd.grad(y, [xd, sd, bd], dy.double())
    attrs = {"epsilon": {"float": eps}}
    add(name, "BatchNormTrain", attrs, [("x", x), ("scale", scale), ("bias", bias)],
        [("y", y), ("mean", mean), ("var", var)])
    # The gradient kernel gets the statistics the forward kernel produced, in
    # float32.
    add(name + "_grad", "BatchNormTrainGrad", attrs,
        [("x", x), ("scale", scale), ("mean", mean.float()), ("var", var.float()), ("dy", dy)],
        [("dx", dx), ("dscale", dscale), ("dbias", dbias)])


def matmul_case(name, a_shape, b_shape):
    a, b = randn(*a_shape), randn(*b_shape)
    add(name, "MatMul", {}, [("a", a), ("b", b)], [("y", torch.matmul(a.double(), b.double()))])


def gemm_case(name, a_shape, b_shape, c_shape=None, ta=0, tb=0, alpha=1.0, beta=1.0):
    a, b = randn(*a_shape), randn(*b_shape)
    ad, bd = a.double(), b.double()
    y = alpha * ((ad.t() if ta else ad) @ (bd.t() if tb else bd))
    ins = [("a", a), ("b", b)]
    if c_shape is not None:
        c = randn(*c_shape)
        y = y + beta * c.double()
        ins.append(("c", c))
    attrs = {"transA": {"int": ta}, "transB": {"int": tb}, "alpha": {"float": alpha},
             "beta": {"float": beta}}
    add(name, "Gemm", attrs, ins, [("y", y)])


# Convolutions: odd sizes, stride 2, asymmetric pads, groups, dilation, batch 1.
conv_case("conv_basic", randn(2, 3, 9, 11), randn(4, 3, 3, 3), randn(4), pads=(1, 1, 1, 1))
conv_case("conv_stride2_asym", randn(1, 5, 10, 9), randn(6, 5, 3, 2), strides=(2, 2),
          pads=(0, 1, 2, 0))
conv_case("conv_group_dilation", randn(2, 8, 12, 12), randn(12, 4, 3, 3), randn(12),
          pads=(2, 2, 2, 2), dil=(2, 2), group=2)
conv_case("conv_depthwise", randn(2, 6, 7, 7), randn(6, 1, 3, 3), strides=(2, 2),
          pads=(1, 1, 1, 1), group=6)
conv_case("conv_1x7", randn(2, 16, 9, 9), randn(32, 16, 1, 7), randn(32), pads=(0, 3, 0, 3))
conv_case("conv_stride2_floor", randn(3, 32, 11, 13), randn(48, 32, 3, 3), strides=(2, 2))
conv_case("conv_stride2_unused_pad", randn(1, 4, 8, 8), randn(4, 4, 3, 3), strides=(2, 2),
          pads=(1, 1, 1, 1))
conv_case("conv_1x1_batch1", randn(1, 64, 5, 5), randn(16, 64, 1, 1), randn(16))
# Longer reductions (2,312 terms per weight gradient, 432 per data gradient).
conv_case("conv_larger", randn(8, 32, 17, 17), randn(48, 32, 3, 3), randn(48), pads=(1, 1, 1, 1))
# Winograd's shapes (3x3, stride 1, 16+ channels): outputs that end in partial
# 4x4 tiles, no padding, exactly 8x8, a single image.
conv_case("conv_wino_odd", randn(3, 32, 13, 11), randn(48, 32, 3, 3), randn(48), pads=(1, 1, 1, 1))
conv_case("conv_wino_valid", randn(2, 16, 10, 9), randn(16, 16, 3, 3))
conv_case("conv_wino_8x8", randn(4, 64, 8, 8), randn(32, 64, 3, 3), pads=(1, 1, 1, 1))
conv_case("conv_wino_batch1", randn(1, 48, 7, 7), randn(64, 48, 3, 3), randn(64), pads=(1, 1, 1, 1))
# The 1-D Winograd's shapes (1xK / Kx1, "same" padding, whole channel blocks): inception_v3's
# 17-long lines (a partial last tile) along each axis, lines shorter than the window, 1x3 and
# 3x1 on 8x8, 1x5 (taken only under --conv-algorithm winograd).
conv_case("conv_7x1_17", randn(2, 32, 17, 5), randn(48, 32, 7, 1), pads=(3, 0, 3, 0))
conv_case("conv_1x7_17", randn(2, 48, 3, 17), randn(32, 48, 1, 7), randn(32), pads=(0, 3, 0, 3))
conv_case("conv_1x7_short", randn(1, 16, 4, 3), randn(16, 16, 1, 7), randn(16), pads=(0, 3, 0, 3))
conv_case("conv_3x1_8x8", randn(2, 32, 8, 8), randn(16, 32, 3, 1), pads=(1, 0, 1, 0))
conv_case("conv_1x3_8x8", randn(2, 16, 8, 8), randn(32, 16, 1, 3), pads=(0, 1, 0, 1))
conv_case("conv_1x5", randn(2, 16, 6, 11), randn(16, 16, 1, 5), pads=(0, 2, 0, 2))
# Square windows folded into it: 5x5 (oneDNN has no Winograd for it), uneven padding.
conv_case("conv_5x5", randn(2, 16, 9, 10), randn(16, 16, 5, 5), randn(16), pads=(2, 2, 2, 2))
conv_case("conv_3x5_uneven", randn(2, 16, 7, 9), randn(32, 16, 3, 5), pads=(0, 1, 2, 3))

# Pooling: ceil_mode, pads (symmetric and not), dilation, both count_include_pad.
pool_case("maxpool_3x3s2", "max", distinct(2, 3, 9, 9), (3, 3), (2, 2))
pool_case("maxpool_ceil_pad", "max", distinct(1, 5, 10, 11), (3, 3), (2, 2), (1, 1, 1, 1),
          ceil=True)
pool_case("maxpool_dilation", "max", distinct(2, 4, 11, 10), (3, 3), (1, 1), (1, 1, 1, 1),
          dil=(2, 2))
pool_case("maxpool_asym", "max", distinct(2, 3, 8, 7), (2, 2), (2, 2), (0, 0, 1, 1))
pool_case("maxpool_c16", "max", distinct(2, 16, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1))
pool_case("avgpool_include", "avg", randn(2, 3, 9, 9), (3, 3), (1, 1), (1, 1, 1, 1))
pool_case("avgpool_exclude", "avg", randn(2, 3, 9, 9), (3, 3), (1, 1), (1, 1, 1, 1),
          include=False)
pool_case("avgpool_ceil_include", "avg", randn(1, 4, 10, 10), (3, 3), (2, 2), (1, 1, 1, 1),
          ceil=True)
pool_case("avgpool_ceil_exclude", "avg", randn(1, 4, 10, 10), (3, 3), (2, 2), (1, 1, 1, 1),
          ceil=True, include=False)
pool_case("avgpool_ceil_nopad_include", "avg", randn(2, 3, 8, 9), (3, 2), (2, 2), ceil=True)
pool_case("avgpool_asym_include", "avg", randn(2, 5, 7, 9), (3, 3), (2, 2), (1, 0, 0, 1))
pool_case("avgpool_asym_exclude", "avg", randn(2, 5, 7, 9), (3, 3), (2, 2), (1, 0, 0, 1),
          include=False)
pool_case("avgpool_c32", "avg", randn(2, 32, 8, 8), (3, 3), (1, 1), (1, 1, 1, 1))
gap_case("gap", randn(2, 5, 7, 6))
gap_case("gap_c32", randn(2, 32, 8, 8))
gap_case("gap_3d", randn(3, 4, 10))

# Batch normalization: 4-d, 2-d, 3-d, batch 1, channels a multiple of 16 or not.
bn_infer_case("bn_infer", randn(2, 5, 4, 3), 1e-3)
bn_infer_case("bn_infer_2d", randn(6, 7), 1e-5)
bn_train_case("bn_train", randn(3, 6, 5, 4), 1e-5)
bn_train_case("bn_train_2d", randn(7, 10), 1e-5)
bn_train_case("bn_train_3d", randn(4, 6, 5), 1e-5)
bn_train_case("bn_train_batch1", randn(1, 4, 3, 3), 1e-3)
bn_train_case("bn_train_c32", randn(2, 32, 5, 5), 1e-3)

# Matrix products.
matmul_case("matmul_2d", (5, 7), (7, 3))
matmul_case("matmul_broadcast", (2, 1, 4, 6), (3, 6, 5))
matmul_case("matmul_batch", (4, 3, 5), (4, 5, 2))
matmul_case("matmul_1d_left", (6,), (2, 6, 4))
matmul_case("matmul_1d_right", (3, 5, 6), (6,))
matmul_case("matmul_1d_both", (6,), (6,))
gemm_case("gemm_fc", (4, 8), (5, 8), (5,), tb=1)
gemm_case("gemm_transA_scaled", (8, 4), (8, 5), (4, 1), ta=1, alpha=0.5, beta=2.0)
gemm_case("gemm_both_trans_scalar_c", (8, 4), (5, 8), (), ta=1, tb=1, beta=0.5)
gemm_case("gemm_no_c", (4, 8), (8, 5), alpha=2.0)
gemm_case("gemm_full_c", (3, 4), (4, 6), (3, 6), alpha=1.5, beta=-1.0)

os.makedirs(OUT, exist_ok=True)
tmp = os.path.join(OUT, "manifest.json.tmp")
with open(tmp, "w") as f:
    json.dump({"cases": cases}, f, indent=1)
os.replace(tmp, os.path.join(OUT, "manifest.json"))
print("wrote %d cases to %s" % (len(cases), OUT))
