#!/usr/bin/env python3
"""graphc simulate's predicted step against the measured one, on emulated devices or real GPUs.

For 1, 2 and 4 emulated GPUs (data parallel, mirrored), for a model-parallel plan over 4 and
for a pipeline over 4 (--pipeline S:M stages and micro-batches, default 4:8, a batch of 2 x
--per-gpu; its simulated bubble is printed beside the theory's (S-1)/(M+S-1)),
each cluster file is calibrated first (`graphrun calibrate --emulate`: a resnet18 workload,
not the model measured here), the plan is placed on it, `graphc simulate` predicts its step,
and `graphrun train --emulate` measures it (median after the first steps). Prints both and
their ratio; the issue's bar is within 20%. With --real the machine's own GPUs are calibrated
and measured (no --emulate), and --keep DIR keeps each calibrated cluster file there.

    bench/sim_check.py                         # inception_v3 75x75, 16 images per GPU
    bench/sim_check.py --model small_cnn --image-size 28
    bench/sim_check.py --calibrate-with inception_v3:75:8   # calibrate on the model's own ops
    bench/sim_check.py --real --gpus 1 --no-model-parallel --image-size 299 --per-gpu 128 \
        --keep out/    # one GPU: its calibrated file, and the 1-GPU step predicted and measured

Machines are noisy (and a loaded machine slows the calibration and the runs unequally): this
prints figures, it asserts nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def cluster(path, gpus, memory=16 << 30):
    dev = lambda name, kind: {"name": name, "kind": kind, "memory_bytes": memory, "relative_speed": 1}
    names = ["gpu:%d" % i for i in range(gpus)]
    links = [{"endpoints": ["cpu:0", g], "bandwidth": 64e9} for g in names]
    links += [{"endpoints": [a, b], "bandwidth": 450e9} for i, a in enumerate(names) for b in names[i + 1:]]
    with open(path, "w") as f:
        json.dump({"devices": [dev("cpu:0", "cpu")] + [dev(g, "gpu") for g in names], "links": links}, f)


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("%s failed:\n%s%s" % (" ".join(map(str, args)), p.stdout, p.stderr))
    return p.stdout


def measure(args, tmp, name, gpus, place_extra, batch, memory=16 << 30):
    graphc, graphrun = os.path.join(args.bin, "graphc"), os.path.join(args.bin, "graphrun")
    emulate = [] if args.real else ["--emulate"]
    c = os.path.join(args.keep or tmp, name.replace(" ", "-") + ".json")
    cluster(c, gpus, memory)
    calibration = run(graphrun, "calibrate", "--cluster", c, *emulate, *args.calibrate)
    plan = os.path.join(tmp, name + ".placed")
    run(graphc, "place", "--model", args.model, "--image-size", args.image_size,
        "--batch", batch, "--cluster", c, *place_extra, "-o", plan)
    simulated = json.loads(run(graphc, "simulate", plan, "--json"))
    predicted = simulated["step_seconds"]
    metrics = os.path.join(tmp, name + ".jsonl")
    run(graphrun, "train", plan, *emulate, "--steps", args.steps, "--no-eval",
        "--no-progress", "--metrics", metrics)
    with open(metrics) as f:
        steps = [r["seconds"] for r in map(json.loads, f) if r.get("kind") == "step"]
    measured = statistics.median(steps[args.warmup:])
    print("  %-28s %10.1f %10.1f %7.2f" % (name, predicted * 1e3, measured * 1e3, predicted / measured),
          flush=True)
    if "pipeline" in simulated:
        b = simulated["pipeline"]
        print("      bubble %.1f%% simulated, theory (S-1)/(M+S-1) %.1f%%" % (100 * b["bubble"], 100 * b["theory"]))
    for line in calibration.splitlines()[:2]:
        print("      " + line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="inception_v3")
    p.add_argument("--image-size", default="75")
    p.add_argument("--per-gpu", type=int, default=16)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--calibrate-with", default="",
                   help="graphrun calibrate's workload as MODEL:SIZE:PER_DEVICE (default: its own, "
                        "resnet18 64x64, 8 per device)")
    p.add_argument("--gpus", default="1,2,4", help="data-parallel GPU counts, comma-separated (none: \"\")")
    p.add_argument("--no-model-parallel", action="store_true", help="leave out the 4-GPU model-parallel plan")
    p.add_argument("--pipeline", default="4:8", help="the pipeline's stages:micro-batches on 4 GPUs "
                   "(none: leave it out)")
    p.add_argument("--real", action="store_true", help="the machine's own GPUs (no --emulate)")
    p.add_argument("--memory-gib", type=float, default=16, help="each GPU's memory in the cluster files")
    p.add_argument("--keep", default="", help="keep each calibrated cluster file in this folder")
    p.add_argument("--bin", default=os.path.normpath(os.path.join(HERE, "..", "build", "bin")),
                   help="the folder of graphc and graphrun")
    args = p.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    args.calibrate = []
    if args.calibrate_with:
        model, size, per = args.calibrate_with.split(":")
        args.calibrate = ["--model", model, "--image-size", size, "--per-device", per]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("%s %sx%s, %d images per GPU; calibrated with %s; %s, %d logical CPUs; load %.1f" % (
        args.model, args.image_size, args.image_size, args.per_gpu, args.calibrate_with or "resnet18:64:8",
        cpu, os.cpu_count(), os.getloadavg()[0]))
    print("  %-28s %10s %10s %7s" % ("plan", "predicted", "measured", "ratio"))
    memory = int(args.memory_gib * (1 << 30))
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in map(int, filter(None, args.gpus.split(","))):
            measure(args, tmp, "%d GPU data parallel" % gpus, gpus, ["--params", "mirrored"],
                    args.per_gpu * gpus, memory)
        if not args.no_model_parallel:
            measure(args, tmp, "4 GPU model parallel", 4, ["--strategy", "model-parallel"],
                    args.per_gpu, memory)
        if args.pipeline != "none":
            stages, micro = args.pipeline.split(":")
            measure(args, tmp, "4 GPU pipeline %sx%s" % (stages, micro), 4,
                    ["--strategy", "pipeline", "--stages", stages, "--micro-batches", micro],
                    args.per_gpu * 2, memory)


if __name__ == "__main__":
    main()
