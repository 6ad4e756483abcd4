#!/usr/bin/python3
"""Training over several worker processes under Open MPI (issue 12).

Every case runs the real binaries under `mpirun --oversubscribe` (as root with
Open MPI's allow-run-as-root variables):

- equivalence: mlp, 5 momentum steps, ends with the parameters of one process
  with 4 devices (within the rounding bound of the step's longest sum, K*u of
  each tensor's largest value: tests/tools/sumbound.py) for 2 workers x 2
  emulated devices (also without --workers: the workers are mpirun's processes),
  4 workers x 1 (over TCP: --mca btl tcp,self), 3 workers
  with uneven parts of the batch, and a plan placed by `graphc place --workers`;
  each rank loads only its part of every global batch, and a folder of images
  some of which cannot be decoded trains on 3 workers as in one process;
  small_cnn with BatchNorm `sync` (statistics over all workers) and `frozen`,
  2 workers x 2 devices and 4 workers x 1, likewise (moving averages included);
  and a run checkpointed on 2 workers and resumed on 4 ends where one
  uninterrupted process ends;
- a plan whose workers differ from mpirun's processes (the message names
  --workers and both numbers), --workers against TF_CONFIG's cluster, srun's
  tasks without PMIx (Slurm's variables, no srun here), or ranks that hold
  different plans: one error line on every rank, non-zero exit;
- clusters of tasks: a cluster file with a chief of 2 devices and a worker of
  1 (mlp; small_cnn with BatchNorm `sync`), run directly and through a plan
  placed by `graphc place --tasks`, and TF_CONFIG from the environment (a chief
  and 2 workers) end with the parameters of one process with 3 devices; ps
  tasks, a world size other than the cluster's and a bad file are one error
  line;
- each step's split of its time (compute, inside the worker, between workers, input) is in
  the metrics (JSON and CSV), every part non-negative and their sum the step's seconds, with
  time between workers on 2 workers and none in one process;
- a rank killed with kill -9, or stalled with SIGSTOP: every other rank exits
  non-zero within --collective-timeout with a message that names the dead or
  silent rank, the collective and the step; after the kill, the last
  checkpoint resumes on 2 workers and follows the loss curve of 3
  uninterrupted workers;
- the chief alone: its evaluation after an epoch takes over twice --collective-timeout, and
  neither the other worker (all-reduce, a synchronous ps task) nor the ps task (synchronous or
  asynchronous) takes it for a stall;
- the broadcast that carries NCCL's unique id (the world's broadcast, through
  mpi_broadcast_probe): every rank ends with rank 0's 128 bytes, and a rank 0
  that never takes part makes the others fail within the timeout;
- where 2 GPUs or more are visible (skipped elsewhere; run by the GPU bundle's
  `mpi` mode): mirrored variables and BatchNorm `sync` on 2 worker processes
  of 1 GPU each (and, with 3 GPUs, a chief of 2 and a worker of 1), summed by
  NCCL across the processes, end with the parameters of one process with as
  many GPUs; a stalled rank makes the other fail within --collective-timeout.
"""
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import gck  # noqa: E402
import sumbound  # noqa: E402

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
GRAPHC = os.path.join(BIN, "graphc")
GRAPHRUN = os.path.join(BIN, "graphrun")
MPIRUN = os.environ.get("GRAPHC_MPIRUN", "mpirun")
PROBE = os.path.join(BIN, "mpi_broadcast_probe")
# mlp on synthetic data, 5 momentum steps of a global batch of 10.
MLP = ["--model", "mlp", "--batch", "10", "--seed", "3", "--optimizer", "momentum",
       "--threads", "1", "--no-progress", "--no-eval"]
