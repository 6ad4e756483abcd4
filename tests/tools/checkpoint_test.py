#!/usr/bin/python3
"""Checkpoints end to end: strict restore everywhere, integrity, resume
semantics, full disk, signals, and the numbers of `graphrun train` that a
user can get wrong (issue 11). The kill -9 test is crash_test.py.

Bad input must give one clear error line and exit 1; a damaged file is named
with the tensor; nothing previously written is lost.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import gck  # noqa: E402

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
GRAPHC = os.path.join(BIN, "graphc")
GRAPHRUN = os.path.join(BIN, "graphrun")
# mlp on synthetic data: a step takes about a millisecond.
MLP = ["--model", "mlp", "--batch", "16", "--seed", "3", "--threads", "2", "--no-progress"]


def run(*args, ok=True, timeout=300, **kw):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kw)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def train(*args, **kw):
    return run(GRAPHRUN, "train", *args, **kw)


class Case(gck.CheckpointAssertions, unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphc-ckpt-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def assertFailsClearly(self, p, *fragments):
        """Exit 1 (not a signal), exactly one line on stderr, naming the problem."""
        self.assertEqual(p.returncode, 1, "expected exit 1:\n" + p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("error:", lines[0])
        for f in fragments:
            self.assertIn(f, lines[0])


class StrictRestoreTest(Case):
    """eval, export, infer and train --resume refuse a checkpoint that does not fit."""

    @classmethod
    def setUpClass(cls):
        cls.base = tempfile.mkdtemp(prefix="graphc-ckpt-base-")
        train(*MLP, "--steps", "3", "--checkpoint", os.path.join(cls.base, "good"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.base, ignore_errors=True)

    def variant(self, name, change=None, extra=()):
        """A copy of the good checkpoint with its tensors changed (checksums valid):
        change(tensor) returns the new one or None to drop it; extra are added."""
        good = gck.read(os.path.join(self.base, "good", "step-00000003.gck"))
        tensors = [t for t in (change(t) if change else t for t in good.tensors) if t is not None]
        tensors += list(extra)
        d = self.path(name)
        os.makedirs(d)
        gck.write(os.path.join(d, "step-00000003.gck"), gck.Archive(good.text, tensors))
        with open(os.path.join(d, "latest"), "w") as f:
            f.write("step-00000003.gck\n")
        return d

    def refused_everywhere(self, d, *fragments):
        np.save(self.path("x.npy"), np.zeros((2, 784), np.float32))
        for args in (("eval", "--checkpoint", d, "--data", "synthetic"),
                     ("export", "--checkpoint", d, "-o", self.path("m.onnx")),
                     ("infer", d, "--input", self.path("x.npy"), "-o", self.path("y.npy"))):
            self.assertFailsClearly(run(GRAPHRUN, *args, ok=False), *fragments)
        self.assertFailsClearly(train(*MLP, "--steps", "5", "--checkpoint", d, "--resume", ok=False), *fragments)
        self.assertFalse(os.path.exists(self.path("m.onnx")))

    def test_missing_tensor(self):
        d = self.variant("missing", lambda t: None if t[0] == "fc1.weight" else t)
        self.refused_everywhere(d, "missing (1): fc1.weight f32[256,784]")

    def test_transposed_tensor(self):
        d = self.variant("transposed", lambda t: t[:2] + (t[2][::-1], t[3]) if t[0] == "fc1.weight" else t)
        self.refused_everywhere(d, "mis-shaped (1): fc1.weight (checkpoint f32[784,256], model f32[256,784])")

    def test_renamed_and_extra_tensors(self):
        d = self.variant("renamed", lambda t: ("fc1.weightX",) + t[1:] if t[0] == "fc1.weight" else t)
        self.refused_everywhere(d, "missing (1): fc1.weight", "unexpected (1): fc1.weightX")
        d = self.variant("extra", extra=[("extra.bias", 0, (3,), np.zeros(3, np.float32).tobytes())])
        self.refused_everywhere(d, "unexpected (1): extra.bias f32[3]")

    def test_values_that_are_not_finite(self):
        def poison(t):
            if t[0] != "fc2.bias":
                return t
            a = np.frombuffer(t[3], np.float32).copy()
            a[0], a[1] = np.nan, np.inf
            return t[:3] + (a.tobytes(),)
        d = self.variant("nan", poison)
        self.refused_everywhere(d, "not finite", "fc2.bias (1 NaN, 1 infinite)")

    def test_latest_with_trailing_junk(self):
        d = self.path("junk")
        shutil.copytree(os.path.join(self.base, "good"), d)
        with open(os.path.join(d, "latest"), "w") as f:
            f.write("step-00000003.gck\ngarbage")
        self.refused_everywhere(d, "latest' must hold one checkpoint file name", "garbage")

    def test_the_good_one_is_accepted(self):
        d = os.path.join(self.base, "good")
        run(GRAPHRUN, "export", "--checkpoint", d, "-o", self.path("m.onnx"))
        self.assertIn("accuracy", run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic").stdout)


class IntegrityTest(Case):
    """Checksums per tensor and for the header; the file and tensor are named."""

    def test_damaged_checkpoints(self):
        d = self.path("c")
        train(*MLP, "--steps", "4", "--checkpoint-every", "2", "--checkpoint", d)
        f = os.path.join(d, "step-00000004.gck")
        with open(f, "rb") as src:
            data = src.read()
        flipped = bytearray(data)
        flipped[-100] ^= 1  # inside the last tensor's data
        header = bytearray(data)
        header[40] ^= 1  # inside the model text
        cases = {"flip.gck": (bytes(flipped), "tensor 'fc3.weight.momentum' is corrupt"),
                 "header.gck": (bytes(header), "the header is corrupt"),
                 "cut.gck": (data[:len(data) // 2], "is truncated: tensor 'fc3.weight' (f32[10,256]) needs bytes"),
                 "v1.gck": (data[:7] + b"1" + data[8:], "format version 1"),
                 "tail.gck": (data + b"\n", "1 unexpected bytes after the end marker")}
        for name, (content, fragment) in cases.items():
            with open(self.path(name), "wb") as out:
                out.write(content)
            p = run(GRAPHRUN, "eval", "--checkpoint", self.path(name), "--data", "synthetic", ok=False)
            self.assertFailsClearly(p, name, fragment)
        # In a directory: eval names the older checkpoints there; resume falls
        # back to the previous one and says so.
        with open(f, "wb") as out:
            out.write(bytes(flipped))
        p = run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic", ok=False)
        self.assertFailsClearly(p, "step-00000004.gck", "corrupt", "other checkpoints there: step-00000002.gck")
        p = train(*MLP, "--steps", "6", "--checkpoint", d, "--resume")
        self.assertIn("passing over a damaged checkpoint (renamed to '%s.damaged')" % f, p.stdout)
        self.assertIn("resuming from the previous checkpoint '%s'" % os.path.join(d, "step-00000002.gck"), p.stdout)
        self.assertIn("from step 2", p.stdout)
        self.assertEqual(sorted(os.listdir(d)),
                         ["latest", "step-00000002.gck", "step-00000004.gck.damaged", "step-00000006.gck"])

    def test_damaged_module_files(self):
        onnx, placed = self.path("mlp.onnx"), self.path("mlp.placed")
        run(GRAPHC, "export", "--model", "mlp", "-o", onnx)
        run(GRAPHC, "place", onnx, "--gpus", "2", "--batch", "8", "-o", placed)  # weights inside
        with open(placed, "rb") as f:
            data = f.read()
        for offset, fragment in ((len(data) - 20, "tensor 'fc3.bias' is corrupt (checksum mismatch)"),
                                 (100, "the header is corrupt (checksum mismatch)")):
            damaged = bytearray(data)
            damaged[offset] ^= 0x10
            with open(placed, "wb") as f:
                f.write(bytes(damaged))
            for args in ((GRAPHC, "inspect", placed), (GRAPHRUN, "train", placed, "--steps", "1", "--emulate")):
                self.assertFailsClearly(run(*args, ok=False), "mlp.placed", fragment)

    def test_keeps_the_last_k(self):
        d = self.path("k")
        train(*MLP, "--steps", "5", "--checkpoint-every", "1", "--checkpoint", d)
        self.assertEqual(sorted(os.listdir(d)), ["latest", "step-00000004.gck", "step-00000005.gck"])
        train(*MLP, "--steps", "8", "--checkpoint-every", "1", "--checkpoint", d, "--resume",
              "--keep-checkpoints", "3")
        self.assertEqual(sorted(os.listdir(d)),
                         ["latest", "step-00000006.gck", "step-00000007.gck", "step-00000008.gck"])


class ResumeTest(Case):
    """--steps and --epochs are the run's total; resuming is exact."""

    def test_resume_completes_the_plan_bit_identically(self):
        common = ["--model", "small_cnn", "--batch", "16", "--seed", "7", "--threads", "2", "--no-progress",
                  "--optimizer", "adam", "--lr", "0.002", "--synthetic-samples", "80"]
        train(*common, "--steps", "12", "--checkpoint", self.path("straight"), "--metrics", self.path("a.jsonl"))
        train(*common, "--steps", "7", "--checkpoint", self.path("split"), "--metrics", self.path("b.jsonl"))
        p = train(*common, "--steps", "12", "--checkpoint", self.path("split"), "--resume",
                  "--metrics", self.path("b.jsonl"))
        self.assertIn("12 in all, from step 7", p.stdout)
        self.assertIn("(epoch 1, 2 batches into it)", p.stdout)  # 5 steps per epoch
        self.assertIn("trained 5 steps (steps 8 to 12 of 12)", p.stdout)
        self.assertSameTensors(self.latest(self.path("straight")), self.latest(self.path("split")))
        def losses(name):
            with open(name) as f:
                return [line.split('"loss":')[1].split(",")[0] for line in f]
        self.assertEqual(losses(self.path("a.jsonl")), losses(self.path("b.jsonl")))
        # The same command again: nothing left, and it says so.
        p = train(*common, "--steps", "12", "--checkpoint", self.path("split"), "--resume")
        self.assertIn("nothing to train", p.stdout)
        self.assertIn("at step 12, the run's last", p.stdout)
        # --more-steps: further.
        p = train(*common, "--more-steps", "2", "--checkpoint", self.path("split"), "--resume")
        self.assertIn("14 in all, from step 12", p.stdout)

    def test_epochs_are_the_total(self):
        common = MLP + ["--synthetic-samples", "64", "--lr-schedule", "step:1:0.5"]
        train(*common, "--epochs", "3", "--checkpoint", self.path("straight"))
        train(*common, "--steps", "5", "--checkpoint", self.path("split"))
        p = train(*common, "--epochs", "3", "--checkpoint", self.path("split"), "--resume")
        self.assertIn("12 in all, from step 5", p.stdout)
        self.assertSameTensors(self.latest(self.path("straight")), self.latest(self.path("split")))

    def test_resume_with_no_checkpoint_yet_starts_afresh(self):
        p = train(*MLP, "--steps", "2", "--checkpoint", self.path("new"), "--resume")
        self.assertIn("no checkpoint in '%s' yet: starting from step 0" % self.path("new"), p.stdout)

    def test_another_seed_is_said(self):
        train(*MLP, "--steps", "2", "--checkpoint", self.path("c"))
        p = train(*(MLP[:5] + ["9"] + MLP[6:]), "--steps", "3", "--checkpoint", self.path("c"), "--resume")
        self.assertIn("the result will differ from an uninterrupted run", p.stdout)


