#!/usr/bin/python3
"""A trained model's export runs under ONNX Runtime as `graphrun infer` runs it.

For every built-in model and one imported from PyTorch (torchvision's resnet18, exported in
training mode by Debian's PyTorch: the onnx_models fixture): `graphrun train` a few steps with a
checkpoint, `graphrun export` it (the inference form: BatchNorm on the running statistics,
Dropout removed), then feed the same random inputs one sample at a time (batch 1) and in a batch
through `graphrun infer` on the checkpoint and through ONNX Runtime's CPU provider on the file.

Each output is held to 2(K+4)·u of the largest output, K the longest sum of the model's forward
pass at that batch (`graphc inspect --json`'s longest_sum): both sides round each sum once per
addend and group their sums their own way, so this is the bound that holds on every CPU. The
figures printed are what docs/onnx-frontend.md records.

`--training-graph` writes the training form instead: its BatchNorms come back marked for
training.

ONNX Runtime comes from PyPI into .cache/onnxruntime-venv (scripts/install-test-deps); this
script re-runs itself under that environment's Python.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
VENV = os.path.join(ROOT, ".cache", "onnxruntime-venv")
VENV_PYTHON = os.path.join(VENV, "bin", "python")
BIN = os.environ.get("GRAPHC_BIN", os.path.join(ROOT, "build", "bin"))
GRAPHC = os.path.join(BIN, "graphc")
GRAPHRUN = os.path.join(BIN, "graphrun")
MODELS_DIR = os.environ.get("ONNX_TEST_MODELS", "")
U = 2.0 ** -24
BATCHES = (1, 8)

# name: (what to train, graphrun train flags, steps).
MODELS = {
    "mlp": (["--model", "mlp", "--batch", "16"], 5),
    "small_cnn": (["--model", "small_cnn", "--batch", "16"], 10),
    "small_cnn_nobn": (["--model", "small_cnn_nobn", "--batch", "16"], 5),
    "resnet18": (["--model", "resnet18", "--image-size", "64", "--batch", "8"], 3),
    "resnet50": (["--model", "resnet50", "--image-size", "64", "--batch", "4"], 2),
    "inception_v3": (["--model", "inception_v3", "--image-size", "75", "--batch", "4"], 2),
    "imported resnet18": (["@resnet18_train_17.onnx", "--batch", "2"], 2),
}


def reexec_into_venv():
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(VENV_PYTHON):
        sys.exit("export_ort_test.py: ONNX Runtime's environment %s is missing; run scripts/install-test-deps"
                 % VENV_PYTHON)
    os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout,
                                                          p.stderr))
    return p.stdout


def model_flags(flags):
    """Flags with "@FILE" resolved in the imported test models' folder."""
    out = []
    for f in flags:
        if f.startswith("@"):
            if not MODELS_DIR:
                raise AssertionError("ONNX_TEST_MODELS is not set (the onnx_models fixture's folder)")
            f = os.path.join(MODELS_DIR, f[1:])
        out.append(f)
    return out


class ExportUnderOnnxRuntime(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="graphc-export-ort-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name.replace(" ", "-"))

    def trained(self, name):
        flags, steps = MODELS[name]
        ckpt = self.path(name + "-ckpt")
        run(GRAPHRUN, "train", *model_flags(flags), "--steps", steps, "--no-eval", "--no-progress", "--seed", 7,
            "--threads", 2, "--checkpoint", ckpt)
        return ckpt

    def check(self, name):
        import numpy as np
        import onnxruntime as ort

        ckpt = self.trained(name)
        exported = self.path(name + ".onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        session = ort.InferenceSession(exported, options, providers=["CPUExecutionProvider"])
        self.assertIn("graphc.seed", session.get_modelmeta().custom_metadata_map)
        feed = session.get_inputs()[0]
        for batch in BATCHES:
            x = np.random.RandomState(batch).randn(batch, *feed.shape[1:]).astype(np.float32)
            x_path, y_path = self.path("%s-x%d.npy" % (name, batch)), self.path("%s-y%d.npy" % (name, batch))
            np.save(x_path, x)
            run(GRAPHRUN, "infer", ckpt, "--input", x_path, "-o", y_path, "--threads", 2)
            ours = np.load(y_path)
            theirs = session.run(None, {feed.name: x})[0]
            self.assertEqual(ours.shape, theirs.shape, "%s at batch %d" % (name, batch))
            scale = float(np.abs(ours).max()) or 1.0
            diff = float(np.abs(ours.astype(np.float64) - theirs).max()) / scale
            k = int(json.loads(run(GRAPHC, "inspect", exported, "--batch", batch, "--json"))["longest_sum"])
            bound = 2 * (k + 4) * U
            agree = float(np.mean(ours.argmax(axis=1) == theirs.argmax(axis=1)))
            print("%-18s batch %d: largest difference %.2g of the largest output (bound %.2g, K = %d); "
                  "argmax agrees on %.0f%%" % (name, batch, diff, bound, k, 100 * agree), flush=True)
            self.assertLessEqual(diff, bound, "%s at batch %d" % (name, batch))

    def test_training_graph_keeps_batch_norm_in_training(self):
        ckpt = self.trained("small_cnn")
        for flags, marked in (([], False), (["--training-graph"], True)):
            exported = self.path("small_cnn%s.onnx" % "-".join(flags))
            run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", exported, *flags)
            text = run(GRAPHC, "print", exported)
            bns = [l for l in text.splitlines() if re.search(r"= BatchNorm\b", l)]
            self.assertEqual(len(bns), 2, text)
            for line in bns:
                self.assertEqual("training = 1" in line, marked, line)


def add_model_tests():
    for name in MODELS:
        test = lambda self, n=name: self.check(n)  # noqa: E731
        setattr(ExportUnderOnnxRuntime, "test_" + name.replace(" ", "_"), test)


add_model_tests()

if __name__ == "__main__":
    reexec_into_venv()
    unittest.main(verbosity=2)
