#!/usr/bin/python3
"""A model exported for inference trains as exported, and the run plan says so (issue 32, point 4).

Debian's PyTorch 1.13 exports one small model (Conv + BatchNorm2d, Linear + BatchNorm1d, Dropout)
three ways:

- `eval()`, the exporter's default: it folds the BatchNorm2d into the convolution (a weight named
  `onnx::Conv_<n>`), writes the BatchNorm1d in inference form and drops the dropout. The run plan
  names both BatchNorms' fates and the missing dropout, and points to the README's recipe;
- in training mode (`TrainingMode.TRAINING`, nothing folded): no note;
- as PyTorch 2's dynamo exporter writes a model in either mode: the folded convolution keeps the
  module's weight names (no `onnx::` name shows the fold) and its node's metadata names onnxscript's
  FuseBatchNormIntoConv rewrite. Debian's ONNX 1.12 predates node metadata, so the test writes those
  bytes into the eval export's Conv node itself. The note names the weight, also from a placed plan;
- as tf2onnx converts a Keras model (built here with onnx.helper, under the names TensorFlow gives):
  BatchNormalizations frozen into constants, one folded into a convolution (`<layer>/batchnorm/mul_1`)
  and one left as Mul and Add, are named; one traced in training mode (its `<layer>/moments/` batch
  statistics, with Sqrt and Reciprocal) is not, and `graphrun infer` of it matches numpy;
- and the training-mode model trained one step and written by `graphrun export` (inference form by
  default): its BatchNorms come back frozen, and the note says so; `--training-graph` brings it back
  without a note. `--bn frozen` asks for frozen BatchNorms, so the note leaves them out.

Frozen means frozen: after a step of the eval export, its BatchNorm1d's running statistics are the
exported ones, bit for bit.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, CliCase, run  # noqa: E402

EXPORT = r'''
import sys, torch, torch.nn as nn
out = sys.argv[1]
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                  nn.Linear(4 * 14 * 14, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2),
                  nn.Linear(32, 10))
with torch.no_grad():  # statistics an update would visibly move
    m[5].running_mean.uniform_(-1, 1)
    m[5].running_var.uniform_(0.5, 2)
x = torch.randn(2, 1, 28, 28)
kw = dict(input_names=["x"], output_names=["logits"], opset_version=17,
          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
m.eval()
torch.onnx.export(m, x, out + "/eval.onnx", **kw)
m.train()
torch.onnx.export(m, x, out + "/train.onnx", training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, **kw)
'''

# The running statistics of the exported model's BatchNorm1d (the only BatchNormalization left in
# an eval export), by position: ONNX's inputs 3 and 4.
RUNNING = r'''
import sys, numpy as np, onnx, onnx.numpy_helper as nh
m = onnx.load(sys.argv[1])
init = {t.name: nh.to_array(t) for t in m.graph.initializer}
bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
np.savez(sys.argv[2], mean=init[bn[-1].input[3]], var=init[bn[-1].input[4]])
'''

# The eval export rewritten as the dynamo exporter writes a folded convolution: the weights under
# the module's names, and NodeProto.metadata_props (field 9, ONNX 1.16) naming the rewrite.
DYNAMO = r'''
import sys, onnx
m = onnx.load(sys.argv[1])
conv = next(n for n in m.graph.node if n.op_type == "Conv")
rename = {conv.input[1]: "0.weight", conv.input[2]: "0.bias"}
for t in m.graph.initializer:
    t.name = rename.get(t.name, t.name)
conv.input[1], conv.input[2] = "0.weight", "0.bias"
key, value = b"pkg.onnxscript.rewriter.rule_name", b"RemoveOptionalBiasFromConv, FuseBatchNormIntoConv"
entry = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(value)]) + value
conv.ParseFromString(conv.SerializeToString() + b"\x4a" + bytes([len(entry)]) + entry)
onnx.save(m, sys.argv[2])
'''

# A Keras model as tf2onnx converts it (NHWC input, TensorFlow's names): bn_1 folded into conv_1,
# bn_2 a frozen Mul and Add, bn_3 traced with training=True (batch statistics as ops).
KERAS = r'''
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh
rs = np.random.RandomState(0)
def const(name, a):
    return nh.from_array(np.asarray(a, np.float32), name)
inits = [const("m/conv_1/convolution/merged_input:0", rs.randn(4, 3, 3, 3) * 0.3),
         const("m/bn_2/batchnorm/mul:0", rs.rand(1, 4, 1, 1) + 0.5),
         const("m/bn_2/batchnorm/sub:0", rs.randn(1, 4, 1, 1)),
         const("m/bn_3/eps:0", 1e-3), const("m/dense/kernel:0", rs.randn(4 * 8 * 8, 10) * 0.1),
         nh.from_array(np.array([0, 2, 3], np.int64), "axes"), nh.from_array(np.array([-1, 256], np.int64), "flat")]
nodes = [h.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2], name="m/conv_1/transpose"),
         h.make_node("Conv", ["t", inits[0].name], ["c"], pads=[1, 1, 1, 1], name="m/bn_1/batchnorm/mul_1"),
         h.make_node("Mul", ["c", inits[1].name], ["s"], name="m/bn_2/batchnorm/mul_1"),
         h.make_node("Add", ["s", inits[2].name], ["b"], name="m/bn_2/batchnorm/add_1"),
         h.make_node("ReduceMean", ["b", "axes"], ["mean"], name="m/bn_3/moments/mean"),
         h.make_node("Sub", ["b", "mean"], ["d"], name="m/bn_3/moments/sub"),
         h.make_node("Mul", ["d", "d"], ["d2"], name="m/bn_3/moments/square"),
         h.make_node("ReduceMean", ["d2", "axes"], ["var"], name="m/bn_3/moments/variance"),
         h.make_node("Add", ["var", inits[3].name], ["ve"], name="m/bn_3/batchnorm/add"),
         h.make_node("Sqrt", ["ve"], ["sd"], name="m/bn_3/batchnorm/Sqrt"),
         h.make_node("Reciprocal", ["sd"], ["inv"], name="m/bn_3/batchnorm/Rsqrt"),
         h.make_node("Mul", ["d", "inv"], ["n"], name="m/bn_3/batchnorm/mul_1"),
         h.make_node("Relu", ["n"], ["r"], name="m/relu"),
         h.make_node("Reshape", ["r", "flat"], ["f"], name="m/flatten"),
         h.make_node("MatMul", ["f", inits[4].name], ["logits"], name="m/dense/MatMul")]
g = h.make_graph(nodes, "keras", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 8, 8, 3])],
                 [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", 10])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="tf2onnx")
onnx.save(m, sys.argv[1])
x = rs.randn(4, 8, 8, 3).astype(np.float32)
np.save(sys.argv[2], x)
# What the graph computes, in numpy.
w = nh.to_array(inits[0])
t = np.pad(x.transpose(0, 3, 1, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))
c = np.zeros((4, 4, 8, 8), np.float64)
for i in range(3):
    for j in range(3):
        c += np.einsum("nchw,oc->nohw", t[:, :, i:i + 8, j:j + 8], w[:, :, i, j])
b = c * nh.to_array(inits[1]) + nh.to_array(inits[2])
d = b - b.mean(axis=(0, 2, 3), keepdims=True)
n = d / np.sqrt((d * d).mean(axis=(0, 2, 3), keepdims=True) + 1e-3)
np.save(sys.argv[3], np.maximum(n, 0).reshape(4, -1) @ nh.to_array(inits[4]))
'''

TRAIN = ["--data", "synthetic", "--steps", "1", "--batch", "8", "--no-eval", "--no-progress",
         "--threads", "1", "--seed", "2"]


class InferenceExportTest(CliCase):
    @classmethod
    def setUpClass(cls):
        cls.models = tempfile.mkdtemp(prefix="graphc-inference-export-")
        subprocess.run(["/usr/bin/python3", "-c", EXPORT, cls.models], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.models, ignore_errors=True)

    def model(self, name):
        return os.path.join(self.models, name)

    def running(self, onnx_file):
        npz = self.path(os.path.basename(onnx_file) + ".npz")
        subprocess.run(["/usr/bin/python3", "-c", RUNNING, onnx_file, npz], check=True, capture_output=True)
        return dict(np.load(npz))

    def note(self, stdout):
        lines = [l for l in stdout.splitlines() if "is an inference export" in l]
        self.assertLessEqual(len(lines), 1, stdout)
        return lines[0] if lines else None

    def test_an_eval_export_is_named_with_what_it_lost(self):
        model = self.model("eval.onnx")
        ckpt = self.path("eval-ckpt")
        p = run(GRAPHRUN, "train", model, *TRAIN, "--checkpoint", ckpt)
        note = self.note(p.stdout)
        self.assertIsNotNone(note, p.stdout)
        self.assertRegex(note, r"note: '%s' is an inference export: its BatchNorm '[^']+' is in inference form: it "
                               r"trains frozen, normalising with the running statistics as exported; the convolution "
                               r"weight 'onnx::Conv_\d+' came from the exporter, which folded a BatchNorm into it"
                               % re.escape(model))
        self.assertIn("its dropout, if it had any, is gone too", note)
        self.assertIn('README, "Exporting a model to train"', note)
        # Frozen: the step kept the exported running statistics.
        trained = self.path("eval-trained.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", trained)
        before, after = self.running(model), self.running(trained)
        for k in ("mean", "var"):
            np.testing.assert_array_equal(before[k], after[k])

    def test_a_fold_the_dynamo_exporter_records_is_named(self):
        model = self.path("dynamo.onnx")
        subprocess.run(["/usr/bin/python3", "-c", DYNAMO, self.model("eval.onnx"), model], check=True,
                       capture_output=True)
        placed = self.path("dynamo.placed")
        run(GRAPHC, "place", model, "--gpus", "2", "--batch", "8", "-o", placed)
        for source in (model, placed):
            args = ["--emulate"] if source == placed else []
            note = self.note(run(GRAPHRUN, "train", source, *TRAIN, *args).stdout)
            self.assertIsNotNone(note, source)
            self.assertIn("the convolution weight '0.weight' came from the exporter, which folded a BatchNorm "
                          "into it", note)

    def test_keras_batchnorms_tf2onnx_froze_are_named_and_one_traced_for_training_is_not(self):
        model, x, expected = self.path("keras.onnx"), self.path("x.npy"), self.path("expected.npy")
        subprocess.run(["/usr/bin/python3", "-c", KERAS, model, x, expected], check=True, capture_output=True)
        note = self.note(run(GRAPHRUN, "train", model, *TRAIN).stdout)
        self.assertIsNotNone(note)
        self.assertIn("2 Keras BatchNormalizations (the first 'm/bn_1') were frozen into constants by the "
                      "converter: they train as fixed scales and shifts", note)
        ours = self.path("ours.npy")
        run(GRAPHRUN, "infer", model, "--input", x, "-o", ours)
        want = np.load(expected)
        self.assertLess(np.abs(np.load(ours) - want).max(), 1e-5 * np.abs(want).max())

    def test_a_training_export_has_no_note(self):
        p = run(GRAPHRUN, "train", self.model("train.onnx"), *TRAIN)
        self.assertIsNone(self.note(p.stdout), p.stdout)

    def test_our_inference_export_comes_back_frozen_and_the_training_graph_does_not(self):
        ckpt = self.path("ckpt")
        run(GRAPHRUN, "train", self.model("train.onnx"), *TRAIN, "--checkpoint", ckpt)
        deploy, again = self.path("deploy.onnx"), self.path("again.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", deploy)
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", again, "--training-graph")
        note = self.note(run(GRAPHRUN, "train", deploy, *TRAIN).stdout)
        self.assertIsNotNone(note)
        self.assertIn("2 BatchNorms are in inference form", note)
        self.assertNotIn("convolutions", note)
        self.assertIn("its dropout, if it had any, is gone too", note)
        self.assertIsNone(self.note(run(GRAPHRUN, "train", again, *TRAIN).stdout))

    def test_bn_frozen_leaves_the_batchnorms_out_of_the_note(self):
        note = self.note(run(GRAPHRUN, "train", self.model("eval.onnx"), *TRAIN, "--bn", "frozen").stdout)
        self.assertIsNotNone(note)
        self.assertNotIn("BatchNorms are in inference form", note)
        self.assertIn("which folded a BatchNorm into it", note)


if __name__ == "__main__":
    unittest.main(verbosity=2)