ENV = dict(os.environ)
if os.geteuid() == 0:
    ENV.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(*args, ok=True, timeout=300, env=None):
    """`env`: variables to set beyond ENV's."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       env=dict(ENV, **(env or {})))
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def mpirun(n, *args, mca=(), **kw):
    return run(MPIRUN, "--oversubscribe", *mca, "-np", n, *args, **kw)


def step_bound(*model, u16=0.0, roundings=0):
    """How far runs of this model's training step may drift apart when their sums are grouped
    otherwise (workers against one process): K*u of the longest sum, K from `graphc inspect`
    (tests/tools/sumbound.py)."""
    return sumbound.bound(sumbound.longest_sum(*model), u16, roundings)


# The sums the workers group otherwise: the gradients, added within each worker and then across
# workers (or at the ps tasks) where one process adds all towers in rank order, and each rank's
# part of the batch.
def mlp_bound():
    """mlp at batch 10: K = 784 (fc1's inner dimension), 4.7e-5."""
    return step_bound("--model", "mlp", "--batch", "10")


def cnn_bound():
    """small_cnn at batch 10: K = 7840 (conv1's filter gradient over 10 x 28 x 28), 4.7e-4."""
    return step_bound("--model", "small_cnn", "--batch", "10")


def graphrun_errors(stderr):
    return [l for l in stderr.splitlines() if l.startswith("graphrun: error:")]


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphc-mpi-")
        # A cleanup, not tearDown: it also runs when a subclass's setUp skips after this one.
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def params(self, ckpt_dir, step=5):
        a = gck.read(os.path.join(ckpt_dir, "step-%08d.gck" % step))
        return {n: a.array(n) for n in a.names()}

    def assertSameParams(self, ref, got, what, rel):
        """Every tensor within rel of its largest value (rel: a step_bound)."""
        sumbound.assert_within(self, ref, got, rel, what)

    def assertSameBits(self, ref, got, what):
        """Runs that group every sum alike: two ranks add their two parts, where one process adds
        the same two (IEEE addition commutes exactly)."""
        sumbound.assert_same_bits(self, ref, got, what)


class Equivalence(Case):
    """W workers x D devices end where one process with W x D devices ends."""

    def test_workers_match_one_process(self):
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "4", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ref = self.params(ref)
        placed = self.path("mlp.placed")
        run(GRAPHC, "place", "--model", "mlp", "--batch", "10", "--seed", "3", "--workers", "2",
            "--gpus", "2", "--params", "mirrored", "-o", placed)
        run_placed = [placed, "--emulate", "--seed", "3", "--threads", "1", "--no-progress", "--no-eval"]
        cases = [
            ("2 workers x 2 devices, mirrored", 2,
             MLP + ["--workers", "2", "--gpus", "2", "--emulate", "--params", "mirrored"], ()),
            ("4 workers x 1 device over TCP", 4, MLP + ["--workers", "4"], ("--mca", "btl", "tcp,self")),
            ("2 workers x 2 devices, the workers from mpirun's world (no --workers)", 2,
             MLP + ["--gpus", "2", "--emulate", "--params", "mirrored"], ()),
            ("3 workers, parts 4, 3, 3", 3, MLP + ["--workers", "3"], ()),
            ("a plan placed with --workers 2", 2, run_placed, ()),
        ]
        for k, (what, n, args, mca) in enumerate(cases):
            with self.subTest(what):
                ckpt = self.path("case%d" % k)
                p = mpirun(n, GRAPHRUN, "train", *args, "--steps", "5", "--checkpoint", ckpt, mca=mca)
                self.assertSameParams(ref, self.params(ckpt), what, mlp_bound())
                # Only the chief prints the run.
                self.assertEqual(p.stdout.count("graphrun train: model"), 1, p.stdout)
                self.assertEqual(p.stdout.count("trained 5 steps"), 1, p.stdout)
                self.assertIn("workers    %d processes" % n, p.stdout)


    def test_batch_norm_across_workers(self):
        # small_cnn has dropout: its masks follow (seed, tower), so the
        # reference has the same 4 towers.
        cnn = ["--model", "small_cnn", "--batch", "10", "--seed", "3", "--lr", "0.02", "--threads", "1",
               "--no-progress", "--no-eval", "--steps", "5"]
        for bn in ("sync", "frozen"):
            ref = self.path("one-process-" + bn)
            run(GRAPHRUN, "train", *cnn, "--bn", bn, "--gpus", "4", "--emulate", "--params", "mirrored",
                "--checkpoint", ref)
            ref = self.params(ref)
            for n, extra in ((2, ["--gpus", "2", "--emulate", "--params", "mirrored"]), (4, [])):
                with self.subTest(bn=bn, workers=n):
                    ckpt = self.path("%s-%d" % (bn, n))
                    mpirun(n, GRAPHRUN, "train", *cnn, "--bn", bn, "--workers", n, *extra, "--checkpoint", ckpt)
                    self.assertSameParams(ref, self.params(ckpt), "small_cnn --bn %s, %d workers" % (bn, n),
                                          cnn_bound())


    def test_fp16_loss_scaling_across_workers(self):
        # Each worker checks the gradients summed across workers, so every rank skips the same steps and
        # moves the scale alike: 2 workers x 2 emulated GPUs end where one process with 4 ends, scale
        # and skipped-step count included (2^24 overflows f16, so some steps are skipped).
        cnn = ["--model", "small_cnn_nobn", "--batch", "16", "--seed", "3", "--threads", "1", "--no-progress",
               "--no-eval", "--steps", "5", "--emulate", "--params", "cpu", "--precision", "fp16",
               "--loss-scale", "16777216"]
        ref = self.path("fp16-one-process")
        one = run(GRAPHRUN, "train", *cnn, "--gpus", "4", "--checkpoint", ref)
        ckpt = self.path("fp16-workers")
        two = mpirun(2, GRAPHRUN, "train", *cnn, "--gpus", "2", "--workers", "2", "--checkpoint", ckpt)
        ref, got = self.params(ref), self.params(ckpt)
        # The bound: K*u of the longest f32 sum (12544, conv1's filter gradient over 16 x 28 x 28) and
        # one f16 ulp for each of the 7 f16 roundings on the path into conv1's gradient (the two
        # weights cast to f16, conv1's and conv2's outputs, the gradient cast back into the f16
        # layers, conv2's data gradient, conv1's filter gradient): where the workers' f32 sums
        # leave a master weight one f32 ulp from one process's, its f16 copy can round the other
        # way (1.4e-4 measured on conv1.weight.momentum under AVX2, 7.6e-3 the bound).
        self.assertSameParams(ref, got, "fp16, 2 workers x 2 devices",
                              step_bound("--model", "small_cnn_nobn", "--batch", "16", u16=sumbound.F16,
                                         roundings=7))
        self.assertGreater(got["loss_scale/skipped_steps"], 0)
        line = re.compile(r"loss scale: .*")
        self.assertEqual(line.search(two.stdout).group(0), line.search(one.stdout).group(0))

    def test_each_rank_loads_its_part(self):
        # Nothing prefetched (--loader-threads 0): each rank loads exactly
        # its rows of the 5 global batches of 10, parts 4, 3 and 3.
        p = mpirun(3, GRAPHRUN, "train", *MLP, "--workers", "3", "--steps", "5", "--loader-threads", "0")
        self.assertIn("input: samples loaded by each rank 20, 15, 15 (the global batches held 50)", p.stdout)

    def test_skipped_images_as_one_process(self):
        # 120 files of which 5 cannot be decoded, in batches of 10 over 3
        # workers: the skips move the parts, and the 14 steps cross an epoch.
        from PIL import Image
        data = self.path("imgs")
        for k in range(120):
            folder = os.path.join(data, "ab"[k % 2])
            os.makedirs(folder, exist_ok=True)
            name = os.path.join(folder, "%03d.png" % k)
            if k in (3, 40, 41, 77, 118):
                with open(name, "wb") as f:
                    f.write(b"\x89PNG\r\n\x1a\n not an image")
            else:
                pixels = (np.random.RandomState(k).rand(20, 20, 3) * 255).astype(np.uint8)
                Image.fromarray(pixels).save(name)
        cnn = ["--model", "small_cnn", "--num-classes", "2", "--image-size", "28", "--data", "images:" + data,
               "--batch", "10", "--seed", "3", "--lr", "0.02", "--bn", "sync", "--threads", "1", "--no-progress",
               "--no-eval", "--steps", "14", "--loader-threads", "0"]
        ref = self.path("one-process")
        p = run(GRAPHRUN, "train", *cnn, "--gpus", "3", "--emulate", "--params", "mirrored", "--checkpoint", ref)
        self.assertIn("samples could not be loaded", p.stdout)
        ckpt = self.path("workers")
        p = mpirun(3, GRAPHRUN, "train", *cnn, "--workers", "3", "--checkpoint", ckpt)
        self.assertSameParams(self.params(ref, 14), self.params(ckpt, 14), "3 workers skipping images",
                              step_bound("--model", "small_cnn", "--num-classes", "2", "--batch", "10"))
        self.assertIn("samples could not be loaded", p.stdout)
        loaded = re.search(r"input: samples loaded by each rank (\d+), (\d+), (\d+) "
                           r"\(the global batches held 140\)", p.stdout)
        self.assertIsNotNone(loaded, p.stdout)
        # Each rank's share (56, 42, 42 rows) and a few more after each skip,
        # where every rank loaded all 140 when each read the whole batch.
        for share, n in zip((56, 42, 42), loaded.groups()):
            self.assertGreaterEqual(int(n), share, p.stdout)
            self.assertLess(int(n), share + 15, p.stdout)

    def test_resume_on_another_worker_count(self):
        # 5 steps on 2 workers, 5 more on 4: where 10 steps in one process end.
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "10", "--gpus", "4", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ckpt = self.path("resumed")
        mpirun(2, GRAPHRUN, "train", *MLP, "--workers", "2", "--steps", "5", "--checkpoint", ckpt)
        p = mpirun(4, GRAPHRUN, "train", *MLP, "--workers", "4", "--steps", "10", "--resume", "--checkpoint", ckpt)
        self.assertIn("steps 6 to 10 of 10", p.stdout)
        want = gck.read(os.path.join(ref, "step-00000010.gck"))
        got = gck.read(os.path.join(ckpt, "step-00000010.gck"))
        self.assertSameParams({n: want.array(n) for n in want.names()},
                              {n: got.array(n) for n in got.names()}, "resumed on 4 workers", mlp_bound())


class Tasks(Case):
    """Clusters of tasks from a file or TF_CONFIG (ir/Tasks.h)."""

    def write(self, name, obj):
        path = self.path(name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_heterogeneous_workers_match_one_process(self):
        # The chief with 2 GPUs and a worker with 1: towers 2 + 1, parts 7 and
        # 3 of a batch of 10, as one process with 3 devices.
        tasks = self.write("tasks.json", {"chief": [{"host": "localhost", "gpus": 2}],
                                          "worker": [{"host": "localhost", "gpus": 1}]})
        mirrored = ["--emulate", "--params", "mirrored"]
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "3", *mirrored, "--checkpoint", ref)
        ckpt = self.path("tasks")
        p = mpirun(2, GRAPHRUN, "train", *MLP, "--steps", "5", "--tasks", tasks, *mirrored, "--checkpoint", ckpt)
        # The chief adds its towers' gradients, then the worker's: the order of one process's sum.
        self.assertSameBits(self.params(ref), self.params(ckpt), "chief with 2 GPUs, worker with 1")
        self.assertIn("workers    2 processes (mpirun), towers 2, 1; this is rank 0, the chief, with samples "
                      "0..6 of every batch", p.stdout)
        self.assertIn("tasks      chief on localhost (2 GPUs), worker 0 on localhost (1 GPU)", p.stdout)
        # The same plan placed once by graphc, then run.
        placed = self.path("mlp.placed")
        p = run(GRAPHC, "place", "--model", "mlp", "--batch", "10", "--seed", "3", "--tasks", tasks,
                "--params", "mirrored", "--optimizer", "momentum", "-o", placed)
        self.assertIn("2 workers with 2, 1 towers", p.stdout)
        ckpt = self.path("placed")
        mpirun(2, GRAPHRUN, "train", placed, "--emulate", "--seed", "3", "--threads", "1", "--no-progress",
               "--no-eval", "--steps", "5", "--checkpoint", ckpt)
        self.assertSameBits(self.params(ref), self.params(ckpt), "a plan placed with --tasks")

    def test_batch_norm_sync_over_unlike_workers(self):
        tasks = self.write("tasks.json", {"worker": [{"host": "localhost", "gpus": 1},
                                                     {"host": "localhost", "gpus": 2}]})
        cnn = ["--model", "small_cnn", "--batch", "10", "--seed", "3", "--lr", "0.02", "--threads", "1",
               "--no-progress", "--no-eval", "--steps", "5", "--bn", "sync", "--emulate", "--params", "mirrored"]
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *cnn, "--gpus", "3", "--checkpoint", ref)
        ckpt = self.path("tasks")
        mpirun(2, GRAPHRUN, "train", *cnn, "--tasks", tasks, "--checkpoint", ckpt)
        self.assertSameParams(self.params(ref), self.params(ckpt), "small_cnn --bn sync, workers with 1 and 2 GPUs",
                              cnn_bound())

    def test_tf_config_from_the_environment(self):
        # TensorFlow's form: roles and order; the ports document only, --gpus
        # gives every task its devices, and one TF_CONFIG serves every rank.
        config = {"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]},
                  "task": {"type": "worker", "index": 0}}
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "3", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ckpt = self.path("tf-config")
        env = dict(ENV, TF_CONFIG=json.dumps(config))
        p = subprocess.run([MPIRUN, "--oversubscribe", "-x", "TF_CONFIG", "-np", "3", GRAPHRUN, "train", *MLP,
                            "--steps", "5", "--gpus", "1", "--emulate", "--params", "mirrored",
                            "--checkpoint", ckpt], capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("tasks      chief on localhost (1 GPU), worker 0 on localhost (1 GPU), worker 1 on "
                      "localhost (1 GPU)", p.stdout)
        self.assertSameParams(self.params(ref), self.params(ckpt), "TF_CONFIG with a chief and 2 workers",
                              mlp_bound())

    def test_clusters_that_cannot_run(self):
        # A cluster with a ps task needs its rank too.
        with_ps = self.write("ps.json", {"worker": ["localhost", "localhost"], "ps": ["localhost:2222"]})
        p = mpirun(2, GRAPHRUN, "train", *MLP, "--steps", "2", "--tasks", with_ps, ok=False)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 2, p.stderr)
        self.assertIn("the plan is for 2 workers and 1 ps task (3 processes), but mpirun started 2", errors[0])
        # The world size is the cluster's.
        two = self.write("two.json", {"chief": ["localhost"], "worker": ["localhost"]})
        p = mpirun(3, GRAPHRUN, "train", *MLP, "--steps", "2", "--tasks", two, ok=False)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 3, p.stderr)
        self.assertIn("the plan is for 2 workers, but mpirun started 3 processes", errors[0])
        # A bad file: one line naming the file and the entry, before any MPI.
        bad = self.write("bad.json", {"chief": [{"host": "a", "gpus": 1}], "worker": [{"host": "b", "gpu": 1}]})
        for tool in ([GRAPHRUN, "train", *MLP, "--tasks", bad], [GRAPHC, "place", "--model", "mlp", "--tasks", bad,
                                                                  "-o", self.path("x.placed")]):
            p = run(*tool, ok=False)
            self.assertEqual(p.returncode, 1)
            lines = p.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertTrue(lines[0].endswith(bad + ": worker[0]: unknown field 'gpu' (known: gpus, host)"),
                            lines[0])
        p = run(GRAPHRUN, "train", *MLP, "--tasks", two, "--workers", "2", ok=False)
        self.assertIn("--tasks and --workers both give the workers; use one", p.stderr)
