#!/usr/bin/python3
"""Writes the ONNX models the ONNX frontend tests read, into the directory given.

Run at test time (a ctest fixture), with Debian's PyTorch 1.13 and ONNX 1.12:
  - torchvision inception_v3 (aux_logits=False, init_weights=True) and resnet18,
    each exported in eval and in training mode at opsets 13 and 17, with a dynamic
    batch axis, plus .npy files of a few of their state_dict tensors;
  - small models covering every op the importer maps, exported by PyTorch at
    opsets 9, 11, 13 and 17 (eval and training mode), one with a fixed batch;
  - the opset-18 forms of those ops, built with onnx.helper (Debian's ONNX 1.12
    cannot export them);
  - graph-only models (weights as graph inputs, initializers without data);
  - the ops of modern models (LayerNorm, GELU in both forms, Hardswish, Hardsigmoid) exported
    by PyTorch at opset 17, and opset 20's Gelu built with onnx.helper;
  - stochastic depth (torchvision's stochastic_depth, timm's drop_path) in the forms PyTorch
    exports, Bernoulli built with onnx.helper, and random ops the importer refuses;
  - malformed files, one per error the importer must report.
A stamp (this script's hash) skips the work when every output is already there.
"""

import copy
import inspect
import hashlib
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import TensorProto, helper, numpy_helper

# The TorchScript exporter, which these references were written with: PyTorch 2.9 and later
# default to the dynamo exporter (other opsets, external data, no training mode).
TORCHSCRIPT_EXPORTER = ({"dynamo": False}
                        if "dynamo" in inspect.signature(torch.onnx.export).parameters
                        else {})

OUT = sys.argv[1]
BIG_OPSETS = [13, 17]
SMALL_OPSETS = [9, 11, 13, 17]
written = []


def path(name):
    written.append(name)
    return os.path.join(OUT, name)


def export(model, x, name, opset, training, dynamic=True, **kw):
    model = copy.deepcopy(model)
    args = dict(opset_version=opset, input_names=["x"], **kw)
    if dynamic:
        args["dynamic_axes"] = {"x": {0: "N"}}
    if training:
        model.train()
        args.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        model.eval()
    torch.onnx.export(model, x, path(name), **args, **TORCHSCRIPT_EXPORTER)


def save_npy(name, tensor):
    np.save(path(name), tensor.detach().cpu().numpy())


def save_model(model, name, check=True):
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, path(name))


# --- torchvision models -------------------------------------------------------


def torchvision_models():
    torch.manual_seed(0)
    inception = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
    resnet = torchvision.models.resnet18(weights=None)
    for name, model, size in [("inception_v3", inception, 299), ("resnet18", resnet, 224)]:
        x = torch.randn(2, 3, size, size)
        for opset in BIG_OPSETS:
            for training in [False, True]:
                mode = "train" if training else "eval"
                export(model, x, f"{name}_{mode}_{opset}.onnx", opset, training,
                       output_names=["logits"])
    # Values an importer must carry over unchanged (training-mode names are state_dict's).
    sd = inception.state_dict()
    save_npy("inception_v3.Mixed_6e.branch7x7_2.conv.weight.npy",
             sd["Mixed_6e.branch7x7_2.conv.weight"])
    save_npy("inception_v3.fc.bias.npy", sd["fc.bias"])
    save_npy("resnet18.layer3.1.conv2.weight.npy", resnet.state_dict()["layer3.1.conv2.weight"])


# --- small models covering every op -------------------------------------------


