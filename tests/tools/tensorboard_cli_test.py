#!/usr/bin/python3
"""`graphrun train --tensorboard DIR` end to end (issue 32, point 6).

The event files are read back by this file's own reader (TFRecord framing
with both CRC-32Cs of every record checked, and the Event messages decoded
from the protobuf wire format), never by TensorBoard, so the test needs
neither the network nor TensorBoard; bench/tensorboard_check.py lists the
same scalars with TensorBoard's own loader.

- mlp, 5 steps: one file in DIR named events.out.tfevents.*, its first event
  the version "brain.Event:2", then steps 1..5 with train/loss,
  train/learning_rate and train/images_per_second; the losses are the
  --metrics JSONL's (to its 6 digits) and the learning rates the flag's;
- a run with evaluation adds eval/accuracy and eval/loss at the end of each
  epoch, the metrics' values;
- fp16 with dynamic loss scaling adds train/loss_scale, the metrics' scale;
- every file starts with the run's start (SessionLog START) at its first step, after which
  TensorBoard drops the steps an earlier file holds from there on;
- a run resumed from its checkpoint adds a second file whose steps go on;
- under mpirun, two workers: only the chief writes (one file);
- a DIR that cannot be created is one error line and exit 1, before training.
"""
import glob
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import CliCase  # noqa: E402

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
GRAPHRUN = os.path.join(BIN, "graphrun")
MPIRUN = os.environ.get("GRAPHC_MPIRUN", "mpirun")
MLP = ["--model", "mlp", "--batch", "16", "--seed", "3", "--threads", "2", "--no-progress"]
ENV = dict(os.environ)
if os.geteuid() == 0:
    ENV.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(*args, ok=True, timeout=300):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=ENV)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def train(*args, **kw):
    return run(GRAPHRUN, "train", *args, **kw)


def write_idx(path, magic, shape, data):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in shape) + data)