class ParameterServers(Case):
    """--ps P: the last P ranks hold the variables and apply the updates."""

    def test_synchronous_matches_one_process(self):
        # 2 ps tasks + 2 workers x 2 emulated devices: the tasks add the
        # workers' sums and apply one update per step, as one process with 4
        # devices does (slots included: the chief gathers them from the tasks).
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "4", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ref = self.params(ref)
        placed = self.path("mlp.placed")
        p = run(GRAPHC, "place", "--model", "mlp", "--batch", "10", "--seed", "3", "--workers", "2",
                "--gpus", "2", "--ps", "2", "-o", placed)
        self.assertIn("2 ps tasks", p.stdout)
        # graphc inspect says which task holds what: fc1.weight outweighs the
        # rest and goes alone to task 0.
        p = run(GRAPHC, "inspect", placed)
        self.assertIn("plan for 2 workers and 2 ps tasks (mpirun -np 4)", p.stdout)
        self.assertIn("ps task 0 holds: fc1.weight (+fc1.weight.momentum)\n", p.stdout)
        self.assertIn("ps task 1 holds: fc1.bias (+fc1.bias.momentum), fc2.weight", p.stdout)
        report = json.loads(run(GRAPHC, "inspect", placed, "--json").stdout)
        self.assertEqual([t["rank"] for t in report["ps_tasks"]], [2, 3])
        self.assertEqual([v["name"] for v in report["ps_tasks"][0]["variables"]], ["fc1.weight"])
        self.assertEqual(report["workers"][0]["to_ps_bytes"], 4 * 269322)
        cases = [
            ("mlp, 2 ps + 2 workers x 2 devices", MLP + ["--workers", "2", "--gpus", "2", "--emulate", "--ps", "2"]),
            ("mlp, a plan placed with --ps 2", [placed, "--emulate", "--seed", "3", "--threads", "1",
                                                "--no-progress", "--no-eval"]),
        ]
        for k, (what, args) in enumerate(cases):
            with self.subTest(what):
                ckpt = self.path("case%d" % k)
                p = mpirun(4, GRAPHRUN, "train", *args, "--steps", "5", "--checkpoint", ckpt)
                self.assertSameParams(ref, self.params(ckpt), what, mlp_bound())
                self.assertEqual(p.stdout.count("graphrun train: model"), 1, p.stdout)
                self.assertIn("ps tasks   2 processes (ranks 2..3)", p.stdout)
                self.assertIn("ps task 0: 5 updates", p.stdout)
                self.assertIn("ps task 1: 5 updates", p.stdout)
                self.assertIn("momentum", " ".join(self.params(ckpt)))

    def test_cluster_with_ps_tasks(self):
        # A cluster file's ps tasks run as --ps does: ranks after the workers.
        tasks = os.path.join(self.dir, "tasks.json")
        with open(tasks, "w") as f:
            f.write('{"chief": ["localhost"], "worker": ["localhost"], "ps": ["localhost:2222", "localhost:2223"]}')
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "2", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ckpt = self.path("cluster")
        p = mpirun(4, GRAPHRUN, "train", *MLP, "--steps", "5", "--tasks", tasks, "--checkpoint", ckpt)
        self.assertIn("ps tasks   2 processes (ranks 2..3)", p.stdout)
        # Two workers of one tower each: the ps tasks add the same two gradients one process adds.
        self.assertSameBits(self.params(ref), self.params(ckpt), "a cluster with 2 ps tasks")
        p = mpirun(4, GRAPHRUN, "train", *MLP, "--steps", "5", "--tasks", tasks, "--ps", "2", ok=False)
        self.assertIn("--ps and --tasks %s both give the ps tasks; use one" % tasks, p.stderr)

    def test_batch_norm_with_ps_tasks(self):
        cnn = ["--model", "small_cnn", "--batch", "10", "--seed", "3", "--lr", "0.02", "--threads", "1",
               "--no-progress", "--no-eval", "--steps", "5"]
        for bn in ("sync", "frozen"):
            with self.subTest(bn=bn):
                ref = self.path("one-process-" + bn)
                run(GRAPHRUN, "train", *cnn, "--bn", bn, "--gpus", "4", "--emulate", "--params", "mirrored",
                    "--checkpoint", ref)
                ckpt = self.path("ps-" + bn)
                mpirun(4, GRAPHRUN, "train", *cnn, "--bn", bn, "--workers", "2", "--gpus", "2", "--emulate",
                       "--ps", "2", "--checkpoint", ckpt)
                self.assertSameParams(self.params(ref), self.params(ckpt), "small_cnn --bn %s, 2 ps" % bn,
                                      cnn_bound())

    def test_checkpoints_move_between_layouts(self):
        # 5 steps with 2 ps tasks and 2 workers, 5 more in one process with
        # 4 devices (mirrored), then 5 more with 1 ps task and 3 workers: where
        # 15 uninterrupted steps in one process end.
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "15", "--gpus", "4", "--emulate", "--params", "mirrored",
            "--checkpoint", ref)
        ckpt = self.path("moved")
        mpirun(4, GRAPHRUN, "train", *MLP, "--workers", "2", "--ps", "2", "--steps", "5", "--checkpoint", ckpt)
        run(GRAPHRUN, "train", *MLP, "--gpus", "4", "--emulate", "--params", "mirrored", "--steps", "10",
            "--resume", "--checkpoint", ckpt)
        p = mpirun(4, GRAPHRUN, "train", *MLP, "--ps", "1", "--steps", "15", "--resume", "--checkpoint", ckpt)
        self.assertIn("workers    3 processes", p.stdout)
        self.assertIn("steps 11 to 15 of 15", p.stdout)
        self.assertSameParams(self.params(ref, 15), self.params(ckpt, 15), "moved between layouts", mlp_bound())

    def test_world_size_differs_from_plan(self):
        p = mpirun(3, GRAPHRUN, "train", *MLP, "--steps", "2", "--workers", "2", "--ps", "2", ok=False)
        self.assertNotEqual(p.returncode, 0)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 3, p.stderr)
        for r in range(3):
            self.assertEqual(sum("rank %d of 3: the plan is for 2 workers (--workers 2) and 2 ps tasks (4 "
                                 "processes), but mpirun started 3 processes: pass `mpirun -np 4`" % r in l
                                 for l in errors), 1, p.stderr)
        p = run(GRAPHRUN, "train", *MLP, "--steps", "2", "--ps", "1", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("the plan is for 1 worker and 1 ps task (2 processes), but this process was not started "
                      "by mpirun", p.stderr)

    def test_refusals(self):
        for args, want in (
                (["--workers", "2", "--gpus", "2", "--emulate", "--params", "mirrored", "--ps", "1"],
                 "parameter-server tasks hold one copy of each variable: plan with --params cpu"),
                (["--workers", "2", "--ps-async"], "--ps-async applies to parameter-server tasks: give --ps P"),
                (["--workers", "2", "--ps", "1", "--loss-scale", "1024"],
                 "dynamic loss scaling (--loss-scale, --precision fp16) is not supported with parameter-server"),
        ):
            with self.subTest(" ".join(args)):
                p = mpirun(3 if "--ps" in args else 2, GRAPHRUN, "train", *MLP, "--steps", "2", *args, ok=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(want, p.stderr)
        cnn = ["--model", "small_cnn", "--batch", "8", "--threads", "1", "--no-progress", "--no-eval", "--steps", "2"]
        p = mpirun(3, GRAPHRUN, "train", *cnn, "--bn", "sync", "--workers", "2", "--ps", "1", "--ps-async", ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--ps-async does not do (no barrier between workers): use --bn local or frozen", p.stderr)


class AsyncParameterServers(Case):
    """--ps-async on Fashion-MNIST: converges; the chief reports staleness."""

    def test_small_cnn_fashion_mnist(self):
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            self.skipTest("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)")
        metrics = self.path("metrics.jsonl")
        p = mpirun(5, GRAPHRUN, "train", "--model", "small_cnn", "--data", "fashion-mnist", "--epochs", "3",
                   "--batch", "96", "--optimizer", "adam", "--lr", "0.001", "--lr-schedule", "cosine",
                   "--workers", "3", "--ps", "2", "--ps-async", "--threads", "1", "--no-progress",
                   "--metrics", metrics, "--checkpoint", self.path("ckpt"), timeout=580)
        accuracy = [float(a) for a in re.findall(r"epoch \d: test accuracy ([\d.]+)%", p.stdout)]
        self.assertEqual(len(accuracy), 3, p.stdout)
        self.assertGreaterEqual(accuracy[-1], 89.0, p.stdout)
        self.assertRegex(p.stdout, r"staleness: the chief's updates [\d.]+ on average, at most \d+")
        # Each task applied every worker's update of every step: 3 x 1875.
        self.assertIn("ps task 0: 5625 updates", p.stdout)
        self.assertIn("ps task 1: 5625 updates", p.stdout)
        steps = [json.loads(l) for l in open(metrics) if '"step"' in l and '"kind":"step"' in l]
        self.assertEqual(len(steps), 1875)
        self.assertTrue(all("staleness" in r for r in steps))
        # Three workers updating one set of variables: most updates are stale.
        self.assertGreater(sum(r["staleness"] for r in steps) / len(steps), 0.5)


class Accumulation(Case):
    """--accumulate K across workers: micro-steps stay in each worker, the sums across workers (or the
    parameter-server exchange) come once per update, and K micro-batches of B train like one batch of K x B."""

    def test_workers_accumulate_like_one_larger_batch(self):
        ref = self.path("one-process")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--checkpoint", ref)  # one batch of 10
        ref = self.params(ref)
        micro = [a if a != "10" else "5" for a in MLP] + ["--accumulate", "2"]
        cases = [
            ("2 workers x 2 devices, mirrored", 2,
             micro + ["--workers", "2", "--gpus", "2", "--emulate", "--params", "mirrored"]),
            ("2 workers and a ps task", 3, micro + ["--workers", "2", "--ps", "1"]),
        ]
        for k, (what, n, args) in enumerate(cases):
            with self.subTest(what):
                ckpt = self.path("case%d" % k)
                p = mpirun(n, GRAPHRUN, "train", *args, "--steps", "5", "--checkpoint", ckpt)
                # Micro-batches of 5 split the batch's sums as well as the workers.
                self.assertSameParams(ref, self.params(ckpt), what, mlp_bound())
                self.assertIn("accumulate 2 micro-batches of 5 per update", p.stdout)
                self.assertEqual(p.stdout.count("trained 5 steps"), 1, p.stdout)
                if "ps" in what:
                    self.assertIn("ps task 0: 5 updates", p.stdout)


class StepTimes(Case):
    """Each step's seconds split into compute, communication inside the worker and between
    workers, and input staging (executor/StepTimes.h): in the metrics and the summary."""

    SPLIT = ("compute", "intra_worker", "inter_worker", "input_staging")

    def steps(self, metrics):
        with open(metrics) as f:
            return [json.loads(l) for l in f if '"kind":"step"' in l]

    def assertSplitAddsUp(self, steps, what):
        for r in steps:
            for k in self.SPLIT:
                self.assertGreaterEqual(r[k], 0, "%s: step %d: %s" % (what, r["step"], k))
            # %.6g in the file: the parts add up to the step to that precision.
            self.assertAlmostEqual(sum(r[k] for k in self.SPLIT), r["seconds"],
                                   delta=1e-5 * r["seconds"] + 1e-6, msg="%s: step %d" % (what, r["step"]))

    def test_split_across_workers_and_alone(self):
        args = ["--model", "small_cnn", "--batch", "32", "--steps", "3", "--threads", "1",
                "--gpus", "1", "--emulate", "--params", "mirrored", "--no-progress", "--no-eval"]
        metrics = self.path("workers.jsonl")
        p = mpirun(2, GRAPHRUN, "train", *args, "--workers", "2", "--metrics", metrics)
        steps = self.steps(metrics)
        self.assertEqual(len(steps), 3)
        self.assertSplitAddsUp(steps, "2 workers")
        # The gradients' sums across the workers are in every step.
        self.assertTrue(all(r["inter_worker"] > 0 for r in steps), steps)
        self.assertRegex(p.stdout, r"step time \(mean after the first\): compute [\d.]+ s, "
                         r"communication inside the worker [\d.]+ s, between workers [\d.]+ s, "
                         r"input [\d.]+ s \(staging [\d.]+, waiting for the loader [\d.]+\)")
        # One process: nothing between workers; the CSV has the same columns.
        csv = self.path("alone.csv")
        run(GRAPHRUN, "train", *args, "--metrics", csv)
        with open(csv) as f:
            rows = [l.rstrip("\n").split(",") for l in f]
        header = rows[0]
        self.assertEqual(header[-6:], list(self.SPLIT) + ["loss_scale", "skipped_steps"])
        steps = [dict(zip(header, r)) for r in rows[1:] if r[0] == "step"]
        self.assertEqual(len(steps), 3)
        steps = [dict({k: float(r[k]) for k in self.SPLIT + ("seconds",)}, step=int(r["step"])) for r in steps]
        self.assertSplitAddsUp(steps, "one process")
        self.assertTrue(all(r["inter_worker"] == 0 for r in steps), steps)


class Mismatch(Case):
    def test_world_size_differs_from_plan(self):
        p = mpirun(2, GRAPHRUN, "train", *MLP, "--steps", "2", "--workers", "3", ok=False)
        self.assertNotEqual(p.returncode, 0)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 2, p.stderr)
        for r in range(2):
            self.assertEqual(sum("rank %d of 2: the plan is for 3 workers (--workers 3), but mpirun started 2 "
                                 "processes: pass `mpirun -np 3`, or leave --workers out to train on 2" % r in l
                                 for l in errors), 1, p.stderr)

    def test_srun_tasks_without_pmix(self):
        # Slurm's srun gives the world size (SLURM_NTASKS in a job step); without PMIx its tasks are
        # not one MPI world, which each task says rather than train alone.
        p = run(GRAPHRUN, "train", *MLP, "--steps", "2", ok=False, env={"SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})
        self.assertEqual(p.returncode, 1)
        self.assertEqual(graphrun_errors(p.stderr), [
            "graphrun: error: srun started 2 processes (SLURM_NTASKS), but MPI joined 1: srun's tasks form one "
            "MPI world only with PMIx (srun --mpi=pmix); or run mpirun inside the allocation"], p.stderr)
        # A batch script's own process (SLURM_NTASKS, no step) trains alone.
        p = run(GRAPHRUN, "train", *MLP, "--steps", "2", env={"SLURM_NTASKS": "4", "SLURM_JOB_ID": "7"})
        self.assertIn("trained 2 steps", p.stdout)

    def test_workers_that_contradict_tf_config(self):
        config = {"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"]},
                  "task": {"type": "chief", "index": 0}}
        p = run(MPIRUN, "--oversubscribe", "-x", "TF_CONFIG", "-np", "2", GRAPHRUN, "train", *MLP, "--steps", "2",
                "--workers", "3", ok=False, env={"TF_CONFIG": json.dumps(config)})
        self.assertNotEqual(p.returncode, 0)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 2, p.stderr)
        self.assertTrue(all("--workers 3, but TF_CONFIG's cluster has 2 training tasks" in l for l in errors),
                        p.stderr)

    def test_workers_without_mpirun(self):
        p = run(GRAPHRUN, "train", *MLP, "--steps", "2", "--workers", "2", ok=False)
        self.assertEqual(p.returncode, 1)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("not started by mpirun", lines[0])

    def test_ranks_with_different_plans(self):
        common = [GRAPHRUN, "train", *MLP, "--steps", "2", "--workers", "2"]
        p = run(MPIRUN, "--oversubscribe", "-np", "1", *common, ":", "-np", "1", *common,
                "--momentum", "0.8", ok=False)
        self.assertNotEqual(p.returncode, 0)
        errors = graphrun_errors(p.stderr)
        self.assertEqual(len(errors), 2, p.stderr)
        self.assertTrue(all("the ranks do not run the same plan" in l for l in errors), p.stderr)


class Failures(Case):
    """A rank that dies or stalls never leaves the others waiting."""

    TIMEOUT = 5  # --collective-timeout, seconds

    def start(self, n, ps=0, extra=()):
        args = [MPIRUN, "--oversubscribe", "-np", str(n), GRAPHRUN, "train", *MLP, "--steps", "1000000",
                "--workers", str(n - ps), "--ps", str(ps), "--collective-timeout", str(self.TIMEOUT), *extra]
        out, err = open(self.path("out"), "w+"), open(self.path("err"), "w+")
        p = subprocess.Popen(args, stdout=out, stderr=err, env=ENV, start_new_session=True)
        ranks = {}
        deadline = time.time() + 60
        while len(ranks) < n and time.time() < deadline:
            time.sleep(0.2)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
                    if os.getsid(int(pid)) != p.pid:
                        continue
                except OSError:
                    continue
                for kv in env:
                    if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                        ranks[int(kv.split(b"=")[1])] = int(pid)
        self.assertEqual(len(ranks), n, "ranks not found")
        # Let them train a while (the chief prints its plan first).
        while "steps      1000000" not in open(self.path("out")).read() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)
        self.assertIsNone(p.poll(), open(self.path("err")).read())
        return p, ranks

    def finish(self, p, ranks, limit):
        t0 = time.time()
        try:
            rc = p.wait(timeout=limit)
        finally:
            for pid in ranks.values():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return rc, time.time() - t0, open(self.path("err")).read()

    def losses(self, metrics):
        with open(metrics) as f:
            rows = [json.loads(l) for l in f]
        return {r["step"]: r["loss"] for r in rows if r["kind"] == "step"}

    def test_killed_rank_then_resume_on_fewer_workers(self):
        ckpt = self.path("ckpt")
        p, ranks = self.start(3, extra=["--checkpoint", ckpt, "--checkpoint-every", "100"])
        # Kill once a checkpoint exists (a loaded machine may take a while).
        deadline = time.time() + 120
        while p.poll() is None and time.time() < deadline and not (
                os.path.isdir(ckpt) and any(f.endswith(".gck") for f in os.listdir(ckpt))):
            time.sleep(0.2)
        os.kill(ranks[1], signal.SIGKILL)
        rc, took, err = self.finish(p, ranks, self.TIMEOUT)
        self.assertNotEqual(rc, 0, err)
        self.assertLess(took, self.TIMEOUT, err)
        # mpirun ends the others (SIGTERM, SIGKILL a second later); waiting in
        # a collective they find rank 1 gone and say so, with the step.
        errors = graphrun_errors(err)
        self.assertGreaterEqual(len(errors), 1, err)
        for line in errors:
            self.assertRegex(line, r"^graphrun: error: rank [02] of 3: (after )?step \d+: .* did not complete: "
                                   r"rank 1 \(pid %d\) is gone \(killed or crashed\)" % ranks[1])
        # The last checkpoint is whole; 2 workers resume from it and follow
        # what 3 uninterrupted workers do from there (same seed, same batch).
        last = sorted(f for f in os.listdir(ckpt) if f.endswith(".gck"))[-1]
        step = int(last[5:13])
        self.assertGreater(step, 0, last)
        gck.read(os.path.join(ckpt, last))
        end = str(step + 10)
        mpirun(2, GRAPHRUN, "train", *MLP, "--workers", "2", "--steps", end, "--resume", "--checkpoint", ckpt,
               "--metrics", self.path("resumed.jsonl"))
        mpirun(3, GRAPHRUN, "train", *MLP, "--workers", "3", "--steps", end, "--metrics", self.path("whole.jsonl"))
        resumed, whole = self.losses(self.path("resumed.jsonl")), self.losses(self.path("whole.jsonl"))
        self.assertEqual(sorted(resumed), list(range(step + 1, step + 11)))
        rel = mlp_bound()  # 2 workers against 3: the batch's parts and sums grouped otherwise
        worst = max(abs(resumed[s] - whole[s]) / max(abs(whole[s]), 1e-3) for s in resumed)
        sumbound.report("loss resumed on 2 workers against 3", worst, rel)
        self.assertLessEqual(worst, rel, (resumed, whole))

    def test_stalled_rank(self):
        p, ranks = self.start(3)
        os.kill(ranks[2], signal.SIGSTOP)
        rc, took, err = self.finish(p, ranks, self.TIMEOUT + 30)
        self.assertNotEqual(rc, 0, err)
        # Rank 0 or 1 names itself, the collective and the step (mostly a
        # sum of gradients; the stop may also come between steps).
        self.assertRegex(err, r"graphrun: error: rank [01] of 3: (after )?step \d+: (the all-reduce '[^']+' across 3 "
                              r"workers .*|agreeing which samples failed to load|agreeing whether to stop) "
                              r"did not complete within 5 s")

    def test_stalled_ps_task(self):
        # Ranks 0 and 1 train, rank 2 is the ps task: the workers wait for
        # its variables no longer than the timeout.
        p, ranks = self.start(3, ps=1)
        os.kill(ranks[2], signal.SIGSTOP)
        rc, took, err = self.finish(p, ranks, self.TIMEOUT + 30)
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"graphrun: error: rank [01] of 3: step \d+: sending the step's gradients to the "
                              r"ps tasks and receiving the variables did not complete within 5 s")

    def test_stalled_worker_with_ps_task(self):
        # The ps task names the worker that went silent (or the other worker
        # times out first, waiting for the ps task's answer).
        p, ranks = self.start(3, ps=1)
        os.kill(ranks[1], signal.SIGSTOP)
        rc, took, err = self.finish(p, ranks, self.TIMEOUT + 30)
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"graphrun: error: rank [02] of 3: .* did not complete within 5 s")
        # The ps task waits for the silent worker's gradients (naming it, and
        # the other worker when that one waits for it elsewhere), or is blocked
        # sending the workers the variables.
        for line in graphrun_errors(err):
            if line.startswith("graphrun: error: rank 2 of 3"):
                # (The silent worker may be named first: both are listed when neither has sent.)
                self.assertRegex(line, r"ps task 0 \(rank 2\)('s variables to the workers | waiting for the gradients "
                                       r"of [^:]*worker 1 \(last heard after step \d+\)[^:]* )did not complete", err)