class AllOps(nn.Module):
    """Every op of the importer's list, in a shape-consistent chain."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.fc = nn.Linear(8 * 4 * 4, 16)
        self.proj = nn.Linear(16, 10, bias=False)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):  # [N, 3, 16, 16]
        y = F.relu(self.bn(self.conv(x)))
        y = F.pad(y, (1, 1, 1, 1), mode="reflect")  # [N, 8, 18, 18]
        y = F.max_pool2d(y, 3, stride=2, ceil_mode=True)  # [N, 8, 9, 9]
        y = F.avg_pool2d(y, 2, stride=1, padding=1, count_include_pad=False)  # [N, 8, 10, 10]
        y = F.pad(y, (0, 1, 0, 1), value=0.5)  # [N, 8, 11, 11]
        y = self.conv2(y)  # [N, 8, 6, 6]
        a, b = torch.split(y, [3, 5], dim=1)
        y = torch.cat([b, a], dim=1)
        y = y[:, :, 1:5, 2:]  # [N, 8, 4, 4]
        g = torch.sigmoid(F.adaptive_avg_pool2d(y, 1))  # [N, 8, 1, 1]
        y = y * g
        y = y - y.mean(dim=[2, 3], keepdim=True)
        y = y.permute(0, 1, 3, 2)
        z = y.reshape(y.size(0), -1)  # Shape -> Gather -> Unsqueeze -> Concat -> Reshape
        z = self.drop(z)
        h = torch.tanh(self.fc(z))  # [N, 16]
        h = F.leaky_relu(h, 0.2)
        h = torch.clamp(h, -0.5, 0.75)
        u = h.unsqueeze(1).sum(dim=1)
        h = h + u / 2.0
        h = self.proj(h.unsqueeze(1)).squeeze(1)  # MatMul on 3-d, Squeeze  [N, 10]
        h = h + h[:, 2].unsqueeze(1)  # Gather
        h = h + h.to(torch.int64).to(torch.float32) * 0.5  # Cast
        f = torch.flatten(g, 1)  # [N, 8]
        return F.softmax(h, dim=1), F.log_softmax(h, dim=-1), f


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu6(self.fc1(x)))


def small_models():
    torch.manual_seed(1)
    ops, x = AllOps(), torch.randn(2, 3, 16, 16)
    for opset in SMALL_OPSETS:
        for training in [False, True]:
            mode = "train" if training else "eval"
            export(ops, x, f"allops_{mode}_{opset}.onnx", opset, training,
                   output_names=["probs", "logprobs", "gate"])
    mlp = Mlp()
    export(mlp, torch.randn(4, 12), "mlp_13.onnx", 13, False, output_names=["y"])
    export(mlp, torch.randn(4, 12), "mlp_static_13.onnx", 13, False, dynamic=False,
           output_names=["y"])
    save_npy("mlp.fc1.weight.npy", mlp.fc1.weight)


# --- opset-18 forms, built by hand --------------------------------------------


def const(name, values, dtype=np.int64):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.array(values, dtype=dtype), name))


def opset18_model():
    f32 = TensorProto.FLOAT
    nodes = [
        const("axes23", [2, 3]), const("axes1", [1]), const("lo", -1.0, np.float32),
        const("hi", 2.0, np.float32), const("pads", [1, 0, 2, 1]), const("padval", 0.25, np.float32),
        const("ratio", 0.3, np.float32), const("s_starts", [-1]), const("s_ends", [-1000]),
        const("s_axes", [3]), const("s_steps", [-2]),
        helper.make_node("ReduceMean", ["x", "axes23"], ["mean"], name="/stats/ReduceMean", keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["centred"], name="/stats/Sub"),
        helper.make_node("ReduceSum", ["centred", "axes1"], ["sum"], name="/stats/ReduceSum", keepdims=0),
        helper.make_node("Unsqueeze", ["sum", "axes1"], ["sum1"], name="/stats/Unsqueeze"),
        helper.make_node("Squeeze", ["sum1", "axes1"], ["sum2"], name="/stats/Squeeze"),
        helper.make_node("Clip", ["sum2", "lo", "hi"], ["clipped"], name="/clip/Clip"),
        helper.make_node("Clip", ["clipped", "", "hi"], ["clipped2"], name="/clip/Clip_max"),
        helper.make_node("Pad", ["x", "pads", "padval", "axes23"], ["padded"], name="/pad/Pad",
                         mode="constant"),  # [N, 4, 9, 6]
        helper.make_node("Split", ["padded"], ["p0", "p1"], name="/split/Split", axis=2,
                         num_outputs=2),  # 9 -> 5, 4
        helper.make_node("Slice", ["p0", "s_starts", "s_ends", "s_axes", "s_steps"], ["rev"],
                         name="/slice/Slice"),  # [N, 4, 5, 3]
        helper.make_node("Dropout", ["rev", "ratio"], ["dropped"], name="/drop/Dropout"),
        helper.make_node("Identity", ["dropped"], ["same"], name="/ident/Identity"),
        helper.make_node("Shape", ["same"], ["batch"], name="/shape/Shape", start=0, end=1),
        helper.make_node("Constant", [], ["minus1"], name="/shape/Constant", value_ints=[-1]),
        helper.make_node("Concat", ["batch", "minus1"], ["newshape"], name="/shape/Concat", axis=0),
        helper.make_node("Reshape", ["same", "newshape"], ["flat"], name="/shape/Reshape"),  # [N, 60]
        helper.make_node("Softmax", ["clipped2"], ["probs"], name="/head/Softmax"),
        helper.make_node("Identity", ["emb"], ["emb_alias"], name="/emb/Identity"),
        helper.make_node("Gather", ["emb_alias", "ids"], ["looked"], name="/emb/Gather"),
        helper.make_node("Sum", ["looked", "looked", "looked"], ["tripled"], name="/emb/Sum"),
    ]
    emb = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "emb")
    graph = helper.make_graph(
        nodes, "opset18_forms",
        [helper.make_tensor_value_info("x", f32, ["N", 4, 6, 6]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 3])],
        [helper.make_tensor_value_info("probs", f32, None),
         helper.make_tensor_value_info("p1", f32, None),
         helper.make_tensor_value_info("flat", f32, None),
         helper.make_tensor_value_info("tripled", f32, None)],
        [emb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    save_model(model, "opset18_forms.onnx", check=False)  # ONNX 1.12 knows opsets <= 17


def folding_model():
    """Comparisons, Where, Mod, Not, And, Or on shapes (folded at import) and on data (runtime
    Less, Not and Where): PyTorch's expand(-1, ...) asks Equal(shape, -1) of a shape holding N.
    An integer constant read as data first (Equal on the cast input) still folds into a shape
    after (PyTorch 2's attention does that with its constant 1). PyTorch 2's dynamo exporter
    writes a convolution's absent bias as Expand(CastLike(0, x), Expand(Shape(w)[0:1], [1])):
    CastLike folds on constants and casts data, Expand folds on integers."""
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="/shape/Shape"),  # [N, 6]
        const("minus1", [-1, -1]), const("ones", [1, 1]), const("seven", [7, 6]),
        const("four", [4, 4]), const("zero", 0.0, np.float32),
        helper.make_node("Equal", ["shape", "minus1"], ["is_m1"], name="/shape/Equal"),
        helper.make_node("Where", ["is_m1", "ones", "shape"], ["target"], name="/shape/Where"),
        helper.make_node("Mod", ["seven", "four"], ["mod"], name="/shape/Mod"),  # [3, 2]
        helper.make_node("Less", ["mod", "four"], ["lt"], name="/shape/Less"),
        helper.make_node("Greater", ["mod", "four"], ["gt"], name="/shape/Greater"),
        helper.make_node("Not", ["gt"], ["not_gt"], name="/shape/Not"),
        helper.make_node("And", ["lt", "not_gt"], ["both"], name="/shape/And"),
        helper.make_node("Or", ["both", "gt"], ["either"], name="/shape/Or"),
        helper.make_node("Where", ["either", "mod", "four"], ["picked"], name="/shape/Where_1"),
        helper.make_node("Reshape", ["x", "target"], ["widened"], name="/data/Reshape"),
        helper.make_node("Less", ["widened", "zero"], ["negative"], name="/data/Less"),
        helper.make_node("Not", ["negative"], ["kept"], name="/data/Not"),
        helper.make_node("Where", ["kept", "widened", "zero"], ["relu"], name="/data/Where"),
        const("one", 1), const("axis0", [0]),
        helper.make_node("Cast", ["x"], ["xi"], to=i64, name="/data/Cast"),
        helper.make_node("Equal", ["xi", "one"], ["is_one"], name="/data/Equal"),
        helper.make_node("Unsqueeze", ["one", "axis0"], ["one1"], name="/shape/Unsqueeze"),
        helper.make_node("Concat", ["one1", "one1"], ["reread"], axis=0, name="/shape/Concat"),
        const("zero_i", 0),
        helper.make_node("Shape", ["x"], ["cols"], start=1, end=2, name="/dyn/Shape"),  # [6]
        helper.make_node("Expand", ["cols", "one1"], ["bias_shape"], name="/dyn/Expand_shape"),
        helper.make_node("CastLike", ["zero_i", "x"], ["zero_f"], name="/dyn/CastLike"),
        helper.make_node("Expand", ["zero_f", "bias_shape"], ["bias"], name="/dyn/Expand_bias"),
        helper.make_node("Add", ["x", "bias"], ["biased"], name="/dyn/Add"),
        helper.make_node("CastLike", ["biased", "xi"], ["biased_i"], name="/dyn/CastLike_data"),
    ]
    graph = helper.make_graph(
        nodes, "folding", [helper.make_tensor_value_info("x", f32, ["N", 6])],
        [helper.make_tensor_value_info("relu", f32, ["N", 6]), helper.make_tensor_value_info("picked", i64, [2]),
         helper.make_tensor_value_info("is_one", TensorProto.BOOL, ["N", 6]),
         helper.make_tensor_value_info("reread", i64, [2]),
         helper.make_tensor_value_info("biased_i", i64, ["N", 6])])
    save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "folding_17.onnx")


def epsilon_model():
    """A normalisation written as ops, as tf2onnx writes a Keras BatchNorm traced in training mode:
    its epsilon an initializer (kept constant), its scale one too (a parameter); then a scale the
    dynamo exporter named (`val_12`), a -inf fill and a one-element bias (the last a parameter)."""
    f32 = TensorProto.FLOAT
    one = lambda name, v: numpy_helper.from_array(np.array([v], np.float32), name)
    inits = [one("eps", 1e-3), numpy_helper.from_array(np.linspace(0.5, 1.5, 6).astype(np.float32), "scale"),
             one("val_12", 0.59), one("fill", -np.inf), one("head.bias", 0.1)]
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0], name="/bn/moments/mean"),
        helper.make_node("Sub", ["x", "mean"], ["d"], name="/bn/moments/sub"),
        helper.make_node("Mul", ["d", "d"], ["d2"], name="/bn/moments/square"),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[0], name="/bn/moments/variance"),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="/bn/batchnorm/add"),
        helper.make_node("Sqrt", ["ve"], ["sd"], name="/bn/batchnorm/Rsqrt"),
        helper.make_node("Div", ["d", "sd"], ["n"], name="/bn/batchnorm/div"),
        helper.make_node("Mul", ["n", "scale"], ["s"], name="/bn/batchnorm/mul"),
        helper.make_node("Mul", ["s", "val_12"], ["s2"], name="/attn/Mul"),
        helper.make_node("Add", ["s2", "fill"], ["f"], name="/attn/Add"),
        helper.make_node("Add", ["f", "head.bias"], ["y"], name="/head/Add"),
    ]
    graph = helper.make_graph(nodes, "epsilon", [helper.make_tensor_value_info("x", f32, ["N", 6])],
                              [helper.make_tensor_value_info("y", f32, ["N", 6])], inits)
    save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "epsilon_17.onnx")


# --- ops of modern models -------------------------------------------------------


class ModernOps(nn.Module):
    """LayerNorm over one axis and over two, GELU (erf and tanh forms, which PyTorch 1.13 writes
    in Div/Erf/Add/Mul and Mul/Add/Tanh), Hardswish after a convolution, Hardsigmoid."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)  # 9 -> 4
        self.fc = nn.Linear(4 * 4 * 4, 24)
        self.norm = nn.LayerNorm(24)
        self.norm2d = nn.LayerNorm((4, 6))
        self.head = nn.Linear(24, 5)

    def forward(self, x):
        y = F.hardswish(self.conv(x)).flatten(1)
        y = F.gelu(self.norm(self.fc(y)))
        y = self.norm2d(y.reshape(-1, 4, 6)).reshape(-1, 24)
        y = F.hardsigmoid(F.gelu(y, approximate="tanh"))
        return self.head(y)


def modern_models():
    torch.manual_seed(5)
    model, x = ModernOps(), torch.randn(2, 3, 9, 9)
    for training in [False, True]:
        export(model, x, "modern_%s_17.onnx" % ("train" if training else "eval"), 17, training,
               output_names=["y"])
    export(model, x, "modern_graph_only_17.onnx", 17, True, export_params=False, output_names=["y"])
    with torch.no_grad():
        model.eval()
        np.save(path("modern_x.npy"), x.numpy())
        np.save(path("modern_y.npy"), model(x).numpy())

    # Opset 20's Gelu, one op in both forms (PyTorch 1.13 cannot write it).
    f32 = TensorProto.FLOAT
    rs = np.random.RandomState(6)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
             helper.make_node("Gelu", ["h"], ["g"], name="/act/Gelu"),
             helper.make_node("Gelu", ["g"], ["y"], name="/act2/Gelu", approximate="tanh")]
    graph = helper.make_graph(nodes, "gelu20", [helper.make_tensor_value_info("x", f32, ["N", 6])],
                              [helper.make_tensor_value_info("y", f32, ["N", 5])],
                              [numpy_helper.from_array(rs.randn(6, 5).astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    save_model(model, "gelu_20.onnx", check=False)  # ONNX 1.12 knows opsets <= 17


# --- graph-only models --------------------------------------------------------


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return self.fc(y.view(y.size(0), -1))


def graph_only_models():
    torch.manual_seed(2)
    export(Small(), torch.randn(2, 3, 8, 8), "graph_only_13.onnx", 13, True, export_params=False,
           output_names=["y"])
    # Initializers that carry dims but no data (a weights-stripped file).
    def stripped(name, dims):
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(dims)
        return t

    w, b = stripped("fc.weight", [6, 10]), stripped("fc.bias", [6])
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1)],
        "stripped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save_model(model, "stripped_weights_13.onnx", check=False)  # the checker wants data

    # A batch axis with neither a value nor a name is dynamic too.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")], "unnamed_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save_model(model, "unnamed_batch_13.onnx")


# --- stochastic depth -----------------------------------------------------------


class StochasticDepthBlock(nn.Module):
    """A residual block whose branch is dropped per sample, written as torchvision and timm
    write it (their own bernoulli_ does not export with PyTorch 1.13)."""

    def __init__(self, form, keep=0.8):
        super().__init__()
        self.form, self.keep = form, keep
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x):  # [N, 3, 4, 4]
        h, k = self.conv(x), self.keep
        if self.form == "row":  # torchvision mode "row"
            noise = (torch.rand([h.shape[0], 1, 1, 1], dtype=h.dtype) < k).to(h.dtype) / k
        elif self.form == "batch":  # torchvision mode "batch"
            noise = (torch.rand([1, 1, 1, 1], dtype=h.dtype) < k).to(h.dtype) / k
        elif self.form == "like":
            noise = (torch.rand_like(h[:, :1, :1, :1]) < k).to(h.dtype) / k
        elif self.form == "floor":  # timm's drop_path before bernoulli_
            noise = torch.floor(k + torch.rand([h.shape[0], 1, 1, 1], dtype=h.dtype)) / k
        else:  # torch.bernoulli, which PyTorch 1.13 writes as rand_like(P) < P
            noise = torch.bernoulli(torch.full([h.shape[0], 1, 1, 1], k, dtype=h.dtype)) / k
        return x + h * noise


