#!/usr/bin/python3
"""Losses and data beyond image classification, end to end (issue 32, point 5).

Models exported by Debian's PyTorch 1.13 in training mode; each `graphrun train` step is checked
against PyTorch's step on the same samples and initial weights (the loss, and every weight after
the step as `graphrun export` writes it):

- `--loss nll` on a LogSoftmax classifier: PyTorch's F.nll_loss on its output (Fashion-MNIST
  files of one batch).
- `--loss mse` on a regressor fed by `--data npz:FILE` (x_train float64 [64, 8], y_train float64
  [64, 3], as NumPy saves them; x_test, y_test): PyTorch's F.mse_loss; `graphrun eval` scores the
  test arrays with the same loss, against PyTorch's; the run's evaluation records carry no
  accuracy; two emulated GPUs train as one device.
- token ids from `--data npz:FILE` (int32 [32, 6], compressed by numpy.savez_compressed, uint8
  labels): an Embedding + mean + Linear classifier, against F.cross_entropy; two emulated GPUs
  as one device.
- a channels-last model (input [N, H, W, 3], permuted inside) trained from `images:DIR` equals its
  channels-first twin (the same weights, no permute) trained from the same folder: the loader's
  images are transposed for it, not refused.
- every wrong combination is one line naming what to do: mse on class labels, float token ids,
  float labels with cross-entropy, samples of the wrong size, `eval` of an npz file without the
  test arrays (training says it does not evaluate), a corrupt or truncated archive, an unknown
  --loss.

Tolerances as in modern_ops_test.py: tests/tools/sumbound.py's 2(K+4)u of the longest sum K for
the loss, 1e-5 of each weight.
"""
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, run  # noqa: E402
from modern_ops_test import FASHION_BATCH, LR, PyTorchModelCase  # noqa: E402

TORCH_SIDE = r'''
import sys, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
out, batch, lr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(1)
''' + FASHION_BATCH + r'''

def export(model, name, example, inputs=("x",), outputs=("y",)):
    axes = {n: {0: "N"} for n in inputs + outputs}
    torch.onnx.export(model, example, "%s/%s.onnx" % (out, name), opset_version=13,
                      input_names=list(inputs), output_names=list(outputs), dynamic_axes=axes,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

def step(model, name, loss_fn, *args):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = loss_fn(model(args[0]), *args[1:])
    loss.backward()
    opt.step()
    np.savez("%s/%s_after.npz" % (out, name),
             **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    with open("%s/%s_loss.txt" % (out, name), "w") as f:
        f.write(repr(loss.item()))

# NLL on a LogSoftmax head.
torch.manual_seed(0)
nll = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(676, 10),
                    nn.LogSoftmax(dim=1))
export(nll, "nll", torch.zeros(2, 1, 28, 28))
step(nll, "nll", F.nll_loss, x, y)

# MSE on a regressor, float64 arrays as NumPy saves them.
rs = np.random.RandomState(3)
xr = rs.randn(80, 8)
yr = np.tanh(xr @ rs.randn(8, 3)) + 0.1 * rs.randn(80, 3)
np.savez(out + "/reg.npz", x_train=xr[:64], y_train=yr[:64], x_test=xr[64:], y_test=yr[64:])
torch.manual_seed(1)
reg = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
export(reg, "reg", torch.zeros(2, 8))
step(reg, "reg", F.mse_loss, torch.from_numpy(xr[:64].astype(np.float32)),
     torch.from_numpy(yr[:64].astype(np.float32)))
with torch.no_grad(), open(out + "/reg_eval_loss.txt", "w") as f:
    f.write(repr(F.mse_loss(reg(torch.from_numpy(xr[64:].astype(np.float32))),
                            torch.from_numpy(yr[64:].astype(np.float32))).item()))

# Token ids into an embedding, int32 and uint8 in a compressed archive.
class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.fc = nn.Linear(8, 4)
    def forward(self, t):
        return self.fc(self.embed(t).mean(1))
tokens = rs.randint(0, 50, (32, 6)).astype(np.int32)
labels = (tokens[:, 0] % 4).astype(np.uint8)
np.savez_compressed(out + "/tok.npz", x=tokens, y=labels)
torch.manual_seed(2)
tok = Tokens()
export(tok, "tok", torch.zeros(2, 6, dtype=torch.int64), inputs=("t",), outputs=("logits",))
with torch.no_grad():
    np.save(out + "/tok_logits.npy", tok(torch.from_numpy(tokens.astype(np.int64))).numpy())
step(tok, "tok", F.cross_entropy, torch.from_numpy(tokens.astype(np.int64)),
     torch.from_numpy(labels.astype(np.int64)))

# A channels-last model and its channels-first twin, the same weights.
class Last(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body
    def forward(self, x):
        return self.body(x.permute(0, 3, 1, 2))
torch.manual_seed(4)
body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
export(body, "first", torch.zeros(2, 3, 8, 8))
export(Last(body), "last", torch.zeros(2, 8, 8, 3))
'''