class ChiefAlone(Case):
    """The chief's evaluation outlasts --collective-timeout: the others wait without a deadline
    (synchronous workers meet it after) and the ps tasks are told it is away."""

    TIMEOUT = 2.0  # short, yet room for the ranks' start-up skew on a loaded machine

    def write_data(self):
        # A test split large enough that evaluating it one image at a time takes seconds.
        data = self.path("fmnist")
        os.makedirs(data)
        for prefix, n in (("train", 64), ("t10k", 60000)):
            pixels = (bytes(range(7, 256, 3)) * (n * 28 * 28 // 83 + 1))[:n * 28 * 28]
            for name, magic, shape, body in ((prefix + "-images-idx3-ubyte.gz", 0x803, (n, 28, 28), pixels),
                                             (prefix + "-labels-idx1-ubyte.gz", 0x801, (n,),
                                              bytes(i % 10 for i in range(n)))):
                with gzip.open(os.path.join(data, name), "wb", compresslevel=1) as f:
                    f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in shape) + body)
        return data

    def test_an_evaluation_longer_than_the_timeout(self):
        data = self.write_data()
        # 4 steps an epoch: epoch 1's evaluation comes before step 5, mid-run.
        train = ["--model", "small_cnn", "--data", "fashion-mnist:" + data, "--batch", "16", "--steps", "6",
                 "--eval-batch", "1", "--threads", "1", "--no-progress", "--collective-timeout", str(self.TIMEOUT)]
        for k, (what, n, args) in enumerate((
                ("2 workers", 2, ["--workers", "2"]),
                ("2 workers and a ps task", 3, ["--workers", "2", "--ps", "1"]),
                ("2 workers and an asynchronous ps task", 3, ["--workers", "2", "--ps", "1", "--ps-async"]))):
            with self.subTest(what):
                metrics = self.path("m%d.jsonl" % k)
                p = mpirun(n, GRAPHRUN, "train", *train, *args, "--metrics", metrics)
                self.assertEqual(len(re.findall(r"epoch 0: test accuracy", p.stdout)), 1, p.stdout)
                self.assertIn("trained 6 steps", p.stdout)
                (evaluation,) = [json.loads(l) for l in open(metrics) if '"kind":"eval"' in l]
                self.assertEqual(evaluation["samples"], 60000)
                # The case proves something only when the evaluation outlasts the timeout.
                self.assertGreater(evaluation["seconds"], 2 * self.TIMEOUT)