class FullDiskTest(Case):
    def test_a_file_size_limit_during_a_checkpoint(self):
        d = self.path("c")
        train(*MLP, "--steps", "2", "--checkpoint", d)
        limit = 1 << 20  # a checkpoint of mlp with momentum is about 2 MB

        def small_disk():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        p = train(*MLP, "--steps", "4", "--checkpoint-every", "1", "--checkpoint", d, "--resume", ok=False,
                  preexec_fn=small_disk)
        self.assertFailsClearly(p, "checkpoint of step 3 not written", "step-00000003.gck", "File too large",
                                "the previous checkpoint '%s' is intact" % os.path.join(d, "step-00000002.gck"))
        self.assertEqual(sorted(os.listdir(d)), ["latest", "step-00000002.gck"])
        run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic")
        p = train(*MLP, "--steps", "4", "--checkpoint", d, "--resume")
        self.assertIn("from step 2", p.stdout)


class SignalTest(Case):
    def start(self, *args, env=None):
        p = subprocess.Popen([GRAPHRUN, "train", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        for line in p.stdout:  # the plan is printed once the model is compiled
            if line.startswith("  steps"):
                return p
        raise AssertionError("no run plan:\n" + p.stderr.read())

    def stop_with(self, sig, code):
        d = self.path("c%d" % sig)
        p = self.start(*MLP, "--steps", "1000000", "--checkpoint", d)
        time.sleep(0.5)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, code, out + err)
        name = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}[sig]
        self.assertIn("%s: stopping after this step" % name, err)
        m = re.search(r"stopped by %s after step (\d+) of 1000000; run the same command with --resume" % name, out)
        self.assertTrue(m, out)
        step = int(m.group(1))
        self.assertEqual(self.latest(d), os.path.join(d, "step-%08d.gck" % step))
        return d, step

    def test_sigint_checkpoints_and_resume_is_exact(self):
        d, step = self.stop_with(signal.SIGINT, 130)
        train(*MLP, "--steps", str(step + 3), "--checkpoint", d, "--resume")
        train(*MLP, "--steps", str(step + 3), "--checkpoint", self.path("straight"))
        self.assertSameTensors(self.latest(d), self.latest(self.path("straight")))

    def test_sigterm(self):
        self.stop_with(signal.SIGTERM, 143)

    def test_a_second_sigint_exits_at_once(self):
        d = self.path("c")
        env = dict(os.environ, GRAPHC_TEST_WRITE_PAUSE_MS="20000")  # the final checkpoint write hangs
        p = self.start(*MLP, "--steps", "1000000", "--checkpoint", d, env=env)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        time.sleep(1)
        start = time.time()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        self.assertLess(time.time() - start, 5)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("second interrupt: exiting at once", err)
        self.assertFalse(os.path.exists(os.path.join(d, "latest")))

    def test_no_thread_but_the_stop_thread_takes_the_signals(self):
        # A handler run on a thread inside oneDNN's JIT GEMM writes its frame
        # over the heap (Interrupt.h): every thread of a training run blocks
        # SIGINT and SIGTERM, and one thread that runs no kernel waits for them.
        p = self.start(*MLP, "--steps", "1000000", "--checkpoint", self.path("c"))
        time.sleep(0.5)  # the steps run: OpenMP's and the loaders' threads exist
        taking, threads = [], 0
        for tid in os.listdir("/proc/%d/task" % p.pid):
            try:
                with open("/proc/%d/task/%s/status" % (p.pid, tid)) as f:
                    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
            threads += 1
            blocked = int(status["SigBlk"], 16)
            both = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
            if blocked & both != both:
                taking.append(status["Name"])
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 143, out + err)
        self.assertGreaterEqual(threads, 3)
        self.assertLessEqual(set(taking), {"graphrun-stop"}, "threads that take the stop signals")


