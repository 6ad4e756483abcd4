#!/usr/bin/python3
"""Sequence models from PyTorch: attention with a padding mask, LSTM, GRU, embeddings.

Debian's PyTorch 1.13 exports, at opset 17 in training mode with a dynamic batch, four models
that read Fashion-MNIST rows as 28 tokens of 28 features (the input [N, 1, 28, 28] reshaped in
the model, so the IDX data set trains them):

- `attention`: Linear, a 2-layer nn.TransformerEncoder (4 heads) with a padding mask computed
  from the data (Less on a pixel: a runtime Where(mask, -inf, 0) added to the attention
  scores), mean over tokens, Linear. PyTorch's multi-head attention also computes reshape
  targets with Equal and Where on shapes, which graphc folds at import.
- `lstm`: a one-layer LSTM, its last step's output into a Linear.
- `gru`: a bidirectional GRU (linear_before_reset = 1, as PyTorch writes it), likewise.
- `embedding`: nn.Embedding fed by an int64 graph input [N, 7] (token ids), an LSTM, its final
  hidden and cell states into a Linear.

graphc imports LSTM and GRU unrolled into MatMul, Add, Sigmoid, Tanh, Mul, Split and Concat
(frontend/onnx/OnnxOpImportRecurrent.cpp). Checked for each of the first three:

- `graphrun infer` against ONNX Runtime and against PyTorch's forward pass;
- one SGD step of `graphrun train` on 16 Fashion-MNIST-format images against PyTorch's step:
  the loss, and every weight after the step (our `graphrun export` against PyTorch's export
  of its model after its step, initializer by initializer: the same names, PyTorch's own
  parameters); the exported model under ONNX Runtime against `graphrun infer` on the
  checkpoint;
- three steps on two emulated GPUs against three on one device (PyTorch's attention runs
  sequence first and flattens [L, N, E] to [L * N, E] and back, samples interleaved with
  positions, which the towers' batch split follows: passes/Rebatch.h's BatchAxis::inner).

The embedding model: `graphrun infer` with an int64 .npy input against ONNX Runtime and
PyTorch. ONNX's forms PyTorch does not write (a reverse GRU with linear_before_reset = 0 and a
given initial state; a bidirectional LSTM with both initial states and every output read):
`graphrun infer` against ONNX Runtime. And the refusals, one clear message each: a sequence
length unknown at import, LSTM's clip, a non-default activation, Mod on run-time data.

Tolerances follow tests/tools/sumbound.py: 2(K+4)u of the tensor's largest value, K the longest
sum (`graphc inspect --json`); updated weights also within 1e-5 of their own magnitude. Every
figure is printed.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sumbound  # noqa: E402
from cli_test import GRAPHC, GRAPHRUN, run  # noqa: E402
from modern_ops_test import BATCH, FASHION_BATCH, LR, PyTorchModelCase  # noqa: E402

ROW_MODELS = ("attention", "lstm", "gru")

TORCH_SIDE = r'''
import sys, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
out, batch, lr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(1)

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(28, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(32, 10)
        # The first token is never masked, so no row of the scores is all -inf.
        self.register_buffer("keep_first", torch.tensor([10.0] + [0.0] * 27))
    def forward(self, x):
        rows = x.reshape(x.shape[0], 28, 28)
        mask = rows[:, :, 0] + self.keep_first < -0.5
        h = self.encoder(self.embed(rows), src_key_padding_mask=mask)
        return self.head(h.mean(1))

class Rows(nn.Module):
    def __init__(self, cell, bidirectional):
        super().__init__()
        self.rnn = cell(28, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 10)
    def forward(self, x):
        y, _ = self.rnn(x.reshape(x.shape[0], 28, 28))
        return self.head(y[:, -1])

class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 12)
        self.rnn = nn.LSTM(12, 16, batch_first=True)
        self.head = nn.Linear(16, 5)
    def forward(self, tokens):
        _, (h, c) = self.rnn(self.embed(tokens))
        return self.head(h[-1] + c[-1])

def export(model, args, path, names, dynamic):
    torch.onnx.export(model, args, path, opset_version=17, input_names=names, output_names=["y"],
                      dynamic_axes=dynamic, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)

xi = np.random.RandomState(1).randn(5, 1, 28, 28).astype(np.float32)
np.save(out + "/x_infer.npy", xi)
''' + FASHION_BATCH + r'''
dyn = {"x": {0: "N"}, "y": {0: "N"}}
makers = {"attention": Attention, "lstm": lambda: Rows(nn.LSTM, False),
          "gru": lambda: Rows(nn.GRU, True)}
for name, make in makers.items():
    torch.manual_seed(0)
    model = make()
    export(model, torch.zeros(2, 1, 28, 28), "%s/%s.onnx" % (out, name), ["x"], dyn)
    with torch.no_grad():
        np.save("%s/%s_torch_infer.npy" % (out, name), model(torch.from_numpy(xi)).numpy())
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    export(model, torch.zeros(2, 1, 28, 28), "%s/%s_after.onnx" % (out, name), ["x"], dyn)
    with open("%s/%s_loss.txt" % (out, name), "w") as f:
        f.write(repr(loss.item()))

torch.manual_seed(0)
tokens_model = Tokens()
rs = np.random.RandomState(4)
tokens = rs.randint(0, 50, (5, 7)).astype(np.int64)
np.save(out + "/tokens.npy", tokens)
export(tokens_model, torch.zeros(2, 7, dtype=torch.long), out + "/embedding.onnx", ["tokens"],
       {"tokens": {0: "N"}, "y": {0: "N"}})
with torch.no_grad():
    want = tokens_model(torch.from_numpy(tokens))
np.save(out + "/embedding_torch_infer.npy", want.numpy())
'''

# Models written with Debian's python3-onnx: the ones graphc refuses, and ONNX's recurrent forms
# PyTorch does not write.
HAND_BUILT = r'''
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rs = np.random.RandomState(5)
def lstm(name, seq, **attrs):  # x [seq, 2, 3]; a symbolic seq is the batch's place
    w = numpy_helper.from_array(rs.randn(1, 16, 3).astype(np.float32), "W")
    r = numpy_helper.from_array(rs.randn(1, 16, 4).astype(np.float32), "R")
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y", "y_h"], name="rnn/LSTM", hidden_size=4,
                            **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 2, 3])],
                          [helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [1, 2, 4])], [w, r])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "%s/%s.onnx" % (out, name))
lstm("lstm_unknown_length", "L")
lstm("lstm_clip", 5, clip=3.0)
lstm("lstm_relu", 5, activations=["Relu", "Tanh", "Tanh"])
node = helper.make_node("Mod", ["x", "d"], ["y"], name="m/Mod", fmod=1)
g = helper.make_graph([node], "mod", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                      [numpy_helper.from_array(np.full(3, 2, np.float32), "d")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out + "/mod_runtime.onnx")

# ONNX's forms PyTorch does not write, at a fixed batch of 3: a reverse GRU with
# linear_before_reset = 0, no bias and a given initial state; a bidirectional LSTM with bias and
# both initial states, every output read (Y, Y_h, Y_c summed into one).
def cell(name, op, dirs, gates, inputs, outputs, extra_nodes, **attrs):
    h, i, seq, n = 4, 3, 5, 3
    inits = [numpy_helper.from_array((rs.randn(dirs, gates * h, i) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array((rs.randn(dirs, gates * h, h) * 0.5).astype(np.float32), "R")]
    if "B" in inputs:
        inits.append(numpy_helper.from_array((rs.randn(dirs, 2 * gates * h) * 0.5).astype(np.float32), "B"))
    states = [s for s in ("initial_h", "initial_c") if s in inputs]
    node = helper.make_node(op, inputs, outputs, name="rnn/" + op, hidden_size=h, **attrs)
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, n, i])]
    np.save("%s/%s_x.npy" % (out, name), rs.randn(seq, n, i).astype(np.float32))
    for st in states:
        graph_inputs.append(helper.make_tensor_value_info(st, TensorProto.FLOAT, [dirs, n, h]))
        np.save("%s/%s_%s.npy" % (out, name, st), rs.randn(dirs, n, h).astype(np.float32))
    g = helper.make_graph([node] + extra_nodes, name, graph_inputs,
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "%s/%s.onnx" % (out, name))
cell("gru_reverse", "GRU", 1, 3, ["x", "W", "R", "", "", "initial_h"], ["y"],
     [helper.make_node("Identity", ["y"], ["out"], name="out/Identity")],
     direction="reverse", linear_before_reset=0)
cell("lstm_states", "LSTM", 2, 4, ["x", "W", "R", "B", "", "initial_h", "initial_c"], ["y", "y_h", "y_c"],
     [helper.make_node("ReduceMean", ["y"], ["y_sum"], name="out/ReduceMean", axes=[0], keepdims=0),
      helper.make_node("Add", ["y_sum", "y_h"], ["s1"], name="out/Add"),
      helper.make_node("Add", ["s1", "y_c"], ["out"], name="out/Add_1")],
     direction="bidirectional")

# PyTorch 2's dynamo exporter gives a GRU without a state (batch first, batch 3) the zeros of
# [1, N, H] as a scalar 0 (an initializer) expanded to a shape holding the batch and sliced: known
# zeros, an absent state.
i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="rnn/Transpose", perm=[1, 0, 2]),
         helper.make_node("Shape", ["x"], ["n"], name="h0/Shape", start=0, end=1),
         helper.make_node("Concat", ["one", "n", "hidden"], ["h0_shape"], name="h0/Concat", axis=0),
         helper.make_node("Expand", ["val_2", "h0_shape"], ["zeros"], name="h0/Expand"),
         helper.make_node("Slice", ["zeros", "zero", "one", "zero"], ["h0"], name="h0/Slice"),
         helper.make_node("GRU", ["xt", "W", "R", "", "", "h0"], ["", "y_h"], name="rnn/GRU", hidden_size=4,
                          linear_before_reset=1),
         helper.make_node("Squeeze", ["y_h", "zero"], ["out"], name="out/Squeeze")]  # [N, 4] logits
inits = [numpy_helper.from_array((rs.randn(1, 12, 3) * 0.5).astype(np.float32), "W"),
         numpy_helper.from_array((rs.randn(1, 12, 4) * 0.5).astype(np.float32), "R"),
         numpy_helper.from_array(np.array(0.0, np.float32), "val_2"),
         i64("one", [1]), i64("zero", [0]), i64("hidden", [4])]
g = helper.make_graph(nodes, "gru_dynamo_state", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 3])],
                      [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), out + "/gru_dynamo_state.onnx")
np.save(out + "/gru_dynamo_state_x.npy", rs.randn(3, 5, 3).astype(np.float32))
'''

U = sumbound.F32


def relative(got, want):
    return sumbound.relative_error(got, want)


class SequenceModelsTest(PyTorchModelCase):
    SCRIPTS = (TORCH_SIDE, HAND_BUILT)
    WORK = "graphc-sequence-models"

    def initializers(self, model):
        return self.facts(model)[1]

    def test_infer_matches_onnxruntime_and_pytorch(self):
        x = self.w("x_infer.npy")
        for name in ROW_MODELS:
            model = self.w(name + ".onnx")
            ours, bound = self.infer(model, x), self.forward_bound(model, 5)
            for what, want in (("onnxruntime", self.ort(model, x)),
                               ("PyTorch", np.load(self.w(name + "_torch_infer.npy")))):
                err = relative(ours, want)
                sumbound.report("%s: graphrun infer against %s" % (name, what), err, bound)
                self.assertLessEqual(err, bound, (name, what))

    def test_embedding_with_int64_tokens_infers_as_onnxruntime(self):
        model = self.w("embedding.onnx")
        tokens = self.w("tokens.npy")
        self.assertEqual(np.load(tokens).dtype, np.int64)
        ours, bound = self.infer(model, tokens), self.forward_bound(model, 5)
        for what, want in (("onnxruntime", self.ort(model, tokens)),
                           ("PyTorch", np.load(self.w("embedding_torch_infer.npy")))):
            err = relative(ours, want)
            sumbound.report("embedding + LSTM on int64 tokens: graphrun infer against " + what, err, bound)
            self.assertLessEqual(err, bound, what)

    def test_embedding_training_graph_splits_into_towers(self):
        # The tokens split like any input; the table's gradient (GatherGrad) keeps the table's
        # shape in every tower. (Training it needs a data source of int64 tokens.)
        placed = self.path("embedding.gmod")
        p = run(GRAPHC, "place", self.w("embedding.onnx"), "--batch", BATCH, "--gpus", "2", "-o", placed)
        self.assertIn("2 towers, global batch 16", p.stdout + p.stderr)

    def test_one_sgd_step_matches_pytorch(self):
        data = self.fashion_data()
        for name in ROW_MODELS:
            with self.subTest(name):
                model = self.w(name + ".onnx")
                ckpt, metrics = self.path(name + "-ckpt"), self.path(name + "-m.jsonl")
                run(GRAPHRUN, "train", model, "--data", "fashion-mnist:" + data, "--batch", BATCH,
                    "--steps", "1", "--optimizer", "sgd", "--lr", LR, "--no-eval", "--no-progress",
                    "--threads", "2", "--seed", "1", "--checkpoint", ckpt, "--metrics", metrics)
                with open(metrics) as f:
                    loss = json.loads(f.readline())["loss"]
                with open(self.w(name + "_loss.txt")) as f:
                    want_loss = float(f.read())
                step = self.forward_bound(model, BATCH)
                loss_err = abs(loss - want_loss) / abs(want_loss)
                sumbound.report("%s: loss of the step against PyTorch" % name, loss_err, step)
                self.assertLessEqual(loss_err, step)

                exported = self.path(name + "-after.onnx")
                run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
                ours = self.initializers(exported)
                theirs = self.initializers(self.w(name + "_after.onnx"))
                before = self.initializers(model)
                trained = [n for n in theirs if theirs[n].dtype == np.float32 and
                           not np.array_equal(theirs[n], before[n])]
                self.assertTrue(trained)
                missing = [n for n in trained if n not in ours]
                self.assertEqual(missing, [], "weights PyTorch trained that our export lacks")
                worst_w = worst_update = 0.0
                for n in trained:
                    worst_w = max(worst_w, relative(ours[n], theirs[n]))
                    worst_update = max(worst_update, relative(ours[n] - before[n], theirs[n] - before[n]))
                sumbound.report("%s: %d weights after one SGD step against PyTorch" % (name, len(trained)),
                                worst_w, 1e-5)
                sumbound.report("%s: the step's update against PyTorch's" % name, worst_update, step)
                self.assertLessEqual(worst_w, 1e-5)
                self.assertLessEqual(worst_update, step)

                # What leaves is what runs: the exported model (Less and Where, the unrolled
                # cells; its batch is the one the import bound) under ONNX Runtime against
                # `graphrun infer` on the checkpoint.
                x = self.path("x16.npy")
                np.save(x, np.random.RandomState(7).randn(BATCH, 1, 28, 28).astype(np.float32))
                bound = self.forward_bound(model, BATCH)
                err = relative(self.infer(ckpt, x), self.ort(exported, x))
                sumbound.report("%s: the trained model exported, onnxruntime against graphrun infer" % name,
                                err, bound)
                self.assertLessEqual(err, bound)

    def test_two_towers_train_as_one_device(self):
        for name in ROW_MODELS:
            with self.subTest(name):
                model = self.w(name + ".onnx")
                losses = []
                for devices in ([], ["--gpus", "2", "--emulate"]):
                    metrics = self.path("%s-m%d.jsonl" % (name, len(devices)))
                    run(GRAPHRUN, "train", model, "--batch", BATCH, "--steps", "3", "--no-eval",
                        "--no-progress", "--threads", "2", "--seed", "1", "--metrics", metrics, *devices)
                    with open(metrics) as f:
                        losses.append([json.loads(line)["loss"] for line in f])
                bound = 3 * self.forward_bound(model, BATCH)
                err = max(abs(a - b) / abs(a) for a, b in zip(*losses))
                sumbound.report("%s: losses on two emulated GPUs against one device" % name, err, bound)
                self.assertEqual(len(losses[1]), 3)
                self.assertLessEqual(err, bound, losses)

    def test_onnx_forms_pytorch_does_not_write_infer_as_onnxruntime(self):
        for name, inputs in (("gru_reverse", ["x", "initial_h"]),
                             ("lstm_states", ["x", "initial_h", "initial_c"]),
                             ("gru_dynamo_state", ["x"])):
            with self.subTest(name):
                model = self.w(name + ".onnx")
                feeds = [self.w("%s_%s.npy" % (name, i)) for i in inputs]
                err = relative(self.infer(model, *feeds), self.ort(model, *feeds))
                bound = self.forward_bound(model, 3)
                sumbound.report("%s: graphrun infer against onnxruntime" % name, err, bound)
                self.assertLessEqual(err, bound)

    def test_a_zero_state_expanded_from_a_scalar_splits_into_towers(self):
        placed = self.path("gru_dynamo_state.placed")
        run(GRAPHC, "place", self.w("gru_dynamo_state.onnx"), "--gpus", "2", "--batch", "4", "-o", placed)
        self.assertTrue(os.path.exists(placed))

    def test_refusals_are_one_clear_message(self):
        cases = {
            "lstm_unknown_length": ["node 'rnn/LSTM' (LSTM", "sequence length", "unknown at import"],
            "lstm_clip": ["node 'rnn/LSTM' (LSTM", "attribute 'clip' is not supported"],
            "lstm_relu": ["node 'rnn/LSTM' (LSTM", "activation 'Relu' is not supported"],
            "mod_runtime": ["node 'm/Mod' (Mod", "computed at run time"],
        }
        for name, fragments in cases.items():
            with self.subTest(name):
                self.assertFailsClearly(run(GRAPHC, "print", self.w(name + ".onnx"), ok=False), *fragments)


if __name__ == "__main__":
    unittest.main()
