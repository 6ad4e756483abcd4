#!/usr/bin/python3
"""Lists the scalars of short `graphrun train --tensorboard DIR` runs with TensorBoard's own
loader (issue 32, point 6): the check that TensorBoard reads what graphrun writes, which the
ctest suite (tests/tools/tensorboard_cli_test.py, its own reader) leaves out so that it needs
neither the network nor TensorBoard.

    bench/tensorboard_check.py [--graphrun build/bin/graphrun] [--keep DIR]

Installs `tensorboard` from PyPI into bench/.venv (git-ignored; created when missing, as
bench/setup-peers does) and runs itself again there. Then, in a temporary directory:

  1. mlp on a small Fashion-MNIST of its own (64 IDX images, 4 steps per epoch), 2 epochs with
     a checkpoint, then resumed to 3 epochs into the same DIR: two event files, steps 1..12,
     an evaluation after each epoch;
  2. small_cnn_nobn, fp16 with dynamic loss scaling on 2 emulated GPUs, 4 steps: the loss
     scale too;
  3. mlp, 5 steps with checkpoints at 3 and 5; the one at 5 is damaged (as if the run had died
     past its last whole checkpoint), so --resume restarts from 3 with another learning rate:
     TensorBoard shows steps 4 and 5 of the resumed run only (its SessionLog START at step 4
     drops the first file's).

For each DIR it prints TensorBoard's EventAccumulator's Tags()['scalars'] and, per tag, the
steps and values of Scalars(tag), and checks the losses against --metrics' (6 digits).
"""
import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv")
PYTHON = os.path.join(VENV, "bin", "python")


def in_venv():
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV)


def ensure_tensorboard():
    """bench/.venv with tensorboard from PyPI; then this script again under its Python."""
    if in_venv():
        return
    if not os.path.exists(PYTHON):
        print("tensorboard_check: creating %s" % VENV, flush=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", VENV], check=True)
    if subprocess.run([PYTHON, "-c", "import tensorboard"], capture_output=True).returncode != 0:
        print("tensorboard_check: installing tensorboard from PyPI into %s" % VENV, flush=True)
        subprocess.run([PYTHON, "-m", "pip", "install", "-q", "tensorboard"], check=True)
    os.execv(PYTHON, [PYTHON, os.path.abspath(__file__)] + sys.argv[1:])


def write_idx(path, magic, shape, data):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in shape) + data)


def small_fashion_mnist(folder, samples=64):
    os.makedirs(folder)
    for prefix in ("train", "t10k"):
        pixels = bytes((i * 37 + i // 784 * 11) % 256 for i in range(samples * 28 * 28))
        write_idx(os.path.join(folder, prefix + "-images-idx3-ubyte.gz"), 0x803, (samples, 28, 28), pixels)
        write_idx(os.path.join(folder, prefix + "-labels-idx1-ubyte.gz"), 0x801, (samples,),
                  bytes(i % 10 for i in range(samples)))


def train(graphrun, work, *args):
    cmd = [graphrun, "train", "--no-progress", "--threads", "2", *map(str, args)]
    shown = (os.path.basename(c) if c == graphrun else c.replace(work, "$W") for c in cmd)
    print("$ " + " ".join(shown), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("graphrun failed (%d):\n%s%s" % (p.returncode, p.stdout, p.stderr))


def list_scalars(tb, metrics):
    from tensorboard import version
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(tb, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    files = sorted(f for f in os.listdir(tb))
    print("TensorBoard %s, EventAccumulator(%s): %d event files" % (version.VERSION, os.path.basename(tb),
                                                                   len(files)))
    tags = acc.Tags()["scalars"]
    print("  Tags()['scalars'] = %s" % sorted(tags))
    for tag in sorted(tags):
        points = acc.Scalars(tag)
        steps = [p.step for p in points]
        span = "%d..%d" % (steps[0], steps[-1]) if steps == list(range(steps[0], steps[-1] + 1)) else str(steps)
        values = ", ".join("%.6g" % p.value for p in points)
        print("  %-26s %2d points, steps %s: %s" % (tag, len(points), span, values))
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    # A step recorded twice (a restart past the last checkpoint): the later record stands.
    by_step = {r["step"]: r["loss"] for r in rows if r["kind"] == "step"}
    losses = [by_step[s] for s in sorted(by_step)]
    got = [p.value for p in acc.Scalars("train/loss")]
    assert len(got) == len(losses) and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, losses)), (got, losses)
    print("  train/loss equals the --metrics losses (%d steps)" % len(losses))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphrun", default=os.path.normpath(os.path.join(HERE, "..", "build", "bin", "graphrun")))
    p.add_argument("--keep", metavar="DIR", help="write the runs here and keep them (default: a temporary folder)")
    args = p.parse_args()
    ensure_tensorboard()
    work = args.keep or tempfile.mkdtemp(prefix="graphc-tensorboard-")
    os.makedirs(work, exist_ok=True)
    print("W=%s" % work)
    try:
        data = os.path.join(work, "fashion-mnist")
        small_fashion_mnist(data)
        tb, ckpt, metrics = (os.path.join(work, n) for n in ("mlp", "ckpt", "mlp.jsonl"))
        common = ["--model", "mlp", "--batch", "16", "--seed", "3", "--data", "fashion-mnist:" + data,
                  "--checkpoint", ckpt, "--tensorboard", tb, "--metrics", metrics]
        train(args.graphrun, work, *common, "--epochs", "2")
        train(args.graphrun, work, *common, "--epochs", "3", "--resume")
        list_scalars(tb, metrics)
        tb, metrics = os.path.join(work, "fp16"), os.path.join(work, "fp16.jsonl")
        train(args.graphrun, work, "--model", "small_cnn_nobn", "--batch", "16", "--steps", "4", "--no-eval", "--gpus", "2",
              "--emulate", "--params", "mirrored", "--precision", "fp16", "--loss-scale", "16777216",
              "--tensorboard", tb, "--metrics", metrics)
        list_scalars(tb, metrics)
        tb, ckpt, metrics = (os.path.join(work, n) for n in ("restart", "restart-ckpt", "restart.jsonl"))
        common = ["--model", "mlp", "--batch", "16", "--seed", "3", "--no-eval", "--steps", "5", "--checkpoint", ckpt,
                  "--tensorboard", tb, "--metrics", metrics]
        train(args.graphrun, work, *common, "--checkpoint-every", "3")
        with open(os.path.join(ckpt, "step-00000005.gck"), "r+b") as f:
            f.seek(100)
            f.write(b"xx")
        print("(step-00000005.gck damaged)")
        train(args.graphrun, work, *common, "--resume", "--lr", "0.05")
        list_scalars(tb, metrics)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
