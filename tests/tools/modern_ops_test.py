#!/usr/bin/python3
"""LayerNorm, GELU, Hardswish and Hardsigmoid end to end, against PyTorch and ONNX Runtime.

A small model (Conv + Hardswish, Linear + LayerNorm + GELU, Linear + Hardswish, LayerNorm +
GELU(tanh) + Hardsigmoid, Linear) is exported by Debian's PyTorch 1.13 at opset 17 in training
mode: LayerNormalization, HardSwish and HardSigmoid as ONNX ops, GELU as PyTorch 1.13 writes it
(Div, Erf, Add, Mul, Mul; the tanh form in Mul, Add and Tanh), which graphc imports op by op.

- One SGD step of `graphrun train` on 16 Fashion-MNIST-format images (a data set of exactly one
  batch, so the step sees every sample) against PyTorch's step on the same samples and initial
  weights: the loss, and every parameter after the step (the weights exported by
  `graphrun export`).
- Three steps on two emulated GPUs against three on one device (the towers' LayerNorm scale and
  bias gradients are summed like any other).
- `graphrun infer` on the model against ONNX Runtime and against PyTorch's forward pass.
- A model written at opset 20 (Gelu as one op, both forms, with LayerNormalization and
  HardSwish): `graphrun infer` against ONNX Runtime; after a training step `graphrun export`
  writes opset 20 with Gelu again; the same module without its record of opset 20 exports at
  opset 17 with Gelu in ONNX's older ops, which ONNX Runtime computes alike.

Tolerances follow tests/tools/sumbound.py: two groupings of a K-term float sum differ by at most
about 2(K+4)u of the tensor's largest value, K the longest sum (`graphc inspect --json`); the
updated weights are also held to 1e-5 of their own magnitude. Every figure is printed.

ONNX Runtime runs in .cache/onnxruntime-venv (scripts/install-test-deps), in a child process.
"""
import json
import os
import subprocess
import sys
import textwrap
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sumbound  # noqa: E402
from cli_test import GRAPHC, GRAPHRUN, CliCase, run, write_idx  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
VENV_PYTHON = os.path.join(ROOT, ".cache", "onnxruntime-venv", "bin", "python")
BATCH = 16
LR = 0.1

# In a PyTorch script given `out` and `batch`: one batch of random images and labels, saved for
# the test's IDX files, and as x, y normalised as the Fashion-MNIST loader does
# (executor/data/IdxDataset.cpp).
FASHION_BATCH = r'''
rs = np.random.RandomState(2)
images = rs.randint(0, 256, (batch, 28, 28)).astype(np.uint8)
labels = rs.randint(0, 10, batch).astype(np.uint8)
np.save(out + "/images.npy", images)
np.save(out + "/labels.npy", labels)
mean, std = np.float32(0.2860), np.float32(0.3530)
scale, shift = np.float32(1) / (np.float32(255) * std), -mean / std
x = torch.from_numpy(images.astype(np.float32)[:, None] * scale + shift)
y = torch.from_numpy(labels.astype(np.int64))
'''

TORCH_SIDE = r'''
import sys, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
out, batch, lr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.manual_seed(0)
torch.set_num_threads(1)

class Modern(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2)  # 28 -> 13
        self.fc1 = nn.Linear(4 * 13 * 13, 32)
        self.norm1 = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 24)
        self.norm2 = nn.LayerNorm(24)
        self.head = nn.Linear(24, 10)
        with torch.no_grad():  # away from ones and zeros, so that their gradients matter
            for norm in (self.norm1, self.norm2):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)
    def forward(self, x):
        y = F.hardswish(self.conv(x)).flatten(1)
        y = F.gelu(self.norm1(self.fc1(y)))
        y = F.hardswish(self.fc2(y))
        y = F.hardsigmoid(F.gelu(self.norm2(y), approximate="tanh"))
        return self.head(y)

model = Modern()
x0 = torch.zeros(2, 1, 28, 28)
torch.onnx.export(model, x0, out + "/modern.onnx", opset_version=17, input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}},
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

# Inference: PyTorch's forward pass on the initial weights.
xi = np.random.RandomState(1).randn(5, 1, 28, 28).astype(np.float32)
np.save(out + "/x_infer.npy", xi)
with torch.no_grad():
    np.save(out + "/torch_infer.npy", model(torch.from_numpy(xi)).numpy())

''' + FASHION_BATCH + r'''
opt = torch.optim.SGD(model.parameters(), lr=lr)
loss = F.cross_entropy(model(x), y)
loss.backward()
opt.step()
np.savez(out + "/torch_after.npz", **{k: v.detach().numpy() for k, v in model.state_dict().items()})
with open(out + "/torch_loss.txt", "w") as f:
    f.write(repr(loss.item()))
'''

