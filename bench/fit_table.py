#!/usr/bin/python3
"""The largest batch each strategy fits on a cluster of equal GPUs, and its training checked.

For inception_v3 at 299x299 on four GPUs of 3 GiB (by default), each row below is placed by
`graphc place` at growing batches (doubling, then bisection over the batches the row can
split) until the plan no longer fits the GPUs' memory; the largest batch that fits is
printed with what one GPU would need for that step (the executor's memory plan, as the
placement's refusal states it) and that need over one GPU's memory. With --steps N (N > 0)
each row then trains N steps at its largest batch on emulated GPUs (`graphrun train
--emulate --plain-layouts`, synthetic data), and so does one CPU device on the same samples
with the micro-batches the row normalises by (`--accumulate K`: batch norm computes its
statistics per tower or micro-batch, so K towers train as one device accumulating K
micro-batches), and the parameters and optimizer slots of both are compared: the largest
difference of any tensor over its largest magnitude. Batch norm's moving averages are left
out (towers average theirs once per step, accumulation updates them per micro-batch), and
dropout is off (a tower and a micro-step draw different masks). Both train with one thread
each (--threads), side by side: a kernel that splits a sum over its threads groups it by their
number, and emulated devices share the threads otherwise than one device does, so with more
threads the two sides round apart by ~1e-7 in a step, and a batch norm over a few samples
per micro-batch carries that to O(1) by the second step (inception_v3 at 75x75, micro-batches
of 2: one tensor 9e-8 apart after one step, every tensor O(1) apart after two; with one
thread, bit-identical after three).

    bench/fit_table.py                           # search only: a few minutes
    bench/fit_table.py --steps 2                 # and train each row: long on a CPU
    bench/fit_table.py --image-size 75 --memory-mib 150 --steps 2 --only pipeline

Rows (--only takes their keys, comma-separated):
  one         one GPU (a cluster of one of the GPUs), the variables on the host
  one-rc      the same with --recompute auto
  dp          data parallel, a tower per GPU, the variables on the host
  dp-rc-shard data parallel, variables mirrored, --shard-optimizer --recompute auto
  mp          --strategy model-parallel
  mp-rc       the same with --recompute auto
  pipe        --strategy pipeline, 4 stages x --micro-batches (default 8), 1F1B
  pipe-rc     the same with --recompute auto

Prints figures, asserts nothing; the machine's name and ISA come first.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "tools"))
import gck  # noqa: E402


def rows(micro):
    """(key, title, GPUs, flags, the batch's unit, the reference's K for a batch)."""
    pipe = ["--strategy", "pipeline", "--micro-batches", str(micro)]
    rc = ["--recompute", "auto"]
    return [
        ("one", "one GPU", 1, [], 1, lambda b: 1),
        ("one-rc", "one GPU, --recompute auto", 1, rc, 1, lambda b: 1),
        ("dp", "data parallel, 4 towers", 4, [], 4, lambda b: 4),
        ("dp-rc-shard", "data parallel, mirrored, --shard-optimizer, --recompute auto", 4,
         ["--params", "mirrored", "--shard-optimizer"] + rc, 4, lambda b: 4),
        ("mp", "model parallel", 4, ["--strategy", "model-parallel"], 1, lambda b: 1),
        ("mp-rc", "model parallel, --recompute auto", 4, ["--strategy", "model-parallel"] + rc, 1,
         lambda b: 1),
        ("pipe", "pipeline, 4 stages x %d micro-batches" % micro, 4, pipe, micro,
         lambda b: micro),
        ("pipe-rc", "pipeline, 4 x %d, --recompute auto" % micro, 4, pipe + rc, micro,
         lambda b: micro),
    ]


def write_cluster(path, gpus, memory):
    dev = lambda name, kind, m: {"name": name, "kind": kind, "memory_bytes": m,
                                 "relative_speed": 1}
    names = ["gpu:%d" % i for i in range(gpus)]
    links = [{"endpoints": ["cpu:0", g], "bandwidth": 64e9} for g in names]
    links += [{"endpoints": [a, b], "bandwidth": 450e9}
              for i, a in enumerate(names) for b in names[i + 1:]]
    with open(path, "w") as f:
        json.dump({"devices": [dev("cpu:0", "cpu", 64 << 30)] +
                   [dev(g, "gpu", memory) for g in names], "links": links}, f)


def machine(graphrun):
    name = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    isa = subprocess.run([graphrun, "cpu"], capture_output=True, text=True).stdout.strip()
    return "%s; %s" % (name, isa)


class Bench:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.graphc = os.path.join(args.bin, "graphc")
        self.graphrun = os.path.join(args.bin, "graphrun")
        self.model = ["--model", args.model, "--image-size", str(args.image_size)]
        self.clusters = {}
        for gpus in (1, 4):
            self.clusters[gpus] = os.path.join(tmp, "gpus-%d.json" % gpus)
            write_cluster(self.clusters[gpus], gpus, args.memory_mib << 20)
        self.tiny = os.path.join(tmp, "tiny.json")
        write_cluster(self.tiny, 1, 1 << 20)
        # The refusal's advice is not needed here: the fit advisor stops after its first try.
        self.env = dict(os.environ, GRAPHC_FIT_ADVICE_SECONDS="0.001")

    def place(self, gpus, flags, batch, cluster=None):
        """(fits, graphc's output, seconds)."""
        start = time.time()
        p = subprocess.run([self.graphc, "place", *self.model, "--batch", str(batch),
                            "--cluster", cluster or self.clusters[gpus], *flags,
                            "-o", os.path.join(self.tmp, "plan.placed")],
                           capture_output=True, text=True, env=self.env)
        out = p.stdout + p.stderr
        if p.returncode != 0 and not re.search(r"needs [0-9.]+ [KMG]?i?B .*and has", out):
            raise SystemExit("graphc place failed for another reason than memory:\n" + out)
        return p.returncode == 0, out, time.time() - start

    def largest(self, gpus, flags, unit):
        """The largest multiple of `unit` that fits (0: none), and the seconds of its place.
        Two samples a tower or micro-batch at least: a training batch norm needs more than one
        value per channel."""
        fits = lambda k: self.place(gpus, flags, k * unit)
        lo = 2
        ok, _, seconds = fits(lo)
        if not ok:
            return 0, seconds
        hi = 2 * lo
        while True:
            ok, _, seconds_hi = fits(hi)
            if not ok:
                break
            lo, seconds, hi = hi, seconds_hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok, _, seconds_mid = fits(mid)
            if ok:
                lo, seconds = mid, seconds_mid
            else:
                hi = mid
        return lo * unit, seconds

    def one_gpu_need(self, batch):
        """What one GPU needs for the whole step at `batch` (GiB), from the refusal."""
        _, out, _ = self.place(1, [], batch, self.tiny)
        m = re.search(r"gpu:0 needs ([0-9.]+) (GiB|MiB)", out)
        if not m:
            raise SystemExit("no need in graphc's refusal:\n" + out)
        return float(m.group(1)) / (1024 if m.group(2) == "MiB" else 1)

    def start(self, name, flags, batch):
        """Starts --steps steps of `flags` at `batch`; finish() waits for them."""
        ckpt = os.path.join(self.tmp, name)
        metrics = os.path.join(self.tmp, name + ".jsonl")
        p = subprocess.Popen([self.graphrun, "train", *self.model, "--batch", str(batch), *flags,
                              "--steps", str(self.args.steps), "--threads", str(self.args.threads),
                              "--plain-layouts", "--seed", "1", "--dropout", "0", "--no-eval",
                              "--no-progress", "--checkpoint", ckpt, "--metrics", metrics],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return name, p, ckpt, metrics

    @staticmethod
    def finish(run):
        """The checkpoint after the steps of a start()ed run, and its median step (s)."""
        name, p, ckpt, metrics = run
        out = p.communicate()[0]
        if p.returncode != 0:
            raise SystemExit("graphrun train (%s) failed (exit %d%s):\n%s" % (
                name, p.returncode, ", killed: out of memory?" if p.returncode == -9 else "", out))
        with open(metrics) as f:
            steps = [json.loads(line) for line in f if line.strip()]
        seconds = sorted(s["seconds"] for s in steps if s.get("kind") == "step")
        with open(os.path.join(ckpt, "latest")) as f:
            return os.path.join(ckpt, f.read().strip()), seconds[len(seconds) // 2]


def difference(a, b):
    """The largest |a - b| of any tensor over its largest |b|, moving averages left out."""
    x, y = gck.read(a), gck.read(b)
    worst = 0.0
    for name in y.names():
        if "running_" in name:
            continue
        want, got = y.array(name).astype(np.float64), x.array(name).astype(np.float64)
        largest = max(float(np.abs(want).max()), 1e-6)
        worst = max(worst, float(np.abs(got - want).max()) / largest)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--image-size", type=int, default=299)
    ap.add_argument("--memory-mib", type=int, default=3072, help="each GPU's memory")
    ap.add_argument("--micro-batches", type=int, default=8, help="the pipeline rows' M")
    ap.add_argument("--steps", type=int, default=0, help="train each row this many steps")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of each training (1: the sums are grouped alike on both sides)")
    ap.add_argument("--only", default="", help="row keys, comma-separated")
    ap.add_argument("--one-after-another", action="store_true",
                    help="train the two sides one after the other (when both do not fit in memory)")
    args = ap.parse_args()
    chosen = [r for r in rows(args.micro_batches)
              if not args.only or r[0] in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        b = Bench(args, tmp)
        print("%s %dx%d on GPUs of %d MiB; %s" % (args.model, args.image_size, args.image_size,
                                                   args.memory_mib, machine(b.graphrun)))
        print("| plan | largest batch | one GPU needs | x one GPU's memory | place (s) |"
              + (" trained: max difference | step (s) |" if args.steps else ""))
        print("|---|---|---|---|---|" + ("---|---|" if args.steps else ""))
        for key, title, gpus, flags, unit, k in chosen:
            batch, seconds = b.largest(gpus, flags, unit)
            if batch == 0:
                print("| %s | none | | | %.1f |" % (title, seconds))
                continue
            need = b.one_gpu_need(batch)
            line = "| %s | %d | %.2f GiB | %.2f | %.1f |" % (
                title, batch, need, need * 1024 / args.memory_mib, seconds)
            if args.steps:
                emulated = ["--cluster", b.clusters[gpus], "--emulate"] + flags
                # Side by side (each takes --threads threads), or one after the other.
                sides = [(key, emulated, batch),
                         (key + "-reference", ["--accumulate", str(k(batch))], batch // k(batch))]
                if args.one_after_another:
                    (got, step), (want, _) = [b.finish(b.start(*side)) for side in sides]
                else:
                    (got, step), (want, _) = [b.finish(r) for r in [b.start(*side) for side in sides]]
                line += " %.2e | %.1f |" % (difference(got, want), step)
            print(line, flush=True)


if __name__ == "__main__":
    main()
