#!/usr/bin/python3
"""Stochastic depth from PyTorch end to end: one SGD step against PyTorch under every mask.

A small model (Conv + ReLU, then a residual Conv branch dropped per sample, then Linear) writes
stochastic depth as torchvision does, x + branch * (rand_like(branch[:, :1, :1, :1]) < keep) /
keep, exported by Debian's PyTorch 1.13 at opset 17 in training mode (RandomUniformLike, Less,
Cast, Div, Mul), which graphc imports as one per-sample Dropout (docs/onnx-frontend.md).

- One SGD step of `graphrun train` on 4 Fashion-MNIST-format images: graphrun's mask is its
  own, so PyTorch computes the step under each of the 2^4 keep/drop combinations with the noise
  fixed; graphrun's loss must be within the forward pass's sum bound of exactly one of them, and
  every weight after the step within 1e-5 of PyTorch's step under that combination. Four seeds,
  at least one of whose steps keeps some samples and drops others.
- keep = 1.0: the step equals plain PyTorch's (nothing is dropped).
- The inference export (`graphrun export`) has no random op and ONNX Runtime computes what
  `graphrun infer` does; the training export (--training-graph) writes the random chain, which
  ONNX Runtime runs (at keep = 1.0 it equals `graphrun infer`).
- Two emulated GPUs: on 4 identical samples the loss gives how many samples were kept,
  (k L_kept + (4 - k) L_dropped) / 4; towers drawing the same masks would keep an even number
  every time, so an odd k under some seed shows that each tower draws its own. Three steps on
  two emulated GPUs run too.
- Two blocks whose draws share one Expand of their noise shape, as PyTorch 2's dynamo exporter
  writes them (built with onnx.helper): the Expand nobody reads once the chains are Dropouts
  leaves the checkpoint, so the trained model exports, and ONNX Runtime runs it as infer does.

Tolerances and ONNX Runtime as in modern_ops_test.py (tests/tools/sumbound.py; the
.cache/onnxruntime-venv of scripts/install-test-deps). Every figure is printed.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sumbound  # noqa: E402
from cli_test import GRAPHRUN, run, write_idx  # noqa: E402
from modern_ops_test import FASHION_BATCH, LR, PyTorchModelCase  # noqa: E402

BATCH = 4
KEEP = 0.6

TORCH_SIDE = r'''
import sys, copy, json, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
out, lr = sys.argv[1], float(sys.argv[3])
batch = %d
keep = %r
torch.manual_seed(0)
torch.set_num_threads(1)

class Net(nn.Module):
    def __init__(self, keep):
        super().__init__()
        self.keep = keep
        self.noise = None  # fixed: a [B, 1, 1, 1] keep/drop combination, already / keep
        self.conv1 = nn.Conv2d(1, 4, 3, stride=2)  # 28 -> 13
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4 * 13 * 13, 10)
    def forward(self, x):
        h = F.relu(self.conv1(x))
        b = self.conv2(h)
        if self.noise is None:  # torchvision.ops.stochastic_depth, mode "row"
            noise = (torch.rand_like(b[:, :1, :1, :1]) < self.keep).to(b.dtype) / self.keep
        else:
            noise = self.noise
        return self.head((h + b * noise).flatten(1))

model = Net(keep).train()
plain = copy.deepcopy(model)
plain.keep = 1.0
x0 = torch.zeros(2, 1, 28, 28)
for m, name in ((model, "sd"), (plain, "sd_keep1")):
    torch.onnx.export(m, x0, out + "/" + name + ".onnx", opset_version=17, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

xi = np.random.RandomState(1).randn(5, 1, 28, 28).astype(np.float32)
np.save(out + "/x_infer.npy", xi)
''' % (BATCH, KEEP) + FASHION_BATCH + r'''

def step(m, noise, name):
    m = copy.deepcopy(m)
    m.noise = noise
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    np.savez(out + "/" + name + "_after.npz",
             **{k: v.detach().numpy() for k, v in m.state_dict().items()})
    with open(out + "/" + name + "_loss.txt", "w") as f:
        f.write(repr(loss.item()))

for c in range(2 ** batch):
    kept = torch.tensor([(c >> b) & 1 for b in range(batch)], dtype=torch.float32)
    step(model, kept.view(batch, 1, 1, 1) / keep, "combo%d" % c)
step(plain, None, "plain")  # keep = 1: rand_like < 1 keeps every sample

# One sample four times: the loss with the branch kept and dropped.
same_x, same_y = x[:1].repeat(batch, 1, 1, 1), y[:1].repeat(batch)
losses = {}
with torch.no_grad():
    for what, n in (("kept", 1.0 / keep), ("dropped", 0.0)):
        model.noise = torch.full((batch, 1, 1, 1), n)
        losses[what] = F.cross_entropy(model(same_x), same_y).item()
model.noise = None
with open(out + "/same_losses.json", "w") as f:
    json.dump(losses, f)
'''


SHARED_NOISE = r'''
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh
out = sys.argv[1]
rs = np.random.RandomState(3)
f = lambda name, a: nh.from_array(np.asarray(a, np.float32), name)
i64 = lambda name, a: nh.from_array(np.asarray(a, np.int64), name)
inits = [f("w1", rs.randn(784, 16) * 0.05), f("w2", rs.randn(16, 10) * 0.2), f("zero", 0.0),
         f("keep", 0.75), i64("one", [1]), i64("flat", [-1, 784])]
nodes = [h.make_node("Reshape", ["x", "flat"], ["xf"], name="flatten"),
         h.make_node("MatMul", ["xf", "w1"], ["a"], name="fc1"),
         h.make_node("Shape", ["a"], ["n"], name="noise/Shape", start=0, end=1),
         h.make_node("Concat", ["n", "one"], ["noise_shape"], name="noise/Concat", axis=0),
         h.make_node("Expand", ["zero", "noise_shape"], ["empty"], name="noise/Expand")]
x = "a"
for b in ("b1", "b2"):
    nodes += [h.make_node("RandomUniformLike", ["empty"], [b + "_u"], name=b + "/RandomUniformLike"),
              h.make_node("Less", [b + "_u", "keep"], [b + "_lt"], name=b + "/Less"),
              h.make_node("Cast", [b + "_lt"], [b + "_c"], name=b + "/Cast", to=onnx.TensorProto.FLOAT),
              h.make_node("Div", [b + "_c", "keep"], [b + "_noise"], name=b + "/Div"),
              h.make_node("Mul", [x, b + "_noise"], [b + "_y"], name=b + "/Mul")]
    x = b + "_y"
nodes.append(h.make_node("MatMul", [x, "w2"], ["logits"], name="fc2"))
g = h.make_graph(nodes, "shared_noise", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 1, 28, 28])],
                 [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", 10])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), out + "/shared_noise.onnx")
'''


class StochasticDepthTest(PyTorchModelCase):
    SCRIPTS = (TORCH_SIDE, SHARED_NOISE)
    WORK = "graphc-stochastic-depth"

    def train(self, model, data, *flags, steps=1, seed=1):
        self.runs = getattr(self, "runs", 0) + 1
        ckpt, metrics = self.path("ckpt%d" % self.runs), self.path("m%d.jsonl" % self.runs)
        run(GRAPHRUN, "train", model, "--data", "fashion-mnist:" + data, "--batch", BATCH, "--steps",
            steps, "--optimizer", "sgd", "--lr", LR, "--no-eval", "--no-progress", "--threads", "2",
            "--seed", seed, "--checkpoint", ckpt, "--metrics", metrics, *flags)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        self.assertEqual(len(losses), steps)
        return ckpt, metrics, losses

    def test_one_sgd_step_matches_pytorch_under_exactly_one_mask(self):
        model, data = self.w("sd.onnx"), self.fashion_data()
        bound = self.forward_bound(model, BATCH)
        want = []
        for c in range(2 ** BATCH):
            with open(self.w("combo%d_loss.txt" % c)) as f:
                want.append(float(f.read()))
        matched = []
        for seed in range(1, 5):  # fixed seeds: among them, steps that drop some samples
            ckpt, metrics, (loss,) = self.train(model, data, seed=seed)
            errs = [abs(loss - w) / abs(w) for w in want]
            matches = [c for c in range(2 ** BATCH) if errs[c] <= bound]
            nearest = sorted(errs)
            print("[ masks    ] seed %d: graphrun's loss %.9g; within the bound of combination %s (kept "
                  "samples as bits) at %.3g, the next at %.3g"
                  % (seed, loss, matches, nearest[0], nearest[1]), flush=True)
            self.assertEqual(len(matches), 1, errs)
            self.check_sgd_step("seed %d, combination %d" % (seed, matches[0]), model, BATCH, metrics, ckpt,
                                "combo%d" % matches[0])
            matched.append(matches[0])
        self.assertTrue(any(0 < c < 2 ** BATCH - 1 for c in matched), matched)

    def test_keep_one_is_plain_pytorch(self):
        model = self.w("sd_keep1.onnx")
        ckpt, metrics, _ = self.train(model, self.fashion_data())
        self.check_sgd_step("keep = 1.0", model, BATCH, metrics, ckpt, "plain")

    def test_exports_under_onnxruntime(self):
        x, data = self.w("x_infer.npy"), self.fashion_data()
        for name in ("sd", "sd_keep1"):
            model = self.w(name + ".onnx")
            ckpt, _, _ = self.train(model, data)
            bound = self.forward_bound(model, 5)
            ours = self.infer(ckpt, x)
            inference = self.path(name + "-inference.onnx")
            run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", inference)
            self.assertNotIn("RandomUniformLike", self.facts(inference)[0]["ops"])
            err = sumbound.relative_error(self.ort(inference, x), ours)
            sumbound.report("%s: inference export under onnxruntime against graphrun infer" % name, err,
                            bound)
            self.assertLessEqual(err, bound)

            training = self.path(name + "-training.onnx")
            run(GRAPHRUN, "export", "--checkpoint", ckpt, "--training-graph", "-o", training)
            self.assertIn("RandomUniformLike", self.facts(training)[0]["ops"])
            drawn = self.ort(training, x)
            self.assertEqual(drawn.shape, (5, 10))
            self.assertTrue(np.isfinite(drawn).all())
            if name == "sd_keep1":  # nothing dropped: the training form computes the same
                err = sumbound.relative_error(drawn, ours)
                sumbound.report("keep = 1.0: training export under onnxruntime against graphrun infer",
                                err, bound)
                self.assertLessEqual(err, bound)

    def test_a_noise_shape_shared_by_two_blocks_leaves_the_checkpoint(self):
        model, x = self.w("shared_noise.onnx"), self.w("x_infer.npy")
        ckpt, _, _ = self.train(model, self.fashion_data())
        inference = self.path("shared-inference.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", inference)
        ops = self.facts(inference)[0]["ops"]
        self.assertNotIn("Expand", ops)
        self.assertNotIn("RandomUniformLike", ops)
        bound = self.forward_bound(model, 5)
        err = sumbound.relative_error(self.ort(inference, x), self.infer(ckpt, x))
        sumbound.report("shared noise shape: inference export under onnxruntime against graphrun infer", err,
                        bound)
        self.assertLessEqual(err, bound)

    def test_two_emulated_gpus_draw_a_mask_per_tower(self):
        model = self.w("sd.onnx")
        self.train(model, self.fashion_data(), "--gpus", "2", "--emulate", steps=3)

        # Four copies of one sample: any shuffle gives the same batch, and the loss tells how
        # many of the four the towers kept.
        images, labels = np.load(self.w("images.npy")), np.load(self.w("labels.npy"))
        data = self.path("same")
        os.makedirs(data)
        for split in ("train", "t10k"):
            write_idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % split), np.repeat(images[:1], BATCH, 0),
                      0x803)
            write_idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % split), np.repeat(labels[:1], BATCH),
                      0x801)
        with open(self.w("same_losses.json")) as f:
            same = json.load(f)
        bound = self.forward_bound(model, BATCH)
        kept = []
        for seed in range(1, 9):
            _, _, (loss,) = self.train(model, data, "--gpus", "2", "--emulate", seed=seed)
            k = BATCH * (loss - same["dropped"]) / (same["kept"] - same["dropped"])
            kept.append(round(k))
            # The loss is one of the five mixtures, to the sum bound.
            want = (round(k) * same["kept"] + (BATCH - round(k)) * same["dropped"]) / BATCH
            err = abs(loss - want) / abs(want)
            sumbound.report("seed %d: loss against PyTorch's with %d of 4 kept" % (seed, round(k)), err, bound)
            self.assertLessEqual(err, bound)
        print("[ towers   ] samples kept per seed: %s" % kept, flush=True)
        self.assertTrue(any(k % 2 for k in kept), kept)


if __name__ == "__main__":
    unittest.main(verbosity=2)
