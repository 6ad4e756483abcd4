#!/usr/bin/python3
"""End-to-end tests of the graphc and graphrun command lines.

Each test runs the real binaries (GRAPHC_BIN, default build/bin) in a scratch
directory. Bad input must give one clear line on stderr and a non-zero exit
status, never a crash (a signal) or a hang.
"""
import csv
import gzip
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
GRAPHC = os.path.join(BIN, "graphc")
GRAPHRUN = os.path.join(BIN, "graphrun")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sumbound  # noqa: E402


def run(*args, ok=True, timeout=600):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def step_bound(*model):
    """K*u of the longest sum of the model's training step (tests/tools/sumbound.py)."""
    return sumbound.bound(sumbound.longest_sum(*model))


def longest_dot_product(model):
    """The most terms one output of a PyTorch model's convolutions and linear layers sums."""
    import torch
    k = 1
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            k = max(k, m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1])
        elif isinstance(m, torch.nn.Linear):
            k = max(k, m.in_features)
    return k


def resnet18_training_gflop(batch, size):
    """GFLOP of one training step's convolutions and matrix products in torchvision's
    resnet18: each layer's forward, data gradient and filter gradient, less the data
    gradient of the first convolution (the input needs none); 2 FLOP per multiply-add."""
    import torch
    import torchvision
    macs = []

    def count(module, inputs, out):
        if isinstance(module, torch.nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            macs.append(out.numel() * k)
        else:
            macs.append(out.numel() * module.in_features)

    model = torchvision.models.resnet18()
    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.register_forward_hook(count)
    with torch.no_grad():
        model(torch.zeros(batch, 3, size, size))
    return 2e-9 * (3 * sum(macs) - macs[0])


def dnnl_isa():
    """oneDNN's instruction set here, as `graphrun cpu` names it: the CPU's within
    GRAPHC_CPU_ISA and ONEDNN_MAX_CPU_ISA (e.g. avx512_core_bf16, avx2, sse41)."""
    line = run(GRAPHRUN, "cpu").stdout
    return re.search(r"oneDNN (\S+)", line).group(1)


def winograd_here():
    """Whether oneDNN 2.6 has Winograd convolutions here: AVX-512, not capped below it."""
    return dnnl_isa().startswith("avx512")


class CliCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphc-cli-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertFailsClearly(self, p, *fragments):
        """A refused command: non-zero status (not a signal), one error line naming the problem."""
        self.assertGreater(p.returncode, 0, "expected failure:\n" + p.stdout + p.stderr)
        self.assertLess(p.returncode, 128, "crashed:\n" + p.stderr)
        errors = [l for l in p.stderr.splitlines() if "error:" in l]
        self.assertEqual(len(errors), 1, p.stderr)
        for f in fragments:
            self.assertIn(f, p.stderr)


class GraphcTest(CliCase):
    def inspect_json(self, *args):
        return json.loads(run(GRAPHC, "inspect", "--json", *args).stdout)

    def test_inception_counts_match_torchvision(self):
        s = self.inspect_json("--model", "inception_v3", "--batch", "1")
        self.assertEqual(s["parameters"]["elements"], 23834568)
        macs = s["macs"]
        self.assertLess(abs(macs / 5.71e9 - 1), 0.01, macs)
        aux = self.inspect_json("--model", "inception_v3", "--aux-logits", "--batch", "1")
        self.assertEqual(aux["parameters"]["elements"], 27161264)

    def test_print_parses_back(self):
        first = run(GRAPHC, "print", "--model", "small_cnn").stdout
        with open(self.path("m.gir"), "w") as f:
            f.write(first)
        self.assertEqual(run(GRAPHC, "print", self.path("m.gir")).stdout, first)

    def test_export_is_valid_onnx_and_reimports(self):
        out = self.path("small.onnx")
        run(GRAPHC, "export", "--model", "small_cnn", "-o", out)
        import onnx
        onnx.checker.check_model(onnx.load(out))
        a = self.inspect_json("--model", "small_cnn")
        b = self.inspect_json(out)
        self.assertEqual(a["parameters"]["elements"], b["parameters"]["elements"])

    def test_bad_model_files(self):
        empty = self.path("empty.onnx")
        open(empty, "w").close()
        self.assertFailsClearly(run(GRAPHC, "inspect", empty, ok=False), "empty.onnx")
        text = self.path("notes.txt")
        with open(text, "w") as f:
            f.write("these are not weights\n")
        self.assertFailsClearly(run(GRAPHC, "inspect", text, ok=False), "notes.txt")
        run(GRAPHC, "export", "--model", "mlp", "-o", self.path("mlp.onnx"))
        data = open(self.path("mlp.onnx"), "rb").read()
        with open(self.path("cut.onnx"), "wb") as f:
            f.write(data[: len(data) // 3])
        self.assertFailsClearly(run(GRAPHC, "inspect", self.path("cut.onnx"), ok=False), "cut.onnx")
        bad = self.path("bad.gir")
        with open(bad, "w") as f:
            f.write("module m {\n  graph main {\n    %x = Input : f32[2\n")
        self.assertFailsClearly(run(GRAPHC, "print", bad, ok=False), "bad.gir:4:1:")
        self.assertFailsClearly(run(GRAPHC, "inspect", "--model", "resnet99", ok=False), "inception_v3")
        self.assertFailsClearly(run(GRAPHC, "inspect", self.path("missing.onnx"), ok=False), "missing.onnx")

    def test_place_inspect_view(self):
        placed = self.path("cnn.placed")
        p = run(GRAPHC, "place", "--model", "small_cnn_nobn", "--gpus", "4", "--params", "spread",
                "--batch", "64", "-o", placed, "--explain", "--dump-dir", self.path("dumps"))
        self.assertIn("requested", p.stdout)
        dumps = sorted(os.listdir(self.path("dumps")))
        self.assertTrue(dumps[0].startswith("0001.after_"), dumps)
        self.assertTrue(any("place-devices" in d for d in dumps), dumps)
        report = run(GRAPHC, "inspect", placed).stdout
        for d in ("cpu:0", "gpu:0", "gpu:3"):
            self.assertIn(d, report)
        run(GRAPHC, "view", placed, "-o", self.path("v.html"))
        self.assertIn("<html", open(self.path("v.html")).read().lower())
        run(GRAPHC, "view", placed, "-o", self.path("v.dot"))
        self.assertIn("digraph", open(self.path("v.dot")).read())
        # A graph Graphviz would take minutes over: one line at once, no file; HTML takes it.
        big = self.path("r18.placed")
        run(GRAPHC, "place", "--model", "resnet18", "--image-size", "32", "--gpus", "2", "--batch", "8",
            "-o", big)
        p = run(GRAPHC, "view", big, "-o", self.path("big.svg"), ok=False, timeout=30)
        self.assertFailsClearly(p, "more than Graphviz lays out in reasonable time", "write .html")
        self.assertFalse(os.path.exists(self.path("big.svg")))
        run(GRAPHC, "view", big, "-o", self.path("big.html"))

    def test_inspect_a_plan_for_several_workers(self):
        # A chief with 2 GPUs and a worker with 1, mlp mirrored: each worker as
        # its rank runs it, the gradients summed inside it and then across.
        tasks = self.path("tasks.json")
        with open(tasks, "w") as f:
            json.dump({"chief": [{"host": "node0", "gpus": 2}], "worker": [{"host": "node1", "gpus": 1}]}, f)
        placed = self.path("mlp.placed")
        run(GRAPHC, "place", "--model", "mlp", "--batch", "10", "--tasks", tasks, "--params", "mirrored",
            "--optimizer", "momentum", "-o", placed)
        report = json.loads(run(GRAPHC, "inspect", "--json", placed).stdout)
        self.assertEqual((report["towers"], report["global_batch"]), (3, 10))
        chief, worker = report["workers"]
        self.assertEqual((chief["task"], chief["towers"], chief["sample_offset"], chief["samples"]),
                         ("chief on node0", 2, 0, 7))
        self.assertEqual((worker["task"], worker["towers"], worker["sample_offset"], worker["samples"]),
                         ("worker 0 on node1", 1, 7, 3))
        self.assertEqual([d["device"] for d in chief["cost"]["devices"]], ["cpu:0", "gpu:0", "gpu:1"])
        self.assertEqual([d["device"] for d in worker["cost"]["devices"]], ["cpu:0", "gpu:0"])
        params = 269322 * 4  # mlp's float32 parameters, one bucket
        # Inside the chief, a ring of 2 sends 2(n-1)/n of the bucket each way;
        # the worker's one tower has no one to reduce with.
        pairs = {(t["from"], t["to"]): t["bytes"] for t in chief["cost"]["traffic"]}
        self.assertEqual(pairs[("gpu:0", "gpu:1")], params)
        self.assertEqual(pairs[("gpu:1", "gpu:0")], params)
        self.assertFalse([t for t in worker["cost"]["traffic"] if t["from"].startswith("gpu")
                          and t["to"].startswith("gpu")])
        # Between the 2 workers: the bucket and the loss, 2(W-1)/W of each.
        for w in (chief, worker):
            self.assertEqual((w["between_workers_bytes"], w["between_workers_sums"]), (params + 4, 2))
        # The chief's 7 samples cost more than the worker's 3, and each GPU
        # holds a replica of the parameters and their momentum.
        flops = [sum(d["flops"] for d in w["cost"]["devices"]) for w in (chief, worker)]
        self.assertGreater(flops[0], 2 * flops[1])
        for w in (chief, worker):
            for d in w["cost"]["devices"]:
                self.assertEqual(d["variable_bytes"], 2 * params if d["device"].startswith("gpu") else 0)
        text = run(GRAPHC, "inspect", placed).stdout
        self.assertIn("plan for 2 workers (mpirun -np 2), 3 towers, global batch 10", text)
        self.assertRegex(text, r"0\s+chief on node0\s+2\s+0\.\.6")
        self.assertRegex(text, r"1\s+worker 0 on node1\s+1\s+7\.\.9")
        self.assertIn("rank 1: worker 0 on node1, the part of the plan it runs:", text)

    def test_parameter_bytes_follow_the_mode(self):
        def var_mib(mode, gpus=4):
            placed = self.path("m-%s.placed" % mode.replace(":", ""))
            run(GRAPHC, "place", "--model", "small_cnn_nobn", "--gpus", str(gpus), "--params", mode,
                "--batch", "32", "-o", placed)
            rows = json.loads(run(GRAPHC, "inspect", "--json", placed).stdout)["devices"]
            return {r["device"]: r["variable_bytes"] for r in rows}
        cpu = var_mib("cpu")
        self.assertGreater(cpu["cpu:0"], 0)
        self.assertEqual(sum(v for d, v in cpu.items() if d != "cpu:0"), 0)
        mirrored = var_mib("mirrored")
        self.assertEqual(len({mirrored["gpu:%d" % i] for i in range(4)}), 1)
        self.assertEqual(mirrored["gpu:0"], cpu["cpu:0"])

    def test_place_takes_the_batch_and_towers_it_is_given(self):
        # The command users are told, on a model with a fixed batch: that batch.
        fixed, symbolic = self.path("fixed.onnx"), self.path("symbolic.onnx")
        run(GRAPHC, "export", "--model", "mlp", "--batch", "8", "-o", fixed)
        run(GRAPHC, "export", "--model", "mlp", "-o", symbolic)
        p = run(GRAPHC, "place", fixed, "--gpus", "4", "-o", self.path("a.placed"))
        self.assertIn("4 towers, global batch 8)", p.stdout)
        # A symbolic batch and no --batch: 32 in all, as graphrun train takes, and it says so.
        p = run(GRAPHC, "place", symbolic, "--gpus", "4", "-o", self.path("b.placed"))
        self.assertIn("global batch 32: the model's batch is symbolic and no --batch was given, so 32 in all, "
                      "as graphrun train takes", p.stdout)
        # --towers is honoured, not replaced by the GPU count.
        p = run(GRAPHC, "place", symbolic, "--gpus", "4", "--towers", "2", "--batch", "16",
                "-o", self.path("c.placed"))
        self.assertIn("2 towers, global batch 16)", p.stdout)
        report = run(GRAPHC, "inspect", self.path("c.placed")).stdout
        self.assertIn("gpu:1", report)
        p = run(GRAPHC, "place", symbolic, "--gpus", "4", "--towers", "0", "--batch", "16",
                "-o", self.path("d.placed"))
        self.assertIn("the single-device graph, global batch 16)", p.stdout)
        self.assertFailsClearly(run(GRAPHC, "place", symbolic, "--gpus", "4", "--towers", "5",
                                    "-o", self.path("x"), ok=False), "--towers 5", "4 GPUs")
        # An empty tower is allowed by the default policy, and said.
        p = run(GRAPHC, "place", symbolic, "--gpus", "4", "--batch", "3", "-o", self.path("e.placed"))
        self.assertIn("leaves 1 of 4 towers without samples", p.stdout)

    def test_placement_errors(self):
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "4", "--params", "gpu:5",
                                    "--batch", "8", "-o", self.path("x"), ok=False), "gpu:5", "gpu:3")
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "4", "--remainder", "error",
                                    "--batch", "3", "-o", self.path("x"), ok=False), "3", "uneven")
        cluster = self.path("cluster.json")
        with open(cluster, "w") as f:
            dev = lambda name, kind: {"name": name, "kind": kind, "memory_bytes": 1 << 30, "relative_speed": 1}
            json.dump({"devices": [dev("cpu:0", "cpu"), dev("gpu:0", "gpu"), dev("gpu:0", "gpu")],
                       "links": [{"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 1e10}]}, f)
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--cluster", cluster, "--batch", "8",
                                    "-o", self.path("x"), ok=False), "gpu:0")


def write_cluster(path, gpu_speeds):
    """A host and GPUs of the given relative speeds, linked to the host and to each other."""
    dev = lambda name, kind, speed: {"name": name, "kind": kind, "memory_bytes": 80 << 30, "relative_speed": speed}
    gpus = ["gpu:%d" % i for i in range(len(gpu_speeds))]
    links = [{"endpoints": ["cpu:0", g], "bandwidth": 64e9} for g in gpus]
    links += [{"endpoints": [a, b], "bandwidth": 450e9} for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    with open(path, "w") as f:
        json.dump({"devices": [dev("cpu:0", "cpu", 1)] + [dev(g, "gpu", s) for g, s in zip(gpus, gpu_speeds)],
                   "links": links}, f)


def write_idx(path, array, magic):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        for d in array.shape:
            f.write(struct.pack(">I", d))
        f.write(array.astype(np.uint8).tobytes())


class GraphrunTest(CliCase):
    def train(self, *args, ok=True):
        return run(GRAPHRUN, "train", "--no-progress", "--threads", "2", *args, ok=ok)

    def test_train_checkpoint_eval_export_infer(self):
        ckpt = self.path("ckpt")
        metrics = self.path("m.jsonl")
        self.train("--model", "mlp", "--data", "fashion-mnist", "--steps", "30", "--batch", "64",
                   "--lr", "0.1", "--checkpoint", ckpt, "--metrics", metrics, "--no-eval")
        with open(metrics) as f:
            steps = [json.loads(l) for l in f]
        self.assertEqual(len(steps), 30)
        self.assertLess(steps[-1]["loss"], steps[0]["loss"])
        self.assertTrue(os.path.exists(os.path.join(ckpt, "latest")))
        ev = run(GRAPHRUN, "eval", "--checkpoint", ckpt, "--data", "fashion-mnist").stdout
        acc = float(re.search(r"accuracy ([0-9.]+)%", ev).group(1))
        self.assertGreater(acc, 50)
        onnx_path = self.path("trained.onnx")
        run(GRAPHRUN, "export", "--checkpoint", ckpt, "-o", onnx_path)
        x = np.random.RandomState(0).randn(5, 784).astype(np.float32)
        np.save(self.path("x.npy"), x)
        run(GRAPHRUN, "infer", onnx_path, "--input", self.path("x.npy"), "-o", self.path("y.npy"))
        run(GRAPHRUN, "infer", ckpt, "--input", self.path("x.npy"), "-o", self.path("z.npy"))
        # The exported graph is the checkpoint's forward graph: the same kernels, the same bits.
        np.testing.assert_array_equal(np.load(self.path("y.npy")), np.load(self.path("z.npy")))
        # Resume continues from the saved step.
        p = self.train("--model", "mlp", "--data", "fashion-mnist", "--steps", "35", "--batch", "64",
                       "--checkpoint", ckpt, "--resume", "--no-eval")
        self.assertIn("from step 30", p.stdout)

    def test_synthetic_labels_use_ten_classes_unless_told(self):
        plan = self.train("--model", "mlp", "--num-classes", "100", "--steps", "1", "--batch", "8").stdout
        self.assertIn("4096 samples, 10 of the model's 100 classes", plan)
        plan = self.train("--model", "mlp", "--num-classes", "100", "--steps", "1", "--batch", "8",
                          "--synthetic-classes", "0", "--synthetic-samples", "512").stdout
        self.assertIn("512 samples, 100 classes", plan)

    def test_same_seed_same_result(self):
        # Winograd convolutions (where the CPU has them) are as reproducible as direct ones.
        for algorithm in ("auto", "winograd"):
            losses = []
            for _ in range(2):
                m = self.path("m%d.jsonl" % len(losses))
                self.train("--model", "small_cnn", "--data", "fashion-mnist", "--steps", "4", "--batch", "16",
                           "--seed", "7", "--metrics", m, "--no-eval", "--conv-algorithm", algorithm)
                with open(m) as f:
                    losses.append([json.loads(l)["loss"] for l in f])
            self.assertEqual(losses[0], losses[1], algorithm)

    def test_gpu_layout_leaves_cpu_devices_alone(self):
        # Emulated GPUs are CPU devices: --gpu-layout changes nothing there (blocked as always).
        losses = {}
        for layout in ("nchw", "nhwc"):
            m = self.path(layout + ".jsonl")
            p = self.train("--model", "small_cnn", "--batch", "8", "--steps", "2", "--gpus", "1", "--emulate",
                           "--no-eval", "--seed", "5", "--metrics", m, "--gpu-layout", layout)
            self.assertNotIn("gpu layout", p.stdout)
            with open(m) as f:
                losses[layout] = [json.loads(l)["loss"] for l in f]
        self.assertEqual(losses["nchw"], losses["nhwc"])

    def test_profile_counts_the_reorders_inside_kernels(self):
        per_step = {}
        for layouts in ("blocked", "plain"):
            prof = self.path(layouts + ".txt")
            extra = ["--plain-layouts"] if layouts == "plain" else []
            self.train("--model", "resnet18", "--image-size", "32", "--steps", "3", "--batch", "4", "--no-eval",
                       "--profile", prof, *extra)
            with open(prof) as f:
                text = f.read()
            m = re.search(r"layout copies inside kernels: ([\d.]+) reorders, ([\d.]+) MB per step", text)
            self.assertIsNotNone(m, text)
            per_step[layouts] = float(m.group(1))
            # The updates ran as one multi-tensor launch, and the implementations are named.
            self.assertRegex(text, r"fused update: 62 Apply\w+ nodes in one launch on cpu:0")
            self.assertRegex(text, r"\n  Conv +convolution \S+")
            # The per-op rows add up to the total; contractions carry their GFLOP/s.
            rows = re.findall(r"^  (\w+) +[\d.]+ +[\d.]+% +\d+ +([\d.]+)( +[\d.]+)?$", text, re.M)
            self.assertAlmostEqual(sum(float(r[1]) for r in rows), per_step[layouts], delta=0.1 * len(rows) + 0.05)
            rated = {r[0] for r in rows if r[2]}
            self.assertEqual(rated, {"Conv", "ConvGradData", "ConvGradFilter", "Gemm"}, text)
            # The arithmetic counted is torchvision's resnet18: forward, data and filter
            # gradients of every convolution and matrix product, but no data gradient of the input.
            m = re.search(r"contractions \(convolutions, matrix products\): ([\d.]+) GFLOP per step at "
                          r"([\d.]+) GFLOP/s", text)
            self.assertIsNotNone(m, text)
            self.assertAlmostEqual(float(m.group(1)), resnet18_training_gflop(4, 32), delta=1e-3)
        # Keeping activations in the convolutions' own layout never needs more copies with
        # oneDNN's AVX2 and AVX-512 code. Its SSE4.1 code (below AVX2) reorders the blocked
        # layout more than the plain one (99 reorders a step against 59 at GRAPHC_CPU_ISA=default).
        if dnnl_isa().startswith("avx"):
            self.assertLessEqual(per_step["blocked"], per_step["plain"])

    def test_profile_breakdown_accounts_for_the_whole_step(self):
        """2 emulated towers: the step breakdown's parts add up to every column's step, on the
        standard output and in the --profile report, and the trace's breakdown slices say the same."""
        prof, trace = self.path("profile.txt"), self.path("trace.json")
        p = self.train("--model", "small_cnn", "--gpus", "2", "--emulate", "--steps", "3", "--batch", "16",
                       "--no-eval", "--profile", prof, "--trace", trace)
        parts = ["kernels", "collectives", "copies h2d", "copies d2d", "copies d2h", "waits", "host",
                 "launch gaps", "other"]

        def table(text):
            lines = text.splitlines()
            start = next(i for i, l in enumerate(lines) if l.startswith("step breakdown"))
            self.assertIn("mean of steps 2-3 (the first profiled step, with one-time setup, took", lines[start])
            columns = lines[start + 1].split()
            # The emulated GPUs by the plan's names, with the CPU devices that ran them.
            self.assertEqual(columns, ["part", "step", "cpu:0", "gpu:0@cpu:1", "gpu:1@cpu:2"])
            rows = {}
            for line in lines[start + 2:]:
                m = re.match(r"^  (\s*\w[\w ]*?)((?: +[\d.]+ +[\d.]+%){4})$", line)
                if not m:
                    break
                rows[m.group(1)] = [(float(ms), float(pct)) for ms, pct in
                                    re.findall(r"([\d.]+) +([\d.]+)%", m.group(2))]
            return rows

        with open(prof) as f:
            report = f.read()
        for text in (p.stdout, report):
            rows = table(text)
            self.assertEqual([r for r in rows if not r.startswith(" ")], parts + ["total"], text)
            for c in range(4):
                total_ms, total_pct = rows["total"][c]
                self.assertEqual(total_pct, 100.0)
                self.assertAlmostEqual(sum(rows[r][c][0] for r in parts), total_ms, delta=0.005 * len(parts))
                self.assertAlmostEqual(sum(rows[r][c][1] for r in parts), 100.0, delta=0.05 * len(parts))
                # Every device's step is the whole step's; the towers compute.
                self.assertAlmostEqual(total_ms, rows["total"][0][0], delta=0.01)
            self.assertGreater(rows["kernels"][0][0], 0)
            self.assertGreater(rows["kernels"][2][0], 0)
            self.assertEqual([rows["other"][c] for c in range(4)], [(0.0, 0.0)] * 4)  # every run is covered
        # The report lists the kernels per op type under the kernels row; they add up to it.
        ops = {r.strip(): v for r, v in table(report).items() if r.startswith(" ")}
        self.assertIn("Conv", ops)
        for c in range(4):
            self.assertAlmostEqual(sum(v[c][0] for v in ops.values()), rows["kernels"][c][0],
                                   delta=0.005 * (len(ops) + 1))
        # The trace: per device and for the step (process 0), breakdown slices that tile each step
        # and, over the steps after the first, give the table's figures.
        with open(trace) as f:
            events = json.load(f)
        pids = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        self.assertEqual(sorted(pids.values()), ["cpu:0", "gpu:0@cpu:1", "gpu:1@cpu:2", "step"])
        spans = {e["name"]: e["dur"] for e in events if e.get("cat") == "step"}
        self.assertEqual(sorted(spans), ["step 0", "step 1", "step 2"])
        per = {}
        for e in events:
            if e.get("cat") != "breakdown":
                continue
            self.assertIn(e["args"]["part"], parts)
            key = (pids[e["pid"]], e["args"]["step"])
            per.setdefault(key, {}).setdefault(e["args"]["part"], 0.0)
            per[key][e["args"]["part"]] += e["dur"]
        for (device, step), by_part in per.items():
            self.assertAlmostEqual(sum(by_part.values()), spans["step %d" % step], delta=0.01, msg=device)
        for c, device in enumerate(["step", "cpu:0", "gpu:0@cpu:1", "gpu:1@cpu:2"]):
            for part in parts:
                mean_ms = sum(per[(device, s)].get(part, 0) for s in (1, 2)) / 2 / 1e3
                self.assertAlmostEqual(mean_ms, rows[part][c][0], delta=0.006, msg=(device, part))

    def test_one_switch_caps_our_code_and_onednn(self):
        # GRAPHC_CPU_ISA caps our own vector code and oneDNN alike, ONEDNN_MAX_CPU_ISA caps both
        # too, the lower of the two wins, and the run plan and the profile say what ran.
        levels = ["default", "avx2", "avx512"]
        bare = {k: v for k, v in os.environ.items() if k not in ("GRAPHC_CPU_ISA", "ONEDNN_MAX_CPU_ISA")}

        def cpu(**caps):
            p = subprocess.run([GRAPHRUN, "cpu"], capture_output=True, text=True, env=dict(bare, **caps))
            self.assertEqual(p.returncode, 0, p.stderr)
            return re.search(r"our code (\w+), oneDNN (\S+)", p.stdout).groups()

        machine, _ = cpu()
        for cap in levels:
            want = levels[min(levels.index(machine), levels.index(cap))]
            ours, theirs = cpu(GRAPHC_CPU_ISA=cap)
            self.assertEqual(ours, want, cap)
            if want != "avx512":
                self.assertFalse(theirs.startswith("avx512"), (cap, theirs))
            if want == "default":
                self.assertFalse(theirs.startswith("avx2"), (cap, theirs))
        self.assertEqual(cpu(ONEDNN_MAX_CPU_ISA="AVX2")[0], levels[min(levels.index(machine), 1)])
        self.assertEqual(cpu(ONEDNN_MAX_CPU_ISA="SSE41", GRAPHC_CPU_ISA="avx512")[0], "default")
        bad = subprocess.run([GRAPHRUN, "cpu"], capture_output=True, text=True, env=dict(bare, GRAPHC_CPU_ISA="sse2"))
        self.assertFailsClearly(bad, "GRAPHC_CPU_ISA=sse2: unknown instruction set; known: avx512, avx2, default")
        prof = self.path("profile.txt")
        p = subprocess.run([GRAPHRUN, "train", "--no-progress", "--threads", "2", "--model", "small_cnn", "--steps",
                            "2", "--no-eval", "--profile", prof], capture_output=True, text=True,
                           env=dict(bare, GRAPHC_CPU_ISA="default"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"\n  cpu        .*: our code default, oneDNN \S+ \(capped by GRAPHC_CPU_ISA=default")
        with open(prof) as f:
            self.assertRegex(f.read(), r"^cpu: .*: our code default")

    def test_precision_bf16_runs_where_the_cpu_has_bf16_and_is_refused_elsewhere(self):
        isa = dnnl_isa()
        has_bf16 = "bf16" in isa or "amx" in isa
        args = ("--model", "small_cnn", "--steps", "3", "--batch", "16", "--no-eval", "--precision", "bf16")
        p = self.train(*args, ok=False)
        if has_bf16:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("precision  bf16 compute", p.stdout)
            self.assertIn("trained 3 steps", p.stdout)
            # With AMX (oneDNN's, so not under a cap below it) a note says channels-last there is unmeasured.
            amx_note = "--precision bf16 on a CPU with AMX"
            if "amx" in isa:
                self.assertIn(amx_note, p.stdout)
            else:
                self.assertNotIn(amx_note, p.stdout)
            fp32 = self.train("--model", "small_cnn", "--steps", "1", "--batch", "16", "--no-eval")
            self.assertNotIn(amx_note, fp32.stdout)
        else:
            self.assertFailsClearly(p, "no bf16 instructions", "--precision fp32")
        # Below bf16 instructions (an AVX2 CPU), one line instead of a run several times slower.
        capped = subprocess.run([GRAPHRUN, "train", "--no-progress", "--threads", "2", *args], capture_output=True,
                                text=True, env=dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2"))
        self.assertFailsClearly(capped, "no bf16 instructions")
        # fp16 is for GPUs: a plan on the host is refused in one line.
        self.assertFailsClearly(self.train("--model", "small_cnn", "--steps", "1", "--precision", "fp16", ok=False),
                                "--precision fp16 runs on GPUs", "--emulate")
        self.assertFailsClearly(self.train("--model", "small_cnn", "--steps", "1", "--precision", "f8", ok=False),
                                "--precision", "unknown precision 'f8'")
        self.assertFailsClearly(self.train("--model", "small_cnn", "--steps", "1", "--conv-algorithm", "fft",
                                           ok=False),
                                "--conv-algorithm: unknown convolution algorithm 'fft'; known: auto, direct, "
                                "winograd")
        self.assertFailsClearly(self.train("--model", "small_cnn", "--steps", "1", "--gpu-layout", "NHWC",
                                           ok=False),
                                "--gpu-layout: unknown GPU activation layout 'NHWC'; known: nchw, nhwc, auto")
        # A plan placed in bf16 on GPUs (test_precision_bf16_on_emulated_gpus has more).
        plan = self.path("bf16.placed")
        placed = run(GRAPHC, "place", "--model", "small_cnn", "--gpus", "2", "--batch", "16", "--precision", "bf16",
                     "-o", plan)
        self.assertIn("bf16 compute", placed.stdout)
        # A compiled plan keeps its precision: asking for another is refused.
        plain_plan = self.path("fp32.placed")
        run(GRAPHC, "place", "--model", "small_cnn", "--gpus", "2", "--batch", "16", "-o", plain_plan)
        self.assertFailsClearly(self.train(plain_plan, "--steps", "1", "--emulate", "--precision", "bf16", ok=False),
                                "already compiled", "computes in fp32")
        if has_bf16:
            self.assertIn("trained 2 steps", self.train(plan, "--steps", "2", "--no-eval", "--emulate").stdout)
            synced = self.train("--model", "small_cnn", "--steps", "2", "--batch", "16", "--no-eval", "--gpus", "2",
                                "--emulate", "--bn", "sync", "--precision", "bf16")
            self.assertIn("trained 2 steps", synced.stdout)

    def test_precision_bf16_on_emulated_gpus(self):
        # A bf16 plan for GPUs puts its bf16 layers on the GPUs, which have bf16 kernels (cuDNN's convolutions over
        # the f32 weights); none falls back to the host.
        plan = self.path("bf16-gpus.placed")
        run(GRAPHC, "place", "--model", "small_cnn", "--gpus", "2", "--batch", "16", "--precision", "bf16", "-o", plan)
        printed = run(GRAPHC, "print", plan).stdout
        convs = [l for l in printed.splitlines() if re.search(r"%tower_\d/conv\d = Conv\(", l)]
        self.assertEqual(len(convs), 4, printed)
        for line in convs:
            self.assertRegex(line, r': bf16\[.*device "gpu:[01]" reason "requested"$')
        self.assertNotIn("no gpu kernel", printed)
        # Emulated, the GPUs are CPU devices computing bf16 in oneDNN's kernels, as the host does: one emulated GPU
        # repeats the host's run step for step; no loss scaling (bf16 has f32's range).
        common = ("--model", "small_cnn", "--batch", "16", "--steps", "4", "--no-eval", "--seed", "3", "--precision",
                  "bf16")
        args = ((), ("--gpus", "1", "--emulate"), ("--gpus", "2", "--emulate", "--params", "mirrored"))
        if "bf16" not in dnnl_isa() and "amx" not in dnnl_isa():
            self.assertFailsClearly(self.train(*common, *args[1], ok=False), "no bf16 instructions")
            return
        losses = []
        for i, extra in enumerate(args):
            metrics = self.path("bf16-%d.csv" % i)
            p = self.train(*common, *extra, "--metrics", metrics)
            self.assertIn("precision  bf16 compute", p.stdout)
            self.assertIn("trained 4 steps", p.stdout)
            self.assertNotIn("loss scale", p.stdout)
            if extra:
                self.assertIn("emulation", p.stdout)
            with open(metrics) as f:
                rows = [r for r in csv.DictReader(f) if r["kind"] == "step"]
            self.assertEqual([r["loss_scale"] for r in rows], [""] * 4)
            losses.append([float(r["loss"]) for r in rows])
        self.assertEqual(losses[1], losses[0])
        self.assertTrue(all(math.isfinite(l) for l in losses[2]), losses[2])
        # Emulated GPUs need the CPU's bf16 instructions as the host does.
        capped = subprocess.run([GRAPHRUN, "train", "--no-progress", "--threads", "2", *common, *args[2]],
                                capture_output=True, text=True, env=dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2"))
        self.assertFailsClearly(capped, "no bf16 instructions")

    def test_fp16_with_dynamic_loss_scaling_on_emulated_gpus(self):
        # 2^24 overflows f16 in the first backward pass: that step is skipped (no update), the scale halves,
        # and the run says how many steps it skipped; the metrics carry the scale and the count per step.
        metrics = self.path("fp16.csv")
        p = self.train("--model", "small_cnn_nobn", "--steps", "6", "--batch", "16", "--no-eval", "--gpus", "2",
                       "--emulate", "--params", "mirrored", "--precision", "fp16", "--loss-scale", "16777216",
                       "--metrics", metrics)
        self.assertIn("precision  fp16 compute", p.stdout)
        self.assertIn("loss scale dynamic, from 16777216: x2 after 2000 steps", p.stdout)
        m = re.search(r"loss scale: 16777216 -> (\d+); (\d+) of 6 steps skipped", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        skipped = int(m.group(2))
        self.assertGreaterEqual(skipped, 1)
        with open(metrics) as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] == "step"]
        self.assertEqual(len(rows), 6)
        self.assertEqual(float(rows[0]["loss_scale"]), 2 ** 23)
        self.assertEqual(int(rows[-1]["skipped_steps"]), skipped)
        self.assertEqual(float(rows[-1]["loss_scale"]), 2 ** 24 / 2 ** skipped)
        self.assertEqual(int(m.group(1)), 2 ** 24 // 2 ** skipped)
        # A resumed run goes on from the saved scale (and keeps counting skipped steps from there); a run
        # without loss scaling resumes from the same checkpoint, ignoring the scale.
        ckpt = self.path("fp16-ckpt")
        common = ("--model", "small_cnn_nobn", "--batch", "16", "--no-eval", "--gpus", "2", "--emulate",
                  "--precision", "fp16", "--loss-scale", "16777216", "--checkpoint", ckpt)
        first = self.train(*common, "--steps", "3")
        at3 = int(re.search(r"loss scale: 16777216 -> (\d+)", first.stdout).group(1))
        resumed = self.train(*common, "--steps", "5", "--resume")
        self.assertIn("steps 4 to 5 of 5", resumed.stdout)
        self.assertRegex(resumed.stdout, r"loss scale: %d -> \d+; \d+ of 2 steps skipped" % at3)
        unscaled = self.train(*common[:-4], "--loss-scale", "off", "--checkpoint", ckpt, "--steps", "6",
                              "--resume")
        self.assertIn("steps 6 to 6 of 6", unscaled.stdout)
        self.assertNotIn("loss scale", unscaled.stdout)
        # The default scale with fp16 is 65536; --loss-scale off turns scaling off; bad values are refused.
        p = self.train("--model", "small_cnn_nobn", "--steps", "1", "--batch", "16", "--no-eval", "--gpus", "2",
                       "--emulate", "--precision", "fp16")
        self.assertIn("loss scale dynamic, from 65536", p.stdout)
        p = self.train("--model", "small_cnn_nobn", "--steps", "1", "--batch", "16", "--no-eval", "--gpus", "2",
                       "--emulate", "--precision", "fp16", "--loss-scale", "off")
        self.assertNotIn("loss scale", p.stdout)
        for bad in ("0.5", "inf", "lots"):
            self.assertFailsClearly(self.train("--model", "mlp", "--steps", "1", "--loss-scale", bad, ok=False),
                                    "--loss-scale " + bad, ">= 1")
        self.assertFailsClearly(self.train("--model", "mlp", "--steps", "1", "--loss-scale", "8",
                                           "--loss-scale-interval", "0", ok=False), "--loss-scale-interval 0")
        # A compiled plan keeps its loss scale: asking for another is refused.
        plan = self.path("scaled.placed")
        placed = run(GRAPHC, "place", "--model", "small_cnn_nobn", "--gpus", "2", "--batch", "16", "--precision",
                     "fp16", "-o", plan)
        self.assertIn("fp16 compute; dynamic loss scale from 65536", placed.stdout)
        self.assertFailsClearly(self.train(plan, "--steps", "1", "--emulate", "--loss-scale", "8", ok=False),
                                "already compiled", "--loss-scale", "scales from 65536")
        self.assertIn("trained 1 steps", self.train(plan, "--steps", "1", "--emulate", "--no-eval").stdout)
        # Loss scaling works at any precision: fp32 with a power of two trains as without.
        plain = self.train("--model", "mlp", "--steps", "3", "--batch", "8", "--no-eval", "--seed", "3")
        scaled = self.train("--model", "mlp", "--steps", "3", "--batch", "8", "--no-eval", "--seed", "3",
                            "--loss-scale", "1024")
        last = lambda out: re.search(r"loss \S+ -> (\S+),", out).group(1)
        self.assertEqual(last(scaled.stdout), last(plain.stdout))
        self.assertIn("0 of 3 steps skipped", scaled.stdout)
        # With gradient accumulation the micro-steps' gradients carry the scale too.
        accumulated = [self.train("--model", "mlp", "--steps", "3", "--batch", "8", "--no-eval", "--seed", "3",
                                  "--accumulate", "2", *extra).stdout for extra in ((), ("--loss-scale", "1024"))]
        self.assertEqual(last(accumulated[1]), last(accumulated[0]))
        self.assertIn("0 of 3 steps skipped", accumulated[1])

    def test_emulated_towers(self):
        p = self.train("--model", "small_cnn_nobn", "--data", "fashion-mnist", "--steps", "3", "--batch", "30",
                       "--gpus", "4", "--emulate", "--params", "mirrored", "--no-eval")
        self.assertIn("emulation", p.stdout)
        self.assertIn("over 4 towers", p.stdout)
        refused = self.train("--model", "mlp", "--steps", "1", "--batch", "8", "--gpus", "2", ok=False)
        self.assertFailsClearly(refused, "visible devices", "--emulate")

    def test_split_auto_shares_by_speed(self):
        """--split auto on an emulated cluster with a half-speed GPU trains as --split 2,2,1 does.

        (Equality with one device, which dropout's per-tower masks rule out for the built-in
        small_cnn here, is towers_tests' Equivalence.SplitAutoOnAHalfSpeedGpuTrainsLikeOneDevice.)
        """
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gck
        cluster = self.path("half.json")
        write_cluster(cluster, [1, 1, 0.5])
        common = ("--model", "small_cnn", "--steps", "3", "--batch", "30", "--seed", "3", "--no-eval",
                  "--cluster", cluster, "--emulate", "--bn", "sync", "--params", "mirrored")
        p = self.train(*common, "--split", "auto", "--checkpoint", self.path("auto"))
        self.assertIn("tower batches 12, 12, 6 (--split auto: in proportion to the speeds of the towers' "
                      "devices, gpu:0 67, gpu:1 67, gpu:2 33.5 TFLOP/s", p.stdout)
        self.assertIn("cpu:3 (cpu, 1 thread, emulated at relative speed 0.5)", p.stdout)
        self.assertIn("emulated relative speeds (the fastest GPU is 1): gpu:2 at 0.5", p.stdout)
        p = self.train(*common, "--split", "2,2,1", "--checkpoint", self.path("weights"))
        self.assertIn("tower batches 12, 12, 6 (--split 2,2,1)", p.stdout)
        a = gck.read(os.path.join(self.path("auto"), "step-00000003.gck"))
        b = gck.read(os.path.join(self.path("weights"), "step-00000003.gck"))
        self.assertGreater(len(a.names()), 10)
        for name in a.names():
            np.testing.assert_array_equal(a.array(name), b.array(name), err_msg=name)
        # The plan says so without training, first under --explain.
        p = run(GRAPHC, "place", "--model", "small_cnn", "--cluster", cluster, "--split", "auto",
                "--batch", "31", "-o", self.path("s.placed"), "--explain")
        self.assertIn("split: tower batches 13, 12, 6 (--split auto", p.stdout.splitlines()[0])

    def params(self, ckpt_dir, step):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gck
        a = gck.read(os.path.join(ckpt_dir, "step-%08d.gck" % step))
        return {n: a.array(n).astype(np.float64) for n in a.names()}

    def assertSameParams(self, want, got, what, *model):
        """Every tensor within the rounding bound of the model's longest sum (K*u of its largest
        value, tests/tools/sumbound.py): micro-batches and towers split the batch's sums, and
        the accumulators add the parts in another grouping than one batch's kernels."""
        sumbound.assert_within(self, want, got, step_bound(*model), what)

    def losses(self, metrics):
        with open(metrics) as f:
            return [json.loads(l)["loss"] for l in f]

    def test_accumulate_equals_one_larger_batch(self):
        """--batch 4 --accumulate 4 is one update on 16 samples: parameters and losses of --batch 16."""
        for model, extra in (("mlp", ()), ("small_cnn_nobn", ("--dropout", "0"))):
            with self.subTest(model):
                common = ("--model", model, *extra, "--steps", "3", "--lr", "0.05", "--seed", "3", "--no-eval")
                big, acc = self.path(model + "-16"), self.path(model + "-4x4")
                self.train(*common, "--batch", "16", "--checkpoint", big, "--metrics", big + ".jsonl")
                p = self.train(*common, "--batch", "4", "--accumulate", "4", "--checkpoint", acc,
                               "--metrics", acc + ".jsonl")
                self.assertIn("accumulate 4 micro-batches of 4 per update (16 samples", p.stdout)
                self.assertIn("steps, the learning rate schedule and the metrics count updates", p.stdout)
                self.assertIn("trained 3 steps", p.stdout)
                # Checkpoints hold the same tensors (no accumulators) with the same values.
                self.assertSameParams(self.params(big, 3), self.params(acc, 3), model, "--model", model, "--batch", 16)
                self.assertIn("fc1.weight.momentum", self.params(acc, 3))
                want, got = self.losses(big + ".jsonl"), self.losses(acc + ".jsonl")
                self.assertEqual(len(got), 3)
                rel = step_bound("--model", model, "--batch", 16)
                sumbound.report(model + " losses", sumbound.relative_error(got, want), rel)
                np.testing.assert_allclose(got, want, rtol=rel)

    def test_accumulate_all_reduces_once_per_update(self):
        """4 mirrored towers: the all-reduce runs in the update only, as often as without accumulation."""
        common = ("--model", "small_cnn_nobn", "--dropout", "0", "--steps", "2", "--lr", "0.05", "--seed", "3",
                  "--no-eval", "--gpus", "4", "--emulate", "--params", "mirrored", "--bucket-mb", "0.1")
        runs = {}
        for name, args in (("plain", ("--batch", "16")), ("accumulate", ("--batch", "4", "--accumulate", "4"))):
            ckpt, trace = self.path(name), self.path(name + ".json")
            self.train(*common, *args, "--checkpoint", ckpt, "--trace", trace)
            with open(trace) as f:
                events = [e for e in json.load(f) if e.get("ph") == "X" and "args" in e]
            runs[name] = (self.params(ckpt, 2), events)
        self.assertSameParams(runs["plain"][0], runs["accumulate"][0], "4 towers", "--model", "small_cnn_nobn",
                              "--batch", 16)
        def all_reduces(events):
            per_step = {}
            for e in events:
                if e["args"]["op"] == "AllReduce":
                    self.assertNotIn("micro_step", e["args"], "an all-reduce in a micro-step")
                    per_step[e["args"]["step"]] = per_step.get(e["args"]["step"], 0) + 1
            return per_step
        plain, accumulating = all_reduces(runs["plain"][1]), all_reduces(runs["accumulate"][1])
        self.assertEqual(sorted(accumulating), [0, 1])
        self.assertEqual(accumulating, plain)
        self.assertGreater(accumulating[0], 4)  # several buckets, each on 4 towers
        self.assertEqual(accumulating[0] % 4, 0)
        # The micro-steps ran (3 per update), each tower's backward pass in them.
        events = runs["accumulate"][1]
        micro = {(e["args"]["step"], e["args"]["micro_step"]) for e in events if "micro_step" in e["args"]}
        self.assertEqual(micro, {(s, k) for s in (0, 1) for k in (0, 1, 2)})
        self.assertTrue(any(e["args"]["op"] == "ConvGradFilter" and "micro_step" in e["args"] for e in events))

    def test_accumulate_model_parallel(self):
        """--strategy model-parallel: the micro-steps run where m-ETF put main's nodes."""
        common = ("--model", "mlp", "--steps", "3", "--lr", "0.05", "--seed", "3", "--no-eval", "--gpus", "2",
                  "--emulate", "--strategy", "model-parallel")
        big, acc = self.path("big"), self.path("acc")
        self.train(*common, "--batch", "16", "--checkpoint", big)
        self.train(*common, "--batch", "4", "--accumulate", "4", "--checkpoint", acc)
        self.assertSameParams(self.params(big, 3), self.params(acc, 3), "model-parallel", "--model", "mlp",
                              "--batch", 16)

    def test_accumulate_resumes_at_update_boundaries(self):
        common = ("--model", "mlp", "--batch", "8", "--accumulate", "3", "--seed", "5", "--synthetic-samples",
                  "200", "--lr", "0.05", "--no-eval")
        straight, split = self.path("straight"), self.path("split")
        p = self.train(*common, "--steps", "10", "--checkpoint", straight)
        self.assertIn("8 updates per epoch", p.stdout)  # 25 micro-batches: 8 updates of 3
        self.train(*common, "--steps", "7", "--checkpoint", split)
        p = self.train(*common, "--steps", "10", "--checkpoint", split, "--resume")
        self.assertIn("10 in all, from step 7", p.stdout)
        a, b = self.params(straight, 10), self.params(split, 10)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        # --epochs counts updates: 2 epochs of 8.
        p = self.train(*common, "--epochs", "2", "--checkpoint", self.path("epochs"))
        self.assertIn("16 in all", p.stdout)
        self.assertIn("trained 16 steps", p.stdout)

    def test_accumulate_plans_and_bad_input(self):
        # graphc place --accumulate writes a plan that graphrun runs as it says.
        plan = self.path("acc.placed")
        p = run(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--batch", "6", "--accumulate", "3",
                "--params", "mirrored", "-o", plan)
        self.assertIn("global batch 6 x 3 micro-batches per update", p.stdout)
        p = self.train(plan, "--emulate", "--steps", "2", "--no-eval")
        self.assertIn("accumulate 3 micro-batches of 6 per update", p.stdout)
        self.assertFailsClearly(self.train(plan, "--emulate", "--steps", "2", "--accumulate", "2", ok=False),
                                "already compiled", "accumulates 3")
        for bad in ("0", "2.5", "-1", "many"):
            self.assertFailsClearly(self.train("--model", "mlp", "--steps", "1", "--accumulate", bad, ok=False),
                                    "--accumulate " + bad, "whole number")
            self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--accumulate", bad,
                                        "-o", plan, ok=False), "--accumulate " + bad)
        self.assertFailsClearly(self.train("--model", "mlp", "--steps", "1", "--accumulate", "2", "--ps", "1",
                                           "--ps-async", ok=False), "--accumulate 2 with --ps-async")
        self.assertFailsClearly(run(GRAPHC, "place", "--model", "mlp", "--gpus", "2", "--accumulate", "2",
                                    "--ps", "1", "--ps-async", "-o", plan, ok=False),
                                "--accumulate 2 with --ps-async")
        # More micro-batches per update than the data set holds.
        self.assertFailsClearly(self.train("--model", "mlp", "--batch", "8", "--accumulate", "5",
                                           "--synthetic-samples", "32", "--steps", "1", ok=False),
                                "fewer samples (32) than one update (5 x 8)")

    def test_bad_training_input(self):
        # A data directory with no images.
        os.makedirs(self.path("empty/cat"))
        self.assertFailsClearly(self.train("--model", "small_cnn", "--data", "images:" + self.path("empty"),
                                           "--steps", "1", ok=False), "no images")
        # More classes than the model's logits (labels out of range), caught before training.
        self.assertFailsClearly(self.train("--model", "small_cnn", "--num-classes", "5", "--data",
                                           "fashion-mnist", "--steps", "1", "--batch", "4", ok=False),
                                "10 classes", "logits have 5")
        # Labels in a data file outside the data set's classes.
        imgs = np.zeros((20, 28, 28)), np.arange(20) % 12
        write_idx(self.path("train-images-idx3-ubyte.gz"), imgs[0], 0x803)
        write_idx(self.path("train-labels-idx1-ubyte.gz"), imgs[1], 0x801)
        write_idx(self.path("t10k-images-idx3-ubyte.gz"), imgs[0], 0x803)
        write_idx(self.path("t10k-labels-idx1-ubyte.gz"), imgs[1], 0x801)
        self.assertFailsClearly(self.train("--model", "small_cnn", "--data", "fashion-mnist:" + self.dir,
                                           "--steps", "1", "--batch", "4", ok=False), "label 10", "outside")
        # An unwritable checkpoint directory, before any step.
        p = self.train("--model", "mlp", "--steps", "1", "--batch", "4", "--checkpoint", "/proc/graphc-ckpt",
                       ok=False)
        self.assertFailsClearly(p, "/proc/graphc-ckpt")
        self.assertNotIn("trained", p.stdout)
        # A checkpoint from another model.
        ckpt = self.path("ckpt")
        self.train("--model", "mlp", "--data", "fashion-mnist", "--steps", "1", "--batch", "8",
                   "--checkpoint", ckpt, "--no-eval")
        p = self.train("--model", "small_cnn", "--data", "fashion-mnist", "--steps", "2", "--batch", "8",
                       "--checkpoint", ckpt, "--resume", "--no-eval", ok=False)
        self.assertFailsClearly(p, "missing", "unexpected")
        # A loss that blows up, with --check-numerics naming the step and the node.
        p = self.train("--model", "mlp", "--data", "fashion-mnist", "--steps", "50", "--batch", "8",
                       "--lr", "1e30", "--check-numerics", "--no-eval", ok=False)
        self.assertFailsClearly(p, "non-finite", "step")
        self.assertRegex(p.stderr, r"node '[^']+' \(\w+\)")

    def test_infer_reproduces_torchvision_logits(self):
        import torch
        import torchvision
        torch.manual_seed(0)
        torch.set_num_threads(2)
        for name, size in (("resnet18", 224), ("inception_v3", 299)):
            kwargs = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
            model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
            x = torch.randn(2, 3, size, size)
            path = self.path(name + ".onnx")
            torch.onnx.export(model, x, path, opset_version=17, input_names=["input"],
                              output_names=["logits"])
            with torch.no_grad():
                want = model(x).numpy()
            np.save(self.path("x.npy"), x.numpy())
            run(GRAPHRUN, "infer", path, "--input", self.path("x.npy"), "-o", self.path("y.npy"))
            got = np.load(self.path("y.npy"))
            # Both sides round their dot products in orders of their own: 2*K*u of the logits'
            # scale, K the most terms one output of a layer sums (resnet18's 512 x 3 x 3, 4608;
            # inception_v3's 448 x 3 x 3, 4032): 5.5e-4 and 4.8e-4.
            rel = 2 * sumbound.bound(longest_dot_product(model))
            err = sumbound.relative_error(got, want)
            sumbound.report(name + " logits against PyTorch", err, rel)
            self.assertLessEqual(err, rel, name)
            # Timed runs (weights prepared once, kept between runs) give the
            # same logits, and say how long they took and where.
            p = run(GRAPHRUN, "infer", path, "--input", self.path("x.npy"), "-o", self.path("y3.npy"),
                    "--repeat", "3", "--profile")
            self.assertRegex(p.stdout, r"batch 2, 3 runs after a warm-up: median [\d.]+ ms, min [\d.]+ ms, "
                                       r"p90 [\d.]+ ms; [\d.]+ images/s")
            self.assertRegex(p.stdout, r"\n  Conv +[\d.]+ ")
            np.testing.assert_array_equal(np.load(self.path("y3.npy")), got, name)
            # Each convolution algorithm gives torchvision's logits; the
            # profile names the implementations that ran (Winograd only where
            # oneDNN has it: f32 on AVX-512).
            for algorithm in ("direct", "winograd"):
                p = run(GRAPHRUN, "infer", path, "--input", self.path("x.npy"), "-o", self.path("ya.npy"),
                        "--repeat", "1", "--profile", "--conv-algorithm", algorithm)
                err = sumbound.relative_error(np.load(self.path("ya.npy")), want)
                sumbound.report("%s logits against PyTorch, %s" % (name, algorithm), err, rel)
                self.assertLessEqual(err, rel, (name, algorithm))
                self.assertIn("library implementations", p.stdout)
                self.assertEqual("jit_wino" in p.stdout, algorithm == "winograd" and winograd_here(),
                                 (name, algorithm, p.stdout))

    def test_corrupt_images_are_skipped_and_reported(self):
        for c in ("a", "b"):
            os.makedirs(self.path("imgs/" + c))
            for i in range(4):
                arr = (np.random.RandomState(i).rand(40, 40, 3) * 255).astype(np.uint8)
                from PIL import Image
                Image.fromarray(arr).save(self.path("imgs/%s/%d.png" % (c, i)))
        with open(self.path("imgs/a/broken.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 not really a jpeg")
        p = self.train("--model", "small_cnn", "--num-classes", "2", "--image-size", "28", "--data",
                       "images:" + self.path("imgs"), "--steps", "2", "--batch", "4")
        self.assertIn("could not be loaded", p.stdout)
        self.assertIn("broken.jpg", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