GELU20 = r'''
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
rs = np.random.RandomState(3)
w = lambda name, *shape: numpy_helper.from_array((rs.randn(*shape) * 0.5).astype(np.float32), name)
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h1"], name="/fc1/MatMul"),
    helper.make_node("Gelu", ["h1"], ["g1"], name="/act1/Gelu"),
    helper.make_node("MatMul", ["g1", "w2"], ["h2"], name="/fc2/MatMul"),
    helper.make_node("Gelu", ["h2"], ["g2"], name="/act2/Gelu", approximate="tanh"),
    helper.make_node("LayerNormalization", ["g2", "norm.weight", "norm.bias"], ["n2"],
                     name="/norm/LayerNormalization", axis=-1, epsilon=1e-5),
    helper.make_node("MatMul", ["n2", "w3"], ["h3"], name="/head/MatMul"),
    helper.make_node("HardSwish", ["h3"], ["logits"], name="/head/HardSwish"),
]
inits = [w("w1", 12, 16), w("w2", 16, 16), w("w3", 16, 10),
         numpy_helper.from_array(np.ones(16, np.float32) * 1.1, "norm.weight"),
         numpy_helper.from_array(np.full(16, 0.1, np.float32), "norm.bias")]
graph = helper.make_graph(nodes, "gelu20", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 12])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
model.ir_version = 9
open(out + "/gelu20.onnx", "wb").write(model.SerializeToString())  # ONNX 1.12 knows opsets <= 17
np.save(out + "/x20.npy", rs.randn(6, 12).astype(np.float32))
'''

# Run by ONNX Runtime's Python: MODEL OUTPUT INPUT... (the inputs in the model's order).
ORT_RUN = r'''
import sys, numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
feeds = {i.name: np.load(p) for i, p in zip(s.get_inputs(), sys.argv[3:])}
np.save(sys.argv[2], s.run(None, feeds)[0])
'''

# Debian's python3-onnx: the opset, op types and initializers of a file, as JSON and an .npz.
ONNX_FACTS = r'''
import sys, json, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
np.savez(sys.argv[2], **{t.name: numpy_helper.to_array(t) for t in m.graph.initializer})
print(json.dumps({"opset": [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0],
                  "ops": sorted({n.op_type for n in m.graph.node})}))
'''

U = sumbound.F32


def relative(got, want):
    return sumbound.relative_error(got, want)


