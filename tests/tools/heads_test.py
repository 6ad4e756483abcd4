#!/usr/bin/python3
"""Models that end in Softmax or LogSoftmax train on their logits (passes/AddLoss.h).

Keras applications and many PyTorch models end in a probability head. The cross-entropy of
probabilities barely learns (it cannot fall below log(1 + 9/e) = 1.46 for 10 classes), so
`graphrun train` takes the loss on the head's input, as PyTorch's F.cross_entropy on the logits
(or F.nll_loss on a LogSoftmax) does. Two small classifiers (Conv + ReLU, Linear, then Softmax
or LogSoftmax) are exported by Debian's PyTorch 1.13 in training mode:

- one SGD step of `graphrun train` on 16 Fashion-MNIST-format images against PyTorch's step on
  the same samples and initial weights, with the loss on the logits: the loss and every weight
  after the step (exported by `graphrun export`, which keeps the head);
- the run plan says where the loss reads, and `graphrun eval` scores the logits too (its test
  loss is PyTorch's cross-entropy of the logits after the step);
- `graphrun infer` still gives the model's probabilities (rows summing to 1).

Tolerances as in modern_ops_test.py (tests/tools/sumbound.py's 2(K+4)u of the longest sum K, and
1e-5 of each weight).
"""
import os
import re
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHRUN, run  # noqa: E402
from modern_ops_test import BATCH, FASHION_BATCH, LR, PyTorchModelCase  # noqa: E402

TORCH_SIDE = r'''
import sys, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
out, batch, lr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(1)
''' + FASHION_BATCH + r'''

for head in ("softmax", "logsoftmax"):
    torch.manual_seed(0)
    body = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(676, 10))
    model = nn.Sequential(body, nn.Softmax(dim=1) if head == "softmax" else nn.LogSoftmax(dim=1))
    torch.onnx.export(model, torch.zeros(2, 1, 28, 28), "%s/%s.onnx" % (out, head), opset_version=13,
                      input_names=["x"], output_names=["probs"],
                      dynamic_axes={"x": {0: "N"}, "probs": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out_ = model(x)
    loss = F.cross_entropy(body(x), y) if head == "softmax" else F.nll_loss(out_, y)
    loss.backward()
    opt.step()
    np.savez("%s/%s_after.npz" % (out, head),
             **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    with open("%s/%s_loss.txt" % (out, head), "w") as f:
        f.write(repr(loss.item()))
    with torch.no_grad(), open("%s/%s_eval_loss.txt" % (out, head), "w") as f:
        f.write(repr(F.cross_entropy(body(x), y).item()))
'''


class HeadsTest(PyTorchModelCase):
    SCRIPTS = (TORCH_SIDE,)
    WORK = "graphc-heads"

    def check_head(self, head, op):
        model = self.w(head + ".onnx")
        ckpt, metrics = self.path(head + "-ckpt"), self.path(head + ".jsonl")
        data = self.fashion_data()
        p = run(GRAPHRUN, "train", model, "--data", "fashion-mnist:" + data, "--batch", BATCH,
                "--steps", "1", "--optimizer", "sgd", "--lr", LR, "--no-eval", "--no-progress", "--threads",
                "2", "--seed", "1", "--checkpoint", ckpt, "--metrics", metrics)
        self.assertRegex(p.stdout, r"note: the model ends in %s '[^']+': the loss is the cross-entropy of its "
                                   r"input '[^']+' \(the logits" % op)
        self.check_sgd_step("%s head, the loss on the logits" % op, model, BATCH, metrics, ckpt, head)

        # Evaluation scores the logits too: the test split is the same 16 images.
        p = run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--data", "fashion-mnist:" + data, "--batch", BATCH)
        with open(self.w(head + "_eval_loss.txt")) as f:
            want = float(f.read())
        got = re.search(r"test accuracy [\d.]+% \(\d+/16\), loss ([\d.]+)", p.stdout)
        self.assertIsNotNone(got, p.stdout)
        self.assertAlmostEqual(float(got.group(1)), want, places=3, msg=p.stdout)

        # The model's own output: probabilities (Softmax) or their logarithms.
        x = self.path("x.npy")
        np.save(x, np.random.RandomState(5).randn(3, 1, 28, 28).astype(np.float32))
        y = self.path("y.npy")
        run(GRAPHRUN, "infer", ckpt, "--input", x, "-o", y)
        probs = np.load(y) if op == "Softmax" else np.exp(np.load(y))
        np.testing.assert_allclose(probs.sum(axis=1), np.ones(3), rtol=1e-5)

    def test_a_softmax_head_trains_on_its_logits(self):
        self.check_head("softmax", "Softmax")

    def test_a_logsoftmax_head_trains_as_nll(self):
        self.check_head("logsoftmax", "LogSoftmax")


if __name__ == "__main__":
    unittest.main(verbosity=2)
