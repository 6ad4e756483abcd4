#!/usr/bin/env python3
"""--shard-optimizer from the command line (issue 31, point 4; docs/placement.md).

graphc place says how much of the optimizer state each device keeps; graphrun train on emulated
GPUs gives the unsharded mirrored run's parameters bit for bit; a checkpoint of either run
resumes in the other (checkpoints hold whole slots); every combination the flag does not
support is one error line and a non-zero exit.
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gck  # noqa: E402
from cli_test import GRAPHC, GRAPHRUN, CliCase, run  # noqa: E402

BASE = ["--model", "small_cnn", "--batch", "16", "--seed", "7", "--threads", "2", "--no-progress",
        "--no-eval", "--optimizer", "adam", "--lr", "0.002", "--synthetic-samples", "80", "--emulate"]
SMALL = BASE + ["--params", "mirrored"]


def train(*args, ok=True):
    return run(GRAPHRUN, "train", *args, ok=ok)


class ShardOptimizerCliTest(gck.CheckpointAssertions, CliCase):
    def test_place_reports_the_slots_each_device_keeps(self):
        def var_mib(*extra):
            out = self.path("m.placed")
            p = run(GRAPHC, "place", "--model", "inception_v3", "--gpus", "4", "--batch", "32",
                    "--params", "mirrored", "--optimizer", "adam", "-o", out, *extra)
            table = run(GRAPHC, "inspect", out).stdout
            row = next(l for l in table.splitlines() if l.startswith("gpu:0"))
            return p.stdout, table, float(row.split()[3])
        out, table, sharded = var_mib("--shard-optimizer")
        m = re.search(r"optimizer slots sharded over 4 devices: ([\d.]+) MiB on each at most "
                      r"\(([\d.]+) MiB whole", out)
        self.assertIsNotNone(m, out)
        self.assertAlmostEqual(float(m.group(1)), float(m.group(2)) / 4, delta=0.2)
        self.assertIn("optimizer slots sharded over 4 devices", table)
        _, plain, whole = var_mib()
        self.assertNotIn("sharded", plain)
        # Adam's two slots are twice the parameters: 3P against P + 2P/4.
        self.assertAlmostEqual(sharded / whole, 1.5 / 3, delta=0.01)

    def test_a_refusal_counts_each_devices_piece_of_the_slots(self):
        """A sharded plan that does not fit names, per device, the slots it holds (a quarter of
        Adam's two slots on 4 GPUs), not the whole slots; and one that fits only because of the
        sharding is placed, not refused."""
        from placement_cli_test import write_cluster
        args = ["--model", "inception_v3", "--image-size", "75", "--batch", "16", "--params", "mirrored",
                "--optimizer", "adam", "--shard-optimizer", "-o", self.path("m.placed")]
        os.environ["GRAPHC_FIT_ADVICE_SECONDS"] = "0.001"  # the advice is not read here
        self.addCleanup(os.environ.pop, "GRAPHC_FIT_ADVICE_SECONDS")
        tiny = write_cluster(self.path("tiny.json"), 64e9, gpus=4, gpu_memory=64 << 20)
        p = run(GRAPHC, "place", *args, "--cluster", tiny, ok=False)
        self.assertNotEqual(p.returncode, 0)
        parts = re.search(r"gpu:0 needs ([\d.]+) MiB = variables ([\d.]+) MiB \+ optimizer slots ([\d.]+) MiB",
                          p.stderr)
        self.assertIsNotNone(parts, p.stderr)
        need, variables, slots = map(float, parts.groups())
        self.assertAlmostEqual(slots, 2 * variables / 4, delta=0.2)  # Adam's m and v, a quarter each
        # Between the sharded need and the need with whole slots on every device: placed.
        between = int(need + 0.75 * variables) << 20
        roomy = write_cluster(self.path("roomy.json"), 64e9, gpus=4, gpu_memory=between)
        p = run(GRAPHC, "place", *args, "--cluster", roomy)
        self.assertIn("optimizer slots sharded over 4 devices", p.stdout)

    def test_trains_the_mirrored_bits_and_resumes_across_modes(self):
        d = self.path
        train(*SMALL, "--gpus", "2", "--steps", "6", "--checkpoint", d("mirrored"))
        train(*SMALL, "--gpus", "2", "--steps", "6", "--checkpoint", d("sharded"), "--shard-optimizer")
        self.assertSameTensors(self.latest(d("mirrored")), self.latest(d("sharded")))
        # Three steps sharded, three more without; and the other way round.
        train(*SMALL, "--gpus", "2", "--steps", "3", "--checkpoint", d("a"), "--shard-optimizer")
        train(*SMALL, "--gpus", "2", "--steps", "6", "--checkpoint", d("a"), "--resume")
        self.assertSameTensors(self.latest(d("mirrored")), self.latest(d("a")))
        train(*SMALL, "--gpus", "2", "--steps", "3", "--checkpoint", d("b"))
        train(*SMALL, "--gpus", "2", "--steps", "6", "--checkpoint", d("b"), "--resume",
              "--shard-optimizer")
        self.assertSameTensors(self.latest(d("mirrored")), self.latest(d("b")))

    def test_four_gpus_momentum(self):
        args = [a if a != "adam" else "momentum" for a in SMALL] + ["--gpus", "4", "--steps", "3"]
        train(*args, "--checkpoint", self.path("m"))
        train(*args, "--checkpoint", self.path("s"), "--shard-optimizer")
        self.assertSameTensors(self.latest(self.path("m")), self.latest(self.path("s")))

    def test_gradient_accumulation(self):
        args = SMALL + ["--gpus", "2", "--steps", "2", "--accumulate", "2"]
        train(*args, "--checkpoint", self.path("m"))
        train(*args, "--checkpoint", self.path("s"), "--shard-optimizer")
        self.assertSameTensors(self.latest(self.path("m")), self.latest(self.path("s")))

    def test_unsupported_combinations_fail_clearly(self):
        place = [GRAPHC, "place", "--model", "small_cnn", "--gpus", "2", "--batch", "16",
                 "-o", self.path("m.placed"), "--shard-optimizer"]
        for params in ("cpu", "gpu:0", "spread", "auto"):
            self.assertFailsClearly(run(*place, "--params", params, ok=False),
                                    "--shard-optimizer shards the optimizer state of mirrored "
                                    "variables: it needs --params mirrored (got --params %s)" % params)
        self.assertFailsClearly(run(*place, "--params", "mirrored", "--workers", "2", ok=False),
                                "--shard-optimizer runs in one process")
        self.assertFailsClearly(run(*place, "--params", "mirrored", "--loss-scale", "1024", ok=False),
                                "--shard-optimizer does not combine with dynamic loss scaling")
        self.assertFailsClearly(run(*place, "--params", "mirrored", "--strategy", "model-parallel",
                                    ok=False),
                                "--shard-optimizer shards the optimizer state over data-parallel towers")
        p = train(*BASE, "--gpus", "2", "--steps", "1", "--params", "cpu", "--shard-optimizer", ok=False)
        self.assertFailsClearly(p, "it needs --params mirrored (got --params cpu)")


if __name__ == "__main__":
    unittest.main()
