#!/usr/bin/python3
"""Elastic runs (issue 33, point 3): `graphrun launch --elastic 2:4` across scripts/two-hosts.

mlp trains 800 steps of a global batch of 12 on 2 hosts x 2 workers, a checkpoint every 25
steps. Once the first checkpoint is written, node1's link is cut: the segment ends, node1 does
not answer the supervisor's probe, and the job continues on node0's 2 workers from the last
checkpoint. The link comes back; once the second segment has written a checkpoint, one of its
ranks is killed: the third segment takes node1 in again (4 workers) and trains to the end.

Checked: the launch exits 0; it printed 3 segments of 4, 2 and 4 workers, each from the step
of the checkpoint it resumed, and 2 restarts with the steps to redo and what each cost (its
parts add up, and the metrics' segment records say the same); the
metrics hold the 3 segments (workers, hosts, steps) and every step's loss, the last segment's
for the steps redone; and those losses follow one uninterrupted process's (the same global
batch, so the same update on any number of workers) to within 1e-4 of each loss: the sums over
2 or 4 workers round otherwise, and 800 steps carry the difference on.

Refusals (no namespaces needed): a bad --elastic range, a bad hostfile line, training flags
without --checkpoint, with --workers, or with --metrics in CSV are each one error line and exit 1,
before any mpirun. The elastic case is skipped where the machine cannot make network namespaces
(scripts/two-hosts' reason).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from host_failures_test import TWO_HOSTS, rank_pids  # noqa: E402
from mpi_test import ENV, GRAPHRUN, Case, run  # noqa: E402

SKIP = 77
STEPS = 800
# A global batch of 12: parts of 3 on 4 workers, 6 on 2.
TRAIN = ["--model", "mlp", "--batch", "12", "--seed", "3", "--optimizer", "momentum", "--threads", "1",
         "--no-progress", "--no-eval"]
REL = 1e-4  # measured: 9.9e-6


class Refusals(Case):
    def refused(self, hostfile_text, elastic, train, message):
        hosts = self.path("hosts")
        with open(hosts, "w") as f:
            f.write(hostfile_text)
        p = run(GRAPHRUN, "launch", "--hostfile", hosts, "--elastic", elastic, "--mpirun", "/nonexistent/mpirun",
                "--", *train, ok=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stderr.splitlines(), ["graphrun: error: " + message.replace("HOSTS", hosts)])

    def test_bad_input(self):
        ok = "node0 slots=2\nnode1 slots=2\n"
        train = TRAIN + ["--checkpoint", self.path("ckpt")]
        for elastic in ("4:2", "0:2", "two", "2:"):
            self.refused(ok, elastic, train, "--elastic '%s': expected MIN:MAX, the fewest and the most workers, "
                                             "1 <= MIN <= MAX" % elastic)
        self.refused("node0 slots=2\nnode1 slot=2\n", "2:4", train,
                     "HOSTS:2: 'slot=2': expected slots=N (N >= 1) after the host name")
        self.refused("# nothing\n", "2:4", train, "HOSTS: no hosts")
        self.refused(ok, "2:4", TRAIN, "an elastic run restarts from its checkpoints: give the training flags "
                                       "--checkpoint DIR (and --checkpoint-every N)")
        self.refused(ok, "2:4", train + ["--workers", "4"],
                     "--workers: an elastic run's workers are each segment's processes (mpirun's); leave it out")
        self.refused(ok, "2:4", train + ["--metrics=m.csv"],
                     "--metrics m.csv: an elastic run records its segments among the steps in JSON lines; "
                     "name a .jsonl file")


class Elastic(Case):
    def setUp(self):
        probe = subprocess.run([TWO_HOSTS, "--probe"], capture_output=True, text=True)
        if probe.returncode == SKIP:
            self.skipTest(probe.stderr.strip())
        super().setUp()

    def latest(self):
        try:
            with open(os.path.join(self.ckpt, "latest")) as f:
                return int(f.read().strip()[5:13])
        except (OSError, ValueError):
            return 0

    def output(self):
        with open(self.path("out")) as f:
            return f.read()

    def wait_for(self, what, cond, p, limit=120):
        deadline = time.time() + limit
        while not cond():
            self.assertIsNone(p.poll(), "the launch ended waiting for %s:\n%s" % (what, self.output()))
            self.assertLess(time.time(), deadline, "waiting for %s:\n%s" % (what, self.output()))
            time.sleep(0.05)

    def test_host_lost_then_back(self):
        self.ckpt = self.path("ckpt")
        metrics = self.path("metrics.jsonl")
        marker = "GRAPHC_ELASTIC_RUN=" + self.dir
        train = TRAIN + ["--steps", str(STEPS), "--checkpoint", self.ckpt, "--checkpoint-every", "25",
                         "--metrics", metrics, "--collective-timeout", "10"]
        launch = 'exec "$0" launch --mpirun "$GRAPHC_TWO_HOSTS_MPIRUN" --hostfile "$GRAPHC_TWO_HOSTS_HOSTFILE" "$@"'
        args = [TWO_HOSTS, "--run", "sh", "-c", launch, GRAPHRUN, "--elastic", "2:4", "--probe-timeout", "5", "--",
                *train]
        out = open(self.path("out"), "w")
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=dict(ENV, **dict([marker.split("=", 1)])),
                             start_new_session=True)

        def stop():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=60)
            out.close()
        self.addCleanup(stop)

        self.wait_for("the first checkpoint", lambda: self.latest() >= 25, p)
        m = re.search(r"two-hosts: node1 is namespace (\S+), link (\S+)", self.output())
        subprocess.run(["ip", "-n", m.group(1), "link", "set", m.group(2), "down"], check=True)
        self.wait_for("the second segment", lambda: "segment 2:" in self.output(), p)
        subprocess.run(["ip", "-n", m.group(1), "link", "set", m.group(2), "up"], check=True)
        second = self.latest()
        self.wait_for("the second segment's checkpoint", lambda: self.latest() > second, p)
        # Segment 2's ranks are node0's: segment 1's on node1 may still be ending (their daemon
        # notices mpirun gone only once the link is back), and they carry the marker too.
        node0 = re.search(r"two-hosts: node0 is namespace (\S+),", self.output()).group(1)
        ranks = rank_pids(marker.encode(), node0)
        self.assertEqual(sorted(ranks), [0, 1], self.output())
        os.kill(ranks[1], signal.SIGKILL)
        self.assertEqual(p.wait(timeout=300), 0, self.output())
        # No rank of any segment outlives the launch, on either host.
        deadline = time.time() + 60
        while rank_pids(marker.encode()) and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(rank_pids(marker.encode()), {}, self.output())
        text = self.output()
        print("\n".join(l for l in text.splitlines() if l.startswith("graphrun launch:")), flush=True)

        segments = re.findall(r"graphrun launch: segment (\d): (\d) workers on (.*) from step (\d+)", text)
        self.assertEqual([(s[0], s[1]) for s in segments], [("1", "4"), ("2", "2"), ("3", "4")], text)
        self.assertIn("node0 (2) from step %d; node1 did not answer" % int(segments[1][3]), text)
        self.assertGreaterEqual(int(segments[1][3]), 25)
        self.assertGreater(int(segments[2][3]), int(segments[1][3]))
        self.assertEqual(len(re.findall(r"graphrun launch: restart \d: \d+ steps? to redo \(the failed segment "
                                        r"reached step \d+\), [\d.]+ s from the failure to the restart", text)), 2, text)
        self.assertIn("graphrun launch: done after 3 segments (workers 4, 2, 4), 2 restarts", text)
        costs = re.findall(r"graphrun launch: restart (\d) cost ([\d.]+) s: ([\d.]+) s of steps redone, ([\d.]+) s "
                           r"between the segments, ([\d.]+) s of segment \d outside its steps", text)
        self.assertEqual([c[0] for c in costs], ["1", "2"], text)
        for c in costs:
            self.assertAlmostEqual(float(c[1]), sum(map(float, c[2:])), delta=0.2)

        with open(metrics) as f:
            rows = [json.loads(line) for line in f]
        seg = [r for r in rows if r["kind"] == "segment"]
        self.assertEqual([(r["workers"], r["hosts"], r["exit"] == 0) for r in seg],
                         [(4, ["node0", "node1"], False), (2, ["node0"], False), (4, ["node0", "node1"], True)])
        self.assertEqual(seg[-1]["to_step"], STEPS)
        self.assertNotIn("restart_seconds", seg[0])
        self.assertEqual([round(s["restart_seconds"], 1) for s in seg[1:]], [float(c[1]) for c in costs])
        for s in seg:
            self.assertLessEqual(s["step_seconds"], s["seconds"])
        losses = {}
        for r in rows:
            if r["kind"] == "step":
                losses[r["step"]] = r["loss"]  # a step redone: the later segment's loss
        self.assertEqual(sorted(losses), list(range(1, STEPS + 1)))

        ref = self.path("ref.jsonl")
        run(GRAPHRUN, "train", *TRAIN, "--steps", str(STEPS), "--metrics", ref)
        with open(ref) as f:
            whole = {r["step"]: r["loss"] for r in map(json.loads, f) if r["kind"] == "step"}
        worst = max(abs(losses[s] - whole[s]) / max(abs(whole[s]), 1e-3) for s in whole)
        print("elastic run against one process: largest loss difference %.2g (bound %g)" % (worst, REL), flush=True)
        self.assertLessEqual(worst, REL)


if __name__ == "__main__":
    unittest.main()
