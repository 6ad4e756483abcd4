#!/usr/bin/python3
"""`graphc view PLACED --metrics RUN.jsonl --trace TRACE.json` end to end (issue 32, point 6).

One real run: `graphc place` mlp on 2 GPUs (mirrored), `graphrun train` of that plan on
emulated GPUs with --metrics and --trace, then `graphc view` of the plan with both:

- the page's embedded JSON holds every step's loss and learning rate exactly as the metrics
  file has them, and the first step record names the run: the plan's model, devices and
  batch;
- a run with evaluations (a small Fashion-MNIST of the test's own, 2 epochs, then resumed for
  a third): the page holds every evaluation's loss and accuracy and every step's loss once,
  the last record where the resumed run redid one;
- the trace's busy time is there for every device of the plan, by the plan's name (gpu:0,
  not the CPU device that emulated it), greater than 0 and at most the step's wall time, and
  each device's parts add up to the wall time;
- refused in one error line, with a non-zero exit and no page written (an existing one kept):
  a missing or malformed metrics file (file and line named), a truncated trace, a CSV
  metrics file, metrics and a trace of another plan (another model; other devices), and
  --metrics or --trace with .svg or .dot.
"""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test import GRAPHC, GRAPHRUN, CliCase, run  # noqa: E402
from tensorboard_cli_test import small_fashion_mnist  # noqa: E402

PLACE = ["--batch", "16", "--gpus", "2", "--params", "mirrored"]


def page_data(path):
    with open(path) as f:
        text = f.read()
    m = re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', text, re.S)
    assert m, "no graph data in " + path
    return json.loads(m.group(1))


