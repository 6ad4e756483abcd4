#!/usr/bin/python3
"""Crash safety proven by kill -9 (issue 11, Deliver 6).

Trains once without interruption, then trains the same run again with
`--checkpoint DIR --checkpoint-every 1 --resume`, killing it with SIGKILL at
random moments and re-running the same command each time, until a run ends by
itself. The final checkpoint must be bit-identical to the uninterrupted run's
(every parameter, running statistic and optimizer slot).

Kills land in three ways, in turn:
  random   at a random moment of the run (mostly startup: loading,
           compiling, restoring);
  in-write the run's writes pause half-way (GRAPHC_TEST_WRITE_PAUSE_MS), and
           the kill comes once a temporary checkpoint file is there, so it
           lands inside a checkpoint write for certain;
  step     a few steps past the newest checkpoint, at a random moment of a
           step or a write.

Without arguments (CI): small_cnn (BatchNorm, dropout) with Adam and a cosine
schedule on a small synthetic set, 40 steps over 6 epochs, 10 kills, about
15 s on two cores.
The long run of docs/reliability.md:

  tests/tools/crash_test.py --model inception_v3 --image-size 75 --batch 2 \\
      --steps 60 --kills 50 --samples 16
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import gck  # noqa: E402

BIN = os.environ.get("GRAPHC_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
GRAPHRUN = os.path.join(BIN, "graphrun")


def latest(d):
    with open(os.path.join(d, "latest")) as f:
        return os.path.join(d, f.read().strip())


def temporaries(d):
    return [n for n in os.listdir(d) if ".tmp." in n or n.startswith(".write-test")] if os.path.isdir(d) else []


def writing(p, d):
    """Is `p` inside a checkpoint write (its temporary step or latest file is there)?"""
    suffix = ".tmp.%d" % p.pid
    return any(n.endswith(suffix) and n.startswith(("step-", "latest")) for n in temporaries(d))


def step_of(d):
    try:
        return int(os.path.basename(latest(d))[5:13])
    except (OSError, ValueError):
        return 0


def wait_then_kill(p, mode, d, total, rng, window):
    """Waits for the moment `mode` picks, then kills; False when the run ended first."""
    def wait_for(ready):
        while p.poll() is None and not ready():
            time.sleep(0.002)
    if mode == "random":
        time.sleep(rng.uniform(0.05, window))
    elif mode == "in-write":
        wait_for(lambda: writing(p, d))
        time.sleep(rng.uniform(0, 0.25))
    else:  # a few steps further than the newest checkpoint, between two writes or in one
        target = min(step_of(d) + rng.randint(1, 3), total - 1)
        wait_for(lambda: step_of(d) >= target)
        time.sleep(rng.uniform(0, 0.05))
    if p.poll() is not None:
        return False
    p.send_signal(signal.SIGKILL)
    p.wait()
    return True


def crash_and_resume(args, total, work, kills, rng, window):
    """Runs `args` with --resume until it ends by itself, killing it `kills` times."""
    d = os.path.join(work, "crashed")
    cmd = [GRAPHRUN, "train", *args, "--checkpoint", d, "--checkpoint-every", "1", "--resume"]
    stats = {"kills": 0, "in_write": 0, "attempts": 0, "fallbacks": 0}
    modes = ["random", "in-write", "step"]
    log = os.path.join(work, "attempt.log")
    while True:
        stats["attempts"] += 1
        mode = modes[stats["kills"] % len(modes)] if stats["kills"] < kills else None
        if mode and step_of(d) >= total - 4:
            mode = "in-write"  # few steps left: a kill inside a write always lands
        # Writes pause a little in every run (so that a small model's steps do
        # not outrun the kills), and long when a kill is to land inside one.
        env = dict(os.environ, GRAPHC_TEST_WRITE_PAUSE_MS="300" if mode == "in-write" else "10")
        with open(log, "w") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
            start = time.time()
            if mode and wait_then_kill(p, mode, d, total, rng, window):
                stats["kills"] += 1
                mid = writing(p, d)
                stats["in_write"] += mid
                print("  kill %2d (%-8s) after %5.2f s at step %d%s"
                      % (stats["kills"], mode, time.time() - start, step_of(d),
                         ", inside a checkpoint write" if mid else ""), flush=True)
                continue
            code = p.wait()
        with open(log) as f:
            text = f.read()
        stats["fallbacks"] += text.count("passing over a damaged checkpoint")
        if code != 0:
            raise AssertionError("the resumed run failed (%d):\n%s" % (code, text))
        return latest(d), stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small_cnn")
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--samples", type=int, default=100, help="synthetic samples (an epoch is samples/batch steps)")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("GRAPHC_CRASH_SEED", "0")) or None,
                    help="of the kill moments (default: random, printed)")
    opts = ap.parse_args()
    seed = opts.seed or random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    base = ["--model", opts.model, "--batch", str(opts.batch), "--seed", "11",
            "--synthetic-samples", str(opts.samples), "--optimizer", "adam", "--lr", "0.001",
            "--lr-schedule", "cosine", "--threads", "2", "--loader-threads", "2", "--no-progress"]
    if opts.image_size:
        base += ["--image-size", str(opts.image_size), "--num-classes", "10"]
    args = base + ["--steps", str(opts.steps)]
    work = tempfile.mkdtemp(prefix="graphc-crash-")
    try:
        print("crash test: %s, %d steps, %d kills, kill seed %d" % (opts.model, opts.steps, opts.kills, seed),
              flush=True)
        def timed(*extra):
            t0 = time.time()
            p = subprocess.run([GRAPHRUN, "train", *base, *extra], capture_output=True, text=True)
            if p.returncode != 0:
                raise AssertionError("the uninterrupted run failed:\n" + p.stdout + p.stderr)
            return time.time() - t0
        straight = timed("--steps", str(opts.steps), "--checkpoint", os.path.join(work, "straight"))
        first = timed("--steps", "1")  # startup and one step
        per_step = max(0.0, straight - first) / max(1, opts.steps - 1)
        # Random moments fall in the startup (loading, compiling, restoring) or
        # the first steps after it.
        window = first + 2 * per_step
        print("  uninterrupted run: %.1f s; startup and a step %.1f s; random kills within %.1f s"
              % (straight, first, window), flush=True)
        t1 = time.time()
        final, stats = crash_and_resume(args, opts.steps, work, opts.kills, rng, window)
        a, b = gck.read(latest(os.path.join(work, "straight"))), gck.read(final)
        same = a.names() == b.names() and all(x == y for x, y in zip(a.tensors, b.tensors))
        differing = [x[0] for x, y in zip(a.tensors, b.tensors) if x != y]
        left = temporaries(os.path.join(work, "crashed"))
        print("result: %d kills (%d inside a checkpoint write), %d runs, %d fallbacks to an older checkpoint, "
              "%.1f s; final checkpoint %s the uninterrupted run's (%d tensors)%s"
              % (stats["kills"], stats["in_write"], stats["attempts"], stats["fallbacks"], time.time() - t1,
                 "bit-identical to" if same else "DIFFERENT from", len(a.tensors),
                 "" if not left else "; temporary files left: %s" % left), flush=True)
        if not same:
            raise AssertionError("tensors differ: %s (kill seed %d)" % (differing[:10], seed))
        if left:
            raise AssertionError("temporary files left behind: %s" % left)
        if stats["kills"] < opts.kills or stats["in_write"] == 0:
            raise AssertionError("only %d kills (%d inside a write) of %d landed"
                                 % (stats["kills"], stats["in_write"], opts.kills))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