class RecordedRunTest(Case):
    """What a checkpoint records of its run decides what later commands say and read."""

    def test_resuming_with_another_optimizer_says_so_in_a_line(self):
        d = self.path("c")
        train(*MLP, "--steps", "2", "--checkpoint", d, "--optimizer", "momentum")
        p = train(*MLP, "--steps", "4", "--checkpoint", d, "--resume", "--optimizer", "adam", ok=False)
        self.assertFailsClearly(p, "it was trained with another optimizer (its slots per variable: "
                                "momentum; this run's: adam_m, adam_v)")
        self.assertNotIn(".weight", p.stderr)
        # Plain SGD has no slots: it resumes from any optimizer's checkpoint, as eval reads it, and
        # says that the momentum is dropped.
        p = train(*MLP, "--steps", "4", "--checkpoint", d, "--resume", "--optimizer", "sgd")
        self.assertIn("note: the checkpoint's optimizer state (momentum per variable) is not used: this "
                      "run's --optimizer sgd keeps none", p.stdout)

    def test_eval_reads_the_data_set_it_was_trained_on(self):
        d = self.path("c")
        train(*MLP, "--steps", "2", "--checkpoint", d, "--synthetic-samples", "200",
              "--synthetic-classes", "3")
        given = run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic", "--synthetic-samples",
                    "200", "--synthetic-classes", "3").stdout
        self.assertEqual(run(GRAPHRUN, "eval", "--checkpoint", d).stdout, given)
        self.assertNotIn("/10000)", given)