def stochastic_depth_models():
    x = torch.randn(2, 3, 4, 4)
    for form in ["row", "batch", "like", "floor", "bernoulli"]:
        export(StochasticDepthBlock(form), x, f"sd_{form}.onnx", 17, training=True)

    # PyTorch 2's dynamo exporter writes torch.bernoulli as ONNX Bernoulli (opset 15).
    f32 = TensorProto.FLOAT
    x4 = helper.make_tensor_value_info("x", f32, ["N", 3, 4, 4])
    y = helper.make_tensor_value_info("y", f32, None)
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    f = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    batch_shape = [helper.make_node("Shape", ["x"], ["shape"], name="/sd/Shape"),
                   helper.make_node("Gather", ["shape", "zero"], ["n"], name="/sd/Gather", axis=0),
                   helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="/sd/Unsqueeze"),
                   helper.make_node("Concat", ["n1", "ones3"], ["noise_shape"], name="/sd/Concat",
                                    axis=0)]
    shape_inits = [i64("zero", 0), i64("axes0", [0]), i64("ones3", [1, 1, 1])]
    save_model(tiny(batch_shape + [
        helper.make_node("Expand", ["keep", "noise_shape"], ["full"], name="/sd/Expand"),
        helper.make_node("Bernoulli", ["full"], ["b"], name="/sd/Bernoulli"),
        helper.make_node("Div", ["b", "keep"], ["noise"], name="/sd/Div"),
        helper.make_node("Mul", ["x", "noise"], ["y"], name="/sd/Mul")],
        [x4], [helper.make_tensor_value_info("y", f32, ["N", 3, 4, 4])],
        shape_inits + [f("keep", 0.9)], opset=15, name="bernoulli"),
        "sd_bernoulli_op.onnx")
    # ... and nn.Dropout in training mode as the same chain, drawn per element over x's shape.
    save_model(tiny([
        helper.make_node("Shape", ["x"], ["x_shape"], name="/drop/Shape"),
        helper.make_node("Expand", ["zero_f", "x_shape"], ["empty_like"], name="/drop/Expand"),
        helper.make_node("RandomUniformLike", ["empty_like"], ["rands"], name="/drop/RandomUniformLike"),
        helper.make_node("Less", ["rands", "keep"], ["sampled"], name="/drop/Less"),
        helper.make_node("Cast", ["sampled"], ["bernoulli"], name="/drop/Cast", to=f32),
        helper.make_node("Div", ["bernoulli", "keep"], ["noise"], name="/drop/Div"),
        helper.make_node("Mul", ["x", "noise"], ["y"], name="/drop/Mul")],
        [x4], [helper.make_tensor_value_info("y", f32, ["N", 3, 4, 4])],
        [f("zero_f", 0.0), f("keep", 0.8)], opset=18, name="dropout"), "sd_dropout_dynamo.onnx")
    # Two dropouts drawing over one Expand, as the dynamo exporter shares it; then that Expand
    # read by the model too.
    def shared_noise(extra_reader):
        nodes = [helper.make_node("Shape", ["x"], ["x_shape"], name="/drop/Shape"),
                 helper.make_node("Expand", ["zero_f", "x_shape"], ["empty_like"], name="/drop/Expand")]
        h = "x"
        for b in ("b1", "b2"):
            nodes += [
                helper.make_node("RandomUniformLike", ["empty_like"], [b + "_u"], name=f"/{b}/RandomUniformLike"),
                helper.make_node("Less", [b + "_u", "keep"], [b + "_lt"], name=f"/{b}/Less"),
                helper.make_node("Cast", [b + "_lt"], [b + "_c"], name=f"/{b}/Cast", to=f32),
                helper.make_node("Div", [b + "_c", "keep"], [b + "_noise"], name=f"/{b}/Div"),
                helper.make_node("Mul", [h, b + "_noise"], [b + "_y"], name=f"/{b}/Mul")]
            h = b + "_y"
        nodes.append(helper.make_node("Add", [h, "empty_like"], ["y"], name="/out/Add") if extra_reader
                     else helper.make_node("Identity", [h], ["y"], name="/out/Identity"))
        return tiny(nodes, [x4], [helper.make_tensor_value_info("y", f32, ["N", 3, 4, 4])],
                    [f("zero_f", 0.0), f("keep", 0.8)], opset=18, name="shared_noise")
    save_model(shared_noise(False), "sd_shared_noise.onnx")
    save_model(shared_noise(True), "sd_shared_noise_read.onnx")

    # Random ops the importer refuses, each in one line naming the node.
    def uniform_then(nodes, inits=(), name="sd_bad"):
        return tiny(batch_shape + [
            helper.make_node("ConstantOfShape", ["noise_shape"], ["zeros"],
                             name="/sd/ConstantOfShape"),
            helper.make_node("RandomUniformLike", ["zeros"], ["u"], name="/sd/RandomUniformLike")]
            + nodes, [x4], [y], shape_inits + [f("keep", 0.9)] + list(inits), name=name)

    save_bad(tiny([helper.make_node("RandomNormalLike", ["x"], ["r"], name="/noise/RandomNormalLike"),
                   helper.make_node("Add", ["x", "r"], ["y"], name="/noise/Add")], [x4], [y]),
             "sd_normal.onnx")
    save_bad(uniform_then([  # the draw is read twice
        helper.make_node("Less", ["u", "keep"], ["lt"], name="/sd/Less"),
        helper.make_node("Cast", ["lt"], ["c"], name="/sd/Cast", to=f32),
        helper.make_node("Div", ["c", "keep"], ["noise"], name="/sd/Div"),
        helper.make_node("Mul", ["x", "noise"], ["m"], name="/sd/Mul"),
        helper.make_node("Add", ["m", "u"], ["y"], name="/sd/Add")]), "sd_read_twice.onnx")
    save_bad(uniform_then([  # not scaled by 1 / keep
        helper.make_node("Less", ["u", "keep"], ["lt"], name="/sd/Less"),
        helper.make_node("Cast", ["lt"], ["c"], name="/sd/Cast", to=f32),
        helper.make_node("Mul", ["x", "c"], ["y"], name="/sd/Mul")]), "sd_unscaled.onnx")
    save_bad(uniform_then([  # divided by another number than keep
        helper.make_node("Less", ["u", "keep"], ["lt"], name="/sd/Less"),
        helper.make_node("Cast", ["lt"], ["c"], name="/sd/Cast", to=f32),
        helper.make_node("Div", ["c", "half"], ["noise"], name="/sd/Div"),
        helper.make_node("Mul", ["x", "noise"], ["y"], name="/sd/Mul")], [f("half", 0.5)]),
        "sd_wrong_divisor.onnx")
    channel = tiny([
        helper.make_node("RandomUniform", [], ["u"], name="/sd/RandomUniform", shape=[2, 3, 1, 1]),
        helper.make_node("Less", ["u", "keep"], ["lt"], name="/sd/Less"),
        helper.make_node("Cast", ["lt"], ["c"], name="/sd/Cast", to=f32),
        helper.make_node("Div", ["c", "keep"], ["noise"], name="/sd/Div"),
        helper.make_node("Mul", ["x", "noise"], ["y"], name="/sd/Mul")],
        [helper.make_tensor_value_info("x", f32, [2, 3, 4, 4])], [y], [f("keep", 0.9)])
    save_bad(channel, "sd_per_channel.onnx")
    save_bad(tiny([helper.make_node("RandomNormalLike", ["x"], ["r"], name="/noise/RandomNormalLike"),
                   helper.make_node("Add", ["x", "r"], ["a"], name="/noise/Add"),
                   helper.make_node("TopK", ["a", "k"], ["y", "ti"], name="/a/TopK")],
                  [x4], [y], [i64("k", [2])]), "sd_normal_and_topk.onnx")