class LossesAndDataTest(PyTorchModelCase):
    SCRIPTS = (TORCH_SIDE,)
    WORK = "graphc-losses"

    def train(self, model, data, batch, *flags, ckpt=None, metrics=None):
        length = [] if "--epochs" in flags else ["--steps", "1"]
        args = [GRAPHRUN, "train", model, "--data", data, "--batch", batch, *length, "--optimizer",
                "sgd", "--lr", LR, "--no-progress", "--threads", "2", "--seed", "1"]
        if ckpt:
            args += ["--checkpoint", ckpt]
        if metrics:
            args += ["--metrics", metrics]
        return run(*args, *flags)

    def check_step(self, name, data, batch, *flags):
        """One SGD step against PyTorch's: the loss and every weight. Returns the checkpoint."""
        model, ckpt, metrics = self.w(name + ".onnx"), self.path(name + "-ckpt"), self.path(name + ".jsonl")
        p = self.train(model, data, batch, *flags, ckpt=ckpt, metrics=metrics)
        self.check_sgd_step(name, model, batch, metrics, ckpt, name)
        return p, ckpt

    def towers_match_one_device(self, name, data, batch, *flags):
        one, two = self.path(name + "-one.jsonl"), self.path(name + "-two.jsonl")
        for metrics, extra in ((one, []), (two, ["--gpus", "2", "--emulate"])):
            run(GRAPHRUN, "train", self.w(name + ".onnx"), "--data", data, "--batch", batch, "--steps", "3",
                "--optimizer", "sgd", "--lr", LR, "--no-progress", "--threads", "1", "--seed", "1", "--no-eval",
                "--metrics", metrics, *flags, *extra)
        losses = []
        for metrics in (one, two):
            with open(metrics) as f:
                losses.append([json.loads(l)["loss"] for l in f if '"step"' in l])
        self.assertEqual(len(losses[0]), 3)
        for a, b in zip(*losses):
            self.assertAlmostEqual(a, b, delta=1e-5 * abs(a), msg=losses)

    def test_nll_on_log_probabilities(self):
        p, _ = self.check_step("nll", "fashion-mnist:" + self.fashion_data(), "16", "--loss", "nll", "--no-eval")
        self.assertIn("loss       nll: the mean of -output[label]", p.stdout)
        self.assertNotIn("the model ends in LogSoftmax", p.stdout)

    def test_mse_on_npz_targets(self):
        data = "npz:" + self.w("reg.npz")
        p, ckpt = self.check_step("reg", data, "64", "--loss", "mse", "--epochs", "1")
        self.assertIn("targets f32[3]", p.stdout)
        self.assertRegex(p.stdout, r"epoch 0: test loss [\d.]+ \(mse, 16 samples\)")
        evals = [json.loads(l) for l in open(self.path("reg.jsonl")) if '"eval"' in l]
        self.assertEqual(len(evals), 1)
        self.assertNotIn("accuracy", evals[0])
        # The checkpoint records its loss: eval scores mse without being told.
        p = run(GRAPHRUN, "eval", "--checkpoint", ckpt)
        with open(self.w("reg_eval_loss.txt")) as f:
            want = float(f.read())
        got = float(p.stdout.split("test loss ")[1].split()[0])
        self.assertAlmostEqual(got, want, delta=1e-4 * want, msg=p.stdout)
        self.towers_match_one_device("reg", data, "64", "--loss", "mse")
        # graphc place compiles the loss into the plan; the plan trains with it and keeps it.
        placed = self.path("reg.placed")
        run(GRAPHC, "place", self.w("reg.onnx"), "--loss", "mse", "--gpus", "2", "--batch", "32", "-o", placed)
        p = run(GRAPHRUN, "train", placed, "--data", data, "--emulate", "--steps", "2", "--no-progress")
        self.assertIn("loss       mse", p.stdout)
        p = run(GRAPHRUN, "train", placed, "--data", data, "--emulate", "--steps", "2", "--loss", "nll", ok=False)
        self.assertFailsClearly(p, "--loss applies to models (the plan trains with mse)")

    def test_token_ids_from_npz(self):
        data = "npz:" + self.w("tok.npz")
        p, ckpt = self.check_step("tok", data, "32")
        self.assertIn("(32 samples, 4 classes", p.stdout)
        # No test arrays: no evaluation, and the run plan says so; eval asks for the split.
        self.assertIn("no evaluation: %s has no x_test and y_test" % data, p.stdout)
        p = run(GRAPHRUN, "eval", "--checkpoint", ckpt, ok=False)
        self.assertFailsClearly(p, "has no x_test and y_test", "--train-split")
        self.assertIn("train accuracy", run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--train-split").stdout)
        self.towers_match_one_device("tok", data, "32")

    def image_folder(self):
        from PIL import Image
        folder = self.path("imgs")
        for c in ("a", "b"):
            os.makedirs(os.path.join(folder, c))
            for i in range(4):
                arr = (np.random.RandomState(10 * ord(c) + i).rand(12, 12, 3) * 255).astype(np.uint8)
                Image.fromarray(arr).save(os.path.join(folder, c, "%d.png" % i))
        return folder

    def test_infer_reads_npz_arrays_and_images(self):
        # Token ids from the training archive (int32, its 'x'): PyTorch's logits on them.
        y = self.path("y.npy")
        run(GRAPHRUN, "infer", self.w("tok.onnx"), "--input", self.w("tok.npz"), "-o", y)
        want = np.load(self.w("tok_logits.npy"))
        np.testing.assert_allclose(np.load(y), want, rtol=1e-5, atol=1e-6)
        # Images: a channels-last model and its channels-first twin see the same batch.
        folder = self.image_folder()
        images = [os.path.join(folder, c, "%d.png" % i) for c in ("a", "b") for i in range(2)]
        outs = {}
        for name in ("first", "last"):
            out = self.path(name + "-y.npy")
            run(GRAPHRUN, "infer", self.w(name + ".onnx"), "--input", *images, "-o", out)
            outs[name] = np.load(out)
        self.assertEqual(outs["first"].shape, (4, 2))
        np.testing.assert_allclose(outs["last"], outs["first"], rtol=1e-6, atol=1e-7)
        # A float array for token ids, and an image for a model that takes none: one line each.
        floats = self.path("floats.npz")
        np.savez(floats, t=np.zeros((2, 6), np.float32))
        p = run(GRAPHRUN, "infer", self.w("tok.onnx"), "--input", floats, "-o", y, ok=False)
        self.assertFailsClearly(p, "token ids must be integers")
        p = run(GRAPHRUN, "infer", self.w("tok.onnx"), "--input", images[0], "-o", y, ok=False)
        self.assertFailsClearly(p, "not an image input")

    def test_channels_last_images_train_as_channels_first(self):
        folder = self.image_folder()
        after = {}
        for name in ("first", "last"):
            ckpt = self.path(name + "-ckpt")
            self.train(self.w(name + ".onnx"), "images:" + folder, "8", "--no-eval", ckpt=ckpt)
            exported = self.path(name + ".onnx")
            run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
            after[name] = self.facts(exported)[1]
        first = after["first"]
        last = {k[len("body."):]: v for k, v in after["last"].items()}
        self.assertEqual(sorted(first), sorted(last))
        for k in first:
            np.testing.assert_allclose(last[k], first[k], rtol=1e-6, atol=1e-7, err_msg=k)

    def test_wrong_data_for_the_loss_is_one_line(self):
        reg, tok = self.w("reg.onnx"), self.w("tok.onnx")
        p = run(GRAPHRUN, "train", reg, "--data", "synthetic", "--loss", "mse", "--steps", "1", ok=False)
        self.assertFailsClearly(p, "--loss mse trains on float targets", "--data npz:FILE")
        p = run(GRAPHRUN, "train", reg, "--data", "npz:" + self.w("reg.npz"), "--steps", "1", ok=False)
        self.assertFailsClearly(p, "the labels array is f32[64,3]", "--loss mse")
        floats = self.path("floats.npz")
        np.savez(floats, x=np.zeros((4, 6), np.float32), y=np.zeros(4, np.int64))
        p = run(GRAPHRUN, "train", tok, "--data", "npz:" + floats, "--steps", "1", "--batch", "4", ok=False)
        self.assertFailsClearly(p, "token ids and class labels must be integers")
        p = run(GRAPHRUN, "train", reg, "--data", "npz:" + self.w("tok.npz"), "--steps", "1", "--batch", "4",
                ok=False)
        self.assertFailsClearly(p, "the model takes samples of [8] (8 values each)")
        p = run(GRAPHRUN, "train", tok, "--data", "synthetic", "--steps", "1", ok=False)
        self.assertFailsClearly(p, "integer inputs (token ids) are fed from --data npz:FILE")
        p = run(GRAPHRUN, "train", reg, "--loss", "hinge", "--steps", "1", ok=False)
        self.assertFailsClearly(p, "--loss", "unknown loss 'hinge'", "cross-entropy, nll, mse")

    def test_a_damaged_archive_is_one_line(self):
        with open(self.w("tok.npz"), "rb") as f:
            good = f.read()
        cases = {
            "truncated.npz": (good[: len(good) // 2], "not a usable .npz file"),
            "text.npz": (b"x,y\n1,2\n" * 8, "not a zip archive"),
        }
        # A flipped byte inside the compressed data: the CRC or the inflate catches it.
        flipped = bytearray(good)
        flipped[60] ^= 0xFF
        cases["flipped.npz"] = (bytes(flipped), "not a usable .npz file")
        for name, (content, fragment) in cases.items():
            with open(self.path(name), "wb") as f:
                f.write(content)
            p = run(GRAPHRUN, "train", self.w("tok.onnx"), "--data", "npz:" + self.path(name), "--steps", "1",
                    "--batch", "4", "--no-eval", ok=False)
            self.assertFailsClearly(p, fragment, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