class Broadcast(Case):
    """The world's broadcast (executor/dist/MpiCollectives.h): what NCCL's unique id travels by."""

    def test_every_rank_gets_rank_0s_bytes(self):
        for n in (2, 3):
            with self.subTest(ranks=n):
                p = mpirun(n, PROBE)
                lines = sorted(l for l in p.stdout.splitlines() if l.startswith("rank "))
                self.assertEqual(len(lines), n, p.stdout + p.stderr)
                held = {}
                for l in lines:
                    m = re.match(r"rank (\d+) of %d: bytes ([0-9a-f]{256}) hashes ([0-9,]+)$" % n, l)
                    self.assertIsNotNone(m, l)
                    held[int(m.group(1))] = (m.group(2), m.group(3))
                self.assertEqual(sorted(held), list(range(n)))
                root = held[0][0]
                # Not any other rank's own starting bytes (0xa0 + rank, repeated).
                for r in range(1, n):
                    self.assertNotEqual(root, ("%02x" % (0xa0 + r)) * 128)
                for r in range(n):
                    self.assertEqual(held[r][0], root, "rank %d" % r)
                    hashes = held[r][1].split(",")
                    self.assertEqual(len(hashes), n)
                    self.assertEqual(len(set(hashes)), 1, "rank %d sees %s" % (r, hashes))

    def test_a_silent_root_fails_the_others_naming_them(self):
        p = mpirun(3, PROBE, "--stall-root", "--timeout-ms", "1000", ok=False, timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stderr, r"error: rank [12] of 3: the probe's 128 bytes \(broadcast from rank 0\) "
                                   r"at start-up did not complete within 1 s: another rank died or stalled")