class ViewRunTest(CliCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="graphc-view-")
        cls.placed = os.path.join(cls.work, "mlp.placed")
        cls.metrics = os.path.join(cls.work, "run.jsonl")
        cls.trace = os.path.join(cls.work, "trace.json")
        run(GRAPHC, "place", "--model", "mlp", *PLACE, "-o", cls.placed)
        cls.train = run(GRAPHRUN, "train", cls.placed, "--emulate", "--steps", "4", "--threads", "2",
                        "--no-progress", "--metrics", cls.metrics, "--trace", cls.trace)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def records(self, kind):
        with open(self.metrics) as f:
            return [r for r in map(json.loads, f) if r["kind"] == kind]

    def view(self, *args, out=None, ok=True):
        return run(GRAPHC, "view", self.placed, "-o", out or self.path("run.html"), *args, ok=ok)

    def test_the_page_holds_every_step_and_each_devices_busy_time(self):
        out = self.path("run.html")
        p = self.view("--metrics", self.metrics, "--trace", self.trace)
        self.assertIn("wrote " + out, p.stdout)
        self.assertNotIn("note:", p.stdout)
        data = page_data(out)
        plan_devices = [d[0] for d in data["devices"]]
        self.assertIn("gpu:0", plan_devices)
        self.assertIn("gpu:1", plan_devices)

        steps = self.records("step")
        self.assertEqual([s["run"] for s in steps if "run" in s],
                         [{"model": data["module"], "devices": plan_devices, "batch": 16}])
        self.assertIn("run", steps[0])
        self.assertEqual([s["step"] for s in steps], [1, 2, 3, 4])
        shown = data["run"]["metrics"]["steps"]
        self.assertEqual(shown, [[s["step"], s["loss"], s["lr"]] for s in steps])
        self.assertEqual(data["run"]["metrics"]["evals"], [])

        trace = data["run"]["trace"]
        self.assertEqual(trace["profiled_steps"], 4)
        self.assertEqual(trace["averaged"], [2, 4])
        self.assertEqual(trace["parts"][0], "kernels")
        wall = trace["wall_ms"]
        self.assertGreater(wall, 0)
        # Every device of the plan, by the plan's name, busy for part of the step.
        self.assertEqual(sorted(d[0] for d in trace["devices"]), sorted(plan_devices))
        for name, busy, parts in trace["devices"]:
            self.assertGreater(busy, 0, name)
            self.assertLessEqual(busy, wall, name)
            self.assertEqual(busy, parts[0], name)
            # The breakdown covers the step exactly: its parts add up to the wall time.
            self.assertAlmostEqual(sum(parts), wall, delta=1e-6 * wall + 1e-3, msg=name)
        # The trace names an emulated GPU by the plan's device and then its CPU device.
        with open(self.trace) as f:
            processes = {e["args"]["name"] for e in json.load(f) if e.get("name") == "process_name"}
        self.assertIn("gpu:0@cpu:1", processes)

    def test_evaluations_and_a_resumed_run(self):
        data = self.path("fmnist")
        small_fashion_mnist(data)
        metrics, ckpt = self.path("eval.jsonl"), self.path("ckpt")
        for epochs, more in (("2", []), ("3", ["--resume"])):
            run(GRAPHRUN, "train", self.placed, "--emulate", "--data", "fashion-mnist:" + data, "--epochs", epochs,
                "--threads", "2", "--no-progress", "--metrics", metrics, "--checkpoint", ckpt, *more)
        with open(metrics) as f:
            records = [json.loads(l) for l in f]
        self.assertEqual(len([r for r in records if "run" in r]), 2)
        last = {}
        for r in records:
            last[(r["kind"], r["step"])] = r
        self.view("--metrics", metrics)
        shown = page_data(self.path("run.html"))["run"]["metrics"]
        want_evals = [[r["step"], r["loss"], r["accuracy"]] for k, r in sorted(last.items()) if k[0] == "eval"]
        self.assertEqual([e[0] for e in want_evals], [4, 8, 12])
        self.assertEqual(shown["evals"], want_evals)
        want_steps = [[r["step"], r["loss"], r["lr"]] for k, r in sorted(last.items()) if k[0] == "step"]
        self.assertEqual([s[0] for s in want_steps], list(range(1, 13)))
        self.assertEqual(shown["steps"], want_steps)

    def test_either_file_alone(self):
        self.view("--metrics", self.metrics)
        data = page_data(self.path("run.html"))
        self.assertEqual(set(data["run"]), {"metrics"})
        self.view("--trace", self.trace)
        data = page_data(self.path("run.html"))
        self.assertEqual(set(data["run"]), {"trace"})
        self.view()
        self.assertNotIn("run", page_data(self.path("run.html")))

    def test_metrics_that_do_not_name_their_run_are_shown_with_a_note(self):
        old = self.path("old.jsonl")
        with open(self.metrics) as f, open(old, "w") as g:
            g.writelines(re.sub(r',"run":\{[^}]*\}', "", l) for l in f)
        with open(old) as f:
            self.assertNotIn('"run"', f.read())
        p = self.view("--metrics", old)
        self.assertIn("note: " + old + " does not say which run it is", p.stdout)
        self.assertEqual(len(page_data(self.path("run.html"))["run"]["metrics"]["steps"]), 4)

    def assertRefusedKeepingThePage(self, args, *fragments, out=None):
        out = out or self.path("kept.html")
        with open(out, "w") as f:
            f.write("before")
        p = self.view(*args, out=out, ok=False)
        self.assertFailsClearly(p, *fragments)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "before")
        self.assertEqual(os.listdir(os.path.dirname(out)).count(os.path.basename(out)), 1)

    def test_bad_files_are_one_line_and_write_nothing(self):
        missing = self.path("missing.jsonl")
        self.assertRefusedKeepingThePage(["--metrics", missing], "metrics '" + missing + "'")
        bad = self.path("bad.jsonl")
        with open(self.metrics) as f:
            lines = f.readlines()
        lines[2] = lines[2][: len(lines[2]) // 2] + "\n"
        with open(bad, "w") as f:
            f.writelines(lines)
        self.assertRefusedKeepingThePage(["--metrics", bad], bad + ":3: column ", ": not a JSON record: ")
        csv = self.path("run.csv")
        shutil.copy(self.metrics, csv)
        self.assertRefusedKeepingThePage(["--metrics", csv], "graphc view reads the JSON lines form")
        cut = self.path("cut.json")
        with open(self.trace) as f:
            text = f.read()
        for at, ends in ((text.index('"name"', 5000), "inside"), (text.index("},{", 5000) + 2, "before")):
            with open(cut, "w") as f:
                f.write(text[:at])
            self.assertRefusedKeepingThePage(["--trace", cut], cut + ": not a JSON trace: it ends %s event " % ends,
                                             "(cut short?)")
        self.assertRefusedKeepingThePage(["--trace", self.metrics], self.metrics + ": not graphrun's --trace")

    def test_a_run_of_another_plan_is_refused(self):
        other = self.path("cnn.placed")
        run(GRAPHC, "place", "--model", "small_cnn_nobn", *PLACE, "-o", other)
        p = run(GRAPHC, "view", other, "-o", self.path("cnn.html"), "--metrics", self.metrics, ok=False)
        self.assertFailsClearly(p, self.metrics + " holds a run of model 'mlp' on ",
                                "; the plan is model 'small_cnn_nobn' on ")
        self.assertFalse(os.path.exists(self.path("cnn.html")))
        four = self.path("mlp4.placed")
        run(GRAPHC, "place", "--model", "mlp", "--batch", "16", "--gpus", "4", "--params", "mirrored",
            "-o", four)
        p = run(GRAPHC, "view", four, "-o", self.path("four.html"), "--trace", self.trace, ok=False)
        self.assertFailsClearly(p, self.trace + " traced ", "gpu:0, gpu:1; the plan places on ",
                                "gpu:2, gpu:3")
        p = run(GRAPHC, "view", four, "-o", self.path("four.html"), "--metrics", self.metrics, ok=False)
        self.assertFailsClearly(p, "gpu:1 at batch 16; the plan is model 'mlp' on ", "gpu:3 at batch 16")
        self.assertFalse(os.path.exists(self.path("four.html")))

    def test_svg_and_dot_refuse_the_run(self):
        for ext in ("svg", "dot"):
            for flag, path in (("--metrics", self.metrics), ("--trace", self.trace)):
                self.assertRefusedKeepingThePage([flag, path], "the HTML view only: write FILE.html",
                                                 out=self.path("kept." + ext))


if __name__ == "__main__":
    unittest.main()