class FlagTest(Case):
    """Each number a user can get wrong: one line, exit 1, before any step."""

    def test_train_flags(self):
        cases = [
            (["--steps", "0"], "--steps 0: the run's total number of steps must be at least 1"),
            (["--epochs", "0"], "--epochs 0: the run's total number of epochs must be at least 1"),
            (["--more-steps", "-2"], "--more-steps -2"),
            (["--steps", "3", "--epochs", "1"], "give one"),
            (["--threads", "0"], "--threads 0: the thread count must be at least 1"),
            (["--threads", "-1"], "--threads -1: the thread count must be at least 1"),
            (["--threads", "1000"], "--threads 1000: more than 4 threads per core"),
            (["--loader-threads", "-1"], "--loader-threads -1"),
            (["--lr", "-1"], "--lr -1: the learning rate must be a positive number"),
            (["--lr", "0"], "--lr 0"),
            (["--lr", "nan"], "--lr nan"),
            (["--momentum", "1.5"], "--momentum 1.5"),
            (["--weight-decay", "-0.1"], "--weight-decay -0.1"),
            (["--checkpoint", self.path("c"), "--checkpoint-every", "-1"],
             "--checkpoint-every -1: the steps between checkpoints must be at least 1"),
            (["--checkpoint", self.path("c"), "--checkpoint-every", "0"], "--checkpoint-every 0"),
            (["--checkpoint-every", "5"], "--checkpoint-every needs --checkpoint DIR"),
            (["--checkpoint", self.path("c"), "--keep-checkpoints", "0"], "--keep-checkpoints 0"),
            (["--resume"], "--resume needs --checkpoint DIR"),
            (["--bucket-mb", "-1"], "--bucket-mb -1"),
        ]
        base = ["--model", "mlp", "--batch", "8", "--no-progress"]
        for args, fragment in cases:
            p = train(*base, *args, ok=False)
            self.assertFailsClearly(p, fragment)
            self.assertNotIn("trained", p.stdout)
        self.assertFalse(os.path.exists(self.path("c", "latest")))
        for args, fragment in ((["--threads", "0"], "--threads 0"), (["--batch", "0"], "--batch 0")):
            p = run(GRAPHRUN, "eval", "--checkpoint", self.path("none"), *args, ok=False)
            self.assertFailsClearly(p, fragment)
        np.save(self.path("x.npy"), np.zeros((2, 784), np.float32))
        p = run(GRAPHRUN, "infer", "x.onnx", "--input", self.path("x.npy"), "-o", self.path("y.npy"),
                "--threads", "100000", ok=False)
        self.assertFailsClearly(p, "--threads 100000")

    def test_a_cluster_device_without_the_memory(self):
        cluster = self.path("tiny.json")
        with open(cluster, "w") as f:
            f.write('{"devices": [{"name": "cpu:0", "kind": "cpu", "memory_bytes": 1e11, "relative_speed": 1},'
                    ' {"name": "gpu:0", "kind": "gpu", "memory_bytes": 1, "relative_speed": 1}],'
                    ' "links": [{"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 1e10}]}')
        for extra in ([], ["--emulate"]):
            p = train("--model", "mlp", "--batch", "8", "--steps", "1", "--cluster", cluster, *extra, ok=False)
            self.assertFailsClearly(p, "the plan does not fit its cluster's memory: gpu:0 needs", "and has 1 B")

    def test_eval_takes_the_training_seed(self):
        d = self.path("c")
        train("--model", "small_cnn", "--batch", "32", "--seed", "1", "--steps", "40", "--optimizer", "adam",
              "--lr", "0.003", "--threads", "2", "--no-progress", "--checkpoint", d)
        acc = lambda p: float(re.search(r"accuracy ([0-9.]+)%", p.stdout).group(1))
        own = acc(run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic", "--train-split"))
        self.assertGreater(own, 90)
        self.assertEqual(own, acc(run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic", "--train-split",
                                      "--seed", "1")))
        self.assertLess(acc(run(GRAPHRUN, "eval", "--checkpoint", d, "--data", "synthetic", "--train-split",
                                "--seed", "2")), 50)


if __name__ == "__main__":
    unittest.main(verbosity=2)
