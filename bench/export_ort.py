#!/usr/bin/env python3
"""A trained model's ONNX export under ONNX Runtime against graphrun infer on its checkpoint.

    bench/setup-peers              # once: ONNX Runtime from PyPI into bench/.venv
    bench/export_ort.py            # small_cnn, resnet18 and inception_v3; batch 1 and 8
    bench/export_ort.py --models small_cnn --batches 1,3,16

For each model: `graphrun train` a few steps on synthetic data with a checkpoint, `graphrun
export` the checkpoint to ONNX, then the same random inputs, one image at a time (batch 1) and
in a batch, through `graphrun infer` on the checkpoint and through ONNX Runtime (CPU provider)
on the exported file. A deployed model must compute what the trained one does, so this is a
check, not a benchmark: each comparison prints the largest difference relative to the largest
output and the bound it is held to, 2(K+4)·u with K the longest sum of the model's forward pass
(`graphc inspect --json`'s longest_sum at that batch; both sides round, and group their sums
their own way), and the script exits 1 when any exceeds it. It also checks that the export
keeps the module's integer facts (graphc.batch, graphc.seed, ...) as ONNX metadata.

It fails today: the export writes BatchNorm in training mode (docs/onnx-frontend.md, "Known
wrong outside graphrun", has the figures).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import peers

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.normpath(os.path.join(HERE, "..", "build", "bin"))
# name: (graphrun train flags, steps).
MODELS = {
    "small_cnn": (["--model", "small_cnn", "--batch", "16"], 20),
    "resnet18": (["--model", "resnet18", "--image-size", "64", "--batch", "8"], 3),
    "inception_v3": (["--model", "inception_v3", "--image-size", "75", "--batch", "4"], 2),
}
U = 2.0 ** -24


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p.stdout


def longest_sum(model, batch):
    out = run(os.path.join(BIN, "graphc"), "inspect", model, "--batch", batch, "--json")
    return int(json.loads(out)["longest_sum"])


def check_model(name, batches, workdir, session_options):
    import onnxruntime as ort

    flags, steps = MODELS[name]
    ckpt = os.path.join(workdir, name + "-ckpt")
    run(os.path.join(BIN, "graphrun"), "train", *flags, "--steps", steps, "--no-eval", "--no-progress",
        "--seed", 7, "--threads", 2, "--checkpoint", ckpt)
    exported = os.path.join(workdir, name + ".onnx")
    run(os.path.join(BIN, "graphrun"), "export", "--checkpoint", ckpt, "-o", exported)
    session = ort.InferenceSession(exported, session_options, providers=["CPUExecutionProvider"])
    facts = session.get_modelmeta().custom_metadata_map
    missing = [k for k in ("graphc.seed",) if k not in facts]
    shape = session.get_inputs()[0].shape
    worst = 0.0
    ok = not missing
    if missing:
        print("%-13s the export lost its integer facts %s (it holds %s)" % (name, missing, sorted(facts)))
    for batch in batches:
        x = np.random.RandomState(batch).randn(batch, *shape[1:]).astype(np.float32)
        x_path = os.path.join(workdir, "%s-x%d.npy" % (name, batch))
        y_path = os.path.join(workdir, "%s-y%d.npy" % (name, batch))
        np.save(x_path, x)
        run(os.path.join(BIN, "graphrun"), "infer", ckpt, "--input", x_path, "-o", y_path, "--threads", 2)
        ours = np.load(y_path)
        theirs = session.run(None, {session.get_inputs()[0].name: x})[0]
        if ours.shape != theirs.shape:
            print("%-13s batch %-3d shapes differ: graphrun %s, onnxruntime %s" % (name, batch, ours.shape,
                                                                                  theirs.shape))
            ok = False
            continue
        scale = float(np.abs(ours).max()) or 1.0
        diff = float(np.abs(ours.astype(np.float64) - theirs).max()) / scale
        k = longest_sum(exported, str(batch))
        bound = 2 * (k + 4) * U
        worst = max(worst, diff / bound)
        good = diff <= bound
        ok &= good
        print("%-13s batch %-3d %s  largest difference %.3g of the largest output, bound %.3g (K = %d): "
              "%.3f of it%s" % (name, batch, "x".join(map(str, ours.shape)), diff, bound, k, diff / bound,
                                "" if good else "  EXCEEDS"))
    return ok, worst


def main():
    peers.reexec_into_venv(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batches", default="1,8")
    args = p.parse_args()
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in MODELS]
    if bad:
        sys.exit("export_ort.py: unknown model %s; known: %s" % (", ".join(bad), ", ".join(MODELS)))
    batches = [int(b) for b in args.batches.split(",") if b]
    try:
        import onnxruntime as ort
    except ImportError as e:
        sys.exit("export_ort.py: onnxruntime is not installed (bench/setup-peers): %s" % e)
    isa, onednn = peers.isa_summary()
    print("cpu: %s; ISA: %s; %s; onnxruntime %s" % (peers.cpuinfo_field("model name") or "unknown CPU", isa,
                                                    onednn, ort.__version__))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    ok = True
    with tempfile.TemporaryDirectory(prefix="graphc-export-ort-") as workdir:
        for name in models:
            good, _ = check_model(name, batches, workdir, so)
            ok &= good
    print("export under onnxruntime: %s" % ("every output within its bound" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