# --- malformed files ------------------------------------------------------------


def save_bad(model, name):
    save_model(model, name, check=False)  # malformed on purpose


def tiny(nodes, inputs, outputs, initializers=(), opset=17, name="bad"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def malformed_models():
    f32 = TensorProto.FLOAT
    x4 = helper.make_tensor_value_info("x", f32, ["N", 4])
    y = helper.make_tensor_value_info("y", f32, None)
    init = lambda name, shape: numpy_helper.from_array(np.ones(shape, np.float32), name)

    open(path("empty.onnx"), "wb").close()
    with open(path("text.onnx"), "w") as f:
        f.write("this is not a model\n")
    with open(path("random.onnx"), "wb") as f:
        f.write(np.random.default_rng(3).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    whole = open(os.path.join(OUT, "mlp_13.onnx"), "rb").read()
    with open(path("truncated.onnx"), "wb") as f:
        f.write(whole[: len(whole) * 2 // 3])

    save_bad(tiny([helper.make_node("TopK", ["x", "k"], ["y", "idx"], name="/block/TopK")],
                    [x4], [y], [numpy_helper.from_array(np.array([2], np.int64), "k")]),
               "unsupported_op.onnx")
    save_bad(tiny([helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
                     helper.make_node("MatMul", ["h", "w2"], ["y"], name="/fc2/MatMul")],
                    [x4], [y], [init("w1", (4, 8)), init("w2", (6, 3))]),
               "shape_mismatch.onnx")
    save_bad(tiny([helper.make_node("Add", ["x", "ghost"], ["y"], name="/head/Add")], [x4], [y]),
               "missing_input.onnx")
    save_bad(tiny([helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")],
                    [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 4])], [y]),
               "bad_dtype.onnx")
    save_bad(tiny([helper.make_node("Cast", ["x"], ["y"], name="/to/Cast", to=TensorProto.DOUBLE)],
                    [x4], [y]), "bad_cast.onnx")
    save_bad(tiny([helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")],
                    [helper.make_tensor_value_info("x", f32, ["N", "C"])], [y]), "dynamic_dim.onnx")
    save_bad(tiny([helper.make_node("Add", ["x", "b"], ["a"], name="/loop/A"),
                     helper.make_node("Relu", ["a"], ["b"], name="/loop/B"),
                     helper.make_node("Identity", ["a"], ["y"], name="/out")], [x4], [y]),
               "cycle.onnx")
    model = tiny([helper.make_node("FusedGemm", ["x", "x"], ["y"], name="/ms/FusedGemm",
                                   domain="com.microsoft")], [x4], [y])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    save_bad(model, "custom_domain.onnx")
    save_bad(tiny([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                      ["bn", "rm", "rv"], name="/bn/BatchNormalization",
                                      training_mode=1),
                     helper.make_node("Add", ["bn", "rm"], ["y"], name="/use/Add")],
                    [helper.make_tensor_value_info("x", f32, ["N", 4, 3, 3])], [y],
                    [init(n, (4,)) for n in "sbmv"]), "dropped_output_used.onnx")
    save_bad(tiny([helper.make_node("LayerNormalization", ["x", "s"], ["ln", "mean"],
                                      name="/ln/LayerNormalization"),
                     helper.make_node("Add", ["ln", "mean"], ["y"], name="/use/Add")],
                    [x4], [y], [init("s", (4,))]), "layernorm_stats_used.onnx")
    save_bad(tiny([helper.make_node("LayerNormalization", ["x", "s"], ["y"],
                                      name="/ln/LayerNormalization")],
                    [x4], [y], [init("s", (4,))], opset=16), "layernorm_opset16.onnx")
    # Every op graphc cannot import, in one message.
    model = tiny([helper.make_node("TopK", ["x", "k"], ["t", "ti"], name="/a/TopK"),
                  helper.make_node("NonZero", ["t"], ["nz"], name="/b/NonZero"),
                  helper.make_node("TopK", ["x", "k"], ["t2", "ti2"], name="/c/TopK"),
                  helper.make_node("FusedGemm", ["x", "x"], ["f"], name="/ms/FusedGemm",
                                   domain="com.microsoft"),
                  helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")],
                 [x4], [y], [numpy_helper.from_array(np.array([2], np.int64), "k")])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    save_bad(model, "several_unsupported.onnx")
    save_bad(tiny([helper.make_node("Reshape", ["x", "shape"], ["y"], name="/r/Reshape")],
                    [x4, helper.make_tensor_value_info("shape", TensorProto.INT64, [2])], [y]),
               "runtime_shape.onnx")
    save_bad(tiny([helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")], [x4], [y],
                    opset=5), "old_opset.onnx")
    no_graph = onnx.ModelProto()
    no_graph.ir_version = 8
    with open(path("no_graph.onnx"), "wb") as f:
        f.write(no_graph.SerializeToString())


def main():
    os.makedirs(OUT, exist_ok=True)
    stamp = os.path.join(OUT, "models.stamp")
    digest = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
    if os.path.exists(stamp):
        lines = open(stamp).read().split("\n")
        if lines[0] == digest and all(os.path.exists(os.path.join(OUT, n)) for n in lines[1:] if n):
            print("models are up to date in", OUT)
            return
    warnings.filterwarnings("ignore")
    small_models()
    opset18_model()
    folding_model()
    epsilon_model()
    modern_models()
    graph_only_models()
    malformed_models()
    stochastic_depth_models()
    torchvision_models()
    with open(stamp, "w") as f:
        f.write("\n".join([digest] + written) + "\n")
    print(f"wrote {len(written)} files to {OUT}")


if __name__ == "__main__":
    main()