def small_fashion_mnist(data):
    """A Fashion-MNIST of 64 training and 64 test images in IDX files under `data`."""
    os.makedirs(data)
    for prefix in ("train", "t10k"):
        pixels = bytes((i * 37 + i // 784 * 11) % 256 for i in range(64 * 28 * 28))
        write_idx(os.path.join(data, prefix + "-images-idx3-ubyte.gz"), 0x803, (64, 28, 28), pixels)
        write_idx(os.path.join(data, prefix + "-labels-idx1-ubyte.gz"), 0x801, (64,), bytes(i % 10 for i in range(64)))


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The data of each TFRecord of the file; raises on a bad checksum or a cut record."""
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        if at + 12 > len(data):
            raise AssertionError("%s: a record header cut off at byte %d" % (path, at))
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if crc != masked_crc32c(header):
            raise AssertionError("%s: bad length CRC at byte %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        if len(body) != length or at + 12 + length + 4 > len(data):
            raise AssertionError("%s: a record cut off at byte %d" % (path, at))
        (crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if crc != masked_crc32c(body):
            raise AssertionError("%s: bad data CRC at byte %d" % (path, at))
        out.append(body)
        at += 16 + length
    return out


def fields(message):
    """(number, wire type, value) of each field: an int, or bytes for a length-delimited one."""
    at = 0

    def varint():
        nonlocal at
        v, shift = 0, 0
        while True:
            b = message[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    while at < len(message):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, message[at:at + 8]
            at += 8
        elif wire == 5:
            yield number, wire, message[at:at + 4]
            at += 4
        elif wire == 2:
            n = varint()
            yield number, wire, message[at:at + n]
            at += n
        else:
            raise AssertionError("wire type %d" % wire)


def event(data):
    """An Event: wall_time (1, double), step (2), file_version (3), summary (5) of values (1) with
    tag (1) and simple_value (2, float), session_log (7) with status (1; START is 1)."""
    e = {"step": 0, "scalars": {}}
    for number, wire, value in fields(data):
        if (number, wire) == (1, 1):
            (e["wall_time"],) = struct.unpack("<d", value)
        elif (number, wire) == (2, 0):
            e["step"] = value
        elif (number, wire) == (3, 2):
            e["file_version"] = value.decode()
        elif (number, wire) == (7, 2):
            ((n, w, status),) = fields(value)
            assert (n, w) == (1, 0), (n, w)
            e["session_status"] = status
        elif (number, wire) == (5, 2):
            for vnumber, _, v in fields(value):
                assert vnumber == 1, vnumber
                tag, simple = None, None
                for n, w, x in fields(v):
                    if (n, w) == (1, 2):
                        tag = x.decode()
                    elif (n, w) == (2, 5):
                        (simple,) = struct.unpack("<f", x)
                    else:
                        raise AssertionError("summary value field %d" % n)
                assert simple is not None, tag
                e["scalars"][tag] = simple
        else:
            raise AssertionError("event field %d, wire type %d" % (number, wire))
    return e


def events(path):
    return [event(r) for r in records(path)]


def steps(evs):
    """The steps of the events that hold scalars."""
    return [e["step"] for e in evs if e["scalars"]]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class TensorBoardTest(CliCase):
    def files(self, tb):
        names = sorted(glob.glob(os.path.join(tb, "*")))
        for n in names:
            self.assertRegex(os.path.basename(n), r"^events\.out\.tfevents\.\d+\.")
        return names

    def metrics(self, path, kind):
        with open(path) as f:
            return [r for r in map(json.loads, f) if r["kind"] == kind]

    def assertStarts(self, evs, first_step):
        """The file's version, then the run's start (SessionLog START) at its first step."""
        self.assertEqual(evs[0]["file_version"], "brain.Event:2")
        self.assertEqual((evs[1].get("session_status"), evs[1]["step"], evs[1]["scalars"]), (1, first_step, {}))

    def scalar_steps(self, evs, tag):
        return [(e["step"], e["scalars"][tag]) for e in evs if tag in e["scalars"]]

    def assertMatchesMetrics(self, got, rows, key):
        """Float32 of the metrics' value, which has 6 significant digits."""
        self.assertEqual([s for s, _ in got], [r["step"] for r in rows])
        for (step, v), r in zip(got, rows):
            self.assertAlmostEqual(v, f32(r[key]), delta=abs(r[key]) * 1e-5 + 1e-12, msg="step %d" % step)

    def test_steps_of_a_short_run(self):
        tb, m = self.path("tb"), self.path("m.jsonl")
        p = train(*MLP, "--steps", "5", "--lr", "0.05", "--no-eval", "--tensorboard", tb, "--metrics", m)
        self.assertIn("trained 5 steps", p.stdout)
        (name,) = self.files(tb)
        evs = events(name)
        self.assertStarts(evs, 1)
        self.assertEqual(steps(evs), [1, 2, 3, 4, 5])
        for e in evs[2:]:
            self.assertEqual(set(e["scalars"]), {"train/loss", "train/learning_rate", "train/images_per_second"})
            self.assertEqual(e["scalars"]["train/learning_rate"], f32(0.05))
            self.assertGreater(e["scalars"]["train/images_per_second"], 0)
        self.assertTrue(all(a["wall_time"] <= b["wall_time"] for a, b in zip(evs, evs[1:])))
        self.assertMatchesMetrics(self.scalar_steps(evs, "train/loss"), self.metrics(m, "step"), "loss")
        self.assertMatchesMetrics(self.scalar_steps(evs, "train/images_per_second"), self.metrics(m, "step"),
                                  "images_per_sec")

    def test_evaluation_after_each_epoch(self):
        # Evaluation needs a test split: a small Fashion-MNIST of the test's own (IDX files).
        data = self.path("fmnist")
        small_fashion_mnist(data)
        tb, m = self.path("tb"), self.path("m.jsonl")
        train(*MLP, "--data", "fashion-mnist:" + data, "--epochs", "2", "--tensorboard", tb, "--metrics", m)
        (name,) = self.files(tb)
        evs = events(name)
        evals = self.metrics(m, "eval")
        self.assertEqual(len(evals), 2)
        self.assertMatchesMetrics(self.scalar_steps(evs, "eval/accuracy"), evals, "accuracy")
        self.assertMatchesMetrics(self.scalar_steps(evs, "eval/loss"), evals, "loss")
        self.assertEqual([s for s, _ in self.scalar_steps(evs, "train/loss")], list(range(1, 9)))

    def test_loss_scale(self):
        tb, m = self.path("tb"), self.path("m.jsonl")
        train("--model", "small_cnn_nobn", "--steps", "3", "--batch", "16", "--no-eval", "--no-progress",
              "--gpus", "2", "--emulate", "--params", "mirrored", "--precision", "fp16", "--loss-scale", "16777216",
              "--tensorboard", tb, "--metrics", m)
        (name,) = self.files(tb)
        got = self.scalar_steps(events(name), "train/loss_scale")
        self.assertMatchesMetrics(got, self.metrics(m, "step"), "loss_scale")
        self.assertEqual(got[0][1], 2 ** 23)  # the first step overflows: skipped, the scale halves

    def test_resumed_run_adds_a_file(self):
        tb, ckpt = self.path("tb"), self.path("ckpt")
        train(*MLP, "--steps", "3", "--no-eval", "--checkpoint", ckpt, "--tensorboard", tb)
        p = train(*MLP, "--steps", "5", "--no-eval", "--checkpoint", ckpt, "--resume", "--tensorboard", tb)
        self.assertIn("steps 4 to 5 of 5", p.stdout)
        first, second = self.files(tb)
        self.assertStarts(events(first), 1)
        self.assertEqual(steps(events(first)), [1, 2, 3])
        resumed = events(second)
        self.assertStarts(resumed, 4)
        self.assertEqual(steps(resumed), [4, 5])

    def test_only_the_chief_writes(self):
        if not shutil.which(MPIRUN):
            self.skipTest("no mpirun")
        tb = self.path("tb")
        run(MPIRUN, "--oversubscribe", "-np", "2", GRAPHRUN, "train", "--model", "mlp", "--batch", "10", "--seed",
            "3", "--threads", "1", "--no-progress", "--no-eval", "--workers", "2", "--steps", "3", "--tensorboard", tb)
        (name,) = self.files(tb)
        self.assertEqual(steps(events(name)), [1, 2, 3])

    def test_directory_that_cannot_be_created(self):
        plain = self.path("plain")
        with open(plain, "w") as f:
            f.write("a file, not a directory\n")
        p = train(*MLP, "--steps", "5", "--no-eval", "--tensorboard", os.path.join(plain, "tb"), ok=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("error:", lines[0])
        self.assertIn("--tensorboard " + os.path.join(plain, "tb"), lines[0])
        self.assertNotIn("trained", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