class PyTorchModelCase(CliCase):
    """Models a PyTorch script writes once per class (SCRIPTS, each run as SCRIPT WORK BATCH LR)
    into a work folder; ONNX Runtime, onnx and graphrun on them."""
    SCRIPTS = ()
    WORK = "graphc-models"

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(VENV_PYTHON):
            raise unittest.SkipTest("ONNX Runtime's environment is missing; run scripts/install-test-deps")
        cls.work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "%s-%d" % (cls.WORK, os.getpid()))
        os.makedirs(cls.work, exist_ok=True)
        for script in cls.SCRIPTS:
            subprocess.run(["/usr/bin/python3", "-c", script, cls.work, str(BATCH), str(LR)], check=True,
                           capture_output=True)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.work, ignore_errors=True)

    def w(self, name):
        return os.path.join(self.work, name)

    def ort(self, model, *inputs):
        y = self.path("ort.npy")
        subprocess.run([VENV_PYTHON, "-c", ORT_RUN, model, y, *inputs], check=True, capture_output=True)
        return np.load(y)

    def facts(self, model):
        npz = self.path("facts.npz")
        p = subprocess.run(["/usr/bin/python3", "-c", ONNX_FACTS, model, npz], check=True,
                           capture_output=True, text=True)
        return json.loads(p.stdout), dict(np.load(npz))

    def infer(self, model, *inputs):
        y = self.path("ours.npy")
        feeds = []
        for x in inputs:
            feeds += ["--input", x]
        run(GRAPHRUN, "infer", model, *feeds, "-o", y, "--threads", "2")
        return np.load(y)

    def forward_bound(self, model, batch):
        k = int(json.loads(run(GRAPHC, "inspect", model, "--batch", batch, "--json").stdout)["longest_sum"])
        return 2 * (k + 4) * U

    def check_sgd_step(self, what, model, batch, metrics, ckpt, name):
        """A `graphrun train` step (its --metrics and --checkpoint) against PyTorch's on the same
        samples: the loss within the forward pass's sum bound, every weight after the step within
        1e-5 (the script's NAME_loss.txt and NAME_after.npz)."""
        bound = self.forward_bound(model, batch)
        with open(metrics) as f:
            loss = json.loads(f.readline())["loss"]
        with open(self.w(name + "_loss.txt")) as f:
            want = float(f.read())
        err = abs(loss - want) / abs(want)
        sumbound.report("%s: the step's loss against PyTorch's" % what, err, bound)
        self.assertLessEqual(err, bound)
        exported = self.path(name + "-after.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
        ours, theirs = self.facts(exported)[1], dict(np.load(self.w(name + "_after.npz")))
        self.assertEqual(sorted(ours), sorted(theirs))
        worst = max(sumbound.relative_error(ours[n], theirs[n]) for n in theirs)
        sumbound.report("%s: weights after one SGD step against PyTorch" % what, worst, 1e-5)
        self.assertLessEqual(worst, 1e-5)

    def fashion_data(self):
        """FASHION_BATCH's images and labels as a Fashion-MNIST folder (train and t10k)."""
        data = self.path("data")
        os.makedirs(data)
        images, labels = np.load(self.w("images.npy")), np.load(self.w("labels.npy"))
        for split in ("train", "t10k"):
            write_idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % split), images, 0x803)
            write_idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % split), labels, 0x801)
        return data