def visible_gpus():
    """GPUs this process may use: nvidia-smi's, cut to CUDA_VISIBLE_DEVICES."""
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    n = sum(1 for l in p.stdout.splitlines() if l.startswith("GPU ")) if p.returncode == 0 else 0
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is not None:
        n = min(n, len([d for d in mask.split(",") if d.strip()]))
    return n


class GpuAcrossWorkers(Case):
    """NCCL across worker processes (needs 2 GPUs or more; skipped elsewhere).

    Each rank gets its own GPUs with CUDA_VISIBLE_DEVICES (rank r the r-th set
    of `sets`), so that every worker's gpu:0 is a GPU of its own: NCCL takes
    one rank per physical GPU.
    """

    def setUp(self):
        super().setUp()
        self.gpus = visible_gpus()
        if self.gpus < 2:
            self.skipTest("needs 2 GPUs, %d visible" % self.gpus)

    # What the one-process reference adds to its command line (GpuRanksSharingOneGpu folds
    # its logical GPUs onto the one physical GPU).
    REFERENCE = ()

    def rank_env(self):
        """Shell lines that set rank $OMPI_COMM_WORLD_RANK's environment beyond its GPUs."""
        return ""

    def on_gpus(self, sets):
        """A script that runs graphrun with rank r's GPUs the r-th of `sets`."""
        wrapper = self.path("on-gpus.sh")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\ni=0\nfor s in %s; do\n" % " ".join(sets))
            f.write('  [ "$i" = "$OMPI_COMM_WORLD_RANK" ] && CUDA_VISIBLE_DEVICES=$s && export CUDA_VISIBLE_DEVICES\n')
            f.write("  i=$((i + 1))\ndone\n")
            f.write(self.rank_env())
            f.write('exec "%s" "$@"\n' % GRAPHRUN)
        os.chmod(wrapper, 0o755)
        return wrapper

    def mpirun_on(self, sets, *args, **kw):
        return mpirun(len(sets), self.on_gpus(sets), *args, **kw)

    def two_ranks(self):
        """Each of two ranks' CUDA_VISIBLE_DEVICES."""
        return ["0", "1"]

    def test_mirrored_and_batch_norm_match_one_process(self):
        cnn = ["--model", "small_cnn", "--batch", "10", "--seed", "3", "--lr", "0.02", "--threads", "1",
               "--no-progress", "--no-eval", "--bn", "sync"]
        for what, model in (("mlp", MLP), ("small_cnn --bn sync", cnn)):
            with self.subTest(what):
                ref = self.path("ref-%d" % len(model))
                run(GRAPHRUN, "train", *model, "--steps", "5", "--gpus", "2", "--params", "mirrored",
                    *self.REFERENCE, "--checkpoint", ref)
                ckpt = self.path("two-%d" % len(model))
                self.mpirun_on(self.two_ranks(), "train", *model, "--steps", "5", "--workers", "2", "--gpus", "1",
                               "--params", "mirrored", "--checkpoint", ckpt)
                rel = step_bound(*model[:4])  # NCCL's sum against one process's
                self.assertSameParams(self.params(ref), self.params(ckpt), what + ", 2 workers x 1 GPU", rel)

    def test_unlike_workers_match_one_process(self):
        if self.gpus < 3:
            self.skipTest("needs 3 GPUs, %d visible" % self.gpus)
        ref = self.path("ref")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "3", "--params", "mirrored", "--checkpoint", ref)
        tasks = self.path("tasks.json")
        with open(tasks, "w") as f:
            json.dump({"chief": [{"host": "localhost", "gpus": 2}], "worker": [{"host": "localhost", "gpus": 1}]}, f)
        ckpt = self.path("unlike")
        self.mpirun_on(["0,1", "2"], "train", *MLP, "--steps", "5", "--tasks", tasks, "--params", "mirrored",
                       "--checkpoint", ckpt)
        self.assertSameParams(self.params(ref), self.params(ckpt), "a chief of 2 GPUs and a worker of 1",
                              mlp_bound())

    def test_stalled_rank_fails_the_other_within_the_timeout(self):
        args = [MPIRUN, "--oversubscribe", "-np", "2", self.on_gpus(self.two_ranks()), "train", *MLP,
                "--steps", "1000000", "--workers", "2", "--gpus", "1", "--params", "mirrored",
                "--collective-timeout", "5"]
        err = open(self.path("err"), "w+")
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=ENV, start_new_session=True)
        try:
            rank1 = None
            deadline = time.time() + 120
            while rank1 is None and time.time() < deadline:
                time.sleep(0.5)
                for pid in os.listdir("/proc"):
                    if not pid.isdigit():
                        continue
                    try:
                        if os.getsid(int(pid)) != p.pid:
                            continue
                        environ = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
                        cmd = open("/proc/%s/cmdline" % pid, "rb").read()
                    except OSError:
                        continue
                    if b"OMPI_COMM_WORLD_RANK=1" in environ and b"graphrun" in cmd.split(b"\0")[0]:
                        rank1 = int(pid)
            self.assertIsNotNone(rank1, "rank 1 not found")
            time.sleep(10)  # past start-up: training steps
            self.assertIsNone(p.poll(), open(self.path("err")).read())
            os.kill(rank1, signal.SIGSTOP)
            rc = p.wait(timeout=5 + 60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        text = open(self.path("err")).read()
        self.assertNotEqual(rc, 0, text)
        # Rank 0 waits in the NCCL all-reduce (its communicator aborted) or,
        # when the stop came between steps, in an agreement over MPI; the
        # NCCL case alone is cuda_nccl_tests' silent worker.
        self.assertRegex(text, r"graphrun: error: rank 0 of 2: step \d+: (.*NCCL .*|agreeing which samples "
                               r"failed to load|agreeing whether to stop) did not complete within 5 s")



class GpuRanksSharingOneGpu(GpuAcrossWorkers):
    """NCCL across two worker processes that share one GPU, so that one lent GPU proves it.

    NCCL refuses two ranks of one communicator on one GPU, but looks for duplicate GPUs only
    among ranks of one host as NCCL_HOSTID names it. GRAPHC_NCCL_SHARED_ROUTE picks how it
    is told otherwise:
      hostid      (default) each rank its own NCCL_HOSTID: NCCL takes the ranks for two hosts
                  and sums over sockets on the loopback interface (NCCL_SOCKET_IFNAME=lo);
      multi-rank  NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL's own switch for ranks sharing a GPU
                  (NCCL 2.30 and later).
    The one-process reference folds its 2 logical GPUs onto the same GPU (--emulate) and sums
    them with our own reduction kernel; a test against CPU devices checks the sums against
    the CPU engine. A run that never reaches NCCL proves nothing, so each run's output must
    name the NCCL all-reduce in its plan.
    """

    REFERENCE = ("--emulate",)
    ROUTE = os.environ.get("GRAPHC_NCCL_SHARED_ROUTE", "hostid")

    def setUp(self):
        Case.setUp(self)
        if visible_gpus() < 1:
            self.skipTest("needs a GPU, none visible")
        if self.ROUTE not in ("hostid", "multi-rank"):
            self.fail("GRAPHC_NCCL_SHARED_ROUTE must be hostid or multi-rank, not %r" % self.ROUTE)

    def two_ranks(self):
        return ["0", "0"]

    def rank_env(self):
        # NCCL_DEBUG=INFO: NCCL says its version, that each communicator was made and by
        # which transport its ranks talk; mpirun_on checks and reports it.
        env = "NCCL_DEBUG=INFO; export NCCL_DEBUG\n"
        if self.ROUTE == "multi-rank":
            return env + "NCCL_MULTI_RANK_GPU_ENABLE=1; export NCCL_MULTI_RANK_GPU_ENABLE\n"
        return env + ('NCCL_HOSTID=graphc-rank$OMPI_COMM_WORLD_RANK; NCCL_SOCKET_IFNAME=lo\n'
                      "export NCCL_HOSTID NCCL_SOCKET_IFNAME\n")

    def mpirun_on(self, sets, *args, **kw):
        p = super().mpirun_on(sets, *args, **kw)
        text = p.stdout + p.stderr
        self.assertRegex(text, r"NCCL INFO .*Init COMPLETE", "no NCCL communicator was made")
        said = [l for l in text.splitlines()
                if re.search(r"NCCL version|Init COMPLETE|via (NET|P2P|SHM)|Using network", l)]
        sys.stderr.write("\n[ nccl     ] route %s: %s\n" % (self.ROUTE, " | ".join(dict.fromkeys(
            re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", l) for l in said))[:2000]))
        return p

    def test_unlike_workers_match_one_process(self):
        self.skipTest("needs 3 GPUs: a chief of 2 and a worker of 1")

    def test_sums_match_the_cpu_engine(self):
        """Two ranks on the GPU summing with NCCL against one process on 2 CPU devices, both
        in strict FP32: each side's K*u, so twice the step bound."""
        ref = self.path("cpu")
        run(GRAPHRUN, "train", *MLP, "--steps", "5", "--gpus", "2", "--params", "mirrored", "--emulate",
            "--checkpoint", ref, env={"CUDA_VISIBLE_DEVICES": ""})
        ckpt = self.path("nccl")
        self.mpirun_on(self.two_ranks(), "train", *MLP, "--steps", "5", "--workers", "2", "--gpus", "1",
                       "--params", "mirrored", "--checkpoint", ckpt, env={"GRAPHC_CUDA_TF32": "0"})
        self.assertSameParams(self.params(ref), self.params(ckpt), "NCCL on one GPU against CPU devices",
                              2 * mlp_bound())


if __name__ == "__main__":
    unittest.main()
