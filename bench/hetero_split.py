#!/usr/bin/env python3
"""--split auto against the even split on an emulated cluster with a slower GPU.

Writes a cluster file (a host and GPUs of the given relative speeds), then
trains the same model with `graphrun train --emulate` under the even split and
under --split auto, alternating the two so that a busy machine weighs on both
alike, and prints each run's median step time (the first step, which creates
the primitives, left out) and the median over the runs.

    bench/hetero_split.py --graphrun build/bin/graphrun --speeds 1,1,0.5 \\
        --model inception_v3 --image-size 149 --batch 30 --steps 6 --rounds 3

Machines are noisy: it prints figures, it asserts nothing.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_cluster(path, speeds):
    dev = lambda name, kind, speed: {"name": name, "kind": kind, "memory_bytes": 80 << 30,
                                     "relative_speed": speed}
    gpus = ["gpu:%d" % i for i in range(len(speeds))]
    links = [{"endpoints": ["cpu:0", g], "bandwidth": 64e9} for g in gpus]
    links += [{"endpoints": [a, b], "bandwidth": 450e9} for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    with open(path, "w") as f:
        json.dump({"devices": [dev("cpu:0", "cpu", 1)] + [dev(g, "gpu", s) for g, s in zip(gpus, speeds)],
                   "links": links}, f, indent=1)


def median_step(graphrun, cluster, split, args, work):
    metrics = os.path.join(work, "m.jsonl")
    cmd = [graphrun, "train", "--model", args.model, "--image-size", str(args.image_size),
           "--batch", str(args.batch), "--steps", str(args.steps), "--cluster", cluster, "--emulate",
           "--params", args.params, "--no-eval", "--no-progress", "--metrics", metrics]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if split:
        cmd += ["--split", split]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("graphrun failed:\n" + out.stdout)
    batch_line = next((l.strip() for l in out.stdout.splitlines() if l.strip().startswith("batch")), "")
    with open(metrics) as f:
        steps = [json.loads(l) for l in f if '"kind":"step"' in l]
    return statistics.median(s["seconds"] for s in steps[1:]), batch_line


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphrun", default="build/bin/graphrun")
    p.add_argument("--speeds", default="1,1,0.5", help="the GPUs' relative speeds")
    p.add_argument("--model", default="inception_v3")
    p.add_argument("--image-size", type=int, default=149)
    p.add_argument("--batch", type=int, default=30)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--params", default="mirrored")
    p.add_argument("--threads", type=int, default=0, help="graphrun --threads (0: all cores)")
    args = p.parse_args()
    speeds = [float(s) for s in args.speeds.split(",")]
    with tempfile.TemporaryDirectory() as work:
        cluster = os.path.join(work, "cluster.json")
        write_cluster(cluster, speeds)
        times = {"even": [], "auto": []}
        lines = {}
        for r in range(args.rounds):
            for name, split in (("even", None), ("auto", "auto")):
                t, lines[name] = median_step(args.graphrun, cluster, split, args, work)
                times[name].append(t)
                print("round %d %-4s %.3f s/step" % (r + 1, name, t), flush=True)
    even, auto = statistics.median(times["even"]), statistics.median(times["auto"])
    print("%s, %d cores; %s at %d px, batch %d, GPUs at %s, --params %s" %
          (cpu_model(), os.cpu_count(), args.model, args.image_size, args.batch, args.speeds, args.params))
    for name in ("even", "auto"):
        print("  %-4s %s" % (name, lines[name]))
    for name, label in (("even", "even split  "), ("auto", "--split auto")):
        print("%s median %.3f s/step, fastest run %.3f (runs: %s)" %
              (label, statistics.median(times[name]), min(times[name]),
               ", ".join("%.3f" % t for t in times[name])))
    print("--split auto is %.1f%% lower (medians), %.1f%% lower (fastest runs)" %
          (100 * (even - auto) / even, 100 * (min(times["even"]) - min(times["auto"])) / min(times["even"])))


if __name__ == "__main__":
    main()