class ModernOpsTest(PyTorchModelCase):
    SCRIPTS = (TORCH_SIDE, GELU20)
    WORK = "graphc-modern-ops"

    def test_one_sgd_step_matches_pytorch(self):
        data = self.fashion_data()
        ckpt, metrics = self.path("ckpt"), self.path("m.jsonl")
        run(GRAPHRUN, "train", self.w("modern.onnx"), "--data", "fashion-mnist:" + data, "--batch", BATCH,
            "--steps", "1", "--optimizer", "sgd", "--lr", LR, "--no-eval", "--no-progress", "--threads", "2",
            "--seed", "1", "--checkpoint", ckpt, "--metrics", metrics)
        with open(metrics) as f:
            loss = json.loads(f.readline())["loss"]
        with open(self.w("torch_loss.txt")) as f:
            want_loss = float(f.read())
        k = int(json.loads(run(GRAPHC, "inspect", self.w("modern.onnx"), "--batch", BATCH,
                               "--json").stdout)["longest_sum"])
        step = 2 * (k + 4) * U
        loss_err = abs(loss - want_loss) / abs(want_loss)
        sumbound.report("loss of the step against PyTorch", loss_err, step)
        self.assertLessEqual(loss_err, step)

        exported = self.path("after.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
        _, ours = self.facts(exported)
        theirs = dict(np.load(self.w("torch_after.npz")))
        _, before = self.facts(self.w("modern.onnx"))
        self.assertEqual(sorted(ours), sorted(theirs))
        self.assertIn("norm1.weight", ours)
        worst_w = worst_update = 0.0
        for name in theirs:
            worst_w = max(worst_w, relative(ours[name], theirs[name]))
            # The update itself, measured against its own size.
            worst_update = max(worst_update, relative(ours[name] - before[name], theirs[name] - before[name]))
        sumbound.report("weights after one SGD step against PyTorch", worst_w, 1e-5)
        sumbound.report("the step's update against PyTorch's", worst_update, step)
        self.assertLessEqual(worst_w, 1e-5)
        self.assertLessEqual(worst_update, step)

    def test_two_towers_train_as_one_device(self):
        losses = []
        for devices in ([], ["--gpus", "2", "--emulate"]):
            metrics = self.path("m%d.jsonl" % len(devices))
            run(GRAPHRUN, "train", self.w("modern.onnx"), "--batch", BATCH, "--steps", "3", "--no-eval",
                "--no-progress", "--threads", "2", "--seed", "1", "--metrics", metrics, *devices)
            with open(metrics) as f:
                losses.append([json.loads(line)["loss"] for line in f])
        k = int(json.loads(run(GRAPHC, "inspect", self.w("modern.onnx"), "--batch", BATCH,
                               "--json").stdout)["longest_sum"])
        # Each step's sums may group otherwise: the bound grows with the steps taken.
        bound = 3 * 2 * (k + 4) * U
        err = max(abs(a - b) / abs(a) for a, b in zip(*losses))
        sumbound.report("losses on two emulated GPUs against one device", err, bound)
        self.assertEqual(len(losses[1]), 3)
        self.assertLessEqual(err, bound, losses)

    def test_infer_matches_onnxruntime_and_pytorch(self):
        model, x = self.w("modern.onnx"), self.w("x_infer.npy")
        ours = self.infer(model, x)
        bound = self.forward_bound(model, 5)
        for what, want in (("onnxruntime", self.ort(model, x)), ("PyTorch", np.load(self.w("torch_infer.npy")))):
            err = relative(ours, want)
            sumbound.report("graphrun infer against " + what, err, bound)
            self.assertLessEqual(err, bound, what)

    def test_opset_20_gelu_imports_trains_and_exports_at_20(self):
        model, x = self.w("gelu20.onnx"), self.w("x20.npy")
        bound = self.forward_bound(model, 6)
        err = relative(self.infer(model, x), self.ort(model, x))
        sumbound.report("opset-20 Gelu model: graphrun infer against onnxruntime", err, bound)
        self.assertLessEqual(err, bound)

        ckpt = self.path("ckpt20")
        run(GRAPHRUN, "train", model, "--batch", "8", "--steps", "1", "--no-eval", "--no-progress",
            "--threads", "2", "--checkpoint", ckpt)
        exported = self.path("gelu20-trained.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
        facts, _ = self.facts(exported)
        self.assertEqual(facts["opset"], 20)
        self.assertIn("Gelu", facts["ops"])
        err = relative(self.infer(ckpt, x), self.ort(exported, x))
        sumbound.report("trained opset-20 model: graphrun infer against onnxruntime", err, bound)
        self.assertLessEqual(err, bound)

    def test_gelu_without_opset_20_exports_in_older_ops(self):
        text = run(GRAPHC, "print", "--weights", self.w("gelu20.onnx")).stdout
        self.assertIn("onnx_opset = 20", text)
        gir = self.path("gelu.gir")
        with open(gir, "w") as f:
            f.write(textwrap.dedent(text.replace(", onnx_opset = 20", "").replace("onnx_opset = 20, ", "")))
        exported = self.path("gelu17.onnx")
        run(GRAPHC, "export", gir, "-o", exported)
        facts, _ = self.facts(exported)
        self.assertEqual(facts["opset"], 17)
        self.assertNotIn("Gelu", facts["ops"])
        self.assertIn("Erf", facts["ops"])
        self.assertIn("Tanh", facts["ops"])
        x = self.w("x20.npy")
        bound = self.forward_bound(exported, 6)
        err = relative(self.infer(exported, x), self.ort(exported, x))
        sumbound.report("Gelu in opset-17 ops: graphrun infer against onnxruntime", err, bound)
        self.assertLessEqual(err, bound)


if __name__ == "__main__":
    unittest.main(verbosity=2)
