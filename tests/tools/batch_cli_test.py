#!/usr/bin/python3
"""`--batch` on imported models end to end (issue 32, point 3).

The models are PyTorch's (Debian's python3-torch, exported in training mode): a small CNN whose
forward pass computes with its batch (x.reshape(n * 4, ...) then back to [n, ...]), exported

- with a dynamic batch axis: it needs a bound batch at import. Without --batch that is one line
  that names the flag (never an internal type); with --batch it is bound at import, inspected at
  that batch, and trains on two emulated GPUs as on one device (the towers split the folded
  batch [4n, ...] at its samples);
- with a fixed batch of 8: it keeps that batch where no --batch is given (inspect, train), and
  runs at another one (rebatched): `graphrun infer` at batch 3 equals PyTorch's forward pass on
  the same weights, and training at 16 says it rebatched;
- with a fixed batch of 8 and a per-sample parameter of 8 rows added to the features: it cannot
  run at another batch, which is one line saying how to export a dynamic batch axis; at 8 it
  trains.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, CliCase, run  # noqa: E402

EXPORT = r'''
import sys, numpy as np, torch, torch.nn as nn
out = sys.argv[1]
torch.manual_seed(0)

class Folded(nn.Module):
    def __init__(self, per_sample=False):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)
        self.per_sample = nn.Parameter(torch.randn(8, 4 * 8 * 8) * 0.1) if per_sample else None
    def forward(self, x):
        y = torch.relu(self.conv(x))
        n = x.shape[0]
        y = y.reshape(n * 4, 8 * 8)  # the batch folded into rows: arithmetic on n
        y = y.reshape(n, 4 * 8 * 8)
        if self.per_sample is not None:
            y = y + self.per_sample
        return self.fc(y)

def export(m, name, batch, dynamic):
    kw = dict(input_names=["x"], output_names=["logits"], opset_version=13,
              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    if dynamic:
        kw["dynamic_axes"] = {"x": {0: "batch"}, "logits": {0: "batch"}}
    torch.onnx.export(m, torch.randn(batch, 1, 8, 8), "%s/%s.onnx" % (out, name), **kw)

folded = Folded()
export(folded, "dynamic", 2, True)
export(folded, "fixed8", 8, False)
export(Folded(per_sample=True), "per_sample8", 8, False)
x3 = np.random.RandomState(5).randn(3, 1, 8, 8).astype(np.float32)
np.save("%s/x3.npy" % out, x3)
with torch.no_grad():
    np.save("%s/torch_y3.npy" % out, folded(torch.from_numpy(x3)).numpy())
'''

TRAIN = ["--steps", "3", "--seed", "3", "--threads", "1", "--no-progress", "--no-eval", "--lr", "0.05"]


class BatchTest(CliCase):
    @classmethod
    def setUpClass(cls):
        cls.models = tempfile.mkdtemp(prefix="graphc-batch-")
        subprocess.run(["/usr/bin/python3", "-c", EXPORT, cls.models], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.models, ignore_errors=True)

    def model(self, name):
        return os.path.join(self.models, name + ".onnx")

    def losses(self, metrics):
        with open(metrics) as f:
            return [json.loads(l)["loss"] for l in f]

    def test_a_graph_that_computes_with_its_batch_binds_it_at_import(self):
        p = run(GRAPHC, "inspect", self.model("dynamic"), ok=False)
        self.assertFailsClearly(p, "arithmetic on the symbolic batch size",
                                "give --batch N to import the model with a bound batch")
        self.assertNotIn("::", p.stderr)
        self.assertIn("batch 8", run(GRAPHC, "inspect", self.model("dynamic"), "--batch", "8").stdout)
        one, two = self.path("one.jsonl"), self.path("two.jsonl")
        run(GRAPHRUN, "train", self.model("dynamic"), "--batch", "8", *TRAIN, "--metrics", one)
        run(GRAPHRUN, "train", self.model("dynamic"), "--batch", "8", *TRAIN, "--metrics", two,
            "--gpus", "2", "--emulate")
        a, b = self.losses(one), self.losses(two)
        self.assertEqual(len(a), 3)
        for x, y in zip(a, b):
            self.assertLess(abs(x - y), 1e-5 * abs(x), (a, b))

    def test_a_fixed_batch_is_the_default_and_is_rebatched(self):
        fixed = self.model("fixed8")
        self.assertIn("batch 8", run(GRAPHC, "inspect", fixed).stdout)
        p = run(GRAPHRUN, "train", fixed, *TRAIN)
        self.assertIn("8 global", p.stdout)
        self.assertNotIn("rebatched", p.stdout)
        p = run(GRAPHRUN, "train", fixed, "--batch", "16", *TRAIN)
        self.assertIn("16 global", p.stdout)
        self.assertIn("rebatched from the model's fixed batch 8", p.stdout)
        # Each sample as PyTorch computes it, at a batch of 3.
        y = self.path("y3.npy")
        run(GRAPHRUN, "infer", fixed, "--input", os.path.join(self.models, "x3.npy"), "-o", y)
        got, want = np.load(y), np.load(os.path.join(self.models, "torch_y3.npy"))
        self.assertEqual(got.shape, (3, 10))
        self.assertLess(np.abs(got - want).max(), 1e-5 * np.abs(want).max())

    def test_a_fixed_batch_that_cannot_change_says_how_to_export(self):
        model = self.model("per_sample8")
        for cmd in ([GRAPHRUN, "train", model, "--batch", "16", *TRAIN],
                    [GRAPHC, "place", model, "--gpus", "2", "--batch", "16", "-o", self.path("p.placed")]):
            p = run(*cmd, ok=False)
            self.assertFailsClearly(p, "has a fixed batch of 8 and cannot run at batch 16",
                                    "dynamic_axes={'x': {0: 'batch'}}")
            self.assertNotIn("add-loss", p.stderr)
        self.assertFalse(os.path.exists(self.path("p.placed")))
        ckpt = self.path("ck")
        run(GRAPHRUN, "train", model, *TRAIN, "--checkpoint", ckpt)
        # Its checkpoint holds the graph at batch 8, whatever the file it came from.
        p = run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--batch", "16", ok=False)
        self.assertFailsClearly(p, "holds a graph bound to batch 8 and cannot run at batch 16",
                                "run it at batch 8")
        self.assertNotIn("dynamic_axes", p.stderr)
        run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--batch", "8")


if __name__ == "__main__":
    unittest.main()
