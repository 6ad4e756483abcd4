#!/usr/bin/python3
"""Two hosts on one machine (issue 33): `mpirun --hostfile` across two network namespaces.

scripts/two-hosts runs mpirun with the README's hostfile (node0 slots=2, node1 slots=2) over
TCP between the namespaces node0 and node1. Here 2 hosts x 2 workers x 1 emulated device,
started as the docs start them (no --workers: the world size comes from mpirun), end 5 steps
with the parameters of one process with 4 devices, to 1e-5 of each tensor's largest value
(mlp; small_cnn with BatchNorm `sync`), and node1's link carried at least the gradients of every
step; the README's form, a plan placed once for 4 workers (`graphc place --workers 4`) and run
from the hostfile, ends there too. The comparison is mpi_test's (checkpoints read by
tests/tools/gck.py, compared by tests/tools/sumbound.py).

Exits 77 (ctest's SKIP_RETURN_CODE) with scripts/two-hosts' reason where the machine cannot
make network namespaces (not root, no `ip`, refused).
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from mpi_test import GRAPHC, GRAPHRUN, MLP, Case, run  # noqa: E402

TWO_HOSTS = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "two-hosts")
SKIP = 77
# The bound of issue 33, tighter than mpi_test's K*u bounds (4.7e-5 for mlp, 4.7e-4 for
# small_cnn): what was measured is far below it (docs/multi-worker.md).
BOUND = 1e-5


def two_hosts(*args):
    """scripts/two-hosts -np 4 ARGS...: 2 ranks on node0, 2 on node1."""
    return run(TWO_HOSTS, "-np", "4", *args)


def link_bytes(stderr):
    """What node1's link received during the run, as scripts/two-hosts reports it."""
    m = re.search(r"node1's link received (\d+) bytes", stderr)
    if not m:
        raise AssertionError("scripts/two-hosts did not report node1's link:\n" + stderr)
    return int(m.group(1))


class TwoHosts(Case):
    def test_ranks_land_on_both_hosts(self):
        p = two_hosts("hostname")
        self.assertEqual(sorted(p.stdout.split()), ["node0", "node0", "node1", "node1"], p.stderr)
        self.assertIn("hostfile: node0 slots=2, node1 slots=2", p.stderr)

    def reference(self, what, model, one_process):
        """The parameters of 1 process x 4 devices after 5 steps."""
        ref = self.path(what + "-one-process")
        run(GRAPHRUN, "train", *model, *one_process, "--gpus", "4", "--checkpoint", ref)
        return self.params(ref)

    def check(self, what, ref, run_args, parameters):
        """2 hosts x 2 workers x 1 emulated device (`graphrun train RUN_ARGS`) against `ref`."""
        ckpt = self.path(what + "-two-hosts")
        p = two_hosts(GRAPHRUN, "train", *run_args, "--checkpoint", ckpt)
        self.assertIn("workers    4 processes", p.stdout)
        self.assertEqual(p.stdout.count("trained 5 steps"), 1, p.stdout)
        self.assertSameParams(ref, self.params(ckpt), what + ", 2 hosts x 2 workers", BOUND)
        # Ranks 2 and 3 need node0's part of every step's gradient sum: at least the
        # gradients' bytes per step crossed the link (over shared memory, almost nothing would).
        self.assertGreaterEqual(link_bytes(p.stderr), 5 * 4 * parameters, p.stderr)

    def test_mlp(self):
        mirrored = ["--emulate", "--params", "mirrored"]
        model = MLP + ["--steps", "5"]
        ref = self.reference("mlp", model, mirrored)
        self.check("mlp", ref, model + mirrored + ["--gpus", "1"], 269322)
        # The README's form: a plan placed once for 4 workers, run from the hostfile.
        placed = self.path("model.placed")
        run(GRAPHC, "place", "--model", "mlp", "--batch", "10", "--seed", "3", "--optimizer", "momentum",
            "--workers", "4", "--gpus", "1", "--params", "mirrored", "-o", placed)
        self.check("mlp placed", ref, [placed, "--emulate", "--seed", "3", "--threads", "1", "--no-progress",
                                       "--no-eval", "--steps", "5"], 269322)

    def test_small_cnn_batch_norm_sync(self):
        # small_cnn has dropout: its masks follow (seed, tower), so the reference has the same
        # 4 towers.
        cnn = ["--model", "small_cnn", "--batch", "10", "--seed", "3", "--lr", "0.02", "--threads", "1",
               "--no-progress", "--no-eval", "--steps", "5", "--bn", "sync", "--emulate", "--params",
               "mirrored"]
        self.check("small_cnn", self.reference("small_cnn", cnn, []), cnn + ["--gpus", "1"], 421738)


if __name__ == "__main__":
    probe = subprocess.run([TWO_HOSTS, "--probe"], capture_output=True, text=True)
    if probe.returncode == SKIP:
        print(probe.stderr.strip(), flush=True)
        sys.exit(SKIP)
    unittest.main()
